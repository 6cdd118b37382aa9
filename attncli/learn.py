"""Learning W_Q, W_K and W_V by backpropagation: the "hide" objective, its loss and its
gradients, and Adam. Pure numpy, no I/O; attention.py computes the steps and their
backward passes, this file only chains them.

The objective: hide a word of a sentence, and predict it from the others. The hidden
word's query q = x W_Q attends over the visible words around it (their keys K = C W_K),
and their values V = C W_V, mixed by those weights, give the context vector z; z scores
every word w of an output vocabulary by z . e_w + b_w, e_w its fixed word vector:

    alpha = softmax(q K^T * scale)        z = alpha V        p = softmax(E z + b)
    loss  = -log p[target]

With d_k = d the context vector stays in word space, so the words nearest it mean
something. The gradient flows back through the softmax over the vocabulary, Step III,
Step II, Step I and the projections: the signals the second text draws as red arrows.

Dimensions: B examples, m visible words at most around each, d the vectors' size, d_k of
queries and keys, V_out the output vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attncli import attention


@dataclass
class Batch:
    """B examples: each hidden word's vector, the visible words around it, and its target."""

    x: np.ndarray  # (B, d) the hidden words' own vectors: their queries' input
    C: np.ndarray  # (B, m, d) the visible words around each, zero-padded
    pad: np.ndarray  # (B, m) True where C is padding, never attended to
    target: np.ndarray  # (B,) the hidden words' places in the output vocabulary


def forward(params: dict[str, np.ndarray], batch: Batch, E: np.ndarray, scale: float) -> tuple[float, dict]:
    """The mean loss over the batch, and what the backward pass needs."""
    B, m, d = batch.C.shape
    q = attention.project(batch.x, params["W_query"])[:, None, :]  # (B, 1, d_k)
    flat = batch.C.reshape(B * m, d)  # (B m, d)
    K = attention.project(flat, params["W_key"]).reshape(B, m, -1)  # (B, m, d_k)
    V = attention.project(flat, params["W_value"]).reshape(B, m, -1)  # (B, m, d)
    omega = attention.scores(q, K)  # (B, 1, m)
    alpha = attention.weights(omega, scale, 1.0, batch.pad[:, None, :])  # (B, 1, m)
    z = attention.context(alpha, V)[:, 0, :]  # (B, d)
    logits = z @ E.T + params["b_out"]  # (B, V_out)
    logits -= logits.max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))  # (B, V_out)
    loss = -float(log_p[np.arange(B), batch.target].mean())
    return loss, {"q": q, "K": K, "V": V, "alpha": alpha, "z": z, "p": np.exp(log_p)}


def backward(params: dict[str, np.ndarray], batch: Batch, E: np.ndarray, scale: float,
             kept: dict) -> dict[str, np.ndarray]:
    """The mean loss's gradient with respect to each parameter."""
    B, m, d = batch.C.shape
    d_logits = kept["p"].copy()  # (B, V_out): softmax minus the one-hot target, over B
    d_logits[np.arange(B), batch.target] -= 1.0
    d_logits /= B
    grads = {"b_out": d_logits.sum(axis=0)}  # (V_out,)
    dz = (d_logits @ E)[:, None, :]  # (B, 1, d)
    d_alpha, dV = attention.context_backward(kept["alpha"], kept["V"], dz)  # (B, 1, m), (B, m, d)
    d_omega = attention.weights_backward(kept["alpha"], d_alpha, scale)  # (B, 1, m)
    dq, dK = attention.scores_backward(kept["q"], kept["K"], d_omega)  # (B, 1, d_k), (B, m, d_k)
    flat = batch.C.reshape(B * m, d)
    grads["W_query"] = attention.project_backward(batch.x, params["W_query"], dq[:, 0, :])[0]
    grads["W_key"] = attention.project_backward(flat, params["W_key"], dK.reshape(B * m, -1))[0]
    grads["W_value"] = attention.project_backward(flat, params["W_value"], dV.reshape(B * m, -1))[0]
    return grads


@dataclass
class Adam:
    """Kingma & Ba (2015), with their constants; one step per call, bias-corrected."""

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    t: int = 0

    def __post_init__(self):
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """Move each parameter against its gradient, in place."""
        self.t += 1
        for name, g in grads.items():
            m = self.m[name] = self.beta1 * self.m.get(name, 0.0) + (1 - self.beta1) * g
            v = self.v[name] = self.beta2 * self.v.get(name, 0.0) + (1 - self.beta2) * g * g
            m_hat, v_hat = m / (1 - self.beta1 ** self.t), v / (1 - self.beta2 ** self.t)
            params[name] -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
