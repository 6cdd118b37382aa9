"""Word vectors: where they come from, how they are read, and lookups in them.

Knows files, not click or rich. `load_vectors` is the one way in: no source means the
bundled GloVe 6B 50d vectors (embeddings/ in the repository, attncli.embeddings once
installed); a path is read through gensim's KeyedVectors, whose format is detected here.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import math
import os
from dataclasses import dataclass
from functools import cached_property
from importlib.resources import files
from pathlib import Path

import numpy as np

from attncli.errors import InputError, VectorsError

BUNDLED_NAME = "glove.6B.50d.100k"


@dataclass
class Vectors:
    """A vocabulary and its matrix: row i of `matrix` is the vector of `words[i]`."""

    name: str
    words: list[str]
    matrix: np.ndarray  # (V, d) float32
    cased: bool  # False when every word is lowercase (GloVe 6B): tokens are lowercased to match
    source: str = ""

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    @cached_property
    def index(self) -> dict[str, int]:
        return {word: i for i, word in enumerate(self.words)}

    def key(self, token: str) -> str | None:
        """The vocabulary word for a token, or None; cased vectors fall back to the lowercase form."""
        for candidate in (token, token.lower()):
            if candidate in self.index:
                return candidate
        return None

    def vector(self, word: str) -> np.ndarray:
        return self.matrix[self.index[word]]  # (d,)

    def nearest(self, v: np.ndarray, k: int, exclude: set[str] = frozenset()) -> list[tuple[str, float]]:
        """The k vocabulary words of highest cosine with v, highest first, without those in `exclude`.

        Exact: one matrix-vector product over the whole vocabulary.
        """
        norm = float(np.linalg.norm(v))
        if k < 1 or norm == 0.0:
            return []  # the cosine with a zero vector is undefined
        cosines = self.unit_matrix @ (np.asarray(v, dtype=np.float32) / norm)  # (V,)
        take = min(len(cosines), k + len(exclude))
        best = np.argpartition(-cosines, take - 1)[:take]
        best = best[np.argsort(-cosines[best], kind="stable")]
        found = [(self.words[i], float(cosines[i])) for i in best if self.words[i] not in exclude]
        return found[:k]

    @cached_property
    def unit_matrix(self) -> np.ndarray:
        """Every row scaled to length 1 (a zero row stays zero), computed on first use."""
        norms = np.linalg.norm(self.matrix, axis=1, keepdims=True)  # (V, 1)
        return self.matrix / np.where(norms == 0, 1, norms)  # (V, d)


@dataclass
class Embedded:
    """A sentence's tokens that got a vector, their vectors, and the tokens that had none."""

    tokens: list[str]
    X: np.ndarray  # (T, d) float32
    oov: list[str]


def embed(tokens: list[str], vectors: Vectors, *, oov: str = "skip") -> Embedded:
    """Look up each token. Out of vocabulary: "skip" leaves it out, "zero" gives it a zero
    vector (it stays among the tokens), "error" refuses the sentence."""
    kept, rows, missing = [], [], []
    for token in tokens:
        word = vectors.key(token)
        if word is None:
            missing.append(token)
            if oov == "error":
                raise InputError(f"no vector for {token!r} in {vectors.name}; use --oov skip or --oov zero to go on without it")
            if oov == "skip":
                continue
        row = np.zeros(vectors.dim, np.float32) if word is None else vectors.vector(word)
        if not np.all(np.isfinite(row)):
            raise InputError(f"the vector of {word!r} in {vectors.name} holds NaN or infinity; fix the file or leave the word out")
        kept.append(token)
        rows.append(row)
    if not kept:
        raise InputError(f"none of the tokens ({' '.join(tokens)}) has a vector in {vectors.name}; try other words or --vectors")
    return Embedded(kept, np.stack(rows), missing)  # X: (T, d)


def load_vectors(source: str | os.PathLike | None = None) -> Vectors:
    """The bundled GloVe vectors when `source` is None, else a word2vec or GloVe file."""
    if source is None:
        return _load_bundled()
    return _load_with_gensim(Path(source))


def _load_bundled() -> Vectors:
    data = files("attncli.embeddings")
    with (data / f"{BUNDLED_NAME}.words.txt").open(encoding="utf-8") as f:
        words = f.read().splitlines()
    # A regular or editable install keeps package data as plain files, so memory-map it.
    matrix = np.load(str(data / f"{BUNDLED_NAME}.npy"), mmap_mode="r", allow_pickle=False)  # (V, d)
    return Vectors(name=BUNDLED_NAME, words=words, matrix=matrix, cased=False, source="bundled")


def _open_binary(path: Path):
    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix, open)
    return opener(path, "rb")


def _is_vector_line(line: bytes, dim: int | None = None) -> bool:
    """True when `line` reads as "word v1 v2 ..." with float values (and `dim` of them, if given)."""
    try:
        fields = line.decode("utf-8").rstrip().split(" ")
        values = [float(x) for x in fields[1:]]
    except (UnicodeDecodeError, ValueError):
        return False
    return len(values) >= 1 and (dim is None or len(values) == dim) and all(map(math.isfinite, values))


def _is_text(chunk: bytes) -> bool:
    """UTF-8 without control characters: a text file's lines, not packed float32 bytes
    (which hold NULs and invalid UTF-8 within a few vectors)."""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(chunk)  # a character cut at the end is fine
    except UnicodeDecodeError:
        return False
    return not any(ord(c) < 32 and c not in "\t\n\r" for c in text)


def detect_format(path: Path) -> tuple[bool, bool]:
    """(binary, no_header) for gensim's load_word2vec_format, from the file's first lines.

    word2vec files start with a "COUNT DIM" header, then text lines or packed float32
    bytes; GloVe text files start directly with "word v1 v2 ...".
    """
    with _open_binary(path) as f:
        first = f.readline(1 << 20)
        rest = f.read(1 << 16)
    header = first.split()
    if len(header) == 2 and all(x.isdigit() for x in header):
        return not _is_text(rest), False
    if _is_vector_line(first):
        return False, True
    raise VectorsError(
        f"{path}: not a vectors file: line 1 is neither a word2vec 'COUNT DIM' header "
        "nor a GloVe 'word value value ...' line"
    )


def _first_bad_line(path: Path, no_header: bool) -> str:
    """", line N" for the first line of a text vectors file that is not "word" and DIM numbers
    (DIM from the header, or else from the first line); gensim's own messages often do not say."""
    dim = None
    with _open_binary(path) as f:
        for number, line in enumerate(f, start=1):
            if number == 1 and not no_header:
                dim = int(line.split()[1])  # the "COUNT DIM" header
                continue
            if dim is None:
                dim = len(line.split()) - 1
            if not _is_vector_line(line.rstrip(b"\r\n"), dim):
                return f", line {number}"
    return ""


def _load_with_gensim(path: Path) -> Vectors:
    if not path.exists():
        raise VectorsError(f"{path}: no such file; give --vectors a word2vec or GloVe file, or leave it out for the bundled vectors")
    if path.is_dir():
        raise VectorsError(f"{path}: is a directory; give --vectors a word2vec or GloVe file")
    try:
        binary, no_header = detect_format(path)
        from gensim.models import KeyedVectors  # slow to import: only for a user's file

        kv = KeyedVectors.load_word2vec_format(str(path), binary=binary, no_header=no_header)
    except VectorsError:
        raise
    except (OSError, EOFError) as e:
        raise VectorsError(f"{path}: cannot be read: {e}") from e
    except (ValueError, UnicodeDecodeError, IndexError, KeyError) as e:
        where = "" if binary else _first_bad_line(path, no_header)
        raise VectorsError(f"{path}: not a valid {'binary' if binary else 'text'} vectors file{where}: {e}") from e
    words = list(kv.index_to_key)
    if not words:
        raise VectorsError(f"{path}: holds no word vectors")
    matrix = np.asarray(kv.vectors, dtype=np.float32)  # (V, d)
    cased = any(w != w.lower() for w in words)
    return Vectors(name=path.name, words=words, matrix=matrix, cased=cased, source=str(path))
