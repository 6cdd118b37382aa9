"""A long document through a large model: `attncli stats DOC --model FOLDER --document`
against transformers + torch's forward pass over the same pieces, whole processes.

    python benchmarks/long_document.py --model FOLDER --pieces 4096 [--runs 3] [--threads 0]
                                       [--precision float32] [--torch-python PATH]

FOLDER is a model benchmarks/make_llama.py wrote (random weights of a real model's shape,
tiny-llama's tokenizer). The document is words of that tokenizer's vocabulary drawn at
random (seed 0), as many as make at most --pieces pieces with the <s> before them, written
to a temporary file. The processes, alternating --runs times, each a whole run as a user
starts it:

- `attncli stats DOC --model FOLDER --document --no-shuffled --precision P --json`: every
  layer's attention a block of query rows at a time, each row's softmax exact, the
  statistics and positional profiles summed as the rows go (one pass: with the shuffled
  baseline, which stats gives by default, a second pass over the words shuffled doubles it);
- with --torch-python, benchmarks/llama_torch.py FOLDER --file DOC --dtype float32
  --no-attention: the tokenizer and the base model read, one forward pass with torch's
  scaled_dot_product_attention, no attention kept (what the issue's target holds attncli
  to: a pass that computes no statistics at all).

Each one's medians: wall time, CPU time (user and system) and peak RSS (wait4's rusage).
--threads N holds each to N threads; 0 (the default) leaves each its default.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
from scale import measure
from startup import machine

HERE = Path(__file__).resolve().parent
ATTNCLI = str(Path(sys.executable).parent / "attncli")


def document(folder: str, pieces: int) -> tuple[str, int]:
    """(a text of random whole words of the model's tokenizer, its pieces with the <s>): the
    longest prefix of 2 * pieces such words that makes at most `pieces` pieces."""
    from attncli.errors import ModelError
    from attncli.models import load_model

    vocab = json.loads((Path(folder) / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    words = sorted(w[1:] for w in vocab if w.startswith("\u2581") and w[1:].isalpha())
    drawn = [words[i] for i in np.random.default_rng(0).integers(len(words), size=2 * pieces)]
    model = load_model(folder)
    low, high = 1, len(drawn)  # the most words whose pieces fit: a bisection over the prefix's length
    def fits(words: int) -> bool:
        try:
            return len(model.encode(" ".join(drawn[:words])).ids) <= pieces
        except ModelError:  # more than the model's positions
            return False

    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    text = " ".join(drawn[:low])
    return text, len(model.encode(text).ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a folder benchmarks/make_llama.py wrote")
    parser.add_argument("--pieces", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="threads each process may use; 0: its default")
    parser.add_argument("--precision", default="float32", help="attncli's --precision, or several: float32,float64")
    parser.add_argument("--torch-python", help="a Python with torch and transformers installed")
    args = parser.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    if args.threads:
        n = str(args.threads)
        env.update(OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, ATTNCLI_BENCH_THREADS=n)
    size = sum(p.stat().st_size for p in Path(args.model).glob("*.safetensors"))
    with tempfile.TemporaryDirectory(prefix="attncli-long-") as tmp:
        text, T = document(args.model, args.pieces)
        doc = Path(tmp) / "document.txt"
        doc.write_text(text + "\n", encoding="utf-8")
        runs = {f"attncli stats DOC --document --no-shuffled --precision {p}":
                [ATTNCLI, "stats", str(doc), "--model", args.model, "--document", "--no-shuffled", "--precision", p,
                 "--json"] for p in args.precision.split(",")}
        if args.torch_python:
            runs["transformers + torch, sdpa, float32, no attention kept"] = [
                args.torch_python, str(HERE / "llama_torch.py"), args.model, "--file", str(doc), "--dtype", "float32",
                "--no-attention"]
        for path in Path(args.model).glob("*.safetensors"):  # the weights in the page cache for all alike
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass
        loads = [os.getloadavg()[0]]
        results = {name: [] for name in runs}
        for _ in range(args.runs):
            for name, command in runs.items():
                results[name].append(measure(command, env))
                print(f"{name}: {results[name][-1][0]:.1f} s, {results[name][-1][2]:,.0f} MB", file=sys.stderr)
            loads.append(os.getloadavg()[0])
    threads = f"{args.threads} thread{'s' * (args.threads > 1)} each" if args.threads else "each its default threads"
    print(f"machine: {machine()}")
    print(f"{T:,} pieces; median of {args.runs} interleaved runs each, {threads}; the model's weights "
          f"{size / 1e9:.2f} GB (BF16); load average {min(loads):.1f} to {max(loads):.1f} over the runs\n")
    print("| process | wall (s) | CPU (s) | peak RSS (MB) | peak RSS / weights |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, values in results.items():
        wall, cpu, rss = (statistics.median(v[k] for v in values) for k in range(3))
        print(f"| `{name}` | {wall:.1f} | {cpu:.1f} | {rss:,.0f} | {rss * 2**20 / size:.2f} |")


if __name__ == "__main__":
    main()
