"""Whole documents and many sentences: attention.stream, analyze.document_rows, `scores
--file/--document/--window`, and `batch` (attncli.batch) in one process and in several.

The streamed path computes in float32 a block of rows at a time; every number here is
checked against the in-memory float64 path (attention.scores/weights/context) or an
independent float64 softmax, to float32 precision, and every top list against
attention.top_attended or a sort by (-weight, position).
"""

from __future__ import annotations

import inspect
import json
import math
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from attncli import Options, attention, context_doc, scores_doc
from attncli import batch as batches
from attncli import limits
from attncli.analyze import document_rows
from clirunner import fails, ok, one, run
from helpers import ENTRY_POINT, collect, expected_top, process_env, random_X

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

RTOL = 1e-4  # float32 precision, as stream promises
ROW_KEYS = {"token", "index", "top", "context"}


# --------------------------------------------------------------------------- helpers


def loop_window_mask(T: int, W: int) -> np.ndarray:
    return np.array([[abs(i - j) > W for j in range(T)] for i in range(T)], dtype=bool)


def loop_causal_mask(T: int) -> np.ndarray:
    return np.array([[j > i for j in range(T)] for i in range(T)], dtype=bool)


def make_mask(T: int, causal: bool, window: int | None) -> np.ndarray | None:
    mask = None
    if causal:
        mask = loop_causal_mask(T)
    if window is not None:
        w = loop_window_mask(T, window)
        mask = w if mask is None else mask | w
    return mask


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def bundled_words(vectors, first: int = 200, last: int = 6000) -> list[str]:
    """Plain lowercase words of the bundled GloVe that the tokenizer keeps whole."""
    words = [vectors.vocab.word(r) for r in range(first, last)]
    return [w for w in words if w.isascii() and w.isalpha() and len(w) > 1]


def independent(vectors, tokens: list[str], *, mask=None, scale=None):
    """float64 weights (T, T) and context vectors (T, d): z_i = sum_j softmax_j(x_i.x_j * s)_j x_j.
    The scores come from a matrix of the distinct words only, so that two occurrences of a
    word get bit-identical scores (true ties)."""
    distinct = sorted(set(tokens))
    where = {w: n for n, w in enumerate(distinct)}
    U = np.array([np.asarray(vectors.vector(vectors.key(w)), dtype=np.float64) for w in distinct])  # (u, d)
    idx = np.array([where[t] for t in tokens])
    S = (U @ U.T)[np.ix_(idx, idx)]  # (T, T)
    s = 1.0 / math.sqrt(vectors.dim) if scale is None else scale
    logits = S * s
    if mask is not None:
        logits = np.where(mask, -np.inf, logits)
    W = softmax_rows(logits)
    return W, W @ U[idx]


def check_rows(rows, vectors, tokens, *, k=3, mask=None, include_self=False, ties_by_position=True):
    """Every row of a document against the independent float64 computation."""
    W, Z = independent(vectors, tokens, mask=mask)
    assert len(rows) == len(tokens)
    for i, row in enumerate(rows):
        assert set(row) == ROW_KEYS
        assert row["index"] == i and row["token"] == tokens[i]
        assert len(row["context"]) == vectors.dim
        np.testing.assert_allclose(row["context"], Z[i], rtol=RTOL, atol=1e-5)
        want = expected_top(W[i], i, k, None if mask is None else mask[i], include_self)
        got = [t["index"] for t in row["top"]]
        if ties_by_position:
            assert got == want, (i, row["top"], want)
        else:  # the same words with the same weights; among equal weights any position
            assert [t["token"] for t in row["top"]] == [tokens[j] for j in want], (i, row["top"], want)
        for t in row["top"]:
            assert set(t) == {"token", "index", "weight"}
            assert t["token"] == tokens[t["index"]]
            assert t["weight"] == pytest.approx(W[i, t["index"]], rel=RTOL, abs=1e-12)
        np.testing.assert_allclose([t["weight"] for t in row["top"]], W[i, want], rtol=RTOL, atol=1e-12)


def run_process(*args, stdin: bytes | None = None, **extra_env) -> subprocess.CompletedProcess:
    return subprocess.run([str(ENTRY_POINT), *map(str, args)], input=stdin, capture_output=True,
                          env=process_env(**extra_env), timeout=120)


def without_line(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "line"}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def distinct_text(glove) -> tuple[str, list[str]]:
    """~300 different bundled words, shuffled: no two tokens have the same vector, so no ties."""
    words = bundled_words(glove)
    rng = np.random.default_rng(7)
    tokens = [str(w) for w in rng.choice(words, size=300, replace=False)]
    return " ".join(tokens), tokens


@pytest.fixture(scope="module")
def repeated_text(glove) -> tuple[str, list[str]]:
    """300 tokens drawn from 60 words: every word repeats, as in real text."""
    words = bundled_words(glove)[:60]
    rng = np.random.default_rng(11)
    tokens = [str(w) for w in rng.choice(words, size=300, replace=True)]
    return " ".join(tokens), tokens


@pytest.fixture(scope="module")
def doc_path(tmp_path_factory, distinct_text) -> Path:
    path = tmp_path_factory.mktemp("docs") / "doc.txt"
    text, _ = distinct_text
    # over several lines, as a file is: a line break is only white space between tokens
    words = text.split()
    path.write_text("\n".join(" ".join(words[n:n + 17]) for n in range(0, len(words), 17)) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- 1. attention.stream


@pytest.mark.parametrize("T", [1, 2, 5, 12])
@pytest.mark.parametrize("W", [0, 1, 3, 20])
def test_window_mask_is_the_loop_definition(T, W):
    mask = attention.window_mask(T, W)
    assert mask.dtype == bool and mask.shape == (T, T)
    np.testing.assert_array_equal(mask, loop_window_mask(T, W))
    assert not mask.diagonal().any()  # a token is always within its own window


def test_causal_mask_is_the_loop_definition():
    for T in (1, 4, 9):
        np.testing.assert_array_equal(attention.causal_mask(T), loop_causal_mask(T))


@pytest.mark.parametrize("include_self", [False, True], ids=["no-self", "self"])
@pytest.mark.parametrize("window", [None, 1, 4, 299, 300, 1000], ids=lambda w: f"W{w}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_stream_equals_in_memory(causal, window, include_self):
    T, d = 300, 16
    X = random_X(T, d)
    scale = attention.default_scale(d)
    mask = make_mask(T, causal, window)
    if causal and window is None:
        np.testing.assert_array_equal(mask, attention.causal_mask(T))
    if window is not None and not causal:
        np.testing.assert_array_equal(mask, attention.window_mask(T, window))
    alpha = attention.weights(attention.scores(X.astype(np.float64)), scale, 1.0, mask)  # (T, T) float64
    Z = attention.context(alpha, X)  # (T, d)
    for k in (3, 500):  # 500 > T: every candidate, then -1 for the places nothing fills
        kk = min(k, T)
        want_top = np.full((T, kk), -1)  # top_attended's positions, padded with -1
        want_w = np.full((T, kk), -1.0)
        for i in range(T):
            want = attention.top_attended(alpha[i], k, None if include_self else i, None if mask is None else mask[i])
            want_top[i, : len(want)] = want
            want_w[i, : len(want)] = alpha[i, want]
            candidates = T if mask is None else int((~mask[i]).sum())
            assert len(want) == min(k, candidates - (0 if include_self else 1))
        for block in (1, 7, 64, 1000):
            starts, top, w, Zs = collect(attention.stream(X, scale, 1.0, k, causal=causal, window=window,
                                                          include_self=include_self, block=block))
            assert starts == list(range(0, T, block))
            assert top.shape == w.shape == (T, kk) and Zs.shape == (T, d)
            np.testing.assert_allclose(Zs, Z, rtol=RTOL, atol=1e-5)
            filled = w >= 0
            np.testing.assert_array_equal(filled, want_top >= 0)  # the unfilled places: the same, at the end
            assert np.all(w[~filled] == -1.0)
            np.testing.assert_array_equal(np.where(filled, top, -1), want_top)
            np.testing.assert_allclose(w, want_w, rtol=RTOL, atol=1e-12)


def test_stream_scale_and_temperature():
    X = random_X(150, 8, seed=3)
    mask = attention.window_mask(150, 6)
    alpha = attention.weights(attention.scores(X.astype(np.float64)), 0.3, 0.7, mask)
    _, top, w, Z = collect(attention.stream(X, 0.3, 0.7, 4, window=6, block=64))
    np.testing.assert_allclose(Z, attention.context(alpha, X), rtol=RTOL, atol=1e-5)
    for i in range(150):
        want = attention.top_attended(alpha[i], 4, i, mask[i])
        assert top[i].tolist() == want
        np.testing.assert_allclose(w[i], alpha[i][want], rtol=RTOL)


def test_stream_single_token():
    X = random_X(1, 5)
    starts, top, w, Z = collect(attention.stream(X, 1.0, 1.0, 3))
    assert starts == [0] and top.shape == (1, 1) and w.tolist() == [[-1.0]]  # nothing but itself
    np.testing.assert_allclose(Z, X, rtol=1e-6)
    _, top, w, _ = collect(attention.stream(X, 1.0, 1.0, 3, include_self=True))
    assert top.tolist() == [[0]] and w.tolist() == [[1.0]]


def test_stream_causal_first_row_attends_to_nothing_else():
    X = random_X(20, 4)
    _, top, w, Z = collect(attention.stream(X, 0.5, 1.0, 3, causal=True, block=7))
    assert np.all(w[0] == -1.0)  # row 0 may attend only to itself, which is left out
    np.testing.assert_allclose(Z[0], X[0], rtol=1e-6)
    assert (w[1] >= 0).sum() == 1 and top[1][0] == 0  # row 1: token 0 only (and itself, left out)
    x0, x1 = X[:2].astype(np.float64)
    e0, e1 = math.exp(0.5 * x1 @ x0), math.exp(0.5 * x1 @ x1)
    assert w[1][0] == pytest.approx(e0 / (e0 + e1), rel=RTOL)
    for i in range(20):
        assert all(j < i for j in top[i][w[i] >= 0])


def test_stream_window_1_has_two_neighbours_at_most():
    X = random_X(30, 6)
    _, top, w, _ = collect(attention.stream(X, 0.5, 1.0, 3, window=1, block=4))
    for i in range(30):
        got = sorted(top[i][w[i] >= 0].tolist())
        assert got == [j for j in (i - 1, i + 1) if 0 <= j < 30]


def test_stream_ties_go_to_the_earlier_position():
    X = np.ones((10, 4), dtype=np.float32)  # every weight in a row the same
    alpha = attention.weights(attention.scores(X.astype(np.float64)), 1.0)
    _, top, w, _ = collect(attention.stream(X, 1.0, 1.0, 2))
    for i in range(10):
        assert top[i].tolist() == attention.top_attended(alpha[i], 2, exclude=i)  # [0, 1] or [1, 2] for i < 2


def test_stream_large_scale_no_runtime_warning():
    X = random_X(10, 4) * 4
    try:
        list(attention.stream(X, 1e38, 1.0, 3))
    except attention.ScaleError:
        pass  # refusing is fine; a RuntimeWarning (an error here) is not


# --------------------------------------------------------------------------- 2. scores --file / --document


def test_document_json_rows(glove, distinct_text, doc_path):
    text, tokens = distinct_text
    rows = ok(run("scores", "--file", doc_path, "--json"))
    check_rows(rows, glove, tokens)
    # exactly what document_rows gives, computed directly (the file's line breaks are white space)
    assert rows == json.loads(json.dumps(list(document_rows(text, glove))))
    assert rows == json.loads(json.dumps(list(document_rows(doc_path.read_text(encoding="utf-8"), glove))))


def test_document_equals_sentence_path(glove, distinct_text, doc_path):
    text, tokens = distinct_text
    rows = ok(run("scores", "--file", doc_path, "--json"))
    doc = scores_doc(text, glove)
    assert doc["tokens"] == tokens
    assert [[t["index"] for t in r["top"]] for r in rows] == [[t["index"] for t in top] for top in doc["top"]]
    assert [[t["token"] for t in r["top"]] for r in rows] == [[t["token"] for t in top] for top in doc["top"]]
    for r, top in zip(rows, doc["top"]):
        np.testing.assert_allclose([t["weight"] for t in r["top"]], [t["weight"] for t in top], rtol=RTOL)
    contexts = context_doc(text, glove, all_contexts=True)["contexts"]
    np.testing.assert_allclose([r["context"] for r in rows], contexts, rtol=RTOL, atol=1e-5)


def test_document_from_stdin_is_the_same(doc_path):
    by_file = run("scores", "--file", doc_path, "--json")
    by_stdin = run("scores", "--document", "--json", input=doc_path.read_bytes())
    assert by_stdin.exit_code == 0 and by_stdin.stderr == ""
    assert by_stdin.stdout == by_file.stdout


def test_document_repeated_words_same_words_and_weights(glove, repeated_text, tmp_path):
    text, tokens = repeated_text
    path = tmp_path / "rep.txt"
    path.write_text(text, encoding="utf-8")
    rows = ok(run("scores", "--file", path, "--json"))
    check_rows(rows, glove, tokens, ties_by_position=False)


def test_document_repeated_words_top_lists_equal_sentence_path(glove, repeated_text, tmp_path):
    text, tokens = repeated_text
    path = tmp_path / "rep.txt"
    path.write_text(text, encoding="utf-8")
    rows = ok(run("scores", "--file", path, "--json"))
    doc = scores_doc(text, glove)
    weights = np.array(doc["weights"])  # float64
    for i, (row, top) in enumerate(zip(rows, doc["top"])):
        got, want = [t["index"] for t in row["top"]], [t["index"] for t in top]
        # exact ties go to the earlier position in both paths; float32 against float64 may
        # still order two weights that differ by less than float32 can tell
        np.testing.assert_allclose(weights[i, got], weights[i, want], rtol=1e-5)
        assert sum(a != b for a, b in zip(got, want)) <= sum(
            1 for a, b in zip(got, want) if a != b and np.isclose(weights[i, a], weights[i, b], rtol=1e-5)), (i, got, want)


def test_document_small_repeated_by_hand_ties(tmp_path):
    """'the cat sat on the mat': both 'the's tie for 'cat' and 'on'; index 0 comes before 4."""
    path = tmp_path / "small.txt"
    path.write_text("the cat sat on the mat\n", encoding="utf-8")
    rows = ok(run("scores", "--file", path, "--json"))
    assert [[t["index"] for t in r["top"]] for r in rows] == [
        [t["index"] for t in top] for top in one(run("scores", "the cat sat on the mat"))["top"]]


def test_document_window_2(glove, distinct_text, doc_path):
    _, tokens = distinct_text
    T = len(tokens)
    rows = ok(run("scores", "--file", doc_path, "--json", "--window", "2"))
    check_rows(rows, glove, tokens, mask=loop_window_mask(T, 2))
    for i, r in enumerate(rows):
        idx = [t["index"] for t in r["top"]]
        assert all(abs(j - i) <= 2 and j != i for j in idx)
        assert len(idx) == min(3, len([j for j in range(i - 2, i + 3) if 0 <= j < T and j != i]))
    full = ok(run("scores", "--file", doc_path, "--json"))
    assert sum(a["top"] != b["top"] for a, b in zip(rows, full)) > T // 2  # the window changes most rows


def test_document_mask_causal(glove, distinct_text, doc_path):
    text, tokens = distinct_text
    T = len(tokens)
    rows = ok(run("scores", "--file", doc_path, "--json", "--mask", "causal"))
    check_rows(rows, glove, tokens, mask=loop_causal_mask(T))
    assert rows[0]["top"] == [] and [t["index"] for t in rows[1]["top"]] == [0]
    for i, r in enumerate(rows):
        assert all(t["index"] < i for t in r["top"])
    doc = scores_doc(text, glove, Options(mask="causal"))
    assert [[t["index"] for t in r["top"]] for r in rows] == [[t["index"] for t in top] for top in doc["top"]]


def test_document_mask_causal_and_window(glove, distinct_text, doc_path):
    _, tokens = distinct_text
    T = len(tokens)
    rows = ok(run("scores", "--file", doc_path, "--json", "--mask", "causal", "--window", "2"))
    check_rows(rows, glove, tokens, mask=loop_causal_mask(T) | loop_window_mask(T, 2))
    for i, r in enumerate(rows):
        assert sorted(t["index"] for t in r["top"]) == [j for j in (i - 2, i - 1) if j >= 0]


def test_document_top_k_and_include_self(glove, distinct_text, doc_path):
    _, tokens = distinct_text
    rows = ok(run("scores", "--file", doc_path, "--json", "--top-k", "5", "--include-self"))
    check_rows(rows, glove, tokens, k=5, include_self=True)
    assert sum(any(t["index"] == i for t in r["top"]) for i, r in enumerate(rows)) > len(rows) // 2


def test_document_table_one_line_per_token(distinct_text, doc_path):
    _, tokens = distinct_text
    result = run("scores", "--file", doc_path, "--format", "table", "--window", "2")
    assert result.exit_code == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{doc_path}: ") and "window 2" in lines[1]
    assert f"scale {1 / math.sqrt(50):.6g}, temperature 1" in lines[1]  # the scale the weights were computed with
    assert "own position left out (--include-self keeps it)" in lines[2]
    body = lines[3:]
    assert len(body) == len(tokens)
    rows = ok(run("scores", "--file", doc_path, "--json", "--window", "2"))
    for i, (line, row) in enumerate(zip(body, rows)):
        assert line.startswith(f"{i} {tokens[i]} → "), line
        # every token it attends to with its position, as computed
        assert line.endswith(", ".join(f"{t['token']}({t['index']}) {t['weight']:.3f}" for t in row["top"])), line


def test_document_table_shows_positions_of_repeated_words(tmp_path):
    path = tmp_path / "it.txt"
    path.write_text("it is what it is and it was\n", encoding="utf-8")
    rows = ok(run("scores", "--file", path, "--json", "--scale", "0.5"))
    result = run("scores", "--file", path, "--format", "table", "--scale", "0.5")
    assert result.exit_code == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert "scale 0.5, temperature 1" in lines[1]
    first = lines[3]
    # "it" at 0 attends to the other "it"s, at 3 and 6: never shown as "it → it", which reads as itself
    assert [t["index"] for t in rows[0]["top"]][:2] == [3, 6]
    assert first.startswith("0 it → it(3) ") and "it(6)" in first
    assert " it " not in first.split("→")[1] + " "
    kept = run("scores", "--file", path, "--format", "table", "--include-self")
    assert "left out" not in kept.stdout.splitlines()[2]
    assert "0 it → it(0) " in kept.stdout


def test_document_table_from_stdin():
    result = run("scores", "--document", "--format", "table", input="the cat sat\n")
    assert result.exit_code == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith("standard input: ") and len(lines) == 6
    assert [line.split()[:2] for line in lines[3:]] == [["0", "the"], ["1", "cat"], ["2", "sat"]]


def test_document_no_known_words(tmp_path):
    path = tmp_path / "unknown.txt"
    path.write_text("zzqxv qqzvx\nxxqzv\n", encoding="utf-8")
    fails(run("scores", "--file", path, "--json"), "none of the tokens", "zzqxv")
    fails(run("scores", "--document", "--json", input="zzqxv qqzvx"), "none of the tokens")


def test_document_empty_or_blank(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    fails(run("scores", "--file", empty), "empty.txt", "empty")
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b"  \n\n\t\n")
    fails(run("scores", "--file", blank), "blank.txt", "empty")
    fails(run("scores", "--document", input=b""), "standard input", "empty")


def test_document_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"the cat\nsat on\nthe caf\xe9 mat\n")
    fails(run("scores", "--file", path), "latin1.txt", "not UTF-8", "0xe9", "line 3")
    fails(run("scores", "--document", input=b"caf\xe9\n"), "standard input", "not UTF-8", "line 1")


def test_document_usage_errors(doc_path):
    fails(run("scores", "--file", doc_path, "--window", "0"), "--window", code=2)
    fails(run("scores", "--file", doc_path, "--window", "-1"), "--window", code=2)
    fails(run("scores", "the cat sat", "--window", "2"), "--window", "document", code=2)
    fails(run("scores", "the cat sat", "--file", doc_path), "not both", code=2)
    fails(run("scores", "--document", "the cat sat", input="a b"), "not both", code=2)
    fails(run("scores", "--file", doc_path, "--png", doc_path.parent / "x.png"), "--png", code=2)


def test_document_projections_refused(doc_path):
    fails(run("scores", "--file", doc_path, "--qkv", "random"), "raw vectors only")
    fails(run("scores", "--file", doc_path, "--heads", "2"), "raw vectors only")


def test_document_missing_file(tmp_path):
    fails(run("scores", "--file", tmp_path / "nope.txt"), "nope.txt", "no such file")
    fails(run("scores", "--file", tmp_path), code=2)  # a folder: click refuses it (dir_okay=False)


def test_document_large_scale_is_one_line_or_works(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text("the cat sat on the mat\n", encoding="utf-8")
    result = run("scores", "--file", path, "--scale", "1e38", "--json")
    if result.exit_code:
        fails(result, "overflow")
    else:
        assert len(ok(result)) == 6


def test_document_svg_html_written_or_refused(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text("the cat sat on the mat\n", encoding="utf-8")
    for option, picture in (("--svg", tmp_path / "doc.svg"), ("--html", tmp_path / "doc.html")):
        result = run("scores", "--file", path, "--json", option, picture)
        if result.exit_code == 0:
            assert picture.is_file(), f"{option}: exit 0 but {picture.name} was not written"
        else:
            fails(result, option, code=2)


# --------------------------------------------------------------------------- 3. batch


SENTENCES = [
    "The earth is like an orange",
    "I ate an orange and a banana",
    "the cat sat on the mat , again",
    "Stocks rose sharply on Monday",
    "  leading and trailing spaces  ",
]


def test_a_chunk_of_lines_ends_at_its_count_or_its_text(monkeypatch):
    """batch and stats send lines in chunks of CHUNK, or fewer once their text reaches
    CHUNK_TEXT characters, so that a chunk in flight holds one long line at most; and the
    longest line a run takes shrinks with its workers, so that all in flight fit."""
    monkeypatch.setattr(batches, "CHUNK_TEXT", 10)
    items = [(1, "a" * 12, None), (2, "b", None), (3, None, "not UTF-8"), (4, "c" * 9, None), (5, "d", None)]
    assert [[n for n, _, _ in chunk] for chunk in batches.chunks_of(items, 3)] == [[1], [2, 3, 4], [5]]
    assert [[n for n, _, _ in chunk] for chunk in batches.chunks_of(items[1:], 2)] == [[2, 3], [4, 5]]
    monkeypatch.setattr(limits, "available", lambda: 600 << 20)
    assert [batches.line_most(jobs) for jobs in (1, 2, 40)] == [20 << 20, 10 << 20, 1 << 20]


def test_parse_lines():
    data = b"\xef\xbb\xbfone\r\ntwo\n\n  \ncaf\xe9\nlast"
    assert batches.parse_lines(data) == [  # blank lines skipped, the others numbered by their place
        (1, "one", None), (2, "two", None), (5, None, "not UTF-8: byte 0xe9 at column 4"), (6, "last", None)]
    assert batches.parse_lines(b"a\n") == [(1, "a", None)]  # the final newline starts no line
    assert batches.parse_lines(b"") == []
    assert batches.parse_lines(b"\n \r\n\t\n\xc2\x85\n\xe3\x80\x80\n") == []  # white space, Unicode's too
    assert batches.parse_lines(b'\n\n{"text": "a"}\n  \n', jsonl=True) == [(3, "a", None)]
    items = batches.parse_lines(b'{"body": "x y"}\n{"text": "x"}\n[1]\nnope\n{"body": 2}\n{"body": " "}\n',
                                jsonl=True, field_name="body")
    assert items[0] == (1, "x y", None)
    assert [n for n, _, e in items if e] == [2, 3, 4, 5, 6]
    assert "'body'" in items[1][2] and "not JSON" in items[3][2] and "not a sentence" in items[4][2]


def test_batch_lines_equal_scores(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    docs = ok(run("batch", path))
    assert [d["line"] for d in docs] == list(range(1, len(SENTENCES) + 1))
    for sentence, doc in zip(SENTENCES, docs):
        assert doc["command"] == "scores" and doc["sentence"] == sentence
        assert without_line(doc) == one(run("scores", sentence, "--json"))


def test_batch_api_run_in_order(glove):
    items = batches.parse_lines("\n".join(SENTENCES).encode())
    results = list(batches.run(items, batches.Job()))
    assert [r["line"] for r in results] == [1, 2, 3, 4, 5]
    for sentence, r in zip(SENTENCES, results):
        assert without_line(r) == scores_doc(sentence, glove)


def test_batch_token_gives_context_documents(tmp_path):
    lines = ["The earth is like an orange", "Orange is a bright color", "an orange and a lemon"]
    path = tmp_path / "oranges.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    docs = ok(run("batch", path, "--token", "orange", "--neighbors", "3"))
    assert [d["line"] for d in docs] == [1, 2, 3]
    for sentence, doc in zip(lines, docs):
        assert doc["command"] == "context" and doc["token"] == "orange"
        assert without_line(doc) == one(run("context", sentence, "--token", "orange", "--neighbors", "3", "--json"))
    docs = ok(run("batch", path, "--token", "orange", "--all"))
    for sentence, doc in zip(lines, docs):
        assert without_line(doc) == one(run("context", sentence, "--token", "orange", "--all", "--json"))


def test_batch_jsonl_field_body(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": n, "body": s, "text": "ignored words"}) + "\n"
                            for n, s in enumerate(SENTENCES)), encoding="utf-8")
    docs = ok(run("batch", path, "--jsonl", "--field", "body"))
    for sentence, doc in zip(SENTENCES, docs):
        assert doc["sentence"] == sentence
        assert without_line(doc) == one(run("scores", sentence, "--json"))


def test_batch_bad_lines_jsonl(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join([
        b'{"body": "The earth is like an orange"}',
        b"",
        b'{"text": "the cat"}',
        b"this is not json",
        b'{"body": 42}',
        b'{"body": "caf\xe9"}',
        b'{"body": "zzqxv qqzvx"}',
        b'{"body": "a cat sat"}',
    ]) + b"\n")
    result = run("batch", path, "--jsonl", "--field", "body")
    assert result.exit_code == 1
    assert result.stderr == 'attncli: 5 of 7 lines failed; their objects hold "error"\n'
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["line"] for d in docs] == [1, 3, 4, 5, 6, 7, 8]  # the blank line 2 skipped, the others keep their place
    errors = {d["line"]: d["error"] for d in docs if "error" in d}
    assert all(set(d) == {"line", "error"} for d in docs if "error" in d)
    assert sorted(errors) == [3, 4, 5, 6, 7]
    assert "'body'" in errors[3] and "field" in errors[3]
    assert errors[4].startswith("not JSON")
    assert "'body'" in errors[5] and "not a sentence" in errors[5]
    assert errors[6] == "not UTF-8: byte 0xe9 at column 14"
    assert "none of the tokens" in errors[7] and "zzqxv" in errors[7]
    assert without_line(docs[0]) == one(run("scores", "The earth is like an orange", "--json"))
    assert without_line(docs[6]) == one(run("scores", "a cat sat", "--json"))


def test_batch_bad_lines_plain(tmp_path):
    data = b"the cat sat\n\ncaf\xe9 au lait\nzzqxv\n, . !\nthe dog ran\n"
    result = run("batch", input=data)
    assert result.exit_code == 1
    assert result.stderr == 'attncli: 3 of 5 lines failed; their objects hold "error"\n'
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["line"] for d in docs] == [1, 3, 4, 5, 6]
    assert ["error" in d for d in docs] == [False, True, True, True, False]
    assert docs[1]["error"] == "not UTF-8: byte 0xe9 at column 4"
    assert "punctuation" in docs[3]["error"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_blank_lines_are_skipped_alike_by_scores_and_batch(five_words_path, jobs):
    """One rule for input lines: a blank or white-space-only line is skipped, by `scores` on
    standard input and by `batch`, which still numbers every line by its place in the input;
    a run of only good lines and blank ones succeeds."""
    data = "the cat\n\n   \n\tthe dog\n\r\n\u3000\nthe end\n\n"
    scored = ok(run("scores", "--vectors", five_words_path, input=data))
    batched = ok(run("batch", "--vectors", five_words_path, "--jobs", jobs, input=data))
    assert [d["sentence"] for d in scored] == [d["sentence"] for d in batched] == ["the cat", "\tthe dog", "the end"]
    assert [d["line"] for d in batched] == [1, 4, 7]
    assert [without_line(d) for d in batched] == scored
    lines = ok(run("batch", "--jsonl", "--vectors", five_words_path, input='\n{"text": "the cat"}\n \n'))
    assert [d["line"] for d in lines] == [2]
    fails(run("batch", "--vectors", five_words_path, input="\n \n\t\n"), "holds no sentence")
    fails(run("scores", "--vectors", five_words_path, input="\n \n\t\n"), "holds no sentence")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_lines_end_only_at_newline_alike_in_scores_and_batch(five_words_path, jobs):
    """A form feed, U+0085 or U+2028 inside a line does not end it, in either command, so a
    line's number is the same in both (the one text editors and `wc -l` count)."""
    data = "the cat\x0cthe dog\r\nthe\u2028end\n\x85\nthe dog\x1cthe cat"
    scored = ok(run("scores", "--vectors", five_words_path, input=data))
    batched = ok(run("batch", "--vectors", five_words_path, "--jobs", jobs, input=data))
    assert [d["sentence"] for d in scored] == [d["sentence"] for d in batched] == [
        "the cat\x0cthe dog", "the\u2028end", "the dog\x1cthe cat"]
    assert [d["line"] for d in batched] == [1, 2, 4]
    failed = run("scores", "--vectors", five_words_path, "--oov", "error", input="the cat\x0cthe\nzzz\n")
    fails(failed, "line 2:")


@pytest.fixture(scope="module")
def five_words_path(tmp_path_factory):
    """the, cat, dog, end and "." in two dimensions, as a word2vec text file."""
    path = tmp_path_factory.mktemp("blanks") / "tiny.txt"
    path.write_text("5 2\nthe 1 0\ncat 0 1\ndog 1 1\nend 2 0\n. 0 2\n")
    return path


def test_batch_all_good_exit_0_quiet(tmp_path):
    result = run("batch", input="\n".join(SENTENCES[:3]) + "\n")
    assert result.exit_code == 0 and result.stderr == ""
    assert len(result.stdout.splitlines()) == 3


def test_batch_stdin_equals_file(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("\r\n".join(SENTENCES) + "\r\n", encoding="utf-8")  # CRLF: no \r in a sentence
    by_file = run("batch", path)
    assert by_file.exit_code == 0
    assert [json.loads(x)["sentence"] for x in by_file.stdout.splitlines()] == SENTENCES
    for args in ((), ("-",)):
        by_stdin = run("batch", *args, input=path.read_bytes())
        assert by_stdin.exit_code == 0 and by_stdin.stderr == "" and by_stdin.stdout == by_file.stdout


def test_batch_usage_errors(tmp_path):
    fails(run("batch", "--jobs", "0", input="the cat\n"), "--jobs", code=2)
    fails(run("batch", tmp_path / "nope.txt"), "nope.txt", "no such file")


def test_batch_jobs_2_byte_identical(glove, tmp_path):
    words = bundled_words(glove)
    rng = np.random.default_rng(5)
    lines = [" ".join(rng.choice(words, size=int(rng.integers(2, 12)))) for _ in range(300)]
    lines[17] = ""  # a blank line
    lines[123] = "zzqxv qqzvx"  # no vectors
    lines[250] = "the orange cat and the orange dog"
    path = tmp_path / "many.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one_job = run_process("batch", path)
    two_jobs = run_process("batch", path, "--jobs", "2")
    assert one_job.returncode == two_jobs.returncode == 1
    assert one_job.stderr == two_jobs.stderr == b'attncli: 1 of 299 lines failed; their objects hold "error"\n'
    assert two_jobs.stdout == one_job.stdout
    docs = [json.loads(x) for x in two_jobs.stdout.splitlines()]
    assert [d["line"] for d in docs] == [n for n in range(1, 301) if n != 18]  # the blank line skipped
    by_line = {d["line"]: d for d in docs}
    for n in (1, 100, 251, 300):
        assert without_line(by_line[n]) == scores_doc(lines[n - 1], glove)
    # the same from standard input, with --jobs 2
    by_stdin = run_process("batch", "--jobs", "2", stdin=path.read_bytes())
    assert by_stdin.stdout == one_job.stdout and by_stdin.returncode == 1


def test_batch_custom_vectors_jobs_2(tmp_path):
    """Workers load the cache entry the parent wrote: same words (with --limit), same numbers."""
    vectors = tmp_path / "tiny.w2v.txt"
    vectors.write_text("4 2\nfoo 1 0\nbar 0 1\nbaz 1 1\nqux 2 2\n", encoding="utf-8")
    lines = tmp_path / "lines.txt"
    lines.write_text("foo bar\nbaz foo bar\nqux\nbar\n", encoding="utf-8")
    cache = tmp_path / "cache"
    two = run_process("batch", lines, "--vectors", vectors, "--limit", "3", "--jobs", "2", ATTNCLI_CACHE_DIR=str(cache))
    assert two.returncode == 1, two.stderr
    assert two.stderr == b'attncli: 1 of 4 lines failed; their objects hold "error"\n'
    docs = [json.loads(x) for x in two.stdout.splitlines()]
    assert [d["line"] for d in docs] == [1, 2, 3, 4]
    assert "qux" in docs[2]["error"]  # beyond --limit 3: the workers kept the limit
    assert all(d["vectors"] == {"name": vectors.name, "dim": 2, "words": 3} for d in docs if "error" not in d)
    a = math.exp(1 / math.sqrt(2))  # foo (1,0), bar (0,1): scores [[1,0],[0,1]], scale 1/sqrt(2)
    np.testing.assert_allclose(docs[0]["weights"], [[a / (a + 1), 1 / (a + 1)], [1 / (a + 1), a / (a + 1)]],
                               rtol=1e-12)
    assert docs[3]["weights"] == [[1.0]] and docs[3]["top"] == [[]]
    # baz (1,1), foo, bar: row 0 = softmax([2, 1, 1] / sqrt 2)
    b = math.exp(2 / math.sqrt(2))
    np.testing.assert_allclose(docs[1]["weights"][0], [b / (b + 2 * a), a / (b + 2 * a), a / (b + 2 * a)], rtol=1e-12)
    entries = [p for p in cache.iterdir() if (p / "vectors.json").is_file()]
    assert len(entries) == 1  # one entry, the parent's, read by the workers
    one_job = run_process("batch", lines, "--vectors", vectors, "--limit", "3", ATTNCLI_CACHE_DIR=str(cache))
    assert one_job.stdout == two.stdout and one_job.returncode == 1
    assert [p for p in cache.iterdir() if (p / "vectors.json").is_file()] == entries


# --------------------------------------------------------------------------- 4. memory: rows as they are computed


def test_document_rows_is_a_lazy_generator(glove, monkeypatch):
    words = bundled_words(glove)
    rng = np.random.default_rng(3)
    text = " ".join(rng.choice(words, size=3000))
    blocks = []
    real_stream = attention.stream

    def counting_stream(*args, **kwargs):
        for item in real_stream(*args, **kwargs):
            blocks.append(item[0])
            yield item

    monkeypatch.setattr(attention, "stream", counting_stream)
    rows = document_rows(text, glove)
    assert inspect.isgenerator(rows)
    assert blocks == []  # nothing computed before the first row is asked for
    first = next(rows)
    assert first["index"] == 0 and set(first) == ROW_KEYS
    assert inspect.getgeneratorstate(rows) == inspect.GEN_SUSPENDED  # not exhausted
    assert blocks == [0]  # only the first block of 256 rows of 3000
    rest = list(rows)
    assert len(rest) == 2999 and [r["index"] for r in rest] == list(range(1, 3000))
    assert blocks == list(range(0, 3000, 256))


def stream_peak(T: int, block: int = 256) -> int:
    X = random_X(T, 50, seed=9)
    tracemalloc.start()
    try:
        for _ in attention.stream(X, 0.14, 1.0, 3, block=block):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_stream_never_holds_t_by_t():
    small, large = stream_peak(3000), stream_peak(6000)
    assert small < 3000 * 3000 * 4 / 2  # well under one T x T float32 matrix (36 MB): blocks of 256 x T
    assert large < 2.5 * small  # twice the tokens, about twice the memory: O(block T), not O(T^2)
    assert stream_peak(3000, block=32) < small / 4


def test_a_ctrl_c_while_the_workers_start_is_raised_not_lost(monkeypatch):
    """A SIGINT that comes while the workers start (here: as each has started) is held,
    not ignored, and raised as soon as they are all up, which ends them."""
    import multiprocessing
    import signal

    process = multiprocessing.get_context("spawn").Process
    start = process.start

    def started(self):
        start(self)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as the workers start

    monkeypatch.setattr(process, "start", started)
    items = [(n, "the cat sat", None) for n in range(1, 2001)]
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        list(batches.run(items, batches.Job(), jobs=2))
    assert multiprocessing.active_children() == []  # the workers were ended, and reaped
    assert signal.getsignal(signal.SIGINT) is before
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()  # nothing left blocked


def test_workers_that_cannot_load_the_vectors_give_each_line_the_error(tmp_path):
    """A worker that fails to load must not end: its lines, and the run, would be lost with
    it. In a child process, so that a run that never ends is killed."""
    gone = tmp_path / "gone.txt"
    script = ("import json, sys; from attncli import batch\n"
              f"items = [(n, 'the cat', None) for n in range(1, 6)]\n"
              f"print(json.dumps(list(batch.run(items, batch.Job(source={str(gone)!r}), jobs=2))))\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        raise AssertionError("the run never ended")
    assert proc.returncode == 0 and err == b"", err.decode()[-2000:]
    results = json.loads(out)
    assert [r["line"] for r in results] == [1, 2, 3, 4, 5]
    assert all(r["error"].startswith("a worker could not load the vectors: ") and "no such file" in r["error"]
               for r in results)


def test_in_order_with_workers_gives_each_answer_or_its_failure_in_order():
    """Workers of in_order answer in input order; a chunk whose answer cannot be pickled (a
    memoryview) is a failure raised in its turn, never a worker's traceback and a lost run."""
    from attncli import workers

    assert list(workers.in_order(len, [b"a", b"bb", b"ccc", b"dddd", b""], max, 0, jobs=2)) == [1, 2, 3, 4, 0]
    results = workers.in_order(memoryview, [b"ab", b"cd"], max, 0, jobs=2)
    with pytest.raises(RuntimeError, match=r"a worker's answer could not be sent back \(TypeError: .*memoryview"):
        next(results)
