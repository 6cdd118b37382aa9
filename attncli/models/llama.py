"""A trained Llama-family decoder's forward pass in numpy (Llama, Mistral, Qwen2), its
attention computed by attention.py.

Touvron et al., "LLaMA" (2023), and the models built the same way: Mistral (Jiang et al.
2023) adds a sliding window, Qwen2 (Yang et al. 2024) biases on its queries, keys and
values. For word pieces w_1 .. w_T (a BOS first where the tokenizer adds one):

    X_0 = E_word[w]                                         no positions added: RoPE turns Q and K

and each layer l = 1 .. L maps X_{l-1} to X_l, around RMSNorm before each half (norm):

    N   = RMSNorm(X)
    Q   = rotate(N W_Q (+ b_Q)), K = rotate(N W_K (+ b_K)), V = N W_V (+ b_V)   H, KV, KV heads
    K, V shared: query head h uses key/value head h // (H / KV)                 share_heads
    per head h: alpha_h = softmax(Q_h K_h^T / sqrt(d_head), masked)          multi_head
                Z_h     = alpha_h V_h
    X'  = X + merge(Z_1 .. Z_H) W_O (+ b_O)
    X_l = X' + (SiLU(N' W_gate) * N' W_up) W_down,  N' = RMSNorm(X')          SwiGLU

The mask is causal (a piece attends to itself and those before it) and, with a sliding
window w, hides the pieces w or more places back. The last hidden state, as transformers
gives it, is after a final RMSNorm; the logits are that state through the LM head (the
word embeddings again, where tie_word_embeddings says so).

Every step of the attention is attention.py's: rotate (rotary embeddings: Su et al.,
"RoFormer", 2021, in transformers' layout of halves), share_heads (grouped-query
attention), multi_head, causal_mask and causal_window_mask. Nothing of it is written here.

Dimensions: T word pieces, D the hidden size, H query heads and KV key/value heads of
d_head each (config.json's head_dim, or D / H), F the feed-forward size, L layers, V the
vocabulary. Arithmetic is float64; the weights stay as stored in their files, a layer's
widened as its pass reads them (weights.Weights).

Its files: config.json's keys as transformers 5 reads them for model_type llama, mistral
and qwen2 (RoPE under rope_parameters, or under the older rope_scaling and rope_theta),
the tensors' names with or without "model.", and a tokenizer.json.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attncli import attention, rotary
from attncli.errors import ModelError
from attncli.models import layers, tokenizer
from attncli.models.layers import Config, Kept, Pass, dense, every_layer, finite, rms_norm, rows_of, silu, whole
from attncli.system import limits, reading


MODEL_TYPES = ("llama", "mistral", "qwen2")  # config.json's model_type
# Each model type's name and the transformers class that reads its tokenizer where
# tokenizer_config.json names none: for Llama none (TokenizersBackend), for Mistral
# TokenizersBackend whatever it names (mistral_common not installed), for Qwen2 Qwen2Tokenizer
# whatever it names (DeepSeek-R1-Distill-Qwen's names LlamaTokenizerFast). Each puts the
# markers tokenizer.json's post_processor puts.
TOKENIZERS = {"llama": ("Llama", tokenizer.Auto(None)), "mistral": ("Mistral", tokenizer.Auto("TokenizersBackend")),
              "qwen2": ("Qwen2", tokenizer.Auto("Qwen2Tokenizer", overrules=True))}
CAUSAL = True  # a decoder: each piece attends to itself and the pieces before it
LINEAR_LAYOUT = True  # its weights are Linear layers' (out, in), which weights.Weights widens laid out for X W
# Sizes past these are not a model this tool can run in seconds: a config that declares
# them is refused before anything of its size is read. Positions cost nothing until a
# sentence has them (RoPE is computed for the T pieces there are), so their bound is loose.
MOST = {"num_hidden_layers": 128, "num_attention_heads": 256, "hidden_size": 16_384, "intermediate_size": 65_536,
        "max_position_embeddings": 1 << 24, "vocab_size": 10_000_000}
HEAD_DIM_MOST = 1_024
ACTIVATIONS = ("silu", "swish")  # transformers' ACT2FN runs both as SiLU
# What transformers' config classes give a key config.json leaves out, where they differ:
# Mistral's and Qwen2's own defaults, where Llama's key/value heads default to its heads
DEFAULTS = {"llama": {"num_key_value_heads": None, "sliding_window": None},
            "mistral": {"num_key_value_heads": 8, "sliding_window": 4096},
            "qwen2": {"num_key_value_heads": 32, "sliding_window": 4096}}
ROPE_TYPES = ("default", "linear", "llama3")
LAYER_TYPES = ("full_attention", "sliding_attention")


@dataclass(frozen=True)
class Rope:
    """The rotary embeddings' frequencies: base theta, and their scaling ("default": none;
    "linear": every frequency divided by factor, as if the positions were; "llama3": by
    wavelength, rotary.llama3_frequencies)."""

    theta: float = 10_000.0
    kind: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_positions: int = 8_192
    factors: tuple[float, ...] = ()  # a GGUF's rope_freqs: each frequency divided by its own factor, after the above


@dataclass(frozen=True)
class LlamaConfig(Config):
    rope: Rope = field(default_factory=Rope)
    window: int = 0  # a sliding window of this many pieces (its own and window - 1 before); 0: none
    qkv_bias: bool = False  # biases on q_proj, k_proj, v_proj (Qwen2's; a Llama's with attention_bias)
    o_bias: bool = False  # a bias on o_proj (a Llama's with attention_bias)
    tied: bool = False  # the LM head is the word embeddings (tie_word_embeddings)
    model_type: str = "llama"  # config.json's, which says what its tokenizer puts around a sentence (TOKENIZERS)


def _number(raw: dict, key: str, path: Path, least: float, what: str, default: float | None = None) -> float:
    value = raw.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < least:
        raise ModelError(f"{path}: {key} is {value!r}; it must be {what}")
    return float(value)


def _flag(raw: dict, key: str, path: Path, default: bool = False) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ModelError(f"{path}: {key} is {value!r}; it must be true or false")
    return value


def read_config(raw: dict, path: Path) -> LlamaConfig:
    """config.json's sizes (`raw`, read from `path`), each checked, and what transformers
    reads besides for its model_type: the key/value heads, head_dim, RoPE, the sliding
    window, the biases, the tied LM head. What attncli does not run is refused by name."""
    kind = raw["model_type"]
    sizes = {key: whole(raw, key, path, 1, most) for key, most in MOST.items()}
    H, D = sizes["num_attention_heads"], sizes["hidden_size"]
    given = {**DEFAULTS[kind], **raw}
    kv = H if given["num_key_value_heads"] is None else whole(given, "num_key_value_heads", path, 1, H)
    if H % kv:
        raise ModelError(f"{path}: num_key_value_heads {kv} does not divide num_attention_heads {H}: each key/value "
                         "head serves a whole group of query heads")
    head_dim = raw.get("head_dim")
    if head_dim is None:
        if D % H:
            raise ModelError(f"{path}: hidden_size {D} is not divisible by num_attention_heads {H}, and no head_dim "
                             "is given")
        head_dim = D // H
    head_dim = whole({"head_dim": head_dim}, "head_dim", path, 2, HEAD_DIM_MOST)
    if head_dim % 2:
        raise ModelError(f"{path}: head_dim is {head_dim}; rotary embeddings turn pairs of features, so it must be "
                         "even")
    eps = layers.epsilon(raw, "rms_norm_eps", 1e-6, path)
    act = raw.get("hidden_act", "silu")
    if act not in ACTIVATIONS:
        raise ModelError(f"{path}: hidden_act is {act!r}; attncli runs the Llama family's silu")
    if kind == "llama" and _flag(raw, "mlp_bias", path):
        raise ModelError(f"{path}: mlp_bias is true; attncli runs Llama models whose feed-forward layers have no "
                         "biases")
    bias = kind == "llama" and _flag(raw, "attention_bias", path)
    return LlamaConfig(layers=sizes["num_hidden_layers"], heads=H, hidden=D, intermediate=sizes["intermediate_size"],
                       max_positions=sizes["max_position_embeddings"], vocab_size=sizes["vocab_size"],
                       norm_eps=eps, activation="silu", kv_heads=kv, head_dim=head_dim,
                       rope=read_rope(raw, path, sizes["max_position_embeddings"]),
                       window=read_window(given, path, kind, sizes["num_hidden_layers"]),
                       qkv_bias=kind == "qwen2" or bias, o_bias=bias,
                       tied=_flag(raw, "tie_word_embeddings", path), model_type=kind)


def read_rope(raw: dict, path: Path, max_positions: int) -> Rope:
    """RoPE's parameters as transformers 5 reads them: rope_scaling (the older key) or else
    rope_parameters, an object with rope_type (or type) and its own rope_theta, else
    config.json's rope_theta, else 10,000; linear and llama3 scalings run, any other is
    refused by name."""
    key = "rope_scaling" if raw.get("rope_scaling") else "rope_parameters"
    params = raw.get(key) or {}
    if not isinstance(params, dict):
        raise ModelError(f"{path}: {key} is {params!r}; it must be an object of RoPE's parameters")
    nested = next((k for k, v in params.items() if isinstance(v, dict)), None)
    if nested is not None:
        raise ModelError(f"{path}: {key} gives RoPE by layer type ({nested!r}); attncli runs one RoPE for every layer")
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise ModelError(f"{path}: {key} is of type {kind!r}; attncli runs rope_scaling of type linear or llama3 "
                         "(or none)")
    partial = params.get("partial_rotary_factor", raw.get("partial_rotary_factor", 1.0))
    if partial != 1:
        raise ModelError(f"{path}: partial_rotary_factor is {partial!r}; attncli turns every feature of a head (1.0)")
    theta = _number({"rope_theta": params.get("rope_theta", raw.get("rope_theta", 10_000.0))}, "rope_theta", path, 1,
                    "a number of at least 1")
    if kind == "default":
        return Rope(theta)
    where = f"{key}'s"
    factor = _number(params, "factor", path, 1, f"a number of at least 1 ({where} {kind} scaling)")
    if kind == "linear":
        return Rope(theta, kind, factor)
    low = _number(params, "low_freq_factor", path, 0, f"a number above 0 ({where} llama3 scaling)")
    high = _number(params, "high_freq_factor", path, 0, f"a number above low_freq_factor ({where} llama3 scaling)")
    if not 0 < low < high:
        raise ModelError(f"{path}: {key}'s low_freq_factor {low:g} and high_freq_factor {high:g}: llama3 scaling "
                         "needs 0 < low_freq_factor < high_freq_factor")
    original = {"original_max_position_embeddings": raw.get("original_max_position_embeddings",
                                                            params.get("original_max_position_embeddings",
                                                                       max_positions))}
    return Rope(theta, kind, factor, low, high,
                whole(original, "original_max_position_embeddings", path, 1, MOST["max_position_embeddings"]))


def read_window(given: dict, path: Path, kind: str, layers: int) -> int:
    """The sliding window every layer runs with (0: none), as transformers reads it: Llama
    has none; Mistral's sliding_window (null: none) is every layer's; Qwen2's is a layer's
    where use_sliding_window is true and its layer_types (or, without them, every layer
    from max_window_layers on) say sliding_attention. A model whose layers differ is refused."""
    if kind == "llama":
        return 0
    use = kind == "mistral" or _flag(given, "use_sliding_window", path)
    window = given["sliding_window"] if use else None
    if window is not None:
        window = whole(given, "sliding_window", path, 1, MOST["max_position_embeddings"])
    if kind == "mistral":
        return window or 0
    types = given.get("layer_types")
    if types is None:
        # the first layer with the window (Qwen2's default 28); one past the last: none has it
        first = 28 if window is None else whole({"max_window_layers": 28, **given}, "max_window_layers", path, 0,
                                                 MOST["max_position_embeddings"])
        types = ["sliding_attention" if window is not None and l >= first else "full_attention" for l in range(layers)]
    if not (isinstance(types, list) and len(types) == layers and all(t in LAYER_TYPES for t in types)):
        raise ModelError(f"{path}: layer_types must list one of {', '.join(LAYER_TYPES)} for each of its {layers} "
                         "layers")
    if len(set(types)) > 1:
        raise ModelError(f"{path}: its layers mix sliding_attention and full_attention (use_sliding_window, "
                         "max_window_layers, layer_types); attncli runs a sliding window on every layer or on none")
    if types[0] == "sliding_attention" and window is None:
        raise ModelError(f"{path}: layer_types says sliding_attention, and use_sliding_window is false or "
                         "sliding_window null: the window has no size")
    return window if types[0] == "sliding_attention" else 0


def expected_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the forward pass and the LM head read, by its name without "model.", and its shape."""
    D, F, V, d = config.hidden, config.intermediate, config.vocab_size, config.d_head
    Hd, KVd = config.heads * d, config.key_heads * d
    shapes = {"embed_tokens.weight": (V, D), "norm.weight": (D,)}
    for l in range(config.layers):
        p = f"layers.{l}"
        for name, shape, biased in ((f"{p}.self_attn.q_proj", (Hd, D), config.qkv_bias),
                                    (f"{p}.self_attn.k_proj", (KVd, D), config.qkv_bias),
                                    (f"{p}.self_attn.v_proj", (KVd, D), config.qkv_bias),
                                    (f"{p}.self_attn.o_proj", (D, Hd), config.o_bias),
                                    (f"{p}.mlp.gate_proj", (F, D), False), (f"{p}.mlp.up_proj", (F, D), False),
                                    (f"{p}.mlp.down_proj", (D, F), False)):
            shapes[f"{name}.weight"] = shape
            if biased:
                shapes[f"{name}.bias"] = shape[:1]
        shapes[f"{p}.input_layernorm.weight"] = shapes[f"{p}.post_attention_layernorm.weight"] = (D,)
    if not config.tied:
        shapes["lm_head.weight"] = (V, D)
    return shapes


def stored_name(name: str, header: dict) -> str | None:
    """The name a tensor has in the file: with "model." (a ForCausalLM's) or without (a bare model's)."""
    for candidate in (name, f"model.{name}"):
        if candidate in header:
            return candidate
    return None


def read_tokenizer(where: Path, config: LlamaConfig):
    """Its tokenizer.json, checked by tokenizer.read: SentencePiece's BPE with byte fallback
    (Llama 2's, Mistral's) or a byte-level one (Llama 3's, Qwen2's), with the markers its
    post_processor puts around a sentence (Llama's and Mistral's a BOS before it, Qwen2's
    none, a fine-tune's its own)."""
    family, auto = TOKENIZERS[config.model_type]
    return tokenizer.read(where, config, family=family, kinds=("BPE",), auto=auto)


# --- a GGUF file's model (gguf_file.py reads the file)

# general.architecture -> model_type: llama.cpp writes Llama and Mistral models as "llama"
GGUF_ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2"}
# the family's names -> llama.cpp's (gguf-py's tensor_mapping.py), a layer's (under "layers.N.") under blk.N.
GGUF_LAYERS = "layers"
GGUF_NAMES = {"embed_tokens": "token_embd", "norm": "output_norm", "lm_head": "output",
              "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}


def gguf_permuted(name: str, config: LlamaConfig, architecture: str) -> int:
    """The heads over which llama.cpp's converter permuted the rows of the tensor `name` for
    its RoPE of interleaved pairs (LlamaModel.permute: a "llama" file's query and key
    projections, their biases too), which gguf_file.unpermuted undoes; 0 where it did not
    (any other tensor, and every tensor of a qwen2 file, whose RoPE turns halves as
    transformers' does)."""
    if architecture != "llama":
        return 0
    return config.heads if ".q_proj." in name else config.key_heads if ".k_proj." in name else 0


def gguf_transposed(name: str) -> bool:
    """Whether a GGUF holds the tensor `name` transposed from the family's shape: never a Llama's."""
    return False


def gguf_config(header) -> LlamaConfig:
    """The config a GGUF file's metadata (gguf_file.Header) declares, as config.json's keys
    read_config checks (transformers' GGUF_CONFIG_MAPPING), and llama.cpp's rope_freqs."""
    arch = header.architecture
    path = header.path
    header.need("block_count", "embedding_length", "feed_forward_length", "attention.head_count", "context_length",
                "attention.layer_norm_rms_epsilon")

    def get(key, default=None):
        return header.get(f"{arch}.{key}", default)

    heads = get("attention.head_count")
    embed = header.tensors.get("token_embd.weight")
    raw = {"model_type": GGUF_ARCHITECTURES[arch], "num_hidden_layers": get("block_count"),
           "hidden_size": get("embedding_length"), "intermediate_size": get("feed_forward_length"),
           "num_attention_heads": heads, "num_key_value_heads": get("attention.head_count_kv", heads),
           "max_position_embeddings": get("context_length"),
           "rms_norm_eps": get("attention.layer_norm_rms_epsilon"), "rope_theta": get("rope.freq_base", 10_000.0),
           "vocab_size": embed.shape[0] if embed is not None else len(header.get("tokenizer.ggml.tokens") or ()),
           "tie_word_embeddings": "output.weight" not in header.tensors,
           "attention_bias": "blk.0.attn_q.bias" in header.tensors, "use_sliding_window": False}
    key, value = get("attention.key_length"), get("attention.value_length")
    if key is not None:
        if value is not None and value != key:
            raise ModelError(f"{path}: {arch}.attention.key_length {key} and value_length {value} differ; attncli runs "
                             "heads whose keys and values are of one size")
        raw["head_dim"] = key
    scaling = get("rope.scaling.type")
    if scaling not in (None, "none"):
        raw["rope_scaling"] = {"type": scaling, "factor": get("rope.scaling.factor")}
    raw = {k: v for k, v in raw.items() if v is not None}
    where = Path(f"{path} (its metadata)")
    config = read_config(raw, where)
    dims = get("rope.dimension_count", config.d_head)
    if dims != config.d_head:
        raise ModelError(f"{path}: {arch}.rope.dimension_count is {dims!r} and a head has {config.d_head} features; "
                         "attncli turns every feature of a head")
    factors = header.tensors.get("rope_freqs.weight")
    if factors is None:
        return config
    if factors.kind != "F32" or factors.shape != (config.d_head // 2,):
        raise ModelError(f"{path}: rope_freqs.weight is {factors.kind} of shape {factors.shape}; llama.cpp writes "
                         f"F32 of shape ({config.d_head // 2},)")
    with reading.open_regular(path, "--model") as f:
        f.seek(factors.offset)
        read = np.frombuffer(f.read(factors.nbytes), dtype="<f4")
    if read.size != factors.shape[0] or not (np.isfinite(read).all() and (read > 0).all()):
        raise ModelError(f"{path}: rope_freqs.weight holds factors that are not finite numbers above 0")
    return dataclasses.replace(config, rope=dataclasses.replace(config.rope, factors=tuple(float(f) for f in read)))


def frequencies(config: LlamaConfig) -> np.ndarray:
    """The rotary embeddings' inverse frequencies, scaled as config.json says. (d_head/2,)"""
    rope = config.rope
    inv_freq = rotary.rope_frequencies(config.d_head, rope.theta)  # (d/2,)
    if rope.kind == "linear":  # every angle m theta_i / factor: positions divided by factor
        return inv_freq / rope.factor
    if rope.kind == "llama3":
        inv_freq = rotary.llama3_frequencies(inv_freq, rope.factor, rope.low_freq_factor, rope.high_freq_factor,
                                             rope.original_max_positions)
    if rope.factors:  # llama.cpp's rope_freqs (Llama 3's scaling as its converter writes it): theta_i / f_i
        return inv_freq / np.array(rope.factors)
    return inv_freq


def mask(T: int, config: LlamaConfig, rows: slice = slice(None)) -> np.ndarray:
    """True where a piece may not attend (T, T): every piece after it, and with a sliding
    window w, every piece w or more places before it; for the query rows `rows` only, (R, T)."""
    if config.window:
        return attention.causal_window_mask(T, config.window, rows)
    return attention.causal_mask(T, rows)


def attend(X: np.ndarray, weights: dict, l: int, config: LlamaConfig, rope: tuple[np.ndarray, np.ndarray],
           hidden, blocks: layers.Blocks | None = None, values: bool = True,
           cache: layers.Cache | None = None) -> dict[str, np.ndarray]:
    """Layer l's self-attention over the normed X (T, D), every step kept: Q, K, V
    (T, H d_head: turned by RoPE, the keys and values written out for every query head);
    per head the scores omega and weights alpha (H, T, T) and context vectors Z
    (H, T, d_head), and side by side (context, T x H d_head); and the attention's output
    A = merge(Z) W_O (+ b_O) (T, D). `rope` is (cos, sin) (T, d_head), `hidden` the mask
    (T, T), or the function of a block's rows that gives its rows (mask(T, config, rows)).
    With `blocks`, the scores and weights a block of query rows at a time, each handed to
    its consumer and not kept (layers.attention_of). Without `values`, Q, K and the
    weights alone: no V, Z or A is made. With `cache`, X is the rows from cache.start on:
    their keys and values are appended to the cached ones, and the rows attend over all
    (`hidden` then their rows of the whole mask, (R, T))."""
    p = f"layers.{l}.self_attn"
    H, KV = config.heads, config.key_heads
    cos, sin = rope
    Q = rotary.rotate(dense(X, weights, f"{p}.q_proj"), H, cos, sin)  # (R, H d)
    K = rotary.rotate(dense(X, weights, f"{p}.k_proj"), KV, cos, sin)  # (R, KV d)
    if not values:
        K = rotary.share_heads(K, KV, H)  # (T, H d)
        return {"Q": Q, "K": K, **layers.attention_of(Q, K, None, l, config, hidden, blocks)[0]}
    V = dense(X, weights, f"{p}.v_proj")  # (R, KV d)
    if cache is not None:
        K, V = cache.extend(l, K, V)  # (T, KV d): every piece's, the cached first
    K, V = rotary.share_heads(K, KV, H), rotary.share_heads(V, KV, H)  # (T, H d)
    kept, Z = layers.attention_of(Q, K, V, l, config, hidden, blocks)  # omega and alpha (H, T, T), or none; (T, H d)
    A = dense(Z, weights, f"{p}.o_proj")  # (T, D)
    return {"Q": Q, "K": K, "V": V, **kept, "Z": attention.split_heads(Z, H), "context": Z, "A": A}


def projections(weights: dict, l: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Layer l's W_query (D, H d_head), W_key and W_value (D, KV d_head), as (in, out), and
    their biases where the model has them."""
    p = f"layers.{l}.self_attn"
    names = {"query": "q_proj", "key": "k_proj", "value": "v_proj"}
    return ({f"W_{r}": weights[f"{p}.{n}.weight"].T for r, n in names.items()},
            {f"b_{r}": weights[f"{p}.{n}.bias"] for r, n in names.items() if f"{p}.{n}.bias" in weights})


def passed_on(V: np.ndarray, weights: dict, l: int, config: LlamaConfig) -> np.ndarray:
    """What each query head of layer l passes on for each token, f^h(x_j) = v^h_j W_O^h:
    its value (its key/value head's) through the head's rows of the output projection,
    so that the attention's output is sum_h sum_j alpha^h_ij f^h(x_j) (+ b_O).
    V (T, H d_head) -> (H, T, D)."""
    H, d = config.heads, config.d_head
    W_O = attention.floating(weights[f"layers.{l}.self_attn.o_proj.weight"].T)  # (H d, D)
    with np.errstate(all="ignore"):  # checked just below
        F = attention.split_heads(V, H) @ W_O.reshape(H, d, config.hidden)  # (H, T, d) @ (H, d, D)
        return finite(F, f"layer {l + 1}'s values through its output projection")  # (H, T, D)


def feed_forward(X: np.ndarray, weights: dict, l: int) -> np.ndarray:
    """SwiGLU (Shazeer, "GLU Variants Improve Transformer", 2020): down(SiLU(gate(x)) * up(x))."""
    p = f"layers.{l}.mlp"
    return dense(silu(dense(X, weights, f"{p}.gate_proj")) * dense(X, weights, f"{p}.up_proj"), weights,
                 f"{p}.down_proj")  # (T, F) -> (T, D)


def layer(X: np.ndarray, weights: dict, l: int, config: LlamaConfig, rope: tuple[np.ndarray, np.ndarray],
          hidden, blocks: layers.Blocks | None = None, part: str = "whole",
          cache: layers.Cache | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """X_l from X_{l-1}, each half added to the stream after an RMSNorm of its input, and
    the steps of its attention (its weights a block of rows at a time with `blocks`), or
    only the `part` of it a consumer reads (layers.every_layer); with `cache`, of the rows
    after the cached pieces (attend)."""
    steps = attend(rms_norm(X, weights[f"layers.{l}.input_layernorm.weight"], config.norm_eps), weights, l, config,
                   rope, hidden, blocks, values=part != "weights", cache=cache)
    if part != "whole":
        return None, steps
    return after_attention(X + steps["A"], weights, l, config), steps  # (T, D)


def after_attention(Y: np.ndarray, weights: dict, l: int, config: LlamaConfig) -> np.ndarray:
    """The rest of layer l from the attention's residual sum Y = X + A (..., T, D): the
    feed-forward's output over Y normed, added to Y."""
    return Y + feed_forward(rms_norm(Y, weights[f"layers.{l}.post_attention_layernorm.weight"], config.norm_eps),
                            weights, l)  # (..., T, D)


def shown(X: np.ndarray, l: int, weights: dict, config: LlamaConfig) -> np.ndarray:
    """Layer l's output as transformers' hidden_states give it: the last after the final norm."""
    return rms_norm(X, weights["norm.weight"], config.norm_eps) if l == config.layers - 1 else X


def block(X: np.ndarray, weights: dict, l: int, config: LlamaConfig, rope: tuple[np.ndarray, np.ndarray],
          hidden: np.ndarray) -> layers.Block:
    """Layer l over X (T, D) in the parts contributions.py takes apart: its residual is X
    itself, not normed, its first RMSNorm inside f (on the attention's input); no norm
    after the residual sum."""
    steps = attend(rms_norm(X, weights[f"layers.{l}.input_layernorm.weight"], config.norm_eps), weights, l, config,
                   rope, hidden)
    Y = X + steps["A"]  # (T, D)
    bias = weights.get(f"layers.{l}.self_attn.o_proj.bias")
    return layers.Block(steps["weights"], passed_on(steps["V"], weights, l, config),
                        np.zeros(config.hidden) if bias is None else attention.floating(bias), X, Y, (),
                        after_attention(Y, weights, l, config),
                        lambda Y: shown(after_attention(Y, weights, l, config), l, weights, config))


def run_bytes(T: int, config: LlamaConfig, rows: int | None = None) -> int:
    """Memory run() holds at its peak for T pieces beside what its consumer keeps, float64:
    the working layer's softmax (its scores, their masked logits, shifted and exponentiated,
    and its weights: five (H, T, T), or with `rows` R, (H, R, T)) and the scores it hands
    on; about six (T, F) or (T, H d_head) arrays and the Q, K, V, Z, context it hands on;
    room for the largest weight matrix twice; RoPE's angles and the mask (its R rows); and
    the weights widened, a layer's or a small model's every layer's (layers.widened_held)."""
    H, D, F, R = config.heads, config.hidden, config.intermediate, min(T, rows or T)
    Hd = H * config.d_head
    return (8 * (6 * H * R * T + 6 * T * max(D, F, Hd) + 5 * T * Hd + 2 * D * max(F, Hd) + 4 * T * config.d_head)
            + R * T + layers.widened_held(expected_shapes, config))


def pass_bytes(T: int, config: LlamaConfig) -> int:
    """Memory forward() holds at its peak for T pieces: what Kept holds (layers.kept_bytes:
    every layer's weights and hidden states; a kept layer's steps are within run_bytes'),
    beside the work of one layer. Measured with tracemalloc, the peak is 0.98 of it at
    T = 512 (tiny-qwen2, its first layer kept)."""
    return layers.kept_bytes(T, config) + run_bytes(T, config)


def run(ids: np.ndarray, weights: dict, config: LlamaConfig, to: layers.Consumer, *,
        lengths: np.ndarray | None = None, rows: int | None = None, cache: layers.Cache | None = None) -> None:
    """Every layer over the word pieces `ids` (T,), each handed to `to` as it is made
    (layers.Consumer), or over a batch (B, T) of sentences padded on the right (their
    `lengths` need no mask of their own: the causal mask, and a window within it, hide
    every later piece, the padding among them); the last hidden states are after the final
    norm, as transformers gives them. With `rows` R, each layer's attention a block of R
    query rows at a time, each block handed to to.rows() and let go, the mask made a
    block's rows at a time too (a long text: nothing T x T is held). Numbers that overflow
    are refused at each layer's norms and scores and at each layer's output (ModelError),
    and numpy says nothing of them. With `cache` (layers.Cache), `ids` are the pieces after
    those cached, at their positions from cache.start: each layer's weights (H, T, start + T)."""
    with np.errstate(all="ignore"):
        ids = np.asarray(ids)
        T = ids.shape[-1]
        start = 0 if cache is None else cache.start
        rope, hidden = _positions(T, config, blocked=rows is not None, start=start)
        blocks = None if rows is None else layers.Blocks(rows, to)
        X = rows_of(weights, "embed_tokens.weight", ids)  # ([B,] T, D): finite, as every weight read
        # the last state after the final norm, as transformers gives it, over X_L in the
        # working precision, as Kept holds it
        every_layer(X, config, lambda X, l, part: layer(X, weights, l, config, rope, hidden, blocks, part, cache), to,
                    shown=lambda X: rms_norm(attention.floating(X), weights["norm.weight"], config.norm_eps))
        if cache is not None:
            cache.advance(T)


def forward(ids: np.ndarray, weights: dict, config: LlamaConfig, *, keep: tuple[int, ...] = (),
            lengths: np.ndarray | None = None) -> Pass:
    """run(), every layer's hidden states (L + 1, [B,] T, D) and weights (L, [B,] H, T, T)
    kept, and the attention steps of the layers in `keep` (indices from 0)."""
    kept = Kept(config, keep)
    run(ids, weights, config, kept, lengths=lengths)
    return kept.result


def logits(X: np.ndarray, weights: dict, config: LlamaConfig) -> np.ndarray:
    """The LM head over the final normed hidden states X (T, D), Pass.hidden[-1]: each
    piece's score for every piece of the vocabulary to come next, X W_head^T (T, V), with
    W_head the word embeddings where the model ties them. A block of the head's rows is
    widened at a time, never the whole (V, D) matrix."""
    head = "embed_tokens.weight" if config.tied else "lm_head.weight"  # (V, D)
    (T, D), V = X.shape, config.vocab_size
    limits.require(8 * T * V, f"the logits of {T:,} word pieces over {V:,} (T x V)", "give a shorter sentence")
    out = np.empty((T, V))  # (T, V)
    step = max(1, (1 << 24) // (8 * D))  # 16 MB of the head at a time
    with np.errstate(all="ignore"):  # checked just below
        for start in range(0, V, step):
            out[:, start:start + step] = X @ rows_of(weights, head, slice(start, start + step)).T  # (T, D) @ (D, step)
    return finite(out, "the logits")


def readout(X: np.ndarray, ids: np.ndarray, weights: dict, config: LlamaConfig) -> tuple[np.ndarray, np.ndarray]:
    """The logit of piece ids[k] after the last hidden state X[k] (N, D), before the final
    RMSNorm, as a linear map of that state's parts: logit = u_k . x summed over any parts x
    of X[k], the norm held at X[k]'s own factor, u_k = gamma * W_w / sqrt(mean(X[k]^2) +
    eps) (W_w the word's row of the head); an RMSNorm adds nothing, so c_k = 0.
    -> u (N, D), c (N,)"""
    head = "embed_tokens.weight" if config.tied else "lm_head.weight"  # (V, D)
    W = attention.floating(rows_of(weights, head, np.asarray(ids)))  # (N, D)
    factor = 1.0 / np.sqrt((X * X).mean(axis=-1, keepdims=True) + config.norm_eps)  # (N, 1)
    return attention.floating(weights["norm.weight"]) * W * factor, np.zeros(len(W))  # (N, D), (N,)


def _positions(T: int, config: LlamaConfig, blocked: bool = False,
               start: int = 0) -> tuple[tuple[np.ndarray, np.ndarray], object]:
    """RoPE's (cos, sin) (T, d_head) and the mask (T, T) of T pieces; `blocked`, instead
    of the mask the function of a block's rows that gives its (R, T) rows. From `start`:
    T pieces after as many cached, at positions start .. start + T - 1, their rows of the
    whole mask (T, start + T)."""
    rope = rotary.rope_angles(np.arange(start, start + T), frequencies(config))
    if start:
        return rope, mask(start + T, config, slice(start, start + T))
    return rope, (lambda rows: mask(T, config, rows)) if blocked else mask(T, config)


def blocks(ids: np.ndarray, weights: dict, config: LlamaConfig) -> list[layers.Block]:
    """Every layer over the word pieces `ids` (T,), each as block() gives it."""
    with np.errstate(all="ignore"):
        (rope, hidden), out = _positions(len(ids), config), []
        X = rows_of(weights, "embed_tokens.weight", np.asarray(ids))  # (T, D)
        for l in range(config.layers):
            out.append(block(X, weights, l, config, rope, hidden))
            X = finite(out[-1].output, f"the hidden states after layer {l + 1}")  # (T, D)
        return out


def run_from(X: np.ndarray, start: int, weights: dict, config: LlamaConfig) -> np.ndarray:
    """The last hidden states (after the final norm) from layer `start`'s input X
    (..., T, D): a batch of inputs of one length at once, no step kept."""
    with np.errstate(all="ignore"):
        rope, hidden = _positions(X.shape[-2], config)
        for l in range(start, config.layers):
            X = finite(layer(X, weights, l, config, rope, hidden)[0], f"the hidden states after layer {l + 1}")
        return rms_norm(X, weights["norm.weight"], config.norm_eps)  # (..., T, D)


def embedded(ids: np.ndarray, weights: dict, config: LlamaConfig) -> np.ndarray:
    """X_0 of a batch of inputs `ids` (B, T) of one length: (B, T, D)."""
    return rows_of(weights, "embed_tokens.weight", np.asarray(ids))
