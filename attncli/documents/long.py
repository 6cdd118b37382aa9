"""A whole document as one sequence over word vectors (scores --file, --document): its rows
computed a block at a time (attention.stream), so that memory stays O(T (d + k)), and the
bounds a document is held to before its first row.
"""

from __future__ import annotations

from attncli import attention
from attncli.encoder import Options
from attncli.errors import InputError
from attncli.system import limits
from attncli.words.encoder import ALONE, TooManyTokens
from attncli.words.vectors import Vectors


# The longest document scored without --window. Its T x T scores, T^2 = 1.6e11 cells, take
# half an hour to hours: the stream computes 2e7 to 8e7 cells a second on the 2 cores it was
# measured on (d = 50; the fewer, the more else runs there), so 33 minutes to 2.2 hours,
# while 200,000 tokens, a quarter of the cells, run to the end in 8 to 35 minutes with a
# progress bar. A run of --window W is bounded by the same cells, T (256 + 2W) of them:
# never reached by a window of a sensible size, only by one so wide that the run is the
# T x T one again.
LONGEST_WITHOUT_WINDOW = 400_000


def document_token_bytes(d: int, *, subwords: bool = False) -> int:
    """Memory a token of a document takes at its run's peak: its vector in X, float32 (4 d),
    the stream's scaled copy of it (4 d) and that copy's finite check (d); its places in
    `tokens` and `lookups` and its row code while X is gathered (24); its string, unless an
    earlier token of the same word shares it (at most 64 for a word); with fastText, a
    subword mean of its own (4 d). For d = 50 that is 538; measured (tracemalloc, to the
    first block) on 1,000,000 tokens of bundled words: 468 bytes a token drawn from 15,000
    words, 483 from 88,000, whose strings the lookup cache cannot all share."""
    return 9 * d + 24 + 64 + (4 * d if subwords else 0)


def document_most_tokens(window: int | None, block: int = 256) -> int:
    """The longest document whose scores take at most LONGEST_WITHOUT_WINDOW^2 cells: a
    block of rows computes T columns each without a window, and the block + 2W of its band
    with one (T x T again when that is T or more)."""
    cells = LONGEST_WITHOUT_WINDOW ** 2
    if window is None or block + 2 * window >= LONGEST_WITHOUT_WINDOW:
        return LONGEST_WITHOUT_WINDOW
    return cells // (block + 2 * window)


def document_scale(opts: Options, dim: int) -> float:
    """The scale a document's rows are computed with: --scale, else 1/sqrt(d) (no projections)."""
    return attention.default_scale(dim) if opts.scale is None else opts.scale


def document_rows(text: str, vectors: Vectors, opts: Options = Options(), *, window: int | None = None,
                  block: int = 256, progress=None):
    """A whole document as one sequence: per token, in order, {"token", "index", "top",
    "context"}, computed a block of rows at a time (attention.stream), so memory stays
    O(T (d + k)) and rows come out as they are computed. Raw vectors only (identity
    projections, one head): the point is the long sequence. progress(rows done, T) is
    called after each block.

    Before the first row, while its tokens are counted, a document is refused once its
    O(T d) arrays cannot fit in the memory available (document_token_bytes a token), or
    once its scores would take hours (document_most_tokens): the count stops there, so
    nothing of an enormous text is looked up beyond it."""
    if opts.qkv != "identity" or opts.heads != 1:
        raise InputError("a document (--file, --document) takes the raw vectors only: no --qkv or --heads")
    room = limits.available()
    per_token = document_token_bytes(vectors.dim, subwords=vectors.subwords is not None)
    by_memory, by_time = room // per_token, document_most_tokens(window, block)
    try:
        embedded = vectors.embed_sentence(text, opts, most=min(by_memory, by_time), list_missing=False)
    except TooManyTokens as e:
        if e.most == by_time and by_time <= by_memory:
            raise _too_long(by_time, window, block) from None
        raise limits.ResourceError(
            f"the document holds more than {e.most:,} tokens with vectors, and at {per_token:,} bytes a token (its "
            f"vectors, their copies for the stream, its tokens) they need more than the {limits.size(room)} of "
            "memory available; split it into shorter documents") from None
    tokens, X = embedded.tokens, embedded.X  # X: (T, d) float32
    if opts.mask == "self" and len(tokens) < 2:
        raise InputError(ALONE.format(what="the document"))
    scale = document_scale(opts, vectors.dim)
    for start, top, weights, Z in attention.stream(X, scale, opts.temperature, opts.top_k, block=block,
                                                   causal=opts.mask == "causal", window=window,
                                                   include_self=opts.include_self,
                                                   exclude_self=opts.mask == "self"):
        # the block's numbers as Python ints and floats at once (a float32 is a double exactly):
        # numpy's scalars, one at a time, cost a row four times as much
        for r, (places, ws, z) in enumerate(zip(top.tolist(), weights.tolist(), Z.tolist())):
            yield {
                "token": tokens[start + r],
                "index": start + r,
                "top": [{"token": tokens[j], "index": j, "weight": w} for j, w in zip(places, ws) if w >= 0],
                "context": z,
            }
        if progress is not None:
            progress(start + len(Z), len(tokens))


def _too_long(most: int, window: int | None, block: int) -> limits.ResourceError:
    if window is None:
        return limits.ResourceError(
            f"a document of more than {most:,} tokens without --window: its T x T scores would take half an hour "
            f"to hours (more than {most * most:.2g} cells); give --window W, or split it")
    band = min(block + 2 * window, most)
    return limits.ResourceError(
        f"a document of more than {most:,} tokens with --window {window:,}: its scores would take half an hour "
        f"to hours (more than {most * band:.2g} cells, {band:,} a token); give a smaller --window, or split it")
