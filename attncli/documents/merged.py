"""Attention between words from attention between a model's word pieces (--words): the
pieces of each word, and the weights merged as Clark et al. (2019) merge them.
"""

from __future__ import annotations

import numpy as np

from attncli.words.tokenize import token_spans, tokenize, trimmed


def word_groups(sentence: str, pieces) -> tuple[list[list[int]], list[str]]:
    """The word pieces of each word, in order, and each word's text: a word is where the
    model's pieces and attncli's own tokens overlap, merged until no piece or token
    straddles two words, so that WordPiece's "didn ' t" and the Penn Treebank's "did n't"
    meet in "didn't". A piece's span is read without the white space at its ends (a
    byte-level BPE's "Ġearth" holds the space before it where its offsets are not trimmed),
    and a piece that spans nothing else (RoBERTa's "Ġ" alone) goes with the word after it.
    The model's markers ([CLS], [SEP]; <s>, </s>) are words of their own, named as pieces."""
    spans = [trimmed(sentence, *o) for o in pieces.offsets]
    words = [s for s, special in zip(spans, pieces.special) if not special and s[0] < s[1]]
    words += [s for s in token_spans(sentence, tokenize(sentence, lowercase=False)) if s is not None]
    merged: list[list[int]] = []
    for start, end in sorted(words):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    merged = merged or [list(trimmed(sentence, 0, len(sentence)))]  # no piece spans a character: one word
    groups: dict[int, list[int]] = {}  # a word's place in merged (a marker's: -1 - its own) -> its pieces
    for i, (span, special) in enumerate(zip(spans, pieces.special)):
        groups.setdefault(-1 - i if special else _word_of(span, merged), []).append(i)
    labels = [pieces.pieces[i[0]] if key < 0 else sentence[merged[key][0]:merged[key][1]] for key, i in groups.items()]
    return list(groups.values()), labels


def _word_of(span: tuple[int, int], merged: list[list[int]]) -> int:
    """Which of the words (merged, in order) the piece at `span` is of: the one that holds it
    or, for a piece that spans nothing, the first that ends after it (else the last)."""
    start, end = span
    if start == end:
        return next((k for k, (_, b) in enumerate(merged) if start < b), len(merged) - 1)
    return next(k for k, (a, b) in enumerate(merged) if a <= start and end <= b)


def merge_words(M: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """Attention between words from attention between pieces, as Clark et al. ("What Does
    BERT Look At?", 2019, 4.1) merge it: attention to a word is the sum over its pieces,
    attention from a word the mean over its pieces; rows still sum to 1.
    M (..., T, T) -> (..., U, U) for U words."""
    T = M.shape[-1]
    G = np.zeros((len(groups), T))  # (U, T): 1 where piece t is of word u
    for u, group in enumerate(groups):
        G[u, group] = 1.0
    to_words = M @ G.T  # (..., T, U)
    return (G / G.sum(axis=1, keepdims=True)) @ to_words  # (..., U, U)
