"""Word vectors in memory: a vocabulary, its matrix, fastText's subwords, lookups in them and
the nearest words; a sentence's tokens looked up, and attention over them, are
words/encoder.py's (Vectors' base).

No files here (entry.py reads and writes them, cache.py keeps them, sources.py reads
users' formats, load.py chooses between them), and no click or rich.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from attncli.errors import VectorsError
from attncli.words.encoder import WordEncoder


class Vocabulary:
    """The words of a vectors matrix, row by row, found without a dict of every word.

    A dict of three million words costs seconds to build on every run; instead the words
    are UTF-8 lines in one buffer (`blob`), `offsets[i]` is where row i's word starts, and
    `order` lists the rows sorted by their word's bytes, so a lookup is a binary search
    that touches a few dozen words. All three can be memory-mapped from a cache entry.
    """

    def __init__(self, blob, offsets: np.ndarray, order: np.ndarray):
        self.blob = blob  # bytes-like: "word\n" for each row, in row order
        self.offsets = offsets  # (V + 1,) int64; offsets[V] == len(blob)
        self.order = order  # (V,) int64; the rows sorted by word bytes
        self._found: dict[str, int | None] = {}  # the words looked up so far: a corpus repeats its words
        # the same numbers as Python ints at a C index each (a numpy scalar costs five times
        # more): a lookup reads about 35 of them
        self._starts = memoryview(np.ascontiguousarray(offsets, dtype=np.int64)).cast("B").cast("q")
        self._sorted = memoryview(np.ascontiguousarray(order, dtype=np.int64)).cast("B").cast("q")
        self._text = memoryview(blob).cast("B")  # a slice of it costs no numpy array

    @classmethod
    def from_words(cls, words: list[str]) -> Vocabulary:
        encoded = [w.encode("utf-8") for w in words]
        bad = next((w for w in words if "\n" in w or "\r" in w), None)
        if bad is not None:
            raise VectorsError(f"the word {bad!r} holds a line break, which no word vectors file can mean")
        lengths = np.fromiter((len(b) + 1 for b in encoded), dtype=np.int64, count=len(encoded))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # (V + 1,)
        order = np.array(sorted(range(len(encoded)), key=encoded.__getitem__), dtype=np.int64)  # (V,)
        return cls(b"".join(b + b"\n" for b in encoded), offsets, order)

    def __len__(self) -> int:
        return len(self.order)

    def first(self, n: int) -> Vocabulary:
        """The vocabulary of the first n rows, sharing this one's buffers (a memory map stays
        one): the offsets and words up to row n, and the rows of `order` below n, which keep
        their sorted order."""
        if n >= len(self):
            return self
        offsets = self.offsets[: n + 1]
        order = self.order[self.order < n]  # (n,)
        return Vocabulary(self.blob[: int(offsets[-1])], offsets, order)

    def _bytes(self, row: int) -> bytes:
        return bytes(self._text[self._starts[row] : self._starts[row + 1] - 1])

    def word(self, row: int) -> str:
        return self._bytes(row).decode("utf-8")

    MEMO = 1 << 18  # words remembered at most (about 30 MB), so that a long run's memory stays bounded

    def find(self, word: str) -> int | None:
        """The row of `word`, or None: a binary search of the sorted rows (about 17 steps for
        400,000 words), remembered for the words a run meets again."""
        try:
            return self._found[word]
        except KeyError:
            pass
        row = self._search(word)
        if len(self._found) < self.MEMO:
            self._found[word] = row
        return row

    def _search(self, word: str) -> int | None:
        target = word.encode("utf-8")
        order = self._sorted
        lo, hi = 0, len(order)
        while lo < hi:  # the first position whose word is >= target
            mid = (lo + hi) // 2
            if self._bytes(order[mid]) < target:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(order) and self._bytes(order[lo]) == target:
            return order[lo]
        return None

    def __contains__(self, word: str) -> bool:
        return self.find(word) is not None


def ngrams(word: str, min_n: int, max_n: int) -> list[bytes]:
    """fastText's character n-grams of "<word>", as UTF-8 bytes, n counted in characters.

    Follows Facebook's dictionary.cc (computeSubwords) as gensim does: n-grams of length 1
    that are the "<" or ">" boundary alone are left out.
    """
    text = f"<{word}>".encode("utf-8")
    starts = [i for i in range(len(text)) if text[i] & 0xC0 != 0x80]  # where characters begin
    starts.append(len(text))
    grams = []
    for a in range(len(starts) - 1):
        for n in range(min_n, max_n + 1):
            if a + n >= len(starts):
                break
            if n == 1 and (a == 0 or a + 1 == len(starts) - 1):
                continue
            grams.append(text[starts[a] : starts[a + n]])
    return grams


def fnv1a(data: bytes) -> int:
    """fastText's 32-bit FNV-1a hash, which takes each byte as a signed char."""
    h = 2166136261
    for b in data:
        h = ((h ^ (b | 0xFFFFFF00 if b >= 0x80 else b)) * 16777619) & 0xFFFFFFFF
    return h


@dataclass
class Subwords:
    """fastText's n-gram vectors: an out-of-vocabulary word gets the mean of its n-grams' rows."""

    matrix: np.ndarray  # (buckets, d) float32
    min_n: int
    max_n: int

    def vector(self, word: str) -> np.ndarray | None:
        """The word's subword vector, or None when it has no n-gram (as gensim: summed in float32)."""
        rows = [fnv1a(g) % len(self.matrix) for g in ngrams(word, self.min_n, self.max_n)]
        if not rows:
            return None
        v = np.zeros(self.matrix.shape[1], dtype=np.float32)  # (d,)
        for r in rows:
            v += self.matrix[r]
        return v / np.float32(len(rows))


@dataclass
class Vectors(WordEncoder):
    """A vocabulary and its matrix: row i of `matrix` is the vector of `vocab.word(i)`; a
    source of attention, a one-layer model, by what WordEncoder adds (words/encoder.py)."""

    name: str
    vocab: Vocabulary
    matrix: np.ndarray  # (V, d) float32, often memory-mapped
    cased: bool  # False when every word is lowercase (GloVe 6B): tokens are lowercased to match
    source: str = ""
    subwords: Subwords | None = None
    meta: dict = field(default_factory=dict)  # what the cache entry says, when there is one
    # the tokens embed has found, with a finite vector, and their rows: checked once a run,
    # not once a sentence (at most Vocabulary.MEMO of them)
    checked: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def size(self) -> int:
        return len(self.vocab)

    def first(self, n: int) -> Vectors:
        """The first n words and their rows (all of them when there are fewer): a view, never a
        copy of the matrix. What --limit N gives where the words are already in memory, the
        bundled vectors' (ordered by frequency, so the N most frequent)."""
        if n >= self.size:
            return self
        subwords = self.subwords  # fastText's n-gram buckets belong to every word, kept whole
        return Vectors(self.name, self.vocab.first(n), self.matrix[:n], self.cased, self.source, subwords,
                       {**self.meta, "limit": n})

    def row(self, token: str) -> int | None:
        """The row of a token's word, or None; cased vectors fall back to the lowercase form."""
        for candidate in (token, token.lower()) if self.cased else (token,):
            found = self.vocab.find(candidate)
            if found is not None:
                return found
        return None

    def key(self, token: str) -> str | None:
        """The vocabulary word for a token, or None."""
        row = self.row(token)
        return None if row is None else self.vocab.word(row)

    def vector(self, word: str) -> np.ndarray:
        return np.asarray(self.matrix[self.vocab.find(word)])  # (d,)

    def nearest(self, v: np.ndarray, k: int, exclude: set[str] = frozenset(), keep=None,
                block: int = 1 << 16) -> list[tuple[str, float]]:
        """The k vocabulary words of highest cosine with v, highest first, without those in
        `exclude` and those `keep(word)` refuses.

        Exact: matrix-vector products over the whole vocabulary, a block of rows at a time,
        so a memory-mapped matrix of millions of words is never copied whole; only the
        cosines (V,) are kept. If refused words crowd the best out, look further down.
        """
        v = np.asarray(v)  # (d,)
        top = float(np.abs(v).max(initial=0.0))
        if k < 1 or top == 0.0 or not np.isfinite(v).all():
            return []  # the cosine with a zero vector is undefined
        v = np.ldexp(v, -math.frexp(top)[1])  # (d,), near 1 in size (see unit_rows), its own dtype
        u = np.asarray(v, dtype=np.float32) / np.float32(np.linalg.norm(v))  # (d,)
        cos = np.concatenate([self._cosines(u, start, block) for start in range(0, self.size, block)])  # (V,)
        take = k + len(exclude)
        while True:
            best = np.argpartition(-cos, min(take, len(cos)) - 1)[:take]
            found = []
            for i in best[np.argsort(-cos[best], kind="stable")]:
                word = self.vocab.word(int(i))
                if word not in exclude and np.isfinite(cos[i]) and (keep is None or keep(word)):
                    found.append((word, int(i)))
            if len(found) >= k or take >= len(cos):
                return self._exact(v, found[:k], cos)
            take *= 4

    def _exact(self, v: np.ndarray, found: list[tuple[str, int]], cos: np.ndarray) -> list[tuple[str, float]]:
        """The cosines of the words found, in [-1, 1] (float32 products reach 1.0000001), and 1
        exactly for a row of v's own direction (v's own word, say), as `cosines` gives it."""
        rows = np.asarray(self.matrix[[i for _, i in found]]) if found else np.zeros((0, len(v)))  # (k, d)
        own = np.all(unit_rows(rows) == unit_rows(v[None]), axis=1)  # (k,)
        return [(word, 1.0 if same else float(np.clip(cos[i], -1.0, 1.0))) for (word, i), same in zip(found, own)]

    def _cosines(self, u: np.ndarray, start: int, block: int) -> np.ndarray:
        """The cosines of a block of rows with the unit vector u, at the matrix's own
        precision; the rows whose length that precision cannot hold (its square overflows
        float32 from entries near 1.8e19, or underflows near 1e-19) again by unit_rows."""
        B = np.asarray(self.matrix[start : start + block])  # (b, d)
        with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
            norms = np.linalg.norm(B, axis=1)  # (b,)
            cos = (B @ u) / norms  # (b,)
        odd = np.flatnonzero(~(norms >= SHORTEST) | ~np.isfinite(norms))  # (m,) zero, tiny, huge or not finite
        if len(odd):
            exact = unit_rows(B[odd]) @ u.astype(np.float64)  # (m,); NaN for a row of no direction
            cos[odd] = np.where(np.isfinite(exact), exact, -np.inf)  # a zero row is never near
        return cos


# A row's length below this, computed in float32, may have lost its entries' squares to
# underflow (those below 1e-19): such rows are measured again by unit_rows.
SHORTEST = 1e-15


def unit_rows(M: np.ndarray) -> np.ndarray:
    """Each row of M (k, n) scaled to length 1, in float64; NaN for a row that has no
    direction (all zero) or no length (an entry not finite).

    Each row is brought near 1 in size by the power of two of its largest magnitude before
    its length is taken, so that the squares neither overflow (float32 entries near 3e38,
    float64 ones past 1e154) nor underflow: the row's direction, and so every cosine, comes
    out exact to rounding. A power of two scales without rounding, so a row that needed no
    scaling gives the very bits of M / |M|."""
    M = np.asarray(M, dtype=np.float64)  # (k, n)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        top = np.abs(M).max(axis=1, keepdims=True, initial=0.0)  # (k, 1)
        usable = (top > 0) & np.isfinite(top) & np.isfinite(M).all(axis=1, keepdims=True)  # (k, 1)
        S = np.ldexp(M, -np.frexp(np.where(usable, top, 1.0))[1])  # (k, n), entries in (-1, 1)
        U = S / np.linalg.norm(S, axis=1, keepdims=True)  # (k, n)
    return np.where(usable, U, np.nan)


def cosines(M: np.ndarray) -> np.ndarray:
    """The cosine of every pair of rows of M (k, n) -> (k, k); NaN where either row has no
    direction (a zero vector): undefined there, not 0, which would read as "unrelated"."""
    U = unit_rows(M)  # (k, n)
    C = np.clip(U @ U.T, -1.0, 1.0)  # (k, k); clip keeps NaN
    # a vector's cosine with itself (or with a copy, or a power-of-two multiple, which
    # unit_rows gives the same bits) is 1 exactly; the product rounds it to 0.9999999999999998
    _, same = np.unique(np.where(np.isfinite(U), U, 0.0), axis=0, return_inverse=True)  # (k,)
    same = same.reshape(-1)
    return np.where((same[:, None] == same[None, :]) & np.isfinite(C), 1.0, C)  # (k, k)
