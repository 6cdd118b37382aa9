"""The pieces every trained model's forward pass is made of, in numpy: its sizes (Config),
a linear layer, layer norm and RMSNorm, GELU and SiLU, and the check that the numbers stay
within float64. A family (bert.py, llama.py) puts them together in its own order around
attention.py's attention.

Weights are stored as a Linear layer stores them, (out, in); `W` below is their
transpose, (in, out). Arithmetic is float64 throughout, and a pass whose numbers leave its
range (finite weights of 1e300, say) is refused where they do, never shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from attncli import attention
from attncli.errors import ModelError


@dataclass(frozen=True)
class Config:
    """The sizes of a model, as its config.json gives them, that every family has; a family
    adds its own (bert.BertConfig: token types, RoBERTa's positions)."""

    layers: int  # L
    heads: int  # H, the query heads
    hidden: int  # D
    intermediate: int  # F
    max_positions: int
    vocab_size: int
    norm_eps: float
    activation: str  # "gelu" (exact, with erf), "gelu_tanh" (the tanh approximation) or "silu"
    kv_heads: int = 0  # key and value heads, each serving heads / kv_heads query heads; 0: H
    head_dim: int = 0  # d_head where config.json gives it; 0: D / H

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def key_heads(self) -> int:
        return self.kv_heads or self.heads

    def length_limit(self) -> tuple[int, str]:
        """The most word pieces a sentence may have, and why, where that is not one a position."""
        return self.max_positions, ""


def whole(raw: dict, key: str, path, least: int, most: int, default: int | None = None) -> int:
    """config.json's `key`, a whole number from `least` to `most` (`default` where it leaves
    it out), checked before anything of its size is made."""
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= most:
        raise ModelError(f"{path}: {key} is {value!r}; it must be a whole number from {least:,} to {most:,}")
    return value


def epsilon(raw: dict, key: str, default: float, path) -> float:
    """A norm's epsilon, config.json's `key` (`default` where it leaves it out): a number
    between 0 and 1."""
    eps = raw.get(key, default)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not (0 < eps < 1 and math.isfinite(eps)):
        raise ModelError(f"{path}: {key} is {eps!r}; it must be a number between 0 and 1")
    return float(eps)


def layer_norm(X: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """Each row to mean 0 and variance 1 (the population variance), then scaled and shifted."""
    mean = X.mean(axis=-1, keepdims=True)  # (T, 1)
    var = ((X - mean) ** 2).mean(axis=-1, keepdims=True)  # (T, 1)
    return (X - mean) / np.sqrt(var + eps) * gamma + beta  # (T, D)


def gelu(X: np.ndarray, activation: str = "gelu") -> np.ndarray:
    """GELU(x) = x Phi(x): exactly, 0.5 x (1 + erf(x / sqrt 2)); or its tanh approximation."""
    if activation == "gelu_tanh":
        return 0.5 * X * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (X + 0.044715 * X**3)))
    # numpy has no erf; scipy's costs a run 0.2 s of imports, where the C library's math.erf,
    # element by element, costs 0.08 s a layer at 512 pieces and is as exact
    return 0.5 * X * (1.0 + _erf(X / np.sqrt(2.0)).astype(np.float64))


_erf = np.frompyfunc(math.erf, 1, 1)


def finite(M: np.ndarray, what: str) -> np.ndarray:
    """M, when every number of it is finite."""
    if not np.isfinite(M).all():
        raise ModelError(f"{what} leave float64's range (they overflow to infinity or NaN): the model's weights, "
                         "though finite, are far larger than a trained model's; its model.safetensors is damaged or "
                         "not a trained model's")
    return M


def rms_norm(X: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    """Zhang & Sennrich, "Root Mean Square Layer Normalization" (2019): each row divided by
    its root mean square, then scaled, gamma x / sqrt(mean(x^2) + eps); no mean is taken
    off and nothing is added. A row whose squares overflow is refused: its mean square
    would be infinite and the row 0, a number that looks right."""
    squares = finite((X * X).mean(axis=-1, keepdims=True), "the squares of the hidden states")  # (T, 1)
    return gamma * (X / np.sqrt(squares + eps))  # (T, D)


def silu(X: np.ndarray) -> np.ndarray:
    """SiLU(x) = x sigmoid(x) = x / (1 + e^-x) (Elfwing et al. 2017; "swish"); far below 0,
    e^-x overflows to infinity and the quotient is 0, as it should be."""
    return X / (1.0 + np.exp(-X))


def dense(X: np.ndarray, weights: dict, name: str) -> np.ndarray:
    """X W + b of the Linear layer `name`: attention.project, with W the stored weight
    transposed, and b where the layer has one (a Llama's layers have none)."""
    return attention.project(X, weights[f"{name}.weight"].T, weights.get(f"{name}.bias"))


def norm(X: np.ndarray, weights: dict, name: str, config: Config) -> np.ndarray:
    return layer_norm(X, weights[f"{name}.weight"], weights[f"{name}.bias"], config.norm_eps)


def every_layer(X: np.ndarray, config: Config, layer, keep: tuple[int, ...]) -> "Pass":
    """X_0 (T, D) through every layer, layer(X, l) -> (X_l, its attention's steps): each
    layer's hidden states, checked to be finite, and weights filled into the (L + 1, T, D) and
    (L, H, T, T) arrays a layer at a time (stacking lists at the end would hold every layer's
    weights twice), and the steps of the layers in `keep` (indices from 0) kept."""
    L, (T, D) = config.layers, X.shape
    states, alphas, kept = np.empty((L + 1, T, D)), np.empty((L, config.heads, T, T)), {}
    states[0] = X
    for l in range(L):
        X, steps = layer(X, l)
        states[l + 1] = finite(X, f"the hidden states after layer {l + 1}")
        alphas[l] = steps["weights"]
        if l in keep:
            kept[l] = {**steps, "weights": alphas[l]}
        del steps  # its (H, T, T) arrays go before the next layer makes its own
    return Pass(states, alphas, kept)


@dataclass(frozen=True)
class Pass:
    """What a forward pass gives: every layer's hidden states and attention weights, and the
    steps of the layers asked to keep them."""

    hidden: np.ndarray  # (L + 1, T, D): X_0 .. X_L
    weights: np.ndarray  # (L, H, T, T): alpha of every layer and head
    steps: dict[int, dict[str, np.ndarray]]  # layer index (from 0) -> its attention's steps


# A layer in the parts the measures of context mixing take apart (contributions.py): each
# family's block(X, weights, l, config) gives them, from the same steps as its layer().


@dataclass(frozen=True)
class Norm:
    """A layer norm as the forward pass applied it to its input Y (T, D): its weight gamma,
    bias beta, and each row's factor 1 / sqrt(var(y_i) + eps), read off that pass. Held
    fixed, the factor makes the norm linear in its input but for beta (Kobayashi et al.
    2021, section 3): LN(y_i) = sum_k part(y_ik, i) + beta for any parts y_ik summing to y_i."""

    gamma: np.ndarray  # (D,)
    beta: np.ndarray  # (D,)
    factor: np.ndarray  # (T, 1): 1 / sqrt(var(y_i) + eps) of the forward pass

    @classmethod
    def of(cls, Y: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> "Norm":
        var = ((Y - Y.mean(axis=-1, keepdims=True)) ** 2).mean(axis=-1, keepdims=True)  # (T, 1)
        return cls(np.asarray(gamma, dtype=np.float64), np.asarray(beta, dtype=np.float64), 1.0 / np.sqrt(var + eps))

    def part(self, Z: np.ndarray, rows: slice | np.ndarray = slice(None)) -> np.ndarray:
        """g_i(z) = gamma * (z - mean(z)) / sqrt(var(y_i) + eps) of every vector z of row i
        in Z (b, ..., D), for the rows i of `rows`: each part as the norm treats it,
        without beta."""
        factor = self.factor[rows].reshape((-1,) + (1,) * (Z.ndim - 1))  # (b, 1, ..)
        return self.gamma * (Z - Z.mean(axis=-1, keepdims=True)) * factor  # (b, ..., D)


@dataclass(frozen=True)
class Block:
    """Layer l over its input X (T, D), as a family's block() gives it: the attention's
    weights and what each head passes on, so that the attention sublayer's sum is

        Y_i = r_i + sum_j sum_h alpha^h_ij f^h(x_j) + b_O

    (r the residual stream, X itself), and the layer's output rest(Y). `norms` are the layer
    norms after the residual, as the pass applied them: a post-LN encoder's (BERT) the one
    on Y and the one on the feed-forward's sum; a pre-LN decoder's none, its norms being
    inside f (before the attention) and on the feed-forward's input."""

    weights: np.ndarray  # (H, T, T) alpha
    passed: np.ndarray  # (H, T, D) f^h(x_j): each head's value of token j through its rows of W_O
    bias: np.ndarray  # (D,) b_O (0 where the model has none)
    residual: np.ndarray  # (T, D) r
    total: np.ndarray  # (T, D) Y
    norms: tuple[Norm, ...]  # (LN1 on Y, LN2 on X' + FFN(X')) or ()
    output: np.ndarray  # (T, D) the layer's output, the next layer's input
    rest: Callable[[np.ndarray], np.ndarray]  # Y (..., T, D) -> the layer's hidden state as shown (..., T, D)
