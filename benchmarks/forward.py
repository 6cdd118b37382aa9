"""attncli's numpy forward pass against transformers + torch, side by side in one run: MiniLM's
pass warm over a 37-piece sentence and a 504-piece input (in float64 and float32), `attncli
stats --model minilm` over 1,000 sentences against torch's passes over the same sentences
at each batch size, `batch --model minilm` in batches against one line at a time, and whole
processes against `python -c "import numpy"`.

    python benchmarks/forward.py --torch-python /path/to/python/with/torch [--runs 7]

The corpus is gensim's lee_background.cor cut into sentences, the first 1,000 of 10 to 40
words. Torch's side is benchmarks/forward_torch.py in its own environment (torch 2.13 CPU,
transformers, float32, eager attention, torch.inference_mode()). One BLAS thread (and one
torch thread) unless a line says two; the figures of each part are interleaved run by run
and reported as medians.
"""

from __future__ import annotations

import os

os.environ.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # before numpy

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from gelu import LONG, SENTENCE  # noqa: E402: the 37- and 504-piece inputs, one copy
from vectors import PYTHON, log, machine, run  # noqa: E402: the launcher, one copy

HERE = Path(__file__).resolve().parent
ATTNCLI = str(Path(PYTHON).with_name("attncli"))
BATCHES = (1, 4, 16, 64)
SHORT_WHOLE = "I sat on the bank of the river"
TWENTY = "The old fisherman sat on the bank of the river and watched the small boats go slowly past"  # 20 pieces


def sentences(count: int) -> list[str]:
    """The first `count` sentences of 10 to 40 words of gensim's lee_background.cor."""
    from gensim.test.utils import datapath

    text = Path(datapath("lee_background.cor")).read_text(encoding="utf-8", errors="replace")
    found = []
    for line in text.splitlines():
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])", line.strip()):
            if 10 <= len(sentence.split()) <= 40:
                found.append(sentence)
    if len(found) < count:
        raise SystemExit(f"lee_background.cor has {len(found)} such sentences, fewer than {count}")
    return found[:count]


def attncli_warm(runs: int) -> dict:
    """MiniLM's pass over SENTENCE and LONG in this process, every layer's attention kept, as
    scores --model keeps it: {(precision, "short"|"long"): [seconds, ...]}."""
    from attncli import attention, models
    from attncli.models import bert

    model = models.load_model("minilm")
    ids = {"short": model.encode(SENTENCE).ids, "long": model.encode(LONG).ids}
    keep = tuple(range(model.config.layers))
    times: dict = {}
    for precision in attention.PRECISIONS:
        with attention.precision(precision):
            for key, i in ids.items():
                bert.forward(i, model.weights, model.config, keep=keep)  # the first pass, unmeasured
                for _ in range(runs):
                    start = time.perf_counter()
                    bert.forward(i, model.weights, model.config, keep=keep)
                    times.setdefault((precision, key), []).append(time.perf_counter() - start)
    return times


def torch_json(torch_python: str, *args: str, threads: int = 1) -> tuple[float, dict]:
    """(whole process seconds, its JSON) of one run of forward_torch.py."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    seconds, _, out = run([torch_python, str(HERE / "forward_torch.py"), *args, "--threads", str(threads)], env,
                          capture=True)
    return seconds, json.loads(out)


def part_warm(torch_python: str, runs: int, rounds: int) -> None:
    times: dict = {}
    for _ in range(rounds):
        for key, values in attncli_warm(runs).items():
            times.setdefault(key, []).extend(values)
        _, got = torch_json(torch_python, "warm", SENTENCE, LONG, "--runs", str(runs))
        for key in ("short", "long"):
            times.setdefault(("torch", key), []).extend(got[key])
    pieces = got["pieces"]
    print(f"\n### One forward pass, warm ({rounds} rounds of {runs} runs, medians, one thread)\n")
    print("| input | attncli float64 (ms) | attncli float32 (ms) | transformers + torch, float32 (ms) | "
          "float64 / torch | float32 / torch |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for key, n in zip(("short", "long"), pieces):
        f64, f32, tt = (statistics.median(times[p, key]) * 1e3 for p in ("float64", "float32", "torch"))
        print(f"| {n} pieces | {f64:.1f} | {f32:.1f} | {tt:.1f} | {f64 / tt:.2f} | {f32 / tt:.2f} |")


def part_corpus(torch_python: str, corpus: Path, count: int, runs: int) -> None:
    one = {**os.environ, "HF_HUB_OFFLINE": "1"}
    stats = [ATTNCLI, "stats", str(corpus), "--model", "minilm", "--no-shuffled", "--random-seeds", "0", "--json"]
    commands = {}
    for jobs in (1, 2):
        for precision in ("float64", "float32"):
            commands[f"attncli stats, --jobs {jobs}, {precision}"] = (
                [*stats, "--jobs", str(jobs), "--precision", precision])
    times: dict = {name: [] for name in commands}
    torch_times: dict = {}
    for _ in range(runs):
        for name, command in commands.items():
            log(name)
            times[name].append(run(command, one)[0])
        for threads in (1, 2):
            for batch in BATCHES:
                whole, got = torch_json(torch_python, "corpus", str(corpus), "--batch", str(batch), threads=threads)
                torch_times.setdefault((threads, batch), []).append((whole, got["forward"]))
    print(f"\n### {count:,} sentences of lee_background.cor ({runs} interleaved runs, medians)\n")
    print("attncli: a whole `attncli stats ... --model minilm --no-shuffled --random-seeds 0` process, one BLAS "
          "thread a process (--jobs 2: two processes); torch: its passes alone, and its whole process\n")
    print("| run | threads | passes alone (s) | whole process (s) | sentences/s (passes) | sentences/s (whole) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, values in times.items():
        s = statistics.median(values)
        jobs = 2 if "--jobs 2" in name else 1
        print(f"| {name} | {jobs} | | {s:.1f} | | {count / s:.1f} |")
    for (threads, batch), values in torch_times.items():
        whole = statistics.median(v[0] for v in values)
        forward = statistics.median(v[1] for v in values)
        print(f"| transformers + torch, batches of {batch} | {threads} | {forward:.1f} | {whole:.1f} | "
              f"{count / forward:.1f} | {count / whole:.1f} |")


def part_processes(runs: int) -> None:
    one = {**os.environ}
    commands = {
        'python -c "import numpy" (the floor)': [PYTHON, "-c", "import numpy"],
        'attncli scores "The earth is like an orange" --json': [ATTNCLI, "scores", "The earth is like an orange",
                                                                 "--json"],
        f'attncli scores "{SHORT_WHOLE}" --model minilm --json': [ATTNCLI, "scores", SHORT_WHOLE, "--model", "minilm",
                                                                  "--json"],
        "attncli contributions (20 pieces) --model minilm --method value-zeroing --json": [
            ATTNCLI, "contributions", TWENTY, "--model", "minilm", "--method", "value-zeroing", "--json"],
    }
    times: dict = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            times[name].append(run(command, one)[0])
    floor = statistics.median(times['python -c "import numpy" (the floor)'])
    print(f"\n### Whole processes ({runs} interleaved runs, medians, one BLAS thread)\n")
    print("| command | median (s) | ratio to the floor |")
    print("| --- | ---: | ---: |")
    for name, values in times.items():
        s = statistics.median(values)
        print(f"| `{name}` | {s:.3f} | {s / floor:.2f} |")


def part_batch(count: int, rounds: int) -> None:
    """`batch --model minilm`'s work in this process, its chunks' lines run in batches of
    BATCH against one at a time (BATCH = 1, the one-sentence path), alternating; and how far
    the two paths' documents are apart."""
    import numpy as np

    from attncli.corpus import batch
    from attncli.models import layers, load_model
    from attncli.models.encoder import Trained

    items = [(k + 1, text, None) for k, text in enumerate(sentences(count))]
    model, job = Trained(load_model("minilm"), 6), batch.Job(model="minilm", layer=6)
    times: dict = {}
    docs: dict = {}
    batched = layers.BATCH
    for _ in range(rounds):
        for size in (1, batched):
            layers.BATCH = size
            start = time.perf_counter()
            out = [batch.encoded_chunk(chunk, model, job).data for chunk in batch.chunks_of(items)]
            times.setdefault(size, []).append(time.perf_counter() - start)
            docs[size] = [json.loads(line) for data in out for line in data.decode().splitlines()]
    layers.BATCH = batched
    worst = max(np.abs(np.subtract(a[key], b[key])).max() / np.abs(b[key]).max()
                for a, b in zip(docs[batched], docs[1]) for key in ("scores", "weights"))
    print(f"\n### batch --model minilm, {count:,} sentences in this process ({rounds} rounds, medians, one thread)\n")
    print("| lines run | lines/s |")
    print("| --- | ---: |")
    for size in (1, batched):
        print(f"| {'one at a time' if size == 1 else f'in batches of {size}'} | "
              f"{count / statistics.median(times[size]):.1f} |")
    print(f"\nthe documents of the two paths differ by {worst:.1e} at most, relative to each matrix's largest number")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch-python", required=True, help="a Python with torch and transformers installed")
    parser.add_argument("--runs", type=int, default=7, help="runs of each whole process and each warm pass")
    parser.add_argument("--corpus-runs", type=int, default=3, help="runs of each corpus figure")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--parts", default="warm,corpus,batch,processes")
    args = parser.parse_args()
    parts = args.parts.split(",")
    load = os.getloadavg()[0]
    print(f"machine: {machine()}; load average {load:.2f} at the start")
    if "warm" in parts:
        part_warm(args.torch_python, args.runs, 3)
    if "corpus" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "lee-sentences.txt"
            corpus.write_text("\n".join(sentences(args.sentences)) + "\n", encoding="utf-8")
            part_corpus(args.torch_python, corpus, args.sentences, args.corpus_runs)
    if "batch" in parts:
        part_batch(300, 3)
    if "processes" in parts:
        part_processes(args.runs)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
