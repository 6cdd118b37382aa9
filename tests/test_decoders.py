"""A decoder through every command that takes --model, on tests/data/models/tiny-gpt2: each
number a document carries is the reference's (what transformers + torch computed with
it, tiny-gpt2.npz), or the forward pass's where the reference does not hold it; the
causal mask in every view; --mask and --predict, taken or refused."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
from clirunner import fails, ok, one, run  # noqa: E402

from attncli import attention, models  # noqa: E402
from attncli.documents.merged import merge_words, word_groups  # noqa: E402
from attncli.models import gpt2  # noqa: E402
from attncli.models.encoder import mask_keys  # noqa: E402

TINY = Path(__file__).parent / "data" / "models" / "tiny-gpt2"
with np.load(TINY.with_suffix(".npz")) as _data:
    REF = {key: _data[key] for key in _data.files}
SENTENCES = [str(s) for s in REF["sentences"]]
EARTH, RIVER, RATES, WORDS = range(4)  # the reference's sentences, by their number
ATOL = 1e-5


@pytest.fixture(scope="module")
def model():
    return models.load_model(str(TINY))


def lower_triangular_zero(M) -> bool:
    M = np.asarray(M)
    return bool((M[..., np.triu(np.ones(M.shape[-2:], dtype=bool), k=1)] == 0.0).all())


@pytest.mark.parametrize("k", range(len(SENTENCES)))
@pytest.mark.parametrize("layer,head", [(None, None), (1, None), (1, 3), (2, 2)])
def test_scores_is_the_references_attention(model, k, layer, head):
    args = [*(["--layer", layer] if layer else []), *(["--head", head] if head else [])]
    doc = one(run("scores", SENTENCES[k], "--model", TINY, *args, "--json"))
    alphas = REF[f"attentions_{k}"][(layer or 2) - 1]  # (H, T, T)
    T = alphas.shape[-1]
    assert doc["tokens"] == model.encode(SENTENCES[k]).pieces and len(doc["tokens"]) == T
    assert doc["offsets"] == REF[f"offsets_{k}"].tolist() and doc["special"] == [False] * T
    assert doc["mask"] == "causal" and "window" not in doc and (doc["layer"], doc["head"]) == (layer or 2, head)
    shown = alphas.mean(axis=0) if head is None else alphas[head - 1]
    np.testing.assert_allclose(doc["weights"], shown, atol=ATOL)
    for h, entry in enumerate(doc["heads"]):
        np.testing.assert_allclose(entry["weights"], alphas[h], atol=ATOL)
        assert lower_triangular_zero(entry["weights"]) and lower_triangular_zero(entry["scores"]) is False
    for i, top in enumerate(doc["top"]):  # every earlier piece ranked, no later one
        assert [t["index"] for t in top] == sorted(range(i), key=lambda j: -doc["weights"][i][j])[:3]
    assert doc["scale"] == 1 / math.sqrt(8)


def test_mask_causal_is_the_decoders_own_and_changes_nothing():
    plain = run("scores", SENTENCES[RIVER], "--model", TINY, "--json")
    causal = run("scores", SENTENCES[RIVER], "--model", TINY, "--mask", "causal", "--json")
    assert causal.exit_code == plain.exit_code == 0 and causal.stdout == plain.stdout


@pytest.mark.parametrize("mask", ["self", "none"])
def test_another_mask_is_refused_naming_the_models(mask):
    fails(run("scores", SENTENCES[EARTH], "--model", TINY, "--mask", mask),
          f"--mask {mask}: tiny-gpt2 is a decoder, whose attention is causal (each piece attends to itself and the "
          "pieces before it), as it was trained; leave out --mask", code=2)


def test_an_encoder_refuses_mask_and_predict(tmp_path):
    from tinybert import write_model

    encoder = write_model(tmp_path / "tiny")
    fails(run("scores", "the earth", "--model", encoder, "--mask", "causal"),
          "--model runs the model's own attention and word pieces; leave out --mask", code=2)
    fails(run("context", "the earth", "--token", "earth", "--model", encoder, "--predict", "2"),
          "--predict gives the next pieces a decoder predicts, and tiny is an encoder (bert)", code=2)
    fails(run("scores", "the earth", "--predict", "2"),
          "--predict K gives the next pieces a decoder predicts; it needs --model NAME|DIR", code=2)


def softmax_of(logits) -> np.ndarray:
    z = logits.astype(np.float64) - logits.max()
    return np.exp(z) / np.exp(z).sum()


@pytest.mark.parametrize("k", range(len(SENTENCES)))
def test_predict_is_the_references_next_pieces(model, k):
    logits = REF[f"logits_{k}"][-1]  # (V,): after the sentence's last piece
    expected = np.argsort(-logits, kind="stable")[:5]
    doc = one(run("scores", SENTENCES[k], "--model", TINY, "--predict", "5", "--json"))
    assert [p["id"] for p in doc["predict"]] == expected.tolist()
    assert [p["token"] for p in doc["predict"]] == [model.piece(int(i)) for i in expected]
    p = softmax_of(logits)
    np.testing.assert_allclose([e["probability"] for e in doc["predict"]], p[expected], atol=1e-6)
    np.testing.assert_allclose([e["logprob"] for e in doc["predict"]], np.log(p[expected]), atol=1e-5)
    assert all(a["probability"] >= b["probability"] for a, b in zip(doc["predict"], doc["predict"][1:]))
    same = one(run("context", SENTENCES[k], "--index", "0", "--model", TINY, "--predict", "5", "--json"))
    assert same["predict"] == doc["predict"]


def test_predict_in_the_table_and_past_the_vocabulary():
    out = run("scores", SENTENCES[EARTH], "--model", TINY, "--predict", "3", "--format", "table", "--no-color")
    assert out.exit_code == 0
    p = softmax_of(REF[f"logits_{EARTH}"][-1])
    top = np.argsort(-p, kind="stable")[:3]
    lines = out.stdout.splitlines()
    at = lines.index("next piece   id  probability   log p")
    assert "the model's 3 likeliest next pieces of 501, after 'Ġorange'" in " ".join(lines[at - 3:at])
    for line, i in zip(lines[at + 1:at + 4], top):
        assert line.split()[1:] == [f"{i:,}", f"{p[i]:.3f}", f"{math.log(p[i]):.3f}"]
    every = one(run("scores", SENTENCES[EARTH], "--model", TINY, "--predict", "100000", "--json"))["predict"]
    assert len(every) == 501 and sum(e["probability"] for e in every) == pytest.approx(1.0, abs=1e-12)
    assert all(math.isfinite(e["logprob"]) for e in every)


def test_the_table_shows_the_masked_cells():
    out = run("scores", SENTENCES[EARTH], "--model", TINY, "--format", "table", "--no-color")
    lines = out.stdout.splitlines()
    grid = lines[lines.index(next(l for l in lines if l.startswith("weights α_ij"))) + 2:][:6]
    assert [line.count("·") for line in grid] == [5, 4, 3, 2, 1, 0]
    assert "mask causal: each piece attends to itself and the pieces before it" in " ".join(lines[:4])
    assert "markers" not in " ".join(lines[:4])  # GPT-2 puts no [CLS] or [SEP] around a sentence
    assert "own and masked positions left out" in out.stdout
    assert "The → (no other token)" in lines


def test_rollout_and_norms(model):
    k = RIVER
    doc = one(run("scores", SENTENCES[k], "--model", TINY, "--rollout", "--json"))
    np.testing.assert_allclose(doc["rollout"], attention.rollout(REF[f"attentions_{k}"].mean(axis=1))[-1], atol=ATOL)
    assert lower_triangular_zero(doc["rollout"])
    doc = one(run("scores", SENTENCES[k], "--model", TINY, "--norms", "--layer", "1", "--json"))
    run_ = gpt2.forward(REF[f"ids_{k}"], model.weights, model.config, keep=(0,))
    F = gpt2.passed_on(run_.steps[0]["V"], model.weights, 0, model.config)  # (H, T, D)
    alphas = REF[f"attentions_{k}"][0].astype(np.float64)
    np.testing.assert_allclose(doc["norms"], attention.summed_norms(alphas, F), atol=1e-4)
    for h, head in enumerate(doc["heads"]):
        np.testing.assert_allclose(head["norms"], attention.weighted_norms(alphas, F)[h], atol=1e-4)


def test_words_merge_the_references_pieces(model):
    k = WORDS
    doc = one(run("scores", SENTENCES[k], "--model", TINY, "--words", "--json"))
    groups, _ = word_groups(SENTENCES[k], model.encode(SENTENCES[k]))
    assert doc["tokens"] == ["Attention", "did", "n't", "tokenize", "unbelievably", "well"]
    assert doc["pieces"][4] == ["Ġ", "un", "be", "lie", "vab", "ly"]
    np.testing.assert_allclose(doc["weights"], merge_words(REF[f"attentions_{k}"][1].mean(axis=0), groups), atol=ATOL)
    assert doc["mask"] == "causal" and lower_triangular_zero(doc["weights"])
    assert doc["special_share"] == [0.0] * 6
    for i, top in enumerate(doc["top"]):
        assert all(t["index"] < i for t in top)


def test_context_follows_a_piece_by_its_word():
    k = RATES
    doc = one(run("context", SENTENCES[k], "--token", "bank", "--model", TINY, "--json"))
    assert (doc["token"], doc["index"]) == ("Ġbank", 1)
    np.testing.assert_allclose(doc["weights"], REF[f"attentions_{k}"][1].mean(axis=0)[1], atol=ATOL)
    assert [t["index"] for t in doc["top"]] == [0] and doc["neighbors"] == doc["token_neighbors"] == []
    fails(run("context", SENTENCES[k], "--token", "bank", "--index", "0", "--model", TINY),
          "the token at --index 0 is 'The', not 'bank'; 'bank' is at --index 1")


def test_compare_gives_the_references_hidden_states():
    doc = one(run("compare", SENTENCES[RIVER], SENTENCES[RATES], "--token", "bank", "--model", TINY, "--json"))
    assert [s["index"] for s in doc["sentences"]] == [4, 1]
    a, b = REF[f"hidden_{RIVER}"][:, 4].astype(np.float64), REF[f"hidden_{RATES}"][:, 1].astype(np.float64)
    cosines = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    np.testing.assert_allclose([M[0][1] for M in doc["hidden_cosine"]], cosines, atol=1e-5)
    assert doc["static"]["vectors"] == "glove.6B.50d.100k"


def test_heads_shows_every_head_and_marks_the_sink():
    k = EARTH
    alphas = REF[f"attentions_{k}"]  # (L, H, T, T)
    doc = one(run("heads", SENTENCES[k], "--model", TINY, "--json"))
    np.testing.assert_allclose(doc["weights"], alphas, atol=ATOL)
    first = alphas[..., 0].mean(axis=-1)  # (L, H): the mean over rows of the weight on the first piece
    np.testing.assert_allclose(doc["first_share"], first, atol=ATOL)
    assert doc["special_share"] == [[0.0] * 4] * 2 and doc["mask"] == "causal"
    table = run("heads", SENTENCES[k], "--model", TINY, "--format", "table", "--no-color").stdout
    marked = [f"h{h + 1}" + ("*" if first[l, h] > 0.5 else "") for l in range(2) for h in range(4)]
    headings = [word for line in table.splitlines() if line.lstrip().startswith("h1") for word in line.split()]
    assert headings == marked and any(m.endswith("*") for m in marked)
    assert "* more than half on the first position (the attention sink)" in " ".join(table.split())


def test_explain_gives_the_layers_steps(model):
    k = EARTH
    doc = one(run("explain", SENTENCES[k], "--model", TINY, "--layer", "1", "--token", "orange", "--json"))
    steps, ref = doc["steps"], gpt2.forward(REF[f"ids_{k}"], model.weights, model.config, keep=(0,))
    np.testing.assert_allclose(steps["X"], REF[f"hidden_{k}"][0], atol=ATOL)  # the layer's input
    for key in ("Q", "K", "V", "scores", "context"):
        np.testing.assert_allclose(steps[key], ref.steps[0][key], atol=1e-10)
    np.testing.assert_allclose(steps["weights"], REF[f"attentions_{k}"][0], atol=ATOL)
    np.testing.assert_allclose(steps["scaled"], np.array(steps["scores"]) / math.sqrt(8), atol=1e-12)
    assert doc["index"] == 5 and doc["row"]["weights"] == [h[5] for h in steps["weights"]]
    table = run("explain", SENTENCES[k], "--model", TINY, "--layer", "1", "--format", "table", "--no-color").stdout
    assert "N = X normed" in table and "causal mask (· masked)" in table


def test_batch_gives_each_lines_attention(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    docs = ok(run("batch", corpus, "--model", TINY, "--layer", "1"))
    assert [d["line"] for d in docs] == [1, 2, 3, 4, 5]
    for k, doc in enumerate(docs):
        np.testing.assert_allclose(doc["weights"], REF[f"attentions_{k}"][0].mean(axis=0), atol=ATOL)
        assert doc["mask"] == "causal"
    jobs = ok(run("batch", corpus, "--model", TINY, "--layer", "1", "--jobs", "2"))
    assert jobs == docs


def test_stats_gives_the_share_on_the_first_piece(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    records = ok(run("stats", corpus, "--model", TINY, "--no-shuffled", "--json"))
    alphas = [REF[f"attentions_{k}"] for k in range(len(SENTENCES))]
    rows = sum(a.shape[-1] for a in alphas)
    first = sum(a[..., 0].sum(axis=-1) for a in alphas) / rows  # (L, H)
    previous = sum(np.diagonal(a, offset=-1, axis1=-2, axis2=-1).sum(axis=-1) for a in alphas) / (rows - len(alphas))
    uniform = sum(sum(1 / (i + 1) for i in range(a.shape[-1])) for a in alphas) / rows
    assert len(records) == 8 and records[0]["rows"] == rows
    for r in records:
        l, h = r["layer"] - 1, r["head"] - 1
        assert r["first"] == pytest.approx(first[l, h], abs=ATOL)
        assert r["previous"] == pytest.approx(previous[l, h], abs=ATOL)
        assert r["next"] is None and r["rows_next"] == 0  # no piece may attend to the next
        assert r["cls"] == r["sep"] == 0.0
        assert r["baselines"]["uniform"]["first"] == pytest.approx(uniform, rel=1e-12)
    table = run("stats", corpus, "--model", TINY, "--no-shuffled", "--format", "table", "--no-color").stdout
    headings = ["head", "entr", "dist", "self", "prev", "first", "punct", "prevT", "dupT", "indT"]  # no next, [CLS], [SEP]
    assert table.splitlines()[1].split() == headings


def test_explore_shows_the_decoders_mask(model):
    pytest.importorskip("textual")
    from test_explore import run_app

    from attncli import explore
    from attncli.models.encoder import Trained

    app = run_app(explore.Explorer(Trained(model, 2), explore.State(SENTENCES[EARTH], layer=2)), ["m"])
    assert app.news == "a decoder's mask is its own: causal, as it was trained"
    assert app.doc["mask"] == "causal" and app.state.opts.mask == "none"
    np.testing.assert_allclose(app.doc["weights"], REF[f"attentions_{EARTH}"][1].mean(axis=0), atol=ATOL)


def test_a_window_is_named_and_drawn_from_the_document():
    """A decoder whose mask keeps a row to W pieces (Mistral's sliding window) is named
    causal+window with W; one of another shape is refused."""
    from attncli.views.common import masked_cells

    T, W = 7, 3
    banded = attention.causal_mask(T) | attention.window_mask(T, W - 1)
    keys = mask_keys(banded)
    assert keys == {"mask": "causal+window", "window": 3}
    np.testing.assert_array_equal(masked_cells(keys, T), banded)
    np.testing.assert_array_equal(masked_cells(keys, T, window=False), attention.causal_mask(T))
    assert mask_keys(attention.causal_mask(T)) == {"mask": "causal"}
    assert mask_keys(banded[:W, :W]) == {"mask": "causal"}  # a sentence within the window: causal alone
    with pytest.raises(Exception, match="neither causal nor causal within a window"):
        mask_keys(np.eye(T, dtype=bool))


def test_fields_keep_predict():
    doc = one(run("scores", SENTENCES[EARTH], "--model", TINY, "--predict", "2", "--fields", "tokens,mask,predict",
                  "--json"))
    assert list(doc) == ["tokens", "mask", "predict"] and len(doc["predict"]) == 2


def test_a_windowed_documents_grid_and_header():
    """scores' view of a document whose mask is causal+window (W = 3): a row's cells beyond
    its window are masked too, and the header says how many pieces before it a piece sees."""
    import io

    from rich.console import Console

    from attncli.views.sentence import scores_view

    doc = one(run("scores", SENTENCES[EARTH], "--model", TINY, "--json"))
    doc.update(mask="causal+window", window=3)
    screen = Console(file=io.StringIO(), width=80, color_system=None)
    screen.print(scores_view(doc, width=80))
    lines = screen.file.getvalue().splitlines()
    grid = lines[lines.index(next(l for l in lines if l.startswith("weights α_ij"))) + 2:][:6]
    assert [line.count("·") for line in grid] == [5, 4, 3, 3, 3, 3]
    assert "mask causal+window: each piece attends to itself and the 2 pieces before it" in " ".join(lines[:4])
