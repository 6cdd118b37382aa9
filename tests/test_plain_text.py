"""The fast reader of text vectors files (plaintext.read_plain_text) against gensim's own
load_word2vec_format: the same words, the same float32 bits, on the spellings of numbers
and words a file may hold; and every file it cannot read exactly is left to gensim."""

from __future__ import annotations

import bz2
import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from attncli.words import plaintext, sources
from attncli.words.load import load_vectors

gensim_models = pytest.importorskip("gensim.models")


def spellings(rng: np.random.Generator, n: int) -> list[str]:
    """n numbers written the ways files write them, the hard ones included: halfway between
    two float32 values (where rounding to double first decides), beyond float32 (infinity
    after the cast), below its smallest subnormal, signs, bare points, exponents, leading zeros."""
    out = []
    for k in range(n):
        x = np.float32(rng.uniform(-3, 3))
        y = np.nextafter(x, np.float32(9))
        kind = k % 12
        if kind == 0:
            out.append(repr((float(x) + float(y)) / 2))  # a midpoint, to the double
        elif kind == 1:
            out.append("%.25g" % ((float(x) + float(y)) / 2) + "1")  # just above a midpoint
        elif kind == 2:
            out.append("%.5f" % x)
        elif kind == 3:
            out.append("%e" % x)
        elif kind == 4:
            out.append("%.3E" % (x * 1e30))
        elif kind == 5:
            out.append(rng.choice(["+.5", "5.", "-0", "007", "-.25e+02", "1e-50", "3.4028235e38", "3.5e38", "-1e39",
                                   "1.401298464324817e-45", "7e-46", "0.000000000000000000000000000000000000000000001"]))
        else:
            out.append(repr(float(x)))
    return out


def write(path: Path, lines: list[str], header: str | None, compression: str | None, ending: str = "\n") -> Path:
    data = ((header + "\n" if header is not None else "") + "".join(line + ending for line in lines)).encode("utf-8",
                                                                                                       "surrogateescape")
    if compression == "gzip":
        data = gzip.compress(data, mtime=0)
    elif compression == "bz2":
        data = bz2.compress(data)
    path.write_bytes(data)
    return path


def gensim_reads(path: Path, glove: bool, limit: int | None):
    from gensim.models import KeyedVectors

    kv = KeyedVectors.load_word2vec_format(str(path), binary=False, limit=limit, unicode_errors="replace",
                                           no_header=glove)
    words = [w for w in kv.index_to_key if w is not None]  # the slots of skipped duplicates are None, at the end
    return words, np.asarray(kv.vectors[: len(words)])


def plain_reads(path: Path, limit: int | None):
    source = sources.resolve(str(path))
    fmt = sources.detect(source)
    if fmt.kind == "glove":
        fmt.count, fmt.dim = sources._glove_size(source, fmt, None)
    return plaintext.read_plain_text(source, fmt, limit, lambda done: done, 1, None)


WORDS = ["the", "Orange", "naïve", "東京", "a\tb", "x\udcff", "dup", "dup", "é\udcc3", "\u2028", "", "-1"]


@pytest.mark.parametrize("compression", [None, "gzip", "bz2"])
@pytest.mark.parametrize("kind", ["word2vec-text", "glove"])
@pytest.mark.parametrize("ending", ["\n", " \n", "\r\n"])
def test_the_same_words_and_bits_as_gensim(tmp_path, compression, kind, ending):
    rng = np.random.default_rng(len(ending) + (compression or "").__len__())
    dim, count = 7, 300
    words = [WORDS[i] if i < len(WORDS) else f"w{i}" for i in range(count)]
    words = [w for w in words if w != ""] if kind == "glove" else words[:10] + words[11:]  # a GloVe line may not start with a space
    lines = [" ".join([w, *spellings(rng, dim)]) for w in words]
    header = None if kind == "glove" else f"{len(lines)} {dim}"
    name = "v.txt" + {None: "", "gzip": ".gz", "bz2": ".bz2"}[compression]  # gensim knows them by name
    path = write(tmp_path / name, lines, header, compression, ending)
    for limit in (None, 5, len(lines)):
        plain = plain_reads(path, limit)
        assert plain is not None
        want_words, want = gensim_reads(path, kind == "glove", limit)
        got_words, got = plain
        assert got_words == want_words
        assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
        assert got.tobytes() == want.tobytes()  # to the bit: NaN never, infinity and -0 as gensim has them
    assert "dup" in got_words and got_words.count("dup") == 1


def test_blocks_cut_anywhere_give_the_same(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    lines = [" ".join([f"w{i}", *spellings(rng, 5)]) for i in ["dup"] + list(range(200)) + ["dup"]]
    path = write(tmp_path / "v.txt", lines, "202 5", None)
    want_words, want = gensim_reads(path, False, None)
    for block in (1, 7, 64, 1000):
        monkeypatch.setattr(plaintext, "BLOCK", block)
        words, got = plain_reads(path, None)
        assert words == want_words and got.tobytes() == want.tobytes()


def test_worker_processes_parse_to_the_same_bits(tmp_path, monkeypatch):
    """A large file's numbers are parsed by a process a core (plaintext.PARALLEL): the blocks
    come back in order, to the same words and bits; a bad line still leaves it to gensim."""
    rng = np.random.default_rng(2)
    lines = [" ".join([f"w{i % 150}", *spellings(rng, 9)]) for i in range(400)]  # repeated words across blocks
    path = write(tmp_path / "v.txt", lines, "400 9", "gzip")
    want_words, want = gensim_reads(path.rename(tmp_path / "v.txt.gz"), False, None)
    monkeypatch.setattr(plaintext, "PARALLEL", 0)
    monkeypatch.setattr(plaintext, "BLOCK", 3000)
    assert plaintext._parsers(1) == min(len(os.sched_getaffinity(0)), 4)
    words, got = plain_reads(tmp_path / "v.txt.gz", None)
    assert words == want_words and got.tobytes() == want.tobytes()
    bad = write(tmp_path / "bad.txt", lines[:300] + ["w 1 2 nan 4 5 6 7 8 9"] + lines[300:399], "400 9", None)
    assert plain_reads(bad, None) is None


DECLINED = {
    "a tab between numbers": "w 1.5\t2",
    "two spaces": "w 1.5  2",
    "nan": "w nan 2",
    "infinity spelt out": "w inf 2",
    "an underscore Python's float takes": "w 1_0 2",
    "Arabic-Indic digits": "w \u0663 2",
    "too few numbers": "w 1.5",
    "too many numbers": "w 1.5 2 3",
    "a bare point": "w . 2",
    "an exponent without digits": "w 1e+ 2",
    "two numbers run together": "w 1-2 3",
    "a blank line": "",
}


@pytest.mark.parametrize("bad", DECLINED.values(), ids=DECLINED.keys())
def test_a_line_it_cannot_read_exactly_is_left_to_gensim(tmp_path, bad):
    path = write(tmp_path / "v.txt", ["a 1 2", bad, "b 3 4"], "3 2", None)
    assert plain_reads(path, None) is None


def test_a_header_that_is_wrong_is_left_to_gensim(tmp_path):
    lines = ["a 1 2", "b 3 4", "c 5 6"]
    assert plain_reads(write(tmp_path / "more.txt", lines, "2 2", None), None) is None  # more lines than it says
    assert plain_reads(write(tmp_path / "more.txt", lines, "2 2", None), 2) is not None  # --limit: the rest unread
    assert plain_reads(write(tmp_path / "fewer.txt", lines, "4 2", None), None) is None
    assert plain_reads(write(tmp_path / "blank.txt", lines + [""], "3 2", None), None) is None


def test_a_header_numpy_cannot_shape_is_left_to_gensim(tmp_path):
    """Found by the fuzz target: 0 words of 2^63 - 1 values, which np.empty refuses."""
    path = write(tmp_path / "v.txt", ["the 1 2"], f"0 {2**63 - 1}", None)
    source = sources.resolve(str(path))
    fmt = sources.Format("word2vec-text", None, 0, 2**63 - 1)
    assert plaintext.read_plain_text(source, fmt, None, lambda done: done, 1, None) is None


def test_the_load_gives_the_errors_it_gave(tmp_path):
    """What the fast reader leaves to gensim ends as before: the errors of the gensim path."""
    from attncli.errors import VectorsError

    path = write(tmp_path / "v.txt", ["a 1 2", "b 3", "c 5 6"], "3 2", None)
    with pytest.raises(VectorsError, match="line 3 holds 1 values, but its header says 2"):
        load_vectors(str(path), use_cache=False)
    path = write(tmp_path / "big.txt", ["a 1 2", "b 3e39 4"], "2 2", None)
    with pytest.raises(VectorsError, match="holds NaN or infinity"):
        load_vectors(str(path), use_cache=False)


def test_a_plain_file_is_read_without_importing_gensim(tmp_path):
    import subprocess
    import sys

    path = write(tmp_path / "v.txt", ["a 1 2", "b 3 4"], "2 2", None)
    code = ("import json, sys; from attncli.words.load import load_vectors; v = load_vectors(sys.argv[1], use_cache=False); "
            "print(json.dumps([[v.vocab.word(i) for i in range(v.size)], v.matrix.tolist(), str(v.matrix.dtype), "
            "sorted(m for m in sys.modules if 'gensim' in m)]))")
    child = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert json.loads(child.stdout) == [["a", "b"], [[1.0, 2.0], [3.0, 4.0]], "float32", []]
