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


@dataclass(frozen=True)
class Sampled:
    """A sampled softmax's candidates (Jean et al. 2015): the distinct output words drawn
    for a step, and log Q(w), the log of each output word's chance of being among them, which
    each logit gives back so that the sample's softmax estimates the whole one's."""

    candidates: np.ndarray  # (S,) distinct places in the output vocabulary
    log_q: np.ndarray  # (V_out,) log(1 - (1 - q_w)^n) for n draws from q


def sample(rng: np.random.Generator, q: np.ndarray, n: int) -> Sampled:
    """n draws from q (V_out,), with replacement, kept once each. A word's chance of being
    among them is 1 - (1 - q_w)^n: that, not n q_w, is the correction for candidates kept once."""
    candidates = np.unique(rng.choice(len(q), size=n, p=q))
    return Sampled(candidates, np.log(-np.expm1(n * np.log1p(-q))))


def _logits(params, z, E, target, sampled: Sampled | None):
    """(B, 1 + S) logits, the target's first: every output word's (sampled None: S = V_out,
    and column 0 is then unused), or the target's and the candidates', each less its log Q,
    and a candidate that is the target itself left out (an "accidental hit")."""
    if sampled is None:
        return z @ E.T + params["b_out"]  # (B, V_out)
    c = sampled.candidates
    true = (z * E[target]).sum(axis=1) + params["b_out"][target] - sampled.log_q[target]  # (B,)
    others = z @ E[c].T + params["b_out"][c] - sampled.log_q[c]  # (B, S)
    others = np.where(c[None, :] == target[:, None], -np.inf, others)
    return np.concatenate([true[:, None], others], axis=1)  # (B, 1 + S)


def forward(params: dict[str, np.ndarray], batch: Batch, E: np.ndarray, scale: float,
            sampled: Sampled | None = None, heads: int = 1) -> tuple[float, dict]:
    """The mean loss over the batch (over every output word, or over a sample of them), and
    what the backward pass needs; with `heads`, H heads of d_k/H columns each attend apart."""
    B, m, d = batch.C.shape
    H = heads
    q = attention.project(batch.x, params["W_query"])[:, None, :]  # (B, 1, d_k)
    flat = batch.C.reshape(B * m, d)  # (B m, d)
    K = attention.project(flat, params["W_key"]).reshape(B, m, -1)  # (B, m, d_k)
    V = attention.project(flat, params["W_value"]).reshape(B, m, -1)  # (B, m, d)
    qh, Kh, Vh = (attention.split_heads(M, H) for M in (q, K, V))  # (B, H, 1, d_k/H), (B, H, m, .) each
    omega = attention.scores(qh, Kh)  # (B, H, 1, m)
    alpha = attention.weights(omega, scale, 1.0, batch.pad[:, None, None, :])  # (B, H, 1, m)
    z = attention.merge_heads(attention.context(alpha, Vh))[:, 0, :]  # (B, H, 1, d/H) -> (B, d)
    logits = _logits(params, z, E, batch.target, sampled)  # (B, V_out) or (B, 1 + S)
    logits = logits - logits.max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    right = batch.target if sampled is None else np.zeros(B, dtype=np.int64)  # the target's column
    loss = -float(log_p[np.arange(B), right].mean())
    return loss, {"q": qh, "K": Kh, "V": Vh, "alpha": alpha, "z": z, "p": np.exp(log_p), "right": right,
                  "sampled": sampled, "heads": H}


def backward(params: dict[str, np.ndarray], batch: Batch, E: np.ndarray, scale: float,
             kept: dict) -> dict[str, np.ndarray]:
    """The mean loss's gradient with respect to each parameter."""
    B, m, d = batch.C.shape
    d_logits = kept["p"].copy()  # softmax minus the one-hot target, over B
    d_logits[np.arange(B), kept["right"]] -= 1.0
    d_logits /= B
    sampled = kept["sampled"]
    if sampled is None:
        grads = {"b_out": d_logits.sum(axis=0)}  # (V_out,)
        dz = d_logits @ E  # (B, d)
    else:  # column 0 is each example's target, the rest the candidates
        c = sampled.candidates
        b_out = np.zeros_like(params["b_out"])
        np.add.at(b_out, batch.target, d_logits[:, 0])
        np.add.at(b_out, c, d_logits[:, 1:].sum(axis=0))
        grads = {"b_out": b_out}
        dz = d_logits[:, :1] * E[batch.target] + d_logits[:, 1:] @ E[c]  # (B, d)
    dz = attention.split_heads(dz[:, None, :], kept["heads"])  # (B, H, 1, d/H)
    d_alpha, dVh = attention.context_backward(kept["alpha"], kept["V"], dz)  # (B, H, 1, m), (B, H, m, d/H)
    d_omega = attention.weights_backward(kept["alpha"], d_alpha, scale)  # (B, H, 1, m)
    dqh, dKh = attention.scores_backward(kept["q"], kept["K"], d_omega)  # (B, H, 1, d_k/H), (B, H, m, d_k/H)
    dq, dK, dV = (attention.merge_heads(M) for M in (dqh, dKh, dVh))  # (B, 1, d_k), (B, m, d_k), (B, m, d)
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
