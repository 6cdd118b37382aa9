"""Word vectors in memory: a vocabulary, its matrix, fastText's subwords, and lookups in them.

No files here (entry.py reads and writes them, cache.py keeps them, sources.py reads
users' formats, load.py chooses between them), and no click or rich.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from attncli.errors import InputError, VectorsError
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


@dataclass
class Embedded:
    """A sentence's tokens that got a vector, their vectors, how each was found, and the
    tokens that had none."""

    tokens: list[str]
    X: np.ndarray  # (T, d) float32
    lookups: list[str]  # per token: "word", "subwords" (fastText n-grams) or "zero"
    oov: list[str]


class TooManyTokens(InputError):
    """More tokens with vectors than the caller said it can hold (embed's `most`)."""

    def __init__(self, most: int):
        super().__init__(f"more than {most:,} tokens have vectors")
        self.most = most


# Distinct tokens whose lookup embed remembers within one call. A text repeats its words
# (by Zipf's law its 65,536 most frequent are nearly all of its tokens) and a lookup is a
# binary search of 15-30 us: on 1,000,000 tokens of 15,000 bundled words, embed takes 1.2 us
# a token with the cache and 28 without. Past this many, a new word is looked up each time
# it comes, so millions of distinct tokens cannot grow the cache beyond a few megabytes.
CACHED_TOKENS = 1 << 16


def embed(tokens: Iterable[str], vectors: Vectors, *, oov: str = "skip", most: int | None = None,
          list_missing: bool = True) -> Embedded:
    """Look up each token: in the vocabulary, else (fastText) from its subwords. Still without
    a vector: "skip" leaves it out, "zero" gives it a zero vector (it stays among the tokens),
    "error" refuses the sentence. More than `most` tokens kept: TooManyTokens, raised as soon
    as the count passes it, so an enormous text is never looked up whole. `list_missing`
    False leaves `oov` empty, for a caller that never shows it: a document of millions of
    unknown tokens would otherwise hold them all.

    A token costs a few pointers while the text is read: its row of the matrix goes into an
    int64 array (a vector not in the matrix, a subword mean or the zero vector, into a small
    float32 buffer of its own, marked by a negative code), and X is gathered from the matrix
    in one pass at the end. A repeated token is looked up once, and shares the first one's
    string."""
    codes = array("q")  # (T,) per kept token: its row of the matrix, or -1 - n for row n of `extra`
    extra = _Extra(vectors.dim)
    kept, lookups, missing, first = [], [], [], []
    seen: dict[str, tuple[str, int, str | None]] = {}  # token -> (its first string, code, lookup; None: none)
    for token in tokens:
        if len(first) <= 10:
            first.append(token)  # for the message when none has a vector
        hit = seen.get(token)
        if hit is None:
            hit = _look_up(token, vectors, oov, extra)
            if len(seen) < CACHED_TOKENS:
                seen[token] = hit
        token, code, lookup = hit
        if lookup is None or lookup == "zero":
            if list_missing:
                missing.append(token)
            if lookup is None:
                continue
        if most is not None and len(kept) >= most:
            raise TooManyTokens(most)
        kept.append(token)
        codes.append(code)
        lookups.append(lookup)
    if not kept:
        shown = " ".join(first[:10]) + (" …" if len(first) > 10 else "")
        raise InputError(f"none of the tokens ({shown}) has a vector in {vectors.name}; try other words or --vectors")
    del seen
    return Embedded(kept, _gather(vectors.matrix, np.frombuffer(codes, dtype=np.int64), extra), lookups, missing)


class _Extra:
    """The vectors embed finds outside the matrix, float32 rows in one compact buffer: a
    subword mean per distinct word, and the zero vector once."""

    def __init__(self, d: int):
        self.d, self.rows, self.zero = d, 0, None
        self.data = array("f")  # (rows * d,)

    def add(self, v: np.ndarray) -> int:
        """Append a row; its code for embed, -1 - its row."""
        self.data.frombytes(np.ascontiguousarray(v, dtype=np.float32).tobytes())
        self.rows += 1
        return -self.rows

    def zero_code(self) -> int:
        if self.zero is None:
            self.zero = self.add(np.zeros(self.d, dtype=np.float32))
        return self.zero

    def matrix(self) -> np.ndarray:
        return np.frombuffer(self.data, dtype=np.float32).reshape(self.rows, self.d)  # (rows, d)


def _look_up(token: str, vectors: Vectors, oov: str, extra: _Extra) -> tuple[str, int, str | None]:
    """(token, code, lookup) for embed: code a row of the matrix, or one of `extra`'s; lookup
    None when the token is left out. Raises for a vector that is not finite, and for a
    missing one under "error"."""
    found = vectors.checked.get(token)
    if found is not None:
        return token, found, "word"
    found = vectors.row(token)
    if found is not None:
        if not np.isfinite(vectors.matrix[found]).all():
            raise _not_finite(token, vectors)
        if len(vectors.checked) < Vocabulary.MEMO:
            vectors.checked[token] = found
        return token, found, "word"
    if vectors.subwords is not None and (v := vectors.subwords.vector(token)) is not None:
        if not np.all(np.isfinite(v)):
            raise _not_finite(token, vectors)
        return token, extra.add(v), "subwords"
    if oov == "error":
        raise InputError(f"no vector for {token!r} in {vectors.name}; use --oov skip or --oov zero to go on without it")
    if oov == "skip":
        return token, 0, None
    return token, extra.zero_code(), "zero"


def _not_finite(word: str, vectors: Vectors) -> InputError:
    cached = "; if the file is fine, its cache entry is damaged: attncli vectors clear removes it" \
        if vectors.meta.get("entry") and vectors.source != "bundled" else ""
    return InputError(f"the vector of {word!r} in {vectors.name} holds NaN or infinity; fix the file or "
                      f"leave the word out{cached}")


def _gather(matrix: np.ndarray, codes: np.ndarray, extra: _Extra) -> np.ndarray:
    """X (T, d): row t is matrix[codes[t]], or row -1 - codes[t] of `extra` where codes[t] < 0;
    one gather from the matrix (a memory-mapped one is read only at those rows), then the
    few rows from elsewhere."""
    outside = np.flatnonzero(codes < 0)  # (m,) the places of subword and zero vectors
    inside = len(outside) < len(codes)
    dtype = matrix.dtype if inside else np.dtype(np.float32)
    if len(outside):
        dtype = np.result_type(dtype, np.float32)  # as np.stack of the rows would give
    X = np.empty((len(codes), extra.d), dtype=dtype)  # (T, d)
    if inside:
        # mode="clip" writes straight into X ("raise" buffers a copy first); every code >= 0
        # is a row, and those below 0 take row 0 until they are filled in below
        np.take(matrix, codes, axis=0, out=X, mode="clip")
    if len(outside):
        X[outside] = extra.matrix()[-1 - codes[outside]]
    return X
