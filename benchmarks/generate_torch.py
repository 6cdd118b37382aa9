"""Greedy generation with transformers + torch, timed in the process: what benchmarks/
generate.py holds `attncli generate` against.

    python benchmarks/generate_torch.py FOLDER --ids 1,5,9,... --new 32 [--dtype bfloat16|float32]
                                        [--threads N]

The model read (LlamaForCausalLM, sdpa attention, the dtype asked), then generate(ids,
max_new_tokens=NEW, do_sample=False, min_new_tokens=NEW) with its own key/value cache, timed
from the call to its return; prints {"seconds", "new", "ids"} as JSON. It is no part of
attncli or its tests: it needs torch and transformers (a separate environment).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--ids", required=True, help="the prompt's ids, comma-separated")
    parser.add_argument("--new", type=int, default=32)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.folder, dtype=getattr(torch, args.dtype),
                                                 attn_implementation="sdpa").eval()
    ids = torch.tensor([[int(i) for i in args.ids.split(",")]])
    with torch.inference_mode():
        start = time.perf_counter()
        out = model.generate(ids, max_new_tokens=args.new, min_new_tokens=args.new, do_sample=False,
                             pad_token_id=model.generation_config.eos_token_id)
        seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "new": out.shape[1] - ids.shape[1], "ids": out[0].tolist()}))


if __name__ == "__main__":
    main()
