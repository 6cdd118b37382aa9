"""The cache keeps to what is attncli's, notices what changed, and tells damage from a machine
that cannot read.

1. clear (and every removal of an entry or a temporary folder) touches only folders attncli
   marked, only the file names it writes, never follows a link, spares a temporary folder
   a run is writing now (its lock held) and removes one a killed run left;
2. an entry edited with its sizes and times kept is noticed by its checksums, converted
   again, and gives the numbers of a fresh load; every array is range-checked, the bundled
   entry's too;
3. every entry file is read only if it is a regular file (a FIFO never hangs a run), the
   metadata with a size cap, and metadata of any wrong shape is damage;
4. `vectors list` lists a damaged entry as damaged;
5. too few file descriptors: a good entry is kept (same inode, same time) and used later,
   a failed write leaves nothing;
6. no home directory: no cache, a warning, one-line errors; never a folder named ~;
7. a path too long for the system is a one-line error.

Where the environment matters (HOME, the uid, ulimit -n, FIFOs) the installed entry point
runs as a subprocess, with a timeout so that a hang fails the test.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import pwd
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from attncli import load_vectors
from attncli.errors import VectorsError
from attncli.words import cache as cache_module
from attncli.words import entry as entry_module
from clirunner import fails, ok, one, one_warning, run, words_of
from helpers import NINE_WORDS, matrix, temporaries, write_text

pytestmark = [pytest.mark.usefixtures("cache"), pytest.mark.filterwarnings("error::RuntimeWarning")]

ATTNCLI = Path(sys.executable).with_name("attncli")  # the installed entry point of this environment
OWN = ["vectors.npy", "vectors.words.txt", "vectors.offsets.npy", "vectors.order.npy", "vectors.json",
       ".attncli-entry"]
LIST_KEYS = {"path", "name", "words", "dim", "bytes", "source", "limit", "created", "stale", "damaged"}
NOBODY = 54321  # a uid with no passwd entry


# --------------------------------------------------------------------------- helpers


def entry_of(path: Path, **kw) -> Path:
    """The entry folder of `path`, converted now."""
    return Path(load_vectors(path, **kw).meta["entry"]).parent


def same_as_fresh(vectors, path: Path) -> None:
    fresh = load_vectors(path, use_cache=False)
    assert words_of(vectors) == words_of(fresh)
    np.testing.assert_array_equal(np.asarray(vectors.matrix), fresh.matrix)
    for i, word in enumerate(words_of(fresh)):
        assert vectors.vocab.find(word) == i


def tree(root: Path) -> dict[str, bytes | str]:
    """Every path under root (links not followed): file contents, link targets, "dir"."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


def keep_times(path: Path, edit) -> None:
    """Apply `edit`, then give the file its old modification time back."""
    st = os.stat(path)
    edit()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def env_for(cache: Path | None, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ATTNCLI_VECTORS", "PYTHONWARNINGS")}
    if cache is not None:
        env["ATTNCLI_CACHE_DIR"] = str(cache)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def attncli(*args, env: dict, timeout: float = 60, preexec_fn=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(ATTNCLI), *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout,
                          preexec_fn=preexec_fn, cwd=cwd, stdin=subprocess.DEVNULL)


def one_error(proc: subprocess.CompletedProcess, *words: str) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: error: "), proc.stderr
    for word in words:
        assert word.lower() in lines[0].lower(), (word, lines[0])
    return lines[0]


def killed_run(cache: Path, path: Path) -> Path:
    """The temporary folder of a conversion of `path` that ended half way (os._exit, the
    matrix written): its lock let go, as a kill lets it go."""
    code = f"""
        import os, numpy as np, attncli
        from attncli.words import cache
        def killed(prefix, vectors, meta, **kw):
            np.save(f"{{prefix}}.npy", np.asarray(vectors.matrix))
            os._exit(9)
        cache.write_entry = killed
        attncli.load_vectors({str(path)!r})
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env_for(cache), timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 9, proc.stderr
    [leftover] = temporaries(cache)
    return leftover


def age(folder: Path, hours: float) -> None:
    """Give a folder and its files the modification time of `hours` ago."""
    then = time.time() - hours * 3600
    for p in [*folder.iterdir(), folder]:
        os.utime(p, (then, then), follow_symlinks=False)


# --------------------------------------------------------------------------- 1. only what attncli made


def users_things(root: Path, outside: Path) -> None:
    """What a user's folder holds, ATTNCLI_CACHE_DIR pointed at it by mistake."""
    (root / "myproject").mkdir(parents=True)
    (root / "myproject" / "thesis.tex").write_text("\\documentclass{article}\n")
    (root / ".tmp-notes").mkdir()
    (root / ".tmp-notes" / "todo.txt").write_text("write chapter 3\n")
    (root / ".tmp-empty").mkdir()  # named like a temporary folder, empty: still not attncli's
    (root / "notes.txt").write_text("mine\n")
    lookalike = root / "v.txt-0123456789abcdef0123"  # named like an entry, generic file names inside
    lookalike.mkdir()
    (lookalike / "vectors.json").write_text('{"format": "attncli-vectors", "version": 2}\n')
    (lookalike / "vectors.npy").write_bytes(b"not attncli's")
    forged = root / "forged"  # a marker that names another folder proves nothing
    forged.mkdir()
    (forged / ".attncli-entry").write_text(json.dumps({"made_by": "attncli", "kind": "cache-entry",
                                                        "folder": "elsewhere", "temporary": ".tmp-x"}))
    (forged / "vectors.npy").write_bytes(b"data")
    (outside / "precious").mkdir(parents=True)
    (outside / "precious" / "vectors.npy").write_bytes(b"precious data")
    (root / "link-to-precious").symlink_to(outside / "precious")
    (root / "link-to-file").symlink_to(outside / "precious" / "vectors.npy")


def test_clear_in_a_users_folder_removes_only_attncli_entries(cache, source, tmp_path):
    path, _ = source
    outside = tmp_path / "outside"
    users_things(cache, outside)
    before, outside_before = tree(cache), tree(outside)
    entries = [entry_of(path), entry_of(path, limit=3)]
    sizes = sum(sum(f.stat().st_size for f in e.iterdir()) for e in entries)
    assert sorted(p.name for p in entries[0].iterdir()) == sorted(OWN)

    result = run("vectors", "clear", "--json")
    doc = one(result)
    assert doc == {"removed": 2, "bytes": sizes, "cache_dir": str(cache), "kept": [], "links": []}
    assert tree(cache) == before  # every file of the user's, as it was
    assert tree(outside) == outside_before
    assert not any(e.exists() for e in entries)
    assert one(run("vectors", "clear", "--json"))["removed"] == 0 and tree(cache) == before
    assert run("vectors", "list", "--json").stdout == ""  # none of the user's folders is an entry


def test_clear_leaves_what_was_added_to_an_entry_and_says_so(cache, source):
    path, _ = source
    entry = entry_of(path)
    (entry / "mynote.txt").write_text("keep me\n")
    (entry / "sub").mkdir()
    (entry / "sub" / "vectors.npy").write_bytes(b"also mine")
    (entry / "vectors.npy.bak").write_bytes(b"mine too")

    result = run("vectors", "clear", "--json")
    doc = one(result, stderr=None)
    one_warning(result.stderr, str(entry), "left as it is", "mynote.txt", "sub", "vectors.npy.bak")
    assert doc["removed"] == 1
    assert doc["kept"] == [{"path": str(entry), "reason": "holds files attncli did not write: "
                                                          "mynote.txt, sub, vectors.npy.bak"}]
    assert sorted(p.name for p in entry.iterdir()) == ["mynote.txt", "sub", "vectors.npy.bak"]
    assert (entry / "sub" / "vectors.npy").read_bytes() == b"also mine"
    # the folder is no entry now, and in the way of its source's entry: a warning, never a removal
    warnings = []
    v = load_vectors(path, warn=warnings.append)
    assert len(warnings) == 1 and "left as it is" in warnings[0] and "without the vectors cache" in warnings[0]
    same_as_fresh(v, path)
    assert sorted(p.name for p in entry.iterdir()) == ["mynote.txt", "sub", "vectors.npy.bak"]


def test_a_link_in_place_of_an_entry_is_unlinked_never_followed(cache, source, tmp_path):
    path, _ = source
    entry = entry_of(path)
    moved = tmp_path / "moved-entry"
    shutil.move(entry, moved)
    (moved / "mine.txt").write_text("mine\n")
    entry.symlink_to(moved)
    kept = tree(moved)

    result = run("vectors", "clear", "--json")
    doc = one(result, stderr=None)
    one_warning(result.stderr, str(entry), "symbolic link", str(moved))
    assert doc["links"] == [{"path": str(entry), "target": str(moved)}] and doc["removed"] == 0
    assert not os.path.lexists(entry) and tree(moved) == kept

    # a load finding a link where its entry goes: the link goes, the target stays, a new entry comes
    entry.symlink_to(moved)
    warnings = []
    v = load_vectors(path, warn=warnings.append)
    assert len(warnings) == 1 and "symbolic link" in warnings[0] and "converting it again" in warnings[0]
    same_as_fresh(v, path)
    assert entry.is_dir() and not entry.is_symlink() and tree(moved) == kept


def test_a_damaged_entry_is_removed_only_as_far_as_attncli_wrote_it(cache, source):
    path, _ = source
    entry = entry_of(path)
    (entry / "vectors.order.npy").unlink()  # damage
    (entry / "notes.txt").write_text("mine\n")  # and a file of the user's
    result = run("vectors", "info", "--vectors", path, "--json")
    doc = one(result, stderr=None)
    one_warning(result.stderr, "damaged", "left as it is", "notes.txt", "without the vectors cache")
    assert doc["words"] == len(NINE_WORDS) and doc["cache_entry"] is None
    assert sorted(p.name for p in entry.iterdir()) == ["notes.txt"]
    assert (entry / "notes.txt").read_text() == "mine\n" and temporaries(cache) == []


def test_a_folder_without_the_marker_is_never_removed(cache, source):
    path, _ = source
    entry = entry_of(path)
    (entry / ".attncli-entry").unlink()  # all of an entry's files but the proof attncli made them
    before = tree(entry)
    for _ in range(2):
        warnings = []
        v = load_vectors(path, warn=warnings.append)
        same_as_fresh(v, path)
        assert len(warnings) == 1 and "no .attncli-entry marker" in warnings[0] and "left as it is" in warnings[0]
        assert "entry" not in v.meta and tree(entry) == before
    assert one(run("vectors", "clear", "--json"))["removed"] == 0 and tree(entry) == before
    assert run("vectors", "list", "--json").stdout == ""


@pytest.mark.parametrize("marker", [
    "not json", "[]", '"attncli"', '{"made_by": "someone", "kind": "cache-entry", "folder": "NAME"}',
    '{"made_by": "attncli", "kind": "cache-entry", "folder": "other"}', "[" * 50000,
])
def test_a_marker_attncli_did_not_write_proves_nothing(cache, source, marker):
    path, _ = source
    entry = entry_of(path)
    (entry / ".attncli-entry").write_text(marker.replace("NAME", entry.name))
    before = tree(entry)
    assert run("vectors", "list", "--json").stdout == ""
    assert one(run("vectors", "clear", "--json"))["removed"] == 0
    assert tree(entry) == before


def test_a_temporary_folder_whose_writer_ended_is_removed_however_young(cache, source):
    path, _ = source
    left = killed_run(cache, path)
    marker = json.loads((left / ".attncli-entry").read_text())
    assert marker["lock"] == "flock" and marker["temporary"] == left.name and isinstance(marker["pid"], int)
    assert sorted(p.name for p in left.iterdir()) == [".attncli-entry", "vectors.npy"]
    size = sum(p.stat().st_size for p in left.iterdir())
    doc = one(run("vectors", "clear", "--json"))  # a second old: its lock is free, so its run has ended
    assert doc == {"removed": 0, "bytes": size, "cache_dir": str(cache), "kept": [], "links": []}
    assert temporaries(cache) == []


def test_a_temporary_folder_being_written_is_kept(cache, source):
    path, _ = source
    folder = cache_module.entry_dir(path, path.stat(), {"limit": None, "unicode_errors": "replace"})
    cache.mkdir()
    temporary, fd = cache_module._temporary(cache, folder.name)  # as a conversion holds it while it writes
    try:
        (temporary / "vectors.npy").write_bytes(b"half")
        age(temporary, hours=5)  # its age says nothing: the lock does
        result = run("vectors", "clear", "--json")
        doc = one(result, stderr=None)
        reason = f"attncli (process {os.getpid()}) is writing it now"
        one_warning(result.stderr, str(temporary), reason)
        assert doc["kept"] == [{"path": str(temporary), "reason": reason}]
        assert doc["bytes"] == 0 and sorted(p.name for p in temporary.iterdir()) == [".attncli-entry", "vectors.npy"]
        load_vectors(path)  # a conversion of the same source leaves it alone too
        assert temporaries(cache) == [temporary]
    finally:
        os.close(fd)
    assert one(run("vectors", "clear", "--json"))["removed"] == 1 and temporaries(cache) == []


# A conversion killed after each step of its writing, one child process a step (forked, so
# that the imports are paid once): the step's number among the calls the cache makes to the
# system from the making of its temporary folder on, after which the child sends itself the signal
KILLED_AT_EACH_STEP = """
    import fcntl, json, os, signal, sys
    from pathlib import Path
    from attncli.system import ending
    from attncli.words import cache, entry
    from attncli.words.load import load_vectors

    source, sig, user = sys.argv[1], getattr(signal, sys.argv[2]), Path(sys.argv[3])
    root = cache.cache_dir()
    state = {"on": False, "calls": 0, "at": 0}

    def counted(call):
        def step(*args, **kwargs):
            result = call(*args, **kwargs)
            if state["on"]:
                state["calls"] += 1
                if state["calls"] == state["at"]:
                    os.kill(os.getpid(), sig)
            return result
        return step

    for name in ("open", "close", "mkdir", "rmdir", "link", "unlink", "rename", "ftruncate", "pwrite", "write"):
        setattr(os, name, counted(getattr(os, name)))
    fcntl.flock = counted(fcntl.flock)
    entry._write_file = counted(entry._write_file)  # each file of the entry
    temporary = cache._temporary

    def counting(*args, **kwargs):  # from the temporary folder's making on
        state["on"] = True
        return temporary(*args, **kwargs)

    cache._temporary = counting

    def left() -> list[str]:
        return sorted(n for n in os.listdir(root) if n.startswith(".tmp-") and n not in user_names)

    os.makedirs(root)
    (root / ".tmp-notes").mkdir()  # a user's things, named like attncli's temporary folders
    (root / ".tmp-notes" / "vectors.npy").write_bytes(b"mine")
    (root / ".tmp-empty").mkdir()
    user_names = {".tmp-notes", ".tmp-empty"}
    at = 0
    while True:
        at += 1
        child = os.fork()
        if child == 0:
            for signum in ending.SIGNALS:  # as the command has them: a Ctrl-C raises where the run is
                signal.signal(signum, ending._stop)
            state["at"] = at
            try:
                load_vectors(source)
            except BaseException:
                os._exit(1)
            os._exit(0 if state["calls"] < at else 2)  # 0: the store ended before step `at`
        _, status = os.waitpid(child, 0)
        own = left()  # what the child left of itself
        cleared = cache.clear()
        print(json.dumps({"at": at, "status": status, "left_by_run": own, "left_by_clear": left(),
                          "kept": cleared["kept"], "removed": cleared["removed"],
                          "user": sorted(p.name for p in (root / ".tmp-notes").iterdir())}), flush=True)
        if status == 0 or at == 100:
            break
"""


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT", "SIGTERM"])
def test_a_conversion_killed_after_any_step_leaves_what_clear_removes(cache, source, tmp_path, sig):
    """A conversion killed after each step of its writing in turn (its marker made, locked
    and written, linked beside the folder to be, the folder made, the marker linked into it,
    each file written, the folder renamed into place), and clear at once: no temporary folder
    or journal of its is left, ever, and a user's folders named like them are kept. Killed by
    SIGINT or SIGTERM, the run removes its own before it ends. When the folder was made
    before its marker, a SIGKILL after any of the first three steps (the folder made, its
    marker opened, locked) and a SIGINT or SIGTERM after the first left a folder whose marker
    was missing or empty, which clear could not prove attncli's, and kept."""
    path, _ = source
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(KILLED_AT_EACH_STEP), str(path), sig, str(tmp_path)],
                          capture_output=True, text=True, env=env_for(cache), timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    steps = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(steps) > 8 and steps[-1]["status"] == 0  # every step, then a run let through to its end
    killed = os.WTERMSIG if sig == "SIGKILL" else os.WEXITSTATUS
    for step in steps[:-1]:
        assert killed(step["status"]) == (signal.SIGKILL if sig == "SIGKILL" else 1), step
        assert step["left_by_clear"] == [] and step["kept"] == [], step
        assert step["user"] == ["vectors.npy"], step
        if sig != "SIGKILL":
            assert step["left_by_run"] == [], step  # the run removed its own as it ended
    assert steps[-1]["removed"] == 1 and steps[-1]["left_by_clear"] == []


def test_a_temporary_folder_without_a_lock_is_judged_by_its_age(cache, source):
    path, _ = source
    young = killed_run(cache, path)
    marker = young / ".attncli-entry"
    doc = json.loads(marker.read_text())
    del doc["lock"]  # as attncli wrote it before it locked its markers, or where locks are not supported
    marker.write_text(json.dumps(doc))
    age(young, hours=0.2)
    result = run("vectors", "clear", "--json")
    doc = one(result, stderr=None)
    one_warning(result.stderr, str(young), "may still be writing it (written 12 min ago")
    assert doc["removed"] == 0 and doc["bytes"] == 0
    assert [k["path"] for k in doc["kept"]] == [str(young)] and young.exists()

    size = sum(p.stat().st_size for p in young.iterdir())
    age(young, hours=2)
    doc = one(run("vectors", "clear", "--json"))
    assert doc == {"removed": 0, "bytes": size, "cache_dir": str(cache), "kept": [], "links": []}
    assert not young.exists()


def test_a_later_conversion_removes_what_a_killed_one_left(cache, source, tmp_path):
    path, _ = source
    left = killed_run(cache, path)
    other = write_text(tmp_path / "other.txt", ["cat", "dog"], matrix(2, 3, seed=4))
    load_vectors(other)  # another source's conversion leaves it to a clear
    assert temporaries(cache) == [left]
    same_as_fresh(load_vectors(path), path)
    assert temporaries(cache) == [] and len(list(cache.iterdir())) == 2


BIG = (200_000, 100)  # words x d of big_binary


def big_rows(start: int, stop: int) -> np.ndarray:
    """Rows start..stop of big_binary's matrix: values k/64, a pattern made a block at a
    time, so that the test process never holds all of it (a child's peak RSS starts from
    its parent's, which the RSS bounds of other tests would count)."""
    i = np.arange(start, stop)[:, None]
    return (((i * 7 + np.arange(BIG[1]) * 13) % 512 - 256) / 64).astype(np.float32)


@pytest.fixture(scope="module")
def big_binary(tmp_path_factory) -> Path:
    """A word2vec binary file of 200,000 words x 100 (80 MB): its conversion takes seconds,
    writing its entry a few tenths of one."""
    n, d = BIG
    path = tmp_path_factory.mktemp("big") / "big.bin"
    with path.open("wb") as f:
        f.write(f"{n} {d}\n".encode())
        for start in range(0, n, 10_000):
            block = big_rows(start, start + 10_000)
            f.write(b"".join(f"w{start + k} ".encode() + row.tobytes() + b"\n" for k, row in enumerate(block)))
    return path


def stopped(pid: int) -> None:
    """Until process `pid` has stopped (a signal sent is not yet a signal taken: a write
    under way ends first)."""
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] not in "tT":
        assert time.monotonic() < deadline, f"process {pid} never stopped"
        time.sleep(0.001)


def caught_writing(cache: Path, *args) -> tuple[subprocess.Popen, Path]:
    """`attncli vectors convert ARGS` in a process of its own, stopped (SIGSTOP) while it
    writes its entry, its matrix begun: (the process, its temporary folder)."""
    for _ in range(5):
        proc = subprocess.Popen([str(ATTNCLI), "vectors", "convert", *map(str, args), "--json"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env_for(cache), stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            for folder in temporaries(cache):
                try:
                    ours = json.loads((folder / ".attncli-entry").read_text())["pid"] == proc.pid
                except (OSError, ValueError, KeyError):
                    continue  # not there yet, half written, or another's
                if ours and (folder / "vectors.npy").exists() and not (folder / "vectors.json").exists():
                    proc.send_signal(signal.SIGSTOP)
                    stopped(proc.pid)
                    if folder.exists() and not (folder / "vectors.json").exists():
                        return proc, folder
                    proc.send_signal(signal.SIGCONT)  # stopped too late: it was placing the folder
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        cache_module.remove_entry(Path(json.loads(out)["cache_entry"]).parent)  # it finished first: again
    pytest.fail("no conversion was caught while it wrote its entry")


def test_a_conversion_killed_mid_write_is_cleared_and_a_live_one_kept(cache, source, big_binary, tmp_path):
    killed, left = caught_writing(cache, big_binary, "--limit", 150_000)
    killed.kill()  # SIGKILL, as the OOM killer sends it: no handler runs, nothing is removed
    killed.communicate(timeout=30)
    assert killed.returncode == -signal.SIGKILL
    assert (left / ".attncli-entry").is_file() and (left / "vectors.npy").is_file()
    live, writing = caught_writing(cache, big_binary)
    try:
        users_things(cache, tmp_path / "outside")
        forged = cache / ".tmp-forged"  # a marker copied from another temporary folder proves nothing here
        forged.mkdir()
        shutil.copyfile(writing / ".attncli-entry", forged / ".attncli-entry")
        users = {name: value for name, value in tree(cache).items() if not name.startswith((left.name, writing.name))}
        writing_before = tree(writing)

        path, _ = source
        assert run("vectors", "list", "--json").stdout == ""  # neither folder is an entry
        table = run("vectors", "list", "--format", "table")
        assert table.exit_code == 0 and table.stdout == f"no cache entries in {cache}\n"
        info = one(run("vectors", "info", "--vectors", path, "--json"))
        assert info["words"] == len(NINE_WORDS) and Path(info["cache_entry"]).parent.parent == cache

        proc = attncli("vectors", "clear", "--yes", "--json", env=env_for(cache))
        assert proc.returncode == 0, proc.stderr
        reason = f"attncli (process {live.pid}) is writing it now"
        assert proc.stderr == f"attncli: warning: {writing}: left as it is: {reason}\n"
        doc = json.loads(proc.stdout)
        assert doc["removed"] == 1 and doc["kept"] == [{"path": str(writing), "reason": reason}]
        assert not left.exists()
        assert tree(writing) == writing_before
        assert {n: v for n, v in tree(cache).items() if not n.startswith(writing.name)} == users
    finally:
        live.send_signal(signal.SIGCONT)
        out, err = live.communicate(timeout=120)
    assert live.returncode == 0 and err == ""
    entry = Path(json.loads(out)["cache_entry"])
    assert entry.parent.parent == cache and not writing.exists()
    v = load_vectors(big_binary)
    assert v.meta["entry"] == str(entry) and v.size == 200_000
    np.testing.assert_array_equal(v.matrix[-3:], big_rows(199_997, 200_000))


def test_an_entry_of_format_1_is_cleared_by_its_digest(cache, source, tmp_path):
    path, M = source
    st = path.stat()
    options = {"limit": None, "unicode_errors": "replace"}
    real = str(path.resolve())
    name = cache_module._entry_name(path.name, real, st.st_size, st.st_mtime_ns, options, 1)
    old = cache / name  # as attncli 0.2.0 wrote it: no marker, format 1
    old.mkdir(parents=True)
    v = load_vectors(path, use_cache=False)
    entry_module.write_entry(old / "vectors", v, {"source": {"path": real, "size": st.st_size,
                                                              "mtime_ns": st.st_mtime_ns}, "options": options})
    assert json.loads((old / "vectors.json").read_text())["version"] == 1
    fake = cache / "v.txt-00000000000000000000"  # the same metadata under a name that is not its digest
    shutil.copytree(old, fake)
    doc = one(run("vectors", "clear", "--json"))
    assert doc["removed"] == 1 and not old.exists() and fake.exists()


# --------------------------------------------------------------------------- 2. edits that keep size and time


def replace_same_size(f: Path, old: bytes, new: bytes) -> None:
    """An edit by hand that keeps the file's size and modification time."""
    data = f.read_bytes()
    edited = data.replace(old, new, 1)
    assert edited != data and len(edited) == len(data)
    keep_times(f, lambda: f.write_bytes(edited))


def swap_two_words(entry: Path):
    replace_same_size(entry / "vectors.words.txt", b"the\nearth\n", b"earth\nthe\n")


def swap_last_two_words(entry: Path):
    replace_same_size(entry / "vectors.words.txt", "café\n東京\n".encode(), "東京\ncafé\n".encode())


def edit_order(entry: Path):
    f = entry / "vectors.order.npy"
    a = np.load(f)
    a[[0, 1]] = a[[1, 0]]
    keep_times(f, lambda: np.save(f, a))


def order_out_of_range(entry: Path):
    f = entry / "vectors.order.npy"
    a = np.load(f)
    a[3] = 10**12
    keep_times(f, lambda: np.save(f, a))


def edit_offsets(entry: Path):
    f = entry / "vectors.offsets.npy"
    a = np.load(f)
    a[2] += 1
    keep_times(f, lambda: np.save(f, a))


def another_dimension(entry: Path):
    """vectors.npy replaced by a matrix of another dimension, the metadata edited to match."""
    f, m = entry / "vectors.npy", entry / "vectors.json"
    np.save(f, np.zeros((len(NINE_WORDS), 2), np.float32))
    meta = json.loads(m.read_text())
    meta["dim"] = 2
    meta["files"][".npy"] = f.stat().st_size
    meta["mtimes"][".npy"] = f.stat().st_mtime_ns
    m.write_text(json.dumps(meta))


def another_dimension_checksums_too(entry: Path):
    """The same, and the metadata's own checksum recomputed: the header checksum still differs."""
    another_dimension(entry)
    m = entry / "vectors.json"
    meta = json.loads(m.read_text())
    meta["checksums"]["metadata"] = entry_module._meta_checksum(meta)
    m.write_text(json.dumps(meta))


def npy_header_fortran(entry: Path):
    replace_same_size(entry / "vectors.npy", b"'fortran_order': False", b"'fortran_order': True ")


def flip_cased(entry: Path):
    m = entry / "vectors.json"
    meta = json.loads(m.read_text())
    meta["cased"] = not meta["cased"]
    keep_times(m, lambda: m.write_text(json.dumps(meta, indent=1)))


def old_version(entry: Path):
    m = entry / "vectors.json"
    meta = json.loads(m.read_text())
    meta["version"] = 1
    m.write_text(json.dumps(meta))


TAMPER = {
    "two words swapped": swap_two_words,
    "two words of other lengths swapped": swap_last_two_words,
    "order.npy edited": edit_order,
    "order.npy out of range": order_out_of_range,
    "offsets.npy edited": edit_offsets,
    ".npy of another dimension, metadata edited": another_dimension,
    ".npy of another dimension, metadata and its checksum edited": another_dimension_checksums_too,
    ".npy header edited": npy_header_fortran,
    "cased flipped in the metadata": flip_cased,
    "an entry of format 1": old_version,
}


@pytest.mark.parametrize("tamper", list(TAMPER))
def test_a_tampered_entry_is_noticed_reconverted_and_gives_the_fresh_numbers(cache, source, tamper):
    path, _ = source
    entry = entry_of(path)
    TAMPER[tamper](entry)

    listed = ok(run("vectors", "list", "--json"))
    assert len(listed) == 1 and str(entry) in listed[0]["damaged"]

    result = run("vectors", "info", "--vectors", path, "--json")
    doc = one(result, stderr=None)
    one_warning(result.stderr, "cache entry", str(path), "damaged", "converting it again")
    assert (doc["words"], doc["dim"], doc["cache_entry"]) == (len(NINE_WORDS), 4, str(entry / "vectors"))

    warnings = []
    again = load_vectors(path, warn=warnings.append)
    assert warnings == [] and isinstance(again.matrix, np.memmap)
    same_as_fresh(again, path)
    assert ok(run("vectors", "list", "--json"))[0]["damaged"] is None
    assert [p.name for p in cache.iterdir()] == [entry.name] and temporaries(cache) == []


def test_rows_of_the_matrix_are_trusted_as_documented(cache, source):
    path, M = source
    entry = entry_of(path)
    f = entry / "vectors.npy"
    data = bytearray(f.read_bytes())
    data[-4:] = np.float32(7.5).tobytes()  # the last value of the last row
    keep_times(f, lambda: f.write_bytes(bytes(data)))
    warnings = []
    v = load_vectors(path, warn=warnings.append)
    assert warnings == [] and float(v.matrix[-1, -1]) == 7.5  # not hashed: read as it is


def test_the_metadata_holds_checksums_of_what_a_load_verifies(cache, source):
    path, _ = source
    entry = entry_of(path)
    meta = json.loads((entry / "vectors.json").read_text())
    assert meta["version"] == entry_module.FORMAT_VERSION == 2
    sums = meta["checksums"]
    assert sums["algorithm"] == "crc32"
    for suffix in (".words.txt", ".offsets.npy", ".order.npy"):
        assert sums["files"][suffix] == f"{zlib.crc32((entry / f'vectors{suffix}').read_bytes()):08x}"
    data = (entry / "vectors.npy").read_bytes()
    header = data[: len(data) - len(NINE_WORDS) * 4 * 4]
    assert sums["headers"] == {".npy": f"{zlib.crc32(header):08x}"}
    assert sums["sha256"] == {s: hashlib.sha256((entry / f"vectors{s}").read_bytes()).hexdigest()
                              for s in (".npy", ".words.txt", ".offsets.npy", ".order.npy")}
    assert data == _saved(np.load(entry / "vectors.npy"))  # the bytes np.save writes
    marker = json.loads((entry / ".attncli-entry").read_text())
    assert marker["made_by"] == "attncli" and marker["kind"] == "cache-entry" and marker["folder"] == entry.name
    assert marker["temporary"].startswith(".tmp-")


def _saved(array) -> bytes:
    f = io.BytesIO()
    np.save(f, array, allow_pickle=False)
    return f.getvalue()


@pytest.fixture
def bundled_copy(tmp_path) -> Path:
    """The bundled entry's files, copied: their range checks, without touching the committed ones."""
    src = entry_module.bundled_prefix()
    for suffix in (*entry_module.SUFFIXES, ".json"):
        shutil.copyfile(f"{src}{suffix}", tmp_path / f"b{suffix}")
    return tmp_path / "b"


def _bundled_edit(prefix: Path, suffix: str, change) -> None:
    f = Path(f"{prefix}{suffix}")
    a = np.load(f)
    change(a)
    np.save(f, a)


BUNDLED_DAMAGE = {
    "order value V": (".order.npy", lambda a: a.__setitem__(5, 100_000), "outside [0, 100000)"),
    "order value -1": (".order.npy", lambda a: a.__setitem__(-1, -1), "outside"),
    "offsets decreasing": (".offsets.npy", lambda a: a.__setitem__(500, 0), "never decrease"),
    "offsets start": (".offsets.npy", lambda a: a.__setitem__(0, 1), "start at 0"),
    "offsets end": (".offsets.npy", lambda a: a.__setitem__(-1, a[-1] - 1), "end at the file's size"),
}


@pytest.mark.parametrize("damage", list(BUNDLED_DAMAGE))
def test_the_bundled_entry_is_range_checked(bundled_copy, damage):
    assert entry_module.read_entry(bundled_copy, "bundled", bundled=True).size == 100_000
    suffix, change, words = BUNDLED_DAMAGE[damage]
    _bundled_edit(bundled_copy, suffix, change)
    with pytest.raises(entry_module.DamagedEntry, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        entry_module.read_entry(bundled_copy, "bundled", bundled=True)


@pytest.mark.parametrize("edit", ["order int32", "order 2-d", "matrix float64", "offsets short"])
def test_the_bundled_entry_is_checked_for_dtype_and_shape(bundled_copy, edit):
    f = {"order int32": ".order.npy", "order 2-d": ".order.npy", "matrix float64": ".npy",
         "offsets short": ".offsets.npy"}[edit]
    path = Path(f"{bundled_copy}{f}")
    a = np.load(path)
    a = {"order int32": lambda: a.astype(np.int32), "order 2-d": lambda: a.reshape(-1, 2),
         "matrix float64": lambda: a.astype(np.float64), "offsets short": lambda: a[:-1]}[edit]()
    np.save(path, a)
    meta = json.loads(Path(f"{bundled_copy}.json").read_text())
    meta["files"][f] = path.stat().st_size  # sizes made to match: the header check is what refuses
    Path(f"{bundled_copy}.json").write_text(json.dumps(meta))
    with pytest.raises(entry_module.DamagedEntry, match="holds a"):
        entry_module.read_entry(bundled_copy, "bundled", bundled=True)


def test_the_bundled_entry_has_no_checksums_and_is_unchanged():
    prefix = entry_module.bundled_prefix()
    meta = json.loads(Path(f"{prefix}.json").read_text())
    assert meta["version"] == entry_module.BUNDLED_VERSION == 1 and "checksums" not in meta
    readme = (Path(__file__).resolve().parent.parent / "embeddings" / "README.md").read_text()
    for suffix in (*entry_module.SUFFIXES, ".json"):
        digest = hashlib.sha256(Path(f"{prefix}{suffix}").read_bytes()).hexdigest()
        assert digest in readme, suffix
    v = entry_module.read_bundled()
    assert v.size == 100_000 and v.vocab.find("orange") is not None


# --------------------------------------------------------------------------- 3. regular files, bounded metadata


@pytest.mark.parametrize("name", OWN)
def test_a_fifo_in_place_of_any_entry_file_never_hangs(cache, source, name):
    path, _ = source
    entry = entry_of(path)
    (entry / name).unlink()
    os.mkfifo(entry / name)
    env = env_for(cache)
    listed = attncli("vectors", "list", "--json", env=env, timeout=30)
    assert listed.returncode == 0, listed.stderr
    proc = attncli("vectors", "info", "--vectors", path, "--json", env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["words"] == len(NINE_WORDS)
    [warning] = proc.stderr.splitlines()
    assert warning.startswith("attncli: warning: the cache entry for") and "damaged" in warning
    if name == ".attncli-entry":  # without its proof the folder is not attncli's: left, FIFO and all
        assert listed.stdout == "" and "left as it is" in warning and info["cache_entry"] is None
        assert stat.S_ISFIFO(os.lstat(entry / name).st_mode)
    else:
        assert json.loads(listed.stdout)["damaged"].endswith("is not a regular file")
        assert "not a regular file" in warning and info["cache_entry"] == str(entry / "vectors")
        assert stat.S_ISREG(os.lstat(entry / name).st_mode)  # the FIFO was unlinked, the entry rewritten
        proc = attncli("vectors", "info", "--vectors", path, "--json", env=env, timeout=30)
        assert proc.returncode == 0 and proc.stderr == ""


def test_clear_unlinks_a_fifo_among_attncli_files_without_opening_it(cache, source):
    path, _ = source
    entry = entry_of(path)
    (entry / "vectors.npy").unlink()
    os.mkfifo(entry / "vectors.npy")
    proc = attncli("vectors", "clear", "--json", env=env_for(cache), timeout=30)
    assert proc.returncode == 0 and proc.stderr == ""
    assert json.loads(proc.stdout)["removed"] == 1 and not entry.exists()


def test_a_huge_sparse_metadata_file_is_refused_unread(cache, source):
    path, _ = source
    entry = entry_of(path)
    with open(entry / "vectors.json", "r+b") as f:
        f.truncate(3 << 30)  # 3 GB of nothing, in no disk space
    code = f"""
        import re, json, attncli
        warnings = []
        v = attncli.load_vectors({str(path)!r}, warn=warnings.append)
        # this process's own peak (VmHWM, kB): ru_maxrss would count the test's, whose memory it started from
        rss = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read())[1])
        print(json.dumps({{"rss": rss, "warnings": warnings, "words": v.size}}))
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env_for(cache), timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["words"] == len(NINE_WORDS) and got["rss"] < 400_000  # kB: the file was never read
    [warning] = got["warnings"]
    assert "vectors.json holds 3.2 GB" in warning and "converting it again" in warning
    assert (entry / "vectors.json").stat().st_size < 10_000


def _deep(meta):
    return "[" * 100_000 + "]" * 100_000


def _set(key, value):
    def edit(meta):
        meta[key] = value
        return json.dumps(meta)
    return edit


def _set_in(key, inner, value):
    def edit(meta):
        meta[key][inner] = value
        return json.dumps(meta)
    return edit


METADATA = {
    "not JSON": lambda meta: "{not json",
    "not UTF-8": lambda meta: b"\xff\xfe{}",
    "a list": lambda meta: "[1, 2]",
    "a string": lambda meta: '"vectors"',
    "a number": lambda meta: "42",
    "null": lambda meta: "null",
    "deeply nested": _deep,
    "a huge integer": lambda meta: '{"words": ' + "9" * 5000 + "}",
    "created not a string": _set("created", 5),
    "words not an int": _set("words", "9"),
    "words a bool": _set("words", True),
    "dim a float": _set("dim", 4.0),
    "words negative": _set("words", -1),
    "cased a string": _set("cased", "yes"),
    "name a number": _set("name", 7),
    "files a list": _set("files", []),
    "files with another name": _set("files", {"/../x": 1}),
    "mtimes of strings": _set_in("mtimes", ".npy", "yesterday"),
    "checksums a string": _set("checksums", "crc32"),
    "sha256 a string": _set_in("checksums", "sha256", "e3b0c442"),
    "sha256 short": _set_in("checksums", "sha256", {s: "e3b0" for s in (".npy", ".words.txt", ".offsets.npy",
                                                                             ".order.npy")}),
    "sha256 of one file": _set_in("checksums", "sha256", {".npy": "0" * 64}),
    "source a string": _set("source", "/v.txt"),
    "source path a number": _set_in("source", "path", 5),
    "limit a string": _set_in("options", "limit", "all"),
    "subwords a list": _set("subwords", []),
    "version a bool": _set("version", True),
}


@pytest.mark.parametrize("checksum", ["kept", "recomputed"])
@pytest.mark.parametrize("spoil", list(METADATA))
def test_metadata_of_any_wrong_shape_is_damage_listed_and_rebuilt(cache, source, spoil, checksum):
    path, _ = source
    entry = entry_of(path)
    m = entry / "vectors.json"
    meta = json.loads(m.read_text())
    text = METADATA[spoil](meta)
    if checksum == "recomputed":  # the metadata's own checksum made to match: the field checks must refuse it
        try:
            edited = json.loads(text)
            edited["checksums"]["metadata"] = entry_module._meta_checksum(edited)
            text = json.dumps(edited)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            pytest.skip("no checksum to recompute in this metadata")
    m.write_bytes(text if isinstance(text, bytes) else text.encode())

    for fmt in ("json", "table"):
        result = run("vectors", "list", "--format", fmt)
        assert result.exit_code == 0 and result.stderr == ""
    [doc] = ok(run("vectors", "list", "--json"))
    assert set(doc) == LIST_KEYS and doc["path"] == str(entry)
    assert isinstance(doc["damaged"], str) and str(m) in doc["damaged"]
    assert "damaged" in run("vectors", "list", "--format", "table").stdout

    result = run("vectors", "info", "--vectors", path, "--json")
    one_warning(result.stderr, "damaged", "converting it again")
    assert one(result, stderr=None)["cache_entry"] == str(entry / "vectors")
    warnings = []
    same_as_fresh(load_vectors(path, warn=warnings.append), path)
    assert warnings == []


# --------------------------------------------------------------------------- 4. vectors list


def test_list_shows_good_and_damaged_entries_side_by_side(cache, source, tmp_path):
    path, _ = source
    good, bad = entry_of(path), entry_of(path, limit=3)
    (bad / "vectors.json").write_text("[]")
    (cache / "not-an-entry").mkdir()
    (cache / "not-an-entry" / "vectors.json").write_text("{}")
    docs = {d["path"]: d for d in ok(run("vectors", "list", "--json"))}
    assert set(docs) == {str(good), str(bad)}
    assert docs[str(good)]["damaged"] is None and docs[str(good)]["words"] == len(NINE_WORDS)
    assert docs[str(bad)]["damaged"] == f"{bad}/vectors.json: holds an array in JSON, not an object"
    assert docs[str(bad)]["words"] is None and docs[str(bad)]["stale"] is True
    table = run("vectors", "list", "--format", "table")
    assert table.exit_code == 0 and "damaged" in table.stdout and "v.txt" in table.stdout


def test_list_never_builds_markup_from_a_path(cache, tmp_path):
    odd = tmp_path / "[bold red]odd[italic] \x1b[31m"
    odd.mkdir()
    path = write_text(odd / "v.txt", ["cat", "dog"], matrix(2, 3))
    load_vectors(path)
    table = run("vectors", "list", "--format", "table", env={"COLUMNS": "400"})
    assert table.exit_code == 0 and "[bold red]odd[italic]" in table.stdout and "\x1b" not in table.stdout


# --------------------------------------------------------------------------- 5. file descriptors


def limit_files(n: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def identity(entry: Path) -> dict:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(entry.iterdir())}


@pytest.mark.parametrize("files", [5, 6, 7])
def test_too_few_file_descriptors_keep_the_good_entry(cache, source, files):
    path, _ = source
    entry = entry_of(path)
    before = identity(entry)
    env = env_for(cache)
    for args in (["vectors", "info", "--vectors", path, "--json"], ["scores", "the earth", "--vectors", path]):
        proc = attncli(*args, env=env, preexec_fn=limit_files(files), timeout=30)
        one_error(proc, "too many open files")
        assert identity(entry) == before  # not damaged, not removed, not rewritten
        assert [p.name for p in cache.iterdir()] == [entry.name]
    proc = attncli("vectors", "info", "--vectors", path, "--json", env=env, timeout=30)
    assert proc.returncode == 0 and proc.stderr == ""
    assert json.loads(proc.stdout)["cache_entry"] == str(entry / "vectors")  # the same entry, used
    assert identity(entry) == before


@pytest.mark.parametrize("where", ["before the marker", "after the matrix", "before the metadata"])
def test_a_write_that_runs_out_of_descriptors_leaves_nothing(cache, source, where):
    path, M = source
    code = f"""
        import json, os, tempfile, attncli
        from attncli.words import entry
        held = []
        def exhaust():
            while True:
                try:
                    held.append(os.open(os.devnull, os.O_RDONLY))
                except OSError:
                    return
        where = {where!r}
        if where == "before the marker":
            real_open, unnamed = os.open, getattr(os, "O_TMPFILE", None)
            def open_marker(path, flags, *a, **kw):  # the marker's open: made without a name, or in its folder
                if not held and (unnamed is not None and flags & unnamed == unnamed
                                 or str(path).endswith(".attncli-entry")):
                    exhaust()
                return real_open(path, flags, *a, **kw)
            os.open = open_marker
        else:
            real_write = entry._write_file
            calls = []
            def write(path, parts):
                calls.append(path)  # the matrix first, the metadata last (the fifth)
                if len(calls) == (2 if where == "after the matrix" else 5):
                    exhaust()
                return real_write(path, parts)
            entry._write_file = write
        warnings = []
        v = attncli.load_vectors({str(path)!r}, warn=warnings.append)
        for fd in held:
            os.close(fd)
        print(json.dumps({{"warnings": warnings, "entry": v.meta.get("entry"), "matrix": v.matrix.tolist()}}))
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env_for(cache), timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    [warning] = got["warnings"]
    assert "cannot write the vectors cache" in warning and "Too many open files" in warning
    assert got["entry"] is None
    np.testing.assert_array_equal(np.array(got["matrix"], dtype=np.float32), M)
    assert list(cache.iterdir()) == []  # no half entry, no temporary folder
    same_as_fresh(load_vectors(path), path)  # and the next run writes it whole
    assert len(list(cache.iterdir())) == 1


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EACCES, errno.EIO])
def test_a_read_error_of_the_machine_is_no_damage(cache, source, monkeypatch, code):
    path, _ = source
    entry = entry_of(path)
    before = identity(entry)
    real = entry_module.reading.open_regular

    def failing(p, what):
        if str(p).endswith("vectors.offsets.npy"):
            from attncli.system.limits import ResourceError
            raise ResourceError(f"{p}: cannot be read: {os.strerror(code)}")
        return real(p, what)

    monkeypatch.setattr(entry_module.reading, "open_regular", failing)
    with pytest.raises(VectorsError, match=os.strerror(code)) as raised:
        load_vectors(path)
    assert not isinstance(raised.value, entry_module.DamagedEntry)
    fails(run("vectors", "info", "--vectors", path), os.strerror(code), "left as it is")
    assert identity(entry) == before
    monkeypatch.setattr(entry_module.reading, "open_regular", real)
    assert load_vectors(path).meta["entry"] == str(entry / "vectors")


def test_a_mapping_error_of_the_machine_is_no_damage(cache, source, monkeypatch):
    path, _ = source
    entry = entry_of(path)
    before = identity(entry)

    def no_memory(*a, **kw):
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(entry_module.np, "memmap", no_memory)
    fails(run("vectors", "info", "--vectors", path), "Cannot allocate memory", "left as it is")
    assert identity(entry) == before


# --------------------------------------------------------------------------- 6. no home directory


def _no_passwd_entry() -> bool:
    try:
        pwd.getpwuid(NOBODY)
    except KeyError:
        return True
    return False


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def nobody_command() -> tuple[list[str], object]:
    """(a prefix, a preexec_fn) that run attncli as uid NOBODY: setpriv where there is one (an
    interpreter under a folder only root may enter is still started by it), else setuid in the
    child."""
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"], None
    return [], as_nobody


@pytest.fixture
def open_folder():
    """A folder uid NOBODY can read and write (pytest's own are root's alone), removed after."""
    folder = Path(tempfile.mkdtemp(prefix="attncli-nohome-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder)


# Where no uid without a passwd entry can start this environment's Python (a virtual
# environment in a folder only root may enter, as in CI), the same run as root with the
# passwd lookup failing as it fails for such a uid.
NO_PASSWD = ("import pwd, sys\n"
             "def _no_entry(uid):\n    raise KeyError(f'getpwuid(): uid not found: {uid}')\n"
             "pwd.getpwuid = _no_entry\n"
             "sys.argv[0] = 'attncli'\n"
             "from attncli.cli import main\n"
             "main()\n")


@pytest.mark.parametrize("how", ["uid", "lookup"])
def test_without_a_home_directory(open_folder, how):
    if how == "uid" and not (hasattr(os, "geteuid") and os.geteuid() == 0 and _no_passwd_entry()):
        pytest.skip("runs as a uid with no passwd entry, which needs root")
    vectors = write_text(open_folder / "v.txt", NINE_WORDS, matrix(len(NINE_WORDS), 4, seed=1))
    vectors.chmod(0o644)
    work = open_folder / "work"
    work.mkdir()
    work.chmod(0o777)
    env = env_for(None, HOME=None, ATTNCLI_CACHE_DIR=None, XDG_CACHE_HOME=None, GENSIM_DATA_DIR=None)

    prefix, preexec = nobody_command() if how == "uid" else ([sys.executable, "-c", NO_PASSWD], None)
    program = [str(ATTNCLI)] if how == "uid" else []
    uid = NOBODY if how == "uid" else os.getuid()

    def nobody(*args, **extra):
        return subprocess.run([*prefix, *program, *map(str, args)], capture_output=True, text=True,
                              env={**env, **extra}, preexec_fn=preexec, cwd=work, timeout=60,
                              stdin=subprocess.DEVNULL)

    try:
        started = nobody("--version")
    except PermissionError:
        pytest.skip(f"uid {NOBODY} cannot start this environment's Python")
    if started.returncode != 0:
        pytest.skip(f"uid {NOBODY} cannot start this environment's Python: {started.stderr[-200:]}")

    proc = nobody("vectors", "info", "--vectors", vectors, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["words"] == len(NINE_WORDS) and json.loads(proc.stdout)["cache_entry"] is None
    [warning] = proc.stderr.splitlines()
    assert warning.startswith("attncli: warning: there is no cache directory")
    for words in ("~/.cache/attncli", "HOME is not set", f"user {uid}", "set HOME or ATTNCLI_CACHE_DIR"):
        assert words in warning, (words, warning)

    proc = nobody("scores", "the earth", "--vectors", vectors, "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["tokens"] == ["the", "earth"]
    one_error(nobody("vectors", "convert", vectors), "there is no cache directory", "set HOME or ATTNCLI_CACHE_DIR")
    for command in ("list", "clear"):
        one_error(nobody("vectors", command), "there is no cache directory", "HOME", "ATTNCLI_CACHE_DIR")
    one_error(nobody("scores", "cat", "--vectors", "glove-wiki-gigaword-50"), "glove-wiki-gigaword-50",
              "GENSIM_DATA_DIR", "HOME")
    one_error(nobody("scores", "cat", "--vectors", "~/x.txt"), "~/x.txt", "~ cannot be expanded",
              "without a home directory")
    one_error(nobody("vectors", "list", ATTNCLI_CACHE_DIR="~/cache"), "there is no cache directory",
              "ATTNCLI_CACHE_DIR is '~/cache'")
    proc = nobody("scores", "the cat", "--json")  # the bundled vectors need no home
    assert proc.returncode == 0 and proc.stderr == ""

    cache = open_folder / "cache"  # a cache directory of its own: no home needed
    proc = nobody("vectors", "convert", vectors, "--json", ATTNCLI_CACHE_DIR=str(cache))
    assert proc.returncode == 0 and proc.stderr == ""
    assert json.loads(proc.stdout)["cache_entry"].startswith(str(cache))
    proc = nobody("vectors", "list", "--json", ATTNCLI_CACHE_DIR=str(cache))
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1

    assert list(work.iterdir()) == []  # no folder named "~", nor anything else, where it ran
    assert not (open_folder / "~").exists()


def test_a_relative_home_is_no_home(cache, source, monkeypatch):
    path, _ = source
    monkeypatch.setenv("HOME", "relative/home")
    fails(run("scores", "cat", "--vectors", "~/v.txt"), "~ cannot be expanded", "HOME is 'relative/home'")
    fails(run("vectors", "list", env={"ATTNCLI_CACHE_DIR": "~/cache"}), "there is no cache directory")
    fails(run("scores", "cat", "--vectors", "glove-fake-42", env={"GENSIM_DATA_DIR": None}), "GENSIM_DATA_DIR")
    monkeypatch.setenv("HOME", str(path.parent))
    assert one(run("vectors", "info", "--vectors", "~/v.txt", "--json"))["words"] == len(NINE_WORDS)
    monkeypatch.setenv("ATTNCLI_CACHE_DIR", "~/cache")  # ~ in ATTNCLI_CACHE_DIR is the home directory
    assert one(run("vectors", "convert", "~/v.txt", "--json"))["cache_entry"].startswith(str(path.parent / "cache"))


# --------------------------------------------------------------------------- 7. paths the system refuses


@pytest.mark.parametrize("spec", [
    "a" * 5000,
    "a" * 300,
    "/tmp/" + "a" * 5000 + ".txt",
    "/tmp/" + "a/" * 3000 + "v.txt",
    "~" + "a" * 5000,
    "~/" + "a" * 5000,
])
def test_a_path_too_long_is_one_line(cache, spec):
    line = fails(run("scores", "cat", "--vectors", spec))
    assert len(line) < 600
    assert "too long" in line or "no user" in line or "no such file" in line
    with pytest.raises(VectorsError):
        load_vectors(spec)
    assert not cache.exists()


def test_an_embedded_nul_is_one_error(cache):
    with pytest.raises(VectorsError, match="not a usable path"):
        load_vectors("v\x00.txt")


def test_a_cache_dir_too_long_is_a_warning(cache, source, monkeypatch):
    path, _ = source
    monkeypatch.setenv("ATTNCLI_CACHE_DIR", str(cache / ("c" * 300)))
    result = run("vectors", "info", "--vectors", path, "--json")
    one_warning(result.stderr, "cannot write the vectors cache", "File name too long")
    assert one(result, stderr=None)["cache_entry"] is None
    assert ok(run("vectors", "list", "--json")) == []


# --------------------------------------------------------------------------- 8. vectors verify: every byte


VERIFY_KEYS = {"name", "path", "source", "limit", "ok", "status", "problem", "files"}
ENTRY_SUFFIXES = (".npy", ".words.txt", ".offsets.npy", ".order.npy")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verified(*args) -> tuple[list[dict], object]:
    """`vectors verify ARGS --json`: (its documents, the result)."""
    result = run("vectors", "verify", *args, "--json")
    return [json.loads(line) for line in result.stdout.splitlines()], result


def flip(path: Path, at: int) -> None:
    """Change one byte of `path` in place, its size and modification time kept."""
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    keep_times(path, lambda: path.write_bytes(bytes(data)))


def test_a_fresh_entry_verifies(cache, source):
    path, _ = source
    entry = entry_of(path)
    [doc], result = verified(entry.name)
    assert result.exit_code == 0 and result.stderr == ""
    assert set(doc) == VERIFY_KEYS
    assert {k: doc[k] for k in VERIFY_KEYS - {"files"}} == {
        "name": "v.txt", "path": str(entry), "source": str(path.resolve()), "limit": None, "ok": True, "status": "ok",
        "problem": None}
    assert doc["files"] == [{"name": f"vectors{s}", "sha256": sha256_of(entry / f"vectors{s}"),
                             "expected": sha256_of(entry / f"vectors{s}")} for s in ENTRY_SUFFIXES]
    table = run("vectors", "verify", "v.txt", "--format", "table")
    assert table.exit_code == 0 and table.stdout == f"v.txt ({entry}): ok\n"


def _damaged(entry: Path, name: str, *words: str) -> dict:
    """The one entry verify finds damaged in `entry`: its document, after the exit status and
    lines a damaged entry gives."""
    [doc], result = verified(entry.name)
    assert result.exit_code == 1 and result.stderr == "attncli: 1 of 1 entry did not verify\n"
    assert (doc["ok"], doc["status"]) == (False, "damaged")
    assert doc["problem"].startswith(name) and all(w in doc["problem"] for w in words), doc["problem"]
    table = run("vectors", "verify", entry.name, "--format", "table", env={"COLUMNS": "1000"})
    assert table.exit_code == 1
    assert table.stdout == f"v.txt ({entry}): damaged: {doc['problem']}; convert it again to get it whole: " \
                           f"attncli vectors convert {json.loads((entry / 'vectors.json').read_text())['source']['path']}\n"
    return doc


@pytest.mark.parametrize("name,at", [("vectors.npy", -1), ("vectors.npy", 200), ("vectors.words.txt", 0)])
def test_a_byte_changed_in_place_is_found_and_named(cache, source, name, at):
    path, _ = source
    entry = entry_of(path)
    written = sha256_of(entry / name)
    flip(entry / name, at)
    if name == "vectors.npy":  # the rows a load trusts: used as they are, unnoticed
        v = load_vectors(path)
        assert v.meta["entry"] == str(entry / "vectors") and not np.array_equal(v.matrix, load_vectors(
            path, use_cache=False).matrix)
    doc = _damaged(entry, name, "is not as it was written", f"written as {written[:12]}…",
                   f"SHA-256 {sha256_of(entry / name)[:12]}…")
    for f in doc["files"]:
        assert f["expected"] == (written if f["name"] == name else sha256_of(entry / f["name"]))
        assert f["sha256"] == sha256_of(entry / f["name"])
    # convert writes it again, whole, and it verifies
    result = run("vectors", "convert", path, "--json")
    found = "is not as it was written" if name == "vectors.npy" else "was changed after it was written"  # a load's CRC-32
    one_warning(result.stderr, f"the cache entry for {path} is damaged", name, found, "converting it again")
    assert one(result, stderr=None)["cache_entry"] == str(entry / "vectors")
    assert verified(entry.name)[0][0]["ok"] is True and sha256_of(entry / name) == written


def test_a_missing_file_is_named(cache, source):
    path, _ = source
    entry = entry_of(path)
    (entry / "vectors.order.npy").unlink()
    doc = _damaged(entry, "vectors.order.npy is missing")
    assert doc["problem"] == "vectors.order.npy is missing"
    assert [f["sha256"] for f in doc["files"] if f["name"] == "vectors.order.npy"] == [None]


def test_damaged_metadata_is_named(cache, source):
    path, _ = source
    entry = entry_of(path)
    flip(entry / "vectors.json", 40)
    (bundled, doc), result = verified()  # the bundled entry first, then the cache's
    assert result.exit_code == 1 and result.stderr == "attncli: 1 of 2 entries did not verify\n"
    assert bundled["ok"] is True and doc["path"] == str(entry) and doc["name"] == entry.name  # its own name unknown
    assert doc["status"] == "damaged" and doc["files"] == []
    assert doc["problem"].startswith(f"{entry}/vectors.json: ")  # what a load would say of it


def test_an_entry_written_before_sha256s_is_reported_not_damaged(cache, source):
    path, _ = source
    entry = entry_of(path)
    meta = json.loads((entry / "vectors.json").read_text())
    del meta["checksums"]["sha256"]  # as an older attncli wrote it
    meta["checksums"]["metadata"] = entry_module._meta_checksum(meta)
    (entry / "vectors.json").write_text(json.dumps(meta))
    assert load_vectors(path).meta["entry"] == str(entry / "vectors")  # a good entry, used

    [doc], result = verified(entry.name)
    assert result.exit_code == 1 and result.stderr == "attncli: 1 of 1 entry did not verify\n"
    assert (doc["ok"], doc["status"]) == (False, "unchecked")
    assert doc["problem"] == f"written by {meta['created_by']}, before attncli recorded the SHA-256s of an entry's files"
    assert [f["expected"] for f in doc["files"]] == [None] * 4
    assert [f["sha256"] for f in doc["files"]] == [sha256_of(entry / f"vectors{s}") for s in ENTRY_SUFFIXES]
    table = run("vectors", "verify", "--format", "table", entry, env={"COLUMNS": "1000"})
    assert f"v.txt ({entry}): not checked: {doc['problem']}; convert it again to get them: attncli vectors " \
           f"convert {path.resolve()}\n" in table.stdout

    result = run("vectors", "convert", path, "--json")  # as the line says
    one_warning(result.stderr, "holds no SHA-256s to verify it by", "converting it again")
    assert verified(entry.name)[0][0]["ok"] is True


def test_verify_finds_entries_by_name_folder_and_path(cache, source, tmp_path):
    path, _ = source
    whole, first = entry_of(path), entry_of(path, limit=3)
    other = entry_of(write_text(tmp_path / "other.txt", ["cat", "dog"], matrix(2, 3, seed=4)))
    docs, result = verified()
    assert result.exit_code == 0
    assert [d["path"] for d in docs] == [str(entry_module.bundled_prefix()), *sorted(map(str, (whole, first, other)))]
    assert sorted(d["path"] for d in verified("v.txt")[0]) == sorted([str(whole), str(first)])
    assert [d["limit"] for d in verified(first.name)[0]] == [3]
    assert [d["path"] for d in verified(str(other) + "/")[0]] == [str(other)]
    # by the source's path, as vectors list shows it
    assert [d["path"] for d in verified(str(tmp_path / "other.txt"))[0]] == [str(other)]
    fails(run("vectors", "verify", "nope"), "no cache entry is named 'nope'", "vectors list", entry_module.BUNDLED)


def test_the_bundled_entry_verifies_against_its_committed_sha256s():
    [doc], result = verified(entry_module.BUNDLED)
    assert result.exit_code == 0 and doc["ok"] is True and doc["source"] == "bundled" and doc["limit"] == 100_000
    readme = (Path(__file__).resolve().parent.parent / "embeddings" / "README.md").read_text()
    names = [f"{entry_module.BUNDLED}{s}" for s in (*ENTRY_SUFFIXES, ".json")]
    assert [f["name"] for f in doc["files"]] == names
    for f in doc["files"]:
        assert f["sha256"] == f["expected"] and f["expected"] in readme  # the digests the README commits


@pytest.fixture
def bundled_with_sums(bundled_copy) -> Path:
    src = entry_module.bundled_prefix()
    text = Path(f"{src}.sha256").read_text().replace(f"  {src.name}.", f"  {bundled_copy.name}.")
    Path(f"{bundled_copy}.sha256").write_text(text)
    return bundled_copy


def test_a_damaged_bundled_entry_is_found(bundled_with_sums):
    prefix = bundled_with_sums
    assert entry_module.verify_entry(prefix, bundled=True)["ok"] is True
    flip(Path(f"{prefix}.npy"), 1000)
    doc = entry_module.verify_entry(prefix, bundled=True)
    assert doc["status"] == "damaged" and doc["problem"].startswith("b.npy is not as it was written")
    Path(f"{prefix}.sha256").unlink()
    doc = entry_module.verify_entry(prefix, bundled=True)
    assert doc["status"] == "unchecked" and doc["problem"] == "b.sha256 is missing, or not the SHA-256s of its files"


def test_verify_draws_a_bar_for_a_large_entry(cache, big_binary):
    import ptys

    load_vectors(big_binary)
    assert entry_module.entry_bytes(cache_module.to_verify("big.bin")[0][0]) >= (64 << 20)
    env = {"ATTNCLI_CACHE_DIR": str(cache), "COLUMNS": "100"}
    status, out, err, screen = ptys.run(["vectors", "verify", "big.bin", "--json"], on_tty=("stderr",), env=env)
    assert status == 0 and json.loads(out)["ok"] is True
    assert re.search(r"MB .*\d+/80", ptys.plain(screen)), screen  # stderr: the bar over the entry's 80 MB
    status, out, err, screen = ptys.run(["vectors", "verify", entry_module.BUNDLED, "--json"], on_tty=("stderr",),
                                        env=env)
    assert status == 0 and json.loads(out)["ok"] is True and ptys.plain(screen).strip() == ""  # 22 MB: no bar


def test_an_entry_that_cannot_be_read_now_is_reported_and_left(cache, source, monkeypatch):
    path, _ = source
    entry = entry_of(path)
    before = identity(entry)
    real = entry_module.reading.open_regular

    def refused(p, what):
        if str(p).endswith("vectors.npy"):
            from attncli.system.limits import ResourceError
            raise ResourceError(f"{p}: cannot be read: {os.strerror(errno.EACCES)}")
        return real(p, what)

    monkeypatch.setattr(entry_module.reading, "open_regular", refused)
    [doc], result = verified(entry.name)
    assert result.exit_code == 1 and (doc["ok"], doc["status"]) == (False, "unreadable")
    assert doc["problem"] == f"{entry}/vectors.npy: cannot be read: Permission denied; the cache entry was left as it is"
    table = run("vectors", "verify", entry.name, "--format", "table", env={"COLUMNS": "1000"})
    assert table.stdout == f"v.txt ({entry}): cannot be read now: {doc['problem']}\n"
    fails(run("vectors", "convert", path), "Permission denied", "left as it is")  # an error, never a rewrite
    assert identity(entry) == before


def test_verify_json_with_a_picture_writes_both(cache, source, tmp_path):
    path, _ = source
    entry = entry_of(path)
    docs = ok(run("vectors", "verify", "--json", "--svg", tmp_path / "p.svg"))
    assert "v.txt" in (tmp_path / "p.svg").read_text()  # the table view, drawn
    assert str(entry) in [doc["path"] for doc in docs]  # and the documents, a line each
