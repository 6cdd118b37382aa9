"""Users' word vectors (attncli.words.sources): every kind of source and how it is detected,
gensim-data names, and bad inputs.

Every file is written here, in tmp_path, from numbers the test holds: a load must give back
exactly those numbers. fastText n-grams and hashes are checked against gensim's own code.
Every error is one line on stderr naming the file, exit status 1, and no cache entry left.
"""

from __future__ import annotations

import bz2
import gzip
import json
import math
import os
import pickle
import socket
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from attncli import load_vectors
from attncli.cli import cli
from clirunner import fails, one, run, words_of
from helpers import write_text
from attncli.errors import VectorsError
from attncli.words.sources import detect, resolve


# A numpy warning would be a second line on stderr in a real run: make it fail here.
pytestmark = [
    pytest.mark.usefixtures("cache"),  # each test its own vectors cache (conftest.py)
    pytest.mark.filterwarnings("error::RuntimeWarning"),
]

INFO_KEYS = {"name", "words", "dim", "cased", "subwords", "source", "format", "cache_entry", "load_seconds"}

# Cased, non-ASCII, and words that are prefixes of others.
WORDS = ["the", "Earth", "is", "like", "an", "orange", "or", "oranges", "café", "naïve", "東京", "東"]


# --------------------------------------------------------------------------- helpers


def random_matrix(n: int, d: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


def write_kv(path: Path, words, M, *, binary: bool) -> Path:
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=M.shape[1])
    kv.add_vectors(list(words), M)
    kv.save_word2vec_format(str(path), binary=binary)
    return path


def write_glove(path: Path, words, M) -> Path:
    """GloVe text by hand: no header, "word v1 v2 ..." (repr of a float32 reads back exactly)."""
    lines = [w + " " + " ".join(repr(float(x)) for x in row) for w, row in zip(words, M)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_binary(path: Path, words, M, header: str | None = None, newline: bool = False) -> Path:
    """word2vec binary by hand: words as given (bytes allowed), float32 little-endian."""
    n, d = M.shape
    out = (header if header is not None else f"{n} {d}\n").encode()
    for word, row in zip(words, M):
        out += (word if isinstance(word, bytes) else word.encode()) + b" " + row.astype("<f4").tobytes()
        out += b"\n" if newline else b""
    path.write_bytes(out)
    return path


def compressed(path: Path, how: str) -> Path:
    data = path.read_bytes()
    target = path.with_name(path.name + (".gz" if how == "gzip" else ".bz2"))
    target.write_bytes(gzip.compress(data) if how == "gzip" else bz2.compress(data))
    return target


def entries(cache: Path) -> list[Path]:
    """Everything in the cache dir: entry folders and any temporary folder."""
    return sorted(cache.iterdir()) if cache.exists() else []


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to resolve a host or open a connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


def detected(path) -> tuple[str, str | None]:
    """The format and compression detect() finds."""
    fmt = detect(resolve(str(path)))
    return fmt.kind, fmt.compression


# --------------------------------------------------------------------------- 1. every source kind


def _make(kind: str, folder: Path, words, M) -> tuple[Path, str, str | None]:
    """A file of `kind` holding words/M: (path, format kind attncli should see, compression)."""
    if kind == "word2vec-text":
        return write_kv(folder / "v.txt", words, M, binary=False), "word2vec-text", None
    if kind == "word2vec-binary":
        return write_kv(folder / "v.bin", words, M, binary=True), "word2vec-binary", None
    if kind == "word2vec-binary-google":  # Google's writer ends each vector with a newline
        return write_binary(folder / "v.bin", words, M, newline=True), "word2vec-binary", None
    if kind == "glove":
        return write_glove(folder / "v.txt", words, M), "glove", None
    if kind == "fasttext-vec":
        return write_kv(folder / "v.vec", words, M, binary=False), "word2vec-text", None
    if kind in ("text.gz", "text.bz2", "binary.gz", "binary.bz2", "glove.gz"):
        base, how = kind.split(".")
        how = {"gz": "gzip", "bz2": "bz2"}[how]
        plain = {"text": lambda: write_kv(folder / "v.txt", words, M, binary=False),
                 "binary": lambda: write_kv(folder / "v.bin", words, M, binary=True),
                 "glove": lambda: write_glove(folder / "v.txt", words, M)}[base]()
        fmt = {"text": "word2vec-text", "binary": "word2vec-binary", "glove": "glove"}[base]
        path = compressed(plain, how)
        plain.unlink()
        return path, fmt, how
    if kind == "text-named-bin":
        return write_kv(folder / "v.bin", words, M, binary=False), "word2vec-text", None
    if kind == "binary-named-txt":
        return write_kv(folder / "v.txt", words, M, binary=True), "word2vec-binary", None
    if kind == "binary-named-gz-uncompressed":  # a name that lies about compression
        path = write_kv(folder / "v.bin", words, M, binary=True)  # (gensim would compress a .gz name)
        return path.rename(folder / "v.bin.gz"), "word2vec-binary", None
    if kind == "text-gzipped-named-txt":  # compressed content, plain name
        path = compressed(write_kv(folder / "v", words, M, binary=False), "gzip")
        return path.rename(folder / "v.txt"), "word2vec-text", "gzip"
    raise AssertionError(kind)


KINDS = ["word2vec-text", "word2vec-binary", "word2vec-binary-google", "glove", "fasttext-vec", "text.gz",
         "text.bz2", "binary.gz", "binary.bz2", "glove.gz", "text-named-bin", "binary-named-txt",
         "binary-named-gz-uncompressed", "text-gzipped-named-txt"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_loads_the_numbers_written(tmp_path, cache, kind):
    M = random_matrix(len(WORDS), 5, seed=len(kind))
    path, fmt, compression = _make(kind, tmp_path, WORDS, M)

    first = load_vectors(path)
    assert words_of(first) == WORDS
    np.testing.assert_array_equal(first.matrix, M)
    assert first.matrix.dtype == np.float32 and first.dim == 5 and first.size == len(WORDS)
    assert first.cased  # "Earth"
    assert first.meta["source"]["format"] == fmt and first.meta["source"]["compression"] == compression
    for i, word in enumerate(WORDS):
        np.testing.assert_array_equal(first.vector(word), M[i])

    second = load_vectors(path)  # from the cache entry
    assert second.meta["entry"] == first.meta["entry"]
    assert words_of(second) == WORDS
    np.testing.assert_array_equal(second.matrix, M)

    doc = one(run("vectors", "info", "--vectors", path, "--json"))
    assert set(doc) == INFO_KEYS
    assert (doc["words"], doc["dim"], doc["cased"], doc["subwords"], doc["format"]) == (len(WORDS), 5, True, False, fmt)
    assert doc["cache_entry"] == first.meta["entry"]


def test_detect_reads_content_not_names(tmp_path):
    M = random_matrix(3, 4)
    cases = {
        "text-named-bin": ("word2vec-text", None),
        "binary-named-txt": ("word2vec-binary", None),
        "text-gzipped-named-txt": ("word2vec-text", "gzip"),
        "binary.bz2": ("word2vec-binary", "bz2"),
        "glove.gz": ("glove", "gzip"),
    }
    for kind, expected in cases.items():
        folder = tmp_path / kind
        folder.mkdir()
        path, _, _ = _make(kind, folder, ["a", "b", "c"], M)
        fmt = detect(resolve(str(path)))
        assert (fmt.kind, fmt.compression) == expected, kind


def test_detects_word2vec_text_glove_text_and_binary(tmp_path):
    from gensim.models import KeyedVectors

    words, M = ["The", "earth"], np.array([[1.0, 0.0, 0.5], [0.25, -1.0, 2.0]], dtype=np.float32)
    assert detected(write_text(tmp_path / "a.txt", words, M)) == ("word2vec-text", None)
    assert detected(write_glove(tmp_path / "b.txt", words, M)) == ("glove", None)
    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(words, M)
    kv.save_word2vec_format(str(tmp_path / "c.bin"), binary=True)
    assert detected(tmp_path / "c.bin") == ("word2vec-binary", None)
    with gzip.open(tmp_path / "d.txt.gz", "wt") as f:
        f.write((tmp_path / "a.txt").read_text())
    assert detected(tmp_path / "d.txt.gz") == ("word2vec-text", "gzip")
    for name in ("a.txt", "b.txt", "c.bin", "d.txt.gz"):
        v = load_vectors(tmp_path / name)
        assert [v.vocab.word(i) for i in range(v.size)] == ["The", "earth"] and v.cased and v.dim == 3, name
        np.testing.assert_array_equal(v.vector("earth"), np.array([0.25, -1.0, 2.0], dtype=np.float32))


def test_scores_from_a_binary_file_match_a_hand_dot_product(tmp_path):
    M = random_matrix(len(WORDS), 6, seed=3)
    path = write_kv(tmp_path / "v.bin", WORDS, M, binary=True)
    doc = one(run("scores", "the orange café", "--vectors", path, "--raw", "--scale", "1", "--json"))
    assert doc["tokens"] == ["the", "orange", "café"] and doc["lookups"] == ["word"] * 3
    X = M[[WORDS.index(w) for w in doc["tokens"]]].astype(np.float64)
    np.testing.assert_allclose(doc["scores"], X @ X.T, rtol=1e-6)
    W = np.exp(X @ X.T - (X @ X.T).max(axis=1, keepdims=True))
    np.testing.assert_allclose(doc["weights"], W / W.sum(axis=1, keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("kind", ["word2vec-text", "word2vec-binary", "glove", "text.gz"])
def test_limit_reads_only_the_first_words_and_has_its_own_entry(tmp_path, cache, kind):
    M = random_matrix(len(WORDS), 4, seed=7)
    path, _, _ = _make(kind, tmp_path, WORDS, M)

    two = load_vectors(path, limit=2)
    assert words_of(two) == WORDS[:2]
    np.testing.assert_array_equal(two.matrix, M[:2])
    assert "orange" not in two.vocab and two.key("orange") is None
    five = load_vectors(path, limit=5)
    assert words_of(five) == WORDS[:5]
    np.testing.assert_array_equal(five.matrix, M[:5])
    everything = load_vectors(path)
    assert words_of(everything) == WORDS
    more = load_vectors(path, limit=1000)  # more than the file holds: all of it
    np.testing.assert_array_equal(more.matrix, M)

    entries_ = {two.meta["entry"], five.meta["entry"], everything.meta["entry"], more.meta["entry"]}
    assert len(entries_) == 4
    assert len([p for p in entries(cache) if not p.name.startswith(".")]) == 4
    assert (two.meta["options"]["limit"], five.meta["options"]["limit"], everything.meta["options"]["limit"]) == (2, 5, None)
    assert load_vectors(path, limit=2).meta["entry"] == two.meta["entry"]  # same limit: same entry

    doc = one(run("vectors", "info", "--vectors", path, "--limit", "3", "--json"))
    assert (doc["words"], doc["dim"]) == (3, 4)
    fails(run("vectors", "info", "--vectors", path, "--limit", "0"), "--limit", code=2)


# --------------------------------------------------------------------------- fastText and gensim pickles

FT_SENTENCES = [
    ["the", "cat", "sat", "on", "the", "mat"],
    ["the", "dog", "ate", "a", "bone"],
    ["café", "naïve", "über", "straße", "東京"],
] * 5
OOV = ["caterpillar", "dogs", "cafés", "東京都", "x", "überall"]


@pytest.fixture(scope="module")
def fasttext_files(tmp_path_factory):
    from gensim.models import FastText
    from gensim.models.fasttext import save_facebook_model

    folder = tmp_path_factory.mktemp("fasttext")
    model = FastText(sentences=FT_SENTENCES, vector_size=8, min_count=1, bucket=1000, epochs=2, seed=1, workers=1)
    save_facebook_model(model, str(folder / "ft.bin"))
    model.save(str(folder / "ft.model"))
    return folder, model


def test_fasttext_bin_in_vocabulary_and_subword_vectors_equal_gensim(fasttext_files):
    from gensim.models.fasttext import load_facebook_vectors

    folder, _ = fasttext_files
    path = folder / "ft.bin"
    kv = load_facebook_vectors(str(path))
    for attempt in ("converted", "cached"):
        v = load_vectors(path)
        assert v.subwords is not None, attempt
        assert words_of(v) == list(kv.index_to_key)
        np.testing.assert_array_equal(v.matrix, kv.vectors)
        assert (v.subwords.min_n, v.subwords.max_n, v.subwords.matrix.shape) == (kv.min_n, kv.max_n, (1000, 8))
        for word in OOV:
            assert word not in v.vocab and word not in kv.key_to_index
            np.testing.assert_array_equal(v.subwords.vector(word), kv.get_vector(word))  # exactly
            assert v.subwords.vector(word).dtype == np.float32
    assert v.meta["source"]["format"] == "fasttext"


def test_fasttext_oov_word_is_looked_up_by_subwords_in_the_json(fasttext_files):
    from gensim.models.fasttext import load_facebook_vectors

    folder, _ = fasttext_files
    path = folder / "ft.bin"
    kv = load_facebook_vectors(str(path))
    doc = one(run("scores", "the caterpillar sat", "--vectors", path, "--raw", "--json"))
    assert doc["tokens"] == ["the", "caterpillar", "sat"]
    assert doc["lookups"] == ["word", "subwords", "word"]
    assert doc["oov"] == []
    X = np.array([kv.get_vector(t) for t in doc["tokens"]], dtype=np.float64)
    np.testing.assert_allclose(doc["scores"], X @ X.T, rtol=1e-5, atol=1e-12)
    info = one(run("vectors", "info", "--vectors", path, "--json"))
    assert info["subwords"] is True and info["format"] == "fasttext" and info["dim"] == 8


def test_fasttext_bin_compressed_is_refused(fasttext_files, tmp_path, cache):
    folder, _ = fasttext_files
    path = compressed(folder / "ft.bin", "gzip")
    path = path.rename(tmp_path / "ft.bin.gz")
    fails(run("vectors", "info", "--vectors", path), str(path), "decompress")
    assert entries(cache) == []


def test_fasttext_bin_truncated_is_one_line(fasttext_files, tmp_path, cache):
    folder, _ = fasttext_files
    data = (folder / "ft.bin").read_bytes()
    path = tmp_path / "cut.bin"
    path.write_bytes(data[: len(data) // 2])
    fails(run("vectors", "info", "--vectors", path), str(path), "fastText")
    assert entries(cache) == []


# What gensim and numpy would print raw while a file is read: a value beyond float32 ("overflow
# encountered in cast"), a fastText sampling threshold below 0 ("invalid value encountered in
# sqrt"). Only attncli's own line may reach stderr.
QUIET_CASES = {
    "overflow.txt": (b"2 3\ncat 1e39 1 2\ndog 1 2 3\n", 1),
    "overflow-glove.txt": (b"cat 1 2 3\ndog 1 -1e39 3\n", 1),
    "overflow.txt.gz": (gzip.compress(b"2 3\ncat 1e39 1 2\ndog 1 2 3\n"), 1),
    "negative-t.bin": (None, 0),
}


def _quiet_case(tmp_path: Path, name: str) -> Path:
    data, _ = QUIET_CASES[name]
    if data is None:
        from test_fuzz import fasttext_bin  # a fastText .bin by hand, field by field

        data = fasttext_bin(words=(b"a", b"bc"), dim=2, bucket=3, minn=1, maxn=2, t=-1.0)
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name", QUIET_CASES)
def test_gensim_and_numpy_warnings_never_reach_stderr(tmp_path, name):
    path = _quiet_case(tmp_path, name)
    env = {**os.environ, "ATTNCLI_CACHE_DIR": str(tmp_path / "cache"), "PYTHONWARNINGS": "default"}
    proc = subprocess.run([str(Path(sys.executable).parent / "attncli"), "vectors", "info", "--vectors", str(path)],
                          capture_output=True, text=True, env=env, timeout=120)
    status = QUIET_CASES[name][1]
    assert proc.returncode == status, proc.stderr
    if status:
        assert proc.stderr.startswith("attncli: error: ") and proc.stderr.count("\n") == 1, proc.stderr
        assert "NaN or infinity" in proc.stderr
    else:
        assert proc.stderr == "" and json.loads(proc.stdout)["words"] == 2


@pytest.mark.parametrize("name", QUIET_CASES)
def test_load_vectors_lets_no_warning_out(tmp_path, name):
    import warnings

    path = _quiet_case(tmp_path, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            load_vectors(path, use_cache=False)
        except VectorsError:
            pass
    assert [str(w.message) for w in caught] == []


def test_gensim_keyedvectors_kv_with_trust_pickle(tmp_path):
    from gensim.models import KeyedVectors

    M = random_matrix(len(WORDS), 4, seed=11)
    kv = KeyedVectors(vector_size=4)
    kv.add_vectors(WORDS, M)
    path = tmp_path / "v.kv"
    kv.save(str(path))
    v = load_vectors(path, trust_pickle=True)
    assert words_of(v) == WORDS and v.subwords is None
    np.testing.assert_array_equal(v.matrix, M)
    doc = one(run("vectors", "info", "--vectors", path, "--trust-pickle", "--json"))
    assert (doc["format"], doc["words"], doc["dim"], doc["subwords"]) == ("pickle", len(WORDS), 4, False)
    assert words_of(load_vectors(path, trust_pickle=True, limit=3)) == WORDS[:3]


def test_gensim_fasttext_model_with_trust_pickle(fasttext_files):
    folder, model = fasttext_files
    path = folder / "ft.model"
    v = load_vectors(path, trust_pickle=True)
    assert words_of(v) == list(model.wv.index_to_key)
    np.testing.assert_array_equal(v.matrix, model.wv.vectors)
    assert v.subwords is not None
    for word in OOV:
        np.testing.assert_array_equal(v.subwords.vector(word), model.wv.get_vector(word))
    doc = one(run("scores", "the caterpillar", "--vectors", path, "--trust-pickle", "--json"))
    assert doc["lookups"] == ["word", "subwords"] and doc["oov"] == []


@pytest.mark.parametrize("name", ["ft.model", "ft.kv"])
def test_a_pickle_without_trust_pickle_is_refused(fasttext_files, tmp_path, cache, name):
    folder, model = fasttext_files
    path = tmp_path / name
    if name == "ft.kv":
        model.wv.save(str(path))
    else:
        path.write_bytes((folder / "ft.model").read_bytes())
    fails(run("vectors", "info", "--vectors", path), str(path), "pickle", "--trust-pickle")
    fails(run("scores", "the cat", "--vectors", path), str(path), "pickle")
    assert entries(cache) == []


class _Touch:
    """Unpickling this opens (creates) the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


class _System:
    """Unpickling this runs a shell command that creates the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


@pytest.mark.parametrize("payload", [_Touch, _System])
@pytest.mark.parametrize("name,protocol,compress", [
    ("evil.kv", 4, False), ("evil.model", 2, False), ("evil.txt", 4, False), ("evil.kv.gz", 4, True),
])
def test_a_malicious_pickle_is_never_run(tmp_path, cache, payload, name, protocol, compress):
    marker = tmp_path / "PWNED"
    data = pickle.dumps(payload(marker), protocol=protocol)
    assert data[:1] == b"\x80"
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if compress else data)
    fails(run("vectors", "info", "--vectors", path), str(path), "pickle")
    fails(run("context", "the cat", "--token", "cat", "--vectors", path), str(path), "pickle")
    with pytest.raises(VectorsError, match="pickle"):
        load_vectors(path)
    assert not marker.exists()
    assert entries(cache) == []


# --------------------------------------------------------------------------- 2. gensim-data names


@pytest.fixture
def gensim_data(tmp_path, monkeypatch):
    """A GENSIM_DATA_DIR with one downloaded model (tiny-model) and a catalogue naming another."""
    base = tmp_path / "gensim-data"
    (base / "tiny-model").mkdir(parents=True)
    text = b"3 2\ncat 1 0\ndog 0 1\nbird 0.5 -0.25\n"
    (base / "tiny-model" / "tiny-model.gz").write_bytes(gzip.compress(text))
    monkeypatch.setenv("GENSIM_DATA_DIR", str(base))
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no file of those names where the run starts
    return base


def test_a_downloaded_gensim_data_name_loads(gensim_data, no_network):
    v = load_vectors("tiny-model")
    assert words_of(v) == ["cat", "dog", "bird"]
    np.testing.assert_array_equal(v.matrix, np.array([[1, 0], [0, 1], [0.5, -0.25]], dtype=np.float32))
    doc = one(run("vectors", "info", "--vectors", "tiny-model", "--json"))
    assert (doc["name"], doc["words"], doc["dim"], doc["format"]) == ("tiny-model", 3, 2, "word2vec-text")
    assert doc["source"] == str(gensim_data / "tiny-model" / "tiny-model.gz")
    doc = one(run("scores", "cat bird", "--vectors", "tiny-model", "--raw", "--json"))
    np.testing.assert_allclose(doc["scores"], [[1, 0.5], [0.5, 0.3125]])
    assert "gensim.downloader" not in sys.modules


def test_a_gensim_data_name_not_downloaded_says_how_to_get_it(gensim_data, no_network, cache):
    start = time.monotonic()
    message = fails(run("vectors", "info", "--vectors", "word2vec-google-news-300"), "word2vec-google-news-300",
                    "python -m gensim.downloader --download word2vec-google-news-300", str(gensim_data))
    assert time.monotonic() - start < 5
    assert " MB" not in message  # no catalogue: no size
    with pytest.raises(VectorsError, match="--download word2vec-google-news-300"):
        load_vectors("word2vec-google-news-300")
    assert "gensim.downloader" not in sys.modules
    assert entries(cache) == []


def test_the_catalogue_gives_the_download_size(gensim_data, no_network):
    catalogue = {"models": {"big-model": {"file_size": 123456789}}, "corpora": {"text8": {"file_size": 33182058}}}
    (gensim_data / "information.json").write_text(json.dumps(catalogue))
    fails(run("vectors", "info", "--vectors", "big-model"), "big-model", "(123 MB)",
          "python -m gensim.downloader --download big-model")
    msg = fails(run("vectors", "info", "--vectors", "other-model"), "other-model", "--download other-model")
    assert " MB" not in msg
    (gensim_data / "information.json").write_text("{not json")  # a broken catalogue is no size, no crash
    msg = fails(run("vectors", "info", "--vectors", "big-model"), "big-model", "--download big-model")
    assert " MB" not in msg


def test_a_name_with_a_vectors_suffix_is_a_missing_file_not_a_model(gensim_data):
    fails(run("vectors", "info", "--vectors", "tiny-model.txt"), "tiny-model.txt", "no such file")


# --------------------------------------------------------------------------- 4. bad inputs

HUGE = 10**12


def _bad(tmp_path: Path, case: str) -> tuple[Path, list[str]]:
    """A broken file, and the words its error message must hold (besides the path)."""
    p = tmp_path / "bad.txt"
    rng = np.random.default_rng(5)
    many = [f"w{i}" for i in range(100)]
    M = rng.normal(size=(100, 4)).astype(np.float32)
    if case == "empty":
        p.write_bytes(b"")
        return p, ["empty"]
    if case == "header only":
        p.write_text("3 2\n")
        return p, ["header claims 3 words", "can hold"]
    if case == "prose":
        p.write_text("hello world, this is prose\n")
        return p, ["not a word vectors file"]
    if case == "header says more (text)":
        p.write_text("5 2\n" + "".join(f"w{i} 1 {i}\n" for i in range(4)))
        return p, ["5 words", "holds 4", "truncated"]
    if case == "header says more (binary)":
        p = write_kv(tmp_path / "bad.bin", many, M, binary=True)
        data = p.read_bytes()
        p.write_bytes(b"101 4\n" + data[data.index(b"\n") + 1:])
        return p, ["101 words", "truncated"]
    if case == "header says fewer (text)":
        p.write_text("2 2\ncat 1 0\ndog 0 1\nbird 1 1\n")
        return p, ["says 2 words", "3 lines", "header is wrong"]
    if case == "header says fewer (binary)":
        p = write_kv(tmp_path / "bad.bin", ["cat", "dog", "bird"], M[:3], binary=True)
        data = p.read_bytes()
        p.write_bytes(b"2 4\n" + data[data.index(b"\n") + 1:])
        return p, ["more than the 2 words", "header is wrong"]
    if case == "header says fewer (binary, google newlines)":
        p = write_binary(tmp_path / "bad.bin", ["cat", "dog", "bird"], M[:3], header="2 4\n", newline=True)
        return p, ["more than the 2 words", "header is wrong"]
    if case == "row too short (text)":
        p.write_text("2 3\ncat 1 0 0\ndog 1 0\n")
        return p, ["line 3"]
    if case == "row too long (text)":
        p.write_text("3 3\ncat 1 0 0\ndog 1 0 0 7\nbird 0 0 1\n")
        return p, ["line 3"]
    if case == "row too short (glove)":
        p.write_text("cat 1 0 0\ndog 0 1 0\nbird 1 0\n")
        return p, ["line 3"]
    if case == "row too long (glove)":
        p.write_text("cat 1 0\ndog 1 0 0\n")
        return p, ["line 2"]
    if case == "word without values":
        p.write_text("2 3\ncat 1 0 0\ndog\n")
        return p, ["line 3"]
    if case == "not a number (text)":
        p.write_text("3 3\ncat 1 0 0\ndog 1 x 0\nbird 0 0 1\n")
        return p, ["line 3", "'x'"]
    if case == "not a number (glove)":
        p.write_text("cat 1 0 0\ndog 0 1 0\nbird 1 0,5 0\n")
        return p, ["line 3"]
    if case == "nan (text)":
        p.write_text("3 3\ncat 1 0 0\ndog 1 nan 0\nbird 0 0 1\n")
        return p, ["'dog'", "NaN"]
    if case == "inf (glove)":
        p.write_text("cat 1 0 0\ndog 0 1 0\nbird 1 -inf 0\n")
        return p, ["'bird'", "infinity"]
    if case == "nan (binary)":
        bad = M[:3].copy()
        bad[1, 2] = np.nan
        return write_kv(tmp_path / "bad.bin", ["cat", "dog", "bird"], bad, binary=True), ["'dog'", "NaN"]
    if case == "inf in several (binary)":
        bad = M[:3].copy()
        bad[0, 0] = np.inf
        bad[2, 3] = -np.inf
        return write_kv(tmp_path / "bad.bin", ["cat", "dog", "bird"], bad, binary=True), ["'cat'", "2 words"]
    if case == "dim 0":
        p.write_text("2 0\ncat\ndog\n")
        return p, ["line 1", "0 values"]
    if case == "header 0 words":
        p.write_text("0 3\n")
        return p, ["no word vectors"]
    if case == "truncated binary":
        p = write_kv(tmp_path / "bad.bin", ["cat", "dog", "bird"], M[:3], binary=True)
        p.write_bytes(p.read_bytes()[:-3])
        return p, ["truncated"]
    if case == "corrupt gz":
        p = tmp_path / "bad.txt.gz"
        p.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"garbage!" * 40)
        return p, ["gzip", "corrupt"]
    if case == "truncated gz (small)":
        p = tmp_path / "bad.txt.gz"
        p.write_bytes(gzip.compress(b"3 2\ncat 1 0\ndog 0 1\nbird 1 1\n")[:-12])
        return p, ["gzip", "corrupt"]
    if case == "truncated gz (past the first 64 KiB)":
        p = tmp_path / "bad.txt.gz"
        text = "3000 20\n" + "".join(f"w{i} " + " ".join(f"{x:.5f}" for x in row) + "\n"
                                     for i, row in enumerate(rng.normal(size=(3000, 20))))
        data = gzip.compress(text.encode())
        p.write_bytes(data[: len(data) // 2])
        return p, ["gzip", "corrupt"]
    if case == "truncated bz2":
        p = tmp_path / "bad.txt.bz2"
        p.write_bytes(bz2.compress(b"3 2\ncat 1 0\ndog 0 1\nbird 1 1\n")[:-10])
        return p, ["bz2", "corrupt"]
    raise AssertionError(case)


BAD = [
    "empty", "header only", "prose", "header says more (text)", "header says more (binary)",
    "header says fewer (text)", "header says fewer (binary)", "header says fewer (binary, google newlines)",
    "row too short (text)", "row too long (text)", "row too short (glove)", "row too long (glove)",
    "word without values", "not a number (text)", "not a number (glove)", "nan (text)", "inf (glove)",
    "nan (binary)", "inf in several (binary)", "dim 0", "header 0 words", "truncated binary", "corrupt gz",
    "truncated gz (small)", "truncated gz (past the first 64 KiB)", "truncated bz2",
]


@pytest.mark.parametrize("case", BAD)
def test_a_bad_file_is_one_line_naming_it_and_leaves_no_entry(tmp_path, cache, case):
    path, words = _bad(tmp_path, case)
    fails(run("vectors", "info", "--vectors", path), str(path), *words)
    fails(run("scores", "cat dog", "--vectors", path, "--json"), str(path), *words)
    fails(run("vectors", "convert", path), str(path), *words)
    with pytest.raises(VectorsError):
        load_vectors(path)
    assert entries(cache) == []


def _refused(tmp_path, cache, content: str, *words: str):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    fails(run("vectors", "info", "--vectors", path), str(path), *words)
    assert entries(cache) == []


def test_a_row_of_one_value_is_refused(tmp_path, cache):
    _refused(tmp_path, cache, "2 3\ncat 1 0 0\ndog 5\n", "line 3")


def test_a_glove_row_of_one_value_is_refused(tmp_path, cache):
    _refused(tmp_path, cache, "cat 1 0 0\ndog 5\nbird 0 0 1\n", "line 2")


def test_nan_on_the_first_line_of_a_glove_file_names_the_word(tmp_path, cache):
    _refused(tmp_path, cache, "cat nan 0 0\ndog 1 1 0\n", "'cat'", "NaN")


def test_the_bad_line_is_named_even_after_a_nan_line(tmp_path, cache):
    _refused(tmp_path, cache, "3 2\ncat nan 0\ndog 1 2 3\nbird 1 1\n", "line 3")


@pytest.mark.parametrize(
    "content,message",
    [
        ("", "is empty, not a word vectors file"),
        ("hello world, this is prose\n", "not a word vectors file"),
        ("2 3\ncat 1 0 0\ndog 1 0\n", "line 3"),
        ("cat 1 0 0\ndog 1 0 0\nbird 1 x 0\n", "line 3"),
    ],
)
def test_bad_files(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(VectorsError, match=message) as e:
        load_vectors(path)
    assert str(path) in str(e.value)


def test_missing_and_directory(tmp_path):
    with pytest.raises(VectorsError, match="no such file"):
        load_vectors(tmp_path / "nope.txt")
    with pytest.raises(VectorsError, match="directory"):
        load_vectors(tmp_path)


# --------------------------------------------------------------------------- lines too long


LONG = 64 << 20  # a line of 64 MB: a bound of about 1 MB must stop the read long before its end


def long_file(path: Path, head: bytes, filler: bytes, tail: bytes = b"", *, how: str | None) -> Path:
    """head, then LONG bytes of `filler` with no newline, then tail: compressed a megabyte at a
    time, so the file is tiny on disk and never held whole."""
    block = filler * ((1 << 20) // len(filler))
    if how == "bz2":
        packer = bz2.BZ2Compressor()
    elif how == "gzip":
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: the gzip format
    with open(path, "wb") as f:
        if how is None:
            f.write(head + block * (LONG // len(block)) + tail)
            return path
        f.write(packer.compress(head))
        for _ in range(LONG // len(block)):
            f.write(packer.compress(block))
        f.write(packer.compress(tail) + packer.flush())
    return path


LONG_LINES = [
    # (name, head, filler, tail, the line named): a word with no end, a row of values with no end, a header
    ("w2v.txt", b"2 4\ncat 1 2 3 4\n", b"w", b" 1 2 3 4\n", "line 3"),
    ("w2v-values.txt", b"1 4\n", b"0 ", b"\n", "line 2"),
    ("glove.txt", b"cat 1 2 3 4\n", b"w", b"\n", "line 2"),
    ("glove-first.txt", b"", b"w", b" 1 2\n", "line 1"),
    ("header.txt", b"1 ", b" ", b"4\ncat 1 2 3 4\n", "line 1"),
]


# one plain file of 64 MB is enough; the others compressed, each both ways
LONG_CASES = [(None, LONG_LINES[0])] + [(how, case) for case in LONG_LINES for how in ("gzip", "bz2")]


@pytest.mark.parametrize("how,case", LONG_CASES, ids=[f"{c[0]}-{how}" for how, c in LONG_CASES])
def test_a_line_far_too_long_is_refused_at_once_naming_it(tmp_path, cache, how, case):
    name, head, filler, tail, line = case
    path = long_file(tmp_path / (name + {None: "", "gzip": ".gz", "bz2": ".bz2"}[how]), head, filler, tail, how=how)
    assert how is None or path.stat().st_size < 1 << 20
    start = time.monotonic()
    fails(run("vectors", "info", "--vectors", path), str(path), line, "longer than")
    assert time.monotonic() - start < 20  # loose, for a shared machine: it reads about 1 MB of the 64
    assert entries(cache) == []


@pytest.mark.parametrize("how", [None, "gzip"])
def test_a_binary_word_far_too_long_is_refused_at_once(tmp_path, cache, how):
    row = np.array([1, 2, 3, 4], dtype="<f4").tobytes()
    path = long_file(tmp_path / ("long.bin" + (".gz" if how else "")), b"2 4\ncat " + row, b"w", b" " + row,
                     how=how)
    fails(run("vectors", "info", "--vectors", path), str(path), "from byte 8 on", "longer than 1,048,576 bytes")
    assert entries(cache) == []


def test_a_bound_that_holds_every_real_line(tmp_path, cache):
    """A line just under the bound loads: a long word (a URL, say) of 1,000,000 bytes, and a
    row of values each written with 60 characters."""
    word = "w" * 1_000_000
    values = " ".join(f"{x:.52e}" for x in (0.5, -0.25, 1.0))  # 60 characters each
    path = tmp_path / "wide.txt"
    path.write_text(f"2 3\n{word} {values}\ncat 1 2 3\n")
    v = load_vectors(path)
    assert [v.vocab.word(0), v.vocab.word(1)] == [word, "cat"]
    assert v.matrix[0].tolist() == [0.5, -0.25, 1.0]


def test_a_fasttext_word_far_too_long_is_refused_at_once(fasttext_files, tmp_path, cache):
    folder, _ = fasttext_files
    data = (folder / "ft.bin").read_bytes()
    end = data.index(b"\0", 92)  # the first word of the dictionary
    path = tmp_path / "long.bin"
    path.write_bytes(data[:92] + b"w" * (3 << 20) + data[end:])
    start = time.monotonic()
    fails(run("vectors", "info", "--vectors", path), str(path), "word 1", "longer than 1,048,576 bytes")
    assert time.monotonic() - start < 20
    assert entries(cache) == []


def test_a_binary_header_one_word_short_is_caught_for_gensim_written_files(tmp_path, cache):
    words = [f"w{i}" for i in range(100)]
    p = write_kv(tmp_path / "bad.bin", words, random_matrix(100, 4), binary=True)
    data = p.read_bytes()
    p.write_bytes(b"99 4\n" + data[data.index(b"\n") + 1:])
    fails(run("vectors", "info", "--vectors", p), str(p), "header is wrong")
    assert entries(cache) == []


@pytest.mark.parametrize("kind", ["text", "glove", "binary"])
def test_a_duplicate_word_keeps_its_first_vector_with_a_warning(tmp_path, cache, kind):
    words = ["cat", "dog", "cat"]
    M = np.array([[1, 0], [0, 1], [5, 5]], dtype=np.float32)
    if kind == "binary":
        path = write_binary(tmp_path / "dup.bin", words, M)
    elif kind == "glove":
        path = write_glove(tmp_path / "dup.txt", words, M)
    else:
        path = tmp_path / "dup.txt"
        path.write_text("3 2\ncat 1 0\ndog 0 1\ncat 5 5\n")
    result = CliRunner().invoke(cli, ["vectors", "info", "--vectors", str(path), "--json"], prog_name="attncli")
    assert result.exit_code == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr == f"attncli: warning: {path}: 1 word occurs twice or more; its first vector is kept\n"
    assert result.stderr.count("\n") == 1
    assert json.loads(result.stdout)["words"] == 2
    v = load_vectors(path)
    assert words_of(v) == ["cat", "dog"]
    np.testing.assert_array_equal(v.matrix, M[:2])


def test_a_text_file_with_a_control_character_in_a_word_is_text(tmp_path, cache):
    path = tmp_path / "ctrl.txt"
    path.write_text("3 2\ncat 1 0\nca\x1bt 0 1\ndog 1 1\n")
    fmt = detect(resolve(str(path)))
    assert fmt.kind == "word2vec-text"
    v = load_vectors(path)
    assert words_of(v) == ["cat", "ca\x1bt", "dog"]


@pytest.mark.parametrize("kind", ["text", "binary", "text.gz"])
def test_a_header_claiming_a_trillion_words_fails_fast_without_allocating(tmp_path, cache, kind):
    import gensim.models  # noqa: F401  (its import is not what is measured)

    if kind == "binary":
        path = write_binary(tmp_path / "huge.bin", ["cat", "dog"], random_matrix(2, 3), header=f"{HUGE} 3\n")
    else:
        path = tmp_path / "huge.txt"
        path.write_text(f"{HUGE} 3\ncat 1 0 0\ndog 0 1 0\n")
        if kind == "text.gz":
            path = compressed(path, "gzip")
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(VectorsError, match="memory") as e:
            load_vectors(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 5
    assert peak < 20 * 2**20, peak
    assert str(path) in str(e.value) and "1,000,000,000,000" in str(e.value)
    fails(run("vectors", "info", "--vectors", path), str(path), "memory", "--limit")
    assert entries(cache) == []


def test_a_header_claiming_more_than_the_file_can_hold_fails_fast(tmp_path, cache):
    path = tmp_path / "big.txt"
    path.write_text("100000000 3\ncat 1 0 0\n")  # 1.2 GB of floats: fits in memory, not in 22 bytes
    start = time.monotonic()
    fails(run("vectors", "info", "--vectors", path), str(path), "100,000,000 words", "can hold")
    assert time.monotonic() - start < 5
    # with --limit, only the limit counts
    fails(run("vectors", "info", "--vectors", path, "--limit", "5"), str(path), "can hold")
    assert entries(cache) == []


def test_words_not_utf8_in_a_binary_file_are_replaced_with_a_warning(tmp_path, cache):
    M = random_matrix(3, 4, seed=2)
    path = write_binary(tmp_path / "v.bin", [b"caf\xe9", b"dog", b"\xff\xfe"], M)
    result = run("vectors", "info", "--vectors", path, "--json")
    doc = one(result, stderr=None)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: warning: ") and str(path) in lines[0]
    assert "2 words are not valid UTF-8; their bad bytes" in lines[0] and "\ufffd" in lines[0]
    assert doc["words"] == 3
    v = load_vectors(path)
    assert words_of(v) == ["caf\ufffd", "dog", "\ufffd\ufffd"]
    np.testing.assert_array_equal(v.matrix, M)
    np.testing.assert_array_equal(v.vector("caf\ufffd"), M[0])


def test_a_path_with_a_tilde_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    M = random_matrix(3, 2, seed=8)
    write_kv(tmp_path / "v.txt", ["a", "b", "c"], M, binary=False)
    v = load_vectors("~/v.txt")
    assert words_of(v) == ["a", "b", "c"]
    np.testing.assert_array_equal(v.matrix, M)
    assert one(run("vectors", "info", "--vectors", "~/v.txt", "--json"))["words"] == 3


@pytest.mark.parametrize("what", ["directory", "missing", "missing in a missing folder"])
def test_a_directory_or_missing_path(tmp_path, cache, what):
    path = {"directory": tmp_path, "missing": tmp_path / "nope.txt",
            "missing in a missing folder": tmp_path / "no" / "such" / "v.bin"}[what]
    words = {"directory": ["is a directory"]}.get(what, ["no such file"])
    for args, named in ((["vectors", "info", "--vectors", path], "--vectors"),
                        (["scores", "cat", "--vectors", path], "--vectors"), (["vectors", "convert", path], "SOURCE")):
        line = fails(run(*args), str(path), *words, f"give {named} a word vectors file")
        assert ("--vectors" in line) == (named == "--vectors"), line  # convert takes SOURCE, not --vectors
        assert ("bundled" in line) == (named == "--vectors" and what != "directory"), line
    assert not cache.exists() or entries(cache) == []


def test_the_library_names_the_source_as_its_caller_says(tmp_path):
    with pytest.raises(VectorsError, match="give SOURCE a word vectors file"):
        load_vectors(tmp_path / "nope.txt", param="SOURCE")
    with pytest.raises(VectorsError, match="give --vectors a word vectors file"):
        load_vectors(tmp_path / "nope.txt")


def _special(tmp_path: Path, what: str) -> Path:
    if what == "fifo":
        path = tmp_path / "v.txt"
        os.mkfifo(path)
        return path
    if what == "symlink to /dev/zero":
        path = tmp_path / "v.bin"
        path.symlink_to("/dev/zero")
        return path
    return Path("/dev/zero")


@pytest.mark.parametrize("what", ["/dev/zero", "fifo", "symlink to /dev/zero"])
def test_devices_and_fifos_are_refused_without_reading(tmp_path, cache, what):
    path = _special(tmp_path, what)
    env = {**os.environ, "ATTNCLI_CACHE_DIR": str(cache)}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "attncli", "vectors", "info", "--vectors", str(path)],
                          capture_output=True, text=True, timeout=20, env=env, stdin=subprocess.DEVNULL)
    assert time.monotonic() - start < 20
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"attncli: error: {path}: not a regular file") and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("url", ["http://example.com/v.txt", "https://example.com/v.bin.gz", "ftp://x/y",
                                 "hdfs://a/b", "s3://bucket/vectors.txt", "file:///tmp/v.txt"])
def test_urls_are_refused_without_touching_the_network(cache, no_network, url):
    start = time.monotonic()
    fails(run("vectors", "info", "--vectors", url), url, "only local files")
    fails(run("vectors", "convert", url), url, "only local files")
    with pytest.raises(VectorsError, match="only local files"):
        load_vectors(url)
    assert time.monotonic() - start < 5
    assert not cache.exists() or entries(cache) == []


def _no_nan(constant):
    raise AssertionError(f"JSON holds {constant}")


def test_zero_vectors_never_give_nan(tmp_path):
    path = tmp_path / "zero.txt"
    path.write_text("5 3\ncat 0 0 0\ndog 1 0 0\nbird 0 1 0\nfish 0 0 0\nfrog 1 1 0\n")
    result = run("context", "cat dog bird", "--all", "--token", "cat", "--neighbors", "10", "--vectors", path, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout, parse_constant=_no_nan)
    assert doc["tokens"] == ["cat", "dog", "bird"]
    assert doc["token_neighbors"] == []  # a zero vector has no cosine with anything
    # cat's scores are all 0: uniform weights; its context is the mean of the three vectors
    np.testing.assert_allclose(doc["weights"], [1 / 3] * 3)
    np.testing.assert_allclose(doc["context"], [1 / 3, 1 / 3, 0])
    # the neighbours of (1/3, 1/3, 0): frog (cos 1), then dog and bird (cos 1/sqrt 2); never the zero rows
    assert [n["word"] for n in doc["neighbors"]][:1] == ["frog"]
    assert {n["word"] for n in doc["neighbors"]} <= {"frog", "dog", "bird"}
    for n in doc["neighbors"]:
        assert math.isfinite(n["cosine"])
    assert len(doc["contexts"]) == 3
    scores = json.loads(run("scores", "cat fish dog", "--vectors", path, "--json").stdout, parse_constant=_no_nan)
    np.testing.assert_allclose(scores["weights"][0], [1 / 3] * 3)
    v = load_vectors(path)
    assert v.nearest(np.zeros(3), 3) == []
    assert [w for w, _ in v.nearest(np.array([1.0, 0, 0]), 10)] == ["dog", "frog", "bird"]
