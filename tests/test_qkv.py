"""Query, key and value projections, heads, the causal mask, `explain` and `qkv init`.

Every number is checked against an independent computation: explicit loops over Python
floats (never attncli's own functions), random draws made here from numpy's PCG64 the way
the math guide documents them, and hand-computed cases on tiny word2vec files written here.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from clirunner import fails, one, run
from grids import grid
from helpers import SENTENCE, SENTENCE_TOKENS, close, fsum_dot, loop_softmax, matrix_of, save_npz, to_lists
from attncli import attention, load_vectors
from attncli import encoder
from attncli.encoder import Options
from attncli.learning import projections

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

E = math.e


# --------------------------------------------------------------------------- independent implementations


def loop_project(X, W, b=None) -> list[list[float]]:
    """X W (+ b) by loops: row t, column c = sum_a X[t][a] W[a][c] (+ b[c])."""
    X, W = to_lists(X), to_lists(W)
    d, d_k = len(W), len(W[0])
    return [[math.fsum(X[t][a] * W[a][c] for a in range(d)) + (float(b[c]) if b is not None else 0.0)
             for c in range(d_k)] for t in range(len(X))]


def loop_attention(Q, K, V, H=1, scale=None, temperature=1.0, causal=False):
    """Multi-head attention by loops over Python floats: head h uses columns h*d_k/H ..
    (h+1)*d_k/H - 1 of Q, K and V; the heads' context vectors are written back into those
    columns. Returns scores (H, T, T), weights (H, T, T), context (T, d_k) as numpy arrays."""
    Q, K, V = to_lists(Q), to_lists(K), to_lists(V)
    T, d_k = len(Q), len(Q[0])
    dh = d_k // H
    if scale is None:
        scale = 1.0 / math.sqrt(dh)
    omegas, alphas = [], []
    Z = [[0.0] * d_k for _ in range(T)]
    for h in range(H):
        cols = range(h * dh, (h + 1) * dh)
        omega = [[math.fsum(Q[i][c] * K[j][c] for c in cols) for j in range(T)] for i in range(T)]
        alpha = [loop_softmax([omega[i][j] * scale / temperature for j in range(T)],
                              [not causal or j <= i for j in range(T)]) for i in range(T)]
        for i in range(T):
            for c in cols:
                Z[i][c] = math.fsum(alpha[i][j] * V[j][c] for j in range(T))
        omegas.append(omega)
        alphas.append(alpha)
    return np.array(omegas), np.array(alphas), np.array(Z)


def draw_projections(d: int, d_k: int, seed: int):
    """W_query, W_key, W_value as the math guide says they are drawn: uniform on [-0.05, 0.05],
    numpy's PCG64 seeded by the seed, in that order."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(-0.05, 0.05, size=(d, d_k)) for _ in range(3)]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def vectors4(vectors4_path):
    """VECTORS4 as attncli loads them."""
    return load_vectors(vectors4_path)


@pytest.fixture(scope="module")
def glove_proj(tmp_path_factory) -> Path:
    """`attncli qkv init --d-k 4 --seed 0` for the bundled vectors (d = 50)."""
    path = tmp_path_factory.mktemp("proj") / "proj.npz"
    result = run("qkv", "init", "--d-k", "4", "--seed", "0", "-o", path, "--json")
    assert result.exit_code == 0, result.stderr
    return path


def hand_W():
    """The 2 x 2 projections of the hand-computed case (rows: input dimension)."""
    return {
        "W_query": np.array([[1.0, 1.0], [0.0, 1.0]]),
        "W_key": np.array([[1.0, 0.0], [0.0, 2.0]]),
        "W_value": np.array([[2.0, 0.0], [0.0, 3.0]]),
    }


# =========================================================================== 1. the steps, by loops


def test_project_against_loops():
    rng = np.random.default_rng(1)
    X, W, b = rng.normal(size=(4, 3)), rng.normal(size=(3, 5)), rng.normal(size=5)
    close(attention.project(X, W), loop_project(X, W))
    close(attention.project(X, W, b), loop_project(X, W, b))
    assert attention.project(X, W).shape == (4, 5)


def test_project_by_hand():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    W = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert attention.project(X, W).tolist() == [[1.0, 2.0], [3.0, 4.0], [4.0, 6.0]]
    assert attention.project(X, W, np.array([10.0, 0.5])).tolist() == [[11.0, 2.5], [13.0, 4.5], [14.0, 6.5]]


def test_scores_of_distinct_queries_and_keys():
    Q = np.array([[1.0, 1.0], [0.0, 1.0]])
    K = np.array([[1.0, 0.0], [0.0, 2.0]])
    # q0.k0 = 1, q0.k1 = 2, q1.k0 = 0, q1.k1 = 2: not symmetric once Q != K
    assert attention.scores(Q, K).tolist() == [[1.0, 2.0], [0.0, 2.0]]
    rng = np.random.default_rng(2)
    Q, K = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    close(attention.scores(Q, K), [[fsum_dot(q, k) for k in K] for q in Q])


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("scale,temperature", [(1.0, 1.0), (0.3, 1.0), (1.0, 0.4), (0.7, 2.5), (-0.5, 1.0)])
@pytest.mark.parametrize("causal", [False, True])
def test_weights_against_loops(seed, scale, temperature, causal):
    rng = np.random.default_rng(seed)
    T = int(rng.integers(1, 7))
    omega = rng.normal(scale=3, size=(T, T))
    mask = attention.causal_mask(T) if causal else None
    got = attention.weights(omega, scale, temperature, mask)
    want = [loop_softmax([float(omega[i, j]) * scale / temperature for j in range(T)],
                         [not causal or j <= i for j in range(T)]) for i in range(T)]
    close(got, want, rtol=1e-12, atol=1e-15)


def test_context_of_distinct_values_against_loops():
    rng = np.random.default_rng(3)
    alpha = attention.weights(rng.normal(size=(4, 4)), 1.0)
    V = rng.normal(size=(4, 3))
    want = [[math.fsum(float(alpha[i, j]) * float(V[j, c]) for j in range(4)) for c in range(3)] for i in range(4)]
    close(attention.context(alpha, V), want)


def test_split_heads_columns_and_merge_inverts_it():
    T, d_k = 3, 6
    M = np.arange(T * d_k, dtype=float).reshape(T, d_k)
    for H in (1, 2, 3, 6):
        S = attention.split_heads(M, H)
        assert S.shape == (H, T, d_k // H)
        for h in range(H):
            for t in range(T):
                assert S[h, t].tolist() == [M[t, c] for c in range(h * d_k // H, (h + 1) * d_k // H)]
        assert attention.merge_heads(S).tolist() == M.tolist()
    # merge then split: the other way round too
    Z = np.random.default_rng(4).normal(size=(2, 3, 4))
    assert attention.split_heads(attention.merge_heads(Z), 2).tolist() == Z.tolist()


@pytest.mark.parametrize("H", [1, 2, 4])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seed", [0, 5])
def test_multihead_end_to_end_against_loops(vectors4, H, causal, seed):
    sentence = "the cat sat on the mat"
    opts = Options(qkv="random", d_k=4, seed=seed, heads=H, mask="causal" if causal else "none")
    att = encoder.attend(sentence, vectors4, opts)
    X = matrix_of(vectors4, sentence.split())
    Wq, Wk, Wv = draw_projections(4, 4, seed)
    Q, K, V = (loop_project(X, W) for W in (Wq, Wk, Wv))
    omega, alpha, Z = loop_attention(Q, K, V, H, causal=causal)
    assert att.tokens == sentence.split()
    close(att.Q, Q)
    close(att.K, K)
    close(att.V, V)
    assert att.scores.shape == att.weights.shape == (H, 6, 6)
    close(att.scores, omega)
    close(att.weights, alpha, atol=1e-15)
    close(att.context, Z)
    assert att.scale == pytest.approx(1 / math.sqrt(4 / H), rel=1e-15)


def test_multihead_end_to_end_with_d_k_unlike_d(vectors4):
    """d_k = 6 from d = 4: three heads of two columns each."""
    att = encoder.attend("cat dog sat mat", vectors4, Options(qkv="random", d_k=6, seed=2, heads=3, scale=0.9,
                                                            temperature=1.3))
    X = matrix_of(vectors4, ["cat", "dog", "sat", "mat"])
    Q, K, V = (loop_project(X, W) for W in draw_projections(4, 6, 2))
    omega, alpha, Z = loop_attention(Q, K, V, 3, scale=0.9, temperature=1.3)
    close(att.scores, omega)
    close(att.weights, alpha, atol=1e-15)
    close(att.context, Z)
    assert att.context.shape == (4, 6)


def test_identity_heads_against_loops(vectors4):
    """No projections, two heads: Q = K = V = X split into columns 0-1 and 2-3."""
    att = encoder.attend("cat dog sat on", vectors4, Options(heads=2))
    X = matrix_of(vectors4, ["cat", "dog", "sat", "on"])
    omega, alpha, Z = loop_attention(X, X, X, 2)
    close(att.scores, omega)
    close(att.weights, alpha, atol=1e-15)
    close(att.context, Z)


def test_hand_computed_two_tokens_with_2x2_projections(tmp_path, vectors2_path):
    """a = (1, 0), b = (0, 1), so Q, K, V are the rows of W_Q, W_K, W_V themselves:
    q_a = (1, 1), q_b = (0, 1); k_a = (1, 0), k_b = (0, 2); v_a = (2, 0), v_b = (0, 3).
    Scores: q_a.k_a = 1, q_a.k_b = 2, q_b.k_a = 0, q_b.k_b = 2."""
    path = save_npz(tmp_path / "hand.npz", **hand_W())
    doc = one(run("scores", "a b", "--vectors", vectors2_path, "--qkv", path, "--scale", "1", "--json"))
    assert doc["qkv"] == {"kind": "file", "d_k": 2, "heads": 1, "path": str(path)}
    assert doc["scores"] == [[1.0, 2.0], [0.0, 2.0]]
    # row a: softmax(1, 2) = (1, e) / (1 + e); row b: softmax(0, 2) = (1, e^2) / (1 + e^2)
    wa = [1 / (1 + E), E / (1 + E)]
    wb = [1 / (1 + E**2), E**2 / (1 + E**2)]
    close(doc["weights"], [wa, wb], rtol=1e-14)
    # z_a = wa0 (2, 0) + wa1 (0, 3); z_b = wb0 (2, 0) + wb1 (0, 3)
    ctx = one(run("context", "a b", "--vectors", vectors2_path, "--qkv", path, "--scale", "1", "--all", "--json"))
    close(ctx["contexts"], [[2 / (1 + E), 3 * E / (1 + E)], [2 / (1 + E**2), 3 * E**2 / (1 + E**2)]], rtol=1e-14)
    # the default scale 1/sqrt(2): row a is softmax(1/sqrt 2, 2/sqrt 2)
    doc = one(run("scores", "a b", "--vectors", vectors2_path, "--qkv", path, "--json"))
    assert doc["scale"] == pytest.approx(1 / math.sqrt(2), rel=1e-15)
    r = math.exp(1 / math.sqrt(2))
    close(doc["weights"][0], [1 / (1 + r), r / (1 + r)], rtol=1e-14)
    # two heads of one column each: head 0 sees column 0 only, head 1 column 1 only, scale 1
    doc = one(run("scores", "a b", "--vectors", vectors2_path, "--qkv", path, "--heads", "2", "--json"))
    assert doc["scale"] == 1.0
    # head 0: q = (1, 0), k = (1, 0): scores [[1, 0], [0, 0]]; head 1: q = (1, 1), k = (0, 2): [[0, 2], [0, 2]]
    assert doc["heads"][0]["scores"] == [[1.0, 0.0], [0.0, 0.0]]
    assert doc["heads"][1]["scores"] == [[0.0, 2.0], [0.0, 2.0]]
    h0 = [[E / (1 + E), 1 / (1 + E)], [0.5, 0.5]]
    h1 = [[1 / (1 + E**2), E**2 / (1 + E**2)]] * 2
    close(doc["heads"][0]["weights"], h0, rtol=1e-14)
    close(doc["heads"][1]["weights"], h1, rtol=1e-14)
    close(doc["weights"], (np.array(h0) + np.array(h1)) / 2, rtol=1e-14)
    assert doc["scores"] == [[0.5, 1.0], [0.0, 1.0]]


# =========================================================================== 2. properties


@pytest.mark.parametrize("perm", [[4, 2, 0, 1, 3], [1, 0, 2, 3, 4], [4, 3, 2, 1, 0]])
@pytest.mark.parametrize("H", [1, 2])
def test_permuting_tokens_permutes_everything(vectors4, perm, H):
    words = ["cat", "dog", "sat", "mat", "on"]
    opts = Options(qkv="random", d_k=4, seed=7, heads=H)
    a = encoder.attend(" ".join(words), vectors4, opts)
    b = encoder.attend(" ".join(words[p] for p in perm), vectors4, opts)
    p = np.array(perm)
    close(b.scores, a.scores[:, p][:, :, p])
    close(b.weights, a.weights[:, p][:, :, p], atol=1e-15)
    close(b.context, a.context[p])


def test_causal_rows_sum_to_one_with_exact_zeros_above_the_diagonal(vectors4):
    opts = Options(qkv="random", d_k=4, seed=1, heads=2, mask="causal")
    att = encoder.attend("the cat sat on the mat", vectors4, opts)
    T = 6
    for alpha in att.weights:
        for i in range(T):
            assert abs(math.fsum(alpha[i]) - 1.0) <= 1e-12
            for j in range(T):
                if j > i:
                    assert alpha[i, j] == 0.0 and not math.copysign(1, alpha[i, j]) < 0
                else:
                    assert alpha[i, j] > 0.0
    assert att.weights[:, 0, 0].tolist() == [1.0, 1.0]  # the first token sees only itself
    mask = attention.causal_mask(4)
    assert mask.tolist() == [[j > i for j in range(4)] for i in range(4)]


def test_heads_1_is_no_heads(vectors4_path, vectors4):
    base = ["scores", "the cat sat on", "--vectors", vectors4_path, "--qkv", "random", "--seed", "4", "--json"]
    without = run(*base)
    with_one = run(*base, "--heads", "1")
    assert with_one.stdout == without.stdout
    doc = one(with_one)
    X = matrix_of(vectors4, ["the", "cat", "sat", "on"])
    Q, K, V = (loop_project(X, W) for W in draw_projections(4, 4, 4))
    omega, alpha, _ = loop_attention(Q, K, V, 1)
    assert len(doc["heads"]) == 1
    close(doc["scores"], omega[0])
    close(doc["weights"], alpha[0], atol=1e-15)
    assert doc["heads"][0]["weights"] == doc["weights"] and doc["heads"][0]["scores"] == doc["scores"]
    assert doc["heads"][0]["top"] == doc["top"]


SINGLE_MODES = [
    [],
    ["--qkv", "random"],
    ["--qkv", "random", "--seed", "9", "--d-k", "7"],
    ["--qkv", "FILE"],
    ["--heads", "2"],
    ["--heads", "4"],
    ["--qkv", "random", "--heads", "2"],
    ["--qkv", "random", "--d-k", "6", "--heads", "3"],
    ["--qkv", "FILE", "--heads", "4"],
    ["--mask", "causal"],
    ["--qkv", "random", "--heads", "4", "--mask", "causal"],
    ["--qkv", "FILE", "--heads", "2", "--mask", "causal", "--scale", "1000", "--temperature", "0.01"],
]


@pytest.mark.parametrize("mode", SINGLE_MODES, ids=lambda m: " ".join(m) or "identity")
def test_single_token_gives_one(tmp_path, vectors4_path, mode):
    if "FILE" in mode:
        path = tmp_path / "p.npz"
        assert run("qkv", "init", "--vectors", vectors4_path, "--d-k", "4", "-o", path, "--json").exit_code == 0
        mode = [str(path) if m == "FILE" else m for m in mode]
    doc = one(run("scores", "mat", "--vectors", vectors4_path, *mode, "--json"))
    assert doc["weights"] == [[1.0]] and doc["top"] == [[]]
    assert [h["weights"] for h in doc["heads"]] == [[[1.0]]] * doc["qkv"]["heads"]
    ctx = one(run("context", "mat", "--token", "mat", "--vectors", vectors4_path, *mode, "--json"))
    assert ctx["weights"] == [1.0]
    ex = one(run("explain", "mat", "--vectors", vectors4_path, *mode, "--json"))
    assert ex["steps"]["weights"] == [[[1.0]]] * doc["qkv"]["heads"]
    assert ex["steps"]["context"] == ex["steps"]["V"]  # weight 1 on itself: z = v


@pytest.mark.parametrize("args,d_k,H", [
    ([], 4, 1), (["--heads", "2"], 4, 2), (["--heads", "4"], 4, 4),
    (["--qkv", "random", "--d-k", "6", "--heads", "3"], 6, 3), (["--qkv", "random", "--d-k", "9"], 9, 1),
    (["--qkv", "random", "--d-k", "8", "--heads", "2"], 8, 2),
])
def test_default_scale_is_one_over_sqrt_d_k_per_head(vectors4_path, args, d_k, H):
    doc = one(run("scores", "cat dog sat", "--vectors", vectors4_path, *args, "--json"))
    assert doc["qkv"]["d_k"] == d_k and doc["qkv"]["heads"] == H
    assert doc["scale"] == pytest.approx(1 / math.sqrt(d_k / H), rel=1e-15)
    # and it is the scale the weights were computed with
    for head in doc["heads"]:
        want = [loop_softmax([s * doc["scale"] for s in row], [True] * 3) for row in head["scores"]]
        close(head["weights"], want, atol=1e-15)
    # --scale overrides it
    given = one(run("scores", "cat dog sat", "--vectors", vectors4_path, *args, "--scale", "0.25", "--json"))
    assert given["scale"] == 0.25


@pytest.mark.parametrize("extra", [[], ["--include-self"], ["--heads", "2"], ["--qkv", "random", "--heads", "4"]])
def test_top_never_includes_masked_positions(vectors4_path, extra):
    sentence = "the cat sat on the mat"
    doc = one(run("scores", sentence, "--vectors", vectors4_path, "--mask", "causal", "--top-k", "10", *extra,
                  "--json"))
    include_self = "--include-self" in extra
    for tops in [doc["top"]] + [h["top"] for h in doc["heads"]]:
        for i, top in enumerate(tops):
            indices = [t["index"] for t in top]
            assert all(j <= i for j in indices), (i, indices)
            assert sorted(indices) == list(range(i + 1 if include_self else i))
    for i in range(6):
        ctx = one(run("context", sentence, "--index", i, "--vectors", vectors4_path, "--mask", "causal",
                      "--top-k", "10", *extra, "--json"))
        for top in [ctx["top"]] + [h["top"] for h in ctx["heads"]]:
            assert all(t["index"] <= i for t in top)
            assert len(top) == (i + 1 if include_self else i)
        assert all(w == 0.0 for w in ctx["weights"][i + 1:])


# =========================================================================== 3. init_projections and --qkv random


def test_init_projections_same_seed_same_arrays():
    a, b = attention.init_projections(7, 3, 11), attention.init_projections(7, 3, 11)
    assert list(a) == list(b) == ["W_query", "W_key", "W_value"]
    for name in a:
        assert np.array_equal(a[name], b[name])
    c = attention.init_projections(7, 3, 12)
    assert not np.array_equal(a["W_query"], c["W_query"])


def test_init_projections_range_shapes_and_order():
    W = attention.init_projections(50, 16, 0)
    want = draw_projections(50, 16, 0)
    for name, w in zip(["W_query", "W_key", "W_value"], want):
        assert W[name].shape == (50, 16)
        assert W[name].dtype == np.float64
        assert np.all(W[name] >= -0.05) and np.all(W[name] <= 0.05)
        assert np.array_equal(W[name], w)  # drawn in that order from PCG64
    # not degenerate: the three differ and fill the range
    assert not np.array_equal(W["W_query"], W["W_key"]) and not np.array_equal(W["W_key"], W["W_value"])
    everything = np.concatenate([w.ravel() for w in W.values()])
    assert everything.min() < -0.045 and everything.max() > 0.045


def test_qkv_random_json_is_reproducible_and_seeded():
    args = ["scores", SENTENCE, "--qkv", "random", "--seed", "3", "--json"]
    first = run(*args)
    projections._random.cache_clear()  # the second run draws afresh, as a new process would
    second = run(*args)
    assert first.exit_code == second.exit_code == 0
    assert first.stdout.encode() == second.stdout.encode()
    other = run("scores", SENTENCE, "--qkv", "random", "--seed", "4", "--json")
    a, b = one(first), one(other)
    assert a["qkv"] == {"kind": "random", "d_k": 50, "heads": 1, "seed": 3}
    assert b["qkv"]["seed"] == 4
    assert a["scores"] != b["scores"] and a["weights"] != b["weights"]


def test_qkv_random_numbers_on_real_vectors(glove):
    doc = one(run("scores", SENTENCE, "--qkv", "random", "--seed", "3", "--d-k", "8", "--heads", "2", "--json"))
    X = matrix_of(glove, SENTENCE_TOKENS)
    Q, K, V = (loop_project(X, W) for W in draw_projections(50, 8, 3))
    omega, alpha, _ = loop_attention(Q, K, V, 2)
    for h in range(2):
        close(doc["heads"][h]["scores"], omega[h])
        close(doc["heads"][h]["weights"], alpha[h], atol=1e-15)


# =========================================================================== 4. .npz files


def test_qkv_init_writes_init_projections(glove_proj):
    with np.load(glove_proj, allow_pickle=False) as npz:
        assert sorted(npz.files) == ["W_key", "W_query", "W_value"]
        want = attention.init_projections(50, 4, 0)
        for name in want:
            assert npz[name].shape == (50, 4)
            assert np.array_equal(npz[name], want[name])
        for name, w in zip(["W_query", "W_key", "W_value"], draw_projections(50, 4, 0)):
            assert np.array_equal(npz[name], w)


def test_qkv_init_json_document(tmp_path):
    path = tmp_path / "p.npz"
    doc = one(run("qkv", "init", "--d-k", "4", "--seed", "2", "-o", path, "--json"))
    assert doc == {"path": str(path), "d": 50, "d_k": 4, "seed": 2, "arrays": ["W_query", "W_key", "W_value"]}
    doc = one(run("qkv", "init", "-o", tmp_path / "full.npz", "--json"))
    assert doc["d_k"] == 50
    with np.load(tmp_path / "full.npz") as npz:
        assert np.array_equal(npz["W_value"], attention.init_projections(50, 50, 0)["W_value"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full.npz", "p.npz"]  # no temporary left


def test_qkv_init_refuses_to_overwrite_without_force(tmp_path):
    path = tmp_path / "p.npz"
    assert run("qkv", "init", "--d-k", "4", "-o", path, "--json").exit_code == 0
    before = path.read_bytes()
    fails(run("qkv", "init", "--d-k", "4", "--seed", "1", "-o", path, "--json"), str(path), "exists", "--force", code=2)
    assert path.read_bytes() == before
    other = tmp_path / "other.txt"
    other.write_text("keep me")
    fails(run("qkv", "init", "-o", other), "exists", code=2)
    assert other.read_text() == "keep me"
    # --force replaces it
    assert run("qkv", "init", "--d-k", "4", "--seed", "1", "-o", path, "--force", "--json").exit_code == 0
    with np.load(path) as npz:
        assert np.array_equal(npz["W_key"], attention.init_projections(50, 4, 1)["W_key"])
        assert not np.array_equal(npz["W_key"], attention.init_projections(50, 4, 0)["W_key"])


def test_qkv_init_into_a_directory_or_a_missing_folder(tmp_path):
    fails(run("qkv", "init", "-o", tmp_path), f"--output {tmp_path} is a directory; give another path")
    missing = tmp_path / "no" / "such" / "p.npz"
    fails(run("qkv", "init", "-o", missing), f"--output {missing} cannot be written: the folder {missing.parent} "
          "does not exist")  # refused before any work
    assert not (tmp_path / "no").exists()


def test_qkv_file_equals_qkv_random_with_the_same_seed(glove_proj):
    for extra in ([], ["--heads", "2"], ["--mask", "causal", "--heads", "4"]):
        from_file = one(run("scores", SENTENCE, "--qkv", glove_proj, *extra, "--json"))
        drawn = one(run("scores", SENTENCE, "--qkv", "random", "--seed", "0", "--d-k", "4", *extra, "--json"))
        assert from_file["qkv"] == {"kind": "file", "d_k": 4, "heads": drawn["qkv"]["heads"], "path": str(glove_proj)}
        assert drawn["qkv"] == {"kind": "random", "d_k": 4, "heads": drawn["qkv"]["heads"], "seed": 0}
        for key in ("scores", "weights", "top", "heads", "scale", "tokens"):
            assert from_file[key] == drawn[key], key
    a = one(run("explain", SENTENCE, "--qkv", glove_proj, "--json"))
    b = one(run("explain", SENTENCE, "--qkv", "random", "--seed", "0", "--d-k", "4", "--json"))
    assert a["steps"] == b["steps"]


def test_biases_are_added(tmp_path, vectors2_path):
    """With b_query = (0, -1), b_key = (1, 0), b_value = (1, 1):
    q_a = (1, 0), q_b = (0, 0); k_a = (2, 0), k_b = (1, 2); v_a = (3, 1), v_b = (1, 4).
    Scores: row a (2, 1), row b (0, 0)."""
    path = save_npz(tmp_path / "bias.npz", **hand_W(), b_query=np.array([0.0, -1.0]), b_key=np.array([1.0, 0.0]),
                    b_value=np.array([1.0, 1.0]))
    doc = one(run("explain", "a b", "--vectors", vectors2_path, "--qkv", path, "--scale", "1", "--json"))
    steps = doc["steps"]
    assert steps["Q"] == [[1.0, 0.0], [0.0, 0.0]]
    assert steps["K"] == [[2.0, 0.0], [1.0, 2.0]]
    assert steps["V"] == [[3.0, 1.0], [1.0, 4.0]]
    assert steps["scores"] == [[[2.0, 1.0], [0.0, 0.0]]]
    wa = [E / (E + 1), 1 / (E + 1)]
    close(steps["weights"], [[wa, [0.5, 0.5]]], rtol=1e-14)
    close(steps["context"], [[3 * wa[0] + wa[1], wa[0] + 4 * wa[1]], [2.0, 2.5]], rtol=1e-14)
    # only some biases: those given are added, the others are zero
    path = save_npz(tmp_path / "some.npz", **hand_W(), b_value=np.array([-2.0, 0.0]))
    doc = one(run("explain", "a b", "--vectors", vectors2_path, "--qkv", path, "--json"))
    assert doc["steps"]["Q"] == [[1.0, 1.0], [0.0, 1.0]]
    assert doc["steps"]["V"] == [[0.0, 0.0], [-2.0, 3.0]]


def test_a_float32_or_integer_file_is_read_as_float64(tmp_path, vectors2_path):
    W = {k: v.astype(np.int64) for k, v in hand_W().items()}
    ints = save_npz(tmp_path / "ints.npz", **W)
    singles = save_npz(tmp_path / "singles.npz", **{k: v.astype(np.float32) for k, v in hand_W().items()})
    plain = save_npz(tmp_path / "plain.npz", **hand_W())
    docs = [one(run("scores", "a b c d", "--vectors", vectors2_path, "--qkv", p, "--json"))
            for p in (ints, singles, plain)]
    assert docs[0]["weights"] == docs[1]["weights"] == docs[2]["weights"]


class _Boom:
    """Unpickling this writes a file: proof that the pickle ran."""

    def __init__(self, sentinel: Path):
        self.sentinel = sentinel

    def __reduce__(self):
        return (exec, (f"open({str(self.sentinel)!r}, 'w').write('ran')",))


def bad_npz_files(folder: Path, d: int, d_k: int = 3) -> dict:
    """name -> (path, words the message must hold besides the path)."""
    W = {"W_query": np.ones((d, d_k)), "W_key": np.ones((d, d_k)), "W_value": np.ones((d, d_k))}
    cases = {}

    def npz(name, words, **arrays):
        cases[name] = (save_npz(folder / f"{name}.npz", **arrays), words)

    npz("missing_key", ["W_key"], W_query=W["W_query"], W_value=W["W_value"])
    npz("missing_all", ["W_query"], weights=np.ones((d, d_k)))
    npz("wrong_rows", ["W_query", "shape"], **{**W, "W_query": np.ones((d + 1, d_k))})
    npz("wrong_key_cols", ["W_key", "shape"], **{**W, "W_key": np.ones((d, d_k + 1))})
    npz("one_dimensional", ["W_query", "shape"], **{**W, "W_query": np.ones(d)})
    npz("three_dimensional", ["W_value", "shape"], **{**W, "W_value": np.ones((d, d_k, 1))})
    npz("zero_columns", ["shape"], **{k: np.ones((d, 0)) for k in W})
    npz("wrong_bias", ["b_key", "shape"], **W, b_key=np.ones(d_k + 1))
    npz("nan", ["W_value", "NaN"], **{**W, "W_value": np.full((d, d_k), np.nan)})
    npz("inf", ["W_key", "infinity"], **{**W, "W_key": np.full((d, d_k), -np.inf)})
    npz("nan_bias", ["b_query", "NaN"], **W, b_query=np.array([0.0, np.nan, 0.0][:d_k]))
    npz("complex", ["W_query", "complex"], **{**W, "W_query": np.ones((d, d_k), dtype=complex)})
    npz("strings", ["W_query"], **{**W, "W_query": np.array([["x"] * d_k] * d)})
    npz("booleans", ["W_key", "bool"], **{**W, "W_key": np.ones((d, d_k), dtype=bool)})
    text = folder / "notes.npz"
    text.write_text("W_query = [[1, 2], [3, 4]]\n")
    cases["text"] = (text, ["not a .npz"])
    npy = folder / "single.npy"
    np.save(npy, np.ones((d, d_k)))
    cases["npy"] = (npy, ["not a .npz"])
    truncated = folder / "truncated.npz"
    truncated.write_bytes((folder / "missing_key.npz").read_bytes()[:60])
    cases["truncated"] = (truncated, [])
    empty = folder / "empty.npz"
    empty.write_bytes(b"")
    cases["empty"] = (empty, ["not a .npz"])
    directory = folder / "dir.npz"
    directory.mkdir()
    cases["directory"] = (directory, ["directory"])
    cases["missing_path"] = (folder / "nope.npz", ["no such file"])
    return cases


BAD_NAMES = ["missing_key", "missing_all", "wrong_rows", "wrong_key_cols", "one_dimensional", "three_dimensional",
             "zero_columns", "wrong_bias", "nan", "inf", "nan_bias", "complex", "strings", "booleans", "text", "npy",
             "truncated", "empty", "directory", "missing_path"]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    return bad_npz_files(tmp_path_factory.mktemp("bad"), d=4)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_projection_files(vectors4_path, bad_files, name):
    path, words = bad_files[name]
    for command, extra in (("scores", []), ("context", ["--token", "cat"]), ("explain", [])):
        fails(run(command, "cat dog", "--vectors", vectors4_path, "--qkv", path, *extra), str(path), *words)


def test_object_array_is_refused_and_never_unpickled(tmp_path, vectors4_path):
    sentinel = tmp_path / "pwned"
    arr = np.empty((4, 3), dtype=object)
    arr[:] = _Boom(sentinel)
    W = np.ones((4, 3))
    path = save_npz(tmp_path / "evil.npz", W_query=arr, W_key=W, W_value=W)
    # the pickle does run when loaded with allow_pickle=True: the file is a real threat
    with np.load(path, allow_pickle=True) as npz:
        npz["W_query"]
    assert sentinel.exists()
    sentinel.unlink()
    fails(run("scores", "cat dog", "--vectors", vectors4_path, "--qkv", path), str(path), "object")
    assert not sentinel.exists()
    # as a bias, and as the RNN's weights
    path = save_npz(tmp_path / "evil_bias.npz", W_query=W, W_key=W, W_value=W, b_value=np.array([_Boom(sentinel)] * 3))
    fails(run("scores", "cat dog", "--vectors", vectors4_path, "--qkv", path), str(path), "object")
    path = save_npz(tmp_path / "evil_rnn.npz", W_hx=arr, W_hh=np.ones((4, 4)), b_h=np.ones(4))
    fails(run("rnn", "cat dog", "--vectors", vectors4_path, "--weights", path), str(path), "object")
    assert not sentinel.exists()


@pytest.mark.parametrize("huge", ["W_query", "W_value"])
@pytest.mark.parametrize("command,extra", [("scores", []), ("context", ["--token", "c"]), ("explain", [])])
def test_huge_but_finite_projections_are_an_error_not_a_crash(tmp_path, vectors2_path, huge, command, extra):
    """Every value is finite, so the file passes read_arrays; its products are not. The run
    fails with one error line naming the file and the product that overflows (the scores, or
    the values themselves), never a warning, a traceback or a message blaming --scale."""
    W = {k: np.eye(2) for k in projections.WEIGHTS}
    if huge == "W_query":  # q.k = 2e400
        W["W_query"] = W["W_key"] = np.full((2, 2), 1e200)
        overflows = "the scores Q K^T"
    else:  # v_c = (1, 1) W_V = 2e308
        W["W_value"] = np.full((2, 2), 1e308)
        overflows = "the queries, keys and values (X W)"
    path = save_npz(tmp_path / "huge.npz", **W)
    result = run(command, "c d", "--vectors", vectors2_path, "--qkv", path, *extra, "--json")
    assert fails(result) == (f"attncli: error: {path}: {overflows} overflow to infinity; the projections are too "
                             "large for these vectors")


def test_file_projections_are_reread_when_the_file_changes(tmp_path, vectors4):
    """Library use: a notebook that rewrites its projections file gets the new numbers."""
    path = tmp_path / "p.npz"
    save_npz(path, **attention.init_projections(4, 4, 0))
    before = encoder.attend("cat dog sat", vectors4, Options(qkv=str(path)))
    np.savez(path, **attention.init_projections(4, 4, 1))
    after = encoder.attend("cat dog sat", vectors4, Options(qkv=str(path)))
    X = matrix_of(vectors4, ["cat", "dog", "sat"])
    close(before.Q, loop_project(X, draw_projections(4, 4, 0)[0]))
    close(after.Q, loop_project(X, draw_projections(4, 4, 1)[0]))


# =========================================================================== 5. bad options


@pytest.mark.parametrize("args,words", [
    (["--d-k", "0", "--qkv", "random"], ["--d-k"]),
    (["--heads", "0"], ["--heads"]),
    (["--seed", "-1", "--qkv", "random"], ["--seed"]),
    (["--mask", "diagonal"], ["--mask", "diagonal"]),
    (["--heads", "-2"], ["--heads"]),
    (["--d-k", "x", "--qkv", "random"], ["--d-k"]),
])
@pytest.mark.parametrize("command", ["scores", "context", "explain"])
def test_bad_attention_options_are_usage_errors(command, args, words):
    extra = ["--token", "earth"] if command == "context" else []
    fails(run(command, SENTENCE, *extra, *args), *words, code=2)


@pytest.mark.parametrize("args", [["--d-k", "0"], ["--seed", "-1"]])
def test_bad_qkv_init_options_are_usage_errors(tmp_path, args):
    fails(run("qkv", "init", "-o", tmp_path / "p.npz", *args), code=2)
    assert not (tmp_path / "p.npz").exists()


def test_heads_that_do_not_divide_d_k():
    line = fails(run("scores", SENTENCE, "--heads", "3"), "--heads 3", "d_k = 50")
    assert "1, 2, 5, 10, 25, 50" in line
    line = fails(run("explain", SENTENCE, "--heads", "7", "--qkv", "random", "--d-k", "12"), "--heads 7", "12")
    assert "1, 2, 3, 4, 6, 12" in line
    fails(run("context", SENTENCE, "--token", "earth", "--heads", "51"), "--heads 51")


def test_d_k_without_projections():
    fails(run("scores", SENTENCE, "--d-k", "10"), "--d-k 10", "--qkv random")
    fails(run("context", SENTENCE, "--token", "earth", "--d-k", "10", "--qkv", "identity"), "--d-k 10")
    fails(run("explain", SENTENCE, "--d-k", "10"), "--d-k 10")


# =========================================================================== 6. the JSON contract


def test_scores_document_with_heads(glove):
    doc = one(run("scores", SENTENCE, "--qkv", "random", "--seed", "1", "--d-k", "10", "--heads", "5",
                  "--mask", "causal", "--json"))
    assert {"command", "sentence", "tokens", "lookups", "oov", "vectors", "qkv", "mask", "scale", "temperature",
            "scores", "weights", "top", "heads"} <= set(doc)
    assert doc["qkv"] == {"kind": "random", "d_k": 10, "heads": 5, "seed": 1}
    assert doc["mask"] == "causal"
    assert doc["scale"] == pytest.approx(1 / math.sqrt(2), rel=1e-15)
    T = len(SENTENCE_TOKENS)
    assert len(doc["heads"]) == 5
    for head in doc["heads"]:
        assert set(head) == {"scores", "weights", "top"}
        assert np.array(head["scores"]).shape == np.array(head["weights"]).shape == (T, T)
        assert len(head["top"]) == T
    for i in range(T):
        for j in range(T):
            mean_w = math.fsum(h["weights"][i][j] for h in doc["heads"]) / 5
            mean_s = math.fsum(h["scores"][i][j] for h in doc["heads"]) / 5
            assert doc["weights"][i][j] == pytest.approx(mean_w, rel=1e-12, abs=1e-16)
            assert doc["scores"][i][j] == pytest.approx(mean_s, rel=1e-12, abs=1e-16)
        assert abs(math.fsum(doc["weights"][i]) - 1) <= 1e-12
    # and the numbers, by loops
    X = matrix_of(glove, SENTENCE_TOKENS)
    Q, K, V = (loop_project(X, W) for W in draw_projections(50, 10, 1))
    omega, alpha, _ = loop_attention(Q, K, V, 5, causal=True)
    for h in range(5):
        close(doc["heads"][h]["scores"], omega[h])
        close(doc["heads"][h]["weights"], alpha[h], atol=1e-15)


def test_scores_document_identity_and_file(glove_proj):
    doc = one(run("scores", SENTENCE, "--json"))
    assert doc["qkv"] == {"kind": "identity", "d_k": 50, "heads": 1}
    assert doc["mask"] == "none" and len(doc["heads"]) == 1
    doc = one(run("scores", SENTENCE, "--qkv", glove_proj, "--heads", "2", "--json"))
    assert doc["qkv"] == {"kind": "file", "d_k": 4, "heads": 2, "path": str(glove_proj)}
    assert "seed" not in doc["qkv"]


def test_context_document_with_projections_and_heads(glove):
    doc = one(run("context", SENTENCE, "--token", "orange", "--qkv", "random", "--d-k", "6", "--heads", "3",
                  "--json"))
    T = len(SENTENCE_TOKENS)
    assert doc["qkv"] == {"kind": "random", "d_k": 6, "heads": 3, "seed": 0}
    assert len(doc["context"]) == 6
    assert doc["neighbors"] == []
    assert len(doc["token_neighbors"]) == 5
    assert len(doc["heads"]) == 3 and all(set(h) == {"weights", "top"} for h in doc["heads"])
    for j in range(T):
        assert doc["weights"][j] == pytest.approx(math.fsum(h["weights"][j] for h in doc["heads"]) / 3, rel=1e-12)
    X = matrix_of(glove, SENTENCE_TOKENS)
    Q, K, V = (loop_project(X, W) for W in draw_projections(50, 6, 0))
    _, alpha, Z = loop_attention(Q, K, V, 3)
    i = doc["index"]
    assert i == 5
    for h in range(3):
        close(doc["heads"][h]["weights"], alpha[h][i], atol=1e-15)
    close(doc["context"], Z[i])
    # --all: every context vector, length d_k
    doc = one(run("context", SENTENCE, "--all", "--qkv", "random", "--d-k", "6", "--heads", "3", "--json"))
    close(doc["contexts"], Z)


def test_context_document_identity_has_neighbors():
    doc = one(run("context", SENTENCE, "--token", "orange", "--json"))
    assert doc["qkv"] == {"kind": "identity", "d_k": 50, "heads": 1}
    assert len(doc["context"]) == 50 and len(doc["neighbors"]) == 5
    doc = one(run("context", SENTENCE, "--token", "orange", "--heads", "2", "--json"))
    assert len(doc["context"]) == 50 and len(doc["neighbors"]) == 5 and len(doc["heads"]) == 2


@pytest.mark.parametrize("extra,d_k,H", [
    ([], 50, 1), (["--qkv", "random", "--d-k", "6", "--heads", "2", "--mask", "causal"], 6, 2),
    (["--heads", "5", "--temperature", "0.7", "--scale", "0.3"], 50, 5),
])
def test_explain_document(glove, extra, d_k, H):
    doc = one(run("explain", SENTENCE, *extra, "--json"))
    T = len(SENTENCE_TOKENS)
    steps = doc["steps"]
    assert set(steps) == {"X", "Q", "K", "V", "scores", "scaled", "weights", "context"}
    assert np.array(steps["X"]).shape == (T, 50)
    for name in "QKV":
        assert np.array(steps[name]).shape == (T, d_k)
    for name in ("scores", "scaled", "weights"):
        assert np.array(steps[name]).shape == (H, T, T)
    assert np.array(steps["context"]).shape == (T, d_k)
    assert doc["qkv"]["heads"] == H and doc["qkv"]["d_k"] == d_k
    # X is the vectors; scaled is the scores times scale over temperature, before any mask
    close(steps["X"], matrix_of(glove, SENTENCE_TOKENS), rtol=0, atol=0)
    for h in range(H):
        for i in range(T):
            for j in range(T):
                assert steps["scaled"][h][i][j] == pytest.approx(
                    steps["scores"][h][i][j] * doc["scale"] / doc["temperature"], rel=1e-15, abs=1e-300)
    # and everything by loops
    X = steps["X"]
    if "random" in extra:
        Q, K, V = (loop_project(X, W) for W in draw_projections(50, d_k, 0))
    else:
        Q = K = V = X
    omega, alpha, Z = loop_attention(Q, K, V, H, scale=doc["scale"], temperature=doc["temperature"],
                                     causal="causal" in extra)
    close(steps["Q"], Q)
    close(steps["V"], V)
    close(steps["scores"], omega)
    close(steps["weights"], alpha, atol=1e-15)
    close(steps["context"], Z)


def test_explain_row_equals_the_rows_of_steps():
    doc = one(run("explain", SENTENCE, "--token", "like", "--qkv", "random", "--d-k", "4", "--heads", "2",
                  "--mask", "causal", "--json"))
    i = doc["index"]
    assert doc["token"] == "like" and i == 3
    steps, row = doc["steps"], doc["row"]
    assert set(row) == {"x", "q", "scores", "scaled", "weights", "context", "shown"}
    assert row["x"] == steps["X"][i]
    assert row["q"] == steps["Q"][i]
    for key in ("scores", "scaled", "weights"):
        assert row[key] == [steps[key][h][i] for h in range(2)], key
    assert row["context"] == steps["context"][i]
    assert all(w == 0.0 for h in range(2) for w in row["weights"][h][i + 1:])
    for key in ("scores", "scaled", "weights"):  # what the table follows: the mean of the two heads
        assert row["shown"][key] == pytest.approx([(a + b) / 2 for a, b in zip(*row[key])], rel=1e-12, abs=0)
    assert row["shown"]["weights"][i + 1:] == [0.0] * (len(doc["tokens"]) - i - 1)
    # --index picks the same row
    by_index = one(run("explain", SENTENCE, "--index", "3", "--qkv", "random", "--d-k", "4", "--heads", "2",
                       "--mask", "causal", "--json"))
    assert by_index["row"] == row


def test_explain_without_token_has_no_row():
    doc = one(run("explain", SENTENCE, "--json"))
    assert "row" not in doc and "token" not in doc and "index" not in doc


# =========================================================================== 7. tables

TABLE_ENV = {"COLUMNS": "120"}


def test_scores_table_shows_masked_cells_as_dots(vectors4_path):
    for raw in ([], ["--raw"]):
        result = run("scores", "cat dog sat", "--vectors", vectors4_path, "--mask", "causal", "--format", "table",
                     "--no-color", *raw, env=TABLE_ENV)
        assert result.exit_code == 0, result.stderr
        cat, dog, sat = grid(result.stdout, ["cat", "dog", "sat"])
        assert cat[1:] == ["·", "·"] and cat[0] != "·"
        assert dog[2] == "·" and "·" not in dog[:2]
        assert "·" not in sat
        if not raw:
            assert cat[0] == "100"  # the first token's whole weight, on itself


def test_scores_table_with_two_heads(vectors4_path):
    result = run("scores", "cat dog sat", "--vectors", vectors4_path, "--heads", "2", "--mask", "causal",
                 "--format", "table", env=TABLE_ENV)
    assert result.exit_code == 0, result.stderr
    assert "head 1" in result.stdout and "head 2" in result.stdout and "head 0" not in result.stdout
    assert "mean over 2 heads" in " ".join(result.stdout.split())  # the title may wrap
    # every masked cell of the mean and of each head: a dot, never 0.000
    assert "0.000" not in result.stdout.replace("weight α: 0.000", "")
    assert result.stdout.count("·") >= 3 * 3


def test_explain_table_steps_and_token_panel(vectors4_path):
    result = run("explain", "the cat sat on", "--vectors", vectors4_path, "--qkv", "random", "--heads", "2",
                 "--mask", "causal", "--format", "table", env=TABLE_ENV)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    positions = [out.index(f"{n}. ") for n in range(1, 7)]
    assert positions == sorted(positions)
    assert "head 1" in out and "head 2" in out and "head 0" not in out
    assert "through every step" not in out
    result = run("explain", "the cat sat on", "--vectors", vectors4_path, "--token", "sat", "--mask", "causal",
                 "--format", "table", env=TABLE_ENV)
    assert result.exit_code == 0, result.stderr
    assert "'sat' (index 2) through every step" in result.stdout
    out = result.stdout
    step5 = out[out.index("5. weights"):out.index("6. context")]
    rows = grid(step5, ["the", "cat", "sat", "on"], panel=True)
    assert rows[0] == ["100", "·", "·", "·"]  # the first token's masked weights
    assert rows[2][3] == "·" and "·" not in rows[3]
    step3 = out[out.index("3. raw scores"):out.index("4. scaled")]
    assert "·" not in step3  # raw scores are before the mask
    panel = out[out.index("'sat' (index 2) through every step"):]
    assert "·" in panel  # its masked weight, in its row
