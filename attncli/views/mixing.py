"""The view of a `contributions` document (mixing.contributions_doc): for each layer shown,
the method's T x T matrix as the heatmap `scores` draws (views/heatmap.py), titled with the
method, the layer, whether it is rolled out and the layer's mean context-mixing ratio; under
it each token's mixing ratio and top contributors, and for leave-one-out each token's effect
on the sentence."""

from __future__ import annotations

import numpy as np
from rich.console import Group, RenderableType
from rich.cells import cell_len
from rich.text import Text

from attncli.views.common import UNDEFINED, layer_title, left_out, masked_cells, ratio_text, repeated
from attncli.views.heatmap import Heatmap
from attncli.views.sentence import describe
from attncli.visible import count

# what each method's cell c_ij is, as contributions.py defines it (row i receives from column j)
MEASURES = {
    "raw": "raw attention α_ij",
    "rollout": "attention rollout of α (Abnar & Zuidema 2020)",
    "norm": "‖Σ_h α^h_ij f^h(x_j)‖, what j sends i (Kobayashi et al. 2020)",
    "norm-res": "‖z_ij‖, the attention and the residual (Kobayashi et al. 2021)",
    "norm-res-ln": "‖g1_i(z_ij)‖, through the first layer norm too (Kobayashi et al. 2021)",
    "globenc": "‖g2_i(g1_i(z_ij))‖, through both layer norms (GlobEnc, Modarressi et al. 2022)",
    "alti": "ALTI's share of y_i from j (Ferrando et al. 2022)",
    "value-zeroing": "the change of token i's output with v_j zeroed (value zeroing, Mohebbi et al. 2023)",
    "leave-one-out": "the cosine distance of token i's last hidden state with token j erased (leave-one-out)",
}
SYMBOLS = {"raw": "α", "rollout": "R", "norm": "‖αf‖", "norm-res": "‖z‖", "norm-res-ln": "‖g1(z)‖",
           "globenc": "‖g2(g1(z))‖", "alti": "c", "value-zeroing": "c", "leave-one-out": "Δ"}


def _sums_to_one(C: np.ndarray) -> bool:
    """Whether every row that is not all 0, nor undefined, sums to 1: a share of the row
    (weights, ALTI, value zeroing, a rollout), drawn as weights are; else sizes, drawn as
    scores are."""
    C = C[~np.isnan(C).any(axis=-1)]  # (n, T): the defined rows
    sums = C.sum(axis=-1)  # (n,)
    shown = sums[sums > 0]
    return bool(np.all(C >= 0)) and bool(np.allclose(shown, 1.0, rtol=0, atol=1e-9))


def _value(c: float, shares: bool) -> str:
    """A share as weights are written (0.123); a size in three significant digits (4.52, 0.0123)."""
    if shares:
        return f"{c:.3f}"
    text = f"{c:#.3g}"
    return text[:-1] if text.endswith(".") else text


def _which(doc: dict) -> str:
    """What of the layer the measure is of: one head, the heads' mean, or the layer whole."""
    if doc.get("head"):
        return f"head {doc['head']}"
    H = doc["model"]["heads"] if "model" in doc else doc["qkv"]["heads"]
    if H == 1:
        return ""
    return f"the mean over {count(H, 'head')}" if doc["method"] in ("raw", "rollout") else "the heads together"


def _how(doc: dict) -> Text:
    """The line that says what the matrices are."""
    method = doc["method"]
    which = "" if method == "leave-one-out" else _which(doc)
    text = Text(f"contributions by {method}: {MEASURES[method]}" + (f"; {which}" if which else ""), style="dim")
    if method == "leave-one-out":
        how = (f"each token replaced by {doc['replaced_by']}" if doc["erasure"] == "mask"
               else "each token removed (its own cell 0)")
        text.append(f"; {doc['erasure']}: {how}", style="dim")
    return text


def _effect_of(doc: dict) -> str:
    what = doc["sentence_effect_of"]
    if isinstance(what, dict):  # a decoder's: the next piece it predicts after the whole sentence
        return (f"the fall in the log-probability of the next piece {what['next']!r} (log p {what['logprob']:.3f} "
                "after the whole sentence)")
    return what


def _token_rows(doc: dict, k: int, M: np.ndarray, shares: bool, twice: set[str]) -> list[Text]:
    """Layer k's rows (its matrix M), a line a token: its position, the token, its mixing
    ratio (and its erasure's effect on the sentence, for leave-one-out), then its top
    contributors; a dash for a number that is undefined, and for the contributors of a
    row that is (doc["notes"] say why)."""
    loo = doc["method"] == "leave-one-out"
    tokens = doc["tokens"]
    position = max(len(str(len(tokens) - 1)), 1)
    label = max(cell_len(t) for t in tokens)
    heads = ["i".rjust(position), "token".ljust(label), "mixing ratio"] + (["on the sentence"] if loo else [])
    lines = [Text("  ".join(heads) + "  top contributors", style="bold")]

    def name(t: dict) -> str:
        return f"{t['token']}({t['index']})" if t["token"] in twice else t["token"]

    for i, (token, top, r) in enumerate(zip(tokens, doc["top"][k], doc["mixing_ratio"][k])):
        line = Text(str(i).rjust(position) + "  ")
        line.append(token + " " * (label - cell_len(token)), style="bold")
        line.append("  " + ratio_text(r).rjust(len(heads[2])))
        if loo:
            effect = doc["sentence_effect"][i]
            line.append("  " + (UNDEFINED if effect is None else f"{effect:.4f}").rjust(len(heads[3])))
        line.append("  " + (", ".join(f"{name(t)} {_value(t['contribution'], shares)}" for t in top)
                            or (UNDEFINED if np.isnan(M[i]).all() else "(no other token)")))
        lines.append(line)
    return lines


def contributions_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """Each layer's matrix as a heatmap (one scale and one layout for all of them), its
    title, caption and rows of tokens; the colours' legend once, after the last."""
    tokens = doc["tokens"]
    T = len(tokens)
    C = np.array(doc["contributions"], dtype=float).reshape(len(doc["layers"]), T, T)  # (L, T, T)
    # what passes through the layers (a rollout, an erasure's effect) reaches beyond a decoder's window
    masked = masked_cells(doc, T, window=not (doc["rollout"] or doc["method"] == "leave-one-out"))
    shares = _sums_to_one(C)
    heat = Heatmap(tokens, list(C), masked, signed=not shares, width=width, color_system=color_system)
    symbol = "R" if doc["rollout"] else SYMBOLS[doc["method"]]
    twice = repeated(tokens)
    parts: list[RenderableType] = [describe(doc), _how(doc)]
    if doc["method"] == "leave-one-out":
        parts.append(Text(f"effect on the sentence: {_effect_of(doc)}", style="dim"))
    if not heat.fits:
        parts.append(Text(f"{T:,} tokens are too many for a {T:,} x {T:,} grid in {width} columns; each token's "
                          "top contributors follow (a wider terminal, or --format json, shows the whole matrix)",
                          style="dim"))
    caption = "row i receives from column j" + ("; each row sums to 1" if shares else "") + (
        "; · masked" if masked.any() else "") + (f"; {UNDEFINED} undefined" if np.isnan(C).any() else "")
    note = left_out(bool(doc.get("include_self")), doc.get("mask"))
    for k, number in enumerate(doc["layers"]):
        parts += [Text(), Text(layer_title(doc, number, doc["mixing_ratio_mean"][k]), style="bold")]
        if heat.fits:
            parts += heat.grid(C[k])
            parts.append(Text(f"{caption}; {heat.reading(symbol)}", style="dim"))
        parts.append(Text("mixing ratio: the share of the row from the other tokens; top contributors"
                          + (f", {note}" if note else "") + ":", style="dim"))
        parts += _token_rows(doc, k, C[k], shares, twice)
    after = [*heat.key(), *heat.legend("contribution")] if heat.fits else []  # no legend without colour
    if after:
        parts += [Text(), *after]
    if doc.get("notes"):  # why a number is undefined
        parts += [Text(), *(Text(note, style="dim") for note in doc["notes"])]
    return Group(*parts)

