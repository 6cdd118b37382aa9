"""Heatmap pictures with matplotlib, an optional extra: pip install matplotlib
(in attncli's clone, pip install '.[plot]').

One figure per run: a heatmap of the weights per sentence (per head, for explain), the
tokens as tick labels, a colour bar, and a title naming the vectors and the options. The
same input gives the same bytes: no date or software version is written into the PNG.
The documents come with their text made visible (visible_all), and no text is read as
mathtext.
"""

from __future__ import annotations

import textwrap
import warnings

import numpy as np

from attncli.errors import AttncliError
from attncli.views.common import UNDEFINED, decimals, layer_title, marked_heads, per_head
from attncli.visible import count


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
    subject = f"{doc['token']!r} in {len(doc['sentences']):,} sentences" if doc["command"] == "compare" else doc["sentence"]
    return textwrap.fill(f"attncli {doc['command']}: {subject}", width) + f"\n{v['name']} (d = {v['dim']:,}); {options}"


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
    panels = [(doc, p) for doc in docs for p in _panels(doc)]
    if not panels:
        raise PlotError("this output has no heatmap to draw")
    longest = max(max(len(cols), len(rows)) for _, (_, rows, cols, _, _) in panels)
    side = min(max(4.0, 0.32 * longest + 2.0), 16.0)  # 40 tokens still get readable labels
    heights = [(1.0 if len(rows) == 1 else max(1.6, side * len(rows) / max(len(cols), 1))) + 1.2
               for _, (_, rows, cols, _, _) in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(side + 1.5, sum(heights) + 0.8 * len(docs)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (doc, (title, rows, cols, M, (down, across))) in zip(axes[:, 0], panels):
        image = ax.imshow(M, cmap="viridis", vmin=0.0, vmax=max(float(M.max()), 1e-12) if M.min() >= 0 else None,
                          aspect="auto")
        # parse_math=False: user text is drawn as it is, never read as mathtext ("$\\foo$")
        ax.set_xticks(range(len(cols)), cols, rotation=60 if len(cols) > 8 else 0, ha="right" if len(cols) > 8 else "center",
                      fontsize=8 if len(cols) > 20 else 10, parse_math=False)
        ax.set_yticks(range(len(rows)), rows, fontsize=8 if len(rows) > 20 else 10, parse_math=False)
        ax.set_title(title, fontsize=10, parse_math=False)
        ax.set_ylabel(down, fontsize=9)
        ax.set_xlabel(across, fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.suptitle(_title(docs[0], width=int(11 * side)), fontsize=11, parse_math=False)
    return fig


def _contributions(plt, docs: list[dict]):
    """`contributions`: each layer's matrix, LAYERS_ACROSS a row, titled as the table titles
    it; one colour scale for a sentence's layers (from 0 to their largest value), as the
    table has, with its colour bar; an undefined cell (null) left blank, a dash in it."""
    across = min(LAYERS_ACROSS, max(len(doc["layers"]) for doc in docs))
    rows = [-(-len(doc["layers"]) // across) for doc in docs]  # each sentence's rows of panels
    T = max(len(doc["tokens"]) for doc in docs)
    side = min(max(3.0, 0.28 * T + 1.6), 10.0)
    fig, axes = plt.subplots(sum(rows), across, figsize=(side * across + 1.2, (side + 0.6) * sum(rows) + 1.0),
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
            small = 8 if len(tokens) > 12 else 9
            for i, j in zip(*np.nonzero(np.isnan(C[k]))):
                ax.text(j, i, UNDEFINED, ha="center", va="center", fontsize=small, parse_math=False)
            ax.set_xticks(range(len(tokens)), tokens, rotation=60 if len(tokens) > 4 else 0,
                          ha="right" if len(tokens) > 4 else "center", fontsize=small, parse_math=False)
            ax.set_yticks(range(len(tokens)), tokens, fontsize=small, parse_math=False)
            title = layer_title(doc, doc["layers"][k], doc["mixing_ratio_mean"][k])
            ax.set_title(textwrap.fill(title, int(12 * side)), fontsize=8, parse_math=False)
            ax.set_ylabel(CONTRIBUTION_AXES[0], fontsize=8)
            ax.set_xlabel(CONTRIBUTION_AXES[1], fontsize=8)
        fig.colorbar(image, ax=mine, fraction=0.046 / max(1, n), pad=0.02)
        first += n
    doc = docs[0]
    fig.suptitle(textwrap.fill(f"attncli contributions: {doc['sentence']}", int(14 * side * across / 3 + 40))
                 + f"\n{doc['vectors']['name']}; method {doc['method']}", fontsize=10, parse_math=False)
    return fig


def _heads(plt, docs: list[dict]):
    """`heads`: a layers x heads grid of small heatmaps per sentence, one colour scale (0 to
    the largest weight), the heads that put more than half on [CLS] and [SEP], or on a
    decoder's first piece, marked * (marked_heads); with --ablate, below each sentence's,
    its heads' ablation effects as one layers x heads heatmap, the largest marked *."""
    rows = [(doc, l) for doc in docs for l in range(len(doc["weights"]))]
    ablated = [doc for doc in docs if "ablation" in doc]
    H = len(docs[0]["weights"][0])
    top = max(float(np.max(doc["weights"])) for doc in docs)
    heights = [1.0] * len(rows) + [0.25 * len(doc["ablation"]) + 0.6 for doc in ablated]
    fig, axes = plt.subplots(len(heights), H, figsize=(1.3 * H + 1.0, 1.3 * sum(heights) + 1.2), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for r, (doc, l) in enumerate(rows):
        shares, _ = marked_heads(doc)
        for h in range(H):
            ax = axes[r, h]
            ax.imshow(np.array(doc["weights"][l][h]), cmap="viridis", vmin=0.0, vmax=max(top, 1e-12))
            ax.set_xticks([])
            ax.set_yticks([])
            mark = "*" if shares is not None and shares[l][h] > 0.5 else ""
            number = (doc.get("layer") or l + 1, doc.get("head") or h + 1)  # from 1, as --layer and --head
            ax.set_title(f"L{number[0]} H{number[1]}{mark}", fontsize=7, parse_math=False)
    for r, doc in enumerate(ablated, start=len(rows)):
        for ax in axes[r]:
            ax.remove()
        _ablation(fig.add_subplot(axes[0, 0].get_gridspec()[r, :]), doc, len(docs) > 1)
    shares, sink = marked_heads(docs[0])
    fig.suptitle(textwrap.fill(f"attncli heads: {docs[0]['sentence']}", 100)
                 + (f"\n* more than half the weight on {sink}" if shares else ""),
                 fontsize=9, parse_math=False)
    return fig


def _ablation(ax, doc: dict, named: bool) -> None:
    """A heads document's ablation effects (L x H of the heads shown) as a heatmap, each
    cell's number written in, the largest marked *; `named`: the sentence in the title."""
    E = np.array(doc["ablation"], dtype=float)  # (L, H): null (an undefined effect) -> NaN
    layers = [doc["layer"]] if doc.get("layer") else range(1, len(E) + 1)
    heads = [doc["head"]] if doc.get("head") else range(1, E.shape[1] + 1)
    ax.imshow(E, cmap="viridis", aspect="auto")
    known = E[np.isfinite(E)]
    top = np.unravel_index(int(np.nanargmax(E)), E.shape) if known.size else None
    places, low = decimals(E.flat), float(known.min(initial=0.0))
    span = float(known.max(initial=0.0)) - low or 1.0
    for (l, h), value in np.ndenumerate(E):  # black on viridis' bright yellow end, white on the rest
        text = UNDEFINED if np.isnan(value) else ("*" if (l, h) == top else "") + f"{value:.{places}f}"
        ax.text(h, l, text, ha="center", va="center", fontsize=6,
                color="black" if np.isnan(value) or (value - low) / span > 0.7 else "white", parse_math=False)
    ax.set_xticks(range(len(heads)), [f"H{n}" for n in heads], fontsize=6)
    ax.set_yticks(range(len(layers)), [f"L{n}" for n in layers], fontsize=6)
    subject = textwrap.shorten(doc["sentence"], 60) + ": " if named else ""
    ax.set_title(textwrap.fill(f"{subject}ablation, each head zeroed in turn: {doc['ablation_of']} (* the largest)",
                               110), fontsize=7, parse_math=False)


def _stats(plt, doc: dict):
    """`stats`: for each statistic a layers x heads grid, its numbers written in, each marked
    by the baselines it equals as the table marks it."""
    from attncli.views.corpus import baseline_marks, marks_legend, places, stats_columns  # rich, at the views' top

    records = doc["records"]
    L, H = max(r["layer"] for r in records), max(r["head"] for r in records)
    shown = stats_columns(records, doc.get("markers"))
    cols = min(4, len(shown))
    rows = -(-len(shown) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(max(0.45 * H * cols + 1.5, 9.0), 0.45 * L * rows + 1.5 + 0.6 * rows),
                             squeeze=False)
    for ax in axes.flat[len(shown):]:
        ax.axis("off")
    for ax, (key, heading) in zip(axes.flat, shown):
        grid = np.full((L, H), np.nan)
        for r in records:
            if r[key] is not None:
                grid[r["layer"] - 1, r["head"] - 1] = r[key]
        ax.imshow(grid, cmap="viridis", aspect="auto")
        decimals = places(records, key)
        for r in records:
            mark = baseline_marks(r["like_baseline"].get(key, []))  # the table's marks
            text = UNDEFINED if r[key] is None else f"{r[key]:.{decimals}f}{mark}"  # null: no number, no colour
            ax.text(r["head"] - 1, r["layer"] - 1, text, ha="center", va="center", fontsize=5,
                    color="black" if r[key] is None else "white", parse_math=False)
        ax.set_title(heading if key != "importance" else f"{heading}: {doc['importance_of']}", fontsize=8,
                     parse_math=False, wrap=True)
        ax.set_xticks(range(H), [str(h + 1) for h in range(H)], fontsize=5)
        ax.set_yticks(range(L), [str(l + 1) for l in range(L)], fontsize=5)
        ax.set_xlabel("head", fontsize=6)
        ax.set_ylabel("layer", fontsize=6)
    fig.suptitle(textwrap.fill(f"attncli stats: {doc['corpus']} ({doc['model'] or doc['vectors']}); as good as "
                               f"equal to a baseline: {marks_legend(records[0]['baselines'])}", 100),
                 fontsize=8, parse_math=False)
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
    fig, ax = plt.subplots(figsize=(1.45 * len(keys) + 2.2, 0.55 * len(records) + 2.4))
    image = ax.imshow(grid, cmap="RdBu", vmin=-1.0, vmax=1.0, aspect="auto")
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02).set_label("mean ρ", fontsize=8)
    for i, cells in enumerate(rows):
        for j, (text, top) in enumerate(cells):
            mean, _, interval = text.partition(" ")
            dark = np.isfinite(grid[i, j]) and abs(grid[i, j]) > 0.6
            ax.text(j, i, f"{mean}{BEST_MARK if top else ''}\n{interval}".strip(), ha="center", va="center",
                    fontsize=7, fontweight="bold" if top else "normal", color="white" if dark else "black",
                    parse_math=False)
    ax.set_xticks(range(len(keys)), headings, fontsize=8)
    ax.set_yticks(range(len(records)), [r["method"] for r in records], fontsize=8, parse_math=False)
    fig.suptitle(textwrap.fill(f"attncli faithfulness: {doc['corpus']} ({doc['model']['name']}), "
                               f"{doc['sentences']:,} sentences", 100), fontsize=9, parse_math=False)
    ax.set_title(textwrap.fill(faithfulness_legend(doc), 130), fontsize=6, parse_math=False)
    return fig
