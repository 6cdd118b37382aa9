"""GGUF files made from the tiny reference models, laid out as llama.cpp's converter
(convert_hf_to_gguf.py) lays out a Hugging Face model: its metadata keys, its tensor names,
the query and key rows of a "llama" file permuted for llama.cpp's RoPE (LlamaModel.permute),
norms kept F32, Llama 3's RoPE scaling written as the rope_freqs tensor, and the tokenizer
as metadata (a SentencePiece-style vocabulary as "llama" with scores and token types, a
byte-level one as "gpt2" with its merges). Written with gguf-py's writer; quantized by
gguf-py (Q8_0, Q4_0 ...), and Q4_K, which gguf-py only dequantizes, by quantize_q4_k here.

Used by the tests and by tests/data/make_gguf_references.py, which runs transformers'
GGUF loader over the same files: a run writes the same bytes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

ARCHITECTURES = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "gpt2": "gpt2"}
PRE = {"qwen2": "qwen2", "gpt2": "gpt-2"}  # tokenizer.ggml.pre of a byte-level vocabulary, by model type
FILE_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q4_K": 15, "BF16": 32}
NORMAL, UNKNOWN, CONTROL, UNUSED, BYTE = 1, 2, 3, 5, 6


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's LlamaModel.permute: each head's rows from pairs (i, i + d/2) to (2i, 2i + 1)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    """x (R, C), C a multiple of 256, in ggml's Q4_K: each block of 256 numbers a float16
    scale d and min dmin, 8 sub-blocks of 32 with a 6-bit scale and min each (packed in 12
    bytes as ggml packs them: get_scale_min_k4), and 4-bit codes, x ~ d sc q - dmin m.
    (R, C / 256 * 144) uint8."""
    R, C = x.shape
    blocks = x.astype(np.float32).reshape(-1, 8, 32)  # (N, 8, 32)
    lo = np.minimum(blocks.min(axis=-1), 0)  # (N, 8)
    scale, least = (blocks.max(axis=-1) - lo) / 15, -lo
    d = (scale.max(axis=-1) / 63).astype(np.float16)  # (N,)
    dmin = (least.max(axis=-1) / 63).astype(np.float16)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.rint(scale / d[:, None].astype(np.float32)), 0).clip(0, 63).astype(np.uint8)
        mn = np.where(dmin[:, None] > 0, np.rint(least / dmin[:, None].astype(np.float32)), 0).clip(0, 63)
        mn = mn.astype(np.uint8)
        step = d.astype(np.float32)[:, None] * sc  # (N, 8)
        shift = dmin.astype(np.float32)[:, None] * mn
        q = np.where(step[..., None] > 0, np.rint((blocks + shift[..., None]) / step[..., None]), 0)
    q = q.clip(0, 15).astype(np.uint8)  # (N, 8, 32)
    packed = np.empty((len(blocks), 12), dtype=np.uint8)
    packed[:, 0:4] = sc[:, :4] | ((sc[:, 4:] >> 4) << 6)
    packed[:, 4:8] = mn[:, :4] | ((mn[:, 4:] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:] & 0x0F) | ((mn[:, 4:] & 0x0F) << 4)
    codes = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(len(blocks), 128)  # sub-blocks 2c and 2c+1 share 32 bytes
    out = np.concatenate([d.reshape(-1, 1).view(np.uint8), dmin.reshape(-1, 1).view(np.uint8), packed, codes],
                         axis=1)  # (N, 144)
    return out.reshape(R, C // 256 * 144)


def _quantized(w: np.ndarray, kind: str) -> np.ndarray:
    """The float32 tensor w in ggml's type `kind`, as GGUFWriter writes its bytes: quantized a
    block of rows at a time (gguf-py's Q8_0, Q4_0 ...; Q4_K by quantize_q4_k)."""
    import gguf
    import gguf.quants

    if kind == "F32":
        return w.astype(np.float32)
    if kind == "F16":
        return w.astype(np.float16)
    qtype = gguf.GGMLQuantizationType[kind]
    rows = w.reshape(-1, w.shape[-1])
    step = max(1, (1 << 22) // rows.shape[1])  # 4 million numbers at a time
    quantize = quantize_q4_k if kind == "Q4_K" else (lambda x: gguf.quants.quantize(x, qtype))
    out = np.concatenate([quantize(rows[r:r + step]) for r in range(0, len(rows), step)])
    return out.reshape(*w.shape[:-1], out.shape[-1])


def tensor_kind(shape: tuple[int, ...], kind: str) -> str:
    """The type llama.cpp gives a tensor of a file of type `kind`: a vector (a norm, a bias)
    F32; a matrix whose rows are not whole blocks of `kind` Q8_0 (llama.cpp falls back to a
    type whose blocks fit), F32 where none does."""
    import gguf

    if len(shape) == 1:
        return "F32"
    block = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[kind]][0]
    if shape[-1] % block == 0:
        return kind
    return "Q8_0" if shape[-1] % 32 == 0 else "F32"


def _info(shape: tuple[int, ...], kind: str):
    """(shape as GGUFWriter.add_tensor_info takes it, dtype, bytes, raw_dtype) of a tensor of `kind`."""
    import gguf

    if kind in ("F32", "F16"):
        dtype = np.dtype(np.float32 if kind == "F32" else np.float16)
        return shape, dtype, math.prod(shape) * dtype.itemsize, None
    qtype = gguf.GGMLQuantizationType[kind]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    row = shape[-1] // block * size
    return (*shape[:-1], row), np.dtype(np.uint8), math.prod(shape[:-1]) * row, qtype


def write_gguf(folder: Path, out: Path, kind: str = "F32", *, rope_freqs: bool = True, name: str | None = None,
               metadata: dict | None = None, tensors: dict | None = None) -> Path:
    """The model of the folder `folder` (tiny-llama, tiny-qwen2, tiny-mistral, a model of
    benchmarks/make_llama.py) as a GGUF file `out` of type `kind`, written a tensor at a time
    (a 1B model's never whole in memory); `rope_freqs`: Llama 3's scaling as the rope_freqs
    tensor (else left out, as transformers' loader would read the file anyway); `metadata`
    keys written over the converter's, `tensors` numpy arrays in place of the model's (by
    GGUF name)."""
    import gguf

    from attncli import attention
    from attncli.models import gguf_file, load_model

    config = json.loads((folder / "config.json").read_text())
    arch = ARCHITECTURES[config["model_type"]]
    model = load_model(str(folder))
    c = model.config
    writer = gguf.GGUFWriter(str(out), arch)
    writer.add_name(name or folder.name)
    writer.add_file_type(FILE_TYPES[kind])
    writer.add_quantization_version(2)
    writer.add_context_length(c.max_positions)
    writer.add_embedding_length(c.hidden)
    writer.add_block_count(c.layers)
    writer.add_feed_forward_length(c.intermediate)
    writer.add_head_count(c.heads)
    given = dict(tensors or {})
    if arch == "gpt2":  # GPT2Model.set_gguf_parameters: LayerNorm's epsilon, learned positions
        writer.add_layer_norm_eps(c.norm_eps)
    else:
        writer.add_head_count_kv(c.key_heads)
        writer.add_rope_dimension_count(c.d_head)
        writer.add_rope_freq_base(c.rope.theta)
        writer.add_layer_norm_rms_eps(c.norm_eps)
        if c.d_head * c.heads != c.hidden:
            writer.add_key_length(c.d_head)
            writer.add_value_length(c.d_head)
        if c.rope.kind == "linear":
            writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            writer.add_rope_scaling_factor(c.rope.factor)
        if c.rope.kind == "llama3" and rope_freqs:
            given.setdefault("rope_freqs.weight", _rope_factors(c))
    _tokenizer(writer, folder, config)
    for key, value in (metadata or {}).items():
        _put(writer, key, value)
    family = model.family
    named = {gguf_file.tensor_name(family, n): n for n in model.weights}  # GGUF name -> the family's
    if arch == "gpt2" and "output.weight" not in named:  # GPT2Model writes the tied head as output.weight too
        named["output.weight"] = "wte.weight"
    shapes = {**{g: model.weights.tensors[n].shape[::-1] if family.gguf_transposed(n) else model.weights.tensors[n].shape
                 for g, n in named.items()}, **{g: w.shape for g, w in given.items()}}
    kinds = {g: tensor_kind(shape, kind) for g, shape in shapes.items()}
    for g, shape in shapes.items():
        writer.add_tensor_info(g, *_info(shape, kinds[g]))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for g in shapes:
        if g in given:
            w = np.asarray(given[g], dtype=np.float32)
        else:
            with attention.precision("float32"):
                w = np.asarray(model.weights[named[g]], dtype=np.float32)
            w = np.ascontiguousarray(w.T if family.gguf_transposed(named[g]) else w)
            if arch == "llama" and (".attn_q." in g or ".attn_k." in g):
                w = permute(w, c.heads if ".attn_q." in g else c.key_heads)
        writer.write_tensor_data(_quantized(w, kinds[g]))
        del w
    writer.close()
    return out


def _put(writer, key: str, value) -> None:
    if isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        writer.add_uint32(key, value)
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, str):
        writer.add_string(key, value)
    else:
        writer.add_array(key, value)


def _rope_factors(c) -> np.ndarray:
    """Llama 3's scaling as convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors writes it."""
    from attncli import rotary

    rope = c.rope
    factors = []
    low, high = rope.original_max_positions / rope.low_freq_factor, rope.original_max_positions / rope.high_freq_factor
    for freq in rotary.rope_frequencies(c.d_head, rope.theta):
        wavelen = 2 * math.pi / freq
        if wavelen < high:
            factors.append(1)
        elif wavelen > low:
            factors.append(rope.factor)
        else:
            smooth = (rope.original_max_positions / wavelen - rope.low_freq_factor) / (rope.high_freq_factor
                                                                                     - rope.low_freq_factor)
            factors.append(1 / ((1 - smooth) / rope.factor + smooth))
    return np.array(factors, dtype=np.float32)


def _tokenizer(writer, folder: Path, config: dict) -> None:
    """tokenizer.json as llama.cpp's converter writes a vocabulary: a BPE with byte fallback
    (SentencePiece's) as "llama", each piece's score -id (SentencePiece's BPE order) and type;
    a byte-level BPE as "gpt2" with its merges and the pre-tokenizer its model type names."""
    raw = json.loads((folder / "tokenizer.json").read_text())
    settings_path = folder / "tokenizer_config.json"
    settings = json.loads(settings_path.read_text()) if settings_path.exists() else {}
    model = raw["model"]
    vocab = dict(model["vocab"])
    added = {t["content"]: t["id"] for t in raw.get("added_tokens", [])}
    vocab.update(added)
    tokens = [None] * max(max(vocab.values()) + 1, config["vocab_size"])  # padded to the table, as llama.cpp pads
    for piece, i in vocab.items():
        tokens[i] = piece
    unused = {i for i, t in enumerate(tokens) if t is None}
    tokens = [t if t is not None else f"[PAD{i}]" for i, t in enumerate(tokens)]
    special = {t["id"] for t in raw.get("added_tokens", []) if t.get("special")}
    unk = model.get("unk_token") or settings.get("unk_token")
    if model.get("byte_fallback"):
        types = [BYTE if t.startswith("<0x") and len(t) == 6 else UNKNOWN if t == unk else CONTROL if i in special
                 else NORMAL for i, t in enumerate(tokens)]
        writer.add_tokenizer_model("llama")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(tokens)
        writer.add_token_scores([0.0 if types[i] != NORMAL else -float(i) for i in range(len(tokens))])
        writer.add_token_types(types)
        writer.add_bos_token_id(vocab["<s>"])
        writer.add_eos_token_id(vocab["</s>"])
        if unk in vocab:
            writer.add_unk_token_id(vocab[unk])
        writer.add_add_bos_token(bool(settings.get("add_bos_token", True)))
        writer.add_add_eos_token(bool(settings.get("add_eos_token", False)))
    else:
        types = [CONTROL if i in special else UNUSED if i in unused else NORMAL for i in range(len(tokens))]
        merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(PRE.get(config["model_type"], "default"))
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        eos = config.get("eos_token_id")
        if isinstance(eos, int):
            writer.add_eos_token_id(eos)
        writer.add_add_bos_token(False)


# A Llama of rows wide enough for the K-quants' blocks of 256 numbers (hidden 256,
# intermediate 512), tiny-llama's tokenizer, random weights (seed 0), F32: what Q4_K runs on
WIDE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256, "head_dim": 64,
        "intermediate_size": 512, "max_position_embeddings": 64, "vocab_size": 560, "rms_norm_eps": 1e-6,
        "hidden_act": "silu", "rope_theta": 10000.0, "tie_word_embeddings": False, "bos_token_id": 1,
        "eos_token_id": 2, "dtype": "float32"}


def write_wide(folder: Path, source: Path) -> Path:
    """The wide Llama's folder: WIDE's config, `source`'s tokenizer files (tiny-llama's), and
    weights N(0, 0.12^2) a matrix (scores of tens, as the reference models have; wider rows at 0.3
    give scores of 600, past what float32 holds to 1e-5), norms near 1."""
    import shutil

    from safetensors.numpy import save_file

    from attncli.models import llama

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(WIDE))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(source / name, folder / name)
    rng = np.random.default_rng(0)
    weights = {}
    for name, shape in llama.expected_shapes(llama.read_config(WIDE, "config.json")).items():
        w = 1 + 0.1 * rng.normal(size=shape) if "norm" in name else rng.normal(scale=0.12, size=shape)
        weights[name if name == "lm_head.weight" else f"model.{name}"] = w.astype(np.float32)
    save_file(weights, str(folder / "model.safetensors"))
    return folder


# The files the references are made of, and the tests read: (file name, model folder or
# "wide", type, rope_freqs). tiny-llama's leave rope_freqs out: transformers' GGUF loader
# reads no RoPE scaling (neither rope_freqs nor rope.scaling.*), and a file without them
# is read alike by both.
FILES = [("tiny-llama-F32.gguf", "tiny-llama", "F32"), ("tiny-llama-F16.gguf", "tiny-llama", "F16"),
         ("tiny-llama-BF16.gguf", "tiny-llama", "BF16"), ("tiny-llama-Q8_0.gguf", "tiny-llama", "Q8_0"),
         ("tiny-qwen2-F32.gguf", "tiny-qwen2", "F32"), ("tiny-qwen2-Q8_0.gguf", "tiny-qwen2", "Q8_0"),
         ("tiny-qwen2-Q4_0.gguf", "tiny-qwen2", "Q4_0"), ("wide-llama-Q4_K.gguf", "wide", "Q4_K"),
         ("wide-llama-Q5_1.gguf", "wide", "Q5_1")]
# tiny-gpt2's: its tokenizer is held against transformers', its numbers against its folder's
# (transformers' GGUF loader reads no gpt2.context_length, and makes GPT-2's 1,024 positions
# of a table of 64)
GPT2_FILES = [("tiny-gpt2-F32.gguf", "tiny-gpt2", "F32"), ("tiny-gpt2-Q8_0.gguf", "tiny-gpt2", "Q8_0")]


def write_files(models: Path, out: Path) -> dict[str, Path]:
    """Every file of FILES and GPT2_FILES in `out`, made from the reference models' folder `models`."""
    out.mkdir(parents=True, exist_ok=True)
    wide = write_wide(out / "wide-llama", models / "tiny-llama")
    return {name: write_gguf(wide if source == "wide" else models / source, out / name, kind, rope_freqs=False)
            for name, source, kind in FILES + GPT2_FILES}
