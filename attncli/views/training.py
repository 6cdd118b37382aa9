"""The views of what is trained or folded: train's losses and probe before and after, and
rnn's influence of each input beside attention's weight on it."""

from __future__ import annotations

import numpy as np
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.views.common import FOLDS, ONE_LINE, Packed, cosine_text, weight_bar


def rnn_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """Per position: the RNN's state norm and the input's influence on the last state,
    beside the last token's attention weight on it."""
    tokens = doc["tokens"]
    influence, attention = np.array(doc["influence"]), np.array(doc["attention"])
    # a line a measure, so that a formula is never broken across lines (a lone "= X")
    table = Table(title=Text(f"what reaches the last token {tokens[-1]!r}: the RNN's fold against attention"),
                  caption=Text("influence: ‖∂h_T/∂x_i‖, by the chain rule\nattention: α_T,i with Q = K = V = X"))
    for name, justify in (("i", "right"), ("token", "left"), ("‖h_i‖", "right"), ("influence", "right"), ("", "left"),
                          ("attention", "right"), ("", "left")):
        table.add_column(name, justify=justify, **(FOLDS if name == "token" else ONE_LINE))
    top_influence = influence.max() or 1.0
    # the bars take what the other columns leave (7 columns: 22 characters of borders and padding)
    others = len(str(len(tokens) - 1)) + max(5, *map(cell_len, tokens)) + len("‖h_i‖") + 2 * len("influence") + 22
    bar = min(max((width - others) // 2, 4), 16)
    for i, t in enumerate(tokens):
        table.add_row(str(i), Text(t), f"{doc['state_norms'][i]:.3f}", f"{influence[i]:.2e}", weight_bar(influence[i] / top_influence, bar),
                      f"{attention[i]:.3f}", weight_bar(attention[i], bar))
    text = Text(f"{doc['sentence']}\n", style="bold")
    text.append(f"RNN: h_t = tanh(W_hx x_t + W_hh h_t-1 + b_h), N = {doc['rnn']['hidden']}, h_0 = 0; "
                f"vectors {doc['vectors']['name']}", style="dim")
    first = influence[0] / influence[-1] if influence[-1] else 0.0
    note = Text(f"the first input moves the last state {first:.1e} times as much as the last input does; "
                "attention weighs every position in one step, whatever the distance", style="dim")
    return Group(text, table, note)


def train_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """What training learned: the held-out loss before and after, and the probe word's top
    attended (each head's too, when there are several) and context cosine before and after."""
    loss = doc["held_out_loss"]
    parts: list[RenderableType] = [
        Text(f"wrote {doc['path']}: {doc['steps']:,} steps over {doc['examples']:,} examples", style="bold"),
        Text(f"held-out loss (nats): {loss['untrained']:.3f} untrained, {loss['trained']:.3f} trained"),
    ]
    before, after = doc["probe"]["before"], doc["probe"]["after"]
    masks = {"self": "its own position masked (--mask self)", "causal": "the words after it masked (--mask causal)",
             "causal+self": "itself and the words after it masked"}
    table = Table(title=Text(f"{before['token']!r}, {masks[before['mask']]}"))
    table.add_column("sentence", **FOLDS)
    table.add_column("top attended, untrained")
    table.add_column("top attended, trained")

    def top(entries: list[dict]) -> Packed:  # each "word 0.12" whole on its line
        items = [Text(f"{t['token']} {t['weight']:.2f}") for t in entries]
        return Packed([*(item + Text(",") for item in items[:-1]), *items[-1:]], sep=" ")

    for b, a in zip(before["sentences"], after["sentences"]):
        table.add_row(Text(b["sentence"]), top(b["top"]), top(a["top"]))
        for h, (bh, ah) in enumerate(zip(b.get("heads", []), a.get("heads", [])), start=1):
            table.add_row(Text(f"  head {h}", style="dim"), top(bh), top(ah))
    parts.append(table)
    parts.append(Text(f"cosine of the context vectors of {before['token']!r} between the two sentences: "
                      f"{cosine_text(before['cosine'])} untrained, {cosine_text(after['cosine'])} trained"))
    return Group(*parts)
