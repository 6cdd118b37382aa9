"""Whole documents: attention.stream, documents.long.document_rows and `scores
--file/--document/--window` (many sentences, one a line, are tests/test_batch.py's).

The streamed path computes in float32 a block of rows at a time; every number here is
checked against the in-memory float64 path (attention.scores/weights/context) or an
independent float64 softmax, to float32 precision, and every top list against
attention.top_attended or a sort by (-weight, position).
"""

from __future__ import annotations

import inspect
import json
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from attncli import Options, attention, context_doc, scores_doc
from attncli.documents.long import document_rows
from clirunner import fails, ok, one, run
from helpers import assert_ranked_within_float32, bundled_words, collect, expected_top, random_X

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


def check_rows(rows, vectors, tokens, *, k=3, mask=None, scale=None, include_self=False, ties_by_position=True):
    """Every row of a document against the independent float64 computation."""
    W, Z = independent(vectors, tokens, mask=mask, scale=scale)
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
            for i in range(T):  # the float64 list, but where float32 cannot settle a tie
                assert_ranked_within_float32(top[i][filled[i]].tolist(), want_top[i][want_top[i] >= 0].tolist(),
                                             alpha[i])
            np.testing.assert_allclose(w, alpha[np.arange(T)[:, None], np.where(filled, top, 0)] * filled
                                       - ~filled, rtol=RTOL, atol=1e-12)


def test_stream_scale_and_temperature():
    X = random_X(150, 8, seed=3)
    mask = attention.window_mask(150, 6)
    alpha = attention.weights(attention.scores(X.astype(np.float64)), 0.3, 0.7, mask)
    _, top, w, Z = collect(attention.stream(X, 0.3, 0.7, 4, window=6, block=64))
    np.testing.assert_allclose(Z, attention.context(alpha, X), rtol=RTOL, atol=1e-5)
    for i in range(150):
        want = attention.top_attended(alpha[i], 4, i, mask[i])
        assert_ranked_within_float32(top[i].tolist(), want, alpha[i])
        np.testing.assert_allclose(w[i], alpha[i][top[i]], rtol=RTOL)


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
    """At scale 1e38 the scaled scores (about 1e40) are past float32's range but within
    float64's: the stream computes them, with no RuntimeWarning (an error here), and gives
    the whole matrix's weights, each row's on its largest score."""
    X = random_X(10, 4) * 4
    _, top, w, Z = collect(attention.stream(X, 1e38, 1.0, 3))
    alpha = attention.weights(attention.scores(X.astype(np.float64)), 1e38)  # (T, T), a one in each row
    assert sorted(np.unique(alpha).tolist()) == [0.0, 1.0]
    for i in range(10):
        assert top[i].tolist() == attention.top_attended(alpha[i], 3, exclude=i)
        np.testing.assert_array_equal(w[i], alpha[i, top[i]])
    np.testing.assert_allclose(Z, alpha @ X.astype(np.float64), rtol=RTOL)


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


def test_document_at_a_large_scale_gives_each_row_its_largest_scores(glove, tmp_path):
    """--scale 1e38 takes the scores (at most ~1e40) to the edge of float32 but not of float64:
    the document is computed, each word's weight on itself, the two "the" halving theirs."""
    path = tmp_path / "small.txt"
    path.write_text("the cat sat on the mat\n", encoding="utf-8")
    rows = ok(run("scores", "--file", path, "--scale", "1e38", "--json"))
    tokens = ["the", "cat", "sat", "on", "the", "mat"]
    check_rows(rows, glove, tokens, scale=1e38)
    assert [[t["weight"] for t in row["top"]] for row in rows] == [[0.5, 0.0, 0.0]] + [[0.0] * 3] * 3 + \
        [[0.5, 0.0, 0.0], [0.0] * 3]


def test_document_svg_html_refused(tmp_path):
    """A document has no T x T table to draw: --svg and --html are a usage error, and nothing
    is written."""
    path = tmp_path / "small.txt"
    path.write_text("the cat sat on the mat\n", encoding="utf-8")
    for option, picture in (("--svg", tmp_path / "doc.svg"), ("--html", tmp_path / "doc.html")):
        assert fails(run("scores", "--file", path, "--json", option, picture), code=2) == (
            f"attncli: error: {option} draws a T x T table, which a document never holds; leave it out "
            "(see 'attncli scores --help')")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.txt"]


# --------------------------------------------------------------------------- 3. memory: rows as they are computed


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
