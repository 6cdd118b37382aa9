"""Long documents and many sentences: streamed attention against numpy's own products, and
one batch process against one process per sentence.

    python benchmarks/documents.py [--runs 3] [--tokens 16000] [--dim 300] [--sentences 100000]
                                   [--loop-sample 100] [--startup-runs 11]
    python benchmarks/documents.py --quick     # about a minute

Every figure is a median of --runs interleaved runs, and each ratio is between medians
measured in the same runs:

1. A long document. TOKENS distinct random words with random float32 vectors (values
   uniform on (-1, 1), written "%.5f") in a word2vec text file in a temporary directory,
   converted once with `attncli vectors convert`; the document is those words in order.
   - `attncli scores --file DOC --vectors VECS --json > /dev/null`, a whole process on the
     warm cache entry: its wall time and peak RSS;
   - in this process, the streaming computation alone, `attncli.attention.stream(X,
     1/sqrt(d), 1.0, 3)` consumed fully, against numpy's own products of the same shapes,
     `S = X @ Y.T; S @ Y` with Y = X.copy() in float32 (4 T^2 d flops: the floor), and,
     to tell the blocking from the rest, the same two products 256 rows at a time.
     X is the document's (T, d) matrix exactly as `scores --file` builds it.
2. Many sentences. SENTENCES lines of 3 to 12 words drawn (seed 0) from rows 100 to 4,999
   of the bundled GloVe vocabulary (a line whose words are all punctuation is drawn
   again, since it would be an error line), on the bundled vectors:
   - `attncli batch FILE > /dev/null` with --jobs 1 and with --jobs 2, whole processes;
   - a loop that starts `attncli scores "SENTENCE" --json > /dev/null` once per sentence,
     timed on the first --loop-sample sentences (one launcher run each, the times summed).
   100,000 lines take about 20 s per batch run.
3. Start-up: benchmarks/startup.py --runs STARTUP_RUNS, run as it is, its table included.

Every attncli process is fresh, from the venv this script runs in, with ATTNCLI_CACHE_DIR a
temporary directory. Child processes are timed and their peak RSS taken by the small
launcher of benchmarks/vectors.py (fork, exec, wait4): started straight from this process,
which holds a T x T float32 matrix for the floor (1 GB at T = 16,000), a child would report
at least this process's peak RSS. RSS is in MB of 10^6 bytes. No test asserts any of this.

The machine may be shared: during each measurement the script also counts the CPU time the
whole machine spent busy (/proc/stat, steal included) less that of this process and its
children (getrusage), and reports the difference as the cores other processes took
meanwhile: a ratio is only as good as the share of the machine it was measured on.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
ATTNCLI = str(Path(sys.executable).parent / "attncli")
WORDS_FILE = HERE.parent / "embeddings" / "glove.6B.50d.100k.words.txt"
POOL = (100, 5000)  # rows 100 .. 4,999 of the bundled vocabulary
BLOCK = 256  # attention.stream's default block of rows
TOP_K = 3
TARGETS = {"stream_ratio": 1.3, "document_rss_mb": 400.0, "whole_over_stream": 1.2, "batch1_rate": 5000.0,
           "batch_speedup": 1.8, "batch_rss_mb": 100.0}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_vectors = _load("bench_vectors", HERE / "vectors.py")  # its launcher, run(), child_env(), format_block()
run, child_env, log = bench_vectors.run, bench_vectors.child_env, bench_vectors.log


class Others:
    """with Others() as o: ...; then o.cores is the CPU other processes used meanwhile, in
    cores: the machine's busy time (/proc/stat) less ours (this process and its children)."""

    @staticmethod
    def _counters() -> tuple[float, float, float]:
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
        me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return (time.perf_counter(), (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK"),
                me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime)

    def __enter__(self):
        self.start = self._counters()
        return self

    def __exit__(self, *exc):
        (t0, busy0, ours0), (t1, busy1, ours1) = self.start, self._counters()
        self.cores = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / (t1 - t0)


# --- the inputs ---------------------------------------------------------------------------------

def random_words(count: int, rng: np.random.Generator, length: int = 8) -> list[str]:
    """`count` distinct random lowercase words (letters only: one token each, never cased)."""
    words: dict[str, None] = {}
    while len(words) < count:
        letters = rng.integers(ord("a"), ord("z") + 1, size=(count, length), dtype=np.uint8)
        for row in letters:
            words.setdefault(row.tobytes().decode(), None)
            if len(words) == count:
                break
    return list(words)


def write_document_inputs(tmp: Path, tokens: int, dim: int, seed: int = 0) -> tuple[Path, Path, list[str]]:
    """The vectors file (word2vec text) and the document of its words in order."""
    rng = np.random.default_rng(seed)
    words = random_words(tokens, rng)
    vectors = tmp / f"random.{tokens}x{dim}.w2v.txt"
    with open(vectors, "wb") as f:
        f.write(f"{tokens} {dim}\n".encode())
        for start in range(0, tokens, 4000):
            chunk = words[start : start + 4000]
            values = rng.integers(-99999, 100000, size=(len(chunk), dim), dtype=np.int32)
            f.write(bench_vectors.format_block(chunk, values))
    document = tmp / f"document.{tokens}.txt"
    document.write_text("\n".join(" ".join(words[i : i + 20]) for i in range(0, tokens, 20)) + "\n")
    return vectors, document, words


def write_sentences(path: Path, count: int, seed: int = 0) -> list[str]:
    from attncli.words.tokenize import is_punctuation, tokenize

    pool = WORDS_FILE.read_text(encoding="utf-8").splitlines()[POOL[0] : POOL[1]]
    rng = np.random.default_rng(seed)
    sentences = []
    while len(sentences) < count:
        words = [pool[i] for i in rng.integers(0, len(pool), size=int(rng.integers(3, 13)))]
        sentence = " ".join(words)
        if all(is_punctuation(t) for t in tokenize(sentence)):
            continue  # it would be an error line (only punctuation), which makes batch exit 1
        sentences.append(sentence)
    path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return sentences


# --- the in-process computations ----------------------------------------------------------------

def floor_products(X: np.ndarray, Y: np.ndarray) -> float:
    start = time.perf_counter()
    S = X @ Y.T  # (T, d) @ (d, T) -> (T, T)
    Z = S @ Y  # (T, T) @ (T, d) -> (T, d)
    seconds = time.perf_counter() - start
    del S, Z
    return seconds


def blocked_products(X: np.ndarray, Y: np.ndarray) -> float:
    start = time.perf_counter()
    for s in range(0, len(X), BLOCK):
        S = X[s : s + BLOCK] @ Y.T  # (b, T)
        Z = S @ Y  # (b, d)
    seconds = time.perf_counter() - start
    del S, Z
    return seconds


def streamed(X: np.ndarray, scale: float) -> float:
    from attncli import attention

    start = time.perf_counter()
    for _ in attention.stream(X, scale, 1.0, TOP_K):
        pass
    return time.perf_counter() - start


def check_stream(X: np.ndarray, scale: float) -> None:
    """The first block of the stream against softmax over numpy's full product: a check, not timed."""
    from attncli import attention

    start, top, weights, Z = next(attention.stream(X, scale, 1.0, TOP_K))
    logits = (X[: len(Z)].astype(np.float64) @ X.T.astype(np.float64)) * scale
    alpha = np.exp(logits - logits.max(axis=1, keepdims=True))
    alpha /= alpha.sum(axis=1, keepdims=True)
    expected = alpha @ X.astype(np.float64)
    if not np.allclose(Z, expected, rtol=1e-4, atol=1e-5):
        raise SystemExit(f"attention.stream's context vectors differ from numpy's by up to {np.abs(Z - expected).max():g}")


# --- the measurements ---------------------------------------------------------------------------

def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f", BLAS {blas['name']} {blas['version']}"
    except Exception:  # older numpy: no dicts
        blas = ""
    return (f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, numpy {np.__version__}{blas}, {time.strftime('%Y-%m-%d')}")


def prepare_document(args, tmp: Path) -> dict:
    start = time.perf_counter()
    vectors_path, document, words = write_document_inputs(tmp, args.tokens, args.dim)
    log(f"wrote {vectors_path.name} ({vectors_path.stat().st_size / 1e6:.0f} MB) and {document.name} "
        f"in {time.perf_counter() - start:.1f} s")
    cache = tmp / "document-cache"
    cache.mkdir()
    seconds, _, out = run([ATTNCLI, "vectors", "convert", str(vectors_path), "--json"], child_env(cache), capture=True)
    info = json.loads(out)
    if (info["words"], info["dim"], info["cased"]) != (args.tokens, args.dim, False):
        raise SystemExit(f"the converted vectors are {info}, not {args.tokens} lowercase words of {args.dim}")
    log(f"converted the vectors in {seconds:.1f} s")
    command = [ATTNCLI, "scores", "--file", str(document), "--vectors", str(vectors_path), "--json"]
    _, _, out = run(command, child_env(cache), capture=True)  # a check, not timed
    json_bytes = len(out.encode())
    rows = out.splitlines()
    first, last = json.loads(rows[0]), json.loads(rows[-1])
    if len(rows) != args.tokens or first["token"] != words[0] or last["index"] != args.tokens - 1 \
            or len(first["top"]) != TOP_K or len(first["context"]) != args.dim:
        raise SystemExit(f"scores --file gave {len(rows)} rows, not one per word with {TOP_K} top and {args.dim} values")
    del out, rows

    # X exactly as scores --file builds it: the warm entry, the document embedded
    os.environ["ATTNCLI_CACHE_DIR"] = str(cache)
    from attncli.encoder import Options
    from attncli.words.load import load_vectors

    vectors = load_vectors(str(vectors_path))
    X = np.ascontiguousarray(vectors.embed_sentence(document.read_text(), Options()).X)
    if X.shape != (args.tokens, args.dim) or X.dtype != np.float32:
        raise SystemExit(f"the document's X is {X.shape} {X.dtype}, not ({args.tokens}, {args.dim}) float32")
    scale = 1.0 / np.sqrt(args.dim)
    check_stream(X, scale)
    return {"command": command, "cache": cache, "json_bytes": json_bytes, "entries": sorted(p.name for p in cache.rglob("*")),
            "X": X, "Y": X.copy(), "scale": scale}


def prepare_batch(args, tmp: Path) -> dict:
    corpus = tmp / f"sentences.{args.sentences}.txt"
    sentences = write_sentences(corpus, args.sentences)
    sample = sentences[: args.loop_sample]
    cache = tmp / "batch-cache"  # the bundled vectors need no cache: it must stay empty
    cache.mkdir()
    # a check, not timed: batch's document for a line is the `scores` one of that sentence, plus "line"
    head = tmp / "head.txt"
    head.write_text("\n".join(sample) + "\n", encoding="utf-8")
    _, _, out = run([ATTNCLI, "batch", str(head)], child_env(cache), capture=True)
    json_bytes = len(out.encode()) / len(sample)
    results = [json.loads(line) for line in out.splitlines()]
    _, _, out = run([ATTNCLI, "scores", sample[0], "--json"], child_env(cache), capture=True)
    if len(results) != len(sample) or results[0] != {"line": 1, **json.loads(out)}:
        raise SystemExit("attncli batch's results are not those of attncli scores, one per line")
    log(f"wrote {args.sentences:,} sentences, {sum(len(s.split()) for s in sentences) / len(sentences):.1f} words "
        "each on average")
    return {"corpus": corpus, "sample": sample, "cache": cache, "json_bytes": json_bytes}


def measure(args, doc: dict, bat: dict) -> dict:
    samples: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    for i in range(args.runs):
        with Others() as others:
            seconds, rss, _ = run(doc["command"], child_env(doc["cache"]))
        add("doc_wall", seconds)
        add("doc_rss", rss)
        add("doc_others", others.cores)
        with Others() as others:
            add("floor", floor_products(doc["X"], doc["Y"]))
            add("blocked", blocked_products(doc["X"], doc["Y"]))
            add("stream", streamed(doc["X"], doc["scale"]))
        add("inproc_others", others.cores)
        log(f"  run {i + 1}/{args.runs}: scores --file {seconds:.2f} s, {rss:.0f} MB; in-process: floor "
            f"{samples['floor'][-1]:.2f} s, blocked {samples['blocked'][-1]:.2f} s, stream {samples['stream'][-1]:.2f} s; "
            f"others took {samples['doc_others'][-1]:.2f} and {others.cores:.2f} cores")
        for jobs in (1, 2):
            with Others() as others:
                seconds, rss, _ = run([ATTNCLI, "batch", str(bat["corpus"]), "--jobs", str(jobs)], child_env(bat["cache"]))
            add(f"batch{jobs}_wall", seconds)
            add(f"batch{jobs}_rss", rss)
            add(f"batch{jobs}_others", others.cores)
        with Others() as others:
            loop = sum(run([ATTNCLI, "scores", sentence, "--json"], child_env(bat["cache"]))[0] for sentence in bat["sample"])
        add("loop_wall", loop)
        add("loop_others", others.cores)
        log(f"  run {i + 1}/{args.runs}: batch --jobs 1 {samples['batch1_wall'][-1]:.1f} s, --jobs 2 "
            f"{samples['batch2_wall'][-1]:.1f} s, a process per sentence {loop:.1f} s for {len(bat['sample'])}; others took "
            + " / ".join(f"{samples[k][-1]:.2f}" for k in ("batch1_others", "batch2_others", "loop_others")) + " cores")
    if sorted(p.name for p in doc["cache"].rglob("*")) != doc["entries"] or any(bat["cache"].iterdir()):
        raise SystemExit("a cache directory changed during the runs: the warm entry was not used as it was")
    return samples


def startup_table(runs: int) -> tuple[str, float]:
    log(f"start-up: benchmarks/startup.py --runs {runs}")
    env = {k: v for k, v in os.environ.items() if k != "ATTNCLI_VECTORS"}
    with tempfile.TemporaryDirectory(prefix="attncli-bench-startup-") as cache, Others() as others:
        env["ATTNCLI_CACHE_DIR"] = cache
        out = subprocess.run([PYTHON, str(HERE / "startup.py"), "--runs", str(runs)], env=env, check=True,
                             capture_output=True, text=True).stdout
    return out, others.cores


def code_version() -> str:
    """The commit measured, the files of attncli/ that differ from it, and a hash of attncli's
    sources as they are (every attncli process reads them afresh: an edit during a run shows)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(HERE.parent), *args], capture_output=True, text=True).stdout.rstrip("\n")

    changed = [line[3:] for line in git("status", "--porcelain", "--", "attncli", "embeddings").splitlines()]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted((HERE.parent / "attncli").glob("*.py"))))
    return (git("rev-parse", "--short", "HEAD") + (f" with uncommitted changes to {', '.join(changed)}" if changed else "")
            + f" (sources sha256 {digest.hexdigest()[:12]})")


# --- the report ---------------------------------------------------------------------------------

def report(args, samples: dict, sizes: dict, startup: str, startup_others: float, version: str) -> None:
    m = {k: statistics.median(v) for k, v in samples.items()}
    T, d, n, k = args.tokens, args.dim, args.sentences, args.loop_sample
    flops = 4 * T * T * d
    stream_ratio = m["stream"] / m["floor"]
    rate1, rate2, loop_rate = n / m["batch1_wall"], n / m["batch2_wall"], args.loop_sample / m["loop_wall"]

    def met(ok: bool) -> str:
        return "met" if ok else "**missed**"

    rows = [
        (f"(1) `attncli scores --file DOC --json`, T = {T:,}, d = {d}, whole process "
         f"({sizes['doc'] / 1e6:.0f} MB of JSON)", f"{m['doc_wall']:.2f} s", "", ""),
        ("(1) its peak RSS", f"{m['doc_rss']:.0f} MB", f"< {TARGETS['document_rss_mb']:.0f} MB",
         met(m["doc_rss"] < TARGETS["document_rss_mb"])),
        (f"(1) numpy `S = X @ Y.T; S @ Y`, float32 (the floor, {flops / 1e9:.0f} GFLOP)",
         f"{m['floor']:.2f} s ({flops / m['floor'] / 1e9:.0f} GFLOP/s)", "", ""),
        (f"(1) the same products, {BLOCK} rows at a time", f"{m['blocked']:.2f} s ({m['blocked'] / m['floor']:.2f}x the floor)",
         "", ""),
        (f"(1) `attention.stream(X, 1/sqrt(d), 1.0, {TOP_K})`, in-process", f"{m['stream']:.2f} s", "", ""),
        ("(1) stream / floor", f"{stream_ratio:.2f}x", f"<= {TARGETS['stream_ratio']}x",
         met(stream_ratio <= TARGETS["stream_ratio"])),
        ("(1) whole process / stream", f"{m['doc_wall'] / m['stream']:.2f}x", f"<= {TARGETS['whole_over_stream']}x",
         met(m["doc_wall"] / m["stream"] <= TARGETS["whole_over_stream"])),
        (f"(2) `attncli batch` {n:,} sentences, --jobs 1 (about {sizes['batch'] * n / 1e6:,.0f} MB of JSON, "
         f"{sizes['batch'] / 1e3:.1f} kB a line in the first {k})", f"{m['batch1_wall']:.1f} s ({rate1:,.0f} sentences/s)",
         f">= {TARGETS['batch1_rate']:,.0f} sentences/s", met(rate1 >= TARGETS["batch1_rate"])),
        (f"(2) `attncli batch` {n:,} sentences, --jobs 2", f"{m['batch2_wall']:.1f} s ({rate2:,.0f} sentences/s)", "", ""),
        ("(2) --jobs 2 speedup over --jobs 1", f"{m['batch1_wall'] / m['batch2_wall']:.2f}x",
         f">= {TARGETS['batch_speedup']}x on an idle machine", met(m["batch1_wall"] / m["batch2_wall"] >= TARGETS["batch_speedup"])),
        ("(2) peak RSS of batch --jobs 1 / --jobs 2 (its largest process)",
         f"{m['batch1_rss']:.0f} / {m['batch2_rss']:.0f} MB", f"< {TARGETS['batch_rss_mb']:.0f} MB (--jobs 1)",
         met(m["batch1_rss"] < TARGETS["batch_rss_mb"])),
        (f'(2) `attncli scores "SENTENCE" --json`, a process per sentence ({k} sentences)',
         f"{m['loop_wall']:.1f} s ({loop_rate:,.1f} sentences/s)", "", ""),
        ("(2) batch --jobs 1 / a process per sentence, in sentences/s", f"{rate1 / loop_rate:,.0f}x", "", ""),
        (f"CPU other processes took meanwhile, cores of {os.cpu_count()}: (1) whole process / in-process",
         f"{m['doc_others']:.2f} / {m['inproc_others']:.2f}", "", ""),
        ("CPU other processes took meanwhile: (2) batch --jobs 1 / --jobs 2 / a process per sentence",
         f"{m['batch1_others']:.2f} / {m['batch2_others']:.2f} / {m['loop_others']:.2f}", "", ""),
    ]
    print(f"machine: {machine()}")
    print(f"attncli: {version}")
    print(f"median of {args.runs} interleaved runs each; ratios are of the medians\n")
    print("| measurement | median | target | |")
    print("| --- | ---: | ---: | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\n(3) start-up, `python benchmarks/startup.py --runs {args.startup_runs}` "
          f"(other processes took {startup_others:.2f} cores meanwhile):\n")
    print(startup.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs of (1) and (2)")
    parser.add_argument("--tokens", type=int, default=16_000, help="T, the document's length")
    parser.add_argument("--dim", type=int, default=300, help="d, the size of its word vectors")
    parser.add_argument("--sentences", type=int, default=100_000, help="lines of the batch corpus")
    parser.add_argument("--loop-sample", type=int, default=100, help="sentences of the process-per-sentence loop")
    parser.add_argument("--startup-runs", type=int, default=11, help="--runs of benchmarks/startup.py")
    parser.add_argument("--quick", action="store_true",
                        help="about a minute: 1 run, T = 4,000, 10,000 sentences, 20 of them a process each, 5 start-ups")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.tokens, args.sentences, args.loop_sample, args.startup_runs = 1, 4_000, 10_000, 20, 5
    if args.tokens < BLOCK or not 1 <= args.loop_sample <= args.sentences or args.runs < 1:
        raise SystemExit(f"need --tokens >= {BLOCK}, 1 <= --loop-sample <= --sentences and --runs >= 1")
    version = code_version()
    with tempfile.TemporaryDirectory(prefix="attncli-bench-") as name:
        tmp = Path(name)
        doc = prepare_document(args, tmp)
        bat = prepare_batch(args, tmp)
        log(f"(1) and (2), {args.runs} runs")
        samples = measure(args, doc, bat)
        sizes = {"doc": doc["json_bytes"], "batch": bat["json_bytes"]}
        del doc
    startup, startup_others = startup_table(args.startup_runs)
    if code_version() != version:
        version = f"{version} at the start, {code_version()} at the end: attncli changed during the run"
    report(args, samples, sizes, startup, startup_others, version)


if __name__ == "__main__":
    main()
