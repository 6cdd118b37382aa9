"""The recurrent network attention replaced: a fold over the sequence with a carried state.

The forward pass of an (Elman) RNN is a reduce,

    reduce(lambda h, x: tanh(W_hx @ x + W_hh @ h + b_h), inputs, h0)

and that is its weakness: the path from an early input to the last state runs through every
step in between, so its influence is multiplied by one Jacobian per step. influence()
measures that exactly, by the chain rule: with a_t = W_hx x_t + W_hh h_{t-1} + b_h and
h_t = tanh(a_t),

    d h_t / d h_{t-1} = diag(1 - h_t^2) W_hh        d h_t / d x_t = diag(1 - h_t^2) W_hx

so d h_T / d x_i = (d h_T / d h_i) diag(1 - h_i^2) W_hx, the first factor a product of the
step Jacobians from T down to i + 1. Attention, by contrast, reaches every position in one
step. Dimensions: T tokens, d the size of a word vector, N of the hidden state.
"""

from __future__ import annotations

from itertools import accumulate

import numpy as np

from attncli.system import limits


# The largest hidden size N, of --hidden or of a --weights file: its weights take 134 MB and
# a sentence's derivatives a second or two.
MOST_HIDDEN = 4096


def working_bytes(N: int, d: int) -> int:
    """What influence() holds at once beside the weights: J, a step's Jacobian and their
    product (N, N) each, and d h_T / d x_t with its factor (N, d) each, in float64."""
    return (3 * N * N + 2 * N * d) * 8


def init_weights(d: int, N: int, seed: int) -> dict[str, np.ndarray]:
    """W_hx (N, d), W_hh (N, N), b_h (N,), drawn in that order uniformly on [-1/sqrt(N),
    1/sqrt(N)] (PyTorch's nn.RNN default), from numpy's PCG64 generator: the same seed gives
    the same numbers on any machine. Refused, before drawing, when they and the run's
    derivatives cannot fit in memory."""
    limits.require((N * N + N * d + N) * 8 + working_bytes(N, d),
                   f"an RNN of hidden size N = {N:,} (its weights and their derivatives)", "choose a smaller --hidden")
    rng = np.random.default_rng(seed)
    bound = 1.0 / np.sqrt(N)
    return {
        "W_hx": rng.uniform(-bound, bound, size=(N, d)),
        "W_hh": rng.uniform(-bound, bound, size=(N, N)),
        "b_h": rng.uniform(-bound, bound, size=N),
    }


def states(X: np.ndarray, W_hx: np.ndarray, W_hh: np.ndarray, b_h: np.ndarray) -> np.ndarray:
    """Every state h_1 .. h_T of the fold from h0 = 0: accumulate is reduce keeping
    each accumulator on the way, so the last row is reduce(step, X, h0) itself."""
    X = np.asarray(X, dtype=np.float64)  # (T, d)
    h0 = np.zeros(W_hh.shape[0])  # (N,)

    def step(h, x):  # the reduce's lambda
        return np.tanh(W_hx @ x + W_hh @ h + b_h)  # (N,)

    with np.errstate(over="ignore", invalid="ignore"):  # tanh saturates; a NaN is the caller's to refuse
        return np.stack(list(accumulate(X, step, initial=h0))[1:])  # (T, N)


def influence(H: np.ndarray, W_hx: np.ndarray, W_hh: np.ndarray) -> np.ndarray:
    """||d h_T / d x_i||_F for every position i, exactly, by the chain rule (see above), in
    whichever order of the same products costs less (see influence_flops)."""
    T, N = H.shape
    d = W_hx.shape[1]
    if _forward_flops(T, N, d) < _backward_flops(T, N, d):
        return _influence_forward(H, W_hx, W_hh)
    return _influence_backward(H, W_hx, W_hh)


def _influence_backward(H: np.ndarray, W_hx: np.ndarray, W_hh: np.ndarray) -> np.ndarray:
    """From the last state back: J = d h_T / d h_t, one (N, N) product a step."""
    T, N = H.shape
    J = np.eye(N)  # d h_T / d h_t, starting at t = T
    norms = np.empty(T)  # (T,)
    for t in reversed(range(T)):
        D = 1.0 - H[t] ** 2  # (N,): tanh'(a_t)
        norms[t] = np.linalg.norm(J @ (D[:, None] * W_hx))  # (N, N) @ (N, d): d h_T / d x_t
        J = J @ (D[:, None] * W_hh)  # (N, N): d h_T / d h_{t-1}
    return norms


def _influence_forward(H: np.ndarray, W_hx: np.ndarray, W_hh: np.ndarray) -> np.ndarray:
    """From the first input on: G holds d h_t / d x_i for every i <= t side by side, and each
    step multiplies it by d h_t / d h_{t-1}. (N, N) @ (N, d t) a step: cheaper than the
    backward order when N is large beside d T."""
    T, N = H.shape
    d = W_hx.shape[1]
    G = np.empty((N, 0))  # (N, d t): d h_t / d x_1 .. d h_t / d x_t
    for t in range(T):
        D = 1.0 - H[t] ** 2  # (N,): tanh'(a_t)
        G = np.hstack([D[:, None] * (W_hh @ G), D[:, None] * W_hx])  # (N, d (t + 1))
    return np.linalg.norm(G.reshape(N, T, d), axis=(0, 2))  # (T,)


def _backward_flops(T: int, N: int, d: int) -> int:
    return 2 * T * (N * N * d + N ** 3)


def _forward_flops(T: int, N: int, d: int) -> int:
    return 2 * N * N * d * (T * (T - 1) // 2) + 2 * T * N * d


# Floating-point operations a second that influence() can count on: numpy's products ran at
# 20 to 30 GFLOP/s on the 2 shared cores it was measured on; half that, to promise no more.
FLOPS = 1e10


def influence_seconds(T: int, N: int, d: int) -> float:
    """About how long influence() takes for T inputs of size d and a state of size N."""
    return min(_forward_flops(T, N, d), _backward_flops(T, N, d)) / FLOPS
