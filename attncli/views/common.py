"""What several families of views draw alike: a token's top attended as a line, what such a
list leaves out, the cells a mask hides, a weight as a bar, a cosine as text, a model's
markers."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from rich.text import Text

from attncli.visible import listed


def repeated(tokens: list[str]) -> set[str]:
    """The tokens that occur more than once: their mentions carry their position."""
    return {t for t, n in Counter(tokens).items() if n > 1}


def top_line(token: str, top: list[dict], repeated: set[str]) -> Text:
    """"token → other 0.123, ..."; a token among `repeated` carries its position."""

    def name(t: dict) -> str:
        return f"{t['token']}({t['index']})" if t["token"] in repeated else t["token"]

    line = Text(f"{token} → ", style="bold")
    line.append(", ".join(f"{name(t)} {t['weight']:.3f}" for t in top) or "(no other token)")
    return line


def masked_cells(doc: dict, T: int, *, window: bool = True) -> np.ndarray:
    """(T, T) True where the document's mask hides column j from row i: "causal" every j
    after i, "self" j = i, "causal+window" (a decoder's sliding window) also every j the
    document's "window" W or more before i. Without `window`, a window's cells are not
    hidden: what passes through the layers (a rollout) reaches beyond it."""
    parts = (doc.get("mask") or "none").split("+")
    i, j = np.indices((T, T))
    hidden = np.zeros((T, T), dtype=bool)
    if "causal" in parts:
        hidden |= j > i
    if "self" in parts:
        hidden |= j == i
    if "window" in parts and window:
        hidden |= i - j >= doc["window"]
    return hidden


def left_out(include_self: bool, mask: str | None = None) -> str:
    """What a list of top attended leaves out, said where the list is: a token's own position
    (unless --include-self) and the masked ones (of "causal", or a decoder's "causal+window")."""
    if mask == "self":
        return "own position masked (--mask self)"
    masking = mask not in (None, "none")
    if include_self:
        return "masked positions left out" if masking else ""
    if masking:
        return "own and masked positions left out (--include-self keeps its own)"
    return "own position left out (--include-self keeps it)"


def marked_heads(doc: dict) -> tuple[list[list[float]] | None, str]:
    """What a `heads` document marks a head by (* where more than half): the share of each
    head's attention (L x H) on what a head with nothing to do attends to, and what that is:
    a decoder's first piece (the attention sink, Xiao et al. 2023), an encoder's markers."""
    if "first_share" in doc:
        return doc["first_share"], "the first position (the attention sink)"
    shares = doc.get("special_share")  # over word vectors none: no head is marked
    if shares is None or not markers(doc):  # nor where a tokenizer put no marker around the sentence
        return None, ""
    return shares, listed(markers(doc))


def per_head(qkv: dict) -> str:
    """What a head of several gets of d_k, said after it: " (25 a head)" for d_k = 50 over 2
    heads; nothing for one head."""
    heads = qkv.get("heads", 1)
    return f" ({qkv['d_k'] // heads:,} a head)" if heads > 1 else ""


def weight_bar(weight: float, width: int = 30) -> str:
    eighths = int(round(weight * width * 8))
    return "█" * (eighths // 8) + ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]


UNDEFINED = "–"  # a cosine with a zero vector: no number, which 0.000 ("unrelated") would claim


def cosine_text(c: float | None) -> str:
    return UNDEFINED if c is None else f"{c:.3f}"


def ratio_text(r: float | None) -> str:
    """A context-mixing ratio, or a dash where it is undefined (a row of zeros)."""
    return UNDEFINED if r is None else f"{r:.3f}"


def layer_title(doc: dict, number: int, mean: float | None) -> str:
    """What one matrix of a `contributions` document is: where in the model, the method,
    rolled out or not, and the layer's mean mixing ratio (the table's title and the PNG's)."""
    method = doc["method"]
    L = doc["model"]["layers"] if "model" in doc else 1
    if method == "leave-one-out":
        where = f"the whole model, after its {L:,} layer{'s' * (L > 1)}"
    elif "model" in doc:
        where = f"layer {number} of {L}"
    else:
        where = "the attention over the word vectors"
    rolled = "not rolled out" if not doc["rollout"] else (
        f"rolled out over layers 1 to {number}" if number > 1 else "rolled out (its first layer)")
    return f"{where}: {method}, {rolled}; mean mixing ratio {ratio_text(mean)}"


def markers(doc: dict) -> list[str]:
    """A model's own markers among a document's tokens, as its tokenizer names them, once
    each: [CLS] and [SEP] for BERT's, <s> and </s> for RoBERTa's, none for GPT-2's."""
    return list(dict.fromkeys(t for t, special in zip(doc["tokens"], doc["special"]) if special))


def last_piece(doc: dict) -> int:
    """Where a decoder's next pieces are read: the last token that is no marker (a marker
    after the sentence, as a Llama's </s>, is not read), or 0 where each is one; the rule
    of the Pieces the document was made from (files.Pieces.last)."""
    return max((i for i, special in enumerate(doc["special"]) if not special), default=0)


def decimals(values) -> int:
    """The decimals that write the largest magnitude among `values` with three significant
    digits, two at least (0.0948 and 0.0011: four; 1.04: two); two where all are 0 or none."""
    finite = [abs(v) for v in values if v is not None and math.isfinite(v) and v != 0]
    return max(2, 2 - math.floor(math.log10(max(finite)))) if finite else 2
