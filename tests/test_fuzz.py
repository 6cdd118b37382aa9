"""Fuzz tests: for any input, attncli gives a result or its own error, and nothing else.

The contract, checked on generated inputs with hypothesis: every reader of outside bytes
returns a result or raises AttncliError (or a subclass) with a non-empty message; never
another exception, never a hang (10 s an example), never memory beyond a bound (the
process's peak RSS may not grow by more than 500 MB during an example; the address space
is capped a few GB above, so that a runaway allocation cannot take a shared machine down).
Targets:

    tokenize        tokenize(text, lowercase=...) on any text
    vectors-*       load_vectors on word2vec text/binary, GloVe, fastText .bin, .gz, .bz2
                    files written by gensim and then mutated, and on random bytes
    cache-entry     a real cache entry with one file damaged, read by read_entry or load_vectors
    npz-*           .npz projections / RNN weights: np.savez'd, hand-zipped, mutated
    decode, parse-lines, cli-stdin
                    standard input: cli.decode, batch.parse_lines, and the whole CLI

Crashes fuzzing has found are kept below as explicit regression tests, each with its
minimal input and the outcome attncli gives it now (its error, or its result); all are
mended. A crash found later and not mended at once can be listed in
KNOWN (and pinned by an xfail(strict=True) test), so the targets count it instead of
failing; any other crash fails.

Longer runs: python fuzz/long.py --minutes 5 (it runs these same targets in a loop and
prints examples and outcomes per target). ATTNCLI_FUZZ_EXAMPLES=N scales this file's
pytest run to N examples a target.
"""

from __future__ import annotations

import bz2
import collections
import contextlib
import functools
import gzip
import io
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attncli.cli import cli
from attncli.cli.inputs import decode
from attncli.corpus import batch
from attncli.errors import AttncliError, InputError, VectorsError
from attncli.learning import projections
from attncli.words import entry as entry_module
from attncli.words import plaintext, sources
from attncli.words.load import load_vectors
from attncli.words.tokenize import tokenize
from attncli.words.vectors import Vectors

# gensim's own numeric warnings on nonsense headers, and zipfile's on duplicate member names,
# are not part of the contract
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::UserWarning")

TIME_BOUND = 10.0  # seconds an example
RSS_BOUND = 500 << 20  # bytes the peak RSS may grow by during an example
ADDRESS_SPACE_HEADROOM = 6 << 30  # a safety net: a runaway allocation fails instead of swapping the machine

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much, HealthCheck.large_base_example]
settings.register_profile("attncli-fuzz", max_examples=150, deadline=None, suppress_health_check=_HEALTH,
                          print_blob=True)
# fuzz/long.py's batches (it sets max_examples): no example database, no time spent explaining a failure
settings.register_profile("long", max_examples=1_000, deadline=None, suppress_health_check=_HEALTH,
                          database=None, print_blob=True,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink])
FUZZ = settings(settings.get_profile("attncli-fuzz"),
                max_examples=int(os.environ.get("ATTNCLI_FUZZ_EXAMPLES") or 150))


# --------------------------------------------------------------------------- the contract


class Hang(BaseException):
    """Raised by SIGALRM in the main thread when an example overruns TIME_BOUND."""


class ContractViolation(AssertionError):
    """An outcome that is neither a result nor AttncliError: an exception, a hang, too much memory."""


# outcomes of the contract runs per target, for fuzz/long.py's summary: "ok", "error: VectorsError",
# "known: NAME", ... One a case under the target's own name; a second run in the same case goes
# under "NAME (what)" (a second load from the cache), and notes, which are no outcome, to NOTES.
STATS: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
NOTES: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"{field}:\s+(\d+) kB", f.read()).group(1))


def start_peak() -> int:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux clear_refs 5) and return
    what it is now, in bytes; where it cannot be reset, the peak so far (the growth measured
    is then only what pushes the process's peak higher)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_kib("VmRSS") * 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_rss() -> int:
    try:
        return _status_kib("VmHWM") * 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


@contextlib.contextmanager
def memory_cap():
    """Cap the address space at what is mapped now plus ADDRESS_SPACE_HEADROOM, so that a
    runaway allocation raises MemoryError rather than take a shared machine's memory.
    Restores the old limit after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _status_kib("VmSize") * 1024 + ADDRESS_SPACE_HEADROOM
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextlib.contextmanager
def time_bound(seconds: float):
    def overrun(signum, frame):
        raise Hang(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, overrun)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def environment(**values):
    before = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass(frozen=True)
class Known:
    """A crash fuzzing found, pinned by the regression test `test`: an exception of type
    `exc` escaping the attncli function `escapes` (file, function), raised in `inner` (the
    innermost frame's function) when given."""

    name: str
    exc: type
    escapes: tuple[str, str]
    inner: str | None = None
    test: str = ""


KNOWN: list[Known] = []  # none open: every crash found so far is mended and pinned below
# Mended in commit 3139613, and so no longer excused (each has its plain regression test below):
# fastText NotImplementedError (supervised), OverflowError (_load_matrix, compute_ngrams_bytes,
# prepare_vocab), the hang of a .bin cut inside its dictionary; read_entry's AttributeError,
# KeyError, BadZipFile, OverflowError, tokenize.TokenError; read_arrays' AttributeError,
# TokenError, OverflowError, MemoryError, NotImplementedError, RuntimeError, zlib.error;
# parse_lines' RecursionError.

# Recognised from the input, before it runs (a hang or a memory blow-up would cost the time
# bound, or the RSS bound of every later example): fasttext_vocabulary_ends_early and
# claims_huge_compressed_header below. Name: the xfail test that pins it.
RECOGNISED: dict[str, str] = {}  # none open: both inputs below are now refused by the tool and run


def _frames(e: BaseException) -> list[traceback.FrameSummary]:
    return traceback.extract_tb(e.__traceback__)


def where(e: BaseException) -> str:
    """'raised at FILE:LINE in FUNC; through attncli at FILE:LINE in FUNC'."""
    frames = _frames(e)
    if not frames:
        return "no traceback"
    inner = frames[-1]
    out = f"raised at {inner.filename}:{inner.lineno} in {inner.name}"
    ours = [f for f in frames if f"{os.sep}attncli{os.sep}" in f.filename]
    if ours and ours[-1] is not inner:
        out += f"; through attncli at {Path(ours[-1].filename).name}:{ours[-1].lineno} in {ours[-1].name}"
    return out


def match_known(e: BaseException) -> Known | None:
    frames = _frames(e)
    for k in KNOWN:
        if not isinstance(e, k.exc):
            continue
        file, function = k.escapes
        if not any(f.filename.endswith(os.sep + file) and f"{os.sep}attncli{os.sep}" in f.filename
                   and f.name == function for f in frames):
            continue
        if k.inner is not None and not any(f.name == k.inner for f in frames[-3:]):
            continue
        return k
    return None


def run_contract(target: str, fn, *, allowed: tuple[type, ...] = (AttncliError,), allow_known: bool = True,
                 seconds: float = TIME_BOUND):
    """Run fn() under the contract. Returns ("ok", result), ("error", exception) or, for a
    crash in KNOWN when allow_known, ("known", Known); raises ContractViolation otherwise.
    Memory: the peak RSS is reset before each example and may not grow by more than
    RSS_BOUND during it (pages touched, not address space merely reserved)."""
    start = time.perf_counter()
    rss_before = start_peak()
    try:
        with time_bound(seconds):
            result = fn()
        outcome = ("ok", result)
    except allowed as e:
        if not str(e).strip():
            raise ContractViolation(f"{type(e).__name__} with an empty message; {where(e)}") from e
        outcome = ("error", e)
    except (Exception, Hang, SystemExit) as e:
        known = match_known(e)
        if known is None or not allow_known:
            raise ContractViolation(f"{type(e).__name__}: {str(e)[:300]} ({where(e)})") from e
        STATS[target][f"known: {known.name}"] += 1
        return "known", known
    elapsed = time.perf_counter() - start
    if elapsed > seconds:
        raise ContractViolation(f"took {elapsed:.1f} s, more than {seconds:g} s")
    grown = peak_rss() - rss_before
    if grown > RSS_BOUND:
        raise ContractViolation(f"raised the peak RSS by {grown >> 20} MB, more than {RSS_BOUND >> 20} MB")
    kind, value = outcome
    STATS[target][kind if kind == "ok" else f"error: {type(value).__name__}"] += 1
    return outcome


def skip_known(target: str, name: str) -> None:
    STATS[target][f"known: {name} (recognised, not run)"] += 1


# --------------------------------------------------------------------------- seed files


WORDS = ["the", "earth", "is", "like", "an", "orange", "café", "東京"]
FASTTEXT_MAGIC = struct.pack("<i", 793712314)


def fasttext_bin(*, dim=1, ws=5, epoch=1, min_count=1, neg=5, word_ngrams=1, loss=2, model=2, bucket=1, minn=1,
                 maxn=1, lr_update_rate=100, t=1e-4, words=(b"a",), vocab_size=None, nwords=None, nlabels=0,
                 rows=None, cols=None) -> bytes:
    """A Facebook fastText .bin by hand, field by field (gensim's _fasttext_bin layout, new
    format): magic, version, 12 int32 arguments and the double t; the dictionary (sizes,
    ntokens, pruneidx_size, then each word NUL-terminated with its count and type); the
    input matrix (quant flag, rows, cols, float32 values: nwords + bucket rows by default).
    The hidden output matrix is left out: attncli never reads it."""
    out = FASTTEXT_MAGIC + struct.pack("<i", 12)
    out += struct.pack("<12i", dim, ws, epoch, min_count, neg, word_ngrams, loss, model, bucket, minn, maxn,
                       lr_update_rate)
    out += struct.pack("<d", t)
    n = len(words)
    out += struct.pack("<3i", n if vocab_size is None else vocab_size, n if nwords is None else nwords, nlabels)
    out += struct.pack("<qq", n, -1)  # ntokens, pruneidx_size
    for w in words:
        out += w + b"\0" + struct.pack("<qb", 1, 0)
    rows = n + bucket if rows is None else rows
    cols = dim if cols is None else cols
    out += struct.pack("<?qq", False, rows, cols) + np.full(max(0, min(rows * cols, 256)), 0.25, "<f4").tobytes()
    return out


@functools.cache
def seeds() -> dict[str, bytes]:
    """Valid vectors files of every format, written by gensim (and one GloVe and one fastText
    .bin by hand): what the mutations start from, so that they reach deep into the readers."""
    import logging

    from gensim.models import FastText, KeyedVectors
    from gensim.models.fasttext import save_facebook_model

    logging.getLogger("gensim").setLevel(logging.ERROR)
    M = (np.random.default_rng(0).integers(-64, 64, size=(len(WORDS), 5)) / 16).astype(np.float32)
    kv = KeyedVectors(vector_size=5)
    kv.add_vectors(WORDS, M)
    out = {}
    with tempfile.TemporaryDirectory(prefix="attncli-fuzz-seeds-") as tmp:
        for name, binary in (("w2v.txt", False), ("w2v.bin", True)):
            kv.save_word2vec_format(os.path.join(tmp, name), binary=binary)
            out[name] = Path(tmp, name).read_bytes()
        sentences = [WORDS, WORDS[:4], WORDS[3:]]
        ft = FastText(vector_size=4, window=2, min_count=1, bucket=20, min_n=2, max_n=3, epochs=1, workers=1, seed=1)
        ft.build_vocab(corpus_iterable=sentences)
        ft.train(corpus_iterable=sentences, total_examples=len(sentences), epochs=1)
        save_facebook_model(ft, os.path.join(tmp, "fasttext.bin"))
        out["fasttext.bin"] = Path(tmp, "fasttext.bin").read_bytes()
    out["glove.txt"] = "".join(w + " " + " ".join(repr(float(x)) for x in row) + "\n"
                               for w, row in zip(WORDS, M)).encode()
    out["fasttext-min.bin"] = fasttext_bin(words=(b"a", b"bc"), dim=2, bucket=3, minn=1, maxn=2)
    return out


TEXT_SEEDS = ("w2v.txt", "w2v.bin", "glove.txt")
FASTTEXT_SEEDS = ("fasttext.bin", "fasttext-min.bin")


def compress(data: bytes, how: str | None) -> bytes:
    if how == "gzip":
        return gzip.compress(data, mtime=0)
    if how == "bz2":
        return bz2.compress(data)
    return data


# --------------------------------------------------------------------------- byte mutations


# numbers a header or a field may be replaced with: edges, huge, negative
INTS = st.one_of(st.sampled_from([0, 1, -1, 2, 7, 8, 9, 255, 2**31 - 1, -2**31, 2**32, 10**6, 10**12, 2**63 - 1,
                                  2**63, 10**30]),
                 st.integers(-10, 10**7))
ODD_NUMBERS = [b"nan", b"NaN", b"inf", b"-inf", b"Infinity", b"1e999", b"-1e999", b"-0", b"0x10", b"1_0", b"",
               b"\xd9\xa3", b"1e-999", b"3.4e38", b"3.5e38"]
ODD_WORD_BYTES = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\x80", b"\x00", b"\r", b"\x0b", b"\xc2\x85",
                  b"\xe2\x80\xa8", b" ", b"\t", b"\xef\xbb\xbf", b"\x80\x04"]


def _pos(draw, data, extra=0) -> int:
    return draw(st.integers(0, max(len(data) - 1 + extra, 0)))


def _lines(data: bytearray) -> list[bytes]:
    return bytes(data).split(b"\n")


def op_flip(draw, data):
    if data:
        i = _pos(draw, data)
        data[i] ^= 1 << draw(st.integers(0, 7))
    return data


def op_set_byte(draw, data):
    if data:
        data[_pos(draw, data)] = draw(st.sampled_from([0, 0xFF, 0x80, 0x0A, 0x20, 0x7F, ord("0"), ord("-")]))
    return data


def op_insert(draw, data):
    i = _pos(draw, data, 1)
    data[i:i] = draw(st.binary(min_size=1, max_size=8) | st.sampled_from(ODD_WORD_BYTES + ODD_NUMBERS))
    return data


def op_delete(draw, data):
    i = _pos(draw, data)
    del data[i : i + draw(st.integers(1, 16))]
    return data


def op_truncate(draw, data):
    del data[_pos(draw, data, 1):]
    return data


def op_header(draw, data):
    """A word2vec header 'COUNT DIM' of drawn numbers (or a drawn first line)."""
    lines = _lines(data)
    if draw(st.integers(0, 9)):
        lines[0] = f"{draw(INTS)} {draw(INTS)}".encode()
    else:
        lines[0] = draw(st.sampled_from([b"", b"5", b"1 2 3", b" 8 5", b"8  5", b"8\t5", b"+8 5", b"8 5.0",
                                         b"\xd9\xa3 5", b"8 5 \r"]))
    return bytearray(b"\n".join(lines))


def op_duplicate_line(draw, data):
    lines = _lines(data)
    i = draw(st.integers(0, len(lines) - 1))
    lines.insert(draw(st.integers(0, len(lines))), lines[i])
    return bytearray(b"\n".join(lines))


def op_number(draw, data):
    """Replace one space-separated field of one line by NaN, infinity or a malformed number."""
    lines = _lines(data)
    i = draw(st.integers(0, len(lines) - 1))
    fields = lines[i].split(b" ")
    fields[draw(st.integers(0, len(fields) - 1))] = draw(st.sampled_from(ODD_NUMBERS))
    lines[i] = b" ".join(fields)
    return bytearray(b"\n".join(lines))


def op_word_bytes(draw, data):
    """Invalid UTF-8, a NUL, a line break or a space into a word (the start of a line)."""
    lines = _lines(data)
    i = draw(st.integers(0, len(lines) - 1))
    at = draw(st.integers(0, min(len(lines[i]), 4)))
    lines[i] = lines[i][:at] + draw(st.sampled_from(ODD_WORD_BYTES)) + lines[i][at:]
    return bytearray(b"\n".join(lines))


def op_fasttext_field(draw, data):
    """One numeric field of a fastText .bin header: the int32 arguments, t, the dictionary's
    sizes, ntokens and pruneidx_size."""
    offset, fmt = draw(st.sampled_from([(o, "<i") for o in range(8, 56, 4)] + [(56, "<d")]
                                       + [(o, "<i") for o in (64, 68, 72)] + [(76, "<q"), (84, "<q")]))
    if fmt == "<d":
        value = struct.pack(fmt, draw(st.floats() | st.sampled_from([0.0, -1.0, 1e300])))
    else:
        bits = 32 if fmt == "<i" else 64
        value = struct.pack(fmt, draw(INTS.filter(lambda x: -2**(bits - 1) <= x < 2**(bits - 1))))
    data[offset : offset + len(value)] = value
    return data


def op_splice(draw, data):
    other = seeds()[draw(st.sampled_from(sorted(seeds())))]
    a = draw(st.integers(0, len(other)))
    piece = other[a : a + draw(st.integers(1, 64))]
    i = _pos(draw, data, 1)
    data[i:i] = piece
    return data


BYTE_OPS = [op_flip, op_set_byte, op_insert, op_delete, op_truncate, op_splice]
TEXT_OPS = BYTE_OPS + [op_header, op_duplicate_line, op_number, op_word_bytes]
FASTTEXT_OPS = BYTE_OPS + [op_fasttext_field] * 3


def mutate(draw, data: bytes, ops, most: int = 4) -> bytes:
    data = bytearray(data)
    for _ in range(draw(st.integers(0, most))):
        data = draw(st.sampled_from(ops))(draw, data)
    return bytes(data)


@st.composite
def vector_files(draw, names=TEXT_SEEDS):
    """A seed file mutated, then maybe compressed, then maybe its compressed bytes mutated."""
    name = draw(st.sampled_from(names))
    data = mutate(draw, seeds()[name], TEXT_OPS if name in TEXT_SEEDS else FASTTEXT_OPS)
    how = draw(st.sampled_from([None, None, "gzip", "bz2"] if name in TEXT_SEEDS else [None] * 7 + ["gzip"]))
    data = compress(data, how)
    if how and draw(st.integers(0, 3)) == 0:
        data = mutate(draw, data, BYTE_OPS, most=2)
    return data


@st.composite
def random_vector_files(draw):
    """Bytes with no structure, or with just the start of one: a header, a magic number."""
    start = draw(st.sampled_from([b"", b"", b"3 2\n", b"a 1 2\n", FASTTEXT_MAGIC, b"\x1f\x8b", b"BZh", b"\x80\x04",
                                  b"PK\x03\x04"]))
    return start + draw(st.binary(max_size=600))


# --------------------------------------------------------------------------- known crashes, by their input


def _refused_by_fasttext_size_check(data: bytes) -> bool:
    from attncli.words import sources

    check = getattr(sources, "_check_fasttext_size", None)
    if check is None:
        return False
    with tempfile.TemporaryDirectory(prefix="attncli-fuzz-") as tmp:
        path = Path(tmp, "model.bin")
        path.write_bytes(data)
        try:
            check(sources.Source(path, str(path), path.stat()))
        except AttncliError:
            return True
    return False


# --------------------------------------------------------------------------- target: tokenize


PTB_PIECES = ["n't", "'s", "'re", "'", '"', "...", "\u2026", "--", "\u2014", "\u2018", "\u2019", "\u201c", "\u201d",
              "u.s.", "10:30", "1,000", "3.14", ".", ",", ":", "(", ")", "Don't", "earth's", " ", "\t", "\n", "\x85",
              "\u2028", "\u3000", "\x1c", "\x00", "\u0130", "\u00df", "\ufb03", "\u212a", "\x0b", "\u200b"]
tokenize_texts = st.one_of(st.text(), st.lists(st.sampled_from(PTB_PIECES) | st.text(max_size=3), max_size=30).map("".join))


def check_tokenize(text: str, lowercase: bool) -> None:
    kind, tokens = run_contract("tokenize", lambda: tokenize(text, lowercase=lowercase), allowed=())
    assert isinstance(tokens, list)
    for t in tokens:
        assert isinstance(t, str) and t, tokens
        assert not any(c.isspace() for c in t), (t, tokens)


# --------------------------------------------------------------------------- target: vectors files


def check_vectors_result(v: Vectors) -> None:
    """What a load promises: a float32 (V, d) matrix of finite numbers, unique words that
    decode and are found at their own row, finite subword vectors."""
    assert isinstance(v, Vectors)
    M = np.asarray(v.matrix)
    assert M.dtype == np.float32 and M.ndim == 2 and M.shape[0] == v.size >= 1, (M.dtype, M.shape, v.size)
    assert np.all(np.isfinite(M))
    words = [v.vocab.word(i) for i in range(v.size)]
    assert len(set(words)) == len(words), words
    for i, w in enumerate(words):
        assert "\n" not in w and v.vocab.find(w) == i, (i, w)
    if v.subwords is not None:
        assert np.all(np.isfinite(np.asarray(v.subwords.matrix)))


def words_and_matrix(v: Vectors) -> tuple[list[str], np.ndarray]:
    return [v.vocab.word(i) for i in range(v.size)], np.array(v.matrix)


def check_plain_text_is_gensims(target: str, path: Path) -> None:
    """Where the fast reader of text files (plaintext.read_plain_text) takes a file, gensim's
    own reader takes it too and gives the same words and the same float32 bits."""
    try:
        source = sources.resolve(str(path))
        fmt = sources.detect(source)
        if fmt.kind not in ("word2vec-text", "glove"):
            return
        prefix = b""
        if fmt.kind == "glove":
            fmt.count, fmt.dim = sources._glove_size(source, fmt, None)
            prefix = f"{fmt.count} {fmt.dim}\n".encode()
        sources._check_header(source, fmt, None)
    except AttncliError:
        return
    plain = plaintext.read_plain_text(source, fmt, None, lambda done: done, 1, None)
    if plain is None:
        NOTES[target]["note: a text file left to gensim"] += 1
        return
    NOTES[target]["note: a text file read without gensim"] += 1
    with sources._quiet():
        words, M = sources._read_through_gensim(source, fmt, None, None, prefix, 0, source.stat.st_size)
    assert plain[0] == words and plain[1].dtype == M.dtype and plain[1].tobytes() == M.tobytes(), (plain, words, M)


def check_vectors_file(target: str, data: bytes, use_cache: bool) -> None:
    """load_vectors on `data` as a file: Vectors or AttncliError; with the cache, a second
    load (from the entry) gives the very same words and numbers."""
    with tempfile.TemporaryDirectory(prefix="attncli-fuzz-") as tmp:
        path = Path(tmp, "vectors")
        path.write_bytes(data)
        check_plain_text_is_gensims(target, path)
        with environment(ATTNCLI_CACHE_DIR=Path(tmp, "cache")):
            kind, v = run_contract(target, lambda: load_vectors(path, use_cache=use_cache))
            if kind != "ok":
                return
            check_vectors_result(v)
            if v.dim == 0:
                NOTES[target]["note: a result of dimension 0"] += 1
            if use_cache:
                kind, again = run_contract(target + " (cached)", lambda: load_vectors(path))
                assert kind == "ok", again
                assert again.meta.get("entry"), "the second load did not come from the cache"
                words, M = words_and_matrix(v)
                words2, M2 = words_and_matrix(again)
                assert words2 == words and np.array_equal(M2, M)


# --------------------------------------------------------------------------- target: cache entries


ENTRY_FILES = ("vectors.npy", "vectors.words.txt", "vectors.offsets.npy", "vectors.order.npy", "vectors.json")


@dataclass
class Entry:
    source: Path
    folder: Path  # the pristine entry, copied into each example's cache dir
    words: list[str]
    matrix: np.ndarray
    ngrams: np.ndarray | None


@functools.cache
def entries() -> dict[str, Entry]:
    """A real cache entry of a word2vec text file, and one of a fastText .bin (with n-grams)."""
    root = Path(tempfile.mkdtemp(prefix="attncli-fuzz-entries-"))
    import atexit

    atexit.register(shutil.rmtree, root, ignore_errors=True)
    out = {}
    for name in ("w2v.txt", "fasttext.bin"):
        source = root / name
        source.write_bytes(seeds()[name])
        with environment(ATTNCLI_CACHE_DIR=root / "cache"):
            v = load_vectors(source)
        words, M = words_and_matrix(v)
        ngrams = np.array(v.subwords.matrix) if v.subwords is not None else None
        out[name] = Entry(source, Path(v.meta["entry"]).parent, words, M, ngrams)
    return out


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.sampled_from([2**63, 10**30, -1, 0, 1.5, float("nan")])
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
META_KEYS = ["format", "version", "name", "words", "dim", "cased", "source", "options", "files", "mtimes",
             "subwords", "created_by", "created"]
NPY_DESCRS = ["<f4", "<f8", "<i8", "<i4", "|O", "V5", "<U3", "|S2", ">f4", "|b1", "<c8", "<M8[s]", "f4", "",
              "x", "[('a', '<f4')]"]


def edit_json(draw, data: bytes) -> bytes:
    meta = json.loads(data)
    how = draw(st.integers(0, 9))
    if how == 0:
        return json.dumps(draw(json_values)).encode()
    key = draw(st.sampled_from(META_KEYS))
    if how <= 4:
        meta[key] = draw(json_values)
    elif how <= 6 and isinstance(meta.get(key), dict) and meta[key]:
        meta[key][draw(st.sampled_from(sorted(meta[key])))] = draw(json_values)
    elif how == 7:
        meta.pop(key, None)
    elif how == 8:
        meta["subwords"] = {k: draw(json_values) for k in ("min_n", "max_n", "buckets")}
    else:
        meta["files"] = {draw(st.sampled_from([".npy", ".json", ".words.txt", ".ngrams.npy", "x", "/../x"])):
                         draw(json_values)}
    return json.dumps(meta, allow_nan=True).encode()


def edit_npy_header(draw, data: bytes) -> bytes:
    """Rewrite the dict of a .npy header, keeping its length where the new one fits."""
    start, end = data.find(b"{"), data.find(b"\n")
    if start < 0 or end < 0:
        return data
    shape = draw(st.lists(INTS, max_size=3).map(lambda xs: "(" + "".join(f"{x}, " for x in xs) + ")")
                 | st.sampled_from(["7", "(", "()", "(-1, 5)", "(2**40, 5)", "None", "'x'"]))
    text = draw(st.sampled_from([
        "{'descr': %r, 'fortran_order': %s, 'shape': %s, }" % (draw(st.sampled_from(NPY_DESCRS)),
                                                               draw(st.sampled_from(["False", "True", "0", "'x'"])),
                                                               shape),
        "{'descr': '<f4', 'shape': %s, }" % shape,
        "{'descr': '<f4', 'fortran_order': False",
        "{" + "(" * draw(st.integers(0, 40)),
        "[1, 2]",
        "{}",
    ])).encode()
    return data[:start] + text.ljust(end - start)[: max(end - start, len(text))] + data[end:]


def edit_magic(draw, data: bytes) -> bytes:
    magic = draw(st.sampled_from([b"PK\x03\x04", b"PK\x05\x06", b"\x80\x04", b"\x80\x02", b"\x93NUMPY\x02\x00",
                                  b"\x93NUMPY\x03\x00", b"\x93NUMPY\x09\x00", b"\x93NUMPX", b"\x00\x00\x00\x00"]))
    return magic + data[len(magic):]


@st.composite
def entry_damage(draw):
    source = draw(st.sampled_from(["w2v.txt", "fasttext.bin"]))
    names = ENTRY_FILES + (("vectors.ngrams.npy",) if source == "fasttext.bin" else ())
    name = draw(st.sampled_from(names))
    choices = ["bytes"] + (["json"] * 3 if name.endswith(".json") else []) \
        + (["header", "header", "magic"] if name.endswith(".npy") else [])
    how = draw(st.sampled_from(choices))
    same_size = draw(st.booleans())
    restore_mtime = draw(st.booleans())
    call = draw(st.sampled_from(["read_entry", "load_vectors"]))
    return source, name, how, same_size, restore_mtime, call


def check_cache_entry(target: str, damage, data) -> None:
    """Damage one file of a real entry (sizes kept or not, its mtime restored or not) and read
    it: read_entry gives Vectors or DamagedEntry, load_vectors Vectors or AttncliError. A change
    the entry can notice (a size, an mtime) must be noticed, and a load_vectors result must then
    hold the source's words and numbers, converted again."""
    source, name, how, same_size, restore_mtime, call = damage
    entry = entries()[source]
    with tempfile.TemporaryDirectory(prefix="attncli-fuzz-") as tmp:
        folder = Path(tmp, "cache", entry.folder.name)
        shutil.copytree(entry.folder, folder)
        path = folder / name
        before = os.stat(path)
        old = path.read_bytes()
        new = damaged_bytes(data.draw, how, old)
        if same_size:
            new = (new + b" " * len(old))[: len(old)]
        path.write_bytes(new)
        if restore_mtime:
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        else:
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
        tracked = name != "vectors.json"
        changed = new != old
        noticeable = tracked and changed and (not restore_mtime or len(new) != len(old))
        silent = tracked and changed and restore_mtime and len(new) == len(old)  # by design, not noticed
        warnings = []
        with environment(ATTNCLI_CACHE_DIR=Path(tmp, "cache")):
            if call == "read_entry":
                kind, v = run_contract(target, lambda: entry_module.read_entry(folder / "vectors", "x"),
                                       allowed=(entry_module.DamagedEntry,))
                if kind == "ok":
                    assert not noticeable, f"{name} was changed ({len(old)} -> {len(new)} bytes) but read_entry took it"
                    assert isinstance(v, Vectors)
            else:
                kind, v = run_contract(target, lambda: load_vectors(entry.source, warn=warnings.append))
                if kind == "ok":
                    if noticeable:
                        assert any("damaged" in w for w in warnings), warnings
                    if not silent:
                        words, M = words_and_matrix(v)
                        assert words == entry.words and np.array_equal(M, entry.matrix)
                        if entry.ngrams is not None and name != "vectors.json":
                            assert np.array_equal(np.asarray(v.subwords.matrix), entry.ngrams)


def damaged_bytes(draw, how: str, old: bytes) -> bytes:
    """The new content of the damaged file; drawn inside the check (it depends on the pristine
    file), through st.data(), so that hypothesis still shrinks it."""
    if how == "json":
        return edit_json(draw, old)
    if how == "header":
        return edit_npy_header(draw, old)
    if how == "magic":
        return edit_magic(draw, old)
    return mutate(draw, old, BYTE_OPS, most=3)


# --------------------------------------------------------------------------- target: .npz files


TRIPPED: list[str] = []


def _tripwire() -> None:
    TRIPPED.append("an object array was unpickled")


class Tripwire:
    """Pickled into object arrays; unpickling one calls _tripwire."""

    def __reduce__(self):
        return (_tripwire, ())


NPZ_NAMES = ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value", "W_hx", "W_hh", "b_h")
npz_names = st.sampled_from(NPZ_NAMES) | st.text("abcW_/.x", min_size=1, max_size=6)
npz_dtypes = st.one_of(hnp.floating_dtypes(), hnp.integer_dtypes(), hnp.unsigned_integer_dtypes(),
                       hnp.boolean_dtypes(), hnp.complex_number_dtypes(), hnp.unicode_string_dtypes(max_len=3),
                       hnp.byte_string_dtypes(max_len=3), hnp.datetime64_dtypes(), hnp.timedelta64_dtypes())
small_shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
object_arrays = st.lists(st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.builds(Tripwire)),
                         max_size=6).map(lambda xs: np.array(xs + [Tripwire()], dtype=object))


@st.composite
def npz_arrays(draw):
    """Any array, or one shaped like real projections (d, d_k), (d_k,), (N, N) of floats,
    NaN and infinity among them."""
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(object_arrays)
    if kind <= 2:
        return draw(npz_dtypes.flatmap(lambda dt: hnp.arrays(dt, small_shapes)))
    shape = draw(st.sampled_from([(3, 2), (3, 3), (2,), (3,), (2, 3), (2, 2), (0, 2), (3, 0)]))
    return draw(hnp.arrays(draw(st.sampled_from([np.float64, np.float32, np.float16, np.int64])), shape))


@st.composite
def savez_files(draw):
    arrays = draw(st.dictionaries(npz_names, npz_arrays(), max_size=6))
    if draw(st.booleans()):  # make the loaders' required names likelier
        names = draw(st.sampled_from([("W_query", "W_key", "W_value"), ("W_hx", "W_hh", "b_h")]))
        arrays.update({n: draw(npz_arrays()) for n in names})
    buf = io.BytesIO()
    (np.savez_compressed if draw(st.booleans()) else np.savez)(buf, **arrays)
    return buf.getvalue()


def zip_bytes(members, method=zipfile.ZIP_STORED) -> bytes:
    """A zip archive of (name, bytes) members, byte for byte the same every time."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, data)
    return buf.getvalue()


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=True)
    return buf.getvalue()


def npy_header(descr: str, shape: str, fortran: str = "False") -> bytes:
    """A .npy version 1.0 header by hand: any descr and shape text, padded as numpy pads."""
    return npy_raw_header("{'descr': %r, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape))


def npy_raw_header(text: str) -> bytes:
    """A .npy version 1.0 header holding any text where its dict should be."""
    length = (len(text) + 1 + 10 + 63) // 64 * 64 - 10
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", length) + text.ljust(length - 1).encode() + b"\n"


NPY_HEADER_TEXTS = ["{", "{'descr': '<f8'", "[1, 2]", "", "{}", "{'descr': '<f8', 'fortran_order': False}",
                    "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'x': 1}", "((((", "'", '"""',
                    "{'descr': '<f8', 'fortran_order': False, 'shape': (2,)} trailing", "\\", "#", "lambda: 0"]


@st.composite
def zipped_files(draw):
    """Zips made by hand: members with or without .npy, holding .npy files, headers alone
    with drawn descr and shape, raw bytes; stored, deflated, bzip2 or lzma."""
    members = []
    for _ in range(draw(st.integers(0, 4))):
        name = draw(npz_names) + draw(st.sampled_from([".npy", ".npy", "", ".NPY", "/x.npy"]))
        kind = draw(st.integers(0, 5))
        if kind == 0:
            content = npy_bytes(draw(npz_arrays()))
        elif kind == 5:
            content = npy_raw_header(draw(st.sampled_from(NPY_HEADER_TEXTS) | st.text(max_size=12))) \
                + draw(st.binary(max_size=16))
        elif kind == 1:
            shape = draw(st.lists(INTS, max_size=3).map(lambda xs: "(" + "".join(f"{x}, " for x in xs) + ")"))
            content = npy_header(draw(st.sampled_from(NPY_DESCRS)), shape) + draw(st.binary(max_size=64))
        elif kind == 2:
            content = draw(st.binary(max_size=64))
        else:
            content = mutate(draw, npy_bytes(draw(npz_arrays())), BYTE_OPS, most=2)
        members.append((name, content))
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]))
    return zip_bytes(members, method)


@functools.cache
def valid_npz() -> list[bytes]:
    out = []
    W = {"W_query": np.ones((3, 2)), "W_key": np.eye(3, 2), "W_value": np.full((3, 2), 0.5), "b_query": np.zeros(2)}
    R = {"W_hx": np.ones((2, 3)), "W_hh": np.eye(2), "b_h": np.zeros(2)}
    for arrays in (W, R):
        for save in (np.savez, np.savez_compressed):
            buf = io.BytesIO()
            save(buf, **arrays)
            out.append(buf.getvalue())
    return out


@st.composite
def mutated_npz(draw):
    data = draw(st.sampled_from(valid_npz()))
    return mutate(draw, data, BYTE_OPS + [op_flip] * 3, most=4)


random_npz = st.sampled_from([b"", b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY"]).flatmap(
    lambda start: st.binary(max_size=400).map(lambda b: start + b))

npz_calls = st.sampled_from(["read_arrays", "load", "load_rnn_weights"])


def check_npz(target: str, data: bytes, call: str, d: int) -> None:
    """A result (float64 finite arrays of the shapes asked for) or AttncliError; never an
    object array unpickled."""
    TRIPPED.clear()
    with tempfile.TemporaryDirectory(prefix="attncli-fuzz-") as tmp:
        path = Path(tmp, "weights.npz")
        path.write_bytes(data)
        if call == "read_arrays":
            fn = lambda: projections.read_arrays(path, ("W_query",), ("b_query", "W_key"))  # noqa: E731
        elif call == "load":
            fn = lambda: projections.load(str(path), d)  # noqa: E731
        else:
            fn = lambda: projections.load_rnn_weights(str(path), d)  # noqa: E731
        kind, result = run_contract(target, fn)
    assert not TRIPPED, TRIPPED
    if kind != "ok":
        return
    arrays = result.W | result.b if call == "load" else result
    for name, a in arrays.items():
        assert a.dtype == np.float64 and np.all(np.isfinite(a)), name
    if call == "load":
        d_k = result.W["W_query"].shape[1]
        assert all(result.W[w].shape == (d, d_k) for w in projections.WEIGHTS)
        assert all(b.shape == (d_k,) for b in result.b.values())
    elif call == "load_rnn_weights":
        N = result["W_hh"].shape[0]
        assert result["W_hx"].shape == (N, d) and result["W_hh"].shape == (N, N) and result["b_h"].shape == (N,)


# --------------------------------------------------------------------------- target: standard input


@functools.cache
def some_vocabulary() -> list[str]:
    v = entry_module.read_bundled()
    return [v.vocab.word(i) for i in range(0, 2000, 7)]


@st.composite
def stdin_lines(draw):
    """Bytes as they come on standard input: sentences of real words, JSON records, text,
    raw bytes, a BOM, CRLF, deep nesting; or no structure at all."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.binary(max_size=300))
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 6))
        if kind <= 1:
            line = " ".join(draw(st.lists(st.sampled_from(some_vocabulary()) | st.sampled_from(PTB_PIECES[:20]),
                                          max_size=12)))
            line = line.encode()
        elif kind == 2:
            record = draw(st.dictionaries(st.sampled_from(["text", "body", "x"]),
                                          st.text(max_size=20) | st.sampled_from(["the earth is round", "an orange"])
                                          | json_values, max_size=3))
            line = json.dumps(record).encode()
        elif kind == 3:
            line = draw(st.text(max_size=30)).encode("utf-8", "surrogatepass")
        elif kind == 4:
            line = draw(st.binary(max_size=30))
        elif kind == 5:  # deep nesting, of no word: a line of words stays short (scores' output is T x T)
            line = draw(st.sampled_from([b"[", b"{", b'[{"":'])) * draw(st.integers(0, 3000)) \
                + b'{"text":' * draw(st.integers(0, 20))
        else:
            line = draw(st.sampled_from([b"", b" ", b"\t", b"\r", b"\x0c", b"\xef\xbb\xbf", b"\xc2\x85"]))
        lines.append(line)
    data = draw(st.sampled_from([b"\n", b"\r\n"])).join(lines)
    if draw(st.booleans()):
        data += b"\n"
    if draw(st.integers(0, 5)) == 0:
        data = b"\xef\xbb\xbf" + data
    return data


def check_decode(data: bytes) -> None:
    kind, text = run_contract("decode", lambda: decode(data, "standard input"), allowed=(InputError,))
    if kind == "ok":
        assert isinstance(text, str) and text == data.decode("utf-8-sig")
    else:
        with pytest.raises(UnicodeDecodeError):
            data.decode("utf-8-sig")


def _blank(number: int, line: bytes) -> bool:
    """Whether a line is skipped: UTF-8 of nothing but white space (after a first line's BOM)."""
    line = line.rstrip(b"\r")
    if number == 1 and line.startswith(b"\xef\xbb\xbf"):
        line = line[3:]
    try:
        return not line.decode("utf-8").strip()
    except UnicodeDecodeError:
        return False


def check_parse_lines(data: bytes, jsonl: bool, field_name: str) -> None:
    """One (number, text, error) per line, numbered from 1, exactly one of text and error; never raises."""
    kind, items = run_contract("parse-lines", lambda: batch.parse_lines(data, jsonl=jsonl, field_name=field_name),
                               allowed=())
    if kind != "ok":
        return
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    assert [n for n, _, _ in items] == [n for n, line in enumerate(lines, start=1) if not _blank(n, line)]
    for _, text, error in items:
        assert (text is None) != (error is None)
        assert text is None or (isinstance(text, str) and text.strip())
        assert error is None or (isinstance(error, str) and error)


CLI_ARGS = [["scores"], ["scores"], ["scores", "--raw"], ["scores", "--format", "table", "--no-color"],
            ["scores", "--document"], ["batch"], ["batch", "--jsonl"], ["batch", "--jsonl", "--field", "body"],
            ["context", "--token", "the"]]
CLI_ENV = {"NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None, "TTY_INTERACTIVE": None,
           "CLICOLOR_FORCE": None, "ATTNCLI_VECTORS": None, "COLUMNS": "120"}


def check_cli(data: bytes, args: list[str]) -> None:
    """The whole CLI on `data` as standard input: exit 0 or 1, SystemExit or nothing, no traceback."""

    def invoke():
        result = CliRunner().invoke(cli, args, input=data, env=CLI_ENV, prog_name="attncli")
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception.with_traceback(result.exc_info[2])
        return result

    kind, result = run_contract("cli-stdin", invoke, allowed=())
    if kind != "ok":
        return
    assert result.exit_code in (0, 1), (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    if result.exit_code == 1:
        assert result.stderr.strip(), "exit 1 without a message"


# --------------------------------------------------------------------------- the targets


@dataclass(frozen=True)
class Target:
    strategies: dict
    check: callable


TARGETS: dict[str, Target] = {
    "tokenize": Target(dict(text=tokenize_texts, lowercase=st.booleans()), check_tokenize),
    "vectors-text": Target(dict(data=vector_files(TEXT_SEEDS), use_cache=st.booleans()),
                           functools.partial(check_vectors_file, "vectors-text")),
    "vectors-fasttext": Target(dict(data=vector_files(FASTTEXT_SEEDS), use_cache=st.booleans()),
                               functools.partial(check_vectors_file, "vectors-fasttext")),
    "vectors-random": Target(dict(data=random_vector_files(), use_cache=st.booleans()),
                             functools.partial(check_vectors_file, "vectors-random")),
    "cache-entry": Target(dict(damage=entry_damage(), data=st.data()),
                          functools.partial(check_cache_entry, "cache-entry")),
    "npz-savez": Target(dict(data=savez_files(), call=npz_calls, d=st.sampled_from([0, 1, 2, 3])),
                        functools.partial(check_npz, "npz-savez")),
    "npz-zipped": Target(dict(data=zipped_files(), call=npz_calls, d=st.sampled_from([0, 2, 3])),
                         functools.partial(check_npz, "npz-zipped")),
    "npz-mutated": Target(dict(data=mutated_npz() | random_npz, call=npz_calls, d=st.sampled_from([2, 3])),
                          functools.partial(check_npz, "npz-mutated")),
    "decode": Target(dict(data=st.binary(max_size=300) | stdin_lines()), check_decode),
    "parse-lines": Target(dict(data=stdin_lines(), jsonl=st.booleans(),
                               field_name=st.sampled_from(["text", "body"]) | st.text(max_size=4)),
                          check_parse_lines),
    "cli-stdin": Target(dict(data=stdin_lines(), args=st.sampled_from(CLI_ARGS)), check_cli),
}


def fuzz_test(name: str, config: settings = FUZZ):
    """The hypothesis test of target `name`: its strategies given to its check."""
    target = TARGETS[name]

    def test(**kwargs):
        target.check(**kwargs)

    test.__name__ = "test_" + name.replace("-", "_")
    return config(given(**target.strategies)(test))


@pytest.fixture(scope="module", autouse=True)
def fuzz_world():
    """Seed files and cache entries made once; the address-space cap for the file."""
    seeds()
    entries()
    some_vocabulary()
    with memory_cap():
        yield


test_tokenize = fuzz_test("tokenize")
test_vectors_text = fuzz_test("vectors-text")
test_vectors_fasttext = fuzz_test("vectors-fasttext")
test_vectors_random = fuzz_test("vectors-random")
test_cache_entry = fuzz_test("cache-entry")
test_npz_savez = fuzz_test("npz-savez")
test_npz_zipped = fuzz_test("npz-zipped")
test_npz_mutated = fuzz_test("npz-mutated")
test_decode = fuzz_test("decode")
test_parse_lines = fuzz_test("parse-lines")
test_cli_stdin = fuzz_test("cli-stdin")


def test_seeds_load():
    """The seeds are valid: the mutations start from files that load (else they test little)."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in seeds().items():
            for how in (None, "gzip", "bz2") if name in TEXT_SEEDS else (None,):
                path = Path(tmp, name + (how or ""))
                path.write_bytes(compress(data, how))
                v = load_vectors(path, use_cache=False)
                check_vectors_result(v)
                assert v.size in (len(WORDS), 2), name


# --------------------------------------------------------------------------- regression tests: crashes found
#
# Each crash fuzzing found, its input made by hand, and the outcome attncli gives it now: the
# error, of its own type and naming the file, or the result; within the time bound where the
# crash was a hang.


def contract(fn, *, allowed=(AttncliError,), seconds: float = TIME_BOUND):
    """The contract, with no crash excused: ContractViolation unless a result or AttncliError."""
    return run_contract("regression", fn, allowed=allowed, allow_known=False, seconds=seconds)


def refused(fn, error: type, *words: str, seconds: float = TIME_BOUND) -> str:
    """The contract, and its outcome the error `error` (that type, not another of attncli's)
    with every one of `words` in its message; the message."""
    outcome, value = contract(fn, seconds=seconds)
    assert outcome == "error" and type(value) is error, (outcome, value)
    message = str(value)
    for word in words:
        assert word in message, (word, message)
    return message


def load_file(tmp_path: Path, data: bytes, name: str = "vectors"):
    """A file of `data`, and load_vectors on it, uncached."""
    path = tmp_path / name
    path.write_bytes(data)
    return path, lambda: load_vectors(path, use_cache=False)


def test_a_fasttext_bin_cut_at_its_dictionary_is_refused_at_once(tmp_path):
    """gensim's fastText _load_vocab read past the end of a .bin cut inside its dictionary for
    ever (fin.read(1) == b'' is never the NUL it waits for); now the file's size is held to
    what its header needs before gensim reads it, and the load is refused at once."""
    path, load = load_file(tmp_path, fasttext_bin(words=(b"a",))[:92])  # the dictionary says 1 word; the file ends
    assert refused(load, VectorsError, seconds=2) == (
        f"{path}: a fastText .bin model of 92 bytes, but its header needs at least 127: it is truncated, or not a "
        "fastText model")


def test_a_supervised_fasttext_model_is_refused_naming_the_file(tmp_path):
    """gensim raised NotImplementedError('Supervised fastText models are not supported') when
    nlabels > 0, and sources._read_fasttext let it through; now it is the file's VectorsError."""
    path, load = load_file(tmp_path, fasttext_bin(nlabels=1))
    refused(load, VectorsError, f"{path}: not a valid fastText .bin model: NotImplementedError: ", "Supervised")


def test_fasttext_matrix_size_overflow(tmp_path):
    """The input matrix's rows * cols overflowed C long in np.fromfile (gensim's
    _fasttext_bin._load_matrix): an OverflowError through sources._read_fasttext; now the
    file's VectorsError."""
    path, load = load_file(tmp_path, fasttext_bin(rows=2**40, cols=2**40))
    refused(load, VectorsError, f"{path}: not a valid fastText .bin model: OverflowError: ")


def test_fasttext_negative_minn_overflow(tmp_path):
    """minn = -1 made gensim's compute_ngrams_bytes raise OverflowError (negative to unsigned)
    through sources._read_fasttext; now the file's VectorsError."""
    path, load = load_file(tmp_path, fasttext_bin(minn=-1))
    refused(load, VectorsError, f"{path}: not a valid fastText .bin model: OverflowError: ")


def test_fasttext_infinite_sample_overflow(tmp_path):
    """t (the sample threshold) = inf made gensim's Word2Vec.prepare_vocab raise OverflowError
    (int(inf)) through sources._read_fasttext; now the file's VectorsError."""
    path, load = load_file(tmp_path, fasttext_bin(t=float("inf")))
    refused(load, VectorsError, f"{path}: not a valid fastText .bin model: OverflowError: ")


# A .bin whose dictionary says 2 entries and nwords 1: one word, then 35 bytes without a NUL,
# the least sources._check_fasttext_size asks of it (92 + 2 * 11 + 16 + (1 + 1) * 4 = 138).
FASTTEXT_DICTIONARY_BEYOND_NWORDS = fasttext_bin(vocab_size=2)[: 92 + 11] + b"\xff" * 35


def test_a_fasttext_dictionary_beyond_its_nwords_is_refused_at_once(tmp_path):
    """gensim reads as many words as the dictionary's size says, beyond nwords, a byte at a
    time up to a NUL, and hung at the end of a file whose second word has none; now the words
    are walked first, and the file refused at once, whether its size passes the header's
    check (138 bytes) or not (127)."""
    path, load = load_file(tmp_path, FASTTEXT_DICTIONARY_BEYOND_NWORDS)
    assert refused(load, VectorsError, seconds=2) == (
        f"{path}: a fastText .bin model cut short in its dictionary (word 2 of 2)")
    path, load = load_file(tmp_path, FASTTEXT_DICTIONARY_BEYOND_NWORDS[:127], "shorter")
    assert refused(load, VectorsError, seconds=2) == (
        f"{path}: a fastText .bin model of 127 bytes, but its header needs at least 138: it is truncated, or not a "
        "fastText model")


def compressed_header_within_ratio(count: int) -> bytes:
    """A .gz word2vec text file whose header claims `count` words of 1 value, with just enough
    incompressible text after it for sources._check_header's 1032:1 allowance to admit the
    claim (2 bytes a word, '0 '): about count / 516 bytes, the same bytes every time."""
    import random

    rng = random.Random(0)
    body = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ \n")
                   for _ in range(count // 300)).encode()
    data = gzip.compress(f"{count} 1\n".encode() + body, mtime=0)
    assert count * 2 <= len(data) * 1032, "the body is too short for the claim to be admitted"
    return data


def test_a_compressed_header_within_1032_to_1_is_refused_without_allocating_the_count(tmp_path):
    """A claim of 100,000,000 words that a 244 kB .gz could hold at deflate's 1032:1 passed the
    header's check, and gensim set a slot aside for every word claimed; now the words the file
    holds are counted first, and the load refused without taking the memory."""
    path = tmp_path / "vectors"
    path.write_bytes(compressed_header_within_ratio(100_000_000))
    grew, message = _load_in_child(tmp_path, path)
    assert message == (f"VectorsError: {path}: its header claims 100,000,000 words, but the file holds at most "
                       "6,264; it is truncated, or its header is wrong")
    if grew > RSS_BOUND:
        raise ContractViolation(f"a {path.stat().st_size:,}-byte file raised the peak RSS by {grew >> 20} MB")


def _load_in_child(tmp_path: Path, path: Path) -> tuple[int, str | None]:
    """(peak RSS growth in bytes, None or "TYPE: message" of the AttncliError raised) of
    load_vectors(path) in a child process: its peak is its own, and a blow-up cannot raise
    this one's."""
    code = textwrap.dedent("""
        import json, resource, sys
        from attncli import load_vectors
        from attncli.errors import AttncliError
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            load_vectors(sys.argv[1], use_cache=False)
            outcome = None
        except AttncliError as e:
            outcome = f"{type(e).__name__}: {e}"
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
        print(json.dumps({"outcome": outcome, "grew": grew}))
    """)
    child = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "ATTNCLI_CACHE_DIR": str(tmp_path / "cache")})
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    return report["grew"], report["outcome"]


@pytest.mark.parametrize("how", ["gzip", "bz2"])
def test_a_compressed_header_beyond_its_file_is_refused_without_allocating_the_count(tmp_path, how):
    """A .gz or .bz2 word2vec file had no header-against-file-size check, and gensim's
    KeyedVectors.__init__ set aside [None] * count: a 26-byte file claiming 100,000,000 words
    took ~800 MB; now the claim is held to what the file can hold, and refused from its header."""
    path = tmp_path / "vectors"
    path.write_bytes(compress(b"100000000 1\n", how))  # need = 4e8 bytes: under the memory check
    grew, message = _load_in_child(tmp_path, path)
    assert message == (f"VectorsError: {path}: its header claims 100,000,000 words of 1 values, more than a file "
                       f"of {path.stat().st_size} bytes can hold")
    if grew > RSS_BOUND:
        raise ContractViolation(f"a {path.stat().st_size}-byte file raised the peak RSS by {grew >> 20} MB")


@pytest.fixture
def entry(tmp_path, monkeypatch):
    """A real cache entry of a two-word file; the prefix of its files."""
    monkeypatch.setenv("ATTNCLI_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "two.txt"
    source.write_bytes(b"2 2\na 1 2\nb 3 4\n")
    v = load_vectors(source)
    return Path(v.meta["entry"])


def rewrite(path: Path, data: bytes, *, restore_mtime: bool = True) -> None:
    """New content for an entry file, its mtime kept (the size is the caller's to keep)."""
    before = os.stat(path)
    path.write_bytes(data)
    if restore_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def resigned(meta: dict) -> str:
    """The metadata as JSON, with the checksum of its new content: an edit that only its type
    checks can find."""
    meta["checksums"]["metadata"] = entry_module._meta_checksum(meta)
    return json.dumps(meta)


WRONG_TYPE = {"whole": "holds an array in JSON, not an object",
              "files": "'files' does not give the sizes of .npy, .offsets.npy, .order.npy, .words.txt",
              "mtimes": "'mtimes' does not give the times of its files"}


@pytest.mark.parametrize("edit", ["whole", "files", "mtimes"])
def test_cache_json_values_of_the_wrong_type(entry, edit):
    """read_entry caught OSError, ValueError, KeyError and TypeError only: a vectors.json that is
    valid JSON but not an object, or whose 'files' or 'mtimes' is not an object, raised
    AttributeError (meta.get, meta['files'].items()); now each field's type is checked, and
    the entry is damaged, saying which."""
    json_path = Path(f"{entry}.json")
    meta = json.loads(json_path.read_text())
    if edit == "whole":
        json_path.write_text("[]")
    else:
        meta[edit] = []
        json_path.write_text(resigned(meta))
    assert refused(lambda: entry_module.read_entry(entry, "x"), entry_module.DamagedEntry) == f"{json_path}: {WRONG_TYPE[edit]}"


@pytest.mark.parametrize("key,said", [("name", "no name"), ("cased", "'cased' is not true or false")])
def test_a_cache_json_without_name_or_cased_is_converted_again(entry, key, said):
    """read_entry read meta['name'] and meta['cased'] after its try block: a vectors.json
    without them raised KeyError, which load_vectors, catching DamagedEntry only, let through;
    now the entry is damaged, and load_vectors says so and converts the source again."""
    json_path = Path(f"{entry}.json")
    meta = json.loads(json_path.read_text())
    del meta[key]
    json_path.write_text(resigned(meta))
    source = Path(meta["source"]["path"])
    warned = []
    outcome, vectors = contract(lambda: load_vectors(source, warn=warned.append))
    assert outcome == "ok", vectors
    words, matrix = words_and_matrix(vectors)
    assert words == ["a", "b"] and vectors.meta["entry"] == str(entry)
    np.testing.assert_array_equal(matrix, np.array([[1, 2], [3, 4]], dtype=np.float32))
    assert warned == [f"the cache entry for {source} is damaged ({json_path}: {said}); converting it again"]
    assert key in json.loads(json_path.read_text())  # the entry written anew


@pytest.mark.parametrize("magic", [b"PK\x03\x04", b"PK\x05\x06"])
def test_cache_npy_with_zip_magic(entry, magic):
    """np.load (cache._load_array) opened a file starting with a zip's magic as an .npz:
    zipfile.BadZipFile, which read_entry did not catch; now the .npy header is read by
    attncli, and the entry is damaged: its matrix is not a numpy array."""
    path = Path(f"{entry}.npy")
    data = path.read_bytes()
    rewrite(path, magic + data[len(magic):])  # same size, same mtime
    refused(lambda: entry_module.read_entry(entry, "x"), entry_module.DamagedEntry, f"{path}: ", "is not a numpy array")


def _same_length_header(data: bytes, text: str) -> bytes:
    start, end = data.index(b"{"), data.index(b"\n")
    assert len(text) <= end - start
    return data[:start] + text.ljust(end - start).encode() + data[end:]


def test_cache_npy_header_shape_overflow(entry):
    """A .npy header whose shape's product overflows made np.memmap raise OverflowError
    (numpy/_core/memmap.py) inside cache._load_array; now the shape is held to the one the
    metadata gives before anything is mapped."""
    path = Path(f"{entry}.npy")
    rewrite(path, _same_length_header(path.read_bytes(),
                                      "{'descr': '<f4', 'fortran_order': False, 'shape': (10000000000000000000000, 2), }"))
    assert refused(lambda: entry_module.read_entry(entry, "x"), entry_module.DamagedEntry) == (
        f"{path} holds a float32 array of shape (10000000000000000000000, 2), not float32 (2, 2)")


def test_cache_npy_header_unbalanced(entry):
    """A .npy header that does not parse as a dict (an unclosed brace) made numpy's header
    filter raise tokenize.TokenError inside cache._load_array, which read_entry did not catch;
    now the entry is damaged, naming the file."""
    path = Path(f"{entry}.npy")
    rewrite(path, _same_length_header(path.read_bytes(), "{"))
    refused(lambda: entry_module.read_entry(entry, "x"), entry_module.DamagedEntry, f"{path}: TokenError: ")


def npz_file(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "proj.npz"
    path.write_bytes(data)
    return str(path)


def beside_keys_and_values(w_query: bytes, method=zipfile.ZIP_STORED) -> bytes:
    """A projections .npz for d = 2 whose W_query member is `w_query`, its W_key and W_value
    sound, so that a load meets what is wrong with W_query (a member missing is refused first)."""
    sound = npy_bytes(np.ones((2, 2)))
    return zip_bytes([("W_query.npy", w_query), ("W_key.npy", sound), ("W_value.npy", sound)], method)


def test_npz_member_that_is_not_npy(tmp_path):
    """np.load returns an .npz member that does not start with the .npy magic as raw bytes, and
    read_arrays then took a.dtype of bytes: AttributeError; now the member is refused by name."""
    path = npz_file(tmp_path, zip_bytes([(f"{name}.npy", b"") for name in projections.WEIGHTS]))
    assert refused(lambda: projections.load(path, 2), projections.ProjectionError) == (
        f"{path}: W_query is not a numpy array")


def test_npz_npy_header_unbalanced(tmp_path):
    """An .npz member whose .npy header does not parse as a dict (an unclosed brace) made numpy's
    header filter raise tokenize.TokenError through read_arrays; now the file's ProjectionError."""
    path = npz_file(tmp_path, beside_keys_and_values(npy_raw_header("{")))
    refused(lambda: projections.load(path, 2), projections.ProjectionError,
            f"{path}: cannot be read as a .npz file (TokenError: ")


def test_npz_header_shape_overflow(tmp_path):
    """An .npz member whose .npy header has a shape beyond int64 made numpy's read_array raise
    OverflowError; now the headers are checked before any data is read: a shape not (d, d_k)
    is refused, and so is, to a caller that takes any shape, the memory it would need."""
    path = npz_file(tmp_path, beside_keys_and_values(npy_header("<f8", "(10000000000000000000000,)")))
    assert refused(lambda: projections.load(path, 2), projections.ProjectionError) == (
        f"{path}: W_query has shape (10000000000000000000000,), not (d, d_k) = (2, d_k)")
    refused(lambda: projections.read_arrays(path, ("W_query",)), projections.ProjectionError,
            f"{path}: reading W_query (10,000,000,000,000,000,000,000 numbers) needs about ", "of memory")


def test_npz_header_shape_too_large_for_memory(tmp_path):
    """An .npz member whose header claims 10**11 float64 values made numpy's read_array allocate
    800 GB before reading: MemoryError through read_arrays; now such a shape is refused from
    the header, for its rank by load and for the memory it needs by read_arrays."""
    path = npz_file(tmp_path, beside_keys_and_values(npy_header("<f8", "(100000000000,)")))
    assert refused(lambda: projections.load(path, 2), projections.ProjectionError) == (
        f"{path}: W_query has shape (100000000000,), not (d, d_k) = (2, d_k)")
    refused(lambda: projections.read_arrays(path, ("W_query",)), projections.ProjectionError,
            f"{path}: reading W_query (100,000,000,000 numbers) needs about 900.0 GB of memory")


def _patch_zip(data: bytes, *, flags: int | None = None, method: int | None = None) -> bytes:
    """Set the general-purpose flags or the compression method of the first member, in its
    local header and in the central directory alike."""
    out = bytearray(data)
    local, central = 0, out.index(b"PK\x01\x02")
    if flags is not None:
        out[local + 6 : local + 8] = out[central + 8 : central + 10] = struct.pack("<H", flags)
    if method is not None:
        out[local + 8 : local + 10] = out[central + 10 : central + 12] = struct.pack("<H", method)
    return bytes(out)


PROJECTIONS = beside_keys_and_values(npy_bytes(np.ones((2, 2))))  # W_query first


def test_npz_unsupported_compression_method(tmp_path):
    """zipfile raised NotImplementedError('That compression method is not supported') for a
    member of an unknown method, through read_arrays; now every member's method is checked
    first, and one numpy does not write is refused by name."""
    path = npz_file(tmp_path, _patch_zip(PROJECTIONS, method=99))
    assert refused(lambda: projections.load(path, 2), projections.ProjectionError) == (
        f"{path}: W_query is compressed with method 99, which numpy does not write; save the file with numpy.savez "
        "or numpy.savez_compressed")


def test_npz_encrypted_member(tmp_path):
    """zipfile raised RuntimeError('File ... is encrypted, password required for extraction')
    for a member flagged encrypted, through read_arrays; now the file's ProjectionError."""
    path = npz_file(tmp_path, _patch_zip(PROJECTIONS, flags=1))
    refused(lambda: projections.load(path, 2), projections.ProjectionError,
            f"{path}: cannot be read as a .npz file (RuntimeError: ", "is encrypted")


def test_npz_corrupt_deflate_stream(tmp_path):
    """A deflated member whose compressed bytes are not a deflate stream raised zlib.error from
    zipfile, through read_arrays; now the file's ProjectionError."""
    data = bytearray(beside_keys_and_values(npy_bytes(np.ones((2, 2))), zipfile.ZIP_DEFLATED))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("W_query.npy")
    start = info.header_offset + 30 + len(info.filename)  # the local header is 30 bytes and the name
    data[start : start + info.compress_size] = b"\xff" * info.compress_size
    path = npz_file(tmp_path, bytes(data))
    refused(lambda: projections.load(path, 2), projections.ProjectionError,
            f"{path}: cannot be read as a .npz file (error: ", "while decompressing data")


def test_parse_lines_deeply_nested_json():
    """batch.parse_lines caught ValueError from json.loads, not RecursionError: a --jsonl line
    of ~1000 nested brackets escaped it; now that line is an error of its own, in its place."""
    outcome, items = contract(lambda: batch.parse_lines(b"[" * 100_000, jsonl=True), allowed=())
    assert outcome == "ok" and [(n, text) for n, text, _ in items] == [(1, None)]
    assert items[0][2].startswith("not JSON: RecursionError: "), items


def test_cli_batch_jsonl_deeply_nested_json():
    """The same through the CLI: `attncli batch --jsonl` on a deeply nested line ended in a
    traceback; now the line's object holds its error, and the run is one line of failure."""

    def run():
        result = CliRunner().invoke(cli, ["batch", "--jsonl"], input=b"[" * 100_000, env=CLI_ENV, prog_name="attncli")
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception.with_traceback(result.exc_info[2])
        return result

    outcome, result = contract(run, allowed=())
    assert outcome == "ok" and result.exit_code == 1
    assert result.stderr == 'attncli: 1 of 1 line failed; their objects hold "error"\n'
    [line] = [json.loads(line) for line in result.stdout.splitlines()]
    assert set(line) == {"line", "error"} and line["line"] == 1
    assert line["error"].startswith("not JSON: RecursionError: "), line
