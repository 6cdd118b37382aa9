"""compare, neighbors, tables that fit the terminal, and pictures (--svg, --html, --png).

Numbers are checked against independent float64 computations: cosines with numpy from the
vectors in the documents and from attncli.load_vectors(), nearest words by a brute-force
loop over every row of a small word2vec file written here. Views are rendered with rich at
fixed widths; pictures are parsed (SVG as XML, PNG's header and IHDR chunk).
"""

from __future__ import annotations

import io
import math
import os
import re
import struct
import sys
import unicodedata
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from rich.console import Console

from clirunner import fails, ok, one, run, words_of
from grids import check_weights, column_labels, grid, grids, longest_line
from helpers import flat
from attncli import load_vectors
from attncli.analyze import scores_doc
from attncli.vectors import Vectors, Vocabulary
from attncli.views import sentence

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

FRUIT = "The earth is like an orange"
COLOUR = "Orange is a bright color"
LUNCH = "I ate an orange for lunch"
SIX = ["the", "earth", "is", "like", "an", "orange"]

# 40 distinct words of the bundled GloVe, no punctuation
FORTY = ("the earth is like an orange and a bright color while cats sit on mats near old houses where children "
         "play games under tall green trees during warm summer days with friends from school after lunch every "
         "morning in spring")

# 9 long words: their names as column labels do not fit 120 columns, their positions do
LONG9 = ("government information development international environment responsibility organization relationship "
         "particularly")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

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


def punctuation(word: str) -> bool:
    return all(unicodedata.category(c)[0] == "P" for c in word)


def cosine_matrix(rows) -> np.ndarray:
    """Every pair's cosine, in float64, a pair at a time."""
    rows = [np.asarray(r, dtype=np.float64) for r in rows]
    return np.array([[float(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b)) for b in rows] for a in rows])


def brute_nearest(rows: dict[str, np.ndarray], v, k: int, own: set[str]) -> list[tuple[str, float]]:
    """A loop over every row: cosine with v, the word itself, punctuation and zero rows left out."""
    v = np.asarray(v, dtype=np.float64)
    found = []
    for word, x in rows.items():
        x = np.asarray(x, dtype=np.float64)
        if word in own or punctuation(word) or not np.any(x):
            continue
        found.append((word, math.fsum(x * v) / (math.sqrt(math.fsum(x * x)) * math.sqrt(math.fsum(v * v)))))
    found.sort(key=lambda wc: -wc[1])
    return found[:k]


def check_nearest(got: list[dict], expected: list[tuple[str, float]]):
    assert all(set(n) == {"word", "cosine"} for n in got)
    assert [n["word"] for n in got] == [w for w, _ in expected]
    np.testing.assert_allclose([n["cosine"] for n in got], [c for _, c in expected], rtol=0, atol=2e-6)


def render_scores(doc: dict, width: int, **kw) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(sentence.scores_view(doc, width=width, **kw))
    return out.getvalue()


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def svg_text(path) -> str:
    """The text an SVG shows (rich writes spaces as no-break spaces)."""
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return "".join(root.itertext()).replace("\xa0", " ")


def leftovers(folder) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")]


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


@pytest.fixture
def umask_022():
    before = os.umask(0o022)
    yield
    os.umask(before)


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
    from attncli.analyze import Options, compare_doc
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
    from attncli.analyze import Options, attend

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


def test_nearest_looks_further_down_when_keep_refuses_the_best():
    rng = np.random.default_rng(7)
    words = [f"w{i:03d}" for i in range(300)]
    M = rng.standard_normal((300, 8)).astype(np.float32)
    vectors = Vectors("random", Vocabulary.from_words(words), M, cased=False)
    v = rng.standard_normal(8)
    rows = {w: M[i].astype(np.float64) for i, w in enumerate(words)}
    ranked = brute_nearest(rows, v, 300, set())
    refused = {w for w, _ in ranked[:60]}  # the 60 best are all refused
    keep = lambda w: w not in refused  # noqa: E731
    for k, exclude, block in [(5, set(), 1 << 16), (5, {ranked[60][0]}, 7), (1, set(), 64), (12, set(), 1)]:
        got = vectors.nearest(v, k, exclude, keep=keep, block=block)
        expected = [(w, c) for w, c in ranked if w not in refused and w not in exclude][:k]
        assert len(got) == k
        assert [w for w, _ in got] == [w for w, _ in expected]
        np.testing.assert_allclose([c for _, c in got], [c for _, c in expected], rtol=0, atol=2e-6)
    # more than there are: every kept word, best first
    got = vectors.nearest(v, 1000, set(), keep=keep)
    assert [w for w, _ in got] == [w for w, _ in ranked if w not in refused]
    assert vectors.nearest(v, 5, set(), keep=lambda w: False) == []


# --------------------------------------------------------------------------- tables by width


@pytest.mark.parametrize("width", [80, 200])
def test_six_tokens_show_their_names_as_columns(glove, width):
    doc = scores_doc(FRUIT, glove)
    text = render_scores(doc, width)
    assert longest_line(text) <= width
    assert column_labels(text, SIX) == SIX
    check_weights(grid(text, SIX), doc["weights"])
    assert "too many" not in text and "columns by position" not in text


def test_forty_tokens_give_top_lines_not_a_grid_at_80_columns(glove):
    doc = scores_doc(FORTY, glove)
    tokens = doc["tokens"]
    assert len(tokens) == 40 and len(set(tokens)) == 40 and doc["oov"] == []
    text = render_scores(doc, 80)
    assert longest_line(text) <= 80
    assert grids(text, tokens) == [] and grids(text, [str(i) for i in range(40)]) == []  # no grid at all
    assert "40 tokens are too many for a 40 x 40 grid in 80 columns" in flat(text)
    tops = [line for line in text.splitlines() if "→" in line]
    assert len(tops) == 40
    for i, (line, token, top) in enumerate(zip(tops, tokens, doc["top"])):
        assert line.startswith(f"{i} {token} → "), line
        assert line.rstrip().endswith(", ".join(f"{t['token']} {t['weight']:.3f}" for t in top))


def test_forty_tokens_get_their_grid_at_200_columns(glove):
    doc = scores_doc(FORTY, glove)
    text = render_scores(doc, 200)
    assert longest_line(text) <= 200
    assert column_labels(text, doc["tokens"]) == doc["tokens"]  # written downwards
    check_weights(grid(text, doc["tokens"]), doc["weights"])
    assert "too many" not in text


def test_long_words_get_rows_and_columns_by_position(glove):
    doc = scores_doc(LONG9, glove)
    tokens = doc["tokens"]
    assert len(tokens) == 9
    # the widest word and 9 columns of 3 need 41 columns; their positions 1 + 27
    width = 40
    text = render_scores(doc, width)
    assert longest_line(text) <= width
    positions = [str(j) for j in range(9)]
    assert column_labels(text, positions) == positions
    check_weights(grid(text, positions), doc["weights"])
    assert all(f"{j} {t}" in flat(text) for j, t in enumerate(tokens))  # the key
    assert "too many" not in text
    # one column more and the words label the rows, the columns their words written downwards
    text = render_scores(doc, 41)
    assert column_labels(text, tokens) == [t[:11] + "…" if len(t) > 12 else t for t in tokens]
    check_weights(grid(text, tokens), doc["weights"])


def test_a_grid_that_fits_is_drawn(glove):
    doc = scores_doc("The earth is like a big orange", glove)
    tokens = doc["tokens"]
    text = render_scores(doc, 80)
    assert column_labels(text, tokens) == tokens
    check_weights(grid(text, tokens), doc["weights"])


def test_max_tokens_caps_the_view_function(glove):
    doc = scores_doc(FORTY, glove)
    text = render_scores(doc, 200, max_tokens=5)
    assert longest_line(text) <= 200
    five = doc["tokens"][:5]
    assert column_labels(text, five) == five
    check_weights(grid(text, five), [row[:5] for row in doc["weights"][:5]])
    assert "the grid shows the first 5 of 40 tokens" in flat(text)
    assert len([line for line in text.splitlines() if "→" in line]) == 40


def test_max_tokens_on_the_command_line():
    full = one(run("scores", FORTY, "--json"))
    assert len(full["tokens"]) == 40
    assert one(run("scores", FORTY, "--max-tokens", 5, "--json")) == full  # JSON is never abridged
    assert np.array(full["weights"]).shape == (40, 40)
    result = run("scores", FORTY, "--max-tokens", 5, "--format", "table")
    assert result.exit_code == 0 and result.stderr == ""
    table = result.stdout
    assert longest_line(table) <= 200
    five = full["tokens"][:5]
    assert column_labels(table, five) == five
    check_weights(grid(table, five), [row[:5] for row in full["weights"][:5]])
    assert "first 5 of 40 tokens (--max-tokens); JSON holds them all" in flat(table)
    # under the cap, nothing is said
    small = run("scores", FRUIT, "--max-tokens", 6, "--format", "table")
    assert small.exit_code == 0 and "--max-tokens" not in small.stdout
    assert column_labels(small.stdout, SIX) == SIX


def test_scores_table_at_80_columns_fits():
    result = run("scores", FORTY, "--format", "table", env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert longest_line(result.stdout) <= 80
    assert "40 tokens are too many" in flat(result.stdout)


# --------------------------------------------------------------------------- --svg and --html


@pytest.mark.parametrize("fmt", [["--json"], ["--format", "table"], []])
def test_svg_and_html_with_any_stdout(tmp_path, fmt):
    svg, html = tmp_path / "scores.svg", tmp_path / "scores.html"
    result = run("scores", FRUIT, "--svg", svg, "--html", html, *fmt)
    assert result.exit_code == 0 and result.stderr == ""
    if fmt == ["--format", "table"]:
        assert column_labels(result.stdout, SIX) == SIX
    else:  # the JSON is untouched by the pictures
        assert one(result) == one(run("scores", FRUIT, "--json"))
    shown = svg_text(svg)
    page = html.read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html")
    for token in SIX:
        assert token in shown and token in page
    assert FRUIT in shown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.html", "scores.svg"]


@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1"}])
def test_the_picture_is_the_same_coloured_one_whatever_stdout_is(tmp_path, env):
    """A table piped (no colour on stdout) or JSON: the SVG is drawn in full colour either way."""
    pictures = {}
    for name, fmt in (("table", ["--format", "table"]), ("json", ["--json"])):
        path = tmp_path / f"{name}.svg"
        assert run("scores", FRUIT, "--svg", path, *fmt, env={"COLUMNS": "100", **env}).exit_code == 0
        pictures[name] = re.sub(r"terminal-\d+", "terminal", path.read_text(encoding="utf-8"))
    assert pictures["table"] == pictures["json"]
    fills = set(re.findall(r'fill="(#[0-9a-f]{6})"', pictures["table"]))
    assert len(fills) >= 8  # the heatmap's steps, not only the window's frame


def test_svg_and_html_of_compare_and_neighbors(tmp_path):
    result = run("compare", FRUIT, COLOUR, "--token", "orange", "--svg", tmp_path / "c.svg", "--html", tmp_path / "c.htm")
    doc = one(result)
    shown = svg_text(tmp_path / "c.svg")
    page = (tmp_path / "c.htm").read_text(encoding="utf-8")
    for word in ["earth", "bright", "color"] + [n["word"] for n in doc["sentences"][0]["token_neighbors"]]:
        assert word in shown and word in page
    doc = one(run("neighbors", "orange", "--neighbors", 4, "--svg", tmp_path / "n.svg"))
    shown = svg_text(tmp_path / "n.svg")
    for n in doc["neighbors"]:
        assert n["word"] in shown and f"{n['cosine']:.3f}" in shown
    assert leftovers(tmp_path) == []


def test_svg_escapes_markup_in_the_sentence(tmp_path):
    sentence = 'AT&T says <b>"hi"</b> & bye'
    result = run("scores", sentence, "--keep-punct", "--svg", tmp_path / "m.svg", "--html", tmp_path / "m.html")
    assert result.exit_code == 0
    shown = svg_text(tmp_path / "m.svg")  # parses as XML
    assert "&" in shown and "<" in shown
    assert "<b>" not in (tmp_path / "m.html").read_text(encoding="utf-8").split("<body>", 1)[-1]


# --------------------------------------------------------------------------- --png


def test_png_sizes_follow_the_tokens(tmp_path):
    six, forty = tmp_path / "six.png", tmp_path / "forty.png"
    assert one(run("scores", FRUIT, "--png", six))["tokens"] == SIX
    ok(run("scores", FORTY, "--png", forty))
    w6, h6 = png_size(six.read_bytes())
    w40, h40 = png_size(forty.read_bytes())
    # 100 dpi; a side of max(4, 0.32 T + 2) inches, at most 16, plus room for the colour bar and titles
    assert (w6, h6) == (550, 600)
    assert (w40, h40) == (1630, 1680)
    assert w40 > 2 * w6 and h40 > 2 * h6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["forty.png", "six.png"]


def test_png_is_the_same_bytes_twice(tmp_path):
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    ok(run("scores", FRUIT, "--png", first))
    table = run("scores", FRUIT, "--png", second, "--format", "table")
    assert table.exit_code == 0 and table.stderr == "" and "orange" in table.stdout
    assert first.read_bytes() == second.read_bytes()
    assert b"Software" not in first.read_bytes()  # no version written in it


def test_png_of_compare_context_and_explain(tmp_path):
    sizes = {}
    for name, args in [
        ("compare2", ["compare", FRUIT, COLOUR, "--token", "orange"]),
        ("compare3", ["compare", FRUIT, COLOUR, LUNCH, "--token", "orange"]),
        ("context", ["context", FRUIT, "--token", "orange"]),
        ("context_all", ["context", FRUIT, "--all"]),
        ("explain", ["explain", FRUIT]),
        ("explain_heads", ["explain", FRUIT, "--qkv", "random", "--heads", "2", "--mask", "causal"]),
    ]:
        path = tmp_path / f"{name}.png"
        ok(run(*args, "--png", path))
        sizes[name] = png_size(path.read_bytes())
        assert all(s > 100 for s in sizes[name])
    # one row of weights per sentence: a third sentence adds height, not width
    assert sizes["compare3"][0] == sizes["compare2"][0] and sizes["compare3"][1] > sizes["compare2"][1]
    assert sizes["context"][1] < sizes["compare2"][1]  # one row of weights, not two
    assert sizes["explain_heads"][0] == sizes["explain"][0] and sizes["explain_heads"][1] > sizes["explain"][1]
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("args", [["scores", FRUIT], ["explain", FRUIT, "--qkv", "random", "--heads", "2"],
                                  ["context", FRUIT, "--token", "orange"], ["compare", FRUIT, COLOUR, "--token", "orange"]])
def test_every_png_heatmap_names_its_axes(args):
    """Rows attend, columns are attended: each panel of weights says so on its axes."""
    pytest.importorskip("matplotlib")
    from attncli.views import plot

    docs = ok(run(*args, "--json"))
    plt = plot._pyplot()
    fig = plot.figure(plt, docs)
    try:
        panels = [ax for ax in fig.axes if ax.get_title()]  # the colour bars have none
        assert len(panels) == {"scores": 1, "explain": 2, "context": 1, "compare": 2}[args[0]]
        assert [(ax.get_ylabel(), ax.get_xlabel()) for ax in panels] == \
            [("attending token i", "attended token j")] * len(panels)
    finally:
        plt.close(fig)


def test_the_png_of_every_context_vector_names_its_axes():
    pytest.importorskip("matplotlib")
    from attncli.views import plot

    plt = plot._pyplot()
    fig = plot.figure(plt, ok(run("context", FRUIT, "--all", "--json")))
    try:
        ax = next(ax for ax in fig.axes if ax.get_title())
        assert (ax.get_ylabel(), ax.get_xlabel()) == ("token i", "value k of its context vector z_i")
    finally:
        plt.close(fig)


@pytest.mark.parametrize("fmt", [["--json"], ["--format", "table"]])
def test_png_without_matplotlib(tmp_path, monkeypatch, fmt):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails
    result = run("scores", FRUIT, "--png", tmp_path / "w.png", *fmt)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: error: ")
    assert "matplotlib" in lines[0] and "attncli[plot]" in lines[0]
    assert list(tmp_path.iterdir()) == []  # no picture, no temporary file


def test_png_without_matplotlib_writes_nothing_to_stdout(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    fails(run("scores", FRUIT, "--png", tmp_path / "w.png", "--json"), "attncli[plot]")


# --------------------------------------------------------------------------- picture paths


@pytest.mark.parametrize("flag, name, words, code", [
    ("--png", "out.svg", [".png"], 2),  # a wrong suffix is the command line's own mistake
    ("--svg", "out.png", [".svg"], 2),
    ("--html", "out.png", [".html"], 2),
    ("--png", "out", [".png"], 2),
    ("--png", "missing/out.png", ["cannot be written", "does not exist"], 1),  # a place that cannot take it
    ("--svg", "missing/deeper/out.svg", ["cannot be written", "does not exist"], 1),
    ("--html", "missing/out.html", ["cannot be written", "does not exist"], 1),
])
def test_bad_picture_paths_are_refused_before_anything_is_written(tmp_path, flag, name, words, code):
    fails(run("scores", FRUIT, flag, tmp_path / name), flag, *words, code=code)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag, name", [("--png", "pics.png"), ("--svg", "pics.svg"), ("--html", "pics.html"),
                                        ("--png", "")])
def test_a_directory_is_not_a_picture_path(tmp_path, flag, name):
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    fails(run("compare", FRUIT, COLOUR, "--token", "orange", flag, folder), flag, "directory",
          code=1 if name else 2)
    assert [p.name for p in tmp_path.iterdir()] == ([name] if name else [])
    assert list(folder.iterdir()) == []


def test_pictures_have_the_usual_permissions_and_no_leftovers(tmp_path, umask_022):
    paths = [tmp_path / "t.svg", tmp_path / "t.html", tmp_path / "t.png"]
    (tmp_path / "t.png").write_bytes(b"old")  # an existing file is replaced whole
    ok(run("compare", FRUIT, COLOUR, "--token", "orange", "--svg", paths[0], "--html", paths[1], "--png", paths[2]))
    for path in paths:
        assert oct(path.stat().st_mode & 0o777) == oct(0o644), path
    assert paths[2].read_bytes()[:8] == PNG_MAGIC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.html", "t.png", "t.svg"]
    assert leftovers(tmp_path) == []


def test_pictures_follow_a_stricter_umask(tmp_path):
    before = os.umask(0o077)
    try:
        ok(run("scores", FRUIT, "--svg", tmp_path / "p.svg", "--png", tmp_path / "p.png"))
    finally:
        os.umask(before)
    for name in ("p.svg", "p.png"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600
    assert leftovers(tmp_path) == []


def test_a_relative_picture_path_lands_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ok(run("scores", FRUIT, "--svg", "here.svg", "--png", "here.png"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here.png", "here.svg"]
    assert "orange" in svg_text(tmp_path / "here.svg")


# --------------------------------------------------------------------------- cosines at the edges of the range


def exact_cosines(rows: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Cosines computed apart from numpy, in Python floats: each vector divided by its
    largest entry first, its sums by math.fsum."""
    out = []
    for row in rows:
        top = max(abs(float(x)) for x in row)
        a = [float(x) / top for x in row]
        t = max(abs(float(x)) for x in v)
        b = [float(x) / t for x in v]
        out.append(math.fsum(x * y for x, y in zip(a, b)) / math.sqrt(math.fsum(x * x for x in a))
                   / math.sqrt(math.fsum(y * y for y in b)))
    return np.array(out)


@pytest.mark.parametrize("size", [3e38, 1e30, 1e20, 1e-20, 1e-30, 1e-38, 1e-44])
def test_nearest_at_any_size_float32_holds(size):
    """Rows whose squares overflow float32 (3e38, 1e30, 1e20) or underflow it (1e-20 down to
    denormal 1e-44) keep their cosines: 1, 1/3 and -1 here, as at an ordinary size."""
    M = np.array([[3, 0], [1, 2 * math.sqrt(2)], [-3, 0], [0.5, 0.5]], dtype=np.float64) * size / 3
    M = M.astype(np.float32)
    vectors = Vectors("edge", Vocabulary.from_words(["alpha", "beta", "gamma", "delta"]), M, cased=False)
    got = dict(vectors.nearest(M[0], 3, {"alpha"}))
    expected = dict(zip(["beta", "gamma", "delta"], exact_cosines(M[1:], M[0])))
    assert set(got) == set(expected)
    for word, c in got.items():
        assert c == pytest.approx(expected[word], abs=2e-6), (word, c, expected[word])
    assert got["gamma"] == pytest.approx(-1.0, abs=1e-6) and got["delta"] == pytest.approx(math.sqrt(0.5), abs=1e-6)


def test_nearest_mixes_huge_tiny_and_ordinary_rows_in_one_block():
    rng = np.random.default_rng(3)
    M = rng.standard_normal((200, 6))
    M[::7] *= 1e37
    M[3::11] *= 1e-39
    M = M.astype(np.float32)
    vectors = Vectors("mixed", Vocabulary.from_words([f"w{i}" for i in range(200)]), M, cased=False)
    v = rng.standard_normal(6) * 1e300  # a float64 query far past float32's range
    got = vectors.nearest(v, 200, block=64)
    expected = exact_cosines(M.astype(np.float64), v)
    assert [w for w, _ in got] == [f"w{i}" for i in np.argsort(-expected, kind="stable")]
    np.testing.assert_allclose([c for _, c in got], np.sort(expected)[::-1], atol=2e-6)


def test_neighbors_of_vectors_near_float32s_largest(tmp_path):
    vectors = tmp_path / "big.txt"
    vectors.write_text("3 2\nalpha 3e38 0\nbeta 1e38 2.8284271e38\ngamma -3e38 0\n", encoding="utf-8")
    doc = one(run("neighbors", "alpha", "--vectors", vectors, "--json"))
    assert [n["word"] for n in doc["neighbors"]] == ["beta", "gamma"]
    np.testing.assert_allclose([n["cosine"] for n in doc["neighbors"]], [1 / 3, -1.0], atol=1e-6)


def test_cosines_do_not_depend_on_the_vectors_size():
    """vectors.cosines of rows scaled by powers of two is bit for bit the same, from 2^-1000
    to 2^1000, and by other factors the same to rounding; a zero row's cosines are NaN."""
    from attncli.vectors import cosines

    rng = np.random.default_rng(5)
    M = rng.standard_normal((4, 9))
    base = cosines(M)
    for e in (-1000, -500, -60, 60, 500, 1000):
        np.testing.assert_array_equal(cosines(np.ldexp(M, e)), base)
    np.testing.assert_allclose(cosines(M * 1e300), base, atol=1e-15)
    np.testing.assert_allclose(cosines(M * 1e-300), base, atol=1e-15)
    M[2] = 0
    C = cosines(M)
    assert np.isnan(C[2]).all() and np.isnan(C[:, 2]).all()
    assert np.isfinite(np.delete(np.delete(C, 2, 0), 2, 1)).all()


def test_a_vectors_cosine_with_itself_is_one_and_no_cosine_leaves_the_range():
    """The diagonal of vectors.cosines is 1 exactly, and so is the cosine of a row with its
    copy or a power-of-two multiple of it; nearly parallel and nearly opposite rows, whose
    products round past 1 in size, stay within [-1, 1]; a zero row's stay NaN."""
    from attncli.vectors import cosines

    rng = np.random.default_rng(11)
    for _ in range(200):
        a = rng.standard_normal(rng.integers(2, 60))
        M = np.stack([a, a + rng.standard_normal(len(a)) * 1e-9, -a * 3.7, a * 2.0 ** 40, a.copy(),
                      rng.standard_normal(len(a)), np.zeros(len(a))])
        C = cosines(M)
        defined = C[:6, :6]
        assert (np.diag(defined) == 1.0).all()
        assert C[0, 3] == C[3, 0] == C[0, 4] == C[3, 4] == 1.0
        assert (np.abs(defined) <= 1.0).all()
        np.testing.assert_array_equal(defined, defined.T)
        assert np.isnan(C[6]).all() and np.isnan(C[:, 6]).all()


def test_compare_json_gives_every_diagonal_and_a_repeated_vector_exactly_one():
    doc = one(run("compare", "the river bank", "the bank raised its rates", "the bank raised its rates",
                  "--token", "bank", "--json"))
    for key in ("context_cosine", "raw_cosine"):
        assert [doc[key][i][i] for i in range(3)] == [1.0, 1.0, 1.0], key
    assert doc["context_cosine"][1][2] == doc["context_cosine"][2][1] == 1.0  # the same sentence twice
    assert doc["raw_cosine"][0][1] == doc["raw_cosine"][1][2] == 1.0  # the same word's vector each time
    assert all(-1.0 <= c <= 1.0 for key in ("context_cosine", "raw_cosine") for row in doc[key] for c in row)


def test_nearest_gives_a_rows_own_direction_one_and_nothing_past_one():
    vectors = load_vectors()
    for r in range(0, vectors.size, 500):
        v = np.asarray(vectors.matrix[r])
        (word, c), *others = vectors.nearest(v, 3)
        assert (word, c) == (vectors.vocab.word(r), 1.0)
        assert all(-1.0 <= c <= 1.0 for _, c in others)
        assert vectors.nearest(v * 8, 1)[0][1] == 1.0  # a power-of-two multiple: the same direction


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
