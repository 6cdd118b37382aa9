"""Heatmap pictures with matplotlib, an optional extra: pip install matplotlib
(in attncli's clone, pip install '.[plot]').

One figure per run: a heatmap of the weights per sentence (per head, for explain), the
tokens as tick labels, a colour bar, and a title naming the vectors and the options. Its
text is sized for a slide: TEXT points at the least at the figure's own size (saved at
100 dpi, a point is 1.4 pixels), the figure grown to hold it. The same input gives the
same bytes: no date or software version is written into the PNG. The documents come with
their text made visible (visible_all), and no text is read as mathtext.
"""

from __future__ import annotations

import math
import textwrap
import warnings

import numpy as np

from attncli.errors import AttncliError
from attncli.views.common import UNDEFINED, decimals, layer_title, marked_heads, per_head
from attncli.views.heatmap import contrast
from attncli.visible import count

TEXT, TITLE = 10, 12  # points: the smallest text of a figure (tick labels, numbers in cells), and titles
LINE = 1.35 * TEXT / 72  # inches a line of TEXT takes: tick labels closer than this are thinned
CHARACTER = 0.62 * TEXT / 72  # inches, about, a character of TEXT takes across (DejaVu Sans's digits)


def fits(inches: float, size: float = TEXT) -> int:
    """The characters of text of `size` points a line `inches` long holds, a margin left."""
    return max(int(0.9 * inches / CHARACTER * TEXT / size), 20)


class PlotError(AttncliError):
    """matplotlib is missing."""


def require() -> None:
    """Fail now, before any output, when matplotlib is missing."""
    _pyplot()


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PlotError("--png needs matplotlib, an optional extra: pip install matplotlib") from None
    matplotlib.use("Agg")  # no screen needed
    import matplotlib.pyplot as plt

    return plt


# the axes' names of a panel of weights: rows attend, columns are attended
WEIGHT_AXES = ("attending token i", "attended token j")
CONTRIBUTION_AXES = ("receiving token i", "contributing token j")  # a contributions matrix's
LAYERS_ACROSS = 3  # a contributions document's layers a row of its picture


def _panels(doc: dict) -> list[tuple[str, list[str], list[str], np.ndarray, tuple[str, str]]]:
    """(title, row labels, column labels, matrix, the axes' names (rows, columns)) for each
    heatmap a document draws."""
    tokens = doc.get("tokens", [])
    if doc["command"] == "scores" and "rows" in doc:  # a document's chosen rows (--rows): a strip of K x T
        rows = [f"{i} {tokens[i]}" for i in doc["rows"]]
        return [("weights of the rows chosen", rows, tokens, np.array(doc["weights"]).reshape(len(rows), len(tokens)),
                 WEIGHT_AXES)]
    if doc["command"] == "scores":
        return [("weights", tokens, tokens, np.array(doc["weights"]), WEIGHT_AXES)]
    if doc["command"] == "explain":
        heads = doc["steps"]["weights"]
        return [(f"weights, head {h}" if len(heads) > 1 else "weights", tokens, tokens, np.array(W), WEIGHT_AXES)
                for h, W in enumerate(heads, start=1)]
    if doc["command"] == "context":
        if "token" in doc:
            return [(f"how {doc['token']!r} attends", [doc["token"]], tokens, np.array([doc["weights"]]), WEIGHT_AXES)]
        return [("context vectors (first values)", tokens, [str(c) for c in range(min(12, len(doc["contexts"][0])))],
                 np.array(doc["contexts"])[:, :12], ("token i", "value k of its context vector z_i"))]
    if doc["command"] == "compare":
        return [(f"({n + 1}) {d['sentence']}", [d["token"]], d["tokens"], np.array([d["weights"]]), WEIGHT_AXES)
                for n, d in enumerate(doc["sentences"])]
    return []


def _title(doc: dict, width: int) -> str:
    first = doc["sentences"][0] if doc["command"] == "compare" else doc
    v, q = first["vectors"], first.get("qkv", {})
    options = f"scale {first['scale']:.4g}, temperature {first['temperature']:g}"
    if q and (q["kind"] != "identity" or q.get("heads", 1) > 1 or first.get("mask", "none") != "none"):
        options += (f", qkv {q['kind']} (d_k = {q['d_k']:,}{per_head(q)}), {count(q.get('heads', 1), 'head')}, "
                    f"mask {first.get('mask')}")
    subject = (f"{doc['token']!r} in {len(doc['sentences']):,} sentences" if doc["command"] == "compare"
               else doc["sentence"] if "sentence" in doc else f"{doc['document']}, {len(doc['tokens']):,} word pieces")
    return textwrap.fill(f"attncli {doc['command']}: {subject}", width) + "\n" + textwrap.fill(
        f"{v['name']} (d = {v['dim']:,}); {options}", width)


def ticks(ax, axis: str, labels: list[str], inches: float, *, shown: bool = True) -> None:
    """`labels` (the tokens) as the tick labels of the `axis` ("x" or "y") of a heatmap that
    is `inches` long, every one where a line of TEXT fits each, else every k-th (thinned), in
    order; the x axis's turned upright where they would run into each other across. `shown`
    False: the ticks alone (an inner panel of a grid, whose labels the outer ones carry)."""
    step = max(1, math.ceil(len(labels) * LINE / max(inches, LINE)))
    at = list(range(0, len(labels), step))
    names = [labels[k] for k in at] if shown else []
    # parse_math=False: user text is drawn as it is, never read as mathtext ("$\\foo$")
    if axis == "x":
        across = max((len(name) for name in names), default=0) * CHARACTER < 0.9 * inches / max(len(at), 1)
        ax.set_xticks(at, names, rotation=0 if across else 90, fontsize=TEXT, parse_math=False)
    else:
        ax.set_yticks(at, names, fontsize=TEXT, parse_math=False)


def _ink(rgba) -> str:
    """Black or white, whichever contrasts more with a cell of colour `rgba` (0-1 a channel)."""
    rgb = [255 * c for c in rgba[:3]]
    return "black" if contrast(rgb, (0, 0, 0)) >= contrast(rgb, (255, 255, 255)) else "white"


def _save(plt, fig, file) -> None:
    """The figure as a PNG, the same bytes for the same figure (no software stamp)."""
    with warnings.catch_warnings():  # a word in a script the font lacks is drawn as boxes, not warned of
        warnings.filterwarnings("ignore", message="Glyph .* missing from")
        warnings.filterwarnings("ignore", message="Matplotlib currently does not support")
        warnings.filterwarnings("ignore", message="Tight layout not applied")  # a very long sentence: drawn as it fits
        if fig.get_layout_engine() is None:  # a figure laid out as it is drawn (constrained) keeps its own
            fig.tight_layout()
        fig.savefig(file, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


def heatmaps(docs: list[dict], file) -> None:
    """Draw every document's heatmaps into one PNG written to the binary `file`."""
    plt = _pyplot()
    _save(plt, figure(plt, docs), file)


def figure(plt, docs: list[dict]):
    """The matplotlib figure of every document's heatmaps."""
    if docs and docs[0]["command"] == "heads":
        return _heads(plt, docs)
    if docs and docs[0]["command"] == "stats":
        return _stats(plt, docs[0])
    if docs and docs[0]["command"] == "contributions":
        return _contributions(plt, docs)
    if docs and docs[0]["command"] == "faithfulness":
        return _faithfulness(plt, docs[0])
    if docs and docs[0]["command"] == "quantization":
        return _quantization(plt, docs[0])
    if docs and docs[0]["command"] == "generate":
        return _generated(plt, docs[0])
    panels = [(doc, p) for doc in docs for p in _panels(doc)]
    if not panels:
        raise PlotError("this output has no heatmap to draw")
    longest = max(max(len(cols), len(rows)) for _, (_, rows, cols, _, _) in panels)
    side = min(max(4.0, 0.32 * longest + 2.0), 16.0)  # 40 tokens still get readable labels
    heights = [(1.0 if len(rows) == 1 else max(1.6, side * len(rows) / max(len(cols), 1))) + 1.2
               for _, (_, rows, cols, _, _) in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(side + 1.5, sum(heights) + 0.8 * len(docs)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, height, (doc, (title, rows, cols, M, (down, across))) in zip(axes[:, 0], heights, panels):
        image = ax.imshow(M, cmap="viridis", vmin=0.0, vmax=max(float(M.max()), 1e-12) if M.min() >= 0 else None,
                          aspect="auto")
        ticks(ax, "x", cols, side)
        ticks(ax, "y", rows, height - 1.2)
        ax.set_title(title, fontsize=TEXT, parse_math=False)
        ax.set_ylabel(down, fontsize=TEXT)
        ax.set_xlabel(across, fontsize=TEXT)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=TEXT)
    fig.suptitle(_title(docs[0], width=fits(side + 1.5, TITLE)), fontsize=TITLE, parse_math=False)
    return fig


def _contributions(plt, docs: list[dict]):
    """`contributions`: each layer's matrix, LAYERS_ACROSS a row, titled as the table titles
    it; one colour scale for a sentence's layers (from 0 to their largest value), as the
    table has, with its colour bar; an undefined cell (null) left blank, a dash in it."""
    across = min(LAYERS_ACROSS, max(len(doc["layers"]) for doc in docs))
    rows = [-(-len(doc["layers"]) // across) for doc in docs]  # each sentence's rows of panels
    T = max(len(doc["tokens"]) for doc in docs)
    side = min(max(3.2, T * LINE + 1.0), 10.0)
    fig, axes = plt.subplots(sum(rows), across, figsize=(side * across + 1.5, (side + 1.6) * sum(rows) + 1.2),
                             squeeze=False, layout="constrained")
    first = 0
    for doc, n in zip(docs, rows):
        tokens = doc["tokens"]
        C = np.array(doc["contributions"], dtype=float)  # (L, T, T): null -> NaN
        top = max(float(C[np.isfinite(C)].max(initial=0.0)), 1e-12)
        mine = list(axes[first:first + n].flat)
        for k, ax in enumerate(mine):
            if k >= len(C):
                ax.axis("off")
                continue
            image = ax.imshow(C[k], cmap="viridis", vmin=0.0, vmax=top, aspect="auto")
            for i, j in zip(*np.nonzero(np.isnan(C[k]))):
                ax.text(j, i, UNDEFINED, ha="center", va="center", fontsize=TEXT, parse_math=False)
            ticks(ax, "x", tokens, side)
            ticks(ax, "y", tokens, side)
            title = layer_title(doc, doc["layers"][k], doc["mixing_ratio_mean"][k])
            ax.set_title(textwrap.fill(title, fits(side)), fontsize=TEXT, parse_math=False)
            ax.set_ylabel(CONTRIBUTION_AXES[0], fontsize=TEXT)
            ax.set_xlabel(CONTRIBUTION_AXES[1], fontsize=TEXT)
        bar = fig.colorbar(image, ax=mine, fraction=0.046 / max(1, n), pad=0.02)
        bar.ax.tick_params(labelsize=TEXT)
        first += n
    doc = docs[0]
    fig.suptitle(textwrap.fill(f"attncli contributions: {doc['sentence']}", fits(side * across + 1.5, TITLE))
                 + f"\n{doc['vectors']['name']}; method {doc['method']}", fontsize=TITLE, parse_math=False)
    return fig


def _heads(plt, docs: list[dict]):
    """`heads`: a layers x heads grid of small heatmaps per sentence on one colour scale (0
    to the largest weight), its colour bar beside them; the tokens label the rows of the
    grid's first column of panels and the columns of each sentence's last row of them
    (thinned where there are more than a panel has room for); the heads that put more than
    half on [CLS] and [SEP], or on a decoder's first piece, marked * (marked_heads); with
    --ablate, below each sentence's, its heads' ablation effects as one layers x heads
    heatmap, the largest marked *."""
    rows = [(doc, l) for doc in docs for l in range(len(doc["weights"]))]
    ablated = [doc for doc in docs if "ablation" in doc]
    H = len(docs[0]["weights"][0])
    T = max(len(doc["tokens"]) for doc in docs)
    top = max(float(np.max(doc["weights"])) for doc in docs)
    side = min(max(1.6, T * LINE / 2), 2.6)  # inches a panel: half its tokens labelled at the least
    label = min(max(len(t) for doc in docs for t in doc["tokens"]), 16) * CHARACTER + 0.3
    heights = [side + 0.4] * len(rows) + [LINE * len(doc["ablation"]) * 1.6 + 1.4 for doc in ablated]
    fig, axes = plt.subplots(len(heights), H, figsize=(H * (side + 0.15) + label + 1.6,
                                                       sum(heights) + label * len(docs) + 0.8),
                             squeeze=False, gridspec_kw={"height_ratios": heights}, layout="constrained")
    weights = []
    for r, (doc, l) in enumerate(rows):
        shares, _ = marked_heads(doc)
        last = l == len(doc["weights"]) - 1  # a sentence's last row: its tokens under the columns
        if l == 0:
            axes[r, 0].set_ylabel(WEIGHT_AXES[0], fontsize=TEXT)
        if last:
            axes[r, 0].set_xlabel(WEIGHT_AXES[1], fontsize=TEXT)
        for h in range(H):
            ax = axes[r, h]
            image = ax.imshow(np.array(doc["weights"][l][h]), cmap="viridis", vmin=0.0, vmax=max(top, 1e-12))
            ticks(ax, "y", doc["tokens"], side, shown=h == 0)
            ticks(ax, "x", doc["tokens"], side, shown=last)
            mark = "*" if shares is not None and shares[l][h] > 0.5 else ""
            number = (doc.get("layer") or l + 1, doc.get("head") or h + 1)  # from 1, as --layer and --head
            ax.set_title(f"L{number[0]} H{number[1]}{mark}", fontsize=TEXT, parse_math=False)
            weights.append(ax)
    bar = fig.colorbar(image, ax=weights, shrink=0.8, aspect=50, pad=0.01)
    bar.set_label("weight α (one scale for every head)", fontsize=TEXT)
    bar.ax.tick_params(labelsize=TEXT)
    for r, doc in enumerate(ablated, start=len(rows)):
        for ax in axes[r]:
            ax.remove()
        _ablation(fig, fig.add_subplot(axes[0, 0].get_gridspec()[r, :]), doc, len(docs) > 1, fits(H * side))
    shares, sink = marked_heads(docs[0])
    fig.suptitle(textwrap.fill(f"attncli heads: {docs[0]['sentence']}", fits(H * side, TITLE))
                 + (f"\n* more than half the weight on {sink}" if shares else ""),
                 fontsize=TITLE, parse_math=False)
    return fig


def _ablation(fig, ax, doc: dict, named: bool, width: int) -> None:
    """A heads document's ablation effects (L x H of the heads shown) as a heatmap, each
    cell's number written in (a dash where it is undefined), the largest marked *, with its
    colour bar; `named`: the sentence in the title, wrapped at `width` characters."""
    E = np.array(doc["ablation"], dtype=float)  # (L, H): null (an undefined effect) -> NaN
    layers = [doc["layer"]] if doc.get("layer") else range(1, len(E) + 1)
    heads = [doc["head"]] if doc.get("head") else range(1, E.shape[1] + 1)
    image = ax.imshow(E, cmap="viridis", aspect="auto")
    top = np.unravel_index(int(np.nanargmax(E)), E.shape) if np.isfinite(E).any() else None
    places = decimals(E.flat)
    for (l, h), value in np.ndenumerate(E):  # black or white, whichever its colour shows better
        text = UNDEFINED if np.isnan(value) else ("*" if (l, h) == top else "") + f"{value:.{places}f}"
        ink = "black" if np.isnan(value) else _ink(image.cmap(image.norm(value)))
        ax.text(h, l, text, ha="center", va="center", fontsize=TEXT, color=ink, parse_math=False)
    ax.set_xticks(range(len(heads)), [f"H{n}" for n in heads], fontsize=TEXT)
    ax.set_yticks(range(len(layers)), [f"L{n}" for n in layers], fontsize=TEXT)
    subject = textwrap.shorten(doc["sentence"], 60) + ": " if named else ""
    ax.set_title(textwrap.fill(f"{subject}ablation, each head zeroed in turn: {doc['ablation_of']} (* the largest)",
                               width), fontsize=TEXT, parse_math=False)
    fig.colorbar(image, ax=ax, fraction=0.02, pad=0.01).ax.tick_params(labelsize=TEXT)


STATS_WIDTH = 24.0  # inches at most a stats figure is wide, where its panels can be laid out so


def _layers_by_heads(fig, ax, image, L: int, H: int, title: str) -> None:
    """A layers x heads grid's title, its axes numbered from 1, and its colour bar."""
    ax.set_title(title, fontsize=TEXT, parse_math=False)
    ax.set_xticks(range(H), [str(h + 1) for h in range(H)], fontsize=TEXT)
    ax.set_yticks(range(L), [str(l + 1) for l in range(L)], fontsize=TEXT)
    ax.set_xlabel("head", fontsize=TEXT)
    ax.set_ylabel("layer", fontsize=TEXT)
    fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02).ax.tick_params(labelsize=TEXT)


def _stats(plt, doc: dict):
    """`stats`: for each statistic a layers x heads grid, its numbers written in, each marked
    by the baselines it equals as the table marks it, with a colour bar of its own scale;
    the cells as wide as their numbers are at TEXT points."""
    from attncli.views.corpus import baseline_marks, marks_legend, places, stats_columns  # rich, at the views' top

    records = doc["records"]
    L, H = max(r["layer"] for r in records), max(r["head"] for r in records)
    shown = stats_columns(records, doc.get("markers"))
    written = {key: {(r["layer"], r["head"]): f"{r[key]:.{places(records, key)}f}"
                                               f"{baseline_marks(r['like_baseline'].get(key, []))}"
                     for r in records if r[key] is not None} for key, _ in shown}
    widest = max((len(text) for cells in written.values() for text in cells.values()), default=4)
    cell = (max(widest * CHARACTER + 0.15, 0.45), LINE + 0.15)  # inches across and down
    panel = (H * cell[0] + 1.9, L * cell[1] + 1.3)  # with its labels, title and colour bar
    cols = max(1, min(len(shown), int(STATS_WIDTH // panel[0])))
    rows = -(-len(shown) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(max(panel[0] * cols, 9.0), panel[1] * rows + 1.2),
                             squeeze=False, layout="constrained")
    for ax in axes.flat[len(shown):]:
        ax.axis("off")
    for ax, (key, heading) in zip(axes.flat, shown):
        grid = np.full((L, H), np.nan)
        for r in records:
            if r[key] is not None:
                grid[r["layer"] - 1, r["head"] - 1] = r[key]
        image = ax.imshow(grid, cmap="viridis", aspect="auto")
        for (layer, head), text in written[key].items():
            value = grid[layer - 1, head - 1]
            ax.text(head - 1, layer - 1, text, ha="center", va="center", fontsize=TEXT,
                    color=_ink(image.cmap(image.norm(value))), parse_math=False)
        for r in records:
            if r[key] is None:  # null: no number, no colour
                ax.text(r["head"] - 1, r["layer"] - 1, UNDEFINED, ha="center", va="center", fontsize=TEXT,
                        color="black", parse_math=False)
        title = heading if key != "importance" else f"{heading}: {doc['importance_of']}"
        _layers_by_heads(fig, ax, image, L, H, textwrap.fill(title, fits(panel[0])))
    fig.suptitle(textwrap.fill(f"attncli stats: {doc['corpus']} ({doc['model'] or doc['vectors']}); as good as "
                               f"equal to a baseline: {marks_legend(records[0]['baselines'])}",
                               fits(max(panel[0] * cols, 9.0), TITLE)),
                 fontsize=TITLE, parse_math=False)
    return fig


def _generated(plt, doc: dict):
    """`generate`: a row a written piece over every position (the ones after it blank), its
    first column apart on a scale of its own (the attention sink) and the rest on theirs, so
    that the sink washes nothing out."""
    tokens, P, rows = doc["tokens"], doc["prompt_length"], doc["weights"]
    labels = [str(t) for t in tokens]
    M = np.full((len(rows), len(tokens) - 1 if len(tokens) > P else P), np.nan)  # (N, T - 1): the last is never a key
    for k, row in enumerate(rows):
        M[k, :len(row)] = row
    side = min(max(4.0, 0.32 * M.shape[1] + 2.0), 16.0)
    height = max(1.6, 0.32 * len(rows) + 1.2)
    fig, (sink, rest) = plt.subplots(1, 2, figsize=(side + 2.5, height + 1.2), squeeze=True,
                                     gridspec_kw={"width_ratios": [1, max(M.shape[1] - 1, 1)]}, layout="constrained")
    for ax, part, columns, title in ((sink, M[:, :1], labels[:1], "sink"),
                                     (rest, M[:, 1:], labels[1:M.shape[1]], "the rest of each row")):
        image = ax.imshow(part, cmap="viridis", vmin=0.0, vmax=max(float(np.nanmax(part)) if part.size else 0, 1e-12),
                          aspect="auto")
        ticks(ax, "x", columns, side if ax is rest else 1.0)
        ticks(ax, "y", [f"{P + k} {labels[P + k]}" for k in range(len(rows))], height, shown=ax is sink)
        ax.set_title(title, fontsize=TEXT, parse_math=False)
        fig.colorbar(image, ax=ax, fraction=0.08, pad=0.02).ax.tick_params(labelsize=TEXT)
    rest.set_xlabel("position j before the written piece", fontsize=TEXT)
    sink.set_ylabel("written piece (its step's row)", fontsize=TEXT)
    which = f"head {doc['head']}" if doc["head"] else "mean of the heads"
    fig.suptitle(textwrap.fill(f"attncli generate: {doc['prompt']} -> {doc['text']} ({doc['model']['name']}, layer "
                               f"{doc['layer']}, {which})", fits(side + 2.5, TITLE)), fontsize=TITLE, parse_math=False)
    return fig


def _quantization(plt, doc: dict):
    """`quantization`: each measure's layers x heads grid (views/drift.py's MEASURES), its
    numbers written in, on a colour scale of its own."""
    from attncli.views.drift import MEASURES  # rich, at the views' top

    L, H = len(doc["max_abs"]), len(doc["max_abs"][0])
    cell = (9 * CHARACTER + 0.15, LINE + 0.15)  # a number of 8 characters, 1.23e-04
    panel = (H * cell[0] + 1.9, L * cell[1] + 1.3)
    cols = max(1, min(len(MEASURES), int(STATS_WIDTH // panel[0])))
    rows = -(-len(MEASURES) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(max(panel[0] * cols, 9.0), panel[1] * rows + 1.2), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(MEASURES):]:
        ax.axis("off")
    for ax, (key, title) in zip(axes.flat, MEASURES):
        grid = np.array(doc[key])  # (L, H)
        image = ax.imshow(grid, cmap="viridis", vmin=0.0, aspect="auto")
        for (l, h), value in np.ndenumerate(grid):
            ax.text(h, l, f"{value:.2e}", ha="center", va="center", fontsize=TEXT,
                    color=_ink(image.cmap(image.norm(value))), parse_math=False)
        _layers_by_heads(fig, ax, image, L, H, textwrap.fill(title, fits(panel[0])))
    fig.suptitle(textwrap.fill(f"attncli quantization: {doc['sentence']} ({doc['model']['name']} against "
                               f"{doc['against']['name']})", fits(max(panel[0] * cols, 9.0), TITLE)),
                 fontsize=TITLE, parse_math=False)
    return fig


def _faithfulness(plt, doc: dict):
    """`faithfulness`: the table as a heatmap, a row a method and a column a layer and one
    rolled out, coloured by the mean rho from -1 to 1, each cell's mean and interval written
    in and the best of each column marked as the table marks it."""
    # the table's cells, as the terminal's: views.corpus is imported only where this figure is drawn
    from attncli.views.corpus import BEST_MARK, column_cell, column_keys, faithfulness_cells, faithfulness_legend

    records = doc["records"]
    keys = column_keys(records)
    headings, rows = faithfulness_cells(records)
    grid = np.array([[np.nan if (c := column_cell(r, key)) is None or c["rho"] is None else c["rho"] for key in keys]
                     for r in records])  # (methods, columns)
    across = max(len("[-0.00, -0.00]") * CHARACTER + 0.2, 1.2)  # inches a column: a cell's interval
    width = across * len(keys) + max(len(r["method"]) for r in records) * CHARACTER + 2.0
    fig, ax = plt.subplots(figsize=(max(width, 8.0), (2 * LINE + 0.2) * len(records) + 3.6), layout="constrained")
    image = ax.imshow(grid, cmap="RdBu", vmin=-1.0, vmax=1.0, aspect="auto")
    bar = fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
    bar.set_label("mean ρ", fontsize=TEXT)
    bar.ax.tick_params(labelsize=TEXT)
    for i, cells in enumerate(rows):
        for j, (text, top) in enumerate(cells):
            mean, _, interval = text.partition(" ")
            dark = np.isfinite(grid[i, j]) and abs(grid[i, j]) > 0.6
            ax.text(j, i, f"{mean}{BEST_MARK if top else ''}\n{interval}".strip(), ha="center", va="center",
                    fontsize=TEXT, fontweight="bold" if top else "normal", color="white" if dark else "black",
                    parse_math=False)
    ax.set_xticks(range(len(keys)), headings, fontsize=TEXT)
    ax.set_yticks(range(len(records)), [r["method"] for r in records], fontsize=TEXT, parse_math=False)
    fig.suptitle(textwrap.fill(f"attncli faithfulness: {doc['corpus']} ({doc['model']['name']}), "
                               f"{doc['sentences']:,} sentences", fits(max(width, 8.0), TITLE)), fontsize=TITLE,
                 parse_math=False)
    ax.set_title(textwrap.fill(faithfulness_legend(doc), fits(max(width, 8.0))), fontsize=TEXT, parse_math=False)
    return fig
