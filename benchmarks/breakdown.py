"""Where the time goes, for the figures of benchmarks/forward.py and startup.py that miss
their targets: the static `scores --json` start-up, one MiniLM sentence's whole process,
and `stats --model minilm` in float32 against torch's passes alone.

    python benchmarks/breakdown.py [--runs 6] [--sentences 400]

Each start-up and model figure is the median over --runs fresh processes of this script,
each timing its own phases with perf_counter (a process measures its own imports: no
profiler's overhead). The stats figure is one run in this process, attention.project
wrapped to count its multiply-adds and time them. One BLAS thread throughout.
"""

from __future__ import annotations

import os

os.environ.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # before numpy

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

SENTENCE = "The earth is like an orange"
MODEL_SENTENCE = "I sat on the bank of the river"  # forward.py's SHORT_WHOLE


def _main_quietly(argv: list[str]) -> None:
    """attncli with `argv`, in this process, its output to /dev/null."""
    from attncli.cli import main

    sys.argv = argv
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        try:
            main()
        except SystemExit:
            pass


def child_startup() -> dict:
    """The static `scores --json` run's phases, in milliseconds."""
    marks = [time.perf_counter()]
    import numpy  # noqa: F401

    marks.append(time.perf_counter())
    import click  # noqa: F401

    marks.append(time.perf_counter())
    import attncli.cli  # noqa: F401

    marks.append(time.perf_counter())
    _main_quietly(["attncli", "scores", SENTENCE, "--json"])
    marks.append(time.perf_counter())
    names = ("import numpy", "import click", "import attncli.cli", "the run")
    return {name: 1e3 * (b - a) for name, a, b in zip(names, marks, marks[1:])}


def child_dataclasses(noop: bool) -> dict:
    """`import attncli.cli` after numpy, click and dataclasses, with the dataclass decorator
    as it is or replaced by one that returns the class (what its generated methods cost)."""
    import dataclasses

    import click  # noqa: F401
    import numpy  # noqa: F401

    if noop:
        dataclasses.dataclass = lambda cls=None, **options: (lambda c: c) if cls is None else cls
    start = time.perf_counter()
    import attncli.cli  # noqa: F401

    return {"noop" if noop else "decorator": 1e3 * (time.perf_counter() - start)}


def child_model() -> dict:
    """One MiniLM sentence's phases (after attncli.cli's imports), in milliseconds."""
    import numpy as np

    import attncli.cli  # noqa: F401

    out, start = {}, time.perf_counter()

    def mark(name: str) -> None:
        nonlocal start
        now = time.perf_counter()
        out[name] = 1e3 * (now - start)
        start = now

    import tokenizers

    from attncli import models
    from attncli.models import bert, files
    from attncli.models import weights as model_weights

    mark("import tokenizers and attncli.models")
    name, where, _ = files.folder("minilm", None)
    raw = files.read_config(where / "config.json")
    family = models.family_of(raw, where / "config.json")
    config = family.read_config(raw, where / "config.json")
    mark("config")
    tokenizer = family.read_tokenizer(where, config)
    mark("the tokenizer, read and checked")
    weights = model_weights.read_weights(where, config, family)
    mark("the weights (mapped, every number checked)")
    ids = np.array(tokenizer.encode(MODEL_SENTENCE).ids)
    start = time.perf_counter()
    bert.forward(ids, weights, config, keep=(config.layers - 1,))
    mark("the float64 pass, first")
    widened = [weights[name] for name, stored in weights.tensors.items() if stored.linear]
    mark("widening the Linear weights to float64, alone (as a pass does, a layer at a time)")
    data = files.read(where / "tokenizer.json", files.TOKENIZER_MOST)
    start = time.perf_counter()
    tokenizers.Tokenizer.from_buffer(data)
    mark("tokenizers' from_buffer, alone")
    blocks = [np.ones(1536 * 384, np.float32) for _ in range(40)]  # 94 MB, MiniLM's size, in fresh pages
    mark("touching 94 MB of fresh pages")
    del widened, blocks
    return out


def child_model_command() -> dict:
    """The whole `scores --model minilm --json` command in this process, after attncli.cli's
    imports (the phases above, timed one by one in another process, are its parts)."""
    import attncli.cli  # noqa: F401

    start = time.perf_counter()
    _main_quietly(["attncli", "scores", MODEL_SENTENCE, "--model", "minilm", "--json"])
    return {"the scores command, after attncli.cli's imports": 1e3 * (time.perf_counter() - start)}


def in_children(part: str, runs: int, *extra: str) -> dict:
    """{phase: median ms} over `runs` fresh processes of this script's `part`."""
    values: dict = {}
    for _ in range(runs):
        with tempfile.NamedTemporaryFile("r", suffix=".json") as result:
            subprocess.run([sys.executable, __file__, "--child", part, result.name, *extra], check=True,
                           stdout=subprocess.DEVNULL)
            for key, ms in json.load(result).items():
                values.setdefault(key, []).append(ms)
    return {key: statistics.median(v) for key, v in values.items()}


def stats_products(count: int) -> dict:
    """`stats --model minilm --precision float32` over `count` sentences in this process:
    its seconds, the projections' seconds and multiply-adds, and the real pieces' share."""
    sys.path.insert(0, str(Path(__file__).parent))
    from forward import sentences

    from attncli import attention, models

    lines = sentences(count)
    made = {"seconds": 0.0, "macs": 0}
    project = attention.project

    def counted(X, W, b=None):
        made["macs"] += X.size // X.shape[-1] * W.shape[0] * W.shape[1]
        start = time.perf_counter()
        P = project(X, W, b)
        made["seconds"] += time.perf_counter() - start
        return P

    attention.project = counted
    with tempfile.TemporaryDirectory() as folder:
        corpus = Path(folder) / "corpus.txt"
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
        start = time.perf_counter()
        _main_quietly(["attncli", "stats", "--model", "minilm", "--no-shuffled", "--random-seeds", "0",
                       "--precision", "float32", "--jobs", "1", "--json", str(corpus)])
        whole = time.perf_counter() - start
    attention.project = project
    model = models.load_model("minilm")
    c = model.config
    pieces = sum(len(model.encode(line).ids) for line in lines)
    real = pieces * c.layers * (4 * c.hidden * c.hidden + 2 * c.hidden * c.intermediate)  # Q, K, V, O; the two FFN
    from threadpoolctl import threadpool_info

    blas = ", ".join(f"{i['internal_api']} {i['version']}, {i.get('architecture')}" for i in threadpool_info())
    return {"blas": blas, "sentences": count, "pieces": pieces, "whole_s": whole, "projections_s": made["seconds"],
            "macs_g": made["macs"] / 1e9, "real_macs_g": real / 1e9,
            "gflops": 2 * made["macs"] / 1e9 / made["seconds"], "padding": 1 - real / made["macs"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        part, path, *extra = args.child
        got = {"startup": child_startup, "model": child_model, "model_command": child_model_command,
               "dataclasses": lambda: child_dataclasses(extra == ["noop"])}[part]()
        Path(path).write_text(json.dumps(got))
        return
    print(f"\n### Where the time goes (`benchmarks/breakdown.py`, medians of {args.runs} fresh processes)\n")
    print("| phase | ms |\n| --- | ---: |")
    for title, got in (("static `scores --json`", in_children("startup", args.runs)),
                       ("dataclasses", {**in_children("dataclasses", args.runs),
                                        **in_children("dataclasses", args.runs, "noop")}),
                       ("one MiniLM sentence", {**in_children("model_command", args.runs),
                                                **in_children("model", args.runs)})):
        for phase, ms in got.items():
            print(f"| {title}: {phase} | {ms:.1f} |")
    s = stats_products(args.sentences)
    print(f"\n`stats --model minilm --precision float32 --jobs 1` over {s['sentences']} sentences "
          f"({s['pieces']:,} pieces): {s['whole_s']:.2f} s, of which the projections {s['projections_s']:.2f} s, "
          f"{s['macs_g']:.1f} G multiply-adds at {s['gflops']:.1f} GFLOP/s; the real pieces' are "
          f"{s['real_macs_g']:.1f} G ({100 * s['padding']:.0f}% padding); BLAS: {s['blas']}")


if __name__ == "__main__":
    main()
