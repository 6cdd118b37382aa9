"""What several families of views draw alike: a token's top attended as a line, what such a
list leaves out, the cells a mask hides, a weight as a bar, a cosine as text, a list as
words, a model's markers."""

from __future__ import annotations

from collections import Counter

import numpy as np
from rich.text import Text


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


def masked_cells(doc: dict, T: int) -> np.ndarray:
    """(T, T) True where the mask (causal, or self) hides column j from row i."""
    if doc.get("mask") == "causal":
        return np.triu(np.ones((T, T), dtype=bool), k=1)
    return np.eye(T, dtype=bool) if doc.get("mask") == "self" else np.zeros((T, T), dtype=bool)


def left_out(include_self: bool, mask: str | None = None) -> str:
    """What a list of top attended leaves out, said where the list is: a token's own position
    (unless --include-self) and the masked ones."""
    if mask == "self":
        return "own position masked (--mask self)"
    if include_self:
        return "masked positions left out" if mask == "causal" else ""
    if mask == "causal":
        return "own and masked positions left out (--include-self keeps its own)"
    return "own position left out (--include-self keeps it)"


def weight_bar(weight: float, width: int = 30) -> str:
    eighths = int(round(weight * width * 8))
    return "█" * (eighths // 8) + ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]


UNDEFINED = "–"  # a cosine with a zero vector: no number, which 0.000 ("unrelated") would claim


def cosine_text(c: float | None) -> str:
    return UNDEFINED if c is None else f"{c:.3f}"


def listed(items: list[str]) -> str:
    """"a, b and c"."""
    return " and ".join(filter(None, [", ".join(items[:-1]), *items[-1:]]))


def markers(doc: dict) -> str:
    """A model's own markers among a document's tokens, as its tokenizer names them: "[CLS]
    and [SEP]" for BERT's, "<s> and </s>" for RoBERTa's."""
    return listed(list(dict.fromkeys(t for t, special in zip(doc["tokens"], doc["special"]) if special)))
