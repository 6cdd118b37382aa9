"""The `quantization` document: how far one model's attention moves under another copy of
its weights (a quantized GGUF against its F16 or safetensors original, one quantization
against another), layer by layer and head by head, over one sentence.

For every layer l and head h, with alpha the weights under --model and beta under --against
(each row a distribution over the keys the row may attend), over the T rows i:

    largest |dalpha|   max_ij |alpha_ij - beta_ij|
    mean |dalpha|      the mean of |alpha_ij - beta_ij| over the cells a row may attend
                       (a decoder's j <= i: its masked cells are 0 under both)
    JS                 Jensen-Shannon divergence of each row, in nats (0 to ln 2):
                       JS(p, q) = (KL(p || m) + KL(q || m)) / 2,  m = (p + q) / 2,
                       KL(p || m) = sum_j p_j ln(p_j / m_j), 0 ln 0 = 0
                       its mean over the rows, and its largest

Both models must split the sentence into the same pieces and have the same layers and
heads: the comparison is of one model's attention under two sets of weights.
"""

from __future__ import annotations

import numpy as np

from attncli.documents.sentence import common
from attncli.encoder import Encoder, Options, attend
from attncli.errors import InputError


def js_divergence(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """The Jensen-Shannon divergence, in nats, of each row of P against the same row of Q
    (..., T): distributions over the last axis. (...,)"""
    M = (P + Q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 ln 0 = 0: the cells where p is 0 add nothing
        kl_p = np.where(P > 0, P * (np.log(P) - np.log(M)), 0.0).sum(axis=-1)
        kl_q = np.where(Q > 0, Q * (np.log(Q) - np.log(M)), 0.0).sum(axis=-1)
    return (kl_p + kl_q) / 2


def _shape(source: Encoder) -> dict:
    """A model's sizes (layers, heads, d_model, kv_heads, d_head), which two copies of it share."""
    return {key: value for key, value in source.about().items() if key not in ("name", "revision", "quantization")}


def drift_doc(sentence: str, source: Encoder, against: Encoder, opts: Options = Options()) -> dict:
    """The quantization document of `sentence`: every layer's and head's attention under
    `source` (--model) held against `against` (--against)."""
    a = attend(sentence, source, opts, listed=2 * source.layers * source.heads(opts), keep=("layers",))
    b = attend(sentence, against, opts, listed=2 * against.layers * against.heads(opts), keep=("layers",))
    if a.pieces.ids.tolist() != b.pieces.ids.tolist():
        raise InputError(f"--model {source.name} and --against {against.name} split the sentence into different "
                         f"pieces ({len(a.tokens):,} and {len(b.tokens):,}): their tokenizers differ, and quantization "
                         "compares one model's attention under two copies of its weights")
    ours, theirs = _shape(source), _shape(against)
    if ours != theirs:
        differ = ", ".join(f"{key} {ours.get(key)} and {theirs.get(key)}" for key in sorted({*ours, *theirs})
                           if ours.get(key) != theirs.get(key))
        raise InputError(f"--model {source.name} and --against {against.name} are not copies of one model: their "
                         f"{differ}")
    P, Q = a.layers, b.layers  # (L, H, T, T)
    gap = np.abs(P - Q)  # (L, H, T, T)
    seen = np.ones(P.shape[-2:], dtype=bool) if a.mask is None else ~a.mask  # (T, T): the cells a row may attend
    mean_gap = (gap * seen).sum(axis=(-2, -1)) / seen.sum()  # (L, H)
    js = js_divergence(P, Q)  # (L, H, T)
    l, h, i, j = np.unravel_index(int(np.argmax(gap)), gap.shape)
    doc = {key: value for key, value in common("quantization", sentence, source, a, opts).items()
           if key not in ("layer", "head")}  # every layer and head is compared
    doc.update({"against": against.about(),
                "max_abs": gap.max(axis=(-2, -1)).tolist(), "mean_abs": mean_gap.tolist(),  # (L, H) each
                "js_mean": js.mean(axis=-1).tolist(), "js_max": js.max(axis=-1).tolist(),  # (L, H) each
                "largest": {"layer": int(l) + 1, "head": int(h) + 1, "row": int(i), "column": int(j),
                            "token": a.tokens[i], "key": a.tokens[j], "weight": float(P[l, h, i, j]),
                            "against": float(Q[l, h, i, j])},
                "overall": {"max_abs": float(gap.max()), "mean_abs": float(mean_gap.mean()),
                            "js_mean": float(js.mean())}})
    return doc
