"""A trained BERT-family encoder's forward pass in numpy, its attention computed by attention.py.

Devlin et al., "BERT" (2018), on the Transformer of Vaswani et al. (2017). For word pieces
w_1 .. w_T (with [CLS] first and [SEP] last):

    X_0 = LayerNorm(E_word[w] + E_position[0 .. T-1] + E_type[0])

and each layer l = 1 .. L maps X_{l-1} to X_l:

    Q, K, V = X W_Q + b_Q, X W_K + b_K, X W_V + b_V              project
    per head h: alpha_h = softmax(Q_h K_h^T / sqrt(d_head))      split_heads, scores, weights
                Z_h     = alpha_h V_h                            context
    A   = merge(Z_1 .. Z_H) W_O + b_O                            merge_heads, project
    X'  = LayerNorm(X + A)
    X_l = LayerNorm(X' + GELU(X' W_1 + b_1) W_2 + b_2)

The attention is exactly Steps I-III of attention.py, over the layer's learned W_Q, W_K,
W_V instead of the raw word vectors: nothing of it is written a second time here. This
file is written by hand rather than run through torch because it is the tool's subject: a
reader can hold it against the formulas above, line by line.

Dimensions: T word pieces, D the hidden size, H heads of d_head = D / H, F the feed-forward
size, L layers. Weights are stored as a Linear layer stores them, (out, in); `W` below is
their transpose, (in, out). Arithmetic is float64 throughout, and a pass whose numbers
leave its range (finite weights of 1e300, say) is refused where they do, never shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attncli import attention
from attncli.errors import ModelError


@dataclass(frozen=True)
class Config:
    """The sizes of a model, as its config.json gives them."""

    layers: int  # L
    heads: int  # H
    hidden: int  # D
    intermediate: int  # F
    max_positions: int
    type_vocab_size: int
    vocab_size: int
    layer_norm_eps: float
    activation: str  # "gelu" (exact, with erf) or "gelu_tanh" (the tanh approximation)

    @property
    def d_head(self) -> int:
        return self.hidden // self.heads


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


def _finite(M: np.ndarray, what: str) -> np.ndarray:
    """M, when every number of it is finite."""
    if not np.isfinite(M).all():
        raise ModelError(f"{what} leave float64's range (they overflow to infinity or NaN): the model's weights, "
                         "though finite, are far larger than a trained model's; its model.safetensors is damaged or "
                         "not a trained model's")
    return M


def _dense(X: np.ndarray, weights: dict, name: str) -> np.ndarray:
    """X W + b of the Linear layer `name`: attention.project, with W the stored weight transposed."""
    return attention.project(X, weights[f"{name}.weight"].T, weights[f"{name}.bias"])


def _norm(X: np.ndarray, weights: dict, name: str, config: Config) -> np.ndarray:
    return layer_norm(X, weights[f"{name}.weight"], weights[f"{name}.bias"], config.layer_norm_eps)


def embed(ids: np.ndarray, weights: dict, config: Config) -> np.ndarray:
    """X_0: each piece's word embedding, plus its position's, plus token type 0's; normalised."""
    T = len(ids)
    E = (weights["embeddings.word_embeddings.weight"][ids].astype(np.float64)  # (T, D)
         + weights["embeddings.position_embeddings.weight"][:T]  # (T, D)
         + weights["embeddings.token_type_embeddings.weight"][0])  # (D,)
    return _norm(E, weights, "embeddings.LayerNorm", config)  # (T, D)


def attend(X: np.ndarray, weights: dict, l: int, config: Config) -> dict[str, np.ndarray]:
    """Layer l's self-attention over X (T, D), every step kept: Q, K, V (T, D); per head the
    scores omega and weights alpha (H, T, T) and context vectors Z (H, T, d_head); and the
    attention's output A = merge(Z) W_O + b_O (T, D)."""
    p = f"encoder.layer.{l}.attention"
    Q = _dense(X, weights, f"{p}.self.query")  # (T, D)
    K = _dense(X, weights, f"{p}.self.key")  # (T, D)
    V = _dense(X, weights, f"{p}.self.value")  # (T, D)
    Qh, Kh, Vh = (attention.split_heads(M, config.heads) for M in (Q, K, V))  # (H, T, d_head) each
    omega = _finite(attention.scores(Qh, Kh), f"layer {l + 1}'s attention scores")  # (H, T, T)
    alpha = attention.weights(omega, attention.default_scale(config.d_head))  # (H, T, T)
    Z = attention.context(alpha, Vh)  # (H, T, d_head)
    A = _dense(attention.merge_heads(Z), weights, f"{p}.output.dense")  # (T, D)
    return {"Q": Q, "K": K, "V": V, "scores": omega, "weights": alpha, "Z": Z, "A": A}


def passed_on(V: np.ndarray, weights: dict, l: int, config: Config) -> np.ndarray:
    """What each head of layer l passes on for each token, f^h(x_j) = v^h_j W_O^h: its value
    through the head's rows of the output projection, so that the attention's output is
    sum_h sum_j alpha^h_ij f^h(x_j) + b_O. V (T, D) -> (H, T, D)."""
    W_O = weights[f"encoder.layer.{l}.attention.output.dense.weight"].T.astype(np.float64)  # (D, D)
    Vh = attention.split_heads(V, config.heads)  # (H, T, d_head)
    W_Oh = W_O.reshape(config.heads, config.d_head, config.hidden)  # (H, d_head, D)
    with np.errstate(all="ignore"):  # checked just below
        return _finite(Vh @ W_Oh, f"layer {l + 1}'s values through its output projection")  # (H, T, D)


def feed_forward(X: np.ndarray, weights: dict, l: int, config: Config) -> np.ndarray:
    """GELU(X W_1 + b_1) W_2 + b_2, row by row."""
    inner = gelu(_dense(X, weights, f"encoder.layer.{l}.intermediate.dense"), config.activation)  # (T, F)
    return _dense(inner, weights, f"encoder.layer.{l}.output.dense")  # (T, D)


def layer(X: np.ndarray, weights: dict, l: int, config: Config) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """X_l from X_{l-1}, and the steps of its attention."""
    steps = attend(X, weights, l, config)
    X1 = _norm(X + steps["A"], weights, f"encoder.layer.{l}.attention.output.LayerNorm", config)  # (T, D)
    X2 = _norm(X1 + feed_forward(X1, weights, l, config), weights, f"encoder.layer.{l}.output.LayerNorm", config)
    return X2, steps  # (T, D)


def pass_bytes(T: int, config: Config) -> int:
    """Memory forward() holds at its peak for T pieces: every layer's weights (L, H, T, T)
    and hidden states (L + 1, T, D), a kept layer's scores, weights and context beside the
    work of one layer (about six (T, F) or (T, D) arrays), all float64."""
    L, H, D, F = config.layers, config.heads, config.hidden, config.intermediate
    return 8 * (L * H * T * T + (L + 1) * T * D + 3 * H * T * T + 6 * T * max(D, F))


@dataclass(frozen=True)
class Pass:
    """What a forward pass gives: every layer's hidden states and attention weights, and the
    steps of the layers asked to keep them."""

    hidden: np.ndarray  # (L + 1, T, D): X_0 .. X_L
    weights: np.ndarray  # (L, H, T, T): alpha of every layer and head
    steps: dict[int, dict[str, np.ndarray]]  # layer index (from 0) -> its attention's steps


def forward(ids: np.ndarray, weights: dict, config: Config, *, keep: tuple[int, ...] = ()) -> Pass:
    """Every layer over the word pieces `ids` (T,), keeping the attention steps of the layers
    in `keep` (indices from 0). Numbers that overflow are refused after the embeddings, at
    each layer's scores and at each layer's output (ModelError), and numpy says nothing of them."""
    with np.errstate(all="ignore"):
        return _forward(np.asarray(ids), weights, config, keep)


def _forward(ids: np.ndarray, weights: dict, config: Config, keep: tuple[int, ...]) -> Pass:
    X = _finite(embed(ids, weights, config), "the embeddings")  # (T, D)
    hidden, alphas, kept = [X], [], {}
    for l in range(config.layers):
        X, steps = layer(X, weights, l, config)
        hidden.append(_finite(X, f"the hidden states after layer {l + 1}"))
        alphas.append(steps["weights"])
        if l in keep:
            kept[l] = steps
    return Pass(np.stack(hidden), np.stack(alphas), kept)  # (L + 1, T, D), (L, H, T, T)
