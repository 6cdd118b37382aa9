"""The backward passes of attention.py against central finite differences, in float64, on
tiny random cases: every gradient of a loss through the three steps, the heads and the
masks, to 1e-6 relative."""

from __future__ import annotations

import numpy as np
import pytest

from attncli import attention


def forward(X, W, H, scale, temperature, mask):
    """Z (T, d_k) from X through the projections, H heads and Steps I-III."""
    Q, K, V = (attention.project(X, W[r]) for r in ("Q", "K", "V"))
    Qh, Kh, Vh = (attention.split_heads(M, H) for M in (Q, K, V))
    omega = attention.scores(Qh, Kh)
    alpha = attention.weights(omega, scale, temperature, mask)
    return attention.merge_heads(attention.context(alpha, Vh)), (Q, K, V, Qh, Kh, Vh, alpha)


def gradients(X, W, H, scale, temperature, mask, G):
    """dL/dW_Q, dL/dW_K, dL/dW_V and dL/dX for L = sum(G * Z), by the backward passes."""
    _, (Q, K, V, Qh, Kh, Vh, alpha) = forward(X, W, H, scale, temperature, mask)
    d_alpha, dVh = attention.context_backward(alpha, Vh, attention.split_heads(G, H))
    d_omega = attention.weights_backward(alpha, d_alpha, scale, temperature)
    dQh, dKh = attention.scores_backward(Qh, Kh, d_omega)
    grads, dX = {}, np.zeros_like(X)
    for r, dMh in (("Q", dQh), ("K", dKh), ("V", dVh)):
        grads[r], _, dX_r = attention.project_backward(X, W[r], attention.merge_heads(dMh))
        dX += dX_r
    return grads, dX


def numeric(f, A, eps=1e-6):
    """Central differences of the scalar f() with respect to every entry of A (changed in place)."""
    out = np.zeros_like(A)
    for idx in np.ndindex(A.shape):
        keep = A[idx]
        A[idx] = keep + eps
        plus = f()
        A[idx] = keep - eps
        minus = f()
        A[idx] = keep
        out[idx] = (plus - minus) / (2 * eps)
    return out


CASES = [(T, d, d_k, H, mask) for T, d, d_k, H in [(1, 2, 2, 1), (3, 4, 4, 2), (6, 5, 6, 3), (5, 3, 4, 4)]
         for mask in ("none", "causal", "self") if not (mask == "self" and T < 2)]


@pytest.mark.parametrize("T,d,d_k,H,mask", CASES)
def test_every_gradient_equals_finite_differences(T, d, d_k, H, mask):
    rng = np.random.default_rng(T * 100 + d * 10 + H)
    X = rng.normal(size=(T, d))
    W = {r: rng.normal(scale=0.7, size=(d, d_k)) for r in "QKV"}
    G = rng.normal(size=(T, d_k))
    scale, temperature = 1 / np.sqrt(d_k // H), 1.3
    M = {"none": None, "causal": attention.causal_mask(T), "self": attention.self_mask(T)}[mask]

    def loss():
        return float((G * forward(X, W, H, scale, temperature, M)[0]).sum())

    grads, dX = gradients(X, W, H, scale, temperature, M, G)
    for r in "QKV":
        expected = numeric(loss, W[r])
        np.testing.assert_allclose(grads[r], expected, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(dX, numeric(loss, X), rtol=1e-6, atol=1e-9)


def test_softmax_backward_is_the_jacobian_times_the_vector():
    rng = np.random.default_rng(7)
    s = rng.normal(size=5)
    alpha = attention.softmax(s)
    J = np.diag(alpha) - np.outer(alpha, alpha)  # d alpha_i / d s_j
    v = rng.normal(size=5)
    np.testing.assert_allclose(attention.softmax_backward(alpha, v), J.T @ v, atol=1e-15)


def test_project_backward_gives_the_bias_its_gradient():
    rng = np.random.default_rng(8)
    X, W, b, G = rng.normal(size=(4, 3)), rng.normal(size=(3, 2)), rng.normal(size=2), rng.normal(size=(4, 2))
    _, db, _ = attention.project_backward(X, W, G)
    np.testing.assert_allclose(db, numeric(lambda: float((G * attention.project(X, W, b)).sum()), b), rtol=1e-7)
