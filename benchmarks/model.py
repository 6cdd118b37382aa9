"""A trained model's forward pass as a whole process: attncli --model minilm against the
floor (`python -c "import numpy"`) and against transformers + torch doing the same pass
(benchmarks/minilm_torch.py, where a Python with torch is given), with each process's
peak resident memory.

    python benchmarks/model.py [--runs 9] [--torch-python PATH]

The commands run interleaved, --runs times each, so that a noisy neighbour slows all
alike; the table gives medians. Each run's peak RSS is read from wait4(), the process's
own rusage.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from startup import machine

HERE = Path(__file__).resolve().parent
ATTNCLI = str(Path(sys.executable).parent / "attncli")
SENTENCE = "I sat on the bank of the river"
LONG = " ".join(["the bank raised interest rates"] * 102)  # 510 words: 512 word pieces with [CLS] and [SEP]


def measure(command: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run of `command`, its stdout discarded."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{command[:3]} failed with status {process.returncode}")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--torch-python", help="a Python with torch and transformers installed")
    args = parser.parse_args()
    one_thread = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                  "ATTNCLI_BENCH_THREADS": "1"}
    commands = {
        'python -c "import numpy" (the floor)': ([sys.executable, "-c", "import numpy"], one_thread),
        f'attncli scores "{SENTENCE}" --model minilm --json': (
            [ATTNCLI, "scores", SENTENCE, "--model", "minilm", "--json"], one_thread),
        f'attncli scores "{SENTENCE}" --json (word vectors)': ([ATTNCLI, "scores", SENTENCE, "--json"], one_thread),
        "attncli context (512 word pieces) --index 1 --model minilm --json": (
            [ATTNCLI, "context", LONG, "--index", "1", "--model", "minilm", "--json"], one_thread),
        "attncli scores (512 word pieces) --model minilm --json": (
            [ATTNCLI, "scores", LONG, "--model", "minilm", "--json"], one_thread),
    }
    if args.torch_python:
        commands[f'transformers + torch, "{SENTENCE}"'] = (
            [args.torch_python, str(HERE / "minilm_torch.py"), SENTENCE], one_thread)
    times = {name: [] for name in commands}
    peaks = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, (command, env) in commands.items():
            seconds, peak = measure(command, env)
            times[name].append(seconds)
            peaks[name].append(peak)
    floor = statistics.median(times['python -c "import numpy" (the floor)'])
    print(f"machine: {machine()}")
    print(f"median of {args.runs} interleaved runs each, one BLAS thread\n")
    print("| command | median (s) | ratio to the floor | peak RSS (MB) |")
    print("| --- | ---: | ---: | ---: |")
    for name in commands:
        median = statistics.median(times[name])
        print(f"| `{name}` | {median:.3f} | {median / floor:.1f} | {statistics.median(peaks[name]):.0f} |")


if __name__ == "__main__":
    main()
