"""A Llama-family model's attention for one sentence with transformers + torch: the whole
process that benchmarks/scale.py holds attncli's against.

    python benchmarks/llama_torch.py FOLDER "a sentence" [--dtype bfloat16|float32]

What a user's own script would do for `attncli scores SENTENCE --model FOLDER`: import
torch and transformers, read the tokenizer and the model (the base model, LlamaModel,
without its LM head, as attncli computes no logits unless --predict asks; eager attention,
so that it gives every layer's weights) in the dtype asked (bfloat16: the weights as
stored; float32: widened as they are read), run one forward pass with output_attentions,
and print {"tokens": [...], "attention": T x T}, the head mean of the last layer's weights.
It is no part of attncli or its tests, and needs what attncli does not: pip install
torch==2.13.0 transformers (a separate environment). ATTNCLI_BENCH_THREADS=N sets torch's
thread count; unset, torch keeps its default.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("sentence")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    args = parser.parse_args()
    threads = os.environ.get("ATTNCLI_BENCH_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    tokenizer = AutoTokenizer.from_pretrained(args.folder, local_files_only=True)
    model = AutoModel.from_pretrained(args.folder, local_files_only=True, attn_implementation="eager",
                                      dtype=getattr(torch, args.dtype)).eval()
    enc = tokenizer(args.sentence, return_tensors="pt")
    with torch.inference_mode():
        out = model(**enc, output_attentions=True)
    attention = out.attentions[-1][0].float().mean(dim=0)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    print(json.dumps({"tokens": tokens, "attention": [[round(float(w), 6) for w in row] for row in attention]}))


if __name__ == "__main__":
    main()
