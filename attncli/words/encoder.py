"""Word vectors as a source of attention (encoder.Encoder): a one-layer model whose pieces
are the sentence's tokens, split as the vectors were made, and whose attention is the
seeds' Steps I-III over the vectors' projections (identity, random, or a trained .npz)
with the run's --heads, --mask, --scale and --temperature.

Vectors (vectors.py) is this class: the vocabulary and its lookups there, what attention
does with them here.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Iterator

import numpy as np

from attncli import attention, contributions, limits, projections
from attncli.encoder import Attention, Options, cell_bytes
from attncli.errors import AttncliError, InputError, OptionError
from attncli.tokenize import is_punctuation, iter_tokens

if TYPE_CHECKING:
    from attncli.vectors import Embedded

UNASKED = 1 << 20  # bytes a sentence's T x T matrices may take before the system is asked for room

ALONE = ("with --mask self a token attends only to the others, and {what} has one token with a vector; "
         "give a longer one, or another --mask")


class WordEncoder:
    """Attention over word vectors, the methods encoder.Encoder names (Vectors is one)."""

    layers = 1  # one attention, over the vectors themselves
    layer = 1
    layered = False
    methods = contributions.ON_VECTORS

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
        from attncli.vectors import embed  # here: vectors.py imports this module for Vectors' base
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
        from attncli.vectors import TooManyTokens  # as embed_sentence's

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
