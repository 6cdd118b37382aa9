"""The vectors cache (attncli.words.cache, attncli.words.load) and the `attncli vectors` commands.

Each test has its own ATTNCLI_CACHE_DIR. A cached load must give the numbers of the source,
never import gensim, notice a changed source and a damaged entry, survive a cache dir it
cannot write, and leave no temporary folder behind; two processes converting one file at
once must both succeed and leave one entry.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from attncli import load_vectors
from attncli.words import cache as cache_module
from attncli.words import entry as entry_module
from clirunner import fails, ok, one, one_warning, run, words_of
from helpers import NINE_WORDS, matrix, temporaries, write_text
from test_cache_integrity import killed_run  # one killed run for both files


pytestmark = [
    pytest.mark.usefixtures("cache"),  # each test its own vectors cache (conftest.py)
    pytest.mark.filterwarnings("error::RuntimeWarning"),
]

INFO_KEYS = {"name", "words", "dim", "cased", "subwords", "source", "format", "cache_entry", "load_seconds"}
LIST_KEYS = {"path", "name", "words", "dim", "bytes", "source", "limit", "created", "stale", "damaged"}
ENTRY_FILES = (".npy", ".words.txt", ".offsets.npy", ".order.npy", ".json")
NOTHING_CLEARED = {"removed": 0, "bytes": 0, "kept": [], "links": []}
ATTNCLI = Path(sys.executable).with_name("attncli")  # the installed entry point of this environment


# --------------------------------------------------------------------------- helpers


def folders(cache: Path) -> list[Path]:
    """Entry folders in the cache dir."""
    return sorted(p for p in cache.iterdir() if not p.name.startswith(".")) if cache.exists() else []


def check_numbers(vectors, words, M):
    assert words_of(vectors) == list(words)
    np.testing.assert_array_equal(vectors.matrix, M)
    for i, word in enumerate(words):
        assert vectors.vocab.find(word) == i


def subprocess_env(cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ATTNCLI_VECTORS", "PYTHONWARNINGS")}
    env["ATTNCLI_CACHE_DIR"] = str(cache)
    return env


def python(code: str, cache: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=subprocess_env(cache), timeout=timeout, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return proc


# --------------------------------------------------------------------------- a second load reads the entry


def test_the_first_load_writes_an_entry_the_second_reads(cache, source):
    path, M = source
    first = load_vectors(path)
    check_numbers(first, NINE_WORDS, M)
    prefix = Path(first.meta["entry"])
    assert prefix.parent.parent == cache and prefix.parent.name.startswith("v.txt-")
    for suffix in ENTRY_FILES:
        assert Path(f"{prefix}{suffix}").is_file(), suffix
    for suffix in (".npy", ".offsets.npy", ".order.npy"):
        np.load(f"{prefix}{suffix}", allow_pickle=False)  # plain arrays, no pickle
    meta = json.loads(Path(f"{prefix}.json").read_text(encoding="utf-8"))
    st = path.stat()
    assert meta["source"] == {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                              "format": "word2vec-text", "compression": None}
    assert (meta["words"], meta["dim"], meta["name"], meta["options"]["limit"]) == (len(NINE_WORDS), 4, "v.txt", None)
    np.testing.assert_array_equal(np.load(f"{prefix}.npy"), M)
    assert Path(f"{prefix}.words.txt").read_text(encoding="utf-8") == "".join(w + "\n" for w in NINE_WORDS)

    second = load_vectors(path)
    assert second.meta["entry"] == str(prefix)
    assert isinstance(second.matrix, np.memmap)  # memory-mapped from the entry, not read again
    check_numbers(second, NINE_WORDS, M)
    assert second.vocab.find("orang") is None and second.vocab.find("東") is None
    assert folders(cache) == [prefix.parent] and temporaries(cache) == []


def test_a_second_load_in_another_process_does_not_import_gensim(cache, source):
    path, M = source
    code = f"""
        import sys, json, attncli
        v = attncli.load_vectors({str(path)!r})
        print(json.dumps({{"gensim": "gensim" in sys.modules, "entry": v.meta["entry"],
                          "words": [v.vocab.word(i) for i in range(v.size)], "matrix": v.matrix.tolist()}}))
    """
    first = json.loads(python(code, cache).stdout)
    assert first["gensim"] is False  # a plain text file is read without gensim (plaintext.read_plain_text)
    second = json.loads(python(code, cache).stdout)
    assert second["gensim"] is False
    assert second["entry"] == first["entry"]
    assert second["words"] == NINE_WORDS
    np.testing.assert_array_equal(np.array(second["matrix"], dtype=np.float32), M)


def test_the_bundled_vectors_never_import_gensim(cache):
    code = """
        import io, sys, json, contextlib, attncli
        from attncli.cli import cli
        v = attncli.load_vectors()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc1 = cli.main(["vectors", "info", "--json"], standalone_mode=False)
            rc2 = cli.main(["scores", "the earth is like an orange", "--json"], standalone_mode=False)
        docs = [json.loads(line) for line in out.getvalue().splitlines()]
        print(json.dumps({"gensim": "gensim" in sys.modules, "sources": "attncli.words.sources" in sys.modules,
                          "rc": [rc1, rc2], "size": v.size, "info": docs[0], "tokens": docs[1]["tokens"]}))
    """
    got = json.loads(python(code, cache).stdout)
    assert got["gensim"] is False and got["sources"] is False
    assert got["rc"] == [0, 0] and got["size"] == 100_000
    assert got["info"]["words"] == 100_000 and got["tokens"] == ["the", "earth", "is", "like", "an", "orange"]
    assert not cache.exists()  # the bundled vectors need no cache


# --------------------------------------------------------------------------- a changed source


def test_a_changed_source_is_converted_again(cache, source):
    path, M = source
    old = load_vectors(path)
    M2 = M.copy()
    M2[[0, 5]] = -M2[[0, 5]]  # other values ...
    M2[M2 == 0] = 0  # (no "-0.0", which would change the file's size)
    write_text(path, NINE_WORDS, M2)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, old.meta["source"]["mtime_ns"] + 5_000_000_000))  # ... and another time
    new = load_vectors(path)
    check_numbers(new, NINE_WORDS, M2)
    assert new.meta["entry"] != old.meta["entry"]
    assert new.meta["source"]["mtime_ns"] == path.stat().st_mtime_ns
    listed = {e["path"]: e for e in ok(run("vectors", "list", "--json"))}
    assert listed[str(Path(old.meta["entry"]).parent)]["stale"] is True
    assert listed[str(Path(new.meta["entry"]).parent)]["stale"] is False
    check_numbers(load_vectors(path), NINE_WORDS, M2)  # and now from the new entry


def test_a_source_of_another_size_is_converted_again(cache, source):
    path, M = source
    load_vectors(path)
    M3 = matrix(len(NINE_WORDS) - 2, 4, seed=9)
    write_text(path, NINE_WORDS[:-2], M3)
    check_numbers(load_vectors(path), NINE_WORDS[:-2], M3)
    assert len(folders(cache)) == 2


# --------------------------------------------------------------------------- damaged entries


def _truncate(prefix: str, suffix: str):
    f = Path(f"{prefix}{suffix}")
    f.write_bytes(f.read_bytes()[:-8])


def _edit_words(prefix: str, suffix: str):
    f = Path(f"{prefix}{suffix}")
    st = f.stat()
    data = f.read_bytes()
    edited = data.replace(b"earth\n", b"EARTH\n")
    assert edited != data and len(edited) == len(data)
    f.write_bytes(edited)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))  # a later hand edit


def _swap_words(prefix: str, suffix: str):
    """Two words exchanged: the same bytes in another order, so the same size."""
    f = Path(f"{prefix}{suffix}")
    st = f.stat()
    data = f.read_bytes()
    edited = data.replace(b"the\nearth\n", b"earth\nthe\n")
    assert edited != data and len(edited) == len(data)
    f.write_bytes(edited)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def _remove(prefix: str, suffix: str):
    Path(f"{prefix}{suffix}").unlink()


def _garbage(prefix: str, suffix: str):
    Path(f"{prefix}{suffix}").write_text("{not json")


def _other_version(prefix: str, suffix: str):
    f = Path(f"{prefix}{suffix}")
    meta = json.loads(f.read_text())
    meta["version"] = 999
    f.write_text(json.dumps(meta))


DAMAGE = {
    "matrix truncated": (".npy", _truncate),
    "order truncated": (".order.npy", _truncate),
    "offsets removed": (".offsets.npy", _remove),
    "words edited, same size": (".words.txt", _edit_words),
    "words swapped, same size": (".words.txt", _swap_words),
    "metadata removed": (".json", _remove),
    "metadata not JSON": (".json", _garbage),
    "metadata of another version": (".json", _other_version),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_noticed_and_rebuilt(cache, source, damage):
    path, M = source
    prefix = load_vectors(path).meta["entry"]
    suffix, spoil = DAMAGE[damage]
    spoil(prefix, suffix)

    result = run("vectors", "info", "--vectors", path, "--json")
    doc = one(result, stderr=None)
    one_warning(result.stderr, "cache entry", str(path), "damaged")
    assert (doc["words"], doc["dim"], doc["cache_entry"]) == (len(NINE_WORDS), 4, prefix)

    warnings = []
    again = load_vectors(path, warn=warnings.append)
    assert warnings == []  # rebuilt whole: no second warning
    check_numbers(again, NINE_WORDS, M)
    assert again.meta["entry"] == prefix and isinstance(again.matrix, np.memmap)
    assert len(folders(cache)) == 1 and temporaries(cache) == []


# --------------------------------------------------------------------------- a cache dir that cannot be written


@pytest.fixture
def unwritable(tmp_path, monkeypatch) -> Path:
    """ATTNCLI_CACHE_DIR under a regular file: mkdir fails even for root."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    folder = blocker / "cache"
    monkeypatch.setenv("ATTNCLI_CACHE_DIR", str(folder))
    return folder


def test_an_unwritable_cache_dir_is_a_warning_and_the_run_goes_on(unwritable, source):
    path, M = source
    result = run("scores", "the earth orange", "--vectors", path, "--raw", "--scale", "1", "--json")
    doc = one(result, stderr=None)
    one_warning(result.stderr, "cannot write the vectors cache", str(unwritable), "ATTNCLI_CACHE_DIR")
    X = M[[NINE_WORDS.index(t) for t in doc["tokens"]]].astype(np.float64)
    np.testing.assert_allclose(doc["scores"], X @ X.T, rtol=1e-12)

    warnings = []
    v = load_vectors(path, warn=warnings.append)
    check_numbers(v, NINE_WORDS, M)
    assert len(warnings) == 1 and "cannot write" in warnings[0]
    assert "entry" not in v.meta

    result = run("vectors", "info", "--vectors", path, "--json")
    info = one(result, stderr=None)
    one_warning(result.stderr, "cannot write")
    assert (info["words"], info["dim"], info["cache_entry"]) == (len(NINE_WORDS), 4, None)
    assert ok(run("vectors", "list", "--json")) == []
    assert one(run("vectors", "clear", "--json")) == {**NOTHING_CLEARED, "cache_dir": str(unwritable)}
    assert not unwritable.exists()


def test_convert_fails_when_it_cannot_cache(unwritable, source):
    path, _ = source
    fails(run("vectors", "convert", str(path), "--json"), f"cannot write the vectors cache in {unwritable} (Not a "
          "directory); set ATTNCLI_CACHE_DIR to a writable directory")


def test_info_without_a_cache_still_says_the_source_format(unwritable, source):
    path, _ = source
    info = one(run("vectors", "info", "--vectors", path, "--json"), stderr=None)
    assert info["format"] == "word2vec-text"


def test_a_source_with_a_long_name_is_cached(cache, tmp_path):
    M = matrix(2, 3, seed=5)
    path = write_text(tmp_path / ("a" * 250 + ".txt"), ["cat", "dog"], M)
    warnings = []
    first = load_vectors(path, warn=warnings.append)
    check_numbers(first, ["cat", "dog"], M)
    assert warnings == []
    assert "entry" in first.meta and isinstance(load_vectors(path).matrix, np.memmap)


# --------------------------------------------------------------------------- no temporary folder left


def test_no_temporary_folder_after_a_successful_conversion(cache, source):
    path, _ = source
    one(run("vectors", "convert", path, "--json"))
    assert len(folders(cache)) == 1 and temporaries(cache) == []


def test_no_temporary_folder_or_entry_after_a_failed_conversion(cache, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("3 2\ncat 1 0\ndog 0 1\nbird 1 x\n")
    fails(run("vectors", "convert", bad), str(bad), "line 4")
    assert folders(cache) == [] and temporaries(cache) == []


def test_no_temporary_folder_when_writing_the_entry_fails(cache, source, monkeypatch):
    path, M = source
    real = cache_module.write_entry

    def half_then_disk_full(prefix, vectors, meta, **kw):
        np.save(f"{prefix}.npy", np.asarray(vectors.matrix))  # some files written ...
        raise OSError(errno.ENOSPC, "No space left on device")  # ... then the disk is full

    monkeypatch.setattr(cache_module, "write_entry", half_then_disk_full)
    result = run("vectors", "info", "--vectors", path, "--json")
    info = one(result, stderr=None)
    one_warning(result.stderr, "cannot write the vectors cache", "No space left on device")
    assert info["words"] == len(NINE_WORDS) and info["cache_entry"] is None
    assert folders(cache) == [] and temporaries(cache) == []

    def interrupted(prefix, vectors, meta, **kw):
        real(prefix, vectors, meta, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(cache_module, "write_entry", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_vectors(path)
    assert folders(cache) == [] and temporaries(cache) == []

    monkeypatch.setattr(cache_module, "write_entry", real)
    check_numbers(load_vectors(path), NINE_WORDS, M)
    assert len(folders(cache)) == 1 and temporaries(cache) == []


# --------------------------------------------------------------------------- two processes at once


@pytest.fixture
def big_source(tmp_path):
    n, d = 80_000, 50  # about a second to convert: two processes started together overlap even on a busy machine
    M = matrix(n, d, seed=3)
    path = tmp_path / "big.txt"
    with path.open("w", encoding="utf-8") as f:
        f.write(f"{n} {d}\n")
        for i, row in enumerate(M.tolist()):
            f.write(f"w{i} " + " ".join(map(repr, row)) + "\n")
    return path, M


def test_two_processes_converting_one_file_both_succeed_and_leave_one_entry(cache, big_source):
    path, M = big_source
    assert ATTNCLI.exists(), ATTNCLI
    env = subprocess_env(cache)
    procs = [subprocess.Popen([str(ATTNCLI), "vectors", "convert", str(path), "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL) for _ in range(2)]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert err == ""
        outputs.append(json.loads(out))
    a, b = outputs
    # both read the file (a cached load takes a hundredth of a second): they did race
    assert a["load_seconds"] > 0.1 and b["load_seconds"] > 0.1, (a["load_seconds"], b["load_seconds"])
    assert a["cache_entry"] == b["cache_entry"] is not None
    for doc in outputs:
        assert (doc["words"], doc["dim"], doc["format"]) == (80_000, 50, "word2vec-text")
    assert [p.name for p in folders(cache)] == [Path(a["cache_entry"]).parent.name]
    assert temporaries(cache) == []
    v = load_vectors(path)
    assert v.meta["entry"] == a["cache_entry"]
    np.testing.assert_array_equal(v.matrix, M)
    assert v.vocab.find("w0") == 0 and v.vocab.find("w79999") == 79_999 and v.vocab.find("w80000") is None


# --------------------------------------------------------------------------- the vectors commands


def test_vectors_info_bundled(cache):
    doc = one(run("vectors", "info", "--json"))
    assert set(doc) == INFO_KEYS
    assert (doc["words"], doc["dim"], doc["cased"], doc["subwords"]) == (100_000, 50, False, False)
    assert doc["name"] == entry_module.BUNDLED and doc["source"] == "bundled" and doc["format"] == "attncli-vectors"
    assert doc["cache_entry"] == str(entry_module.bundled_prefix())
    assert isinstance(doc["load_seconds"], float) and 0 <= doc["load_seconds"] < 10
    assert not cache.exists()


def test_vectors_info_and_convert_of_a_file(cache, source):
    path, M = source
    first = one(run("vectors", "convert", path, "--json"))
    assert set(first) == INFO_KEYS
    assert (first["name"], first["words"], first["dim"], first["cased"], first["subwords"], first["format"]) == \
        ("v.txt", len(NINE_WORDS), 4, False, False, "word2vec-text")
    prefix = first["cache_entry"]
    assert Path(prefix + ".npy").is_file()
    np.testing.assert_array_equal(np.load(prefix + ".npy"), M)
    npy_mtime = Path(prefix + ".npy").stat().st_mtime_ns

    again = one(run("vectors", "convert", path, "--json"))  # an entry already there is kept
    assert again["cache_entry"] == prefix and again["format"] == "word2vec-text"
    assert Path(prefix + ".npy").stat().st_mtime_ns == npy_mtime
    info = one(run("vectors", "info", "--vectors", path, "--json"))
    assert {k: info[k] for k in INFO_KEYS - {"load_seconds"}} == {k: first[k] for k in INFO_KEYS - {"load_seconds"}}
    assert len(folders(cache)) == 1

    limited = one(run("vectors", "convert", path, "--limit", "3", "--json"))
    assert limited["words"] == 3 and limited["cache_entry"] != prefix
    assert len(folders(cache)) == 2

    fails(run("vectors", "convert"), "SOURCE", code=2)
    fails(run("vectors", "convert", path.with_name("nope.txt")), "nope.txt", "no such file")


def test_vectors_list(cache, source, tmp_path):
    path, M = source
    assert run("vectors", "list", "--json").stdout == ""  # no entries: no lines
    other = write_text(tmp_path / "other.txt", ["cat", "dog"], matrix(2, 3, seed=4))
    load_vectors(path)
    load_vectors(path, limit=2)
    load_vectors(other)

    docs = ok(run("vectors", "list", "--json"))
    assert len(docs) == 3
    for doc in docs:
        assert set(doc) == LIST_KEYS
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["created"])
        folder = Path(doc["path"])
        assert folder.parent == cache
        assert doc["bytes"] == sum(f.stat().st_size for f in folder.iterdir())
        assert doc["stale"] is False
    by = {(d["name"], d["limit"]): d for d in docs}
    assert set(by) == {("v.txt", None), ("v.txt", 2), ("other.txt", None)}
    assert (by["v.txt", None]["words"], by["v.txt", None]["dim"]) == (len(NINE_WORDS), 4)
    assert (by["v.txt", 2]["words"], by["other.txt", None]["words"], by["other.txt", None]["dim"]) == (2, 2, 3)
    assert by["v.txt", None]["source"] == str(path.resolve()) and by["other.txt", None]["source"] == str(other.resolve())

    table = run("vectors", "list", "--format", "table")
    assert table.exit_code == 0 and "v.txt" in table.stdout and "other.txt" in table.stdout

    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 3_000_000_000))  # the source changes
    other.unlink()  # the source goes
    stale = {(d["name"], d["limit"]): d["stale"] for d in ok(run("vectors", "list", "--json"))}
    assert stale == {("v.txt", None): True, ("v.txt", 2): True, ("other.txt", None): True}


def test_vectors_list_json_with_a_picture_writes_both(cache, source, tmp_path):
    import shutil
    import tempfile

    # a short path, so that the picture's name column holds it on one line however deep pytest's folders are
    with tempfile.TemporaryDirectory(prefix="a") as short:
        path = Path(short) / "v.txt"
        shutil.copy(source[0], path)
        load_vectors(path)
        [doc] = ok(run("vectors", "list", "--json", "--svg", tmp_path / "p.svg"))
    assert doc["name"] == "v.txt" and "v.txt" in (tmp_path / "p.svg").read_text()


def test_vectors_clear(cache, source, tmp_path):
    path, _ = source
    assert one(run("vectors", "clear", "--json")) == {**NOTHING_CLEARED, "cache_dir": str(cache)}
    other = write_text(tmp_path / "other.txt", ["cat", "dog"], matrix(2, 3, seed=4))
    leftover = killed_run(cache, other)  # what a killed run leaves: attncli's marker and a file
    leftover_bytes = sum(f.stat().st_size for f in leftover.iterdir())
    assert sorted(p.name for p in leftover.iterdir()) == [".attncli-entry", "vectors.npy"]
    load_vectors(path)
    load_vectors(path, limit=3)
    listed = ok(run("vectors", "list", "--json"))
    total = sum(d["bytes"] for d in listed)
    lookalike = cache / ".tmp-killed"  # named like a temporary folder, but not attncli's: kept
    lookalike.mkdir()
    (lookalike / "vectors.npy").write_bytes(b"x" * 100)
    unrelated = cache / "notes"  # not an entry: kept
    unrelated.mkdir()
    (unrelated / "keep.txt").write_text("mine\n")

    doc = one(run("vectors", "clear", "--json"))
    assert doc == {**NOTHING_CLEARED, "removed": 2, "bytes": total + leftover_bytes, "cache_dir": str(cache)}
    assert sorted(p.name for p in cache.iterdir()) == [".tmp-killed", "notes"]
    assert (unrelated / "keep.txt").read_text() == "mine\n"
    assert (lookalike / "vectors.npy").read_bytes() == b"x" * 100
    assert run("vectors", "list", "--json").stdout == ""
    assert one(run("vectors", "clear", "--json"))["removed"] == 0
    assert load_vectors(path).size == len(NINE_WORDS)  # converted again after a clear
    assert len(folders(cache)) == 2  # the new entry and "notes"


def test_vectors_list_and_clear_without_a_cache_dir(cache):
    assert not cache.exists()
    assert run("vectors", "list", "--json").stdout == ""
    assert one(run("vectors", "clear", "--json")) == {**NOTHING_CLEARED, "cache_dir": str(cache)}
    assert not cache.exists()
