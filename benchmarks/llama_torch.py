"""A Llama-family model's attention for one sentence with transformers + torch: the whole
process that benchmarks/scale.py holds attncli's against.

    python benchmarks/llama_torch.py FOLDER "a sentence" [--dtype bfloat16|float32]
    python benchmarks/llama_torch.py FOLDER --file DOC --dtype float32 --no-attention

What a user's own script would do for `attncli scores SENTENCE --model FOLDER`: import
torch and transformers, read the tokenizer and the model (the base model, LlamaModel,
without its LM head, as attncli computes no logits unless --predict asks; eager attention,
so that it gives every layer's weights) in the dtype asked (bfloat16: the weights as
stored; float32: widened as they are read), run one forward pass with output_attentions,
and print {"tokens": [...], "attention": T x T}, the head mean of the last layer's weights.
It is no part of attncli or its tests, and needs what attncli does not: pip install
torch==2.13.0 transformers (a separate environment). ATTNCLI_BENCH_THREADS=N sets torch's
thread count; unset, torch keeps its default.

With --file and --no-attention, what benchmarks/long_document.py holds `attncli stats DOC
--document` against: the file's text as one sequence, one forward pass with torch's own
scaled_dot_product_attention ("sdpa") and no attention kept, the number of pieces printed.
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
    parser.add_argument("sentence", nargs="?")
    parser.add_argument("--file", help="a text file read whole, as one sequence, instead of the sentence")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--no-attention", action="store_true", help="sdpa, no attention kept: the pass alone")
    args = parser.parse_args()
    threads = os.environ.get("ATTNCLI_BENCH_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    tokenizer = AutoTokenizer.from_pretrained(args.folder, local_files_only=True)
    if args.no_attention:
        # the file's text without its last line's end, as attncli reads a document: the same pieces
        text = open(args.file, encoding="utf-8").read().rstrip("\n") if args.file else args.sentence
        model = AutoModel.from_pretrained(args.folder, local_files_only=True, attn_implementation="sdpa",
                                          dtype=getattr(torch, args.dtype)).eval()
        enc = tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            out = model(**enc)
        print(json.dumps({"pieces": int(enc["input_ids"].shape[-1]), "last": float(out.last_hidden_state[0, -1, 0])}))
        return
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
