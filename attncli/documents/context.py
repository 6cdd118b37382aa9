"""From a sentence to the documents of one token in it: `context` (its weights, top
attended, context vector and nearest words), `compare` (one word in several sentences),
`neighbors` and `explain` (every intermediate matrix of Steps I-III), over any source
(encoder.Encoder); the keys are documented in docs/reference/json.md.
"""

from __future__ import annotations

import numpy as np

from attncli.documents.sentence import _predicted, _top, common, json_lists
from attncli.encoder import Attention, Encoder, Options, attend
from attncli.errors import AttncliError, OptionError, TokenError
from attncli.system import limits
from attncli.words.tokenize import tokenize
from attncli.words.vectors import Vectors, cosines, unit_rows


def find_position(tokens: list[str], oov: list[str], token: str | None, index: int | None, *, lowercase: bool,
                  names: list[str | None] | None = None) -> int:
    """The position of --token (and/or --index) among the tokens that got a vector, each
    found by its name in `names` where given (a model's word piece by the text it stands
    for, Pieces.texts: RoBERTa's "Ġbank" by "bank"; None, found by none), else by itself."""
    if index is not None and index >= len(tokens):
        raise TokenError(f"--index {index} is out of range: the sentence has {len(tokens):,} tokens with vectors (0 to {len(tokens) - 1:,})")
    if token is None:
        return index
    parts = tokenize(token, lowercase=lowercase)
    if len(parts) != 1:
        raise TokenError(f"--token takes one token, and {token!r} splits into {len(parts)}: {' '.join(parts) or '(nothing)'}")
    word = parts[0]
    keys = tokens if names is None else [n.lower() if lowercase and n else n for n in names]
    positions = [i for i, t in enumerate(keys) if t == word]
    if index is not None:
        if keys[index] != word:
            raise TokenError(f"the token at --index {index} is {tokens[index]!r}, not {word!r}" + _positions_hint(word, positions))
        return index
    if not positions:
        if word in oov:
            raise TokenError(f"{word!r} has no vector, so it has no attention; try another token or --oov zero")
        shown = " ".join(tokens[:20]) + (f" … ({len(tokens):,} in all)" if len(tokens) > 20 else "")
        raise TokenError(f"{word!r} is not among the tokens: {shown}")
    if len(positions) > 1:
        raise TokenError(f"{word!r} occurs more than once" + _positions_hint(word, positions))
    return positions[0]


def token_position(att: Attention, source: Encoder, token: str | None, index: int | None) -> int:
    """find_position in a sentence's attention: a model's pieces found by their text."""
    return find_position(att.tokens, att.embedded.oov, token, index, lowercase=not source.cased,
                         names=None if att.pieces is None else att.pieces.texts)


def _positions_hint(word: str, positions: list[int]) -> str:
    if not positions:
        return ""
    return f"; {word!r} is at " + ", ".join(f"--index {i}" for i in positions)


def context_doc(
    sentence: str,
    source: Encoder,
    opts: Options = Options(),
    *,
    token: str | None = None,
    index: int | None = None,
    all_contexts: bool = False,
    neighbors: int = 5,
    predict: int = 0,
) -> dict:
    """The `context` document: one token's weights, top attended, context vector and the words
    nearest to it; with `all_contexts`, every token's context vector as well (and then the
    token may be left out); `predict` as scores_doc's."""
    att = attend(sentence, source, opts, keep=("final",) * bool(predict))
    doc = common("context", sentence, source, att, opts)
    if token is not None or index is not None:
        i = token_position(att, source, token, index)
        doc.update(_token_fields(att, source, opts, i, neighbors))
    if all_contexts:
        doc["contexts"] = att.context.tolist()
    doc.update(_predicted(att, source, predict))
    return doc


def _token_fields(att: Attention, source: Encoder, opts: Options, i: int, neighbors: int) -> dict:
    """What `context` says of token i: its weights, top attended, context vector, neighbours
    (a model's none: its vectors are a layer's hidden states, near no word)."""
    own = source.own(att.tokens[i])
    # a context vector is a sum of value vectors: in word space only when V = X
    in_word_space = att.projections.word_space
    return {
        "token": att.tokens[i],
        "index": i,
        "weights": att.mean_weights[i].tolist(),
        "top": _top(att, att.mean_weights, i, opts),
        "include_self": opts.include_self,
        "heads": [{"weights": al[i].tolist(), "top": _top(att, al, i, opts)} for al in att.weights],
        "context": att.context[i].tolist(),
        "neighbors": source.neighbors(att.context[i], neighbors, own) if in_word_space else [],
        "token_neighbors": source.neighbors(att.embedded.X[i], neighbors, own),
    }


def _cosine_lists(M: np.ndarray) -> list[list[float | None]]:
    """vectors.cosines of M's rows as lists, None (JSON's null) where a cosine is undefined."""
    return json_lists(cosines(M))


def _undefined(noun: str, token: str, M: np.ndarray, after: str = "") -> list[str]:
    """The note that says which sentences' `noun` (a row of M) of `token` has no direction, if any."""
    zero = [str(n + 1) for n, row in enumerate(unit_rows(M)) if not np.isfinite(row).all()]
    if not zero:
        return []
    many = len(zero) > 1
    which = f"sentences {', '.join(zero[:-1])} and {zero[-1]}" if many else f"sentence {zero[0]}"
    return [f"the {noun}{'s' if many else ''} of {token!r}{after} in {which} {'are' if many else 'is'} zero: "
            f"{'their' if many else 'its'} cosines are undefined (null in JSON, a dash in a table)"]


def settled_note(opts: Options) -> str:
    """What a run took from the --qkv file attncli train wrote: the heads and the mask it was
    trained with, as opts.from_file names them."""
    taken = " and ".join(f"--{name} {getattr(opts, name)}" for name in opts.from_file)
    others = " or ".join(f"--{name}" for name in opts.from_file)
    return f"{opts.qkv} is shown with {taken}, as attncli train trained it; give {others} to show it otherwise"


def compare_doc(sentences: list[str], source: Encoder, opts: Options = Options(), *, token: str,
                neighbors: int = 5, indices: list[int | None] | None = None) -> dict:
    """The `compare` document: one token in several sentences, one `context` document each, and
    the cosines between its context vectors beside those between its raw vectors; `indices`,
    the token's position in each sentence (--index; None: where it occurs once)."""
    k = len(sentences)
    if indices is not None and len(indices) != k:
        raise OptionError(f"indices must give a position for each of the {k} sentences, got {len(indices)}")
    limits.require(k * k * 2 * 110, f"comparing {k:,} sentences (two {k:,} x {k:,} tables of cosines)",
                   "compare fewer sentences at a time")
    docs, raw, ctx, hidden = [], [], [], []
    for n, sentence in enumerate(sentences, start=1):
        try:
            att = attend(sentence, source, opts, keep=("hidden",))
            i = token_position(att, source, token, indices[n - 1] if indices else None)
        except AttncliError as e:
            raise type(e)(f"sentence {n} ({sentence!r}): {e}") from None
        docs.append({**common("context", sentence, source, att, opts), **_token_fields(att, source, opts, i, neighbors)})
        raw.append(att.embedded.X[i])
        ctx.append(att.context[i])
        if att.hidden is not None:
            hidden.append(att.hidden[:, i])  # (L + 1, D)
    word = docs[0]["token"]
    ctx, raw = np.array(ctx, dtype=np.float64), np.array(raw, dtype=np.float64)  # (k, d_v), (k, d)
    doc = {
        "command": "compare",
        "token": word,
        "sentences": docs,
        "context_cosine": _cosine_lists(ctx),
        "raw_cosine": _cosine_lists(raw),
        "notes": ([settled_note(opts)] if opts.from_file else []) + _undefined("context vector", word, ctx)
        + _undefined("raw vector", word, raw),
    }
    if hidden:  # the word's hidden state after the embeddings (0) and after each layer (1 .. L)
        states = np.stack(hidden, axis=1)  # (L + 1, k, D)
        doc["hidden_cosine"] = [_cosine_lists(layer) for layer in states]
        doc["notes"] += [note for l, layer in enumerate(states)
                         for note in _undefined("hidden state", word, layer,
                                                f" after layer {l}" if l else " after the embeddings")]
    return doc


def neighbors_doc(word: str, vectors: Vectors, opts: Options = Options(), *, k: int = 10,
                  sentence: str | None = None, index: int | None = None) -> dict:
    """The `neighbors` document: the vocabulary words nearest (cosine) a word's vector or, with
    a sentence, that word's context vector in it (at `index`, where it occurs more than once)."""
    doc = {"command": "neighbors", "vectors": {"name": vectors.name, "dim": vectors.dim, "words": vectors.size}}
    if sentence is None:
        parts = tokenize(word, lowercase=not vectors.cased)
        key = vectors.key(parts[0]) if len(parts) == 1 else None
        if key is None:
            limited = (vectors.meta or {}).get("limit")
            where = f"the first {limited:,} words of {vectors.name} (--limit {limited})" if limited else vectors.name
            raise TokenError(f"{word!r} is not a word of {where}; try another word or --vectors")
        return {**doc, "word": key, "neighbors": vectors.neighbors(vectors.vector(key), k, {key})}
    att = attend(sentence, vectors, opts)
    i = token_position(att, vectors, word, index)
    if not att.projections.word_space:
        raise TokenError("nearest words of a context vector need identity projections, or ones attncli train "
                         "learned: with other --qkv it is a sum of value vectors, not a word vector")
    return {**doc, "word": att.tokens[i], "sentence": sentence, "index": i,
            "context": att.context[i].tolist(), "neighbors": vectors.neighbors(att.context[i], k, vectors.own(att.tokens[i]))}


def explain_doc(sentence: str, source: Encoder, opts: Options = Options(), *, token: str | None = None,
                index: int | None = None) -> dict:
    """The `explain` document: every intermediate matrix under `steps` (those of the heads with
    a leading H axis); with a token, its row of each under `row`, and under `row.shown` its
    scores, scaled scores and weights in the head shown (a model's --head), else their mean
    over the heads: what the table follows the token through."""
    att = attend(sentence, source, opts, listed=3 * opts.heads + 1)  # and the scaled scores' own array
    with np.errstate(over="ignore"):
        scaled = att.scores * att.scale / opts.temperature  # (H, T, T), before the mask
    steps = {
        "X": att.embedded.X.astype(np.float64),  # (T, d)
        "Q": att.Q, "K": att.K, "V": att.V,  # (T, d_k) each
        "scores": att.scores,  # (H, T, T)
        "scaled": scaled,  # (H, T, T)
        "weights": att.weights,  # (H, T, T)
        "context": att.context,  # (T, d_k)
    }
    doc = {**common("explain", sentence, source, att, opts), "steps": {k: v.tolist() for k, v in steps.items()}}
    if token is not None or index is not None:
        i = token_position(att, source, token, index)

        def shown(M: np.ndarray) -> np.ndarray:  # (H, T) -> (T,): the head shown, or the heads' mean
            return M[att.shown] if att.shown is not None else M.mean(axis=0)

        doc.update(token=att.tokens[i], index=i, row={
            "x": steps["X"][i].tolist(), "q": att.Q[i].tolist(),
            "scores": att.scores[:, i].tolist(), "scaled": scaled[:, i].tolist(),  # (H, T)
            "weights": att.weights[:, i].tolist(), "context": att.context[i].tolist(),
            "shown": {key: shown(steps[key][:, i]).tolist() for key in ("scores", "scaled", "weights")},
        })
    return doc
