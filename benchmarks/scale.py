"""A model of Llama-3.2-1B's size, whole processes: attncli against transformers + torch
(bfloat16 and float32) over one sentence of 16 word pieces, each process's time, CPU time
and peak resident memory.

    python benchmarks/scale.py [--model FOLDER] [--runs 5] [--threads 1] --torch-python PATH

The model is a folder benchmarks/make_llama.py writes (Llama-3.2-1B's shapes, random
weights, 2.47 GB of BF16); without --model one is written to a temporary folder and removed
after the run (check the disk has room: 2.5 GB). The processes, each a whole run as a user
starts it:

- `attncli scores SENTENCE --model FOLDER --json`: the sentence's last layer, every head,
  its document on stdout (the weights mapped, checked finite, and widened a layer at a time),
  in float64 (the default), and again with --precision float32: what float64 costs;
- benchmarks/llama_torch.py FOLDER SENTENCE --dtype bfloat16, and --dtype float32, with the
  Python given by --torch-python (torch and transformers, which attncli needs neither of):
  the tokenizer and the base model read (no LM head: attncli computes no logits unless
  --predict asks), one pass with output_attentions, the last layer's mean attention printed;
- `python -c "import numpy"`, the floor.

They alternate, --runs times each, so that a neighbour's load slows all alike; the table
gives each one's medians: wall time, CPU time (user and system, which a shared machine's
load does not stretch), and peak RSS (wait4's rusage, the process's own). --threads N
holds each to N threads (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, torch.set_num_threads);
0 leaves each its default. The sentence's 16 pieces are those of tiny-llama's tokenizer,
which the model's folder holds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from startup import machine

HERE = Path(__file__).resolve().parent
ATTNCLI = str(Path(sys.executable).parent / "attncli")
SENTENCE = "I sat on the bank of the river and the earth is like an orange"  # 16 pieces, <s> first


def measure(command: list[str], env: dict) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user and system) and peak RSS (MB) of one run of `command`,
    its output discarded."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[:4]} failed with status {os.waitstatus_to_exitcode(status)}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def commands(folder: str, torch_python: str | None) -> dict[str, list[str]]:
    out = {'python -c "import numpy" (the floor)': [sys.executable, "-c", "import numpy"],
           "attncli scores SENTENCE --model FOLDER --json": [ATTNCLI, "scores", SENTENCE, "--model", folder, "--json"],
           "the same, --precision float32": [ATTNCLI, "scores", SENTENCE, "--model", folder, "--json", "--precision",
                                             "float32"]}
    if torch_python:
        for dtype in ("bfloat16", "float32"):
            out[f"transformers + torch, {dtype}"] = [torch_python, str(HERE / "llama_torch.py"), folder, SENTENCE,
                                                     "--dtype", dtype]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a folder benchmarks/make_llama.py wrote (default: one written for the run)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="threads each process may use; 0: its default")
    parser.add_argument("--torch-python", help="a Python with torch and transformers installed")
    args = parser.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    if args.threads:
        n = str(args.threads)
        env.update(OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, ATTNCLI_BENCH_THREADS=n)
    with tempfile.TemporaryDirectory(prefix="attncli-scale-") as tmp:
        folder = args.model
        if folder is None:
            folder = str(Path(tmp) / "llama-3.2-1b-random")
            subprocess.run([sys.executable, str(HERE / "make_llama.py"), folder, "--shape", "llama-3.2-1b"], check=True)
        size = sum(p.stat().st_size for p in Path(folder).glob("*.safetensors"))
        runs = commands(folder, args.torch_python)
        for command in runs.values():  # once, unmeasured: the model's file in the page cache for all alike
            measure(command, env)
        loads = [os.getloadavg()[0]]
        results = {name: [] for name in runs}
        for _ in range(args.runs):
            for name, command in runs.items():
                results[name].append(measure(command, env))
            loads.append(os.getloadavg()[0])
        if args.model is None:
            shutil.rmtree(folder)
    threads = f"{args.threads} thread{'s' * (args.threads > 1)} each" if args.threads else "each its default threads"
    print(f"machine: {machine()}")
    print(f"median of {args.runs} interleaved runs each, {threads}; the model's weights {size / 1e9:.2f} GB "
          f"(BF16); load average {min(loads):.1f} to {max(loads):.1f} over the runs\n")
    print("| process | wall (s) | CPU (s) | peak RSS (MB) | peak RSS / weights |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, values in results.items():
        wall, cpu, rss = (statistics.median(v[k] for v in values) for k in range(3))
        print(f"| `{name}` | {wall:.2f} | {cpu:.2f} | {rss:,.0f} | {rss * 2**20 / size:.2f} |")


if __name__ == "__main__":
    main()
