"""The exact GELU (layers.gelu, erf by Cody's approximations in numpy) against the C
library's math.erf element by element, as GELU was computed before: GELU alone on MiniLM's
(504, 1536) feed-forward input, and MiniLM's whole forward pass over a 37-piece sentence and
a 504-piece input with each GELU, in one process, one BLAS thread; and how far apart the
two passes' hidden states are.

    python benchmarks/gelu.py [--runs 9]

The two GELUs alternate run by run, so that a noisy neighbour slows both alike; the table
gives medians. GELU's input is what MiniLM's first layer gives it over the 504 pieces.
"""

from __future__ import annotations

import os

os.environ.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # before numpy

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from attncli import models  # noqa: E402
from attncli.models import bert, layers  # noqa: E402
from startup import machine  # noqa: E402

SENTENCE = ("The books that the professor recommended during the lecture on medieval history are very expensive "
            "for most of the students, who borrow them from the old library instead of buying them new ones.")
LONG = " ".join((["the", "bank", "raised", "interest", "rates"] * 101)[:502])  # 504 pieces with [CLS] and [SEP]

_math_erf = np.frompyfunc(math.erf, 1, 1)


def gelu_math_erf(X: np.ndarray, activation: str = "gelu") -> np.ndarray:
    """GELU as it was: math.erf element by element, through an object array of Python floats."""
    return 0.5 * X * (1.0 + _math_erf(X / np.sqrt(2.0)).astype(np.float64))


GELUS = {"numpy erf (Cody)": layers.gelu, "math.erf element by element": gelu_math_erf}


def seconds(f, *args) -> float:
    start = time.perf_counter()
    f(*args)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    model = models.load_model("minilm")
    short, long = model.encode(SENTENCE).ids, model.encode(LONG).ids
    assert (len(short), len(long)) == (37, 504), (len(short), len(long))
    inputs = []
    bert.gelu = lambda X, activation: inputs.append(X) or layers.gelu(X, activation)
    bert.forward(long, model.weights, model.config)
    X = inputs[0]  # (504, 1536)
    cases = {f"GELU alone, {X.shape}": lambda gelu: gelu(X, "gelu"),
             "forward, 37 pieces": lambda gelu: bert.forward(short, model.weights, model.config),
             "forward, 504 pieces": lambda gelu: bert.forward(long, model.weights, model.config)}
    times = {(case, name): [] for case in cases for name in GELUS}
    for _ in range(args.runs):
        for name, gelu in GELUS.items():
            bert.gelu = gelu  # the forward pass's
            for case, run in cases.items():
                times[case, name].append(seconds(run, gelu))
    print(f"machine: {machine()}")
    print(f"median of {args.runs} interleaved runs each, one BLAS thread\n")
    print("| | " + " | ".join(f"{name} (ms)" for name in GELUS) + " | ratio |")
    print("| --- |" + " ---: |" * (len(GELUS) + 1))
    for case in cases:
        new, old = (statistics.median(times[case, name]) * 1e3 for name in GELUS)
        print(f"| {case} | {new:.1f} | {old:.1f} | {old / new:.1f} |")
    hidden = []
    for gelu in GELUS.values():
        bert.gelu = gelu
        hidden.append(bert.forward(long, model.weights, model.config).hidden)
    print(f"\nthe two passes' hidden states over 504 pieces differ by {np.abs(hidden[0] - hidden[1]).max():.1e} "
          f"at most (largest {np.abs(hidden[1]).max():.1f})")


if __name__ == "__main__":
    main()
