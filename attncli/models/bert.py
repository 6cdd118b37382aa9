"""A trained BERT-family encoder's forward pass in numpy, its attention computed by attention.py.

Devlin et al., "BERT" (2018), on the Transformer of Vaswani et al. (2017). For word pieces
w_1 .. w_T (with the markers its tokenizer puts, [CLS] first and [SEP] last):

    X_0 = LayerNorm(E_word[w] + E_position[p] + E_type[0])

where the positions p are 0 .. T-1, and each layer l = 1 .. L maps X_{l-1} to X_l:

    Q, K, V = X W_Q + b_Q, X W_K + b_K, X W_V + b_V              project
    per head h: alpha_h = softmax(Q_h K_h^T / sqrt(d_head))      multi_head: split_heads,
                Z_h     = alpha_h V_h                              scores, weights, context,
    A   = merge(Z_1 .. Z_H) W_O + b_O                              merge_heads; project
    X'  = LayerNorm(X + A)
    X_l = LayerNorm(X' + GELU(X' W_1 + b_1) W_2 + b_2)

RoBERTa (Liu et al., 2019) and XLM-RoBERTa (Conneau et al., 2019) are this model with
other positions: fairseq's, counted from padding_idx + 1 (2 .. T + 1 for their
padding_idx 1), so that their table's first padding_idx + 1 rows are never a piece's; and
their markers are <s> and </s>. DistilBERT (Sanh et al., 2019) is it under other tensor
names, without token types (distilbert.py).

The attention is exactly Steps I-III of attention.py, over the layer's learned W_Q, W_K,
W_V instead of the raw word vectors: nothing of it is written a second time here. This
file is written by hand rather than run through torch because it is the tool's subject: a
reader can hold it against the formulas above, line by line.

Dimensions: T word pieces, D the hidden size, H heads of d_head = D / H, F the feed-forward
size, L layers; the pieces (dense, norm, gelu) are layers.py's.

Its files: config.json's keys, the tensors' names (with or without "bert." or "roberta.",
LayerNorm's under their old names gamma and beta too), and a tokenizer, read and checked
by tokenizer.py, with the markers transformers' class for it puts around a sentence:
BERT's WordPiece, RoBERTa's byte-level BPE or XLM-RoBERTa's Unigram.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli import attention
from attncli.errors import ModelError
from attncli.models import layers, tokenizer
from attncli.models.layers import Config, Kept, Pass, dense, every_layer, finite, gelu, norm, rows_of, whole


MODEL_TYPES = ("bert", "roberta", "xlm-roberta")  # config.json's model_type
CAUSAL = False  # an encoder: every piece attends to every other
LINEAR_LAYOUT = True  # its weights are Linear layers' (out, in), which weights.Weights widens laid out for X W
# Sizes past these are not a model this tool can run in seconds: a config that declares
# them is refused before anything of its size is read.
MOST = {"num_hidden_layers": 128, "num_attention_heads": 256, "hidden_size": 16_384, "intermediate_size": 65_536,
        "max_position_embeddings": 65_536, "type_vocab_size": 1_024, "vocab_size": 10_000_000}
# Config's sizes, by their keys in config.json
SIZES = {"layers": "num_hidden_layers", "heads": "num_attention_heads", "hidden": "hidden_size",
         "intermediate": "intermediate_size", "max_positions": "max_position_embeddings", "vocab_size": "vocab_size"}
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
# Each model type's name, the kinds of model its tokenizer.json is, and the transformers class
# that reads it where tokenizer_config.json names none (whose markers it puts: tokenizer.OWN)
TOKENIZERS = {"bert": ("BERT", ("WordPiece",), tokenizer.Auto("BertTokenizer")),
              "distilbert": ("DistilBERT", ("WordPiece",), tokenizer.Auto("BertTokenizer")),
              "roberta": ("RoBERTa", ("BPE",), tokenizer.Auto("RobertaTokenizer")),
              "xlm-roberta": ("XLM-RoBERTa", ("Unigram",), tokenizer.Auto("XLMRobertaTokenizer"))}


@dataclass(frozen=True)
class BertConfig(Config):
    type_vocab_size: int = 2  # rows of the token-type embeddings, a sentence all type 0; 0: none (DistilBERT)
    padding_idx: int | None = None  # RoBERTa's: positions count from padding_idx + 1; None: from 0 (BERT's)
    model_type: str = "bert"  # config.json's, which says what its tokenizer is (TOKENIZERS)

    def length_limit(self) -> tuple[int, str]:
        if self.padding_idx is None:
            return super().length_limit()
        first = self.padding_idx + 1
        return self.max_positions - first, (f" (its max_position_embeddings {self.max_positions:,} less "
                                            f"padding_idx + 1 = {first:,}: its positions start at {first:,})")


def read_sizes(raw: dict, path: Path, keys: dict[str, str], most: dict[str, int]) -> dict[str, int]:
    """Config's sizes, each read from config.json (`raw`, read from `path`) under its key
    (`keys`: a size's name -> its key) and checked, to `most[key]` at most; the hidden size
    divisible by the heads."""
    sizes = {size: whole(raw, key, path, 1, most[key]) for size, key in keys.items()}
    if sizes["hidden"] % sizes["heads"]:
        raise ModelError(f"{path}: {keys['hidden']} {sizes['hidden']} is not divisible by {keys['heads']} "
                         f"{sizes['heads']}")
    return sizes


def activation(raw: dict, key: str, path: Path) -> str:
    """config.json's activation function (under `key`), as layers.gelu names it."""
    act = raw.get(key, "gelu")
    if not isinstance(act, str) or act not in ACTIVATIONS:
        raise ModelError(f"{path}: {key} is {act!r}; attncli runs {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[act]


def read_config(raw: dict, path: Path) -> BertConfig:
    """config.json's sizes (`raw`, read from `path`), each checked."""
    sizes = read_sizes(raw, path, SIZES, MOST)
    eps = layers.epsilon(raw, "layer_norm_eps", 1e-12, path)
    position = raw.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ModelError(f"{path}: position_embedding_type is {position!r}; attncli runs absolute positions")
    if raw.get("is_decoder", False) not in (False, None):
        raise ModelError(f"{path}: is_decoder is {raw['is_decoder']!r}, a causal mask over an encoder; attncli runs "
                         "this family as encoders, every piece attending to every other: give an encoder's config "
                         "(is_decoder false)")
    kind = raw["model_type"]
    return BertConfig(**sizes, norm_eps=eps, activation=activation(raw, "hidden_act", path),
                      type_vocab_size=whole(raw, "type_vocab_size", path, 1, MOST["type_vocab_size"], default=2),
                      padding_idx=None if kind == "bert" else _padding_idx(raw, path, sizes["max_positions"]),
                      model_type=kind)


def _padding_idx(raw: dict, path: Path, positions: int) -> int:
    """RoBERTa's pad_token_id: its positions start after it, and at least one must be left."""
    value = raw.get("pad_token_id", 1)
    if positions < 2:  # no pad_token_id leaves a position: the fault is the positions'
        raise ModelError(f"{path}: max_position_embeddings is {positions}; RoBERTa's positions start after "
                         "pad_token_id's, so it must be at least 2")
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= positions - 2:
        raise ModelError(f"{path}: pad_token_id is {value!r}; RoBERTa's positions start at pad_token_id + 1, so it "
                         f"must be a whole number from 0 to {positions - 2:,} (max_position_embeddings {positions:,} "
                         "less 2)")
    return value


def expected_shapes(config: Config) -> dict[str, tuple[int, ...]]:
    """Every tensor the forward pass reads, by its name without a "bert." prefix, and its shape."""
    D, F = config.hidden, config.intermediate
    shapes = {"embeddings.word_embeddings.weight": (config.vocab_size, D),
              "embeddings.position_embeddings.weight": (config.max_positions, D),
              "embeddings.token_type_embeddings.weight": (config.type_vocab_size, D),
              "embeddings.LayerNorm.weight": (D,), "embeddings.LayerNorm.bias": (D,)}
    if not config.type_vocab_size:
        del shapes["embeddings.token_type_embeddings.weight"]
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
    """The name a tensor has in the file: with or without "bert." (or "roberta.", as
    RobertaForMaskedLM saves it), and LayerNorm's weight and bias under their old names gamma
    and beta."""
    old = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
    for candidate in (name, f"bert.{name}", f"roberta.{name}", old, f"bert.{old}"):
        if candidate in header:
            return candidate
    return None


def read_tokenizer(where: Path, config: BertConfig):
    """Its tokenizer, checked by tokenizer.read: BERT's and DistilBERT's WordPiece (tokenizer.json,
    or vocab.txt lower-casing), RoBERTa's byte-level BPE, XLM-RoBERTa's Unigram, with the
    markers transformers puts around a sentence: its class's own ([CLS] and [SEP], <s> and
    </s>, as tokenizer_config.json names them), or where tokenizer_config.json names another
    class, tokenizer.json's."""
    family, kinds, auto = TOKENIZERS[config.model_type]
    return tokenizer.read(where, config, family=family, kinds=kinds, auto=auto)


def positions(ids: np.ndarray, config: BertConfig) -> np.ndarray:
    """Each piece's position (T,), or each of a batch's (B, T): 0 .. T-1; RoBERTa's counted
    from padding_idx + 1 over the pieces that are not padding, a padding piece's own
    padding_idx (fairseq's make_positions, transformers' create_position_ids_from_input_ids)."""
    if config.padding_idx is None:
        return np.arange(ids.shape[-1])
    real = ids != config.padding_idx  # (..., T)
    return np.where(real, np.cumsum(real, axis=-1) + config.padding_idx, config.padding_idx)  # (..., T)


def embed(ids: np.ndarray, weights: dict, config: BertConfig) -> np.ndarray:
    """X_0: each piece's word embedding, plus its position's, plus token type 0's (where the
    model has token types); normalised."""
    E = (rows_of(weights, "embeddings.word_embeddings.weight", ids)  # (T, D)
         + rows_of(weights, "embeddings.position_embeddings.weight", positions(ids, config)))  # (T, D)
    if config.type_vocab_size:
        E += rows_of(weights, "embeddings.token_type_embeddings.weight", 0)  # (D,)
    return norm(E, weights, "embeddings.LayerNorm", config)  # (T, D)


def attend(X: np.ndarray, weights: dict, l: int, config: Config, masked: np.ndarray | None = None,
           blocks: layers.Blocks | None = None, values: bool = True) -> dict[str, np.ndarray]:
    """Layer l's self-attention over X (T, D), every step kept: Q, K, V (T, D); per head the
    scores omega and weights alpha (H, T, T) and context vectors Z (H, T, d_head), and side
    by side (context, T x D); and the attention's output A = merge(Z) W_O + b_O (T, D).
    `masked`: a padded batch's padding keys (attention.padding_mask), or None. With
    `blocks`, the scores and weights a block of query rows at a time, each handed to its
    consumer and not kept (layers.attention_of). Without `values`, Q, K and the weights
    alone: no V, Z or A is made."""
    p = f"encoder.layer.{l}.attention"
    Q = dense(X, weights, f"{p}.self.query")  # (T, D)
    K = dense(X, weights, f"{p}.self.key")  # (T, D)
    if not values:
        return {"Q": Q, "K": K, **layers.attention_of(Q, K, None, l, config, masked, blocks)[0]}
    V = dense(X, weights, f"{p}.self.value")  # (T, D)
    kept, Z = layers.attention_of(Q, K, V, l, config, masked, blocks)  # omega and alpha (H, T, T), or none; (T, D)
    A = dense(Z, weights, f"{p}.output.dense")  # (T, D)
    return {"Q": Q, "K": K, "V": V, **kept, "Z": attention.split_heads(Z, config.heads), "context": Z, "A": A}


def projections(weights: dict, l: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Layer l's W_query, W_key, W_value (D, D), as (in, out), and their biases (D,)."""
    p = f"encoder.layer.{l}.attention.self"
    return ({f"W_{r}": weights[f"{p}.{r}.weight"].T for r in ("query", "key", "value")},
            {f"b_{r}": weights[f"{p}.{r}.bias"] for r in ("query", "key", "value")})


def passed_on(V: np.ndarray, weights: dict, l: int, config: Config) -> np.ndarray:
    """What each head of layer l passes on for each token, f^h(x_j) = v^h_j W_O^h: its value
    through the head's rows of the output projection, so that the attention's output is
    sum_h sum_j alpha^h_ij f^h(x_j) + b_O. V (T, D) -> (H, T, D)."""
    W_O = attention.floating(weights[f"encoder.layer.{l}.attention.output.dense.weight"].T)  # (D, D)
    Vh = attention.split_heads(V, config.heads)  # (H, T, d_head)
    W_Oh = W_O.reshape(config.heads, config.d_head, config.hidden)  # (H, d_head, D)
    with np.errstate(all="ignore"):  # checked just below
        return finite(Vh @ W_Oh, f"layer {l + 1}'s values through its output projection")  # (H, T, D)


def feed_forward(X: np.ndarray, weights: dict, l: int, config: Config) -> np.ndarray:
    """GELU(X W_1 + b_1) W_2 + b_2, row by row."""
    inner = gelu(dense(X, weights, f"encoder.layer.{l}.intermediate.dense"), config.activation)  # (T, F)
    return dense(inner, weights, f"encoder.layer.{l}.output.dense")  # (T, D)


def after_attention(Y: np.ndarray, weights: dict, l: int, config: Config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rest of layer l from the attention's residual sum Y = X + A (..., T, D): X' =
    LayerNorm(Y), the feed-forward's residual sum X' + FFN(X'), and X_l, its norm."""
    X1 = norm(Y, weights, f"encoder.layer.{l}.attention.output.LayerNorm", config)  # (..., T, D)
    S = X1 + feed_forward(X1, weights, l, config)  # (..., T, D)
    return X1, S, norm(S, weights, f"encoder.layer.{l}.output.LayerNorm", config)  # (..., T, D)


def layer(X: np.ndarray, weights: dict, l: int, config: Config, masked: np.ndarray | None = None,
          blocks: layers.Blocks | None = None, part: str = "whole") -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """X_l from X_{l-1}, and the steps of its attention (over the keys `masked` leaves; its
    weights a block of rows at a time with `blocks`), or only the `part` of it a consumer
    reads (layers.every_layer)."""
    steps = attend(X, weights, l, config, masked, blocks, values=part != "weights")
    if part != "whole":
        return None, steps
    return after_attention(X + steps["A"], weights, l, config)[-1], steps  # (T, D)


def block(X: np.ndarray, weights: dict, l: int, config: Config) -> layers.Block:
    """Layer l over X (T, D) in the parts contributions.py takes apart: its residual is X,
    its norms the two after the residual sums, as this pass applied them."""
    p = f"encoder.layer.{l}"
    steps = attend(X, weights, l, config)
    Y = X + steps["A"]  # (T, D)
    _, S, out = after_attention(Y, weights, l, config)
    norms = tuple(layers.Norm.of(M, weights[f"{name}.weight"], weights[f"{name}.bias"], config.norm_eps)
                  for M, name in ((Y, f"{p}.attention.output.LayerNorm"), (S, f"{p}.output.LayerNorm")))
    return layers.Block(steps["weights"], passed_on(steps["V"], weights, l, config),
                        attention.floating(weights[f"{p}.attention.output.dense.bias"]), X, Y, norms, out,
                        lambda Y: after_attention(Y, weights, l, config)[-1])


def run_bytes(T: int, config: Config, rows: int | None = None) -> int:
    """Memory run() holds at its peak for T pieces beside what its consumer keeps: the work
    of one layer (its own and the softmax's (H, T, T) arrays and the steps it hands on, or
    with `rows` R, (H, R, T) ones; about six (T, F) or (T, D) ones, GELU's output and its
    work, a block of layers.BLOCK numbers at a time, ten (T, F) in all to be safe, and room
    for two weight matrices more), float64, and the weights widened, a layer's or a small
    model's every layer's (layers.widened_held)."""
    H, D, F, R = config.heads, config.hidden, config.intermediate, min(T, rows or T)
    return 8 * (6 * H * R * T + 10 * T * max(D, F) + 2 * D * max(D, F)) + layers.widened_held(expected_shapes, config)


def pass_bytes(T: int, config: Config) -> int:
    """Memory forward() holds at its peak for T pieces: what Kept holds (layers.kept_bytes:
    every layer's weights and hidden states; a kept layer's steps are within run_bytes'),
    beside the work of one layer."""
    return layers.kept_bytes(T, config) + run_bytes(T, config)


def run(ids: np.ndarray, weights: dict, config: Config, to: layers.Consumer, *,
        lengths: np.ndarray | None = None, rows: int | None = None) -> None:
    """Every layer over the word pieces `ids` (T,), each handed to `to` as it is made
    (layers.Consumer); or over a batch (B, T) of sentences padded on the right, of `lengths`
    (B,), their padding keys masked (layers.forward_many). With `rows` R, each layer's
    attention a block of R query rows at a time, each block handed to to.rows() and let go
    (a long text: nothing T x T is held). Numbers that overflow are refused after the
    embeddings, at each layer's scores and at each layer's output (ModelError), and numpy
    says nothing of them."""
    with np.errstate(all="ignore"):
        ids = np.asarray(ids)
        X = finite(embed(ids, weights, config), "the embeddings")  # ([B,] T, D)
        masked = None if lengths is None else attention.padding_mask(lengths, ids.shape[-1])  # (B, 1, 1, T)
        blocks = None if rows is None else layers.Blocks(rows, to)
        every_layer(X, config, lambda X, l, part: layer(X, weights, l, config, masked, blocks, part), to)


def forward(ids: np.ndarray, weights: dict, config: Config, *, keep: tuple[int, ...] = (),
            lengths: np.ndarray | None = None) -> Pass:
    """run(), every layer's hidden states (L + 1, [B,] T, D) and weights (L, [B,] H, T, T)
    kept, and the attention steps of the layers in `keep` (indices from 0)."""
    kept = Kept(config, keep)
    run(ids, weights, config, kept, lengths=lengths)
    return kept.result


def blocks(ids: np.ndarray, weights: dict, config: Config) -> list[layers.Block]:
    """Every layer over the word pieces `ids` (T,), each as block() gives it."""
    with np.errstate(all="ignore"):
        X, out = finite(embed(np.asarray(ids), weights, config), "the embeddings"), []  # (T, D)
        for l in range(config.layers):
            out.append(block(X, weights, l, config))
            X = finite(out[-1].output, f"the hidden states after layer {l + 1}")  # (T, D)
        return out


def run_from(X: np.ndarray, start: int, weights: dict, config: Config) -> np.ndarray:
    """The last hidden states from layer `start`'s input X (..., T, D): a batch of inputs of
    one length at once (the attention of each its own), no step kept."""
    with np.errstate(all="ignore"):
        for l in range(start, config.layers):
            X = finite(layer(X, weights, l, config)[0], f"the hidden states after layer {l + 1}")  # (..., T, D)
        return X


def embedded(ids: np.ndarray, weights: dict, config: Config) -> np.ndarray:
    """X_0 of a batch of inputs `ids` (B, T) of one length: (B, T, D)."""
    with np.errstate(all="ignore"):
        return finite(embed(np.asarray(ids), weights, config), "the embeddings")
