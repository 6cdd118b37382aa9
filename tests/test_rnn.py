"""The RNN (attncli/rnn.py) and `attncli rnn`: its states, the exact influence of each input
on the last state, its weights drawn or read from a .npz, its document and its table.

Every number is checked against an independent computation: the states by loops over Python
floats, the influence as the norm of a Jacobian by central finite differences, the weights as
the math guide says they are drawn (numpy's PCG64), and a hand-computed first state.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from clirunner import fails, one, run
from helpers import SENTENCE, SENTENCE_TOKENS, close, fsum_dot, loop_softmax, matrix_of, save_npz, to_lists
from attncli import rnn

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

LONG = "The books that the professor recommended during the lecture are very expensive"  # 12 tokens


# --------------------------------------------------------------------------- independent implementations


def draw_rnn(d: int, N: int, seed: int):
    """W_hx, W_hh, b_h as the math guide says: uniform on +-1/sqrt(N), in that order."""
    rng = np.random.default_rng(seed)
    bound = 1.0 / math.sqrt(N)
    return (rng.uniform(-bound, bound, size=(N, d)), rng.uniform(-bound, bound, size=(N, N)),
            rng.uniform(-bound, bound, size=N))


def loop_rnn(X, W_hx, W_hh, b_h) -> np.ndarray:
    """Every state h_1 .. h_T by loops: h_t = tanh(W_hx x_t + W_hh h_{t-1} + b_h), h_0 = 0."""
    X, W_hx, W_hh = to_lists(X), to_lists(W_hx), to_lists(W_hh)
    N = len(W_hh)
    h = [0.0] * N
    out = []
    for x in X:
        h = [math.tanh(math.fsum(W_hx[n][a] * x[a] for a in range(len(x)))
                       + math.fsum(W_hh[n][m] * h[m] for m in range(N)) + float(b_h[n])) for n in range(N)]
        out.append(h)
    return np.array(out)


# --------------------------------------------------------------------------- tests


def test_rnn_init_weights_shapes_range_and_order():
    W = rnn.init_weights(5, 4, 3)
    assert list(W) == ["W_hx", "W_hh", "b_h"]
    assert W["W_hx"].shape == (4, 5) and W["W_hh"].shape == (4, 4) and W["b_h"].shape == (4,)
    for a, b in zip(W.values(), draw_rnn(5, 4, 3)):
        assert np.array_equal(a, b)
        assert np.all(np.abs(a) <= 0.5)


@pytest.mark.parametrize("seed", range(4))
def test_rnn_states_is_the_seeds_reduce(seed):
    rng = np.random.default_rng(seed)
    T, d, N = int(rng.integers(1, 7)), 3, 4
    X = rng.normal(size=(T, d))
    W = rnn.init_weights(d, N, seed + 10)
    W_hx, W_hh, b_h = W["W_hx"], W["W_hh"], W["b_h"]
    H = rnn.states(X, W_hx, W_hh, b_h)
    assert H.shape == (T, N)
    last = functools.reduce(lambda h, x: np.tanh(W_hx @ x + W_hh @ h + b_h), X, np.zeros(N))
    close(H[-1], last, rtol=1e-14, atol=1e-15)
    close(H, loop_rnn(X, W_hx, W_hh, b_h), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("order", ["influence", "_influence_forward", "_influence_backward"])
@pytest.mark.parametrize("seed", range(4))
def test_rnn_influence_is_the_norm_of_a_finite_difference_jacobian(seed, order):
    rng = np.random.default_rng(100 + seed)
    T, d, N = int(rng.integers(1, 6)), 3, 4
    X = rng.normal(size=(T, d))
    W_hx, W_hh, b_h = rng.normal(scale=0.8, size=(N, d)), rng.normal(scale=0.8, size=(N, N)), rng.normal(size=N)

    def last_state(X):
        return functools.reduce(lambda h, x: np.tanh(W_hx @ x + W_hh @ h + b_h), X, np.zeros(N))

    got = getattr(rnn, order)(rnn.states(X, W_hx, W_hh, b_h), W_hx, W_hh)
    assert got.shape == (T,)
    eps = 1e-6
    for i in range(T):
        J = np.empty((N, d))
        for a in range(d):
            plus, minus = X.copy(), X.copy()
            plus[i, a] += eps
            minus[i, a] -= eps
            J[:, a] = (last_state(plus) - last_state(minus)) / (2 * eps)
        assert got[i] == pytest.approx(math.sqrt(math.fsum(float(v) ** 2 for v in J.ravel())), rel=1e-5)


@pytest.mark.parametrize("T,N,d", [(1, 3, 2), (6, 32, 50), (3, 300, 50), (40, 8, 5)])
def test_rnn_influence_orders_agree_and_the_cheaper_runs(T, N, d, monkeypatch):
    rng = np.random.default_rng(T * N)
    weights = rnn.init_weights(d, N, 1)
    H = rnn.states(rng.normal(size=(T, d)), **weights)
    forward = rnn._influence_forward(H, weights["W_hx"], weights["W_hh"])
    backward = rnn._influence_backward(H, weights["W_hx"], weights["W_hh"])
    close(forward, backward, rtol=1e-12, atol=0)
    cheaper = min((rnn._forward_flops(T, N, d), "_influence_forward"), (rnn._backward_flops(T, N, d), "_influence_backward"))
    ran = []
    for name in ("_influence_forward", "_influence_backward"):
        monkeypatch.setattr(rnn, name, lambda *a, name=name, f=getattr(rnn, name): ran.append(name) or f(*a))
    rnn.influence(H, weights["W_hx"], weights["W_hh"])
    assert ran == [cheaper[1]]
    assert rnn.influence_seconds(T, N, d) == cheaper[0] / rnn.FLOPS


def test_rnn_says_how_long_its_derivatives_take(monkeypatch):
    from attncli.documents import rnn as rnn_docs

    monkeypatch.setattr(rnn_docs, "LONG_SECONDS", 0)
    result = run("rnn", SENTENCE, "--hidden", "7", "--json")
    assert result.exit_code == 0
    seconds = rnn.influence_seconds(6, 7, 50)
    assert result.stderr == (f"attncli: warning: the exact derivatives of an RNN of hidden size 7 over 6 tokens take "
                             f"about {seconds:,.0f} s here (Ctrl-C stops the run)\n")
    monkeypatch.setattr(rnn_docs, "LONG_SECONDS", 10)
    assert run("rnn", SENTENCE, "--hidden", "7", "--json").stderr == ""


def test_rnn_document(glove):
    sentence = "The earth is like an orange"
    doc = one(run("rnn", sentence, "--hidden", "6", "--seed", "2", "--json"))
    assert set(doc) == {"command", "sentence", "tokens", "lookups", "oov", "vectors", "rnn", "states", "state_norms",
                        "influence", "attention"}
    assert doc["command"] == "rnn" and doc["sentence"] == sentence
    assert doc["tokens"] == SENTENCE_TOKENS and doc["oov"] == [] and doc["lookups"] == ["word"] * 6
    assert doc["vectors"] == {"name": glove.name, "dim": 50, "words": glove.size}
    assert doc["rnn"] == {"hidden": 6, "seed": 2}
    T = 6
    X = matrix_of(glove, SENTENCE_TOKENS)
    W_hx, W_hh, b_h = draw_rnn(50, 6, 2)
    H = loop_rnn(X, W_hx, W_hh, b_h)
    assert np.array(doc["states"]).shape == (T, 6)
    close(doc["states"], H)
    close(doc["state_norms"], [math.sqrt(math.fsum(v * v for v in h)) for h in H])
    assert len(doc["influence"]) == T and all(v > 0 for v in doc["influence"])
    # attention: the last row of softmax(X X^T / sqrt(d)), by loops
    last = [fsum_dot(X[-1], X[j]) / math.sqrt(50) for j in range(T)]
    assert len(doc["attention"]) == T
    assert abs(math.fsum(doc["attention"]) - 1) <= 1e-12
    close(doc["attention"], loop_softmax(last, [True] * T), atol=1e-15)


def test_rnn_influence_on_real_vectors_by_finite_differences(glove):
    doc = one(run("rnn", "the earth is like an orange", "--hidden", "5", "--json"))
    X = matrix_of(glove, SENTENCE_TOKENS)
    W_hx, W_hh, b_h = draw_rnn(50, 5, 0)

    def last_state(X):
        return functools.reduce(lambda h, x: np.tanh(W_hx @ x + W_hh @ h + b_h), X, np.zeros(5))

    eps = 1e-6
    for i in (0, 3, 5):
        J = np.empty((5, 50))
        for a in range(50):
            plus, minus = X.copy(), X.copy()
            plus[i, a] += eps
            minus[i, a] -= eps
            J[:, a] = (last_state(plus) - last_state(minus)) / (2 * eps)
        assert doc["influence"][i] == pytest.approx(float(np.sqrt((J**2).sum())), rel=1e-5)


def test_rnn_weights_file_is_used(tmp_path, vectors2_path):
    W_hx = np.array([[1.0, 0.0], [0.5, -1.0], [0.0, 2.0]])  # N = 3, d = 2
    W_hh = np.array([[0.5, 0.0, 0.0], [0.0, -0.5, 0.25], [1.0, 0.0, 0.0]])
    b_h = np.array([0.0, 0.1, -0.2])
    path = save_npz(tmp_path / "rnn.npz", W_hx=W_hx, W_hh=W_hh, b_h=b_h)
    fails(run("rnn", "a b c d", "--vectors", vectors2_path, "--weights", path, "--hidden", "9"), "--hidden 9", code=2)
    doc = one(run("rnn", "a b c d", "--vectors", vectors2_path, "--weights", path, "--hidden", "3", "--json"))
    assert doc["rnn"] == {"hidden": 3, "path": str(path)}
    X = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]]
    close(doc["states"], loop_rnn(X, W_hx, W_hh, b_h))
    # by hand, the first state: tanh(W_hx a + b_h) = tanh(1, 0.6, -0.2)
    close(doc["states"][0], [math.tanh(1.0), math.tanh(0.6), math.tanh(-0.2)], rtol=1e-15)


@pytest.mark.parametrize("arrays,words", [
    ({"W_hx": np.ones((3, 2)), "W_hh": np.ones((3, 3))}, ["b_h"]),
    ({"W_hh": np.ones((3, 3)), "b_h": np.ones(3)}, ["W_hx"]),
    ({"W_hx": np.ones((3, 5)), "W_hh": np.ones((3, 3)), "b_h": np.ones(3)}, ["W_hx", "shape"]),
    ({"W_hx": np.ones((4, 2)), "W_hh": np.ones((3, 3)), "b_h": np.ones(3)}, ["W_hx", "shape"]),
    ({"W_hx": np.ones((3, 2)), "W_hh": np.ones((3, 4)), "b_h": np.ones(3)}, ["W_hh", "shape"]),
    ({"W_hx": np.ones((3, 2)), "W_hh": np.ones((3, 3)), "b_h": np.ones(4)}, ["b_h", "shape"]),
    ({"W_hx": np.ones((3, 2)), "W_hh": np.ones(3), "b_h": np.ones(3)}, ["W_hh", "shape"]),
    ({"W_hx": np.ones((3, 2)), "W_hh": np.full((3, 3), np.nan), "b_h": np.ones(3)}, ["W_hh", "NaN"]),
])
def test_rnn_bad_weights_files(tmp_path, vectors2_path, arrays, words):
    path = save_npz(tmp_path / "rnn.npz", **arrays)
    fails(run("rnn", "a b", "--vectors", vectors2_path, "--weights", path), str(path), *words)


def test_rnn_weights_not_a_file(tmp_path, vectors2_path):
    fails(run("rnn", "a b", "--vectors", vectors2_path, "--weights", tmp_path / "nope.npz"), "nope.npz", "no such file")
    fails(run("rnn", "a b", "--vectors", vectors2_path, "--weights", tmp_path), str(tmp_path), "directory")
    text = tmp_path / "w.npz"
    text.write_text("not numpy")
    fails(run("rnn", "a b", "--vectors", vectors2_path, "--weights", text), str(text), "not a .npz")


def test_rnn_huge_but_finite_weights_give_no_warning(tmp_path, vectors2_path):
    """Weights of 1e308 take every pre-activation to infinity, and tanh to 1: each state is
    all ones, no input moves the last one (its influence 0), and nothing is said on stderr."""
    path = save_npz(tmp_path / "huge.npz", W_hx=np.full((3, 2), 1e308), W_hh=np.full((3, 3), 1e308), b_h=np.zeros(3))
    doc = one(run("rnn", "c d", "--vectors", vectors2_path, "--weights", path, "--json"))
    assert doc["states"] == [[1.0] * 3] * 2 and doc["influence"] == [0.0, 0.0]
    close(doc["state_norms"], [math.sqrt(3)] * 2, rtol=1e-15)
    X = [[1.0, 1.0], [2.0, -1.0]]  # c, d
    close(doc["attention"], loop_softmax([fsum_dot(X[-1], x) / math.sqrt(2) for x in X], [True] * 2), atol=1e-15)


def test_rnn_influence_decays_with_distance():
    doc = one(run("rnn", LONG, "--json"))
    assert len(doc["tokens"]) == 12 and doc["oov"] == []
    influence = doc["influence"]
    assert influence[-1] > influence[0]
    assert influence[-1] > 10 * influence[0]
    assert max(influence[-3:]) > max(influence[:3])


def test_rnn_single_token():
    doc = one(run("rnn", "orange", "--json"))
    assert doc["attention"] == [1.0] and len(doc["influence"]) == 1 and len(doc["states"]) == 1


@pytest.mark.parametrize("args,words", [
    (["--hidden", "0"], ["--hidden"]),
    (["--seed", "-1"], ["--seed"]),
    (["--hidden", "-3"], ["--hidden"]),
    (["--hidden", "4097"], ["--hidden", "4096"]),
])
def test_bad_rnn_options_are_usage_errors(args, words):
    fails(run("rnn", SENTENCE, *args), *words, code=2)


def test_rnn_table(vectors4_path):
    result = run("rnn", "the cat sat on the mat", "--vectors", vectors4_path, "--format", "table", env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "influence" in out and "attention" in out
    for token in ("the", "cat", "sat", "on", "mat"):
        assert token in out
    assert "'mat'" in out  # the last token, named in the title
