"""A random-weight Llama-family model of a real model's shape, written to a folder: what the
benchmarks of large models run, with nothing downloaded.

    python benchmarks/make_llama.py FOLDER [--shape llama-3.2-1b] [--seed 0] [--positions N]

Shapes: llama-3.2-1b (16 layers, hidden 2,048, 32 query heads over 8 key/value heads of 64,
feed-forward 8,192, a vocabulary of 128,256, tied embeddings, llama3 RoPE: 2.47 GB),
smollm2-135m (30 layers, hidden 576, 9 heads over 3, feed-forward 1,536, a vocabulary of
49,152, tied: 269 MB) and llama-3.1-8b (32 layers, hidden 4,096, 32 heads over 8,
feed-forward 14,336, untied: 16.1 GB). Each config.json is the real model's (its sizes,
RoPE and norms); the weights are N(0, 0.02^2) and the norms 1, stored as BF16 (each
float32 rounded to the nearest BF16, ties to even) in one model.safetensors, as the real
checkpoints' dtype is. The tokenizer is tiny-llama's (tests/data/models), whose 560 pieces'
ids lie within every vocabulary here: the passes cost what the real model's would for as
many pieces, and the text is cut into other pieces than the real tokenizer would.
--positions N sets max_position_embeddings (SmolLM2-135M's widths over 32,768 pieces, where
the real model takes 8,192): the weights and every width stay the shape's.

The folder must not exist, or be empty; the disk must hold the weights (checked before
anything is written). The tensors are drawn and written 4 million numbers at a time, so that
this process never holds more than a block of them.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import struct
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TINY = HERE.parent / "tests" / "data" / "models" / "tiny-llama"

_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "attention_bias": False, "mlp_bias": False,
          "hidden_act": "silu", "rms_norm_eps": 1e-5, "initializer_range": 0.02, "bos_token_id": 1,
          "eos_token_id": 2, "torch_dtype": "bfloat16", "use_cache": True}
_LLAMA3_ROPE = {"rope_theta": 500000.0, "max_position_embeddings": 131072}
SHAPES = {
    "llama-3.2-1b": {**_LLAMA, **_LLAMA3_ROPE, "num_hidden_layers": 16, "hidden_size": 2048,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
                     "intermediate_size": 8192, "vocab_size": 128256, "tie_word_embeddings": True,
                     "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
    "smollm2-135m": {**_LLAMA, "num_hidden_layers": 30, "hidden_size": 576, "num_attention_heads": 9,
                     "num_key_value_heads": 3, "head_dim": 64, "intermediate_size": 1536, "vocab_size": 49152,
                     "max_position_embeddings": 8192, "rope_theta": 100000.0, "tie_word_embeddings": True},
    "llama-3.1-8b": {**_LLAMA, **_LLAMA3_ROPE, "num_hidden_layers": 32, "hidden_size": 4096,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                     "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False,
                     "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
}
BLOCK = 1 << 22  # numbers drawn, rounded and written at a time: 16 MB of float32


def shapes(raw: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of the model, by its name in a LlamaForCausalLM's file, and its shape:
    attncli's own list (llama.expected_shapes), so that the two cannot differ."""
    from attncli.models import llama

    config = llama.read_config(raw, Path("config.json"))
    return {name if name == "lm_head.weight" else f"model.{name}": shape
            for name, shape in llama.expected_shapes(config).items()}


def bf16(x: np.ndarray) -> np.ndarray:
    """float32 numbers rounded to the nearest BF16 (ties to even): their upper 16 bits."""
    bits = x.view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def write(folder: Path, raw: dict, seed: int) -> int:
    """config.json, model.safetensors and the tokenizer's files in `folder`; the bytes of the weights."""
    tensors = shapes(raw)
    header, offset = {}, 0
    for name, shape in tensors.items():
        size = 2 * math.prod(shape)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    free = shutil.disk_usage(folder).free
    if offset + len(text) > free * 0.95:
        raise SystemExit(f"{folder}: the weights take {offset / 1e9:.2f} GB, and the disk has {free / 1e9:.2f} GB "
                         "free; give a folder on a disk with room")
    rng = np.random.default_rng(seed)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape in tensors.items():
            count = math.prod(shape)
            for start in range(0, count, BLOCK):
                n = min(BLOCK, count - start)
                x = (np.ones(n, dtype=np.float32) if "norm" in name
                     else rng.standard_normal(n, dtype=np.float32) * np.float32(0.02))
                f.write(bf16(x).tobytes())
    (folder / "config.json").write_text(json.dumps(raw, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TINY / name, folder / name)
    return offset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama-3.2-1b")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--positions", type=int, help="max_position_embeddings, if not the shape's")
    args = parser.parse_args()
    if args.folder.exists() and (not args.folder.is_dir() or any(args.folder.iterdir())):
        raise SystemExit(f"{args.folder}: exists and is not an empty folder")
    args.folder.mkdir(parents=True, exist_ok=True)
    raw = SHAPES[args.shape] if args.positions is None else {**SHAPES[args.shape],
                                                             "max_position_embeddings": args.positions}
    size = write(args.folder, raw, args.seed)
    print(f"{args.folder}: {args.shape}, random, {size / 1e9:.2f} GB of BF16")


if __name__ == "__main__":
    main()
