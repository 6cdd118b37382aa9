"""From a sentence and word vectors to the documents the tool prints.

Each document is a plain dict of lists and floats: exactly the JSON the tool writes, and
what the tables are drawn from, so the two views can never disagree. The keys are a public
contract, documented in the README.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from attncli import attention
from attncli.errors import InputError, TokenError
from attncli.tokenize import is_punctuation, tokenize
from attncli.vectors import Embedded, Vectors, embed


@dataclass(frozen=True)
class Options:
    """How to compute and report attention; the defaults are the CLI's."""

    scale: float | None = None  # None: 1/sqrt(d)
    temperature: float = 1.0
    top_k: int = 3
    include_self: bool = False
    keep_punct: bool = False
    oov: str = "skip"  # skip | zero | error


@dataclass
class Attention:
    """One sentence through Steps I-III."""

    embedded: Embedded
    scale: float
    scores: np.ndarray  # (T, T) omega
    weights: np.ndarray  # (T, T) alpha
    context: np.ndarray  # (T, d) z

    @property
    def tokens(self) -> list[str]:
        return self.embedded.tokens


def attend(sentence: str, vectors: Vectors, opts: Options) -> Attention:
    tokens = tokenize(sentence, lowercase=not vectors.cased)
    if not opts.keep_punct:
        tokens = [t for t in tokens if not is_punctuation(t)]
        if not tokens:
            raise InputError("the sentence holds only punctuation, which is left out; --keep-punct keeps it")
    embedded = embed(tokens, vectors, oov=opts.oov)
    X = embedded.X  # (T, d)
    scale = attention.default_scale(vectors.dim) if opts.scale is None else opts.scale
    omega = attention.scores(X)  # (T, T)
    alpha = attention.weights(omega, scale, opts.temperature)  # (T, T)
    Z = attention.context(alpha, X)  # (T, d)
    return Attention(embedded, float(scale), omega, alpha, Z)


def _common(command: str, sentence: str, vectors: Vectors, att: Attention, opts: Options) -> dict:
    return {
        "command": command,
        "sentence": sentence,
        "tokens": att.tokens,
        "lookups": att.embedded.lookups,
        "oov": att.embedded.oov,
        "vectors": {"name": vectors.name, "dim": vectors.dim, "words": vectors.size},
        "scale": att.scale,
        "temperature": opts.temperature,
    }


def _top(att: Attention, i: int, opts: Options) -> list[dict]:
    exclude = None if opts.include_self else i
    return [
        {"token": att.tokens[j], "index": j, "weight": float(att.weights[i, j])}
        for j in attention.top_attended(att.weights[i], opts.top_k, exclude)
    ]


def scores_doc(sentence: str, vectors: Vectors, opts: Options = Options()) -> dict:
    """The `scores` document: the whole T x T scores and weights, and each token's top attended."""
    att = attend(sentence, vectors, opts)
    return {
        **_common("scores", sentence, vectors, att, opts),
        "scores": att.scores.tolist(),
        "weights": att.weights.tolist(),
        "top": [_top(att, i, opts) for i in range(len(att.tokens))],
    }


def find_position(tokens: list[str], oov: list[str], token: str | None, index: int | None, *, lowercase: bool) -> int:
    """The position of --token (and/or --index) among the tokens that got a vector."""
    if index is not None and index >= len(tokens):
        raise TokenError(f"--index {index} is out of range: the sentence has {len(tokens)} tokens with vectors (0 to {len(tokens) - 1})")
    if token is None:
        return index
    parts = tokenize(token, lowercase=lowercase)
    if len(parts) != 1:
        raise TokenError(f"--token takes one token, and {token!r} splits into {len(parts)}: {' '.join(parts) or '(nothing)'}")
    word = parts[0]
    positions = [i for i, t in enumerate(tokens) if t == word]
    if index is not None:
        if tokens[index] != word:
            raise TokenError(f"the token at --index {index} is {tokens[index]!r}, not {word!r}" + _positions_hint(word, positions))
        return index
    if not positions:
        if word in oov:
            raise TokenError(f"{word!r} has no vector, so it has no attention; try another token or --oov zero")
        raise TokenError(f"{word!r} is not among the tokens: {' '.join(tokens)}")
    if len(positions) > 1:
        raise TokenError(f"{word!r} occurs more than once" + _positions_hint(word, positions))
    return positions[0]


def _positions_hint(word: str, positions: list[int]) -> str:
    if not positions:
        return ""
    return f"; {word!r} is at " + ", ".join(f"--index {i}" for i in positions)


def context_doc(
    sentence: str,
    vectors: Vectors,
    opts: Options = Options(),
    *,
    token: str | None = None,
    index: int | None = None,
    all_contexts: bool = False,
    neighbors: int = 5,
) -> dict:
    """The `context` document: one token's weights, top attended, context vector and the words
    nearest to it; with `all_contexts`, every token's context vector as well (and then the
    token may be left out)."""
    att = attend(sentence, vectors, opts)
    doc = _common("context", sentence, vectors, att, opts)
    if token is not None or index is not None:
        i = find_position(att.tokens, att.embedded.oov, token, index, lowercase=not vectors.cased)
        own = {vectors.key(att.tokens[i]) or att.tokens[i]}
        doc.update(
            token=att.tokens[i],
            index=i,
            weights=att.weights[i].tolist(),
            top=_top(att, i, opts),
            context=att.context[i].tolist(),
            neighbors=_neighbors(vectors, att.context[i], neighbors, own),
            token_neighbors=_neighbors(vectors, att.embedded.X[i], neighbors, own),
        )
    if all_contexts:
        doc["contexts"] = att.context.tolist()
    return doc


def _neighbors(vectors: Vectors, v: np.ndarray, k: int, exclude: set[str]) -> list[dict]:
    return [{"word": w, "cosine": c} for w, c in vectors.nearest(v, k, exclude)]


def to_json(doc: dict) -> str:
    """A document as one line of JSON; NaN or infinity would be a bug, so refuse them."""
    return json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
