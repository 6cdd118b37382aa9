"""Word vectors as a source of attention (encoder.Encoder): a one-layer model whose pieces
are the sentence's tokens, split as the vectors were made and looked up (embed), and whose
attention is the seeds' Steps I-III over the vectors' projections (identity, random, or a
trained .npz) with the run's --heads, --mask, --scale and --temperature.

Vectors (vectors.py) is this class: the vocabulary, its matrix and nearest words there,
what a sentence and attention make of them here.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Iterable
from typing import Iterator

import numpy as np

from attncli import attention
from attncli.encoder import Attention, Embedded, Options, cell_bytes
from attncli.errors import AttncliError, InputError, OptionError
from attncli.learning import projections
from attncli.system import limits
from attncli.words.tokenize import is_punctuation, iter_tokens

# the measures of context mixing a layer with no residual and no norm has (mixing.contributions.METHODS'):
# the one attention over word vectors
ON_VECTORS = ("raw", "rollout", "norm", "value-zeroing")

UNASKED = 1 << 20  # bytes a sentence's T x T matrices may take before the system is asked for room

ALONE = ("with --mask self a token attends only to the others, and {what} has one token with a vector; "
         "give a longer one, or another --mask")


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


def embed(tokens: Iterable[str], vectors: WordEncoder, *, oov: str = "skip", most: int | None = None,
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


def _look_up(token: str, vectors: WordEncoder, oov: str, extra: _Extra) -> tuple[str, int, str | None]:
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
        if len(vectors.checked) < vectors.vocab.MEMO:
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


def _not_finite(word: str, vectors: WordEncoder) -> InputError:
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


class WordEncoder:
    """Attention over word vectors, the methods encoder.Encoder names (Vectors is one)."""

    layers = 1  # one attention, over the vectors themselves
    layer = 1
    layered = False
    methods = ON_VECTORS
    batches = False  # a product over word vectors is as fast alone

    def heads(self, opts: Options) -> int:
        return opts.heads

    def check(self, opts: Options) -> None:
        """A --heads that does not divide d_k, a --qkv file that does not fit the vectors:
        refused now; the projections are kept for the sentences (projections.resolve is cached)."""
        projections.resolve(opts.qkv, self.dim, opts.d_k, opts.seed, opts.heads)

    def count(self, sentence: str, opts: Options) -> int:
        """The sentence's tokens (a token without a vector counted too)."""
        tokens = iter_tokens(sentence, lowercase=not self.cased)
        return sum(1 for t in tokens if opts.keep_punct or not is_punctuation(t))

    def embed_sentence(self, sentence: str, opts: Options, *, most: int | None = None,
                       list_missing: bool = True) -> Embedded:
        """The sentence's tokens, split as the vectors were made, and their vectors X (T, d);
        TooManyTokens past `most` tokens with vectors; `list_missing` as embed's."""
        if not sentence.strip():
            raise InputError("the sentence is empty; give some words")
        tokens = (t for t in iter_tokens(sentence, lowercase=not self.cased) if opts.keep_punct or not is_punctuation(t))
        first = next(tokens, None)
        if first is None:
            raise InputError("the sentence holds only punctuation, which is left out; --keep-punct keeps it")
        return embed(itertools.chain([first], tokens), self, oov=opts.oov, most=most,
                             list_missing=list_missing)

    def embed_fitting(self, sentence: str, opts: Options, per_cell: int) -> Embedded:
        """embed_sentence, refusing a sentence whose T x T matrices, at `per_cell` bytes a cell,
        cannot fit in the memory available: the count stops at the most that fit.

        A short sentence's matrices (a megabyte at most, as Python's own objects take) are made
        without asking: the question, /proc/meminfo read again, cost batch a tenth of its time."""
        try:
            return self.embed_sentence(sentence, opts, most=math.isqrt(UNASKED // per_cell))
        except TooManyTokens:
            pass
        most = math.isqrt(limits.available() // per_cell)
        try:
            return self.embed_sentence(sentence, opts, most=most)
        except TooManyTokens:
            raise limits.ResourceError(
                f"the sentence holds more than {most:,} tokens with vectors: its T x T matrices would need more "
                f"than {limits.size(per_cell * (most + 1) ** 2)} of memory, and {limits.size(limits.available())} "
                "is available; give a shorter sentence (attncli scores --file DOC.txt streams a long text a block "
                "of rows at a time)") from None

    def attend(self, sentence: str, opts: Options, *, listed: int = 0, keep: tuple[str, ...] = ()) -> Attention:
        """Steps I-III over the sentence's vectors: Q, K, V by the projections, the scores
        and weights of each head under the mask, and the context vectors; its one layer's
        weights are every layer's, whatever `keep` asks."""
        proj = projections.resolve(opts.qkv, self.dim, opts.d_k, opts.seed, opts.heads)
        d_k, H = proj.describe(self.dim)["d_k"], opts.heads
        embedded = self.embed_fitting(sentence, opts, cell_bytes(H, listed))
        Q, K, V = proj.apply(embedded.X)  # (T, d_k), (T, d_k), (T, d_v)
        T = len(Q)
        scale = attention.default_scale(d_k // H) if opts.scale is None else opts.scale
        mask = None if opts.mask == "none" else attention.mask(opts.mask, T)  # (T, T)
        if opts.mask == "self" and T < 2:
            raise InputError(ALONE.format(what="the sentence"))
        omega, alpha, Z = attention.multi_head(Q, K, V, H, scale, opts.temperature, mask,
                                               check=lambda omega: proj.check_finite("the scores Q K^T", omega))
        proj.check_finite("the context vectors A V", Z)
        return Attention(embedded, proj, float(scale), Q, K, V, omega, alpha, Z, mask, layers=alpha[None])

    def attend_many(self, sentences: list[str], opts: Options, *, listed: int = 0,
                    keep: tuple[str, ...] = ()) -> Iterator[tuple[int, Attention | AttncliError]]:
        """Each sentence in turn: a product over word vectors is as fast alone."""
        for k, sentence in enumerate(sentences):
            try:
                yield k, self.attend(sentence, opts, listed=listed, keep=keep)
            except AttncliError as e:
                yield k, e

    def at(self, layer: int | None) -> WordEncoder:
        return self

    def describe(self, att: Attention) -> dict:
        return {}  # the vectors, projections and mask every document names say it all

    def heads_keys(self, att: Attention, layers: np.ndarray, layer: int | None, head: int | None) -> dict:
        return {}  # one layer, every head of it

    def corpus_keys(self, precision: str) -> dict:
        return {"model": None, "vectors": self.name}

    def markers(self, att: Attention) -> tuple[np.ndarray, np.ndarray]:
        none = np.zeros(len(att.tokens), dtype=bool)  # (T,): a sentence of words has no marker
        return none, none

    def passed_on(self, att: Attention) -> np.ndarray:
        """Each head's values in its own columns (H, T, d_v): summed over the heads with their
        weights, the context vectors side by side."""
        return attention.in_own_columns(att.V, att.heads)

    def blocks(self, att: Attention) -> list:
        """The one attention as a layer's parts: what each head passes on for token j is its
        value in the head's own columns (zero in the others', so that the heads summed are
        the context vectors side by side, z_i = sum_h sum_j alpha^h_ij f^h(x_j)), no
        residual, no bias, no norm; the layer's output is the context vectors."""
        from attncli.models.layers import Block  # the parts' shape, every source's

        F = self.passed_on(att)  # (H, T, d_v)
        Z = np.einsum("hij,hjd->id", att.weights, F)  # (T, d_v): the context vectors
        zero = np.zeros_like(Z)
        return [Block(att.weights, F, np.zeros(Z.shape[1]), zero, Z, (), Z, lambda Y: Y)]

    def predict(self, att: Attention, k: int) -> list[dict]:
        raise OptionError("predict gives the next pieces a decoder model predicts; word vectors predict none")

    def neighbors(self, v: np.ndarray, k: int, exclude: set[str]) -> list[dict]:
        """The k nearest words by cosine, without `exclude` and without punctuation; k is at
        most the vocabulary's size, whatever is asked."""
        k = min(k, self.size)
        return [{"word": w, "cosine": c} for w, c in self.nearest(v, k, exclude, keep=lambda w: not is_punctuation(w))]

    def own(self, token: str) -> set[str]:
        return {self.key(token) or token}
