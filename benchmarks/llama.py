"""A Llama-family model of SmolLM2-135M's widths, read and run by attncli, beside MiniLM:
its load time, peak resident memory and forward time per word piece, one BLAS thread.

    python benchmarks/llama.py [--runs 5]

SmolLM2-135M's shapes (30 layers, hidden 576, 9 query heads over 3 key/value heads of 64,
intermediate 1536, vocabulary 49,152, tied embeddings, rope_theta 100,000), stored as BF16
as the real checkpoint is, with random weights (N(0, 0.02^2), the norms 1), written by
make_llama.py to a temporary folder that is removed after the run: no model is downloaded
or committed. Its tokenizer is tiny-llama's (tests/data/models), whose ids lie within the
vocabulary; the forward passes run over random ids, so that the tokenizer costs nothing here.

Each run is a process of its own (--worker), started from this small one, so that its peak
RSS (getrusage) is its own model's: it loads the model (timed), runs the forward pass over 32 and then 128 pieces
(each timed), and then, apart from the times, runs 128 again under tracemalloc to hold
the peak that numpy's arrays reach against the family's pass_bytes(T), the estimate every
run is checked against. The two models' processes alternate, --runs times each, and the
table gives medians.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

import make_llama
from startup import machine

LENGTHS = (32, 128)
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def make_model(folder: Path) -> None:
    """SmolLM2-135M's config and random BF16 weights of its shapes, and a tokenizer."""
    make_llama.write(folder, make_llama.SHAPES["smollm2-135m"], seed=0)


def worker(spec: str) -> None:
    """One run: load, the forward passes, their peak under tracemalloc; a JSON line on stdout."""
    from threadpoolctl import threadpool_limits

    from attncli import models

    with threadpool_limits(1):
        start = time.perf_counter()
        model = models.load_model(spec)
        stored = model.weights.tensors.values()  # as their file holds them, mapped
        result = {"load": time.perf_counter() - start, "weights_mb": sum(s.nbytes for s in stored) / 1e6,
                  "dtypes": sorted({s.dtype for s in stored})}
        rng = np.random.default_rng(1)
        for T in LENGTHS:
            ids = rng.integers(0, min(model.config.vocab_size, 500), T)
            start = time.perf_counter()
            model.family.forward(ids, model.weights, model.config, keep=(model.config.layers - 1,))
            result[f"forward_{T}"] = time.perf_counter() - start
        result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        tracemalloc.start()
        model.family.forward(ids, model.weights, model.config, keep=(0,))
        result["traced_mb"] = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
        result["pass_bytes_mb"] = model.family.pass_bytes(LENGTHS[-1], model.config) / 1e6
    print(json.dumps(result))


def run(spec: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", spec], check=True, capture_output=True, text=True,
                         env={**os.environ, **ONE_THREAD})
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--make", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    if args.make:
        return make_model(Path(args.make))
    with tempfile.TemporaryDirectory(prefix="attncli-bench-") as tmp:
        folder = Path(tmp) / "smollm2-135m-random"
        folder.mkdir()
        start = time.perf_counter()
        # in a process of its own: a child's peak RSS starts from its parent's at the fork, so
        # this one must never hold the weights it writes
        subprocess.run([sys.executable, __file__, "--make", str(folder)], check=True)
        made = time.perf_counter() - start
        size = (folder / "model.safetensors").stat().st_size / 1e6
        specs = {"SmolLM2-135M's widths, random, BF16": str(folder), "MiniLM (all-MiniLM-L6-v2, F32)": "minilm"}
        results = {name: [] for name in specs}
        for _ in range(args.runs):
            for name, spec in specs.items():
                results[name].append(run(spec))
    print(f"machine: {machine()}")
    print(f"median of {args.runs} interleaved runs each, one BLAS thread; the random model written in {made:.1f} s "
          f"({size:.0f} MB of BF16)\n")
    print("| model | load (s) | weights, as stored (MB) | forward, 32 pieces (ms a piece) | forward, 128 pieces "
          "(ms a piece) | peak RSS (MB) | traced peak at 128 / pass_bytes(128) (MB) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, runs in results.items():
        med = {key: statistics.median(r[key] for r in runs) for key in runs[0] if key != "dtypes"}
        print(f"| {name} ({', '.join(runs[0]['dtypes'])}) | {med['load']:.2f} | {med['weights_mb']:.0f} | "
              f"{1000 * med['forward_32'] / 32:.2f} | {1000 * med['forward_128'] / 128:.2f} | {med['rss_mb']:.0f} | "
              f"{med['traced_mb']:.1f} / {med['pass_bytes_mb']:.1f} |")


if __name__ == "__main__":
    main()
