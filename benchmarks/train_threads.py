"""attncli train on one BLAS thread against two: the whole process's time, and whether the
two files have the same bytes.

    python benchmarks/train_threads.py             # the training guide's run and a 150-step one, 3 of each
    python benchmarks/train_threads.py --runs 5

The corpus is the training guide's (docs/guide/training.md), gensim's lee_background.cor.
Training holds the BLAS to attncli.learning.train.BLAS_THREADS threads; each run here is a fresh
`attncli train` process with that set to 1 or 2 before the command starts, timed by the
launcher of benchmarks/vectors.py. The runs take turns (1, 2, 1, 2, ...), one at a time, so
that both counts meet the same load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from vectors import PYTHON, child_env, log, machine, run  # noqa: E402: the launcher, one copy

# the CLI, with training's BLAS threads set first
TRAIN = "import sys, attncli.learning.train as t; t.BLAS_THREADS = int(sys.argv.pop(1)); from attncli.cli import main; main()"

RUNS = {"the training guide's run (1,500 steps)": [], "150 steps": ["--steps", "150"]}


def timings(corpus: str, extra: list[str], runs: int, tmp: Path) -> dict[int, list[float]]:
    env = child_env(tmp / "cache")
    seconds: dict[int, list[float]] = {1: [], 2: []}
    for k in range(runs):
        for threads in (1, 2):
            out = tmp / f"proj-{threads}.npz"
            s, _, _ = run([PYTHON, "-c", TRAIN, str(threads), "train", corpus, "-o", str(out), "--force", "--json",
                           *extra], env)
            seconds[threads].append(s)
            log(f"  {' '.join(extra) or 'default'}, {threads} thread(s), run {k + 1}: {s:.1f} s")
    same = (tmp / "proj-1.npz").read_bytes() == (tmp / "proj-2.npz").read_bytes()
    return {"seconds": seconds, "same": same}


def main() -> None:
    from gensim.test.utils import datapath

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each thread count, each workload")
    args = parser.parse_args()
    corpus = datapath("lee_background.cor")
    load = open("/proc/loadavg").read().split()[:3]
    with tempfile.TemporaryDirectory() as name:
        results = {label: timings(corpus, extra, args.runs, Path(name)) for label, extra in RUNS.items()}
    load_after = open("/proc/loadavg").read().split()[:3]
    print(f"machine: {machine()}")
    print(f"load average before / after: {' '.join(load)} / {' '.join(load_after)}")
    print(f"medians of {args.runs}, the runs taking turns\n")
    print("| run | 1 thread | 2 threads | 2 / 1 | the same bytes |")
    print("| --- | ---: | ---: | ---: | --- |")
    for label, r in results.items():
        one, two = (statistics.median(r["seconds"][n]) for n in (1, 2))
        print(f"| {label} | {one:.1f} s | {two:.1f} s | {two / one:.2f} | {'yes' if r['same'] else 'no'} |")


if __name__ == "__main__":
    main()
