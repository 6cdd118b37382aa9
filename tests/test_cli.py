"""The command line, end to end: attncli.cli.cli through click's CliRunner, plus a few real
processes (the installed entry point, python -m attncli, a reader that closes the pipe early).

Every number is checked against an independent float64 computation from the vectors that
attncli.words.vectors.load_vectors() returns, or against a hand-computed softmax on a word2vec
file of six words written here; every error against its exit status and its one-line message.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attncli
import attncli.cli
import attncli.cli.options
from clirunner import fails, ok, one, run, words_of
from grids import check_weights, grid
from helpers import ENTRY_POINT, SENTENCE, SENTENCE_TOKENS, expected_top, fsum_dot, matrix_of, process_env
from attncli import load_vectors

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

E = math.e

# Six words of three values, a word2vec text file (tiny.txt): every value exact in float32, so
# the softmaxes can be done by hand.
VECTORS3 = """\
6 3
cat 1 0 0
dog 0 1 0
sat 1 1 0
mat 0 0 2
the 0.5 0.5 0.5
on -1 0 1
"""

SCORES_KEYS = {"command", "sentence", "tokens", "oov", "vectors", "scale", "temperature", "scores", "weights", "top"}
COMMON_KEYS = {"command", "sentence", "tokens", "oov", "vectors", "scale", "temperature"}
TOKEN_KEYS = {"token", "index", "weights", "top", "context", "neighbors", "token_neighbors"}


# --------------------------------------------------------------------------- helpers


def expected_scores(X) -> np.ndarray:
    return np.array([[fsum_dot(x, y) for y in X] for x in X])


def softmax(row) -> list[float]:
    top = max(row)
    e = [math.exp(v - top) for v in row]
    s = math.fsum(e)
    return [v / s for v in e]


def expected_weights(X, scale, temperature=1.0) -> np.ndarray:
    return np.array([softmax([v * scale / temperature for v in row]) for row in expected_scores(X)])


def check_rows_sum_to_one(weights):
    for row in np.atleast_2d(np.array(weights, dtype=float)):
        assert abs(math.fsum(row) - 1.0) <= 1e-9
        assert all(w >= 0 for w in row)


def check_top(top, tokens, weights_row, i, k, include_self=False):
    assert [t["index"] for t in top] == expected_top(weights_row, i, k, include_self=include_self)
    for t in top:
        assert t["token"] == tokens[t["index"]]
        assert t["weight"] == weights_row[t["index"]]
        assert set(t) == {"token", "index", "weight"}
    if not include_self:
        assert i not in [t["index"] for t in top]


def check_common(doc, vectors, command, sentence, scale=None, temperature=1.0):
    assert COMMON_KEYS <= set(doc)
    assert doc["command"] == command
    assert doc["sentence"] == sentence
    assert doc["vectors"] == {"name": vectors.name, "dim": vectors.dim, "words": vectors.size}
    expected_scale = 1.0 / math.sqrt(vectors.dim) if scale is None else scale
    assert doc["scale"] == pytest.approx(expected_scale, rel=1e-15)
    assert doc["temperature"] == temperature


def check_scores_doc(doc, vectors, sentence, *, scale=None, temperature=1.0, top_k=3, include_self=False):
    """Every number of a `scores` document, from the vectors, independently."""
    assert SCORES_KEYS <= set(doc)
    check_common(doc, vectors, "scores", sentence, scale, temperature)
    tokens = doc["tokens"]
    T = len(tokens)
    X = matrix_of(vectors, tokens)
    S, W = np.array(doc["scores"]), np.array(doc["weights"])
    assert S.shape == W.shape == (T, T)
    np.testing.assert_allclose(S, expected_scores(X), rtol=1e-12, atol=1e-12)
    check_rows_sum_to_one(W)
    np.testing.assert_allclose(W, expected_weights(X, doc["scale"], temperature), rtol=1e-12, atol=1e-15)
    assert len(doc["top"]) == T
    for i in range(T):
        check_top(doc["top"][i], tokens, doc["weights"][i], i, top_k, include_self)


def cosines_with_vocabulary(vectors, v) -> np.ndarray:
    M = np.asarray(vectors.matrix, dtype=np.float64)
    norms = np.linalg.norm(M, axis=1)
    return (M @ v) / (np.where(norms == 0, 1, norms) * np.linalg.norm(v))  # (V,)


def check_neighbors(neighbors, vectors, v, own_word, k):
    """Nearest words by cosine: not the token itself, highest first, and truly the nearest."""
    if np.linalg.norm(v) == 0:
        assert neighbors == []
        return
    cos = cosines_with_vocabulary(vectors, np.asarray(v, dtype=np.float64))
    vocabulary = words_of(vectors)
    others = np.array([w != own_word for w in vocabulary])
    best = np.sort(cos[others])[::-1][:k]
    assert len(neighbors) == len(best) == min(k, vectors.size - 1)
    words = [n["word"] for n in neighbors]
    assert own_word not in words
    assert len(set(words)) == len(words)
    got = [n["cosine"] for n in neighbors]
    assert all(a >= b for a, b in zip(got, got[1:])), got
    for n in neighbors:
        assert set(n) == {"word", "cosine"}
        assert n["cosine"] == pytest.approx(cos[vocabulary.index(n["word"])], abs=1e-5)
    np.testing.assert_allclose(got, best, atol=1e-5)


def check_context_doc(doc, vectors, sentence, *, scale=None, temperature=1.0, top_k=3, include_self=False,
                      neighbors=5, all_contexts=False):
    """Every number of a `context` document, from the vectors, independently."""
    check_common(doc, vectors, "context", sentence, scale, temperature)
    tokens = doc["tokens"]
    X = matrix_of(vectors, tokens)
    W = expected_weights(X, doc["scale"], temperature)  # (T, T)
    if "token" in doc:
        assert TOKEN_KEYS <= set(doc)
        i = doc["index"]
        assert tokens[i] == doc["token"]
        check_rows_sum_to_one(doc["weights"])
        np.testing.assert_allclose(doc["weights"], W[i], rtol=1e-12, atol=1e-15)
        check_top(doc["top"], tokens, doc["weights"], i, top_k, include_self)
        z = [math.fsum(doc["weights"][j] * X[j, k] for j in range(len(tokens))) for k in range(vectors.dim)]
        np.testing.assert_allclose(doc["context"], z, rtol=1e-12, atol=1e-12)
        own = vectors.key(tokens[i]) or tokens[i]
        check_neighbors(doc["neighbors"], vectors, np.array(doc["context"]), own, neighbors)
        check_neighbors(doc["token_neighbors"], vectors, X[i], own, neighbors)
    else:
        assert not TOKEN_KEYS & set(doc)
    if all_contexts:
        Z = np.array(doc["contexts"])
        assert Z.shape == (len(tokens), vectors.dim)
        np.testing.assert_allclose(Z, W @ X, rtol=1e-12, atol=1e-12)
    else:
        assert "contexts" not in doc


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def vectors3_path(tmp_path_factory) -> Path:
    """VECTORS3 written to a file."""
    path = tmp_path_factory.mktemp("vectors") / "tiny.txt"
    path.write_text(VECTORS3, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def vectors3(vectors3_path):
    """VECTORS3 as attncli loads them."""
    return load_vectors(vectors3_path)


def run_on(path, command, *args, **kw):
    """`attncli COMMAND ARGS --vectors PATH`."""
    return run(command, *args, "--vectors", path, **kw)


# --------------------------------------------------------------------------- scores on the six words, by hand


def test_scores_2x2_by_hand(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "scores", "cat dog"))
    assert doc["tokens"] == ["cat", "dog"] and doc["oov"] == []
    assert doc["scores"] == [[1.0, 0.0], [0.0, 1.0]]
    a = math.exp(1 / math.sqrt(3))  # default scale 1/sqrt(d), d = 3
    hand = [[a / (a + 1), 1 / (a + 1)], [1 / (a + 1), a / (a + 1)]]
    np.testing.assert_allclose(doc["weights"], hand, rtol=1e-12)
    assert doc["top"] == [[{"token": "dog", "index": 1, "weight": doc["weights"][0][1]}],
                          [{"token": "cat", "index": 0, "weight": doc["weights"][1][0]}]]
    check_scores_doc(doc, vectors3, "cat dog")


def test_scores_3x3_scale_1_is_plain_softmax_by_hand(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "scores", "cat dog sat", "--scale", "1"))
    assert doc["scale"] == 1.0
    # cat (1,0,0), dog (0,1,0), sat (1,1,0)
    assert doc["scores"] == [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 2.0]]
    hand = [
        [E / (2 * E + 1), 1 / (2 * E + 1), E / (2 * E + 1)],
        [1 / (2 * E + 1), E / (2 * E + 1), E / (2 * E + 1)],
        [1 / (2 + E), 1 / (2 + E), E / (2 + E)],
    ]
    np.testing.assert_allclose(doc["weights"], hand, rtol=1e-12)
    # own position left out; ties go to the earlier position
    assert [[t["index"] for t in row] for row in doc["top"]] == [[2, 1], [2, 0], [0, 1]]
    check_scores_doc(doc, vectors3, "cat dog sat", scale=1.0)


def test_scores_default_scale_by_hand(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "scores", "cat dog sat"))
    assert doc["scale"] == pytest.approx(1 / math.sqrt(3), rel=1e-15)
    a = math.exp(1 / math.sqrt(3))
    np.testing.assert_allclose(doc["weights"][0], [a / (2 * a + 1), 1 / (2 * a + 1), a / (2 * a + 1)], rtol=1e-12)
    check_scores_doc(doc, vectors3, "cat dog sat")


def test_temperature_2_equals_half_the_scale(vectors3_path, vectors3):
    hot = one(run_on(vectors3_path, "scores", "cat dog sat the on", "--temperature", "2"))
    assert hot["temperature"] == 2.0
    assert hot["scale"] == pytest.approx(1 / math.sqrt(3), rel=1e-15)  # the scale is reported unchanged
    half = one(run_on(vectors3_path, "scores", "cat dog sat the on", "--scale", repr(hot["scale"] / 2)))
    np.testing.assert_allclose(hot["weights"], half["weights"], rtol=1e-12)
    assert hot["scores"] == half["scores"]
    check_scores_doc(hot, vectors3, "cat dog sat the on", temperature=2.0)
    # and by hand, with --scale 1 --temperature 2: softmax of half the raw scores
    doc = one(run_on(vectors3_path, "scores", "cat dog sat", "--scale", "1", "--temperature", "2"))
    r = math.sqrt(E)
    np.testing.assert_allclose(doc["weights"][0], [r / (2 * r + 1), 1 / (2 * r + 1), r / (2 * r + 1)], rtol=1e-12)


def test_temperature_flattens_and_sharpens(vectors3_path):
    docs = {t: one(run_on(vectors3_path, "scores", "cat sat", "--temperature", t)) for t in ("0.5", "1", "4")}
    # cat.cat = 1 = cat.sat: row 0 is uniform at any temperature
    assert all(doc["weights"][0] == [0.5, 0.5] for doc in docs.values())
    # sat.sat = 2 > sat.cat = 1: sat's weight on itself shrinks towards 1/2 as the temperature rises
    self_weight = {t: doc["weights"][1][1] for t, doc in docs.items()}
    assert self_weight["0.5"] > self_weight["1"] > self_weight["4"] > 0.5


def test_include_self_and_top_k(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "scores", "cat dog sat mat", "--include-self", "--top-k", "2"))
    check_scores_doc(doc, vectors3, "cat dog sat mat", top_k=2, include_self=True)
    assert all(len(row) == 2 for row in doc["top"])
    assert doc["top"][2][0]["index"] == 2  # sat.sat = 2 is its row's largest score
    assert doc["top"][3][0]["index"] == 3  # mat.mat = 4
    doc = one(run_on(vectors3_path, "scores", "cat dog sat mat", "--top-k", "10"))
    check_scores_doc(doc, vectors3, "cat dog sat mat", top_k=10)
    assert all(len(row) == 3 for row in doc["top"])  # T - 1: never the own position


def test_single_token_sentence(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "scores", "cat"))
    assert doc["tokens"] == ["cat"]
    assert doc["scores"] == [[1.0]] and doc["weights"] == [[1.0]] and doc["top"] == [[]]
    check_scores_doc(doc, vectors3, "cat")
    doc = one(run_on(vectors3_path, "context", "cat", "--token", "cat"))
    assert doc["weights"] == [1.0] and doc["top"] == [] and doc["context"] == [1.0, 0.0, 0.0]
    check_context_doc(doc, vectors3, "cat")


def test_punctuation_is_left_out_unless_kept(vectors3_path):
    doc = one(run_on(vectors3_path, "scores", "cat, dog."))
    assert doc["tokens"] == ["cat", "dog"] and doc["oov"] == []
    result = run_on(vectors3_path, "scores", "cat, dog.", "--keep-punct")
    doc = one(result, stderr=None)
    assert doc["tokens"] == ["cat", "dog"] and doc["oov"] == [",", "."]  # tiny.txt has no vectors for them
    assert result.stderr.splitlines() == ["attncli: note: no vector for ',', '.' in tiny.txt; left out"]  # one note a sentence


def test_symbols_and_emoji_are_tokens_looked_up_not_punctuation(tmp_path):
    # the bundled GloVe has no vector for these emoji: out of vocabulary, with the note
    result = run("scores", "I love 🍊 oranges 😀")
    doc = one(result, stderr=None)
    assert doc["tokens"] == ["i", "love", "oranges"] and doc["oov"] == ["🍊", "😀"]
    assert result.stderr == "attncli: note: no vector for '🍊', '😀' in glove.6B.50d.100k; left out\n"
    fails(run("scores", "🍊 😀"), "none of the tokens (🍊 😀) has a vector")
    doc = one(run("scores", "🍊 cat", "--oov", "zero"), stderr=None)
    assert doc["tokens"] == ["🍊", "cat"] and doc["lookups"] == ["zero", "word"]
    # a file with vectors for them: each is a token with its own vector; punctuation still left out
    path = tmp_path / "symbols.txt"
    path.write_text("4 2\n🍊 1 0\n$ 0 1\n+ 2 2\ncat 1 1\n", encoding="utf-8")
    doc = one(run("scores", "cat 🍊 $ + !", "--vectors", path, "--scale", "1"))
    assert doc["tokens"] == ["cat", "🍊", "$", "+"] and doc["oov"] == []
    assert doc["scores"][1] == [1.0, 1.0, 0.0, 2.0]  # 🍊 = (1, 0) against cat, 🍊, $, +
    fails(run("scores", "« ! » ¿", "--vectors", path), "holds only punctuation")


def test_uppercase_is_lowercased_for_lowercase_vectors(vectors3_path):
    doc = one(run_on(vectors3_path, "scores", "The CAT Sat"))
    assert doc["tokens"] == ["the", "cat", "sat"]
    assert doc["sentence"] == "The CAT Sat"


# --------------------------------------------------------------------------- out of vocabulary


def test_oov_skip_leaves_the_word_out_with_a_note_on_stderr(vectors3_path, vectors3):
    result = run_on(vectors3_path, "scores", "cat zebra dog")
    doc = one(result, stderr=None)
    assert doc["tokens"] == ["cat", "dog"] and doc["oov"] == ["zebra"]
    check_scores_doc(doc, vectors3, "cat zebra dog")
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: note: ") and "zebra" in lines[0]
    assert "note" not in result.stdout


def test_oov_zero_keeps_the_word_with_a_zero_vector(vectors3_path, vectors3):
    result = run_on(vectors3_path, "scores", "cat zebra dog", "--oov", "zero")
    doc = one(result, stderr=None)
    assert doc["tokens"] == ["cat", "zebra", "dog"] and doc["oov"] == ["zebra"]
    assert doc["scores"][1] == [0.0, 0.0, 0.0]
    assert [row[1] for row in doc["scores"]] == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(doc["weights"][1], [1 / 3] * 3, rtol=1e-12)  # all scores 0: uniform
    check_scores_doc(doc, vectors3, "cat zebra dog")
    assert "zebra" in result.stderr and result.stderr.startswith("attncli: note: ")
    # its context: the plain mean of the vectors; its own vector has no neighbours
    doc = one(run_on(vectors3_path, "context", "cat zebra dog", "--token", "zebra", "--oov", "zero"), stderr=None)
    np.testing.assert_allclose(doc["context"], [1 / 3, 1 / 3, 0.0], rtol=1e-12)
    assert doc["token_neighbors"] == []
    check_context_doc(doc, vectors3, "cat zebra dog")


def test_oov_zero_note_does_not_say_left_out(vectors3_path):
    result = run_on(vectors3_path, "scores", "cat zebra dog", "--oov", "zero")
    assert result.exit_code == 0
    assert "zebra" in result.stderr
    assert "left out" not in result.stderr


def test_oov_error_refuses_the_sentence(vectors3_path):
    fails(run_on(vectors3_path, "scores", "cat zebra dog", "--oov", "error"), "zebra", "no vector")
    fails(run_on(vectors3_path, "context", "cat zebra dog", "--token", "cat", "--oov", "error"), "zebra")


def test_no_token_has_a_vector(vectors3_path):
    fails(run_on(vectors3_path, "scores", "zebra yak"), "zebra", "yak", "vector")
    fails(run_on(vectors3_path, "context", "zebra yak", "--all"), "vector")


def test_context_for_a_token_without_a_vector(vectors3_path):
    fails(run_on(vectors3_path, "context", "cat zebra", "--token", "zebra"), "zebra", "no vector", "--oov zero")


# --------------------------------------------------------------------------- context on the six words


def test_context_by_hand(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "context", "cat dog sat", "--token", "cat", "--scale", "1"))
    assert doc["token"] == "cat" and doc["index"] == 0
    w = [E / (2 * E + 1), 1 / (2 * E + 1), E / (2 * E + 1)]
    np.testing.assert_allclose(doc["weights"], w, rtol=1e-12)
    # z = w0 (1,0,0) + w1 (0,1,0) + w2 (1,1,0)
    np.testing.assert_allclose(doc["context"], [2 * E / (2 * E + 1), (1 + E) / (2 * E + 1), 0.0], rtol=1e-12)
    assert [t["index"] for t in doc["top"]] == [2, 1]
    # the five other words of the vocabulary, never cat itself; by hand: sat, the, dog, mat, on
    assert [n["word"] for n in doc["neighbors"]] == ["sat", "the", "dog", "mat", "on"]
    check_context_doc(doc, vectors3, "cat dog sat", scale=1.0)
    assert "contexts" not in doc


def test_context_contract_keys(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "context", "the cat sat on the mat", "--token", "mat"))
    assert COMMON_KEYS | TOKEN_KEYS <= set(doc)
    assert doc["command"] == "context"
    assert doc["vectors"] == {"name": "tiny.txt", "dim": 3, "words": 6}
    assert isinstance(doc["index"], int) and doc["token"] == "mat" and doc["index"] == 5
    assert len(doc["context"]) == 3 and len(doc["weights"]) == 6
    check_context_doc(doc, vectors3, "the cat sat on the mat")


def test_context_neighbors_count(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "context", "cat dog sat", "--token", "sat", "--neighbors", "2"))
    assert len(doc["neighbors"]) == len(doc["token_neighbors"]) == 2
    check_context_doc(doc, vectors3, "cat dog sat", neighbors=2)
    doc = one(run_on(vectors3_path, "context", "cat dog sat", "--token", "sat", "--neighbors", "0"))
    assert doc["neighbors"] == [] and doc["token_neighbors"] == []


def test_context_index_alone_and_index_with_token(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "context", "the cat sat on the mat", "--index", "2"))
    assert doc["token"] == "sat" and doc["index"] == 2
    check_context_doc(doc, vectors3, "the cat sat on the mat")
    doc = one(run_on(vectors3_path, "context", "the cat sat on the mat", "--token", "the", "--index", "4"))
    assert doc["token"] == "the" and doc["index"] == 4
    check_context_doc(doc, vectors3, "the cat sat on the mat")
    first = one(run_on(vectors3_path, "context", "the cat sat on the mat", "--token", "the", "--index", "0"))
    assert first["index"] == 0
    assert first["weights"] == doc["weights"]  # the same word: the same row of weights...
    assert 4 in [t["index"] for t in first["top"]] and 0 in [t["index"] for t in doc["top"]]  # ...each other's top


def test_context_all_with_token(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "context", "cat dog sat", "--token", "dog", "--all"))
    assert doc["token"] == "dog" and len(doc["contexts"]) == 3
    assert doc["contexts"][1] == doc["context"]
    check_context_doc(doc, vectors3, "cat dog sat", all_contexts=True)


def test_context_all_without_token_has_no_token_key(vectors3_path, vectors3):
    doc = one(run_on(vectors3_path, "context", "cat dog sat", "--all"))
    assert "token" not in doc and "index" not in doc and "neighbors" not in doc
    assert COMMON_KEYS | {"contexts"} <= set(doc)
    check_context_doc(doc, vectors3, "cat dog sat", all_contexts=True)


def test_context_token_is_tokenized_like_the_sentence(vectors3_path):
    doc = one(run_on(vectors3_path, "context", "The Cat sat", "--token", "CAT"))
    assert doc["token"] == "cat" and doc["index"] == 1
    fails(run_on(vectors3_path, "context", "cat dog", "--token", "cat dog"), "--token", "one token")


# --------------------------------------------------------------------------- other vector formats


RANDOM_WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


@pytest.fixture(scope="module")
def three_formats(tmp_path_factory):
    """The same random vectors as word2vec text, GloVe text and word2vec binary."""
    rng = np.random.default_rng(7)
    M = rng.normal(size=(len(RANDOM_WORDS), 4)).astype(np.float32)
    lines = [w + " " + " ".join(repr(float(x)) for x in row) for w, row in zip(RANDOM_WORDS, M)]
    folder = tmp_path_factory.mktemp("formats")
    text = folder / "random.w2v.txt"
    text.write_text(f"{len(RANDOM_WORDS)} 4\n" + "\n".join(lines) + "\n", encoding="utf-8")
    glove_file = folder / "random.glove.txt"
    glove_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=4)
    kv.add_vectors(RANDOM_WORDS, M)
    binary = folder / "random.w2v.bin"
    kv.save_word2vec_format(str(binary), binary=True)
    return M, {"text": text, "glove": glove_file, "binary": binary}


def test_glove_and_binary_load_like_word2vec_text(three_formats):
    M, paths = three_formats
    for path in paths.values():
        vectors = load_vectors(path)
        assert words_of(vectors) == RANDOM_WORDS
        np.testing.assert_array_equal(vectors.matrix, M)


def test_three_formats_give_the_same_numbers(three_formats):
    _, paths = three_formats
    sentence = "alpha delta beta theta alpha"
    results = {}
    for name, path in paths.items():
        vectors = load_vectors(path)
        s = one(run("scores", sentence, "--vectors", path))
        c = one(run("context", sentence, "--vectors", path, "--token", "beta", "--all"))
        check_scores_doc(s, vectors, sentence)
        check_context_doc(c, vectors, sentence, all_contexts=True)
        assert s["vectors"] == c["vectors"] == {"name": path.name, "dim": 4, "words": len(RANDOM_WORDS)}
        for doc in (s, c):
            del doc["vectors"]
        results[name] = (s, c)
    assert results["text"] == results["glove"] == results["binary"]


def test_vectors_from_the_environment(vectors3_path):
    doc = one(run("scores", "cat dog", env={"ATTNCLI_VECTORS": str(vectors3_path)}))
    assert doc["vectors"]["name"] == "tiny.txt"


# --------------------------------------------------------------------------- bundled vectors


def test_bundled_scores(glove):
    doc = one(run("scores", SENTENCE))
    assert doc["tokens"] == SENTENCE_TOKENS and doc["oov"] == []
    assert doc["vectors"] == {"name": "glove.6B.50d.100k", "dim": 50, "words": 100000}
    assert doc["scale"] == pytest.approx(1 / math.sqrt(50), rel=1e-15)
    check_scores_doc(doc, glove, SENTENCE)
    # each token attends most to itself (|x_i|^2 leads its row), and top leaves it out
    assert all(int(np.argmax(row)) == i for i, row in enumerate(doc["weights"]))
    assert all(len(row) == 3 for row in doc["top"])


def test_bundled_scale_1_and_temperature(glove):
    plain = one(run("scores", SENTENCE, "--scale", "1"))
    X = matrix_of(glove, SENTENCE_TOKENS)
    np.testing.assert_allclose(plain["weights"], expected_weights(X, 1.0), rtol=1e-12, atol=1e-15)
    check_scores_doc(plain, glove, SENTENCE, scale=1.0)
    hot = one(run("scores", SENTENCE, "--temperature", "2"))
    half = one(run("scores", SENTENCE, "--scale", repr(1 / math.sqrt(50) / 2)))
    np.testing.assert_allclose(hot["weights"], half["weights"], rtol=1e-12)
    check_scores_doc(hot, glove, SENTENCE, temperature=2.0)


def test_bundled_context(glove):
    doc = one(run("context", SENTENCE, "--token", "orange"))
    assert doc["token"] == "orange" and doc["index"] == 5
    assert len(doc["context"]) == 50
    check_context_doc(doc, glove, SENTENCE)
    assert "orange" not in [n["word"] for n in doc["neighbors"] + doc["token_neighbors"]]


def test_bundled_context_all(glove):
    doc = one(run("context", SENTENCE, "--all", "--top-k", "5", "--include-self", "--neighbors", "3",
                  "--token", "Earth"))
    assert doc["token"] == "earth"
    check_context_doc(doc, glove, SENTENCE, top_k=5, include_self=True, neighbors=3, all_contexts=True)
    assert doc["top"][0]["index"] == 1  # with --include-self, earth first


# --------------------------------------------------------------------------- standard input


@pytest.mark.parametrize("args", [(), ("-",)])
def test_stdin_several_lines_in_order_blank_lines_skipped(vectors3_path, vectors3, args):
    text = "cat dog\n\n   \nsat mat the\r\ndog\n"
    docs = ok(run_on(vectors3_path, "scores", *args, input=text))
    assert [d["sentence"] for d in docs] == ["cat dog", "sat mat the", "dog"]
    assert [d["tokens"] for d in docs] == [["cat", "dog"], ["sat", "mat", "the"], ["dog"]]
    for doc in docs:
        check_scores_doc(doc, vectors3, doc["sentence"])


def test_stdin_context(vectors3_path, vectors3):
    docs = ok(run_on(vectors3_path, "context", "--token", "cat", input="the cat sat\ncat on the mat\n"))
    assert [d["index"] for d in docs] == [1, 0]
    for doc in docs:
        check_context_doc(doc, vectors3, doc["sentence"])


def test_stdin_oov_note_names_the_line(vectors3_path):
    result = run_on(vectors3_path, "scores", input="cat dog\n\ncat zebra\n")
    docs = ok(result, stderr=None)
    assert len(docs) == 2 and docs[1]["oov"] == ["zebra"]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: note: line 3") and "zebra" in lines[0]


@pytest.mark.parametrize("text, line", [("cat dog\nzebra yak\n", 2), ("cat dog\n\n  \nzebra\n", 4)])
def test_stdin_bad_line_writes_nothing(vectors3_path, text, line):
    message = fails(run_on(vectors3_path, "scores", input=text), "vector")
    assert message.startswith(f"attncli: error: line {line}:")


def test_stdin_bad_token_line(vectors3_path):
    message = fails(run_on(vectors3_path, "context", "--token", "cat", input="cat dog\ndog sat\n"), "'cat'")
    assert message.startswith("attncli: error: line 2:")


def test_stdin_not_utf8(vectors3_path):
    fails(run_on(vectors3_path, "scores", input=b"caf\xe9 au lait\n"), "UTF-8", "line 1")


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_stdin_empty(vectors3_path, text):
    fails(run_on(vectors3_path, "scores", input=text), "standard input")
    fails(run_on(vectors3_path, "context", "--all", input=text), "standard input")


def test_stdin_utf8_bom_is_ignored(vectors3_path):
    docs = ok(run_on(vectors3_path, "scores", input="\ufeffcat dog\n".encode("utf-8")), stderr=None)
    assert docs[0]["tokens"] == ["cat", "dog"]


# --------------------------------------------------------------------------- output formats and colour


def test_json_is_the_default_off_a_terminal_and_equals_format_json(vectors3_path):
    default = run_on(vectors3_path, "scores", "cat dog sat")
    as_json = run_on(vectors3_path, "scores", "cat dog sat", "--json")
    fmt = run_on(vectors3_path, "scores", "cat dog sat", "--format", "json")
    assert default.stdout == as_json.stdout == fmt.stdout
    assert len(default.stdout.splitlines()) == 1
    json.loads(default.stdout)


def test_json_and_format_table_is_a_usage_error(vectors3_path):
    fails(run_on(vectors3_path, "scores", "cat dog", "--json", "--format", "table"), "--json", "table", code=2)
    fails(run_on(vectors3_path, "context", "cat dog", "--all", "--json", "--format", "table"), "--json", code=2)


def test_scores_table(vectors3_path):
    doc = one(run_on(vectors3_path, "scores", "the cat sat on the mat"))
    result = run_on(vectors3_path, "scores", "the cat sat on the mat", "--format", "table")
    assert result.exit_code == 0 and result.stderr == ""
    table = result.stdout
    assert not table.lstrip().startswith("{")
    for token in ["the", "cat", "sat", "on", "mat"]:
        assert token in table
    check_weights(grid(table, doc["tokens"]), doc["weights"])  # a row a token, each cell its weight
    assert "cells: α × 100, rounded" in table
    # the top-attended lines: token → other weight, ...
    top = doc["top"][1]
    assert f"cat → {top[0]['token']} {top[0]['weight']:.3f}" in table
    assert "\x1b[" not in table


def test_scores_raw_table(vectors3_path):
    result = run_on(vectors3_path, "scores", "cat dog sat mat", "--raw", "--format", "table")
    assert result.exit_code == 0 and result.stderr == ""
    # the scores 0 to 4 as two digits: ω × 10, and the caption says so
    assert grid(result.stdout, ["cat", "dog", "sat", "mat"]) == [
        ["10", "0", "10", "0"], ["0", "10", "10", "0"], ["10", "10", "20", "0"], ["0", "0", "0", "40"]]
    assert "cells: ω × 10, rounded" in result.stdout


def test_context_table(vectors3_path):
    doc = one(run_on(vectors3_path, "context", "cat dog sat", "--token", "dog"))
    result = run_on(vectors3_path, "context", "cat dog sat", "--token", "dog", "--format", "table")
    assert result.exit_code == 0 and result.stderr == ""
    table = result.stdout
    assert "dog (itself)" in table
    for w in doc["weights"]:
        assert f"{w:.3f}" in table
    for n in doc["neighbors"] + doc["token_neighbors"]:
        assert n["word"] in table and f"{n['cosine']:.3f}" in table
    result = run_on(vectors3_path, "context", "cat dog sat", "--all", "--format", "table")
    assert result.exit_code == 0 and "cat" in result.stdout and "sat" in result.stdout


def test_table_for_several_sentences(vectors3_path):
    result = run_on(vectors3_path, "scores", "--format", "table", input="cat dog\nsat mat\n")
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.index("cat dog") < result.stdout.index("sat mat")


COLOUR_PARAMS = set(range(30, 50)) | set(range(90, 98)) | set(range(100, 108))


def sgr_params(text: str) -> set[int]:
    return {int(p) for m in re.findall(r"\x1b\[([0-9;]*)m", text) for p in m.split(";") if p}


@pytest.mark.parametrize("extra, env", [([], {"NO_COLOR": "1"}), (["--no-color"], {})])
def test_no_color_gives_no_escape_codes(vectors3_path, extra, env):
    for command in (["scores", "cat dog sat"], ["context", "cat dog sat", "--token", "cat"]):
        result = run_on(vectors3_path, *command, "--format", "table", *extra, env=env)
        assert result.exit_code == 0
        assert "\x1b[" not in result.stdout and "\x1b[" not in result.stderr
        assert "cat" in result.stdout


def test_force_color_gives_colour(vectors3_path):
    result = run_on(vectors3_path, "scores", "cat dog sat", "--format", "table", env={"FORCE_COLOR": "1"})
    assert result.exit_code == 0
    assert "\x1b[" in result.stdout
    assert sgr_params(result.stdout) & COLOUR_PARAMS  # the heatmap's cell colours


@pytest.mark.parametrize("extra, env", [([], {"NO_COLOR": "1"}), (["--no-color"], {})])
def test_no_color_wins_over_force_color(vectors3_path, extra, env):
    result = run_on(vectors3_path, "scores", "cat dog sat", "--format", "table", *extra,
                      env={"FORCE_COLOR": "1", **env})
    assert result.exit_code == 0
    # no colour at all (rich still writes bold/dim/italic escapes when colour is forced)
    assert not sgr_params(result.stdout) & COLOUR_PARAMS


def test_force_color_does_not_touch_json(vectors3_path):
    result = run_on(vectors3_path, "scores", "cat dog", env={"FORCE_COLOR": "1"})
    assert "\x1b[" not in result.stdout
    json.loads(result.stdout)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("sentence", ["", "   "])
@pytest.mark.parametrize("command", [["scores"], ["context", "--all"]])
def test_empty_sentence(vectors3_path, command, sentence):
    fails(run_on(vectors3_path, *command, sentence), "empty")


def test_token_not_in_sentence(vectors3_path):
    fails(run_on(vectors3_path, "context", "cat dog", "--token", "mat"), "'mat'", "not among", "cat dog")


def test_token_twice_without_index(vectors3_path):
    message = fails(run_on(vectors3_path, "context", "the cat sat on the mat", "--token", "the"),
                    "'the'", "more than once")
    assert "--index 0" in message and "--index 4" in message


def test_index_out_of_range(vectors3_path):
    fails(run_on(vectors3_path, "context", "cat dog", "--index", "5"), "--index 5", "out of range")
    fails(run_on(vectors3_path, "context", "cat dog", "--index", "2", "--token", "cat"), "out of range")


def test_index_at_another_word(vectors3_path):
    message = fails(run_on(vectors3_path, "context", "the cat sat", "--token", "cat", "--index", "0"),
                    "--index 0", "'the'", "'cat'")
    assert "--index 1" in message  # where cat is


def test_context_without_token_index_or_all(vectors3_path):
    fails(run_on(vectors3_path, "context", "cat dog"), "--token", "--all", code=2)


@pytest.mark.parametrize("args, words", [
    (["--top-k", "0"], ["--top-k"]),
    (["--top-k", "x"], ["--top-k"]),
    (["--temperature", "0"], ["--temperature"]),
    (["--temperature", "-1"], ["--temperature"]),
    (["--temperature", "nan"], ["--temperature", "finite"]),
    (["--temperature", "inf"], ["--temperature", "finite"]),
    (["--temperature", "abc"], ["--temperature"]),
    (["--scale", "nan"], ["--scale", "finite"]),
    (["--scale", "inf"], ["--scale", "finite"]),
    (["--scale", "-inf"], ["--scale", "finite"]),
    (["--oov", "maybe"], ["--oov"]),
    (["--format", "xml"], ["--format"]),
    (["--no-such-option"], ["--no-such-option"]),
])
def test_usage_errors(vectors3_path, args, words):
    fails(run_on(vectors3_path, "scores", "cat dog", *args), *words, code=2)


@pytest.mark.parametrize("args", [["--index", "-1"], ["--neighbors", "-1"]])
def test_context_usage_errors(vectors3_path, args):
    fails(run_on(vectors3_path, "context", "cat dog", "--all", *args), args[0], code=2)


def test_unknown_command():
    fails(run("frobnicate"), "frobnicate", code=2)


def test_no_command_shows_readable_help():
    result = run()
    assert result.exit_code in (0, 2)  # click's convention for a group without a command: help, exit 2
    shown = result.stdout + result.stderr
    assert "attncli: error: Usage:" not in shown
    assert re.search(r"^Commands:$", shown, re.M) and re.search(r"^\s+scores\b", shown, re.M)


@pytest.mark.parametrize("args", [["--scale", "1e308"], ["--temperature", "1e-310"], ["--scale", "-1e308"]])
def test_overflowing_scale(vectors3_path, args):
    fails(run_on(vectors3_path, "scores", "cat dog sat", *args), "scale", "overflow")
    fails(run_on(vectors3_path, "context", "cat dog sat", "--all", *args), "scale")


def test_vectors_missing(tmp_path):
    missing = tmp_path / "nope.txt"
    fails(run("scores", "cat", "--vectors", missing), "nope.txt", "no such file")


def test_vectors_directory(tmp_path):
    fails(run("scores", "cat", "--vectors", tmp_path), str(tmp_path), "directory")


@pytest.mark.parametrize("content", ["hello world, this is not a vectors file\nat all\n", "", "\n\n"])
def test_vectors_not_a_vectors_file(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_text(content, encoding="utf-8")
    fails(run("scores", "cat", "--vectors", path), "notes.txt", "not a word vectors file")


def test_vectors_binary_noise(tmp_path):
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(range(256)) * 8)
    fails(run("scores", "cat", "--vectors", path), "noise.bin")


@pytest.mark.parametrize("content, line", [
    ("4 3\ncat 1 0 0\ndog 0 1\nsat 1 1 0\nmat 0 0 2\n", 3),  # word2vec text: too few values
    ("4 3\ncat 1 0 0\ndog 0 1 0\nsat 1 1 0 7\nmat 0 0 2\n", 4),  # word2vec text: too many
    ("cat 1 0 0\ndog 0 1\nsat 1 1 0\n", 2),  # GloVe
])
def test_vectors_wrong_number_of_values_names_the_line(tmp_path, content, line):
    path = tmp_path / "ragged.txt"
    path.write_text(content, encoding="utf-8")
    message = fails(run("scores", "cat", "--vectors", path), "ragged.txt", "line")
    assert re.search(rf"\bline {line}\b", message), message


def test_vectors_wrong_number_of_values_on_the_first_vector_line(tmp_path):
    path = tmp_path / "ragged.txt"
    path.write_text("3 3\ncat 1 0\ndog 0 1 0\nsat 1 1 0\n", encoding="utf-8")
    message = fails(run("scores", "cat", "--vectors", path), "ragged.txt")
    assert re.search(r"\bline 2\b", message), message


def test_vectors_fewer_lines_than_the_header_says(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("5 3\ncat 1 0 0\ndog 0 1 0\n", encoding="utf-8")
    fails(run("scores", "cat", "--vectors", path), "short.txt")


# --------------------------------------------------------------------------- version, help, Ctrl-C


def test_version():
    for flag in ("--version", "-V"):
        result = run(flag)
        assert result.exit_code == 0 and result.stderr == ""
        assert result.stdout == f"attncli, version {attncli.__version__}\n"
    from importlib.metadata import version

    assert attncli.__version__ == version("attncli")


@pytest.mark.parametrize("command", [[], ["scores"], ["context"]])
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help(command, flag):
    result = run(*command, flag)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.startswith("Usage: attncli")
    assert "Example" in result.stdout
    if command:
        for option in ("--vectors", "--scale", "--temperature", "--top-k", "--format", "--json", "--no-color"):
            assert option in result.stdout
    else:
        assert "scores" in result.stdout and "context" in result.stdout


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def test_ctrl_c(monkeypatch):
    monkeypatch.setattr(attncli.cli.options, "load_vectors", _interrupt)
    result = run("scores", "cat dog")
    assert result.exit_code == 130
    assert result.stdout == ""
    assert [line for line in result.stderr.splitlines() if line.strip()] == ["attncli: interrupted"]


def test_ctrl_c_is_one_line(monkeypatch):
    monkeypatch.setattr(attncli.cli.options, "load_vectors", _interrupt)
    result = run("context", "cat dog", "--all")
    assert result.exit_code == 130
    assert result.stderr == "attncli: interrupted\n"


# --------------------------------------------------------------------------- real processes


def test_real_process_json_on_a_pipe():
    proc = subprocess.run([str(ENTRY_POINT), "scores", SENTENCE], capture_output=True, text=True,
                          env=process_env(), timeout=60)
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    doc = json.loads(lines[0])
    assert doc["tokens"] == SENTENCE_TOKENS
    check_rows_sum_to_one(doc["weights"])


def test_real_process_errors_and_prog_name(tmp_path):
    proc = subprocess.run([str(ENTRY_POINT), "scores", "cat", "--top-k", "0"], capture_output=True, text=True,
                          env=process_env(), timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith("attncli: error: ") and "'attncli scores --help'" in proc.stderr
    # an argument that is not UTF-8 (the interpreter keeps the bad byte as a surrogate)
    proc = subprocess.run([os.fsencode(ENTRY_POINT), b"scores", b"caf\xe9 au lait"], capture_output=True,
                          env=process_env(), timeout=60)
    assert proc.returncode == 1 and proc.stdout == b""
    assert proc.stderr.count(b"\n") == 1 and b"UTF-8" in proc.stderr and b"Traceback" not in proc.stderr


def test_python_m_attncli_version():
    proc = subprocess.run([sys.executable, "-m", "attncli", "--version"], capture_output=True, text=True,
                          env=process_env(), timeout=60)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == f"attncli, version {attncli.__version__}\n"


@pytest.fixture(scope="module")
def broken_pipe_run(tmp_path_factory):
    """attncli scores - on 2000 lines, its reader gone after the first line of output."""
    stdin_file = tmp_path_factory.mktemp("pipe") / "many.txt"
    stdin_file.write_text((SENTENCE + "\n") * 2000, encoding="utf-8")
    with stdin_file.open("rb") as stdin:
        proc = subprocess.Popen([str(ENTRY_POINT), "scores", "-"], stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=process_env())
        first = proc.stdout.readline()
        proc.stdout.close()  # the reader goes away: the rest (megabytes) cannot be written
        stderr = proc.stderr.read()
        proc.stderr.close()
        returncode = proc.wait(timeout=60)
    return first, stderr.decode("utf-8", "replace"), returncode


def test_broken_pipe_is_quiet(broken_pipe_run):
    first, stderr, returncode = broken_pipe_run
    check_rows_sum_to_one(json.loads(first)["weights"])
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    assert returncode in (0, 141)


def test_broken_pipe_exit_status_141(broken_pipe_run):
    _, _, returncode = broken_pipe_run
    assert returncode == attncli.cli.ExitStatus.BROKEN_PIPE == 141


def test_mask_self_through_the_commands(tmp_path):
    from clirunner import fails, one, run

    doc = one(run("scores", "The earth is like an orange", "--mask", "self", "--json"))
    assert doc["mask"] == "self" and all(row[i] == 0 for i, row in enumerate(doc["weights"]))
    assert all(t["index"] != i for i, top in enumerate(doc["top"]) for t in top)
    fails(run("scores", "orange", "--mask", "self"), "with --mask self a token attends only to the others")
    one_word = tmp_path / "one.txt"
    one_word.write_text("orange\n")
    fails(run("scores", "--file", one_word, "--mask", "self"), "the document has one token")
    shown = run("scores", "The earth is like an orange", "--mask", "self", "--format", "table")
    assert "own position masked (--mask self)" in shown.stdout and shown.stdout.count("·") >= 6


def test_fields_write_only_the_keys_asked_for():
    full = ok(run("scores", "the earth is like an orange", "--json"))[0]
    part = ok(run("scores", "the earth is like an orange", "--fields", "weights,tokens", "--json"))[0]
    assert part == {"tokens": full["tokens"], "weights": full["weights"]}
    ctx = ok(run("context", "the earth is like an orange", "--token", "orange", "--fields", "context,contexts"))[0]
    assert list(ctx) == ["context"]  # a key this document has not is left out, as gh does
    lines = ok(run("batch", "--fields", "top", input="the cat sat\nthe dog ran\n"), stderr="")
    assert [list(d) for d in lines] == [["line", "top"], ["line", "top"]]
    fails(run("scores", "the cat", "--fields", "weights,nope"), "nope: not a key of its documents", "weights", code=2)
    fails(run("scores", "the cat", "--fields", "weights", "--format", "table"), "--fields chooses the keys", code=2)
    fails(run("scores", "--file", __file__, "--fields", "weights"), "a document (--file, --document)", code=2)
