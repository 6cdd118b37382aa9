"""Inputs that declare a size are bounded before anything of that size is computed, allocated
or written.

    1. --window W on a document costs O(T W d): each block of rows computes only its band of
       columns, with the same numbers and ties as the whole matrix under the window mask
    2. the stream's blocks are sized from the memory available, its O(T d) arrays checked
    3. an overflowing scale is refused before the first block is yielded
    4. .npz projections and RNN weights: every member's .npy header (dtype, shape), its size
       and the memory it will take are checked before any data is read; FIFOs refused at once
    5. --d-k and --hidden: the arrays they ask for are checked before they are drawn
    6. a sentence's queries, keys and values (T x d_k each) are checked before projecting
    7. embed keeps a row code per token and gathers X once: the same X, tokens, lookups, oov
       and errors as a numpy row per token, in a few pointers a token beside X
    8. a document's tokens are counted against the memory its O(T d) arrays take and, without
       a window (or with one as wide), against hours of T x T work: refused before the stream
    9. a file is read to its end, whatever its size said (/proc files say 0), to the same cap
   10. a model's tokenizer.json or vocab.txt is held to the memory its parse takes before it is read
   11. a long text's word pieces are counted a chunk at a time, and the text refused once they pass
       the model's positions, before the tokenizer is given it whole (and its memory checked)

Numbers are checked against the whole-matrix path (attention.scores, weights, context,
top_attended) and against the stream as it was before the band (full rows, then masked),
kept here as the reference.
"""

from __future__ import annotations

import io
import math
import os
import resource
import struct
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy

from attncli import attention, load_vectors, rnn
from attncli import encoder
from attncli.attention import ScaleError
from attncli.documents import long as long_docs
from attncli.documents import sentence as sentence_docs
from attncli.encoder import Embedded
from attncli.errors import AttncliError, InputError
from attncli.learning import projections
from attncli.models import files
from attncli.system import limits, reading
from attncli.words import encoder as word_encoder
from attncli.words.encoder import TooManyTokens, embed
from attncli.words.encoder import WordEncoder
from attncli.words.tokenize import iter_tokens
from attncli.words.vectors import Subwords, Vectors, Vocabulary
from clirunner import CLEAN_ENV, fails, ok, one, run
from helpers import assert_ranked_within_float32, collect, random_X

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

ENTRY_POINT = Path(sys.executable).parent / "attncli"
RTOL = 1e-4  # float32 against float64, as stream promises
F32_MAX = float(np.finfo(np.float32).max)
F64_MAX = float(np.finfo(np.float64).max)


# --------------------------------------------------------------------------- helpers


def mask_of(T: int, causal: bool, window: int | None) -> np.ndarray | None:
    mask = attention.causal_mask(T) if causal else None
    if window is not None:
        w = attention.window_mask(T, window)
        mask = w if mask is None else mask | w
    return mask


def whole_matrix(X, scale, temperature, k, *, causal=False, window=None, include_self=False):
    """The sentence path on the whole T x T matrix: weights (T, T), top lists, Z (T, d)."""
    T = len(X)
    mask = mask_of(T, causal, window)
    alpha = attention.weights(attention.scores(X.astype(np.float64)), scale, temperature, mask)
    Z = attention.context(alpha, X)
    tops = [attention.top_attended(alpha[i], k, None if include_self else i, None if mask is None else mask[i])
            for i in range(T)]
    return alpha, tops, Z


def full_rows_stream(X, scale, temperature, k, *, causal=False, window=None, include_self=False, block=256):
    """The stream before the band: every block computes all T columns, then masks them."""
    X = np.asarray(X)
    c = scale / temperature
    if not abs(c) < float(np.finfo(X.dtype).max):
        X = X.astype(np.float64)
    T = len(X)
    with np.errstate(over="ignore", invalid="ignore"):
        keys = X * np.asarray(c, dtype=X.dtype)
    columns = np.arange(T)
    kk = min(k, T)
    for start in range(0, T, block):
        rows = np.arange(start, min(start + block, T))
        E = X[rows] @ keys.T
        hidden = None
        if causal or window is not None:
            hidden = np.zeros(E.shape, dtype=bool)
            if causal:
                hidden |= columns[None, :] > rows[:, None]
            if window is not None:
                hidden |= np.abs(columns[None, :] - rows[:, None]) > window
            E[hidden] = -np.inf
        E -= E.max(axis=1, keepdims=True)
        np.exp(E, out=E)
        total = E.sum(axis=1, keepdims=True)
        Z = (E @ X) / total
        if hidden is not None:
            E[hidden] = -1.0
        if not include_self:
            E[np.arange(len(rows)), rows] = -1.0
        top, w = attention._top_k(E, kk)
        yield start, top, np.where(w >= 0, w / total, -1.0), Z


def check_against_whole(X, scale, temperature, k, block, *, causal, window, include_self, rtol=RTOL):
    T, d = X.shape
    alpha, tops, Z = whole_matrix(X, scale, temperature, k, causal=causal, window=window, include_self=include_self)
    starts, top, w, Zs = collect(attention.stream(X, scale, temperature, k, causal=causal, window=window,
                                                  include_self=include_self, block=block))
    kk = min(k, T)
    assert starts == list(range(0, T, block))
    assert top.shape == w.shape == (T, kk) and Zs.shape == (T, d)
    np.testing.assert_allclose(Zs, Z, rtol=rtol, atol=1e-5)
    for i in range(T):
        filled = w[i] >= 0
        assert filled.tolist() == [n < len(tops[i]) for n in range(kk)], (i, w[i], tops[i])  # filled first
        assert np.all(w[i][~filled] == -1.0)
        assert_ranked_within_float32(top[i][filled].tolist(), tops[i], alpha[i])
        np.testing.assert_allclose(w[i][filled], alpha[i, top[i][filled]], rtol=rtol, atol=1e-12)


# --------------------------------------------------------------------------- 1. the window's band


@pytest.mark.parametrize("include_self", [False, True], ids=["no-self", "self"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("T,W", [(1, 1), (2, 1), (3, 1), (3, 2), (9, 1), (9, 3), (9, 7), (9, 8), (9, 20),
                                 (40, 2), (40, 5), (150, 1), (150, 5), (150, 31), (150, 148), (150, 149)])
def test_band_equals_whole_matrix_with_window_mask(T, W, causal, include_self):
    X = random_X(T, 8, seed=T + W)
    for k in (3, 12):  # 12 > 2W + 1 for the small windows: places nothing can fill
        for block in (1, 7, 256):
            check_against_whole(X, attention.default_scale(8), 1.0, k, block, causal=causal, window=W,
                                include_self=include_self)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_no_window_equals_whole_matrix(causal):
    X = random_X(200, 8, seed=3)
    for block in (1, 13, 256):
        check_against_whole(X, 0.4, 1.3, 4, block, causal=causal, window=None, include_self=False)


@pytest.mark.parametrize("include_self", [False, True], ids=["no-self", "self"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("window", [None, 1, 4, 60, 500])
def test_band_gives_what_full_rows_gave(causal, window, include_self):
    """The same top lists and, to float32 rounding, the same weights and context vectors as
    the stream computing all T columns of every row."""
    X = random_X(500, 16, seed=5)
    for block in (1, 64, 256):
        kw = dict(causal=causal, window=window, include_self=include_self, block=block)
        _, top, w, Z = collect(attention.stream(X, 0.25, 1.0, 5, **kw))
        _, top0, w0, Z0 = collect(full_rows_stream(X, 0.25, 1.0, 5, **kw))
        filled = w0 >= 0
        np.testing.assert_array_equal(w >= 0, filled)
        np.testing.assert_array_equal(np.where(filled, top, -1), np.where(filled, top0, -1))
        np.testing.assert_allclose(w, w0, rtol=1e-5, atol=1e-12)
        np.testing.assert_allclose(Z, Z0, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_band_ties_go_to_the_earlier_position(causal):
    """Repeated vectors tie exactly: among equal weights the earlier position comes first, in a
    window as in the whole matrix."""
    words = random_X(3, 4, seed=1)
    X = words[np.random.default_rng(2).integers(0, 3, size=120)]  # (120, 4), each row one of 3 vectors
    for W in (1, 3, 10):
        for block in (1, 16, 256):
            check_against_whole(X, 0.5, 1.0, 4, block, causal=causal, window=W, include_self=False)
    X = np.ones((30, 4), dtype=np.float32)  # every weight of a row the same
    check_against_whole(X, 1.0, 1.0, 3, 8, causal=causal, window=4, include_self=True)


def counted(monkeypatch) -> list[tuple[int, int]]:
    """The shape (b, n) of every block of scores the stream computes."""
    shapes = []
    real = attention._scaled_scores

    def counting(X_b, keys):
        shapes.append((len(X_b), len(keys)))
        return real(X_b, keys)

    monkeypatch.setattr(attention, "_scaled_scores", counting)
    return shapes


@pytest.mark.parametrize("W", [1, 5, 40])
def test_window_computes_only_its_band(monkeypatch, W):
    """O(T W d): the cells computed are at most T (b + 2W), never T x T."""
    shapes = counted(monkeypatch)
    tops = []
    real_top_k = attention._top_k
    monkeypatch.setattr(attention, "_top_k", lambda E, k: tops.append(E.shape) or real_top_k(E, k))
    T, block = 20_000, 256
    for _ in attention.stream(random_X(T, 4), 0.5, 1.0, 3, window=W, block=block):
        pass
    assert sum(b for b, _ in shapes) == T
    assert all(n == b + 2 * W for b, n in shapes)  # the block's rows and W either side
    assert sum(b * n for b, n in shapes) <= T * (block + 2 * W)
    assert all(n == 2 * W + 1 for _, n in tops)  # each row's top list is drawn from its own window


def test_causal_without_window_stops_at_the_block(monkeypatch):
    shapes = counted(monkeypatch)
    T = 1000
    for _ in attention.stream(random_X(T, 4), 0.5, 1.0, 3, causal=True, block=100):
        pass
    assert [n for _, n in shapes] == list(range(100, T + 1, 100))  # columns 0 .. end - 1
    shapes.clear()
    for _ in attention.stream(random_X(T, 4), 0.5, 1.0, 3, block=100):
        pass
    assert [n for _, n in shapes] == [T] * 10


def test_200000_tokens_window_5_completes():
    T, W = 200_000, 5
    X = random_X(T, 16, seed=11)
    scale = attention.default_scale(16)
    rows, checked = 0, 0
    for start, top, w, Z in attention.stream(X, scale, 1.0, 3, window=W):
        rows += len(Z)
        if start in (0, 99_840, T - T % 256):  # the first, a middle and the last block: by hand
            for r in (0, len(Z) - 1):
                i = start + r
                j = np.arange(max(0, i - W), min(T, i + W + 1))
                logits = X[j].astype(np.float64) @ X[i].astype(np.float64) * scale
                e = np.exp(logits - logits.max())
                alpha = e / e.sum()
                np.testing.assert_allclose(Z[r], alpha @ X[j], rtol=RTOL, atol=1e-5)
                order = sorted((jj for jj in j if jj != i), key=lambda jj: (-alpha[jj - j[0]], jj))[:3]
                assert top[r].tolist() == order
                checked += 1
    assert rows == T and checked == 6


def test_document_window_on_the_cli(tmp_path):
    """`scores --file --window` through the CLI: each row within its window, as the whole matrix."""
    path = tmp_path / "doc.txt"
    words = "the cat sat on the mat and the dog ran to the door of a house by the sea".split()
    path.write_text(" ".join(words * 20) + "\n", encoding="utf-8")
    rows = ok(run("scores", "--file", path, "--json", "--window", "3"))
    assert len(rows) == 20 * len(words)
    for i, r in enumerate(rows):
        assert all(abs(t["index"] - i) <= 3 and t["index"] != i for t in r["top"])


# --------------------------------------------------------------------------- 2. the stream's memory


def with_memory(monkeypatch, n: int) -> None:
    monkeypatch.setattr(limits, "available", lambda: n)


def test_block_rows_follow_the_memory_available(monkeypatch):
    X = random_X(3000, 16, seed=4)
    want = collect(attention.stream(X, 0.25, 1.0, 3))
    # per row of a block: 3000 cells of float32 scores, int64 positions and masks (16 bytes)
    with_memory(monkeypatch, 4 * 10 * 16 * 3000 + 1000)
    starts, top, w, Z = collect(attention.stream(X, 0.25, 1.0, 3))
    assert starts == list(range(0, 3000, 10))  # 10 rows a block, not 256
    np.testing.assert_array_equal(top, want[1])
    np.testing.assert_allclose(w, want[2], rtol=RTOL)  # float32 sums over other blocks of rows
    np.testing.assert_allclose(Z, want[3], rtol=RTOL, atol=1e-5)
    with_memory(monkeypatch, 1 << 40)
    assert collect(attention.stream(X, 0.25, 1.0, 3))[0] == list(range(0, 3000, 256))  # at most 256


def test_a_row_that_cannot_fit_is_refused_before_the_first_block(monkeypatch):
    X = random_X(100_000, 2)
    with_memory(monkeypatch, 1_200_000)  # the O(T d) arrays fit (1 MB); one row of 100,000 cells does not
    rows = attention.stream(X, 0.5, 1.0, 3)
    with pytest.raises(limits.ResourceError, match=r"a block of weights over 100,000 tokens needs about .* --window"):
        next(rows)
    # with a window, a row is 2W + 1 cells and a block fits
    starts = [start for start, *_ in attention.stream(X, 0.5, 1.0, 3, window=5)]
    assert starts[0] == 0 and starts[-1] + (starts[1] - starts[0]) >= 100_000


def test_a_document_too_large_for_memory_yields_nothing(monkeypatch):
    X = random_X(100_000, 2)
    with_memory(monkeypatch, 100_000)
    rows = attention.stream(X, 0.5, 1.0, 3, window=5)
    with pytest.raises(limits.ResourceError, match=r"a document of 100,000 tokens x 2 dimensions needs about .* split"):
        next(rows)


def test_the_cli_refuses_a_document_too_large_in_one_line(monkeypatch, tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("the cat sat on the mat\n" * 200, encoding="utf-8")
    real = limits.available
    monkeypatch.setattr(limits, "available", lambda: 10_000 if called_from(attention.stream) else real())
    fails(run("scores", "--file", path, "--json"), "a document of 1,200 tokens x 50 dimensions needs about",
          "of memory", "split it")


def called_from(function) -> bool:
    """Whether `function` is on the call stack: memory is made short only there."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is function.__code__:
            return True
        frame = frame.f_back
    return False


# --------------------------------------------------------------------------- 3. overflow before any output


def norms_X(T: int = 3000, big_at: int = -1, big: float = 100.0) -> np.ndarray:
    """Random rows of |x|^2 about 8, and one row of norm `big` (|x|^2 = big^2)."""
    X = random_X(T, 8, seed=8)
    X[big_at] = big / np.sqrt(8)
    return X


@pytest.mark.parametrize("window", [None, 5])
@pytest.mark.parametrize("scale", [1e306, -1e306])
def test_overflow_anywhere_is_refused_at_the_first_next(scale, window):
    """The one row that overflows is the last: the old check would have yielded every block
    before it. c |x|^2 = 1e306 x 1e4 passes float64's range (c > 0: the row's own score)."""
    rows = attention.stream(norms_X(), scale, 1.0, 3, window=window)
    with pytest.raises(ScaleError, match="overflow.*--scale"):
        next(rows)


@pytest.mark.parametrize("window", [None, 5])
@pytest.mark.parametrize("scale", [1e35, -1e35])
def test_scores_past_float32_are_computed_in_float64(scale, window):
    """c |x|^2 = 1e35 x 1e4 passes float32's range but not float64's, which the sentence path
    computes in: the stream works in float64 then, and gives the whole matrix's numbers."""
    check_against_whole(norms_X(600), scale, 1.0, 3, 64, causal=False, window=window, include_self=False, rtol=1e-9)


def test_overflow_message_is_the_sentence_paths():
    with pytest.raises(ScaleError) as sentence:
        attention.weights(np.array([[1e4]]), 1e306, 0.5)
    with pytest.raises(ScaleError) as document:
        next(attention.stream(norms_X(), 1e306, 0.5, 3))
    assert str(document.value) == str(sentence.value)


@pytest.mark.parametrize("scale,temperature", [(1e308, 1e-10), (-1e308, 1e-10), (1e300, 1e-300)])
def test_scale_over_temperature_beyond_float64_is_refused_at_once(scale, temperature):
    with pytest.raises(ScaleError, match="overflow"):
        next(attention.stream(random_X(600, 4), scale, temperature, 3))


def test_zero_vectors_with_any_scale_are_uniform():
    """x = 0: every score is 0 whatever the scale, also when scale / temperature overflows."""
    X = np.zeros((5, 3), dtype=np.float32)
    _, top, w, Z = collect(attention.stream(X, 1e308, 1e-10, 2))
    np.testing.assert_allclose(w, 0.2)
    np.testing.assert_array_equal(Z, 0)
    assert top.tolist() == [[1, 2], [0, 2], [0, 1], [0, 1], [0, 1]]


def test_just_inside_the_range_works_and_matches_the_sentence_path():
    X = norms_X(400)
    sq = float((X.astype(np.float64) ** 2).sum(axis=1).max())
    for c in (0.5 * F32_MAX / sq, -0.5 * F32_MAX / sq, 1e300 / sq):  # float32, and float64 work
        check_against_whole(X, c, 1.0, 3, 64, causal=False, window=None, include_self=False)
        check_against_whole(X, c, 1.0, 3, 64, causal=True, window=3, include_self=True)
    check_against_whole(X, 2 * F32_MAX / sq, 1.0, 3, 64, causal=False, window=None, include_self=False, rtol=1e-9)
    with pytest.raises(ScaleError):
        next(attention.stream(X, F64_MAX / sq * 2, 1.0, 3))  # sq > 1: a finite scale


def sentence_outcome(X, scale, temperature):
    """What the sentence path (Step II on the whole matrix, in float64) makes of X: its
    weights, or the message it refuses with."""
    try:
        return attention.weights(attention.scores(X), scale, temperature)
    except ScaleError as e:
        return str(e)


@pytest.mark.parametrize("mask", ["none", "self", "causal"])
def test_the_stream_and_the_sentence_path_refuse_the_same_scales(mask):
    """Over a sweep of scales across float32's edge and float64's, with vectors of lengths
    from 1e-3 to 1e3, the stream and the whole matrix both compute (and agree) or both
    refuse with the same message: never one computing what the other refuses. A scale
    within 1e-9 of float64's edge is left out, where rounding alone decides."""
    X = norms_X(300, big_at=150, big=1e3)
    X[7] = 1e-3 / np.sqrt(8)
    sq = float((X.astype(np.float64) ** 2).sum(axis=1).max())
    exponents = np.arange(30.0, 42.0, 0.5).tolist() + np.arange(296.0, 308.5, 0.25).tolist()
    seen = set()
    for e in exponents:
        for scale in (10.0 ** e, -(10.0 ** e)):
            if abs(abs(scale) * sq / F64_MAX - 1) < 1e-9:
                continue
            whole = sentence_outcome(X, scale, 1.0)
            try:
                rows = collect(attention.stream(X, scale, 1.0, 3, causal=mask == "causal",
                                                exclude_self=mask == "self", block=64))
            except ScaleError as refused:
                assert whole == str(refused), (scale, whole)
                seen.add("refused")
                continue
            assert not isinstance(whole, str), (scale, whole)
            assert np.all(np.isfinite(rows[2])) and np.all(np.isfinite(rows[3]))
            seen.add("computed")
    assert seen == {"refused", "computed"}


def test_every_scale_refuses_at_the_first_next_or_never():
    """Over a sweep of scales across both ranges' edges, either the first next() raises, or
    every block comes out finite: never rows and then an error."""
    X = norms_X(700, big_at=350, big=1e3)
    outcomes = set()
    for e in np.arange(28.0, 40.0, 0.25).tolist() + np.arange(295.0, 308.0, 0.5).tolist():
        for sign in (1, -1):
            rows = attention.stream(X, sign * 10.0 ** e, 1.0, 3, window=None if e % 1 else 20, block=64)
            try:
                first = next(rows)
            except ScaleError:
                outcomes.add("refused")
                continue
            for _, _, w, Z in [first, *rows]:
                assert np.all(np.isfinite(w)) and np.all(np.isfinite(Z))
            outcomes.add("computed")
    assert outcomes == {"refused", "computed"}


def test_context_sums_beyond_float32_are_computed_in_float64():
    """|x| near float32's largest: the scores fit at a tiny scale, but sum_j e_ij x_j over a
    row of equal weights would not; the stream works in float64 then, as the sentence path."""
    X = np.zeros((40, 2), dtype=np.float32)
    X[:, 0] = 3e38
    X[:, 1] = np.arange(40)
    c = 2e-38  # c |x|^2 = 1.8e39 x 2e-38 = 36: no overflow
    check_against_whole(X, c, 1.0, 3, 16, causal=False, window=None, include_self=False, rtol=1e-9)
    check_against_whole(X, c, 1.0, 3, 16, causal=False, window=4, include_self=False, rtol=1e-9)


@pytest.fixture
def big_last_word(tmp_path) -> tuple[Path, Path]:
    """Vectors where one word is far longer than the rest, and a document that ends with it."""
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("4 2\nfoo 1 0\nbar 0 1\nbaz 1 1\nhuge 1e19 0\n", encoding="utf-8")
    vectors.with_name("far.txt").write_text("4 2\nfoo 1 0\nbar 0 1\nbaz 1 1\nhuge 3e38 0\n", encoding="utf-8")
    doc = tmp_path / "doc.txt"
    doc.write_text("foo bar baz " * 400 + "huge\n", encoding="utf-8")
    return vectors, doc


def test_cli_document_overflow_writes_nothing(big_last_word, tmp_path):
    vectors, doc = big_last_word
    # |huge|^2 = 1e38: with the default scale 1/sqrt(2) it fits float32, with --scale 10 float64 only
    rows = ok(run("scores", "--file", doc, "--vectors", vectors, "--json"))
    assert len(rows) == 1201
    assert len(ok(run("scores", "--file", doc, "--vectors", vectors, "--json", "--scale", "10"))) == 1201
    # |huge|^2 = 9e76: with --scale 1e240 it overflows float64 too, in row 1200 only
    far = vectors.with_name("far.txt")
    fails(run("scores", "--file", doc, "--vectors", far, "--json", "--scale", "1e240"), "overflow", "--scale")
    fails(run("scores", "--file", doc, "--vectors", far, "--format", "table", "--scale", "1e240"), "overflow")
    fails(run("scores", "--file", doc, "--vectors", far, "--json", "--temperature", "1e-240"), "overflow",
          "--temperature")
    glove_doc = tmp_path / "glove.txt"
    glove_doc.write_text("the cat sat on the mat\n" * 100, encoding="utf-8")
    fails(run("scores", "--file", glove_doc, "--json", "--scale", "1e308"), "overflow")
    fails(run("scores", "--file", glove_doc, "--json", "--scale", "-1e308", "--window", "2"), "overflow")


@pytest.mark.parametrize("scale", ["1e38", "-1e38", "1e300", "1e307", "-1e307", "1e308"])
def test_cli_document_and_sentence_agree_on_every_scale(scale, tmp_path):
    """The same words as a sentence and as a document: both give the same top lists, or both
    fail with the same message (its --scale 1e38 once refused a document only)."""
    text = "the cat sat on the mat"
    doc = tmp_path / "doc.txt"
    doc.write_text(text + "\n", encoding="utf-8")
    sentence = run("scores", text, "--json", "--scale", scale)
    document = run("scores", "--file", doc, "--json", "--scale", scale)
    assert sentence.exit_code == document.exit_code, (sentence.stderr, document.stderr)
    if sentence.exit_code:
        assert sentence.stderr == document.stderr and "overflow" in sentence.stderr
        return
    rows, whole = ok(document), one(sentence)
    assert [[t["index"] for t in r["top"]] for r in rows] == [[t["index"] for t in top] for top in whole["top"]]
    for r, top in zip(rows, whole["top"]):
        np.testing.assert_allclose([t["weight"] for t in r["top"]], [t["weight"] for t in top], rtol=1e-6, atol=1e-12)


def test_cli_document_of_vectors_near_float32_max(tmp_path):
    vectors = tmp_path / "big.txt"
    vectors.write_text("3 2\nfoo 3e38 0\nbar 3e38 1\nbaz 3e38 2\n", encoding="utf-8")
    doc = tmp_path / "doc.txt"
    doc.write_text("foo bar baz foo bar baz\n", encoding="utf-8")
    rows = ok(run("scores", "--file", doc, "--vectors", vectors, "--json", "--scale", "1e-80"))
    sentence = one(run("scores", "foo bar baz foo bar baz", "--vectors", vectors, "--json", "--scale", "1e-80"))
    assert [[t["index"] for t in r["top"]] for r in rows] == [[t["index"] for t in top] for top in sentence["top"]]
    assert all(math.isfinite(v) for r in rows for v in r["context"])


# --------------------------------------------------------------------------- 4. .npz files: headers first


def npy_header(shape, descr="<f8", version=(1, 0)) -> bytes:
    buf = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": tuple(shape)}
    (npy.write_array_header_1_0 if version == (1, 0) else npy.write_array_header_2_0)(buf, header)
    return buf.getvalue()


def write_npz(path: Path, members: dict, method=zipfile.ZIP_DEFLATED, chunk: int = 1 << 20) -> Path:
    """members: name -> an array, or (shape, descr, data bytes): that header, then that many
    zero bytes, streamed a chunk at a time so that the test itself stays small in memory."""
    zeros = bytes(chunk)
    with zipfile.ZipFile(path, "w", method) as z:
        for name, member in members.items():
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                if isinstance(member, np.ndarray):
                    npy.write_array(f, member, allow_pickle=False)
                    continue
                shape, descr, data = member
                f.write(npy_header(shape, descr))
                while data > 0:
                    f.write(zeros[:min(chunk, data)])
                    data -= chunk
    return path


def declared(shape, descr="<f8", data=None) -> tuple:
    """A member whose header says `shape` and which holds `data` bytes (default: exactly its size)."""
    return shape, descr, math.prod(shape) * np.dtype(descr).itemsize if data is None else data


def three(shape, descr="<f8", data=None) -> dict:
    return {name: declared(shape, descr, data) for name in projections.WEIGHTS}


@pytest.fixture
def no_data_read(monkeypatch):
    """Fail if any .npy member's data is read."""
    def refuse(*args, **kwargs):
        raise AssertionError("an array's data was read")

    monkeypatch.setattr(npy, "read_array", refuse)


BOMB_MB = 16  # zeros each member really holds, deflated to a few kB


@pytest.mark.parametrize("name,members,words", [
    ("square", three((50000, 50000), data=BOMB_MB << 20), ["W_query", "(50000, 50000)", "(50, 50000)"]),
    ("wide", three((50, 50_000_000), data=BOMB_MB << 20), []),  # the memory check, or the size check
    ("last_wrong", {"W_query": declared((50, 4)), "W_key": declared((50, 4)),
                    "W_value": declared((50000, 50000), data=BOMB_MB << 20)}, ["W_value", "(50000, 50000)", "(50, "]),
])
def test_npz_bomb_refused_before_reading(tmp_path, no_data_read, name, members, words):
    path = write_npz(tmp_path / f"{name}.npz", members)
    assert path.stat().st_size < 200_000
    line = fails(run("scores", "the cat", "--qkv", path), str(path), *words)
    assert "MemoryError" not in line


@pytest.mark.parametrize("members,args,words", [
    # three members of 1 GB each as declared, a few kB of zeros in the file (the last narrower)
    (three((50, 2_684_354), data=BOMB_MB << 20), (), ["W_query has shape (50, 2684354)", "65,536 at most"]),
    ({**three((50, 2_684_354), data=BOMB_MB << 20), "W_value": declared((50, 7), data=0)}, (),
     ["W_query has shape (50, 2684354)", "65,536 at most"]),
    ({**three((50, 10)), "W_value": declared((50, 100_000), data=BOMB_MB << 20)}, (),
     ["W_value has shape (50, 100000)", "65,536 at most"]),
    # of bounded size, but not of the heads or the --d-k asked for: known from the headers too
    (three((50, 60_000)), ("--heads", "7"),
     ["--heads 7 does not divide d_k = 60000; choose one of 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 16, 20, …"]),
    ({**three((50, 60_000)), "W_value": declared((50, 50))}, ("--heads", "4"),
     ["--heads 4 does not divide both d_k = 60000 and d_v = 50", "choose one of 1, 2, 5, 10, 25, 50"]),
    (three((50, 60_000)), ("--d-k", "16"), ["holds projections of d_k = 60000, not the --d-k 16"]),
])
def test_npz_checked_against_the_run_from_its_headers(tmp_path, no_data_read, members, args, words):
    """Every member's shape against d, --d-k, --heads and the widest projection any
    attention uses, from the headers alone: nothing of the data is inflated."""
    path = write_npz(tmp_path / "p.npz", members)
    assert path.stat().st_size < 200_000 or not any("BOMB" in w for w in words)
    fails(run("scores", "the cat", "--qkv", path, *args), str(path), *words)


@pytest.mark.parametrize("method,name", [(zipfile.ZIP_BZIP2, "bzip2"), (zipfile.ZIP_LZMA, "LZMA")])
def test_npz_members_compressed_otherwise_than_numpy_are_refused_unread(tmp_path, no_data_read, method, name):
    """bzip2 inflates a block of its input at a time with no bound on the output: a 3 kB
    member declaring 3 GB took 6 GB to reach its header. Numpy writes stored or deflated
    members only; any other is refused from the zip directory, before a byte is inflated."""
    path = write_npz(tmp_path / "p.npz", {**three((50, 4)), "W_query": declared((50, 4), data=BOMB_MB << 20)},
                     method=method)
    assert path.stat().st_size < 200_000
    fails(run("scores", "the cat", "--qkv", path), str(path), f"W_query is compressed with {name}",
          "numpy.savez")
    fails(run("rnn", "the cat", "--weights", write_npz(tmp_path / "w.npz", {"W_hx": declared((4, 50)),
          "W_hh": declared((4, 4)), "b_h": declared((4,))}, method=method)), f"is compressed with {name}")


def limited_run(*args, address_space: int = 2 << 30, timeout: float = 60) -> subprocess.CompletedProcess:
    """attncli in a process of its own with at most `address_space` bytes of memory."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    return subprocess.run([str(ENTRY_POINT), *map(str, args)], capture_output=True, timeout=timeout, env=env,
                          preexec_fn=limit)


def assert_one_error(result: subprocess.CompletedProcess, *words: str) -> str:
    stderr = result.stderr.decode()
    assert result.returncode == 1 and result.stdout == b"", (result.returncode, stderr)
    assert "Traceback" not in stderr and "MemoryError" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: error: "), stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def test_npz_bomb_in_2_gb_of_memory(tmp_path):
    """Three members of a shape these vectors take, 20 GB each as declared, a few kB each in
    the file: in 2 GB of address space the refusal is ours, from the headers, not a
    MemoryError: d_k = 50,000,000 is no projection any attention uses."""
    path = write_npz(tmp_path / "bomb.npz", three((50, 50_000_000), data=BOMB_MB << 20))
    assert_one_error(limited_run("scores", "the cat", "--qkv", path), str(path), "W_query has shape (50, 50000000)",
                     "65,536 at most")
    # every byte there, of a d_k within bounds over vectors of d = 4,000: 80 MB of int8 a member,
    # 9 bytes a number once read and made float64
    wide = tmp_path / "wide.txt"
    wide.write_text("".join(f"{w} " + " ".join(["0.5"] * 4000) + "\n" for w in ("the", "cat")), encoding="utf-8")
    honest = write_npz(tmp_path / "honest.npz", three((4000, 20_000), "|i1"))
    assert honest.stat().st_size < 2 << 20
    assert_one_error(limited_run("scores", "the cat", "--vectors", wide, "--qkv", honest),
                     "reading W_query, W_key, W_value", "(240,000,000 numbers) needs about 2.2 GB", "of memory",
                     "smaller d_k")
    rnn_bomb = write_npz(tmp_path / "rnn.npz", {"W_hx": declared((200_000, 50), data=1 << 20),
                                                 "W_hh": declared((200_000, 200_000), data=BOMB_MB << 20),
                                                 "b_h": declared((200_000,))})
    assert_one_error(limited_run("rnn", "the cat", "--weights", rnn_bomb), "a hidden size of 200,000", "4,096")


def test_npz_declared_sizes_must_agree_with_the_headers(tmp_path, no_data_read):
    padded = write_npz(tmp_path / "padded.npz", {**three((50, 4)), "W_key": declared((50, 4), data=(1 << 20))})
    fails(run("scores", "the cat", "--qkv", padded), str(padded), "W_key declares 1.0 MB of data", "far more",
          "(50, 4)")
    short = write_npz(tmp_path / "short.npz", {**three((50, 4)), "W_value": declared((50, 4), data=1000)})
    fails(run("scores", "the cat", "--qkv", short), str(short), "W_value holds 1.0 kB of data", "(1.6 kB)", "cut short")
    assert math.prod((50, 4)) * 8 == 1600


@pytest.mark.parametrize("descr,words", [
    ("|O", ["object array"]), ("<c16", ["W_query", "complex"]), ("|b1", ["W_query", "bool"]),
    ("<U3", ["W_query", "<U3"]), ("|V8", ["W_query", "not real numbers"]), ("<M8[s]", ["W_query", "datetime"]),
])
def test_npz_dtypes_refused_from_the_header(tmp_path, no_data_read, descr, words):
    """Only the header is there: the dtype alone refuses it (an object array is a pickle)."""
    path = write_npz(tmp_path / "dtype.npz", {**three((50, 4)), "W_query": ((50, 4), descr, 0)})
    fails(run("scores", "the cat", "--qkv", path), str(path), *words)


def test_npz_odd_headers_refused(tmp_path, no_data_read):
    for name, member, words in [
        ("negative", ((50, -4), "<f8", 0), ["negative"]),
        ("rank3", ((50, 4, 1), "<f8", 0), ["W_query has shape (50, 4, 1)"]),
        ("scalar", ((), "<f8", 8), ["W_query has shape ()"]),
        ("huge_int", ((10 ** 22, 50), "<f8", 0), ["W_query"]),
    ]:
        path = write_npz(tmp_path / f"{name}.npz", {**three((50, 4)), "W_query": member})
        fails(run("scores", "the cat", "--qkv", path), str(path), *words)
    version = tmp_path / "version.npz"
    with zipfile.ZipFile(version, "w") as z:
        for w in projections.WEIGHTS:
            z.writestr(f"{w}.npy", b"\x93NUMPY\x09\x00" + b"\x00" * 100)
    fails(run("scores", "the cat", "--qkv", version), str(version), "version 9.0")


def test_npz_rnn_shapes_from_w_hh(tmp_path, no_data_read):
    N = 7
    base = {"W_hx": declared((N, 50)), "W_hh": declared((N, N)), "b_h": declared((N,))}
    for change, words in [({"W_hx": declared((N, 49))}, ["W_hx", "(7, 50)"]),
                          ({"W_hh": declared((N, N, N))}, ["W_hh", "not (N, N)"]),
                          ({"b_h": declared((N + 1,))}, ["b_h", "(7,)"]),
                          ({"W_hx": declared((10 ** 8, 50), data=0), "W_hh": declared((10 ** 8, 10 ** 8), data=0),
                            "b_h": declared((10 ** 8,), data=0)}, ["a hidden size of 100,000,000", "4,096"])]:
        path = write_npz(tmp_path / "rnn.npz", {**base, **change})
        fails(run("rnn", "the cat", "--weights", path), str(path), *words)


def test_npz_rnn_weights_within_bounds_are_held_to_memory(tmp_path, no_data_read, monkeypatch):
    N = 4096  # the largest hidden size: 134 MB of W_hh, refused where memory is short
    path = write_npz(tmp_path / "rnn.npz", {"W_hx": declared((N, 50), data=0), "W_hh": declared((N, N), data=0),
                                            "b_h": declared((N,), data=0)})
    with_memory(monkeypatch, 50 << 20)
    fails(run("rnn", "the cat", "--weights", path), str(path), "needs about", "hidden size N")


def test_npz_memory_counts_the_arrays_and_their_float64_copies(tmp_path, monkeypatch):
    W = {w: np.ones((50, 1000), dtype=np.float32) for w in projections.WEIGHTS}  # 150,000 numbers, 600 kB
    path = write_npz(tmp_path / "f32.npz", W)
    with_memory(monkeypatch, 150_000 * 8)  # room for the float64 result, not for the float32 read beside it
    with pytest.raises(projections.ProjectionError, match=r"reading W_query, W_key, W_value \(150,000 numbers\) "
                                                          r"needs about 1\.9 MB of memory, and 1\.2 MB is available"):
        projections.load(str(path), 50)
    with_memory(monkeypatch, 150_000 * 13)
    proj = projections.load(str(path), 50)
    assert all(a.dtype == np.float64 and a.shape == (50, 1000) for a in proj.W.values())


def test_npz_rnn_memory_counts_the_runs_derivatives(tmp_path, monkeypatch):
    N = 300
    path = write_npz(tmp_path / "rnn.npz", {"W_hx": np.ones((N, 50)), "W_hh": np.zeros((N, N)), "b_h": np.ones(N)})
    arrays = (N * 50 + N * N + N) * 8 + N * N  # float64 read, isfinite's largest
    with_memory(monkeypatch, arrays + rnn.working_bytes(N, 50) - 1)
    with pytest.raises(projections.ProjectionError, match="needs about"):
        projections.load_rnn_weights(str(path), 50)
    with_memory(monkeypatch, arrays + rnn.working_bytes(N, 50))
    assert projections.load_rnn_weights(str(path), 50)["W_hh"].shape == (N, N)


def test_npz_that_numpy_writes_still_reads(tmp_path):
    rng = np.random.default_rng(0)
    W = {"W_query": rng.normal(size=(4, 3)).astype(np.float32),
         "W_key": np.asfortranarray(rng.normal(size=(4, 3))),
         "W_value": rng.integers(-5, 5, size=(4, 3)).astype(">i2"),
         "b_key": rng.normal(size=3).astype(">f8")}
    for save in (np.savez, np.savez_compressed):
        path = tmp_path / f"{save.__name__}.npz"
        save(path, **W)
        proj = projections.load(str(path), 4)
        for name, a in {**proj.W, **proj.b}.items():
            assert a.dtype == np.float64 and np.array_equal(a, W[name].astype(np.float64)), name
    bare = tmp_path / "bare.npz"  # members named without .npy, as np.load also finds them
    with zipfile.ZipFile(bare, "w") as z:
        for name, a in W.items():
            buf = io.BytesIO()
            npy.write_array(buf, a)
            z.writestr(name, buf.getvalue())
    assert np.array_equal(projections.load(str(bare), 4).W["W_value"], W["W_value"])
    v2 = tmp_path / "v2.npz"
    with zipfile.ZipFile(v2, "w") as z:
        for name, a in W.items():
            z.writestr(f"{name}.npy", npy_header(a.shape, npy.dtype_to_descr(a.dtype), (2, 0))
                       + np.ascontiguousarray(a).tobytes())
    assert np.array_equal(projections.load(str(v2), 4).W["W_query"], W["W_query"])


def eocd(members: int, directory: int) -> bytes:
    """A zip end record declaring `members` members in a directory of `directory` bytes at 0."""
    return b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, members, members, directory, 0, 0)


def test_npz_zip_directory_too_large_refused(tmp_path):
    path = tmp_path / "directory.npz"
    path.write_bytes(b"PK\x03\x04" + bytes(100) + eocd(65535, 100 << 20))
    line = fails(run("scores", "the cat", "--qkv", path), str(path), "declares a zip directory of 104.9 MB",
                 "65,535 members")
    assert "save only the arrays it needs" in line
    zip64 = tmp_path / "zip64.npz"  # the sizes in a zip64 end record, found through its locator
    record = b"PK\x06\x06" + struct.pack("<QHHIIQQQQ", 44, 45, 45, 0, 0, 10 ** 6, 10 ** 6, 1 << 30, 0)
    locator = b"PK\x06\x07" + struct.pack("<IQI", 0, 104, 1)
    zip64.write_bytes(b"PK\x03\x04" + bytes(100) + record + locator + eocd(0xFFFF, 0xFFFFFFFF))
    fails(run("scores", "the cat", "--qkv", zip64), str(zip64), "1.1 GB", "1,000,000 members")
    # a real archive of many small members is fine
    many = write_npz(tmp_path / "many.npz", {**{f"extra{n}": np.zeros(1) for n in range(2000)},
                                             **{w: np.ones((50, 2)) for w in projections.WEIGHTS}})
    assert one(run("scores", "the cat", "--qkv", many))["qkv"]["d_k"] == 2


@pytest.mark.parametrize("command,option", [("scores", "--qkv"), ("rnn", "--weights"), ("explain", "--qkv")])
def test_fifo_refused_at_once(tmp_path, command, option):
    fifo = tmp_path / "weights.npz"
    os.mkfifo(fifo)
    result = limited_run(command, "the cat", option, fifo, timeout=30)  # no writer: a read would wait for ever
    assert_one_error(result, str(fifo), "not a regular file", f"give {option} a regular file")
    fails(run(command, "the cat", option, fifo), "not a regular file")
    fails(run(command, "the cat", option, "/dev/zero"), "/dev/zero", "not a regular file")


def test_npz_errors_are_projection_errors(tmp_path):
    for path in (tmp_path / "nope.npz", tmp_path, Path("/dev/null")):
        with pytest.raises(projections.ProjectionError):
            projections.load(str(path), 4)


# --------------------------------------------------------------------------- 5. huge counts


HUGE = 100_000_000_000  # 10^11: 3 x 50 x 10^11 x 8 bytes = 120 TB


D_K_COMMANDS = [
    ("qkv", "init", "-o", "{out}"),
    ("scores", "the cat", "--qkv", "random"),
    ("context", "the cat", "--token", "cat", "--qkv", "random"),
    ("explain", "the cat", "--qkv", "random"),
    ("scores", "the cat", "--qkv", "random", "--heads", "7"),
]


@pytest.mark.parametrize("args", D_K_COMMANDS)
@pytest.mark.parametrize("d_k", [HUGE, 100_000_000, 65_537])
def test_huge_d_k_refused_before_drawing(tmp_path, args, d_k):
    out = tmp_path / "p.npz"
    fails(run(*[str(a).format(out=out) for a in args], "--d-k", d_k), "--d-k", "1<=x<=65536", code=2)
    assert not out.exists() and os.listdir(tmp_path) == []


@pytest.mark.parametrize("args", D_K_COMMANDS[:4])
def test_a_d_k_within_bounds_is_held_to_memory_before_drawing(tmp_path, monkeypatch, args):
    out = tmp_path / "p.npz"
    with_memory(monkeypatch, 10 << 20)
    fails(run(*[str(a).format(out=out) for a in args], "--d-k", 65_536), "drawing W_query, W_key, W_value of 50 x 65,536",
          "needs about 78.6 MB", "of memory", "is available", "smaller --d-k")
    assert not out.exists() and os.listdir(tmp_path) == []


def test_heads_are_checked_against_d_k_before_anything_is_drawn(monkeypatch):
    """--heads 7 of --d-k 65,535: refused as that mistake, with no memory at all to draw in."""
    with_memory(monkeypatch, 0)
    fails(run("scores", "the cat", "--qkv", "random", "--d-k", 65_535, "--heads", 7), "--heads 7 does not divide "
          "d_k = 65535")


def test_init_projections_checks_its_three_arrays(monkeypatch):
    d, d_k = 20, 1000
    with_memory(monkeypatch, 3 * d * d_k * 8 - 1)
    with pytest.raises(limits.ResourceError, match=r"drawing W_query, W_key, W_value of 20 x 1,000 needs about 480\.0 kB"):
        attention.init_projections(d, d_k, 0)
    with_memory(monkeypatch, 3 * d * d_k * 8)
    W = attention.init_projections(d, d_k, 0)
    assert [a.shape for a in W.values()] == [(d, d_k)] * 3


@pytest.mark.parametrize("N", [10_000_000, 1_000_000, 4097])
def test_huge_hidden_refused_before_drawing(N):
    fails(run("rnn", "the cat", "--hidden", N), "--hidden", f"{N} is not in the range 1<=x<=4096", code=2)


def test_init_weights_checks_weights_and_derivatives(monkeypatch):
    d, N = 50, 400
    need = (N * N + N * d + N) * 8 + rnn.working_bytes(N, d)
    with_memory(monkeypatch, need - 1)
    with pytest.raises(limits.ResourceError, match="an RNN of hidden size N = 400"):
        rnn.init_weights(d, N, 0)
    with_memory(monkeypatch, need)
    assert rnn.init_weights(d, N, 0)["W_hh"].shape == (N, N)


# --------------------------------------------------------------------------- 6. queries, keys, values


def test_apply_checks_t_by_d_k_before_projecting(monkeypatch):
    d, d_k, T = 50, 1000, 200
    proj = projections.Projections("random", attention.init_projections(d, d_k, 0), seed=0)
    X = random_X(T, d)
    need = (4 * T * d_k + T * d) * 8  # Q, K, V, a bias's sum; X as float64
    with_memory(monkeypatch, need - 1)
    monkeypatch.setattr(attention, "project", lambda *a: pytest.fail("projected before the check"))
    with pytest.raises(limits.ResourceError, match=r"projecting 200 tokens to queries, keys and values of "
                                                   r"d_k = 1,000 needs about 6\.5 MB .* shorter sentence"):
        proj.apply(X)
    monkeypatch.undo()
    with_memory(monkeypatch, need)
    Q, K, V = proj.apply(X)
    assert Q.shape == K.shape == V.shape == (T, d_k)


def test_apply_refusal_on_the_cli(monkeypatch):
    """Projections that fit, for a sentence whose T x d_k does not: memory is short only
    while projecting (the error catalogue runs the real thing, 100,000 tokens)."""
    real = limits.available
    monkeypatch.setattr(limits, "available", lambda: 1_000_000 if called_from(projections.Projections.apply) else real())
    sentence = " ".join(["the cat sat on the mat"] * 40)  # 240 tokens: 240 x 1,000 x 32 bytes = 7.7 MB
    for command, extra in (("scores", ()), ("context", ("--all",)), ("explain", ())):
        fails(run(command, sentence, "--qkv", "random", "--d-k", 1000, *extra),
              "projecting 240 tokens to queries, keys and values of d_k = 1,000 needs about", "shorter sentence")
    assert one(run("scores", "the cat", "--qkv", "random", "--d-k", 1000))["qkv"]["d_k"] == 1000


def test_every_refusal_is_an_attncli_error():
    assert issubclass(limits.ResourceError, AttncliError) and issubclass(ScaleError, AttncliError)
    assert issubclass(projections.ProjectionError, AttncliError)


# --------------------------------------------------------------------------- 7. embed: rows, then one gather


def per_token_embed(tokens, vectors, *, oov="skip", most=None):
    """embed as it was: a numpy row per token, then np.stack; the reference for the compact path."""
    kept, rows, lookups, missing, first = [], [], [], [], []
    for token in tokens:
        if len(first) <= 10:
            first.append(token)
        found = vectors.row(token)
        word = None if found is None else token
        if found is not None:
            row, lookup = np.asarray(vectors.matrix[found]), "word"
        elif vectors.subwords is not None and (row := vectors.subwords.vector(token)) is not None:
            word, lookup = token, "subwords"
        else:
            missing.append(token)
            if oov == "error":
                raise InputError(f"no vector for {token!r} in {vectors.name}; use --oov skip or --oov zero to go on without it")
            if oov == "skip":
                continue
            row, lookup = np.zeros(vectors.dim, np.float32), "zero"
        if not np.all(np.isfinite(row)):
            cached = "; if the file is fine, its cache entry is damaged: attncli vectors clear removes it" \
                if vectors.meta.get("entry") and vectors.source != "bundled" else ""
            raise InputError(f"the vector of {word!r} in {vectors.name} holds NaN or infinity; fix the file or "
                             f"leave the word out{cached}")
        if most is not None and len(kept) >= most:
            raise TooManyTokens(most)
        kept.append(token)
        rows.append(row)
        lookups.append(lookup)
    if not kept:
        shown = " ".join(first[:10]) + (" …" if len(first) > 10 else "")
        raise InputError(f"none of the tokens ({shown}) has a vector in {vectors.name}; try other words or --vectors")
    return Embedded(kept, np.stack(rows), lookups, missing)


def outcome(embed_function, tokens, vectors, **kw):
    """What an embed gives: its four fields, or the exception's type and message."""
    try:
        e = embed_function(iter(tokens), vectors, **kw)
    except AttncliError as error:
        return type(error), str(error)
    assert e.X.flags.c_contiguous
    return e.tokens, e.X.dtype, e.X.shape, e.X.tobytes(), e.lookups, e.oov


def random_vectors(*, subwords: bool, cased: bool = False, nan: bool = False, d: int = 6, seed: int = 0) -> Vectors:
    """40 random words and, for fastText, 97 buckets of n-grams of 4 and 5 characters (a word of
    one character has no n-gram: with subwords, such a word is still out of vocabulary)."""
    rng = np.random.default_rng(seed)
    words = sorted({"".join(rng.choice(list("abcdefgh"), size=rng.integers(2, 6))) for _ in range(60)})[:40]
    if cased:
        words = [w.capitalize() if n % 3 == 0 else w for n, w in enumerate(words)]
    matrix = rng.standard_normal((len(words), d)).astype(np.float32)
    if nan:
        matrix[7, 2] = np.nan
    grams = Subwords(rng.standard_normal((97, d)).astype(np.float32), 4, 5) if subwords else None
    return Vectors("tiny", Vocabulary.from_words(words), matrix, cased, subwords=grams)


def random_sentence(vectors: Vectors, rng, n: int) -> list[str]:
    """Words of the vocabulary (some capitalised), unknown words, and one-letter unknown words."""
    words = [vectors.vocab.word(i) for i in range(vectors.size)]
    pool = words + [w.upper() for w in words[:5]] + ["zz", "qqqq", "xyzzy", "héllo", "q", "ü", "x"]
    return [str(w) for w in rng.choice(pool, size=n)]


@pytest.mark.parametrize("cached", [word_encoder.CACHED_TOKENS, 3, 0], ids=["cache", "small-cache", "no-cache"])
@pytest.mark.parametrize("kind", ["glove", "glove-cased", "fasttext", "nan"])
def test_embed_equals_the_per_token_path(monkeypatch, kind, cached):
    """X, tokens, lookups and oov, bit for bit, or the same error at the same token: for each
    policy, with and without a bound on the tokens kept, whether lookups are cached or not."""
    monkeypatch.setattr(word_encoder, "CACHED_TOKENS", cached)
    vectors = random_vectors(subwords=kind == "fasttext", cased=kind == "glove-cased", nan=kind == "nan")
    rng = np.random.default_rng(len(kind) + cached)
    seen = set()
    for n in [1, 2, 3, 10, 50, 300] * 6:
        tokens = random_sentence(vectors, rng, n)
        for oov in ("skip", "zero", "error"):
            for most in (None, 1, n // 2, n):
                want = outcome(per_token_embed, tokens, vectors, oov=oov, most=most)
                assert outcome(embed, tokens, vectors, oov=oov, most=most) == want, (tokens, oov, most)
                seen.add(want[0] if isinstance(want[0], type) else tuple(sorted(set(want[4]))))
    # every lookup and every error came up: the comparison covered them
    assert InputError in seen and ("word",) in {s[:1] for s in seen if isinstance(s, tuple)}
    if kind == "fasttext":
        assert any("subwords" in s and "zero" in s for s in seen if isinstance(s, tuple))
    if kind != "nan":
        assert TooManyTokens in seen


def test_embed_of_a_bundled_document_equals_the_per_token_path(glove):
    """A few thousand tokens of a real text, known and unknown words, under every policy."""
    words = [glove.vocab.word(r) for r in range(0, 100_000, 37)] + ["zzqx", "qqzx", "xxyyzz"]
    tokens = [str(w) for w in np.random.default_rng(3).choice(words, size=5000)]
    for oov in ("skip", "zero"):
        want = outcome(per_token_embed, tokens, glove, oov=oov)
        assert outcome(embed, tokens, glove, oov=oov) == want
        assert outcome(embed, tokens, glove, oov=oov, most=4000) == (TooManyTokens, "more than 4,000 tokens have vectors")


def test_embed_stops_at_most_without_looking_further(glove):
    """TooManyTokens as the count passes `most`: the tokens after it are never drawn."""
    drawn = []

    def endless():
        while True:
            drawn.append(1)
            yield "the"

    with pytest.raises(TooManyTokens, match="more than 1,000 tokens"):
        embed(endless(), glove, most=1000)
    assert len(drawn) == 1001


def test_embed_memory_is_a_few_pointers_a_token_beside_x(glove):
    """Beside X (T, d) float32, a token costs its places in `tokens` and `lookups` and its row
    code: about 24 bytes, where a numpy row per token cost several hundred; repeated words
    share one string."""
    words = [w for w in map(glove.vocab.word, range(100, 6100)) if w.isascii() and w.isalpha()]
    text = " ".join(str(w) for w in np.random.default_rng(5).choice(words, size=200_000))
    tokens = iter_tokens(text)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        e = embed(tokens, glove)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    T = len(e.tokens)
    assert T == 200_000 and e.X.dtype == np.float32 and e.X.shape == (T, 50)
    beside = (peak - before - e.X.nbytes) / T
    assert beside < 64, beside  # the old path: about 800
    assert len({id(t) for t in e.tokens}) == len(set(e.tokens))  # one string per distinct word


# --------------------------------------------------------------------------- 8. a document's T, before the work


def bundled_text(vectors, n: int, seed: int = 0) -> str:
    words = [w for w in map(vectors.vocab.word, range(200, 3200)) if w.isascii() and w.isalpha() and len(w) > 1]
    return " ".join(str(w) for w in np.random.default_rng(seed).choice(words, size=n))


def no_stream(monkeypatch) -> None:
    monkeypatch.setattr(attention, "stream", lambda *a, **k: pytest.fail("the stream started"))


def test_document_token_bytes_counts_x_the_streams_copies_and_the_tokens():
    d = 50
    assert long_docs.document_token_bytes(d) == 4 * d + 4 * d + d + 24 + 64  # X, keys, their check, pointers, a string
    assert long_docs.document_token_bytes(d, subwords=True) == long_docs.document_token_bytes(d) + 4 * d


def test_document_token_bytes_is_at_least_what_a_document_takes(glove):
    """tracemalloc's peak from before the count to the first block, a token at a time: within
    the estimate the count stops by (the stream's blocks aside, sized from what is left)."""
    text = bundled_text(glove, 100_000, seed=2)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        rows = long_docs.document_rows(text, glove, encoder.Options(), window=5, block=16)
        next(rows)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    per_token = (peak - before) / 100_000
    assert 0.75 * long_docs.document_token_bytes(50) < per_token <= long_docs.document_token_bytes(50), per_token


def test_document_too_large_for_memory_is_refused_while_counting(monkeypatch, glove):
    per_token = long_docs.document_token_bytes(50)
    text = bundled_text(glove, 1000)
    room = 600 * per_token  # the count stops at 600 tokens
    monkeypatch.setattr(limits, "available", lambda: room)
    drawn = []
    real = WordEncoder.embed_sentence
    monkeypatch.setattr(WordEncoder, "embed_sentence", lambda *a, **k: drawn.append(k["most"]) or real(*a, **k))
    no_stream(monkeypatch)
    with pytest.raises(limits.ResourceError) as refused:
        next(long_docs.document_rows(text, glove, encoder.Options(), window=5))
    assert drawn == [600]
    assert str(refused.value) == (
        f"the document holds more than 600 tokens with vectors, and at {per_token} bytes a token (its vectors, their "
        f"copies for the stream, its tokens) they need more than the {limits.size(room)} of memory available; "
        "split it into shorter documents")
    monkeypatch.undo()
    monkeypatch.setattr(limits, "available", lambda: room)
    rows = list(long_docs.document_rows(bundled_text(glove, 600), glove, encoder.Options(), window=5))
    assert len(rows) == 600  # as many as fit: computed


def test_document_too_large_for_memory_on_the_cli(monkeypatch, tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("the cat sat on the mat\n" * 200, encoding="utf-8")  # 1,200 tokens
    real = limits.available
    room = 1000 * long_docs.document_token_bytes(50)
    monkeypatch.setattr(limits, "available", lambda: room if called_from(long_docs.document_rows) else real())
    for extra in (("--json",), ("--json", "--window", "3"), ("--format", "table")):
        fails(run("scores", "--file", path, *extra), "the document holds more than", "tokens with vectors",
              "538 bytes a token", "of memory available", "split it into shorter documents")


def test_document_too_large_for_memory_under_a_real_limit(tmp_path, glove):
    """In 500 MB of address space (some 320 MB of it free once started: 600,000 tokens), 1,000,000
    tokens do not fit: one line, while counting, with no MemoryError (the count stops before X
    is gathered, so the run never nears the limit)."""
    path = tmp_path / "doc.txt"
    path.write_text(bundled_text(glove, 1_000_000), encoding="utf-8")
    result = limited_run("scores", "--file", path, "--json", "--window", "5", address_space=500 << 20)
    assert_one_error(result, "the document holds more than", "of memory available", "split it")


def test_document_words_without_vectors_are_not_listed(glove):
    """A document never shows its unknown tokens: millions of them are not held."""
    text = "the zzqx cat qqzx " * 50
    e = glove.embed_sentence(text, encoder.Options(), list_missing=False)
    full = glove.embed_sentence(text, encoder.Options())
    assert e.oov == [] and len(full.oov) == 100
    assert e.tokens == full.tokens and e.lookups == full.lookups and np.array_equal(e.X, full.X)
    z = glove.embed_sentence(text, encoder.Options(oov="zero"), list_missing=False)
    assert z.oov == [] and z.lookups.count("zero") == 100 and not z.X[1].any()


def test_the_time_cap_is_the_constant_squared():
    cap = long_docs.LONGEST_WITHOUT_WINDOW
    assert cap == 400_000
    assert long_docs.document_most_tokens(None) == cap
    assert long_docs.document_most_tokens(5) == cap * cap // 266  # a block of 256 rows and 5 either side
    assert long_docs.document_most_tokens(5) > 100 * 10 ** 6  # more tokens than a run can hold: no cap in practice
    assert long_docs.document_most_tokens(cap) == long_docs.document_most_tokens(10 ** 9) == cap  # T x T again


def test_document_too_long_without_window_is_refused_before_the_work(monkeypatch, glove):
    monkeypatch.setattr(long_docs, "LONGEST_WITHOUT_WINDOW", 1000)
    long = bundled_text(glove, 1001)
    opts = encoder.Options()
    with monkeypatch.context() as m:
        no_stream(m)
        with pytest.raises(limits.ResourceError) as refused:
            next(long_docs.document_rows(long, glove, opts))
    assert str(refused.value) == ("a document of more than 1,000 tokens without --window: its T x T scores would "
                                  "take half an hour to hours (more than 1e+06 cells); give --window W, or split it")
    with monkeypatch.context() as m:
        no_stream(m)
        with pytest.raises(limits.ResourceError, match="1,000 tokens without --window"):
            next(long_docs.document_rows(long, glove, encoder.Options(mask="causal")))
    assert len(list(long_docs.document_rows(bundled_text(glove, 1000), glove, opts))) == 1000
    # a window computes T (block + 2W) cells: 1e6 // (16 + 6) tokens
    assert len(list(long_docs.document_rows(long, glove, opts, window=3, block=16))) == 1001
    with pytest.raises(limits.ResourceError) as refused:
        next(long_docs.document_rows(bundled_text(glove, 10 ** 6 // 22 + 1), glove, opts, window=3, block=16))
    assert str(refused.value) == ("a document of more than 45,454 tokens with --window 3: its scores would take "
                                  "half an hour to hours (more than 1e+06 cells, 22 a token); give a smaller "
                                  "--window, or split it")


def test_document_too_long_on_the_cli(monkeypatch, tmp_path):
    monkeypatch.setattr(long_docs, "LONGEST_WITHOUT_WINDOW", 1000)
    path = tmp_path / "doc.txt"
    path.write_text("the cat sat on the mat\n" * 200, encoding="utf-8")  # 1,200 tokens
    for extra in (("--json",), ("--json", "--mask", "causal"), ()):
        fails(run("scores", "--file", path, *extra), "a document of more than 1,000 tokens without --window",
              "would take half an hour to hours", "give --window W, or split it")
    fails(run("scores", "--document", "--json", input=path.read_bytes()), "more than 1,000 tokens without --window")
    assert len(ok(run("scores", "--file", path, "--json", "--window", "3"))) == 1200  # 1e6 // 262 = 3,816 tokens
    fails(run("scores", "--file", path, "--json", "--window", "5000"),
          "a document of more than 1,000 tokens with --window 5,000", "give a smaller --window, or split it")


# --------------------------------------------------------------------------- 9. files read to their end


def test_a_proc_file_is_read_whole():
    """/proc files are regular and say they hold 0 bytes: read to the end, not st_size + 1."""
    assert os.stat("/proc/self/status").st_size == 0
    data = reading.read_file("/proc/self/status", "--file")
    assert data.startswith(b"Name:") and b"\nThreads:" in data and data.endswith(b"\n") and len(data) > 500
    with open("/proc/self/status", "rb") as f:
        assert len(data.splitlines()) == len(f.read().splitlines())


def test_a_proc_file_as_a_document(tmp_path):
    rows = ok(run("scores", "--file", "/proc/self/status", "--json", "--window", "2"))
    tokens = [r["token"] for r in rows]
    assert len(tokens) > 30 and {"name", "state", "threads"} <= set(tokens), tokens[:20]


def test_a_file_longer_than_its_size_says_is_refused_past_the_cap(monkeypatch):
    with pytest.raises(limits.ResourceError, match=r"^/proc/self/status holds more than 100 bytes, more than this "
                                                   r"run can take in memory .* give a smaller input, or split it$"):
        reading.read_file("/proc/self/status", "--file", most=100)
    monkeypatch.setattr(limits, "available", lambda: 1000)  # a tenth of it, at least 1 MB: the default cap
    assert len(reading.read_file("/proc/self/status", "--file")) > 500


def test_a_file_that_grows_while_read(tmp_path, monkeypatch):
    """The size at open is a hint: what is there when it is read is read, to the cap."""
    path = tmp_path / "growing.txt"
    real = os.fstat

    def smaller(fd):  # the size stat gave before the file grew to 3 MB
        st = real(fd)
        return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:]))

    path.write_bytes(b"y" * (3 << 20))
    monkeypatch.setattr(reading.os, "fstat", smaller)
    assert reading.read_file(path, "--file") == b"y" * (3 << 20)
    with pytest.raises(limits.ResourceError, match="holds more than 2.1 MB"):
        reading.read_file(path, "--file", most=2 << 20)


def test_a_file_larger_than_the_cap_is_refused_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "big.txt"
    path.write_bytes(b"z" * 5000)
    monkeypatch.setattr(reading, "_read_to_end", lambda *a, **k: pytest.fail("read"))
    with pytest.raises(limits.ResourceError, match=r"big.txt holds 5.0 kB, more than this run can take in memory"):
        reading.read_file(path, "--file", most=4999)
    real_open = reading.open_regular

    class Reads:
        def __init__(self, f):
            self.f, self.sizes = f, []

        def read(self, n=-1):
            self.sizes.append(n)
            return self.f.read(n)

        def fileno(self):
            return self.f.fileno()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    opened = []
    monkeypatch.setattr(reading, "open_regular", lambda *a: opened.append(Reads(real_open(*a))) or opened[-1])
    assert reading.read_file(path, "--file", most=5000) == b"z" * 5000
    assert opened[0].sizes == [5001]  # a file its size describes: one read


def test_a_short_sentence_is_made_without_asking_and_a_long_one_asks(monkeypatch, glove):
    """Matrices of at most word_encoder.UNASKED bytes need no reading of /proc/meminfo (batch
    would read it for every line); past that the system is asked, and a room too small refuses."""
    asked = []
    monkeypatch.setattr(limits, "available", lambda: asked.append(1) or 0)
    per_cell = encoder.cell_bytes(1, 4)
    fits = math.isqrt(word_encoder.UNASKED // per_cell)
    letters = [w for w in map(glove.vocab.word, range(200, 400)) if w.isalpha()][: fits + 1]
    words = " ".join(letters[:fits])
    assert len(glove.embed_fitting(words, encoder.Options(), per_cell).tokens) == fits
    assert asked == []
    longer = " ".join(letters)
    with pytest.raises(limits.ResourceError, match="its T x T matrices would need more than"):
        glove.embed_fitting(longer, encoder.Options(), per_cell)
    assert asked


def test_a_vector_not_finite_is_refused_on_every_sentence_that_holds_it(glove):
    matrix = np.array(glove.matrix[:300])
    matrix[250, 3] = np.nan
    vectors = Vectors("v", glove.vocab.first(300), matrix, cased=False)
    word = vectors.vocab.word(250)
    for sentence in (f"{word} the", f"the {word}"):
        with pytest.raises(InputError, match="holds NaN or infinity"):
            sentence_docs.scores_doc(sentence, vectors)
    assert sentence_docs.scores_doc("the of", vectors)["tokens"] == ["the", "of"]
    assert word not in vectors.checked and "the" in vectors.checked


# --------------------------------------------------------------------------- 10. a model's text files


def large_tokenizer(folder: Path, name: str, size: int) -> Path:
    """A tiny model's folder whose tokenizer.json (or vocab.txt) holds about `size` bytes of
    pieces in hexadecimal, 100,000 at a time: the shortest distinct pieces, the vocabulary
    tokenizers expands most for its size."""
    from tinybert import VOCAB

    path = folder / name
    if name == "vocab.txt":
        (folder / "tokenizer.json").unlink()
        head, tail, piece = "".join(f"{w}\n" for w in VOCAB).encode(), b"", lambda i: b"%x\n" % i
    else:
        text = path.read_text()
        at = text.index('"[PAD]"', text.index('"vocab"'))  # the vocabulary's first piece
        head, tail, piece = text[:at].encode(), text[at:].encode(), lambda i: b'"%x":%d,' % (i, i)
    with open(path, "wb") as f:
        f.write(head)
        first = len(VOCAB)
        while f.tell() < size - len(tail):
            f.write(b"".join(map(piece, range(first, first + 100_000))))
            first += 100_000
        f.write(tail)
    return path


@pytest.mark.parametrize("name", ["tokenizer.json", "vocab.txt"])
def test_a_tokenizer_file_larger_than_memory_can_parse_in_1_gb(tmp_path, name):
    """95 MB of short pieces, under the 100 MB any tokenizer file may hold: tokenizers would
    take 1.6 GB (tokenizer.json) or 2.8 GB (vocab.txt) for them and, in 1 GB of address space,
    abort the process with its own message and a backtrace (exit 134). Refused first, from
    the file's size: 64 times it is more than the room left."""
    pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    from tinybert import write_model

    folder = write_model(tmp_path / "m")
    path = large_tokenizer(folder, name, 95_000_000)
    size = path.stat().st_size
    assert 95_000_000 <= size < files.TOKENIZER_MOST
    result = limited_run("scores", "the earth", "--model", folder, address_space=1 << 30)
    assert_one_error(result, f"{path} ({limits.size(size)}, 64 times that once parsed) needs about "
                             f"{limits.size(64 * size)} of memory, and ", "is available; give the model's own file")


# --------------------------------------------------------------------------- 11. a long text through a model's tokenizer

MODELS = Path(__file__).parent / "data" / "models"
# one model of each kind of tokenizer: WordPiece, byte-level BPE, SentencePiece's BPE, Unigram
TOKENIZER_KINDS = ("tiny-bert", "tiny-gpt2", "tiny-llama", "tiny-xlm-roberta")


def prose(n: int, seed: int = 0) -> str:
    """About `n` characters of words, punctuation, digits, accents and runs of white space."""
    rng = np.random.default_rng(seed)
    words = ["the", "earth", "is", "like", "an", "orange", "naïve", "café", "über", "日本語", "42,",
             "(river)", "don't", "bank", "Ğ", "\t", "  ", "\n"]
    out, size = [], 0
    while size < n:
        w = words[rng.integers(len(words))]
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


class Recording:
    """A model's tokenizer that remembers the length of each text it was given."""

    def __init__(self, tokenizer):
        self.tokenizer, self.lengths = tokenizer, []

    def encode(self, text, **kw):
        self.lengths.append(len(text))
        return self.tokenizer.encode(text, **kw)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


@pytest.mark.parametrize("name", TOKENIZER_KINDS)
def test_a_chunk_at_a_time_counts_the_pieces_of_the_whole_within_the_slack(name):
    """The chunks' pieces, cut where white space begins, are the text's within CUT_SLACK a cut:
    what makes a refusal from them never one of a text the model could read."""
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    from attncli import models

    model = models.load_model(str(MODELS / name))
    for seed in range(3):
        text = prose(5 * files.CHUNK + 123, seed)
        whole = len(model.tokenizer.encode(text, add_special_tokens=False).ids)
        start, counted, cuts = 0, 0, 0
        while start < len(text):
            end = files._cut(text, start)
            counted += len(model.tokenizer.encode(text[start:end], add_special_tokens=False).ids)
            cuts, start = cuts + (end < len(text)), end
        assert cuts >= 4 and abs(counted - whole) <= files.CUT_SLACK * cuts, (counted, whole, cuts)


@pytest.mark.parametrize("name", TOKENIZER_KINDS)
def test_a_long_text_is_refused_before_the_tokenizer_sees_it_whole(name):
    """A line of 2 million characters: refused once its first chunk holds more pieces than the
    model's positions, the tokenizer never given more than a chunk of it."""
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    from attncli import models
    from attncli.errors import ModelError

    model = models.load_model(str(MODELS / name))
    model.tokenizer = Recording(model.tokenizer)
    most, _ = model.config.length_limit()
    with pytest.raises(ModelError, match=rf"^the sentence is more than {most:,} word pieces long \(its first "
                                         rf"[\d,]+ characters of 2,000,000 hold [\d,]+\), and {name} reads at most"):
        model.encode(prose(2_000_100)[:2_000_000])
    assert max(model.tokenizer.lengths) <= files.CHUNK and len(model.tokenizer.lengths) <= 2


def test_a_long_text_the_model_can_read_gives_the_pieces_it_gave_whole():
    """Blanks beyond a chunk, then a sentence: counted a chunk at a time, found within the
    positions, then tokenized whole, the same pieces as the tokenizer gives."""
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    from attncli import models

    model = models.load_model(str(MODELS / "tiny-bert"))
    text = " " * (3 * files.CHUNK) + "the earth is like an orange"
    assert list(model.encode(text).ids) == model.tokenizer.encode(text).ids


def test_a_long_text_whose_tokenizing_memory_cannot_hold_is_refused_first(monkeypatch):
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    from attncli import models

    model = models.load_model(str(MODELS / "tiny-bert"))
    model.tokenizer = Recording(model.tokenizer)
    monkeypatch.setattr(limits, "available", lambda: 10 * files.CHUNK * files.TOKENIZED)
    text = " " * (20 * files.CHUNK)  # WordPiece gives blanks no piece: the whole is what is refused
    with pytest.raises(limits.ResourceError, match=f"^tokenizing a text of {len(text):,} characters needs about"):
        model.encode(text)
    assert max(model.tokenizer.lengths) <= files.CHUNK


def test_a_corpus_line_too_long_is_skipped_with_its_number_before_it_is_tokenized(tmp_path):
    """stats and faithfulness: the long line skipped, saying which, the others read."""
    lines = tmp_path / "corpus.txt"
    long = prose(400_000).replace("\n", " ")
    lines.write_text(f"the earth is like an orange\n{long}\nthe bank of the river\n", encoding="utf-8")
    for command in (("stats", lines), ("faithfulness", lines)):
        result = run(*command, "--model", MODELS / "tiny-bert", "--json")
        assert result.exit_code == 0, result.stderr
        assert result.stderr.startswith("attncli: warning: 1 of 3 lines skipped (line 2: the sentence is more than "
                                        "64 word pieces long (its first 65,534 characters of 400,000 hold "), result.stderr
