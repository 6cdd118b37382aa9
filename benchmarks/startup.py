"""Start-up time of attncli, as a ratio to `python -c "import numpy"` measured in the same run.

    python benchmarks/startup.py [--runs 15]
    python benchmarks/startup.py --quick     # 5 runs each: well under a minute

Each command is run --runs times, interleaved so that a noisy neighbour slows all alike;
the table gives the median wall time of each and its ratio to importing numpy (attncli's
floor: it cannot start without numpy). Two more floors show what is left: the bare
interpreter, and numpy with click (the command line's library).

attncli's modules are compiled to bytecode first, as `pip install` does: an editable
install, or a source tree under PYTHONDONTWRITEBYTECODE, would otherwise compile every
changed module on every run.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ATTNCLI = str(Path(sys.executable).parent / "attncli")
SENTENCE = "The earth is like an orange"
FLOOR = 'python -c "import numpy" (the floor)'
COMMANDS = {
    FLOOR: [sys.executable, "-c", "import numpy"],
    "python -c pass": [sys.executable, "-c", "pass"],
    'python -c "import numpy, click"': [sys.executable, "-c", "import numpy, click"],
    "import attncli.cli": [sys.executable, "-c", "import attncli.cli"],
    "attncli --version": [ATTNCLI, "--version"],
    f'attncli scores "{SENTENCE}" (JSON)': [ATTNCLI, "scores", SENTENCE, "--json"],
    f'attncli scores "{SENTENCE}" (table)': [ATTNCLI, "scores", SENTENCE, "--format", "table"],
    f'attncli context "{SENTENCE}" --token orange': [ATTNCLI, "context", SENTENCE, "--token", "orange", "--json"],
}


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, numpy {np.__version__}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="5 runs each")
    args = parser.parse_args()
    runs = 5 if args.quick else args.runs
    import attncli

    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(attncli.__file__).parent)], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, command in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
            times[name].append(time.perf_counter() - start)
    floor = statistics.median(times[FLOOR])
    print(f"machine: {machine()}")
    print(f"median of {runs} interleaved runs each; load average {os.getloadavg()[0]:.2f} at the end\n")
    print("| command | median (s) | ratio to the floor |")
    print("| --- | ---: | ---: |")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| `{name}` | {median:.3f} | {median / floor:.2f} |")


if __name__ == "__main__":
    main()
