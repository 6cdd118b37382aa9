"""A user's own large vectors file: the first load through gensim, the cached loads after it.

    python benchmarks/vectors.py [--words 400000] [--dim 300] [--runs 3] [--fast-runs 11]
    python benchmarks/vectors.py --quick     # about a minute

Writes a word2vec text file of WORDS x DIM random values (400,000 x 300 is about 1 GB) in a
temporary directory, then measures, all in the same run and as medians:

a. `KeyedVectors.load_word2vec_format(path)` alone, in a fresh process, against the first load
   through attncli, `attncli vectors convert PATH --json` with ATTNCLI_CACHE_DIR an empty
   directory each time (gensim's parse plus writing the cache entry); --runs runs each,
   interleaved.
b. `attncli scores SENTENCE --vectors PATH --format json` once the cache is warm: its wall
   time against the first load of (a), and its peak RSS;
c. `attncli scores SENTENCE --format json` on the bundled vectors against
   `python -c "import numpy"`, with `python -c "import gensim"` for context;
   (b) and (c) are --fast-runs runs each, interleaved.

Every command is a fresh process of the venv this script runs in; every attncli run has
ATTNCLI_CACHE_DIR set to a temporary directory, so the user's own cache is never touched.
Peak RSS is each child's own ru_maxrss (os.wait4 in a small launcher, see LAUNCHER), in MB
of 10^6 bytes. The vectors file stays in the page cache (it was just written), so the loads
measure parsing, not the disk.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PYTHON = sys.executable
ATTNCLI = str(Path(sys.executable).parent / "attncli")
SENTENCE = "The earth is like an orange"
SENTENCE_WORDS = ["the", "earth", "is", "like", "an", "orange"]
GENSIM_CHILD = """
import json, sys, time
start = time.perf_counter()
from gensim.models import KeyedVectors
imported = time.perf_counter()
kv = KeyedVectors.load_word2vec_format(sys.argv[1])
done = time.perf_counter()
import hashlib, numpy  # after the timed call: what attncli's load must equal, to the bit (no copy: the RSS stays)
digest = hashlib.sha256(memoryview(numpy.ascontiguousarray(kv.vectors, dtype=numpy.float32)).cast("B"))
digest.update("\\n".join(kv.index_to_key).encode("utf-8", "surrogatepass"))
print(json.dumps({"import": imported - start, "load": done - imported, "words": len(kv), "dim": kv.vector_size,
                  "sha256": digest.hexdigest()}))
"""
# what attncli read into its cache entry, hashed as GENSIM_CHILD hashes gensim's
ENTRY_CHILD = """
import hashlib, json, sys, numpy
from attncli.words.load import load_vectors
v = load_vectors(sys.argv[1])
digest = hashlib.sha256(memoryview(numpy.ascontiguousarray(v.matrix, dtype=numpy.float32)).cast("B"))
digest.update("\\n".join(v.vocab.word(i) for i in range(v.size)).encode("utf-8", "surrogatepass"))
print(json.dumps({"sha256": digest.hexdigest(), "entry": v.meta.get("entry")}))
"""
TARGETS = {"first_load_speedup": 3.0, "warm_speedup": 100.0, "warm_rss_mb": 150.0, "bundled_ratio": 2.0}


# --- the vectors file -------------------------------------------------------------------------

def vocabulary(count: int) -> list[str]:
    """w0 .. w{count-1}, with the sentence's words in place of six of them, spread over the file."""
    if count < len(SENTENCE_WORDS):
        raise SystemExit(f"--words must be at least {len(SENTENCE_WORDS)}")
    words = [f"w{i}" for i in range(count)]
    for k, word in enumerate(SENTENCE_WORDS):
        words[(2 * k + 1) * count // (2 * len(SENTENCE_WORDS))] = word
    return words


def format_block(words: list[str], values: np.ndarray) -> bytes:
    """The lines "word v1 v2 ..." for `values`, integers in (-100000, 100000) standing for
    values / 1e5 written "%.5f" ("-0.01234", "0.98765"), formatted byte by byte in numpy."""
    B, d = values.shape
    names = np.array([w.encode() for w in words])  # dtype S{longest}, padded with NUL
    name_bytes = names.view(np.uint8).reshape(B, names.dtype.itemsize)
    magnitude = np.abs(values).astype(np.int32)
    digits = (magnitude[..., None] // (10 ** np.arange(4, -1, -1, dtype=np.int32))) % 10  # (B, d, 5)
    chars = np.empty((B, d, 9), np.uint8)  # " -0.12345"
    chars[..., 0], chars[..., 1], chars[..., 2], chars[..., 3] = ord(" "), ord("-"), ord("0"), ord(".")
    chars[..., 4:] = digits + ord("0")
    keep = np.ones((B, d, 9), bool)
    keep[..., 1] = values < 0  # no "-" before a value >= 0
    lines = np.concatenate([name_bytes, chars.reshape(B, d * 9), np.full((B, 1), ord("\n"), np.uint8)], axis=1)
    mask = np.concatenate([name_bytes != 0, keep.reshape(B, d * 9), np.ones((B, 1), bool)], axis=1)
    return lines[mask].tobytes()  # row by row: each line's kept bytes, in order


def write_vectors(path: Path, count: int, dim: int, seed: int = 0, block: int = 4000) -> int:
    rng = np.random.default_rng(seed)
    words = vocabulary(count)
    with open(path, "wb") as f:
        f.write(f"{count} {dim}\n".encode())
        for start in range(0, count, block):
            chunk = words[start : start + block]
            f.write(format_block(chunk, rng.integers(-99999, 100000, size=(len(chunk), dim), dtype=np.int32)))
    return path.stat().st_size


# --- running a command ------------------------------------------------------------------------

# Each command runs under this small launcher, which forks, execs and waits for it, and
# writes the child's wall time and its own peak RSS to a file. Not measured from here: a child
# started from a large process (this one, after writing the file) inherits that process's
# peak RSS across exec (Linux keeps the larger of the old and new address space's high-water
# mark in ru_maxrss), so every child would show at least this process's peak. The launcher is
# `python -I -S` (about 10 MB), below anything measured.
LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
with open(sys.argv[1], "w") as f:
    f.write(f"{seconds!r} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def run(command: list[str], env: dict, *, capture: bool = False) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of one fresh process; raises on a non-zero exit.
    The time is taken by the launcher around fork to exit, so its own start-up is left out."""
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as result:
        proc = subprocess.run([PYTHON, "-I", "-S", "-c", LAUNCHER, result.name, *command], env=env, stderr=err,
                              stdout=subprocess.PIPE if capture else subprocess.DEVNULL)
        seconds, maxrss, code = result.read().split()
        if proc.returncode != 0 or int(code) != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(command)} exited with {code}:\n{err.read().decode(errors='replace')}")
    out = proc.stdout.decode() if capture else ""
    return float(seconds), int(maxrss) * 1024 / 1e6, out  # ru_maxrss is in KiB on Linux


def child_env(cache_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ATTNCLI_VECTORS", "ATTNCLI_CACHE_DIR")}
    env["ATTNCLI_CACHE_DIR"] = str(cache_dir)
    return env


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the machine ------------------------------------------------------------------------------

def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gensim = subprocess.run([PYTHON, "-c", "import gensim; print(gensim.__version__)"],
                            capture_output=True, text=True).stdout.strip()
    return (f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, numpy {np.__version__}, gensim {gensim}, "
            f"{time.strftime('%Y-%m-%d')}")


# --- the measurements -------------------------------------------------------------------------

def measure_first_loads(path: Path, tmp: Path, runs: int) -> tuple[dict, Path]:
    """(a): gensim alone against `attncli vectors convert` into an empty cache, interleaved.
    Returns the samples and the cache directory of the last convert, left warm for (b)."""
    samples = {k: [] for k in ("gensim_wall", "gensim_call", "gensim_import", "gensim_rss",
                               "convert_wall", "convert_load", "convert_rss")}
    warm = None
    for i in range(runs):
        seconds, rss, out = run([PYTHON, "-c", GENSIM_CHILD, str(path)], child_env(tmp / "unused-cache"), capture=True)
        child = json.loads(out)
        samples["gensim_wall"].append(seconds)
        samples["gensim_call"].append(child["load"])
        samples["gensim_import"].append(child["import"])
        samples["gensim_rss"].append(rss)
        samples.setdefault("gensim_sha256", []).append(child["sha256"])
        log(f"  run {i + 1}/{runs}: gensim {seconds:.1f} s (the call {child['load']:.1f} s), {rss:.0f} MB")

        cache = tmp / f"cache-{i}"
        cache.mkdir()
        seconds, rss, out = run([ATTNCLI, "vectors", "convert", str(path), "--json"], child_env(cache), capture=True)
        info = json.loads(out)
        samples["convert_wall"].append(seconds)
        samples["convert_load"].append(info["load_seconds"])
        samples["convert_rss"].append(rss)
        log(f"  run {i + 1}/{runs}: attncli vectors convert {seconds:.1f} s (the load {info['load_seconds']:.1f} s), {rss:.0f} MB")
        if warm is not None:
            shutil.rmtree(warm)
        warm = cache
        os.sync()  # write the entry out now, not during the next run
    _, _, out = run([PYTHON, "-c", ENTRY_CHILD, str(path)], child_env(warm), capture=True)  # a check, not timed
    samples["same_as_gensim"] = [set(samples["gensim_sha256"]) == {json.loads(out)["sha256"]}]
    log(f"  the cache entry's words and float32 matrix equal gensim's: {samples['same_as_gensim'][0]}")
    return samples, warm


def measure_fast(path: Path, warm: Path, tmp: Path, runs: int) -> dict:
    """(b) and (c): short processes, interleaved."""
    empty = tmp / "empty-cache"
    empty.mkdir()
    commands = {
        "import_numpy": ([PYTHON, "-c", "import numpy"], empty),
        "import_gensim": ([PYTHON, "-c", "import gensim"], empty),
        "bundled": ([ATTNCLI, "scores", SENTENCE, "--format", "json"], empty),
        "warm": ([ATTNCLI, "scores", SENTENCE, "--vectors", str(path), "--format", "json"], warm),
    }
    entries_before = sorted(p.name for p in warm.iterdir())
    _, _, out = run(commands["warm"][0], child_env(warm), capture=True)  # a check, not timed
    tokens = json.loads(out)["tokens"]
    if tokens != SENTENCE_WORDS:
        raise SystemExit(f"the warm run found the tokens {tokens}, not {SENTENCE_WORDS}")
    samples = {f"{name}_{k}": [] for name in commands for k in ("wall", "rss")}
    for i in range(runs):
        for name, (command, cache) in commands.items():
            seconds, rss, _ = run(command, child_env(cache))
            samples[f"{name}_wall"].append(seconds)
            samples[f"{name}_rss"].append(rss)
        log(f"  run {i + 1}/{runs}: " + ", ".join(f"{n} {samples[n + '_wall'][-1]:.3f} s" for n in commands))
    if sorted(p.name for p in warm.iterdir()) != entries_before or any(empty.iterdir()):
        raise SystemExit("a cache directory changed during the warm runs: the cache was not used")
    return samples


# --- the report -------------------------------------------------------------------------------

def report(args, size: int, a: dict, fast: dict) -> None:
    m = {k: statistics.median(v) for k, v in {**a, **fast}.items() if k not in ("gensim_sha256", "same_as_gensim")}
    same = a["same_as_gensim"][0]
    convert_ratio = m["convert_wall"] / m["gensim_wall"]
    speedup_call = m["gensim_call"] / m["convert_wall"]
    # attncli's load_seconds include importing gensim, which it does lazily: compare like with like
    gensim_in_process = statistics.median([i + c for i, c in zip(a["gensim_import"], a["gensim_call"])])
    call_ratio = m["convert_load"] / gensim_in_process
    speedup = m["convert_wall"] / m["warm_wall"]
    bundled_ratio = m["bundled_wall"] / m["import_numpy_wall"]
    gensim_ratio = m["import_gensim_wall"] / m["import_numpy_wall"]

    def met(ok: bool) -> str:
        return "met" if ok else "**missed**"

    rows = [
        ("(a) gensim `load_word2vec_format`, whole process", f"{m['gensim_wall']:.1f} s", "", ""),
        ("(a) gensim `load_word2vec_format`, the call alone", f"{m['gensim_call']:.1f} s", "", ""),
        ("(a) gensim, `import gensim` and the call, in-process", f"{gensim_in_process:.1f} s", "", ""),
        ("(a) `attncli vectors convert`, empty cache, whole process", f"{m['convert_wall']:.1f} s", "", ""),
        ("(a) `attncli vectors convert`, the load in-process (its load_seconds, gensim's import included)", f"{m['convert_load']:.1f} s", "", ""),
        ("(a) gensim's call alone / attncli's whole first load (convert, cache written)", f"{speedup_call:.2f}x faster",
         f">= {TARGETS['first_load_speedup']}x", met(speedup_call >= TARGETS["first_load_speedup"])),
        ("(a) attncli first load / gensim, whole processes", f"{convert_ratio:.2f}x", "", ""),
        ("(a) attncli's load in-process / gensim's import and call in-process", f"{call_ratio:.2f}x", "", ""),
        ("(a) peak RSS: gensim / attncli convert", f"{m['gensim_rss']:.0f} / {m['convert_rss']:.0f} MB",
         "attncli's no higher", met(m["convert_rss"] <= m["gensim_rss"])),
        ("(a) the cache entry's words and float32 matrix against gensim's (SHA-256 of both)",
         "identical" if same else "**different**", "identical", met(same)),
        ("(b) `attncli scores --vectors PATH`, cache warm, whole process", f"{m['warm_wall']:.3f} s", "", ""),
        ("(b) first load / warm run", f"{speedup:.0f}x faster",
         f">= {TARGETS['warm_speedup']:.0f}x", met(speedup >= TARGETS["warm_speedup"])),
        ("(b) peak RSS of the warm run", f"{m['warm_rss']:.0f} MB",
         f"< {TARGETS['warm_rss_mb']:.0f} MB", met(m["warm_rss"] < TARGETS["warm_rss_mb"])),
        ('(c) `python -c "import numpy"` (the floor)', f"{m['import_numpy_wall']:.3f} s", "", ""),
        ("(c) `attncli scores` on the bundled vectors", f"{m['bundled_wall']:.3f} s", "", ""),
        ("(c) bundled run / import numpy", f"{bundled_ratio:.2f}x",
         f"<= {TARGETS['bundled_ratio']}x", met(bundled_ratio <= TARGETS["bundled_ratio"])),
        ('(c) `python -c "import gensim"`', f"{m['import_gensim_wall']:.3f} s", "", ""),
        ("(c) import gensim / import numpy", f"{gensim_ratio:.2f}x", "", ""),
        ("peak RSS: import numpy / import gensim / bundled run",
         f"{m['import_numpy_rss']:.0f} / {m['import_gensim_rss']:.0f} / {m['bundled_rss']:.0f} MB", "", ""),
    ]
    print(f"machine: {machine()}")
    print(f"vectors: {args.words:,} x {args.dim} word2vec text, {size / 1e9:.2f} GB; "
          f"(a) median of {args.runs} runs, (b) and (c) median of {args.fast_runs} runs; "
          "ratios are of the medians\n")
    print("| measurement | median | target | |")
    print("| --- | ---: | ---: | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=400_000)
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3, help="runs of the slow first loads (a)")
    parser.add_argument("--fast-runs", type=int, default=11, help="runs of the short processes (b), (c)")
    parser.add_argument("--quick", action="store_true", help="about a minute: 50,000 words, 1 run, 5 short runs")
    args = parser.parse_args()
    if args.quick:
        args.words, args.runs, args.fast_runs = 50_000, 1, 5
    with tempfile.TemporaryDirectory(prefix="attncli-bench-") as name:
        tmp = Path(name)
        path = tmp / f"random.{args.words}x{args.dim}.w2v.txt"
        start = time.perf_counter()
        size = write_vectors(path, args.words, args.dim)
        log(f"wrote {path} ({size / 1e9:.2f} GB) in {time.perf_counter() - start:.1f} s")
        os.sync()
        log(f"(a) first loads, {args.runs} runs")
        a, warm = measure_first_loads(path, tmp, args.runs)
        log(f"(b), (c) short runs, {args.fast_runs} runs")
        fast = measure_fast(path, warm, tmp, args.fast_runs)
        report(args, size, a, fast)


if __name__ == "__main__":
    main()
