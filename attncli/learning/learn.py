"""Learning W_Q, W_K and W_V by backpropagation: a hidden word's loss and its gradients,
and Adam. Pure numpy, no I/O; attention.py computes the steps and their
backward passes, this file only chains them.

The objective: hide a word of a sentence, and predict it from the others. The hidden
word's query q = x W_Q attends over the visible words around it (their keys K = C W_K),
and their values V = C W_V, mixed by those weights, give the context vector z; z scores
every word w of an output vocabulary by z . e_w + b_w, e_w its fixed word vector:

    alpha = softmax(q K^T * scale)        z = alpha V        p = softmax(E z + b)
    loss  = -log p[target]

The values keep d columns (W_V is d x d), so the context vector stays in word space and the
words nearest it mean something; queries and keys may be narrower (d_k). Three objectives
differ only in the examples (train.py) and in q: "hide" and "next" take the query from a
word's own vector, "mask" from a learned vector m, the same for every hidden word (BERT's
[MASK]): q = m W_Q. The gradient flows back through the softmax over the vocabulary, Step III,
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

    x: np.ndarray | None  # (B, d) the queries' input: the hidden words' own vectors, or None for params["mask"]
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


def inclusion_log_q(q: np.ndarray, n: int) -> np.ndarray:
    """log Q(w) = log(1 - (1 - q_w)^n): each output word's chance of being among n draws
    from q (V_out,) kept once each; that, not n q_w, is the correction for candidates kept once."""
    return np.log(-np.expm1(n * np.log1p(-q)))  # (V_out,)


def sample(rng: np.random.Generator, q: np.ndarray, n: int, log_q: np.ndarray | None = None) -> Sampled:
    """n draws from q (V_out,), with replacement, kept once each (log_q: inclusion_log_q(q, n),
    given when it was computed once for every step)."""
    candidates = np.unique(rng.choice(len(q), size=n, p=q))
    return Sampled(candidates, inclusion_log_q(q, n) if log_q is None else log_q)


def _logits(params, z, E, target, sampled: Sampled | None):
    """Every output word's logits (B, V_out) when sampled is None; else the target's (B,) and
    the candidates' (B, S), each less its log Q, and a candidate that is the target itself
    set to -inf (an "accidental hit": it is not a negative)."""
    if sampled is None:
        logits = z @ E.T  # (B, V_out)
        logits += params["b_out"]
        return None, logits
    c = sampled.candidates  # sorted, distinct
    true = (z * E[target]).sum(axis=1) + params["b_out"][target] - sampled.log_q[target]  # (B,)
    others = z @ E[c].T  # (B, S)
    others += params["b_out"][c] - sampled.log_q[c]
    at = np.minimum(np.searchsorted(c, target), len(c) - 1)  # (B,): where each target would be
    hit = c[at] == target
    others[hit, at[hit]] = -np.inf
    return true, others


def _softmax(true, others, target):
    """The mean loss -log p[target] and p, from the logits _logits gives (turned into p in
    place: they are large, and not needed again)."""
    B = len(others)
    top = others.max(axis=1)  # (B,)
    if true is not None:
        top = np.maximum(top, true)
    right = others[np.arange(B), target] if true is None else true  # (B,): the target's logit
    e = np.exp(np.subtract(others, top[:, None], out=others), out=others)  # (B, V_out) or (B, S)
    total = e.sum(axis=1)  # (B,)
    e_true = None if true is None else np.exp(true - top)
    if e_true is not None:
        total += e_true
    loss = -float((right - top - np.log(total)).mean())
    e /= total[:, None]  # p of every column
    return loss, (None if e_true is None else e_true / total), e


def forward(params: dict[str, np.ndarray], batch: Batch, E: np.ndarray, scale: float,
            sampled: Sampled | None = None, heads: int = 1) -> tuple[float, dict]:
    """The mean loss over the batch (over every output word, or over a sample of them), and
    what the backward pass needs; with `heads`, H heads of d_k/H columns (and d/H of the
    values) each attend apart. batch.x None: every query's input is the learned params["mask"]."""
    B, m, d = batch.C.shape
    H = heads
    x = np.broadcast_to(params["mask"], (B, d)) if batch.x is None else batch.x  # (B, d)
    q = attention.project(x, params["W_query"])[:, None, :]  # (B, 1, d_k)
    flat = batch.C.reshape(B * m, d)  # (B m, d)
    K = attention.project(flat, params["W_key"]).reshape(B, m, -1)  # (B, m, d_k)
    V = attention.project(flat, params["W_value"]).reshape(B, m, -1)  # (B, m, d)
    _, alpha, z = attention.multi_head(q, K, V, H, scale, 1.0, batch.pad[:, None, None, :])  # (B, H, 1, m), (B, 1, d)
    z = z[:, 0, :]  # (B, d)
    true, others = _logits(params, z, E, batch.target, sampled)  # None and (B, V_out), or (B,) and (B, S)
    loss, p_true, p = _softmax(true, others, batch.target)
    return loss, {"x": x, "q": q, "K": K, "V": V, "alpha": alpha, "z": z, "p_true": p_true, "p": p,
                  "sampled": sampled, "heads": H}


def backward(params: dict[str, np.ndarray], batch: Batch, E: np.ndarray, scale: float,
             kept: dict) -> dict[str, np.ndarray]:
    """The mean loss's gradient with respect to each parameter."""
    B, m, d = batch.C.shape
    sampled = kept["sampled"]
    d_logits = kept["p"] / B  # softmax minus the one-hot target, over B
    if sampled is None:
        d_logits[np.arange(B), batch.target] -= 1.0 / B
        grads = {"b_out": d_logits.sum(axis=0)}  # (V_out,)
        dz = d_logits @ E  # (B, d)
    else:  # the target's own logit apart, then the candidates'
        c = sampled.candidates
        d_true = (kept["p_true"] - 1.0) / B  # (B,)
        b_out = np.bincount(batch.target, weights=d_true, minlength=len(params["b_out"]))  # (V_out,)
        b_out[c] += d_logits.sum(axis=0)  # c is distinct
        grads = {"b_out": b_out}
        dz = d_true[:, None] * E[batch.target] + d_logits @ E[c]  # (B, d)
    dq, dK, dV = attention.multi_head_backward(kept["q"], kept["K"], kept["V"], kept["alpha"], dz[:, None, :],
                                               kept["heads"], scale)  # (B, 1, d_k), (B, m, d_k), (B, m, d)
    flat = batch.C.reshape(B * m, d)
    masked = batch.x is None  # the mask vector's own gradient: the queries' input's, summed
    grads["W_query"], _, dx = attention.project_backward(kept["x"], params["W_query"], dq[:, 0, :], inputs=masked)
    if masked:
        grads["mask"] = dx.sum(axis=0)  # (d,)
    grads["W_key"] = attention.project_backward(flat, params["W_key"], dK.reshape(B * m, -1), inputs=False)[0]
    grads["W_value"] = attention.project_backward(flat, params["W_value"], dV.reshape(B * m, -1), inputs=False)[0]
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
