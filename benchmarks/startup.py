"""Start-up time of attncli, as a ratio to the bare interpreter measured in the same run.

    python benchmarks/startup.py [--runs 15]

Each command is run --runs times, interleaved so that a noisy neighbour slows all alike;
the table gives the median wall time of each and its ratio to `python -c pass`.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ATTNCLI = str(Path(sys.executable).parent / "attncli")
SENTENCE = "The earth is like an orange"
COMMANDS = {
    "python -c pass (the floor)": [sys.executable, "-c", "pass"],
    "import attncli.cli": [sys.executable, "-c", "import attncli.cli"],
    "attncli --version": [ATTNCLI, "--version"],
    f'attncli scores "{SENTENCE}" (JSON)': [ATTNCLI, "scores", SENTENCE, "--json"],
    f'attncli scores "{SENTENCE}" (table)': [ATTNCLI, "scores", SENTENCE, "--format", "table"],
    f'attncli context "{SENTENCE}" --token orange': [ATTNCLI, "context", SENTENCE, "--token", "orange", "--json"],
}


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    import os

    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, numpy {np.__version__}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.runs):
        for name, command in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
    floor = statistics.median(times["python -c pass (the floor)"])
    print(f"machine: {machine()}")
    print(f"median of {args.runs} runs each\n")
    print("| command | median (s) | ratio to the floor |")
    print("| --- | ---: | ---: |")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| `{name}` | {median:.3f} | {median / floor:.1f} |")


if __name__ == "__main__":
    main()
