"""A trained BERT-family encoder's forward pass in numpy, its attention computed by attention.py.

Devlin et al., "BERT" (2018), on the Transformer of Vaswani et al. (2017). For word pieces
w_1 .. w_T (with [CLS] first and [SEP] last):

    X_0 = LayerNorm(E_word[w] + E_position[0 .. T-1] + E_type[0])

and each layer l = 1 .. L maps X_{l-1} to X_l:

    Q, K, V = X W_Q + b_Q, X W_K + b_K, X W_V + b_V              project
    per head h: alpha_h = softmax(Q_h K_h^T / sqrt(d_head))      multi_head: split_heads,
                Z_h     = alpha_h V_h                              scores, weights, context,
    A   = merge(Z_1 .. Z_H) W_O + b_O                              merge_heads; project
    X'  = LayerNorm(X + A)
    X_l = LayerNorm(X' + GELU(X' W_1 + b_1) W_2 + b_2)

The attention is exactly Steps I-III of attention.py, over the layer's learned W_Q, W_K,
W_V instead of the raw word vectors: nothing of it is written a second time here. This
file is written by hand rather than run through torch because it is the tool's subject: a
reader can hold it against the formulas above, line by line.

Dimensions: T word pieces, D the hidden size, H heads of d_head = D / H, F the feed-forward
size, L layers; the pieces (dense, norm, gelu) are layers.py's.

Its files: config.json's keys, the tensors' names (with or without "bert.", LayerNorm's
under their old names gamma and beta too), and a WordPiece tokenizer that puts [CLS]
before a sentence and [SEP] after it, read and checked by tokenizer.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli import attention
from attncli.errors import ModelError
from attncli.models import tokenizer
from attncli.models.layers import Config, Pass, dense, finite, gelu, norm


MODEL_TYPES = ("bert",)  # config.json's model_type
CAUSAL = False  # an encoder: every piece attends to every other
# Sizes past these are not a model this tool can run in seconds: a config that declares
# them is refused before anything of its size is read.
MOST = {"num_hidden_layers": 128, "num_attention_heads": 256, "hidden_size": 16_384, "intermediate_size": 65_536,
        "max_position_embeddings": 65_536, "type_vocab_size": 1_024, "vocab_size": 10_000_000}
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}


@dataclass(frozen=True)
class BertConfig(Config):
    type_vocab_size: int = 2  # rows of the token-type embeddings; a sentence is all type 0


def read_config(raw: dict, path: Path) -> BertConfig:
    """config.json's sizes (`raw`, read from `path`), each checked."""
    sizes = {}
    for key, most in MOST.items():
        value = raw.get(key)
        if key == "type_vocab_size" and value is None:
            value = 2
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
            raise ModelError(f"{path}: {key} is {value!r}; it must be a whole number from 1 to {most:,}")
        sizes[key] = value
    if sizes["hidden_size"] % sizes["num_attention_heads"]:
        raise ModelError(f"{path}: hidden_size {sizes['hidden_size']} is not divisible by num_attention_heads "
                         f"{sizes['num_attention_heads']}")
    eps = raw.get("layer_norm_eps", 1e-12)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not (0 < eps < 1 and math.isfinite(eps)):
        raise ModelError(f"{path}: layer_norm_eps is {eps!r}; it must be a number between 0 and 1")
    act = raw.get("hidden_act", "gelu")
    if not isinstance(act, str) or act not in ACTIVATIONS:
        raise ModelError(f"{path}: hidden_act is {act!r}; attncli runs {', '.join(ACTIVATIONS)}")
    position = raw.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ModelError(f"{path}: position_embedding_type is {position!r}; attncli runs absolute positions")
    return BertConfig(layers=sizes["num_hidden_layers"], heads=sizes["num_attention_heads"],
                      hidden=sizes["hidden_size"], intermediate=sizes["intermediate_size"],
                      max_positions=sizes["max_position_embeddings"], vocab_size=sizes["vocab_size"],
                      norm_eps=float(eps), activation=ACTIVATIONS[act], type_vocab_size=sizes["type_vocab_size"])


def expected_shapes(config: Config) -> dict[str, tuple[int, ...]]:
    """Every tensor the forward pass reads, by its name without a "bert." prefix, and its shape."""
    D, F = config.hidden, config.intermediate
    shapes = {"embeddings.word_embeddings.weight": (config.vocab_size, D),
              "embeddings.position_embeddings.weight": (config.max_positions, D),
              "embeddings.token_type_embeddings.weight": (config.type_vocab_size, D),
              "embeddings.LayerNorm.weight": (D,), "embeddings.LayerNorm.bias": (D,)}
    for l in range(config.layers):
        p = f"encoder.layer.{l}"
        for name, shape in ((f"{p}.attention.self.query", (D, D)), (f"{p}.attention.self.key", (D, D)),
                            (f"{p}.attention.self.value", (D, D)), (f"{p}.attention.output.dense", (D, D)),
                            (f"{p}.intermediate.dense", (F, D)), (f"{p}.output.dense", (D, F))):
            shapes[f"{name}.weight"], shapes[f"{name}.bias"] = shape, shape[:1]
        for name in (f"{p}.attention.output.LayerNorm", f"{p}.output.LayerNorm"):
            shapes[f"{name}.weight"], shapes[f"{name}.bias"] = (D,), (D,)
    return shapes


def stored_name(name: str, header: dict) -> str | None:
    """The name a tensor has in the file: with or without "bert.", and LayerNorm's weight and
    bias under their old names gamma and beta."""
    old = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
    for candidate in (name, f"bert.{name}", old, f"bert.{old}"):
        if candidate in header:
            return candidate
    return None


def read_tokenizer(where: Path, config: Config):
    """tokenizer.json (or, without it, vocab.txt as a lower-casing WordPiece) that puts [CLS]
    before a sentence and [SEP] after it, checked (tokenizer.read)."""
    return tokenizer.read(where, config, family="BERT", kinds=("WordPiece",), markers=tokenizer.BERT)


def embed(ids: np.ndarray, weights: dict, config: Config) -> np.ndarray:
    """X_0: each piece's word embedding, plus its position's, plus token type 0's; normalised."""
    T = len(ids)
    E = (weights["embeddings.word_embeddings.weight"][ids].astype(np.float64)  # (T, D)
         + weights["embeddings.position_embeddings.weight"][:T]  # (T, D)
         + weights["embeddings.token_type_embeddings.weight"][0])  # (D,)
    return norm(E, weights, "embeddings.LayerNorm", config)  # (T, D)


def attend(X: np.ndarray, weights: dict, l: int, config: Config) -> dict[str, np.ndarray]:
    """Layer l's self-attention over X (T, D), every step kept: Q, K, V (T, D); per head the
    scores omega and weights alpha (H, T, T) and context vectors Z (H, T, d_head), and side
    by side (context, T x D); and the attention's output A = merge(Z) W_O + b_O (T, D)."""
    p = f"encoder.layer.{l}.attention"
    Q = dense(X, weights, f"{p}.self.query")  # (T, D)
    K = dense(X, weights, f"{p}.self.key")  # (T, D)
    V = dense(X, weights, f"{p}.self.value")  # (T, D)
    omega, alpha, Z = attention.multi_head(Q, K, V, config.heads, attention.default_scale(config.d_head),
                                           check=lambda omega: finite(omega, f"layer {l + 1}'s attention scores"))
    A = dense(Z, weights, f"{p}.output.dense")  # (T, D)
    return {"Q": Q, "K": K, "V": V, "scores": omega, "weights": alpha, "Z": attention.split_heads(Z, config.heads),
            "context": Z, "A": A}


def projections(weights: dict, l: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Layer l's W_query, W_key, W_value (D, D), as (in, out), and their biases (D,)."""
    p = f"encoder.layer.{l}.attention.self"
    return ({f"W_{r}": weights[f"{p}.{r}.weight"].T for r in ("query", "key", "value")},
            {f"b_{r}": weights[f"{p}.{r}.bias"] for r in ("query", "key", "value")})


def passed_on(V: np.ndarray, weights: dict, l: int, config: Config) -> np.ndarray:
    """What each head of layer l passes on for each token, f^h(x_j) = v^h_j W_O^h: its value
    through the head's rows of the output projection, so that the attention's output is
    sum_h sum_j alpha^h_ij f^h(x_j) + b_O. V (T, D) -> (H, T, D)."""
    W_O = weights[f"encoder.layer.{l}.attention.output.dense.weight"].T.astype(np.float64)  # (D, D)
    Vh = attention.split_heads(V, config.heads)  # (H, T, d_head)
    W_Oh = W_O.reshape(config.heads, config.d_head, config.hidden)  # (H, d_head, D)
    with np.errstate(all="ignore"):  # checked just below
        return finite(Vh @ W_Oh, f"layer {l + 1}'s values through its output projection")  # (H, T, D)


def feed_forward(X: np.ndarray, weights: dict, l: int, config: Config) -> np.ndarray:
    """GELU(X W_1 + b_1) W_2 + b_2, row by row."""
    inner = gelu(dense(X, weights, f"encoder.layer.{l}.intermediate.dense"), config.activation)  # (T, F)
    return dense(inner, weights, f"encoder.layer.{l}.output.dense")  # (T, D)


def layer(X: np.ndarray, weights: dict, l: int, config: Config) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """X_l from X_{l-1}, and the steps of its attention."""
    steps = attend(X, weights, l, config)
    X1 = norm(X + steps["A"], weights, f"encoder.layer.{l}.attention.output.LayerNorm", config)  # (T, D)
    X2 = norm(X1 + feed_forward(X1, weights, l, config), weights, f"encoder.layer.{l}.output.LayerNorm", config)
    return X2, steps  # (T, D)


def pass_bytes(T: int, config: Config) -> int:
    """Memory forward() holds at its peak for T pieces: every layer's weights (L, H, T, T)
    and hidden states (L + 1, T, D), a kept layer's scores, weights and context beside the
    work of one layer (about six (T, F) or (T, D) arrays), all float64."""
    L, H, D, F = config.layers, config.heads, config.hidden, config.intermediate
    return 8 * (L * H * T * T + (L + 1) * T * D + 3 * H * T * T + 6 * T * max(D, F))


def forward(ids: np.ndarray, weights: dict, config: Config, *, keep: tuple[int, ...] = ()) -> Pass:
    """Every layer over the word pieces `ids` (T,), keeping the attention steps of the layers
    in `keep` (indices from 0). Numbers that overflow are refused after the embeddings, at
    each layer's scores and at each layer's output (ModelError), and numpy says nothing of them."""
    with np.errstate(all="ignore"):
        return _forward(np.asarray(ids), weights, config, keep)


def _forward(ids: np.ndarray, weights: dict, config: Config, keep: tuple[int, ...]) -> Pass:
    X = finite(embed(ids, weights, config), "the embeddings")  # (T, D)
    hidden, alphas, kept = [X], [], {}
    for l in range(config.layers):
        X, steps = layer(X, weights, l, config)
        hidden.append(finite(X, f"the hidden states after layer {l + 1}"))
        alphas.append(steps["weights"])
        if l in keep:
            kept[l] = steps
    return Pass(np.stack(hidden), np.stack(alphas), kept)  # (L + 1, T, D), (L, H, T, T)
