"""Greedy generation on a model of Llama-3.2-1B's shape: `attncli generate` against
transformers + torch's generate with its key/value cache, side by side in one run.

    python benchmarks/generate.py --torch-python PATH [--model FOLDER] [--new 32] [--prompt 64]
                                  [--runs 3] [--threads 1,2]

FOLDER is a model benchmarks/make_llama.py wrote (default: one written for the run). The
prompt is --prompt ids: <s> and random ids of tiny-llama's vocabulary (seed 0). For each
thread count, alternating --runs times:

- attncli, in a process of its own: the model loaded and every weight widened into the
  precision (timed apart: torch makes its weights its dtype as the model loads), then
  models.generation.generate (greedy, --new pieces, --precision float32 and float64) timed
  from its call to its return, the time of each piece after the first (the steps alone),
  and after it --method alti-logit of every written piece (documents.generation.explained);
- torch (benchmarks/generate_torch.py, bfloat16 and float32): generate timed likewise
  (its weights were made its dtype as the model loaded, outside the timing).

Each one's medians: the seconds of the whole generation, pieces a second over it, and, for
attncli, the widening's seconds, a step's seconds after the first piece and alti-logit's
seconds a written piece. OMP_NUM_THREADS and OPENBLAS_NUM_THREADS
hold each process to the thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from startup import machine

HERE = Path(__file__).resolve().parent
ATTNCLI_RUN = """
import json, sys, time
import numpy as np
from attncli import attention
from attncli.documents.generation import explained
from attncli.models import generation, load_model
folder, ids, new, precision = sys.argv[1], [int(i) for i in sys.argv[2].split(",")], int(sys.argv[3]), sys.argv[4]
model = load_model(folder)
stamps = []
with attention.precision(precision), model.weights.holding():
    start = time.perf_counter()
    for name in model.weights:  # widened now, as torch's weights are made its dtype as the model loads
        model.weights[name]
    widened = time.perf_counter() - start
    start = time.perf_counter()
    out = generation.generate(model, np.array(ids), new, said=lambda step: stamps.append(time.perf_counter()))
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    explained(model, np.array(ids + out.ids), len(ids))  # --method alti-logit of every written piece
    explaining = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "widened": widened, "new": len(out.steps),
                  "step": float(np.median(np.diff(stamps))), "alti_logit": explaining, "ids": out.ids}))
"""


def run(command: list[str], threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a folder benchmarks/make_llama.py wrote (default: one written for the run)")
    parser.add_argument("--torch-python", required=True, help="a Python with torch and transformers installed")
    parser.add_argument("--new", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    folder = args.model
    if folder is None:
        folder = str(Path(tempfile.mkdtemp(prefix="attncli-generate-")) / "llama-1b")
        subprocess.run([sys.executable, str(HERE / "make_llama.py"), folder], check=True)
    rng = np.random.default_rng(0)
    ids = ",".join(map(str, [1, *rng.integers(3, 560, size=args.prompt - 1)]))
    processes = {f"attncli {p}": [sys.executable, "-c", ATTNCLI_RUN, folder, ids, str(args.new), p]
                 for p in ("float32", "float64")}
    processes.update({f"torch {d}": [args.torch_python, str(HERE / "generate_torch.py"), folder, "--ids", ids, "--new",
                                     str(args.new), "--dtype", d] for d in ("bfloat16", "float32")})
    print(f"machine: {machine()}; {args.new} new pieces after a {args.prompt}-piece prompt; {args.runs} interleaved "
          "runs, medians")
    print("| threads | process | generation s | pieces / s | a step after the first, s | widening s | "
          "alti-logit s a piece |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for threads in (int(t) for t in args.threads.split(",")):
        measured = {name: [] for name in processes}
        for _ in range(args.runs):
            for name, command in processes.items():
                measured[name].append(run(command, threads))
        for name, results in measured.items():
            seconds = statistics.median(r["seconds"] for r in results)
            new = results[0]["new"]
            ours = "step" in results[0]
            step, widened, explaining = ((statistics.median(r[key] for r in results) for key in
                                         ("step", "widened", "alti_logit")) if ours else (None, None, None))
            print(f"| {threads} | {name} | {seconds:.2f} | {new / seconds:.2f} | "
                  + (f"{step:.3f} | {widened:.2f} | {explaining / new:.3f} |" if ours else "- | - | - |"))


if __name__ == "__main__":
    main()
