"""compare and neighbors: their documents, tables and errors.

Numbers are checked against independent float64 computations: cosines with numpy from the
vectors in the documents and from attncli.load_vectors(), nearest words by a brute-force
loop over every row of a small word2vec file written here. Tables are read back at a fixed
width.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from clirunner import fails, one, run, words_of
from grids import longest_line
from helpers import COLOUR, FRUIT, LUNCH, brute_nearest, flat, punctuation

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


# A small word2vec text file. Punctuation words (",", "--", "...", "(") sit right next to
# "orange" so that they WOULD rank first; "'s" has a letter, so it is a word; "blank" is a
# zero vector (no cosine). Every other cosine with "orange" is well apart from the next.
SMALL_ROWS = [
    ("orange", [1.0, 0.5, 0.0, 0.25]),
    (",", [1.0, 0.5, 0.0, 0.26]),
    ("--", [0.95, 0.5, 0.05, 0.25]),
    ("...", [0.9, 0.45, 0.0, 0.25]),
    ("(", [1.0, 0.4, 0.1, 0.2]),
    ("tangerine", [0.9, 0.6, 0.1, 0.2]),
    ("'s", [0.7, 0.4, 0.1, 0.2]),
    ("lemon", [0.8, 0.1, 0.3, 0.4]),
    ("apple", [0.5, 0.5, 0.5, 0.0]),
    ("red", [0.3, 0.9, -0.2, 0.1]),
    ("blank", [0.0, 0.0, 0.0, 0.0]),
    ("car", [-0.5, 0.2, 1.0, 0.0]),
    ("sky", [0.0, -1.0, 0.5, 0.5]),
    ("night", [-1.0, -0.5, 0.0, -0.25]),
]


# --------------------------------------------------------------------------- helpers


def cosine_matrix(rows) -> np.ndarray:
    """Every pair's cosine, in float64, a pair at a time."""
    rows = [np.asarray(r, dtype=np.float64) for r in rows]
    return np.array([[float(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b)) for b in rows] for a in rows])


def check_nearest(got: list[dict], expected: list[tuple[str, float]]):
    assert all(set(n) == {"word", "cosine"} for n in got)
    assert [n["word"] for n in got] == [w for w, _ in expected]
    np.testing.assert_allclose([n["cosine"] for n in got], [c for _, c in expected], rtol=0, atol=2e-6)


@pytest.fixture(scope="module")
def small_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "small.txt"
    lines = [f"{len(SMALL_ROWS)} 4"] + [f"{w} {' '.join(repr(x) for x in v)}" for w, v in SMALL_ROWS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_rows():
    # the values as the file holds them once read: float32
    return {w: np.array(v, dtype=np.float32).astype(np.float64) for w, v in SMALL_ROWS}


# --------------------------------------------------------------------------- compare: JSON


def test_compare_json_against_context_and_numpy(glove):
    doc = one(run("compare", FRUIT, COLOUR, "--token", "orange", "--json"))
    assert set(doc) == {"command", "token", "sentences", "context_cosine", "raw_cosine", "notes"}
    assert doc["command"] == "compare" and doc["token"] == "orange" and doc["notes"] == []
    assert len(doc["sentences"]) == 2
    for sentence, d in zip([FRUIT, COLOUR], doc["sentences"]):
        assert d == one(run("context", sentence, "--token", "orange", "--json"))
    assert [d["index"] for d in doc["sentences"]] == [5, 0]
    contexts = [d["context"] for d in doc["sentences"]]
    np.testing.assert_allclose(doc["context_cosine"], cosine_matrix(contexts), rtol=0, atol=1e-12)
    raw = [glove.vector("orange")] * 2
    np.testing.assert_allclose(doc["raw_cosine"], cosine_matrix(raw), rtol=0, atol=1e-12)
    np.testing.assert_allclose(doc["raw_cosine"], np.ones((2, 2)), rtol=0, atol=1e-12)
    # context moves "orange" a little, not to another meaning
    assert 0.5 < doc["context_cosine"][0][1] < 1.0 - 1e-6


def test_compare_three_sentences_give_symmetric_3x3(glove):
    doc = one(run("compare", FRUIT, COLOUR, LUNCH, "--token", "Orange", "--json"))
    assert doc["token"] == "orange" and len(doc["sentences"]) == 3
    for name in ("context_cosine", "raw_cosine"):
        M = np.array(doc[name])
        assert M.shape == (3, 3)
        np.testing.assert_array_equal(M, M.T)
        np.testing.assert_allclose(np.diag(M), 1.0, rtol=0, atol=1e-12)
        assert np.all(M <= 1.0) and np.all(M >= -1.0)
    np.testing.assert_allclose(doc["context_cosine"], cosine_matrix([d["context"] for d in doc["sentences"]]),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(doc["raw_cosine"], np.ones((3, 3)), rtol=0, atol=1e-12)
    assert doc["sentences"][2] == one(run("context", LUNCH, "--token", "orange", "--json"))


def test_compare_passes_every_option_through():
    options = ["--qkv", "random", "--seed", "1", "--heads", "2", "--mask", "causal", "--top-k", "2",
               "--temperature", "2", "--neighbors", "3"]
    doc = one(run("compare", FRUIT, COLOUR, "--token", "orange", *options, "--json"))
    for sentence, d in zip([FRUIT, COLOUR], doc["sentences"]):
        assert d["qkv"] == {"kind": "random", "d_k": 50, "seed": 1, "heads": 2}
        assert d["mask"] == "causal" and d["temperature"] == 2.0
        assert len(d["heads"]) == 2
        assert len(d["token_neighbors"]) == 3 and d["neighbors"] == []  # z is not a word vector here
        assert d == one(run("context", sentence, "--token", "orange", *options, "--json"))
    # causal: "orange" at index 0 of the second sentence sees only itself
    assert doc["sentences"][1]["weights"] == [1.0, 0.0, 0.0, 0.0, 0.0]
    np.testing.assert_allclose(doc["context_cosine"], cosine_matrix([d["context"] for d in doc["sentences"]]),
                               rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- compare: table


def test_compare_table_marks_the_moved_words():
    doc = one(run("compare", FRUIT, COLOUR, "--token", "orange", "--json"))
    result = run("compare", FRUIT, COLOUR, "--token", "orange", "--format", "table", env={"COLUMNS": "120"})
    assert result.exit_code == 0 and result.stderr == ""
    table = result.stdout
    assert not table.lstrip().startswith("{")
    assert longest_line(table) <= 120
    assert f"(1) {FRUIT}" in table and f"(2) {COLOUR}" in table
    own = [n["word"] for n in doc["sentences"][0]["token_neighbors"]]
    moved = set()
    for d in doc["sentences"]:
        for n in d["neighbors"]:
            word = n["word"]
            if word in own:
                assert not re.search(rf"\*{re.escape(word)}\b", table), word
                assert re.search(rf"\b{re.escape(word)}\b", table), word
            else:
                moved.add(word)
                assert f"*{word}" in table, word
    assert moved  # "green" and "white" are near orange's context vectors, not near orange itself
    for word in own:
        assert word in table
    # the cosines, and what they mean
    off = doc["context_cosine"][0][1]
    text = flat(table)
    assert f"cosine {off:.3f} between sentences" in text  # one value, not a range of one
    assert "barely moves" in text
    assert f"{doc['context_cosine'][0][1]:.3f}" in table and "1.000" in table


@pytest.mark.parametrize("args, code, words", [
    ([FRUIT], 2, ["two sentences"]),
    ([], 2, ["two sentences"]),
    ([FRUIT, "A bright color"], 1, ["sentence 2", "'orange'", "not among"]),
    ([FRUIT, COLOUR, "the sky is blue"], 1, ["sentence 3", "'orange'"]),
    ([FRUIT, ""], 1, ["sentence 2", "empty"]),
    (["   ", COLOUR], 1, ["sentence 1", "empty"]),
])
def test_compare_bad_input(args, code, words):
    fails(run("compare", *args, "--token", "orange", "--json"), *words, code=code)


def test_compare_needs_a_token():
    fails(run("compare", FRUIT, COLOUR), "--token", code=2)


@pytest.mark.parametrize("command", [
    ["compare", "the cat saw the dog", "the dog", "--token", "the"],
    ["neighbors", "the", "--context", "the cat saw the dog"],
])
def test_a_repeated_token_is_not_sent_to_a_missing_option(command):
    message = fails(run(*command, "--json"), "more than once")
    if "--index" in message:
        result = run(*command, "--index", "3", "--json")
        assert result.exit_code != 2, result.stderr


REPEATS = "the cat saw the dog"


@pytest.mark.parametrize("args", [
    ["compare", REPEATS, "the dog saw a cat", "--token", "the"],
    ["neighbors", "the", "--context", REPEATS],
    ["context", REPEATS, "--token", "the"],
    ["explain", REPEATS, "--token", "the"],
])
def test_a_repeated_token_is_chosen_by_index_in_every_command(args):
    """Each command that follows a token says where its repeats are, as --index, and takes it."""
    where = "sentence 1 ('the cat saw the dog'): " if args[0] == "compare" else ""
    assert fails(run(*args, "--json")) == (
        f"attncli: error: {where}'the' occurs more than once; 'the' is at --index 0, --index 3")
    assert fails(run(*args, "--index", "1", "--json")) == (
        f"attncli: error: {where}the token at --index 1 is 'cat', not 'the'; 'the' is at --index 0, --index 3")
    assert fails(run(*args, "--index", "5", "--json")) == (
        f"attncli: error: {where}--index 5 is out of range: the sentence has 5 tokens with vectors (0 to 4)")


def test_compare_index_follows_the_occurrence_asked_for(glove):
    doc = one(run("compare", REPEATS, "the dog saw a cat", "--token", "the", "--index", "3", "--index", "0", "--json"))
    assert [d["index"] for d in doc["sentences"]] == [3, 0]
    assert doc["sentences"][0] == one(run("context", REPEATS, "--token", "the", "--index", "3", "--json"))
    assert doc["sentences"][1] == one(run("context", "the dog saw a cat", "--token", "the", "--json"))
    contexts = [d["context"] for d in doc["sentences"]]
    np.testing.assert_allclose(doc["context_cosine"], cosine_matrix(contexts), rtol=0, atol=1e-12)
    # without positions both "the" have one context vector; a causal mask tells them apart
    causal = [one(run("compare", REPEATS, "the dog saw a cat", "--token", "the", "--index", i, "--index", "0",
                      "--mask", "causal", "--json")) for i in ("0", "3")]
    assert causal[0]["sentences"][0]["weights"] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert causal[1]["sentences"][0]["weights"][4] == 0.0 and causal[1]["sentences"][0]["weights"][3] < 1.0
    assert causal[0]["context_cosine"][0][1] == pytest.approx(1.0, abs=1e-12)  # "the" alone, in both sentences
    assert causal[1]["context_cosine"][0][1] < 1 - 1e-3  # the second "the" attends to "cat" and "saw" too


def test_compare_doc_takes_a_position_for_some_sentences_only(glove):
    """explore compares the cursor's word: its position in the first sentence, the other's by the word."""
    from attncli.documents.context import compare_doc
    from attncli.encoder import Options
    from attncli.errors import TokenError

    doc = compare_doc([REPEATS, "the dog"], glove, Options(), token="the", indices=[3, None])
    assert [d["index"] for d in doc["sentences"]] == [3, 0]
    with pytest.raises(TokenError, match="'the' is at --index 0, --index 3"):
        compare_doc(["the dog", REPEATS], glove, Options(), token="the", indices=[0, None])


def test_compare_one_index_serves_every_sentence():
    doc = one(run("compare", REPEATS, "a dog saw the cat", "the dog and the cat", "--token", "the", "--index", "3",
                  "--json"))
    assert [d["index"] for d in doc["sentences"]] == [3, 3, 3]


@pytest.mark.parametrize("given", [2, 4])
def test_compare_takes_one_index_or_one_for_each_sentence(given):
    assert fails(run("compare", REPEATS, "a dog saw the cat", "the cat", "--token", "the", *["--index", "0"] * given),
                 code=2) == ("attncli: error: --index is given once for every sentence, or once for each in their "
                             f"order: 3 sentences and {given} --index (see 'attncli compare --help')")


def test_neighbors_index_picks_the_context_vector_of_that_occurrence(glove):
    from attncli.encoder import Options, attend

    doc = one(run("neighbors", "the", "--context", REPEATS, "--index", "3", "--mask", "causal", "--json"))
    z = attend(REPEATS, glove, Options(mask="causal")).context[3]
    assert doc["index"] == 3 and doc["context"] == z.tolist()
    first = one(run("neighbors", "the", "--context", REPEATS, "--index", "0", "--mask", "causal", "--json"))
    assert first["index"] == 0 and first["context"] == glove.vector("the").astype(float).tolist()  # itself alone
    assert first["neighbors"] != doc["neighbors"]


def test_neighbors_old_k_is_a_hidden_name_of_neighbors(glove):
    new = one(run("neighbors", "orange", "--neighbors", "4", "--json"))
    assert len(new["neighbors"]) == 4
    for old in ("-k", "--k"):
        assert one(run("neighbors", "orange", old, "4", "--json")) == new
    assert len(one(run("neighbors", "orange", "--json"))["neighbors"]) == 10  # its default, as before
    assert not re.search(r"(^|\s)(-k|--k)\b", run("neighbors", "--help").stdout)
    fails(run("neighbors", "orange", "-k", "3", "--neighbors", "4"), "-k (--k) is the old name of --neighbors", code=2)


def test_neighbors_index_needs_a_context():
    fails(run("neighbors", "the", "--index", "3"), "--index needs --context SENTENCE", code=2)


# --------------------------------------------------------------------------- neighbors


@pytest.mark.parametrize("k", [1, 3, 5, 50])
def test_neighbors_is_a_brute_force_loop_without_punctuation(small_path, small_rows, k):
    doc = one(run("neighbors", "orange", "--neighbors", k, "--vectors", small_path, "--json"))
    assert set(doc) == {"command", "vectors", "word", "neighbors"}
    assert doc["command"] == "neighbors" and doc["word"] == "orange"
    assert doc["vectors"]["dim"] == 4 and doc["vectors"]["words"] == len(SMALL_ROWS)
    expected = brute_nearest(small_rows, small_rows["orange"], k, {"orange"})
    check_nearest(doc["neighbors"], expected)
    words = [n["word"] for n in doc["neighbors"]]
    assert not {",", "--", "...", "(", "orange", "blank"} & set(words)
    # the punctuation is truly nearer than anything kept: it WOULD have ranked
    with_punctuation = sorted(((w, float(cosine_matrix([small_rows["orange"], x])[0, 1]))
                               for w, x in small_rows.items() if w not in ("orange", "blank")), key=lambda wc: -wc[1])
    assert {w for w, _ in with_punctuation[:4]} == {",", "--", "...", "("}
    if k == 50:  # every word there is with a cosine: all but orange, 4 punctuation and the zero row
        assert len(words) == len(SMALL_ROWS) - 6
        assert "'s" in words and words[-1] == "night"


def test_neighbors_cased_query_and_table(small_path, small_rows):
    doc = one(run("neighbors", "ORANGE", "--neighbors", 3, "--vectors", small_path, "--json"))
    assert doc["word"] == "orange"
    result = run("neighbors", "orange", "--neighbors", 3, "--vectors", small_path, "--format", "table")
    assert result.exit_code == 0 and result.stderr == ""
    for n in doc["neighbors"]:
        assert n["word"] in result.stdout and f"{n['cosine']:.3f}" in result.stdout


def test_neighbors_of_a_context_vector(small_path, small_rows):
    sentence = "red orange , car"
    ctx = one(run("context", sentence, "--token", "orange", "--vectors", small_path, "--json"))
    assert ctx["tokens"] == ["red", "orange", "car"]  # the comma left out
    doc = one(run("neighbors", "orange", "--context", sentence, "--neighbors", 4, "--vectors", small_path, "--json"))
    assert set(doc) == {"command", "vectors", "word", "neighbors", "sentence", "index", "context"}
    assert doc["word"] == "orange" and doc["sentence"] == sentence and doc["index"] == 1
    assert doc["context"] == ctx["context"]
    # the context vector, independently: softmax(x_i . x_j / sqrt(d)) over the sentence's vectors
    X = np.array([small_rows[t] for t in ctx["tokens"]])
    s = X @ X[1] / math.sqrt(4)
    w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    np.testing.assert_allclose(doc["context"], w @ X, rtol=0, atol=1e-12)
    expected = brute_nearest(small_rows, doc["context"], 4, {"orange"})
    check_nearest(doc["neighbors"], expected)
    # the context vector's neighbours differ from the word's own: red and car pulled it
    own = brute_nearest(small_rows, small_rows["orange"], 4, {"orange"})
    assert [w for w, _ in expected] != [w for w, _ in own]
    assert ctx["neighbors"][:4] == doc["neighbors"]  # context lists 5 by default


def test_neighbors_of_a_context_vector_in_glove(glove):
    ctx = one(run("context", FRUIT, "--token", "orange", "--json"))
    doc = one(run("neighbors", "orange", "--context", FRUIT, "--neighbors", 8, "--json"))
    assert doc["context"] == ctx["context"] and doc["index"] == 5
    M = np.asarray(glove.matrix, dtype=np.float64)
    v = np.array(doc["context"])
    norms = np.linalg.norm(M, axis=1)
    cos = (M @ v) / (np.where(norms == 0, 1, norms) * np.linalg.norm(v))
    words = words_of(glove)
    order = [i for i in np.argsort(-cos, kind="stable") if norms[i] > 0]
    expected = [(words[i], cos[i]) for i in order if words[i] != "orange" and not punctuation(words[i])][:8]
    check_nearest(doc["neighbors"], expected)


@pytest.mark.parametrize("word", ["zyxwvutsq", "two words", ""])
def test_neighbors_of_a_word_not_in_the_vocabulary(small_path, word):
    fails(run("neighbors", word, "--vectors", small_path, "--json"), "not a word of")


def test_neighbors_takes_no_projections_but_trained_ones():
    # a context vector is a point among the word vectors only without projections, or with
    # those attncli train learned (tests/test_options_used.py): random ones are refused
    fails(run("neighbors", "orange", "--context", FRUIT, "--qkv", "random", "--json"),
          "need identity projections, or ones attncli train learned")
    fails(run("neighbors", "orange", "--context", FRUIT, "--d-k", "10", "--json"), "no such option", "--d-k", code=2)


def test_neighbors_context_word_not_in_the_sentence():
    fails(run("neighbors", "orange", "--context", "the sky is blue", "--json"), "'orange'", "not among")


def test_neighbors_has_no_png(tmp_path):
    fails(run("neighbors", "orange", "--png", tmp_path / "n.png"), "--png", code=2)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- cosines at the edges of the range


def test_neighbors_of_vectors_near_float32s_largest(tmp_path):
    vectors = tmp_path / "big.txt"
    vectors.write_text("3 2\nalpha 3e38 0\nbeta 1e38 2.8284271e38\ngamma -3e38 0\n", encoding="utf-8")
    doc = one(run("neighbors", "alpha", "--vectors", vectors, "--json"))
    assert [n["word"] for n in doc["neighbors"]] == ["beta", "gamma"]
    np.testing.assert_allclose([n["cosine"] for n in doc["neighbors"]], [1 / 3, -1.0], atol=1e-6)


def test_compare_json_gives_every_diagonal_and_a_repeated_vector_exactly_one():
    doc = one(run("compare", "the river bank", "the bank raised its rates", "the bank raised its rates",
                  "--token", "bank", "--json"))
    for key in ("context_cosine", "raw_cosine"):
        assert [doc[key][i][i] for i in range(3)] == [1.0, 1.0, 1.0], key
    assert doc["context_cosine"][1][2] == doc["context_cosine"][2][1] == 1.0  # the same sentence twice
    assert doc["raw_cosine"][0][1] == doc["raw_cosine"][1][2] == 1.0  # the same word's vector each time
    assert all(-1.0 <= c <= 1.0 for key in ("context_cosine", "raw_cosine") for row in doc[key] for c in row)


def test_compare_of_zero_vectors_gives_null_a_note_and_a_dash():
    """--oov zero gives 'xyzzy' the zero vector in both sentences: the cosine of its raw
    vectors is undefined, null in JSON with a note, a dash in the table, never 0.000."""
    args = ("compare", "xyzzy cat", "xyzzy dog", "--token", "xyzzy", "--oov", "zero")
    doc = one(run(*args, "--json"))
    assert doc["raw_cosine"] == [[None, None], [None, None]]
    ctx = doc["context_cosine"]  # its context vectors are not zero: cat's and dog's share
    assert ctx[0][0] == 1.0 and ctx[1][1] == 1.0 and 0 < ctx[0][1] < 1
    assert doc["notes"] == ["the raw vectors of 'xyzzy' in sentences 1 and 2 are zero: their cosines are "
                            "undefined (null in JSON, a dash in a table)"]
    table = run(*args, "--format", "table", "--no-color")
    assert table.exit_code == 0
    assert "│ (1) │   – │   – │" in table.stdout and "0.000" not in table.stdout
    assert "(its raw vectors: undefined)" in " ".join(table.stdout.split())
    # one zero vector among three: only its row and column are undefined
    three = one(run("compare", "xyzzy cat", "the cat", "a cat", "--token", "cat", "--json"))
    assert three["notes"] == [] and all(c is not None for row in three["raw_cosine"] for c in row)
    mixed = one(run("compare", "xyzzy cat", "xyzzy", "the xyzzy", "--token", "xyzzy", "--oov", "zero", "--json"))
    assert all(row == [None] * 3 for row in mixed["raw_cosine"])
