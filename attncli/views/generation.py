"""The view of a `generate` document (documents/generation.py): the prompt and what the model
wrote; then a line for each written piece (its log-probability, its weight on the first
position, the attention sink, and the prompt's pieces it weighed most, the likeliest pieces
at its step), and its row over every position before it as a strip, a character a position,
shaded on the scale of the rows' weights past the first position (so that the sink, shown
apart, does not wash out the rest)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from attncli.views.common import Packed, quantized

SHADES = " ░▒▓█"  # a weight's fifth of the largest past the first position


def _shaded(weights: list[float], largest: float) -> str:
    """A character a weight, by its share of `largest`."""
    top = len(SHADES) - 1
    return "".join(SHADES[min(int(w / largest * top + 0.5), top)] for w in weights)


def _piece(token: str | None) -> str:
    return "(no piece)" if token is None else token


def _listed(label: str, pairs: list[str], style: str = "") -> list[Text]:
    """A label and its items for pack, each item whole on a line and the label on the line
    of the first: "looked at: earth 0.291,", "an 0.253,"."""
    items = [item + ("," if n < len(pairs) - 1 else "") for n, item in enumerate(pairs)]
    return [Text(f"{label} {items[0]}" if items else label, style=style)] + [Text(i, style=style) for i in items[1:]]


def _attributed(doc: dict, k: int) -> list[Packed]:
    """Under --method, what piece k is attributed to most (of alti-logit, the positions that
    raised its logit most, and what its logit is made of)."""
    if "attribution" not in doc:
        return []
    row = doc["attribution"][k]
    ranked = sorted((j for j, v in enumerate(row) if v is not None), key=lambda j: -row[j])[:3]
    logit = doc["method"] == "alti-logit"
    against = f" against {_piece(doc['contrast']['token'])}" if "contrast" in doc else ""
    items = [f"{_piece(doc['tokens'][j])} {row[j]:+.3f}" if logit else f"{_piece(doc['tokens'][j])} {row[j]:.3f}"
             for j in ranked] or ["(undefined)"]
    said = _listed(f"{doc['method']}{against}: {'raised its logit most' if logit else 'attributed most'}:", items,
                   "dim")
    lines = [Packed(said, first=Text("     "), sep=" ", indent=7)]
    if logit:
        parts = doc["logit"][k]
        positions = "undefined" if parts["positions"] is None else f"{parts['positions']:+.3f}"
        made = [f"positions {positions}", f"feed-forward {parts['feed_forward']:+.3f}",
                f"own embedding {parts['embedding']:+.3f}",
                f"biases {parts['attention_bias'] + parts['norm_bias']:+.3f}"]
        lines.append(Packed(_listed(f"logit{' difference' if against else ''} {parts['logit']:.3f} =", made, "dim"),
                            first=Text("     "), sep=" ", indent=7))
    return lines


def generate_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    m = doc["model"]
    P, rows = doc["prompt_length"], doc["weights"]
    head = Text(f"{doc['prompt']}", style="bold")
    head.append(doc["text"], style="bold green")
    which = f"head {doc['head']}" if doc["head"] else f"mean over {m['heads']} heads"
    sampling = doc["sampling"]
    drawn = ("greedy (the likeliest piece each step)" if sampling["greedy"] else
             f"sampled (temperature {sampling['temperature']:g}, top-k {sampling['top_k'] or 'all'}, top-p "
             f"{sampling['top_p'] or 1:g}, seed {sampling['seed']})")
    N = len(doc["generated"])
    about = Text(f"\nmodel {m['name']}{quantized(m)}; {N} piece{'' if N == 1 else 's'} written, {drawn}, stopped at "
                 f"{'its end-of-sequence piece' if doc['stop'] == 'eos' else 'the pieces asked for'}; layer "
                 f"{doc['layer']} of {m['layers']}, {which}; the first position's weight (the sink) given apart",
                 style="dim")
    largest = max((w for row in rows for w in row[1:]), default=0.0) or 1.0
    lines = []
    for k, (token, row) in enumerate(zip(doc["generated"], rows)):
        first = Text(f"{P + k:>4} ", style="dim")
        first.append(f"{_piece(token)}", style="bold")
        items = [Text(f"logp {doc['logprobs'][k]:.3f}"), Text(f"sink {doc['sink'][k]:.3f}")]
        items += _listed("looked at:", [f"{_piece(t['token'])} {t['weight']:.3f}" for t in doc["top"][k]])
        others = [a for a in doc["alternatives"][k] if a["token"] != token][:3]
        if others:
            items += _listed("instead:", [f"{_piece(a['token'])} {a['logprob']:.2f}" for a in others], "dim")
        line = Packed(items, first=first.append("  "), sep=" ", indent=7)
        strip = Text("     |", style="dim")
        strip.append(_shaded(row[1:P], largest), style="cyan")
        if len(row) > P:
            strip.append("|", style="dim")
            strip.append(_shaded(row[P:], largest), style="green")
        lines += [line, strip] + _attributed(doc, k)
    legend = Text(f"each strip: the row over the prompt's positions 1 to {P - 1} (cyan), then the written pieces "
                  f"before it (green); shades to {largest:.3f}, the largest weight past the first position",
                  style="dim")
    return Group(head, about, *lines, legend)
