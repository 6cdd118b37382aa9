"""--model through the commands, on a tiny random BERT the tests write: every number a
document carries is the forward pass's, every mistake one line and the right status."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
from clirunner import fails, ok, one, run  # noqa: E402
from grids import check_weights, grid, grids  # noqa: E402
from tinybert import TINY, loop_forward, tiny_weights, write_model  # noqa: E402

SENTENCE = "The earth is like an orange"
PIECES = ["[CLS]", "the", "earth", "is", "like", "an", "orange", "[SEP]"]


@pytest.fixture(scope="module")
def tinybert_folder(tmp_path_factory):
    """A folder holding tinybert.py's random BERT, named tiny."""
    return write_model(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="module")
def reference(tinybert_folder):
    from attncli import models

    ids = list(models.load_model(str(tinybert_folder)).encode(SENTENCE).ids)
    return loop_forward(ids, tiny_weights(TINY), TINY)  # hidden (L + 1, T, D), weights (L, H, T, T)


@pytest.mark.parametrize("layer,head", [(None, None), (1, None), (2, 2), (1, 1)])
def test_scores_shows_the_layer_and_head_asked_for(tinybert_folder, reference, layer, head):
    args = [*(["--layer", layer] if layer else []), *(["--head", head] if head else [])]
    doc = one(run("scores", SENTENCE, "--model", tinybert_folder, *args, "--json"))
    hidden, alphas = reference
    l = (layer or 2) - 1
    assert doc["tokens"] == PIECES
    assert doc["model"] == {"name": "tiny", "layers": 2, "heads": 2, "d_model": 8}
    assert doc["layer"] == l + 1 and doc["head"] == head
    assert doc["special"] == [True] + [False] * 6 + [True]
    assert doc["scale"] == 1 / math.sqrt(4) and doc["qkv"]["kind"] == "model" and doc["qkv"]["heads"] == 2
    shown = alphas[l].mean(axis=0) if head is None else alphas[l][head - 1]
    np.testing.assert_allclose(doc["weights"], shown, atol=1e-13)
    for h, entry in enumerate(doc["heads"]):
        np.testing.assert_allclose(entry["weights"], alphas[l][h], atol=1e-13)
    # each top list is its row's largest weights, its own position left out
    for i, top in enumerate(doc["top"]):
        row = [(w, j) for j, w in enumerate(shown[i]) if j != i]
        assert [t["index"] for t in top] == [j for _, j in sorted(row, reverse=True)[:3]]


def test_the_environment_names_the_model(tinybert_folder):
    doc = one(run("scores", SENTENCE, "--json", env={"ATTNCLI_MODEL": str(tinybert_folder)}))
    assert doc["model"]["name"] == "tiny"


def test_compare_gives_the_hidden_states_cosines_layer_by_layer(tinybert_folder):
    sentences = ["the bank river", "an orange bank"]
    doc = one(run("compare", *sentences, "--token", "bank", "--model", tinybert_folder, "--json"))
    from attncli import models

    model = models.load_model(str(tinybert_folder))
    states = []
    for s in sentences:
        ids = list(model.encode(s).ids)
        hidden, _ = loop_forward(ids, tiny_weights(TINY), TINY)
        states.append(hidden[:, model.encode(s).pieces.index("bank")])
    a, b = states
    cosines = [float(x @ y / np.linalg.norm(x) / np.linalg.norm(y)) for x, y in zip(a, b)]
    assert len(doc["hidden_cosine"]) == 3
    np.testing.assert_allclose([m[0][1] for m in doc["hidden_cosine"]], cosines, atol=1e-12)
    # raw_cosine, with a model, is the cosine of the word's input to the layer shown, the
    # state after the layer before: the row of hidden_cosine above it, not the word vectors'
    np.testing.assert_allclose(doc["raw_cosine"][0][1], cosines[1], atol=1e-12)  # layer 2, the last
    first = one(run("compare", *sentences, "--token", "bank", "--model", tinybert_folder, "--layer", "1", "--json"))
    np.testing.assert_allclose(first["raw_cosine"][0][1], cosines[0], atol=1e-12)
    # beside it, attention over the bundled word vectors, as compare without --model gives it
    plain = one(run("compare", *sentences, "--token", "bank", "--json"))
    assert doc["static"] == {"vectors": "glove.6B.50d.100k", "context_cosine": plain["context_cosine"],
                             "raw_cosine": plain["raw_cosine"]}


def test_context_and_explain_are_the_layers_steps(tinybert_folder, reference):
    hidden, alphas = reference
    doc = one(run("context", SENTENCE, "--token", "orange", "--model", tinybert_folder, "--layer", "1", "--json"))
    assert doc["index"] == 6 and doc["neighbors"] == [] and doc["token_neighbors"] == []
    np.testing.assert_allclose(doc["weights"], alphas[0].mean(axis=0)[6], atol=1e-13)
    ex = one(run("explain", SENTENCE, "--model", tinybert_folder, "--layer", "2", "--json"))
    np.testing.assert_allclose(ex["steps"]["X"], hidden[1], atol=1e-12)  # layer 2's input: layer 1's output
    np.testing.assert_allclose(ex["steps"]["weights"], alphas[1], atol=1e-13)
    w = tiny_weights(TINY)
    Q = hidden[1] @ w["bert.encoder.layer.1.attention.self.query.weight"].T.astype(float) + \
        w["bert.encoder.layer.1.attention.self.query.bias"]
    np.testing.assert_allclose(ex["steps"]["Q"], Q, atol=1e-12)


def test_heads_gives_every_layer_and_head(tinybert_folder, reference):
    _, alphas = reference
    doc = one(run("heads", SENTENCE, "--model", tinybert_folder, "--json"))
    np.testing.assert_allclose(doc["weights"], alphas, atol=1e-13)
    special = np.array([True] + [False] * 6 + [True])
    np.testing.assert_allclose(doc["special_share"], alphas[..., special].sum(-1).mean(-1), atol=1e-13)
    assert doc["layer"] is None and doc["head"] is None  # every one
    static = one(run("heads", SENTENCE, "--qkv", "random", "--heads", "5", "--json"))
    assert np.array(static["weights"]).shape == (1, 5, 6, 6) and "special_share" not in static
    assert "layer" not in static and "head" not in static  # one layer over word vectors, every head of it


@pytest.mark.parametrize("layer,head", [(2, None), (None, 2), (1, 2)])
def test_heads_shows_the_layer_and_head_asked_for(tinybert_folder, reference, layer, head):
    _, alphas = reference  # (L, H, T, T)
    args = [*(["--layer", str(layer)] if layer else []), *(["--head", str(head)] if head else [])]
    doc = one(run("heads", SENTENCE, "--model", tinybert_folder, *args, "--json"))
    chosen = alphas[slice(layer - 1, layer) if layer else slice(None), slice(head - 1, head) if head else slice(None)]
    assert np.array(doc["weights"]).shape == chosen.shape
    np.testing.assert_allclose(doc["weights"], chosen, atol=1e-13)
    special = np.array([True] + [False] * 6 + [True])
    np.testing.assert_allclose(doc["special_share"], chosen[..., special].sum(-1).mean(-1), atol=1e-13)
    assert (doc["layer"], doc["head"]) == (layer, head)
    lines = run("heads", SENTENCE, "--model", tinybert_folder, *args, "--format", "table", "--no-pager",
                env={"COLUMNS": "80", "NO_COLOR": "1"}).stdout.splitlines()
    assert [line for line in lines if line.startswith("layer")] == [f"layer {n}" for n in ([layer] if layer else [1, 2])]
    names = [label.rstrip("*") for line in lines for label in line.split() if re.fullmatch(r"h\d+\*?", label)]
    assert sorted(set(names)) == [f"h{n}" for n in ([head] if head else [1, 2])]


def test_heads_option_needs_a_model_and_a_layer_it_has(tinybert_folder):
    fails(run("heads", SENTENCE, "--layer", "1"), "--layer needs --model NAME|DIR", code=2)
    fails(run("heads", SENTENCE, "--model", tinybert_folder, "--layer", "3"), "layer must be from 1 to 2")
    fails(run("heads", SENTENCE, "--model", tinybert_folder, "--head", "3"), "head must be from 1 to 2")


def test_heads_draws_a_picture_of_each_head(tinybert_folder):
    result = run("heads", SENTENCE, "--model", tinybert_folder, "--format", "table", "--no-pager",
                 env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("layer")] == ["layer 1", "layer 2"]
    assert all(len(line) <= 80 for line in lines)
    labels = [label.rstrip("*") for line in lines for label in line.split() if label.startswith("h")]
    assert labels.count("h1") == labels.count("h2") == 2
    # at 80 columns each row beside its token, each column's position on top
    rows = [line for line in lines if re.match(r"\d+ ", line)]
    assert [row.split()[:2] for row in rows] == [[str(i), t] for l in (1, 2) for i, t in enumerate(PIECES)]
    assert sum("01234567  01234567" in line for line in lines) == 2


def test_heads_shades_every_picture_on_one_scale_of_0_to_1():
    # --scale 0: every weight is 1/6 exactly; scaled to the largest weight it would be solid
    text = run("heads", SENTENCE, "--qkv", "random", "--heads", "2", "--scale", "0", "--format", "table",
               "--no-pager", env={"COLUMNS": "80", "NO_COLOR": "1"}).stdout
    rows = [line for line in text.splitlines() if re.match(r"\d+ ", line)]
    assert len(rows) == 6 and all(row.split()[2:] == ["░" * 6] * 2 for row in rows)
    assert "weight 0 to 1 (the largest here 0.17)" in " ".join(text.split())


def test_heads_labels_are_cut_and_give_way_when_narrow():
    long = "antidisestablishmentarianism " * 3 + "orange"
    args = ("heads", long, "--qkv", "random", "--heads", "2", "--oov", "zero", "--format", "table", "--no-pager")
    lines = run(*args, env={"COLUMNS": "30", "NO_COLOR": "1"}).stdout.splitlines()
    assert all(len(line) <= 30 for line in lines)
    key = lines.index("the labels cut short, in full:")
    rows = [line for line in lines[:key] if re.match(r"\d+ ", line)]
    assert [row[:17] for row in rows] == [f"{i} antidisestabl… " for i in range(3)] + ["3 orange".ljust(17)]
    assert [line.rstrip() for line in lines[key + 1:key + 4]] == [f"{i} antidisestablishmentarianism" for i in range(3)]
    # 20 columns leave no room for a label beside a picture: the pictures alone, a row of shades a line
    lines = run(*args, env={"COLUMNS": "20", "NO_COLOR": "1"}).stdout.splitlines()
    assert all(len(line) <= 20 for line in lines) and not any(re.match(r"\d+ ", line) for line in lines)
    assert [w for line in lines for w in line.split() if re.fullmatch(r"h\d", w)] == ["h1", "h2"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_batch_runs_the_model_per_line(tinybert_folder, reference, jobs):
    docs = ok(run("batch", "--model", tinybert_folder, "--layer", "1", "--jobs", jobs,
                  input=f"{SENTENCE}\n\nthe bank\n"))
    assert [d["line"] for d in docs] == [1, 3]
    np.testing.assert_allclose(docs[0]["weights"], reference[1][0].mean(axis=0), atol=1e-13)
    assert docs[1]["tokens"] == ["[CLS]", "the", "bank", "[SEP]"]


@pytest.mark.parametrize("args,words,code", [
    (["--layer", "3"], ["layer must be from 1 to 2", "tiny has 2 layers"], 1),
    (["--head", "3"], ["head must be from 1 to 2"], 1),
    (["--layer", "0"], ["--layer", "0 is not in the range"], 2),
    (["--qkv", "random"], ["--model runs the model's own attention", "leave out --qkv"], 2),
    (["--heads", "2"], ["leave out --heads"], 2),
    (["--temperature", "2"], ["leave out --temperature"], 2),
    (["--vectors", "x.txt"], ["leave out --vectors"], 2),
    (["--file", "doc.txt"], ["a document through --model shows chosen rows of its attention", "give --rows"], 2),
])
def test_options_a_model_cannot_take(tinybert_folder, args, words, code):
    fails(run("scores", "--model", tinybert_folder, *args, *([] if "--file" in args else [SENTENCE])), *words,
          code=code)


def test_model_options_without_a_model():
    fails(run("scores", SENTENCE, "--layer", "2"), "--layer needs --model", code=2)
    fails(run("scores", SENTENCE, "--head", "2"), "--head needs --model", code=2)


def test_bad_model_folders(tmp_path, tinybert_folder):
    fails(run("scores", SENTENCE, "--model", tmp_path / "none"), "does not exist; give a model's folder")
    broken = write_model(tmp_path / "broken")
    (broken / "config.json").write_text(json.dumps({**TINY, "model_type": "t5"}))
    fails(run("scores", SENTENCE, "--model", broken), "model_type is 't5'")
    fails(run("scores", " ".join(["the"] * 15), "--model", tinybert_folder), "is 17 word pieces long", "at most 16")


def test_a_model_leaves_the_static_commands_untouched():
    """Nothing of the model path is imported unless --model is given."""
    import subprocess
    import sys

    code = ("import sys; from attncli.cli import main\n"
            "try:\n    main(['scores', 'the cat', '--json'])\nexcept SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('safetensors', 'tokenizers') "
            "or m in ('attncli.models', 'attncli.models.bert')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "[]"


# --- rollout and norms: the two measures from the literature


def test_rollout_rows_sum_to_1_and_one_layer_is_half_attention_half_identity():
    from attncli import attention

    rng = np.random.default_rng(3)
    A = rng.dirichlet(np.ones(5), size=(3, 5))  # (L, T, T), rows sum to 1
    R = attention.rollout(A)
    np.testing.assert_allclose(R.sum(axis=-1), 1, atol=1e-15)
    np.testing.assert_allclose(R[0], 0.5 * A[0] + 0.5 * np.eye(5), atol=1e-15)
    np.testing.assert_allclose(R[2], (0.5 * A[2] + 0.5 * np.eye(5)) @ (0.5 * A[1] + 0.5 * np.eye(5)) @ R[0], atol=1e-15)


def test_norms_add_up_to_the_attention_output(tinybert_folder):
    """Kobayashi et al.: sum_h sum_j alpha^h_ij f^h(x_j) + b_O is the attention's output A_i,
    exactly; and ||alpha_ij f(x_j)|| is what the document carries."""
    from attncli import attention, models
    from attncli.models import bert

    model = models.load_model(str(tinybert_folder))
    ids = model.encode(SENTENCE).ids
    run_ = bert.forward(ids, model.weights, model.config, keep=(1,))
    steps = run_.steps[1]
    F = bert.passed_on(steps["V"], model.weights, 1, model.config)  # (H, T, D)
    sent = np.einsum("hij,hjd->id", steps["weights"], F) + model.weights["encoder.layer.1.attention.output.dense.bias"]
    np.testing.assert_allclose(sent, steps["A"], atol=1e-12)
    loops = np.array([[np.linalg.norm(sum(steps["weights"][h, i, j] * F[h, j] for h in range(2)))
                       for j in range(len(ids))] for i in range(len(ids))])
    np.testing.assert_allclose(attention.summed_norms(steps["weights"], F, block=3), loops, atol=1e-12)
    doc = one(run("scores", SENTENCE, "--model", tinybert_folder, "--norms", "--json"))
    np.testing.assert_allclose(doc["norms"], loops, atol=1e-12)
    for h, head in enumerate(doc["heads"]):
        np.testing.assert_allclose(head["norms"], steps["weights"][h] * np.linalg.norm(F[h], axis=-1)[None, :],
                                   atol=1e-12)
    one_head = one(run("scores", SENTENCE, "--model", tinybert_folder, "--norms", "--head", "2", "--json"))
    np.testing.assert_allclose(one_head["norms"], doc["heads"][1]["norms"], atol=0)


def test_rollout_through_the_cli(tinybert_folder, reference):
    _, alphas = reference
    doc = one(run("scores", SENTENCE, "--model", tinybert_folder, "--rollout", "--layer", "2", "--json"))
    T = len(PIECES)
    P = [0.5 * alphas[l].mean(axis=0) + 0.5 * np.eye(T) for l in range(2)]
    np.testing.assert_allclose(doc["rollout"], P[1] @ P[0], atol=1e-13)
    static = one(run("scores", SENTENCE, "--rollout", "--json"))
    np.testing.assert_allclose(static["rollout"], 0.5 * np.array(static["weights"]) + 0.5 * np.eye(6), atol=1e-15)
    values = one(run("scores", SENTENCE, "--norms", "--json"))
    from attncli.words.load import load_vectors

    vectors = load_vectors()
    X = np.array([vectors.vector(t) for t in values["tokens"]], dtype=float)
    np.testing.assert_allclose(values["norms"], np.array(values["weights"]) * np.linalg.norm(X, axis=1)[None, :],
                               rtol=1e-12)


@pytest.mark.parametrize("args,words", [
    (["--raw", "--rollout"], "--raw and --rollout show different matrices"),
    (["--norms", "--rollout"], "--rollout and --norms show different matrices"),
])
def test_one_matrix_at_a_time(args, words):
    fails(run("scores", SENTENCE, *args), words, code=2)


# --- words from word pieces


def test_merge_words_sums_to_a_word_and_averages_from_it():
    from attncli.documents.merged import merge_words

    rng = np.random.default_rng(5)
    M = rng.dirichlet(np.ones(5), size=5)  # (T, T)
    groups = [[0], [1, 2], [3], [4]]
    W = merge_words(M, groups)
    np.testing.assert_allclose(W.sum(axis=1), 1, atol=1e-15)
    assert W[0, 1] == pytest.approx(M[0, 1] + M[0, 2])  # to a word: the sum over its pieces
    assert W[1, 0] == pytest.approx((M[1, 0] + M[2, 0]) / 2)  # from a word: the mean over its pieces
    assert W[1, 1] == pytest.approx((M[1, 1] + M[1, 2] + M[2, 1] + M[2, 2]) / 2)


def test_words_merge_pieces_where_the_two_tokenizers_meet(tinybert_folder, reference):
    sentence = "the earth isn't unbelievably orange"
    doc = one(run("scores", sentence, "--model", tinybert_folder, "--words", "--layer", "1", "--json"))
    assert doc["tokens"] == ["[CLS]", "the", "earth", "isn't", "unbelievably", "orange", "[SEP]"]
    assert doc["pieces"] == [["[CLS]"], ["the"], ["earth"], ["[UNK]", "'", "t"], ["un", "##believ", "##ably"],
                             ["orange"], ["[SEP]"]]
    assert doc["special"] == [True, False, False, False, False, False, True]
    assert "scores" not in doc
    pieces = one(run("scores", sentence, "--model", tinybert_folder, "--layer", "1", "--json"))
    M = np.array(pieces["weights"])  # (10, 10) pieces
    groups = [[0], [1], [2], [3, 4, 5], [6, 7, 8], [9], [10]]
    expected = np.array([[M[np.ix_(a, b)].sum(axis=1).mean() for b in groups] for a in groups])
    np.testing.assert_allclose(doc["weights"], expected, atol=1e-14)
    np.testing.assert_allclose(doc["special_share"], expected[:, [0, 6]].sum(axis=1), atol=1e-14)


def test_words_needs_a_model_and_the_weights():
    fails(run("scores", SENTENCE, "--words"), "--words merges a model's word pieces", code=2)
    fails(run("scores", SENTENCE, "--words", "--raw", "--model", "minilm"), "--words merges the weights", code=2)


def test_heads_draws_one_picture_of_every_layer_and_head(tinybert_folder, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "heads.png"
    doc = one(run("heads", SENTENCE, "--model", tinybert_folder, "--png", png, "--json"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the JSON is untouched by the picture
    assert doc == one(run("heads", SENTENCE, "--model", tinybert_folder, "--json"))


def test_compare_of_zero_hidden_states_gives_null_and_a_note(tmp_path):
    """The last layer's LayerNorm scaled to 0: every hidden state after it is the zero vector,
    so the word's cosine there is undefined, null with a note, never 0 ("fully apart")."""
    weights = tiny_weights(TINY)
    weights["bert.encoder.layer.1.output.LayerNorm.weight"][:] = 0
    weights["bert.encoder.layer.1.output.LayerNorm.bias"][:] = 0
    folder = write_model(tmp_path / "flat", weights=weights)
    sentences = ["the bank river", "an orange bank"]
    doc = one(run("compare", *sentences, "--token", "bank", "--model", folder, "--json"))
    *before, last = doc["hidden_cosine"]
    assert last == [[None, None], [None, None]]
    assert all(c is not None for layer in before for row in layer for c in row)
    assert doc["notes"] == ["the hidden states of 'bank' after layer 2 in sentences 1 and 2 are zero: their "
                            "cosines are undefined (null in JSON, a dash in a table)"]
    table = run("compare", *sentences, "--token", "bank", "--model", folder, "--format", "table", "--no-color")
    assert table.exit_code == 0
    assert re.search(r"│ layer 2 +│ +– │", table.stdout), table.stdout


def test_compare_names_the_hidden_states_of_a_quoted_word_without_a_possessive(tinybert_folder):
    result = run("compare", "I sat by the river bank", "the bank raised its rates", "--token", "bank",
                 "--model", tinybert_folder, "--format", "table", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    assert "cosine of the hidden states of 'bank' between the sentences:\n" in result.stdout
    assert "''s" not in result.stdout


EXPLAIN = ["explain", SENTENCE, "--model", "minilm", "--layer", "1", "--token", "orange"]


@pytest.fixture(scope="module")
def explained() -> dict:
    """explain's documents of MiniLM's layer 1 following "orange": head 3's, and every head's."""
    return {head: one(run(*EXPLAIN, *(["--head", "3"] if head else []), "--json")) for head in (3, None)}


def followed(text: str) -> tuple[str, list[list[str]]]:
    """The title of the panel that follows a token through every step, and its rows split
    into cells: j, the token (and "(itself)"), ω_ij, s_ij, α_ij."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if "through every step" in line)
    rows = []
    for line in lines[start + 1:]:
        cells = line.strip("│ ").split()
        if cells and cells[0].isdigit():
            rows.append(cells)
    return lines[start], rows


@pytest.mark.parametrize("width", [80, 100, 120, 200])
@pytest.mark.parametrize("head", [3, None])
def test_explain_follows_the_token_through_the_head_asked_for(explained, head, width):
    """--head 3: the token's ω, s and α in head 3, as `explain --json --head 3` holds them;
    without it, their mean over the 12 heads, said in the title; every number whole at
    any width from 80 columns."""
    doc = explained[head]
    text = run(*EXPLAIN, *(["--head", "3"] if head else []), "--format", "table",
               env={"COLUMNS": str(width)}).stdout
    assert max(map(len, text.splitlines())) <= width and "…]" in text  # a vector abridged, no number cut
    assert not re.search(r"\S…", text.replace("…]", ""))
    title, rows = followed(text)
    assert ("through every step, head 3 ─" if head else "through every step, the mean over 12 heads ─") in title
    row = doc["row"]
    # independent of the document's own `shown`: head 3's row of each step, or the mean of every head's
    expected = {key: np.array(row[key][2]) if head else np.array(row[key]).mean(axis=0)
                for key in ("scores", "scaled", "weights")}
    assert [r[0] for r in rows] == [str(j) for j in range(len(PIECES))]
    for j, cells in enumerate(rows):
        assert cells[1] == PIECES[j] and (cells[2] == "(itself)") == (j == 6)
        for cell, key in zip(cells[-3:], ("scores", "scaled", "weights"), strict=True):
            assert abs(float(cell) - expected[key][j]) <= 0.0005 + 1e-9, (j, key, cell)
    for key, values in expected.items():  # what the table shows, the JSON holds
        np.testing.assert_allclose(row["shown"][key], values, rtol=1e-12, atol=1e-12)
    if head:  # not the mean: head 3 of MiniLM's layer 1 puts its weight on the token before
        assert row["shown"]["weights"][5] > 0.99 and expected["weights"][5] != np.array(row["weights"]).mean(0)[5]


def test_explain_of_one_head_shows_that_heads_columns_grids_and_context(explained):
    doc = explained[3]
    steps = doc["steps"]
    text = run(*EXPLAIN, "--head", "3", "--format", "table", env={"COLUMNS": "80"}).stdout
    qkv = text[text.index("2. queries, keys, values of head 3"):text.index("3. raw scores")]
    lines = [line.strip("│ ") for line in qkv.splitlines()]
    assert "columns, 64 to 95 of 384" in " ".join(qkv.split())
    for name in "QKV":
        k = lines.index(name)
        assert lines[k + 1].split() == ["64", "65", "66", "67", "68", "…", "95"]
        cls = lines[k + 2].split()
        M = np.array(steps[name])
        assert cls[0] == "[CLS]" and cls[1:] == [f"{x:.3f}" for x in M[0, 64:69]] + ["…", f"{M[0, 95]:.3f}"]
    step3 = text[text.index("3. raw scores"):text.index("4. scaled")]
    step5 = text[text.index("5. weights"):text.index("6. context")]
    assert len(grids(step3, PIECES, panel=True)) == 1 and "head 1" not in text  # head 3's grid alone
    check_weights(grid(step5, PIECES, panel=True), steps["weights"][2])
    assert "6. context vectors Z = A V of head 3  (8 x 32)" in text


def test_explain_models_panel_titles_fit_80_columns(tinybert_folder):
    doc = one(run("explain", SENTENCE, "--model", tinybert_folder, "--json"))
    T, D = len(doc["tokens"]), len(doc["steps"]["Q"][0])
    lines = run("explain", SENTENCE, "--model", tinybert_folder, "--format", "table",
                env={"COLUMNS": "80"}).stdout.splitlines()
    assert max(map(len, lines)) <= 80
    tops = [line for line in lines if line.startswith("╭")]
    assert len(tops) == 6 and all(line.endswith("─╮") for line in tops)  # no title cut at the corner
    n = next(i for i, line in enumerate(lines) if "2. queries, keys, values" in line)
    assert re.fullmatch(rf"╭─+ 2\. queries, keys, values  \({T} x {D} each\) ─+╮", lines[n])
    assert lines[n + 1].split("│")[1].strip() == \
        f"Q = X W_Q + b_Q, K = X W_K + b_K, V = X W_V + b_V, layer {doc['layer']}'s own"
