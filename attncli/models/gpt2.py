"""GPT-2's forward pass in numpy, a decoder whose attention is computed by attention.py.

Radford et al., "Language Models are Unsupervised Multitask Learners" (2019), on the
Transformer decoder of Vaswani et al. (2017), with the layer norm moved to each block's
input. For word pieces w_1 .. w_T (the sentence's own, with a marker where its tokenizer puts one):

    X_0 = E_word[w] + E_position[0 .. T-1]

and each layer l = 1 .. L maps X_{l-1} to X_l, a norm before each half of the block:

    N   = LayerNorm_1(X)
    Q, K, V = N W_Q + b_Q, N W_K + b_K, N W_V + b_V             project (c_attn, split in three)
    per head h: alpha_h = softmax(Q_h K_h^T / sqrt(d_head) + M)  multi_head: split_heads,
                Z_h     = alpha_h V_h                              scores, weights, context,
    A   = merge(Z_1 .. Z_H) W_O + b_O                              merge_heads; project (c_proj)
    X'  = X + A
    X_l = X' + GELU_tanh(LayerNorm_2(X') W_1 + b_1) W_2 + b_2     (mlp: c_fc, gelu_new, c_proj)

where M is the causal mask: -inf where j > i, so that piece i attends only to itself and the
pieces before it, exactly 0 weight after it. After the last layer, the final norm:

    X_L = LayerNorm_f(X_L)
    logits = X_L E_word^T                                          the word embeddings, tied

(or a separate lm_head, where config.json unties them), the scores of every next piece.

Dimensions: T word pieces, D the hidden size (n_embd), H heads (n_head) of d_head = D / H,
F the feed-forward size (n_inner, 4 D by default), L layers (n_layer), V the vocabulary.

Its files: config.json's n_* keys, and the tensors' names with or without "transformer."
(the hub's gpt2 stores h.0.attn.c_attn.weight, GPT2LMHeadModel.save_pretrained writes
transformer.h.0.attn.c_attn.weight). GPT-2's Conv1D stores a weight as (in, out), the
transpose of a Linear's: X W is the stored weight itself. The buffers attn.bias and
attn.masked_bias some files hold (the causal mask, as torch kept it) are never read: the
mask is made here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli import attention
from attncli.errors import ModelError
from attncli.models import layers, tokenizer
from attncli.models.layers import Config, Kept, Pass, every_layer, finite, gelu, norm, rows_of


MODEL_TYPES = ("gpt2",)  # config.json's model_type
CAUSAL = True  # a decoder: each piece attends to itself and the pieces before it
# Sizes past these are not a model this tool can run in seconds (bert.MOST's, by GPT-2's names)
MOST = {"n_layer": 128, "n_head": 256, "n_embd": 16_384, "n_positions": 65_536, "vocab_size": 10_000_000}
INNER_MOST = 65_536  # n_inner, F
ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}
# config.json's switches of GPT-2's attention, each with the value attncli runs. Both change
# the scale 1/sqrt(d_head) that documents name. reorder_and_upcast_attn is not among them:
# it only moves torch's product to float32, and attncli's is float64 throughout.
SWITCHES = {"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False}


@dataclass(frozen=True)
class GPT2Config(Config):
    tied: bool = True  # the logits through the word embeddings (tie_word_embeddings), or through lm_head


def read_config(raw: dict, path: Path) -> GPT2Config:
    """config.json's sizes and switches (`raw`, read from `path`), each checked."""
    sizes = {key: layers.whole(raw, key, path, 1, most) for key, most in MOST.items()}
    D, H = sizes["n_embd"], sizes["n_head"]
    if D % H:
        raise ModelError(f"{path}: n_embd {D} is not divisible by n_head {H}")
    # n_inner null (as GPT-2's own config.json has it) is 4 D, at most 4 MOST["n_embd"]
    inner = 4 * D if raw.get("n_inner") is None else layers.whole(raw, "n_inner", path, 1, INNER_MOST)
    act = raw.get("activation_function", "gelu_new")
    if not isinstance(act, str) or act not in ACTIVATIONS:
        raise ModelError(f"{path}: activation_function is {act!r}; attncli runs {', '.join(ACTIVATIONS)}")
    for key, runs in SWITCHES.items():
        if _flag(raw, key, runs, path) != runs:
            raise ModelError(f"{path}: {key} is {not runs}; attncli runs GPT-2's attention with {key} "
                             f"{str(runs).lower()} (a scale of 1/sqrt(d_head) in every layer)")
    _flag(raw, "reorder_and_upcast_attn", False, path)
    return GPT2Config(layers=sizes["n_layer"], heads=H, hidden=D, intermediate=inner,
                      max_positions=sizes["n_positions"], vocab_size=sizes["vocab_size"],
                      norm_eps=layers.epsilon(raw, "layer_norm_epsilon", 1e-5, path), activation=ACTIVATIONS[act],
                      tied=_flag(raw, "tie_word_embeddings", True, path))


def _flag(raw: dict, key: str, default: bool, path: Path) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ModelError(f"{path}: {key} is {value!r}; it must be true or false")
    return value


def expected_shapes(config: GPT2Config) -> dict[str, tuple[int, ...]]:
    """Every tensor the forward pass and the logits read, by its name without "transformer.",
    and its shape: Conv1D's weights (in, out)."""
    D, F, V = config.hidden, config.intermediate, config.vocab_size
    shapes = {"wte.weight": (V, D), "wpe.weight": (config.max_positions, D), "ln_f.weight": (D,), "ln_f.bias": (D,)}
    for l in range(config.layers):
        p = f"h.{l}"
        for name, shape in ((f"{p}.attn.c_attn", (D, 3 * D)), (f"{p}.attn.c_proj", (D, D)),
                            (f"{p}.mlp.c_fc", (D, F)), (f"{p}.mlp.c_proj", (F, D))):
            shapes[f"{name}.weight"], shapes[f"{name}.bias"] = shape, shape[1:]
        for name in (f"{p}.ln_1", f"{p}.ln_2"):
            shapes[f"{name}.weight"], shapes[f"{name}.bias"] = (D,), (D,)
    if not config.tied:
        shapes["lm_head.weight"] = (V, D)
    return shapes


def stored_name(name: str, header: dict) -> str | None:
    """The name a tensor has in the file: with or without "transformer." (lm_head's never has it)."""
    for candidate in (name, f"transformer.{name}"):
        if candidate in header:
            return candidate
    return None


# --- a GGUF file's model (gguf_file.py reads the file)

GGUF_ARCHITECTURES = {"gpt2": "gpt2"}  # general.architecture -> model_type
# the family's names -> llama.cpp's (gguf-py's tensor_mapping.py), a layer's (under "h.N.") under blk.N.
GGUF_LAYERS = "h"
GGUF_NAMES = {"wte": "token_embd", "wpe": "position_embd", "ln_f": "output_norm", "lm_head": "output",
              "ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
              "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}


def gguf_transposed(name: str) -> bool:
    """Whether a GGUF holds the tensor `name` transposed from the family's shape: a Conv1D's
    weight, which llama.cpp's converter writes (out, in), as a Linear's (GPT2Model's
    modify_tensors; transformers' GPT2TensorProcessor turns it back)."""
    return name.endswith(".weight") and any(f".{part}." in name for part in ("c_attn", "c_proj", "c_fc"))


def gguf_permuted(name: str, config: GPT2Config, architecture: str) -> int:
    """GPT-2's learned positions need no RoPE layout: nothing is permuted."""
    return 0


def gguf_config(header) -> GPT2Config:
    """The config a GGUF file's metadata (gguf_file.Header) declares, as config.json's keys
    read_config checks (transformers' GGUF_CONFIG_MAPPING for gpt2)."""
    header.need("block_count", "embedding_length", "feed_forward_length", "attention.head_count", "context_length",
                "attention.layer_norm_epsilon")

    def get(key):
        return header.get(f"gpt2.{key}")

    embed = header.tensors.get("token_embd.weight")
    raw = {"model_type": "gpt2", "n_layer": get("block_count"), "n_embd": get("embedding_length"),
           "n_head": get("attention.head_count"), "n_inner": get("feed_forward_length"),
           "n_positions": get("context_length"), "layer_norm_epsilon": get("attention.layer_norm_epsilon"),
           "vocab_size": embed.shape[0] if embed is not None else len(header.get("tokenizer.ggml.tokens") or ()),
           "tie_word_embeddings": "output.weight" not in header.tensors}
    return read_config({k: v for k, v in raw.items() if v is not None}, Path(f"{header.path} (its metadata)"))


def read_tokenizer(where: Path, config: Config):
    """GPT-2's byte-level BPE, checked by tokenizer.read, with the markers its post_processor
    puts around a sentence (GPT-2's none; a fine-tune's may put <|endoftext|> first)."""
    return tokenizer.read(where, config, family="GPT-2", kinds=("BPE",), auto=tokenizer.Auto("GPT2Tokenizer"))


def embed(ids: np.ndarray, weights: dict, config: Config, start: int = 0) -> np.ndarray:
    """X_0: each piece's word embedding plus its position's (no norm: each block norms its
    input), the positions from `start` (the pieces before them, cached)."""
    T = ids.shape[-1]
    return rows_of(weights, "wte.weight", ids) + rows_of(weights, "wpe.weight", slice(start, start + T))  # (..., T, D)


def conv1d(X: np.ndarray, weights: dict, name: str) -> np.ndarray:
    """X W + b of the Conv1D `name`, whose weight is stored (in, out): attention.project."""
    return attention.project(X, weights[f"{name}.weight"], weights[f"{name}.bias"])


def mask(T: int, config: Config, rows: slice = slice(None)) -> np.ndarray:
    """(T, T) True where piece i may not attend to piece j: every j after i; for the query
    rows `rows` only, (R, T)."""
    return attention.causal_mask(T, rows)


def attend(X: np.ndarray, weights: dict, l: int, config: Config, masked,
           blocks: layers.Blocks | None = None, values: bool = True,
           cache: layers.Cache | None = None) -> dict[str, np.ndarray]:
    """Layer l's self-attention over its normed input X (T, D), every step kept: Q, K, V
    (T, D); per head the scores omega and weights alpha (H, T, T) and context vectors Z
    (H, T, d_head), and side by side (context, T x D); and the output A = merge(Z) W_O + b_O.
    `masked` is the causal mask (T, T), or the function of a block's rows that gives its
    rows (mask(T, config, rows)). With `blocks`, the scores and weights a block of query
    rows at a time, each handed to its consumer and not kept (layers.attention_of). Without
    `values`, Q, K and the weights alone: c_attn's first two column blocks, no V, Z or A.
    With `cache`, X is the rows from cache.start on: their keys and values are appended to
    the cached ones, and the rows attend over all (`masked` their rows of the whole mask)."""
    p = f"h.{l}.attn"
    D = config.hidden
    if not values:
        QK = attention.project(X, weights[f"{p}.c_attn.weight"][:, :2 * D], weights[f"{p}.c_attn.bias"][:2 * D])
        Q, K = QK[..., :D], QK[..., D:]  # (T, D) each
        return {"Q": Q, "K": K, **layers.attention_of(Q, K, None, l, config, masked, blocks)[0]}
    QKV = conv1d(X, weights, f"{p}.c_attn")  # (T, 3D)
    Q, K, V = QKV[..., :D], QKV[..., D:2 * D], QKV[..., 2 * D:]  # (R, D) each
    if cache is not None:
        K, V = cache.extend(l, K, V)  # (T, D): every piece's, the cached first
    kept, Z = layers.attention_of(Q, K, V, l, config, masked, blocks)  # omega and alpha (H, T, T), or none; (T, D)
    A = conv1d(Z, weights, f"{p}.c_proj")  # (T, D)
    return {"Q": Q, "K": K, "V": V, **kept, "Z": attention.split_heads(Z, config.heads), "context": Z, "A": A}


def projections(weights: dict, l: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Layer l's W_query, W_key, W_value (D, D), as (in, out): c_attn's three column blocks;
    and their biases (D,)."""
    W, b = weights[f"h.{l}.attn.c_attn.weight"], weights[f"h.{l}.attn.c_attn.bias"]  # (D, 3D), (3D,)
    D = W.shape[0]
    roles = ("query", "key", "value")
    return ({f"W_{r}": W[:, k * D:(k + 1) * D] for k, r in enumerate(roles)},
            {f"b_{r}": b[k * D:(k + 1) * D] for k, r in enumerate(roles)})


def passed_on(V: np.ndarray, weights: dict, l: int, config: Config) -> np.ndarray:
    """What each head of layer l passes on for each token, f^h(x_j) = v^h_j W_O^h: its value
    through the head's rows of c_proj, so that the attention's output is
    sum_h sum_j alpha^h_ij f^h(x_j) + b_O. V (T, D) -> (H, T, D)."""
    W_O = attention.floating(weights[f"h.{l}.attn.c_proj.weight"])  # (D, D), stored (in, out)
    Vh = attention.split_heads(V, config.heads)  # (H, T, d_head)
    W_Oh = W_O.reshape(config.heads, config.d_head, config.hidden)  # (H, d_head, D)
    with np.errstate(all="ignore"):  # checked just below
        return finite(Vh @ W_Oh, f"layer {l + 1}'s values through its output projection")  # (H, T, D)


def feed_forward(X: np.ndarray, weights: dict, l: int, config: Config) -> np.ndarray:
    """GELU(X W_1 + b_1) W_2 + b_2, row by row (c_fc, then c_proj)."""
    inner = gelu(conv1d(X, weights, f"h.{l}.mlp.c_fc"), config.activation)  # (T, F)
    return conv1d(inner, weights, f"h.{l}.mlp.c_proj")  # (T, D)


def after_attention(Y: np.ndarray, weights: dict, l: int, config: Config) -> np.ndarray:
    """The rest of layer l from the attention's residual sum Y = X + A (..., T, D): the
    feed-forward's output over Y normed, added to Y."""
    return Y + feed_forward(norm(Y, weights, f"h.{l}.ln_2", config), weights, l, config)  # (..., T, D)


def layer(X: np.ndarray, weights: dict, l: int, config: Config, masked,
          blocks: layers.Blocks | None = None, part: str = "whole",
          cache: layers.Cache | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """X_l from X_{l-1}, and the steps of its attention (its weights a block of rows at a
    time with `blocks`), or only the `part` of it a consumer reads (layers.every_layer):
    each half of the block adds to the residual stream what it makes of that stream normed.
    With `cache`, of the rows after the cached pieces (attend)."""
    steps = attend(norm(X, weights, f"h.{l}.ln_1", config), weights, l, config, masked, blocks,
                   values=part != "weights", cache=cache)
    if part != "whole":
        return None, steps
    return after_attention(X + steps["A"], weights, l, config), steps  # (T, D)


def shown(X: np.ndarray, l: int, weights: dict, config: Config) -> np.ndarray:
    """Layer l's output as transformers' hidden_states give it: the last after the final norm."""
    return norm(X, weights, "ln_f", config) if l == config.layers - 1 else X


def block(X: np.ndarray, weights: dict, l: int, config: Config, masked: np.ndarray) -> layers.Block:
    """Layer l over X (T, D) in the parts contributions.py takes apart: its residual is X
    itself, not normed, its first norm inside f (on the attention's input); no norm after
    the residual sum."""
    steps = attend(norm(X, weights, f"h.{l}.ln_1", config), weights, l, config, masked)
    Y = X + steps["A"]  # (T, D)
    return layers.Block(steps["weights"], passed_on(steps["V"], weights, l, config),
                        attention.floating(weights[f"h.{l}.attn.c_proj.bias"]), X, Y, (),
                        after_attention(Y, weights, l, config),
                        lambda Y: shown(after_attention(Y, weights, l, config), l, weights, config))


LOGIT_ROWS = 4096  # rows of the head widened to float64 at a time: 25 MB at GPT-2's D = 768, not its 309 MB whole


def logits(X: np.ndarray, weights: dict, config: GPT2Config) -> np.ndarray:
    """The scores of every next piece after each row of X (T, D), the final normed hidden
    states: X E_word^T, or X W_lm^T where the head is untied (T, V), a block of the
    vocabulary at a time."""
    head = "wte.weight" if config.tied else "lm_head.weight"  # (V, D)
    out = np.empty((len(X), config.vocab_size))  # (T, V)
    with np.errstate(all="ignore"):  # checked just below
        for start in range(0, config.vocab_size, LOGIT_ROWS):
            part = rows_of(weights, head, slice(start, start + LOGIT_ROWS))  # (LOGIT_ROWS, D)
            out[:, start:start + LOGIT_ROWS] = attention.project(X, part.T)
    return finite(out, "the logits")  # (T, V)


def readout(X: np.ndarray, ids: np.ndarray, weights: dict, config: GPT2Config) -> tuple[np.ndarray, np.ndarray]:
    """The logit of piece ids[k] after the last hidden state X[k] (N, D), before the final
    norm, as a linear map of that state's parts: logit = u_k . x + c_k summed over any parts
    x of X[k], the norm held at X[k]'s own factor (as layers.Norm holds one). With g = gamma
    * E_w, the word's row of the head scaled, u_k = (g - mean(g)) / sqrt(var(X[k]) + eps), the
    norm's centring moved onto the row, and c_k = E_w . beta. -> u (N, D), c (N,)"""
    head = "wte.weight" if config.tied else "lm_head.weight"  # (V, D)
    E = attention.floating(rows_of(weights, head, np.asarray(ids)))  # (N, D)
    final = layers.Norm.of(X, weights["ln_f.weight"], weights["ln_f.bias"], config.norm_eps)
    g = final.gamma * E  # (N, D)
    return (g - g.mean(axis=-1, keepdims=True)) * final.factor, E @ final.beta  # (N, D), (N,)


def run_bytes(T: int, config: Config, rows: int | None = None) -> int:
    """Memory run() holds at its peak for T pieces beside what its consumer keeps: the mask
    and the work of one layer (its own and the softmax's (H, T, T) arrays and the steps it
    hands on, or with `rows` R, (H, R, T) ones and the mask's R rows; about six (T, F) or
    (T, 3D) ones and GELU's (T, F), and room for two weight matrices more), float64, and the
    weights widened, a layer's or a small model's every layer's (layers.widened_held)."""
    H, D, F, R = config.heads, config.hidden, config.intermediate, min(T, rows or T)
    return (8 * (6 * H * R * T + 10 * T * max(3 * D, F) + 2 * D * max(3 * D, F)) + R * T
            + layers.widened_held(expected_shapes, config))


def pass_bytes(T: int, config: Config) -> int:
    """Memory forward() holds at its peak for T pieces: what Kept holds (layers.kept_bytes:
    every layer's weights and hidden states; a kept layer's steps are within run_bytes'),
    beside the work of one layer."""
    return layers.kept_bytes(T, config) + run_bytes(T, config)


def run(ids: np.ndarray, weights: dict, config: Config, to: layers.Consumer, *,
        lengths: np.ndarray | None = None, rows: int | None = None, cache: layers.Cache | None = None) -> None:
    """Every layer over the word pieces `ids` (T,), each handed to `to` as it is made
    (layers.Consumer), or over a batch (B, T) of sentences padded on the right (their
    `lengths` need no mask of their own: the causal mask hides every later piece, the
    padding among them); the last hidden states are after the final norm, as transformers
    gives them. With `rows` R, each layer's attention a block of R query rows at a time,
    each block handed to to.rows() and let go, the mask made a block's rows at a time too
    (a long text: nothing T x T is held). Numbers that overflow are refused after the
    embeddings, at each layer's scores and at each layer's output (ModelError), and numpy
    says nothing of them. With `cache` (layers.Cache), `ids` are the pieces after those
    cached, at their positions from cache.start: each layer's weights (H, T, start + T)."""
    with np.errstate(all="ignore"):
        ids = np.asarray(ids)
        T = ids.shape[-1]
        start = 0 if cache is None else cache.start
        X = finite(embed(ids, weights, config, start), "the embeddings")  # ([B,] T, D)
        if start:  # the rows after the cached pieces: theirs of the whole mask (T, start + T)
            masked = mask(start + T, config, slice(start, start + T))
        else:
            masked = mask(T, config) if rows is None else (lambda block: mask(T, config, block))  # (T, T), or a block's
        blocks = None if rows is None else layers.Blocks(rows, to)
        # the last state after the final norm, as transformers gives it, over X_L in the
        # working precision, as Kept holds it
        every_layer(X, config, lambda X, l, part: layer(X, weights, l, config, masked, blocks, part, cache), to,
                    shown=lambda X: finite(norm(attention.floating(X), weights, "ln_f", config),
                                           "the hidden states after the final norm"))
        if cache is not None:
            cache.advance(T)


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
        X, masked, out = finite(embed(np.asarray(ids), weights, config), "the embeddings"), mask(len(ids), config), []
        for l in range(config.layers):
            out.append(block(X, weights, l, config, masked))
            X = finite(out[-1].output, f"the hidden states after layer {l + 1}")  # (T, D)
        return out


def run_from(X: np.ndarray, start: int, weights: dict, config: Config) -> np.ndarray:
    """The last hidden states (after the final norm) from layer `start`'s input X
    (..., T, D): a batch of inputs of one length at once, no step kept."""
    with np.errstate(all="ignore"):
        masked = mask(X.shape[-2], config)  # (T, T)
        for l in range(start, config.layers):
            X = finite(layer(X, weights, l, config, masked)[0], f"the hidden states after layer {l + 1}")
        return finite(norm(X, weights, "ln_f", config), "the hidden states after the final norm")  # (..., T, D)


def embedded(ids: np.ndarray, weights: dict, config: Config) -> np.ndarray:
    """X_0 of a batch of inputs `ids` (B, T) of one length: (B, T, D)."""
    with np.errstate(all="ignore"):
        return finite(embed(np.asarray(ids), weights, config), "the embeddings")
