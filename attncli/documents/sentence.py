"""From a sentence to the documents of its attention: `scores` (the whole T x T scores and
weights, each token's top attended, for every head) and `heads` (every layer's every head
at a glance), over any source (encoder.Encoder).

Each document is a plain dict of lists and floats: exactly the JSON the tool writes, and
what the tables are drawn from, so the two views can never disagree. The keys are a public
contract, documented in docs/reference/json.md.
"""

from __future__ import annotations

import numpy as np

from attncli import attention
from attncli.documents.merged import merge_words, word_groups
from attncli.encoder import Attention, Encoder, Options, attend
from attncli.encoder import Embedded


def common(command: str, sentence: str, source: Encoder, att: Attention, opts: Options) -> dict:
    """The keys every document of a sentence's attention begins with, then what the source
    adds of itself (Encoder.describe)."""
    return {
        "command": command,
        "sentence": sentence,
        "tokens": att.tokens,
        "lookups": att.embedded.lookups,
        "oov": att.embedded.oov,
        "vectors": {"name": source.name, "dim": source.dim, "words": source.size},
        "qkv": {**att.projections.describe(source.dim), "heads": att.heads,
                **({"from_file": list(opts.from_file)} if opts.from_file else {})},
        "mask": opts.mask,
        "scale": att.scale,
        "temperature": opts.temperature,
        **source.describe(att),
    }


def _top(att: Attention, weights: np.ndarray, i: int, opts: Options) -> list[dict]:
    """Row i's top attended in `weights` (T, T): its own position and masked ones left out."""
    exclude = None if opts.include_self else i
    masked = None if att.mask is None else att.mask[i]
    return [
        {"token": att.tokens[j], "index": j, "weight": float(weights[i, j])}
        for j in attention.top_attended(weights[i], opts.top_k, exclude, masked)
    ]


def _tops(att: Attention, weights: np.ndarray, opts: Options) -> list[list[dict]]:
    """Every row's top attended in `weights` (T, T), as _top gives them one row at a time."""
    rows, values = attention.top_attended_rows(weights, opts.top_k, opts.include_self, att.mask)
    tokens = att.tokens
    return [[{"token": tokens[j], "index": j, "weight": w} for j, w in zip(row, ws)] for row, ws in zip(rows, values)]


def scores_listed(opts: Options, more: bool = False) -> int:
    """The numbers a scores document lists a cell of its T x T matrices (the memory check's)."""
    return 2 + 2 * opts.heads + (2 if more else 0)


def scores_doc(sentence: str, source: Encoder, opts: Options = Options(), *, rollout: bool = False,
               norms: bool = False, words: bool = False, predict: int = 0, att: Attention | None = None) -> dict:
    """The `scores` document: the whole T x T scores and weights and each token's top
    attended, for every head under `heads` and, at the top, their mean (with one head, its own).
    `rollout` adds the attention rollout up to the layer shown; `norms` what each token
    sends each other, ||alpha_ij f(x_j)|| (attention.rollout, attention.weighted_norms);
    `predict`, a decoder's likeliest next pieces, that many (_predicted). `att`: the
    sentence's Attention where it was computed already (Encoder.attend_many's, a batch's)."""
    if att is None:
        att = attend(sentence, source, opts, listed=scores_listed(opts, rollout or norms),
                     keep=("layers",) * rollout + ("final",) * bool(predict))
    mean = att.mean_weights  # (T, T), once: a mean per row would make a long sentence O(T^3)
    shown = {"scores": att.mean_scores.tolist(), "weights": mean.tolist(), "top": _tops(att, mean, opts)}
    if att.heads == 1 and att.shown is None:  # the mean of one head is that head, to the bit: its lists serve twice
        heads = [dict(shown)]
    else:
        heads = [{"scores": om.tolist(), "weights": al.tolist(), "top": _tops(att, al, opts)}
                 for om, al in zip(att.scores, att.weights)]
    doc = {
        **common("scores", sentence, source, att, opts),
        **shown,
        "include_self": opts.include_self,  # whether a `top` may hold the token's own position
        "heads": heads,
    }
    if rollout:
        layers = att.layers[:source.layer]  # (l, H, T, T): the layers up to the one shown
        doc["rollout"] = attention.rollout(layers.mean(axis=1))[-1].tolist()  # (T, T)
    if norms:
        F = source.passed_on(att)  # (H, T, D)
        per_head = attention.weighted_norms(att.weights, F)  # (H, T, T)
        doc["norms"] = (per_head[att.shown] if att.shown is not None else attention.summed_norms(att.weights, F)).tolist()
        for head, M in zip(doc["heads"], per_head):
            head["norms"] = M.tolist()
    doc.update(_predicted(att, source, predict))
    return words_doc(doc, sentence, att, opts) if words else doc


def _predicted(att: Attention, source: Encoder, k: int) -> dict:
    """{"predict": the k likeliest next pieces} of a decoder (Encoder.predict), or nothing for k = 0."""
    return {"predict": source.predict(att, k)} if k else {}


def words_doc(doc: dict, sentence: str, att: Attention, opts: Options) -> dict:
    """A scores document over words instead of word pieces (--words): its weights merged by
    merge_words, each row's share on the markers under `special_share`; the scores,
    which no rule merges, left out."""
    groups, labels = word_groups(sentence, att.pieces)
    special = [all(att.pieces.special[i] for i in g) for g in groups]
    weights = merge_words(att.weights, groups)  # (H, U, U)
    mean = weights.mean(axis=0) if att.shown is None else weights[att.shown]  # (U, U)
    # a decoder's: no word attends to a later one (a sliding window over pieces is no band of words)
    masked = None if att.mask is None else attention.causal_mask(len(groups))  # (U, U)
    words = Attention(Embedded(labels, np.zeros((len(labels), 0)), ["word"] * len(labels), []), att.projections,
                      att.scale, att.Q, att.K, att.V, weights, weights, att.context, masked, shown=att.shown)
    out = {k: v for k, v in doc.items() if k not in ("scores", "heads", "top", "weights", "offsets", "lookups",
                                                     "window")}
    if masked is not None:
        out["mask"] = "causal"
    out.update(tokens=labels, special=special, pieces=[[att.tokens[i] for i in g] for g in groups],
               weights=mean.tolist(), top=_tops(words, mean, opts),
               special_share=mean[:, special].sum(axis=1).tolist(),
               heads=[{"weights": w.tolist(), "top": _tops(words, w, opts)} for w in weights])
    return out


def heads_doc(sentence: str, source: Encoder, opts: Options = Options(), *,
              layer: int | None = None, head: int | None = None) -> dict:
    """The `heads` document: the weights (L, H, T, T) of every layer's every head at a glance
    (one layer over word vectors, its --heads heads), or of the one `layer` and/or the one
    `head` (from 1) a model's --layer and --head choose, which "layer" and "head" say (null:
    every one); with a model, what share of each head's attention goes to its markers ([CLS]
    and [SEP]), where an encoder's head with nothing to do puts it, and with a decoder the
    share on its first piece, the attention sink of Xiao et al. (2023), where a decoder's does.
    (mixing.heads_doc adds each head's ablation effect.)"""
    H, L = source.heads(opts), source.layers
    att = attend(sentence, source, opts, listed=(1 if layer else L) * (1 if head else H), keep=("layers",))
    layers = att.layers[slice(layer - 1, layer) if layer else slice(None),
                        slice(head - 1, head) if head else slice(None)]  # (L', H', T, T)
    doc = {**common("heads", sentence, source, att, opts), "weights": layers.tolist()}
    doc.update(source.heads_keys(att, layers, layer, head))
    return doc


def json_lists(M: np.ndarray) -> list:
    """M as (nested) lists of floats, None (JSON's null) where a number is undefined (NaN)."""
    M = np.asarray(M, dtype=np.float64)
    nan = np.isnan(M)
    return M.tolist() if not nan.any() else np.where(nan, None, M.astype(object)).tolist()
