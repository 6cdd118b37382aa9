"""What verifying a cache entry's checksums costs at each load, and which hash to use.

    python benchmarks/checksums.py [--words 3000000] [--dim 300] [--runs 7]

Writes a synthetic cache entry of WORDS words (words of 12 to 14 bytes, like GoogleNews's)
and a WORDS x DIM float32 matrix in a temporary cache directory, with attncli's own writer,
then measures, as medians of --runs runs with the files in the page cache:

a. each candidate hash over the bytes a load verifies (words.txt, offsets.npy and order.npy
   whole, the .npy headers): zlib.crc32, zlib.adler32, hashlib's blake2b, sha1, sha256, md5;
b. a whole load of the entry (cache.read_cached: every check, the checksums included), in
   this process after a first load, and the part of it the CRC-32s take.

The matrix is never hashed (only its header), so DIM changes (b) little; it is there so the
entry is the size a real one is.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np


def median_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=3_000_000)
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="attncli-bench-checksums-"))
    os.environ["ATTNCLI_CACHE_DIR"] = str(tmp / "cache")
    from attncli.words import cache, entry
    from attncli.words.vectors import Vectors, Vocabulary

    rng = np.random.default_rng(0)
    words = [f"w{i:07d}_{'x' * (i % 3)}{'ab'[i % 2]}" for i in range(args.words)]
    start = time.perf_counter()
    vectors = Vectors("synthetic", Vocabulary.from_words(words), rng.standard_normal((args.words, args.dim),
                                                                                   dtype=np.float32), False)
    folder = tmp / "cache" / "synthetic-0"
    meta = {"source": {"path": "/synthetic", "size": 0, "mtime_ns": 0, "format": "word2vec-text", "compression": None},
            "options": {"limit": None}}
    cache.store(folder, vectors, meta)
    del vectors
    print(f"entry of {args.words:,} words x {args.dim} written in {time.perf_counter() - start:.1f} s")
    prefix = folder / cache.PREFIX
    sizes = {s: os.path.getsize(f"{prefix}{s}") for s in entry.SUFFIXES}
    print("  " + ", ".join(f"{s} {n / 1e6:,.1f} MB" for s, n in sizes.items()))

    hashed = [Path(f"{prefix}{s}").read_bytes() for s in entry.WHOLE]
    with open(f"{prefix}.npy", "rb") as f:
        hashed.append(f.read(128))
    total = sum(len(b) for b in hashed)
    print(f"\na. hashing the {total / 1e6:,.1f} MB a load verifies (median of {args.runs}):")
    candidates = {
        "zlib.crc32": lambda: [zlib.crc32(b) for b in hashed],
        "zlib.adler32": lambda: [zlib.adler32(b) for b in hashed],
        "blake2b-128": lambda: [hashlib.blake2b(b, digest_size=16).digest() for b in hashed],
        "sha1": lambda: [hashlib.sha1(b).digest() for b in hashed],
        "sha256": lambda: [hashlib.sha256(b).digest() for b in hashed],
        "md5": lambda: [hashlib.md5(b).digest() for b in hashed],
    }
    for name, fn in candidates.items():
        seconds = median_seconds(fn, args.runs)
        print(f"   {name:13s} {seconds * 1000:7.1f} ms  {total / seconds / 1e9:5.2f} GB/s")

    cache.read_cached(folder, "x")  # the first load pages everything in
    with_sums = median_seconds(lambda: cache.read_cached(folder, "x"), args.runs)
    crc = median_seconds(candidates["zlib.crc32"], args.runs)
    print(f"\nb. a load of the entry, every check made (median of {args.runs}): {with_sums * 1000:.1f} ms, "
          f"of which the CRC-32s {crc * 1000:.1f} ms")
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
          f"zlib {zlib.ZLIB_RUNTIME_VERSION}, numpy {np.__version__}")
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()


if __name__ == "__main__":
    main()
