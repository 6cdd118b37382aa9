"""The views of one sentence's documents: scores (the T x T heatmap), context, compare,
neighbors, explain (each step of attention) and heads (every layer's heads at a glance)."""

from __future__ import annotations

import numpy as np
from rich.cells import cell_len
from rich.columns import Columns
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.style import Style
from rich.table import Table
from rich.text import Text

from attncli import ranking
from attncli.views import heatmap
from attncli.views.common import (FOLDS, ONE_LINE, UNDEFINED, blocked, column_blocks, cosine_text, last_piece,
                                  least_width, left_out, marked_heads, markers, masked_cells, pack, per_head, quantized,
                                  repeated, top_line, weight_bar)
from attncli.views.heatmap import Heatmap
from attncli.visible import count, listed


def describe(doc: dict) -> Text:
    """The sentence, and what its attention was computed over: the vectors and options, or the model."""
    if "model" in doc:
        return _describe_model(doc)
    v = doc["vectors"]
    text = Text(f"{doc['sentence']}\n", style="bold")
    text.append(f"vectors {v['name']} ({v['words']:,} words, d = {v['dim']:,}); ", style="dim")
    text.append(f"scale {doc['scale']:.6g}, temperature {doc['temperature']:g}", style="dim")
    q = doc["qkv"]
    if q["kind"] != "identity" or doc["mask"] != "none" or q["heads"] > 1:
        source = {"random": f", seed {q.get('seed')}", "file": f" {q.get('path')}"}.get(q["kind"], "")
        values = f", d_v = {q['d_v']:,}" if "d_v" in q else ""
        text.append(f"\nprojections {q['kind']}{source}, d_k = {q['d_k']:,}{per_head(q)}{values}; "
                    f"{count(q['heads'], 'head')}; "
                    f"mask {doc['mask']}",
                    style="dim")
    if doc["oov"]:
        done = "given zero vectors" if set(doc["oov"]) & set(doc["tokens"]) else "left out"
        text.append(f"\nno vector, {done}: {' '.join(dict.fromkeys(doc['oov']))}", style="dim")
    subwords = [t for t, lookup in zip(doc["tokens"], doc["lookups"]) if lookup == "subwords"]
    if subwords:
        text.append(f"\nnot in the vocabulary, built from subwords: {' '.join(dict.fromkeys(subwords))}", style="dim")
    return text


def _describe_model(doc: dict) -> Text:
    m = doc["model"]
    text = Text(f"{doc['sentence']}\n", style="bold")
    shared = f", {count(m['kv_heads'], 'key/value head')}" if "kv_heads" in m else ""
    text.append(f"model {m['name']} ({count(m['layers'], 'layer')} x {count(m['heads'], 'head')}{shared}, "
                f"d_model = {m['d_model']:,}, "
                f"{doc['vectors']['words']:,} word pieces{quantized(m)})", style="dim")
    if doc["command"] == "heads":  # every layer and head, unless --layer and --head chose
        layer = f"layer {doc['layer']} of {m['layers']}" if doc.get("layer") else "every layer"
        head = f"head {doc['head']} of {m['heads']}" if doc.get("head") else "every head"
        text.append(f"; {layer}, {head}", style="dim")
    elif "layer" in doc and doc["command"] != "contributions":  # whose layers and heads title its grids
        which = f"head {doc['head']}" if doc.get("head") else f"mean over {count(m['heads'], 'head')}"
        text.append(f"; layer {doc['layer']} of {m['layers']}, {which}", style="dim")
    d_head = m.get("d_head", m["d_model"] // m["heads"])
    marks = markers(doc)
    said = f"; {listed(marks)} {'are' if len(marks) > 1 else 'is'} the model's own marker" + "s" * (len(marks) > 1)
    text.append(f"; scale {doc['scale']:.6g} = 1/sqrt({d_head})" + (said if marks else ""), style="dim")
    if doc["mask"] != "none":  # a decoder's own
        before = f"the {doc['window'] - 1:,} pieces" if "window" in doc else "the pieces"
        text.append(f"; mask {doc['mask']}: each piece attends to itself and {before} before it", style="dim")
    notation = piece_notation(doc["tokens"], doc.get("special"))
    if notation:
        text.append(f"\n{notation}", style="dim")
    return text


# How tokenizers write a word piece's place in its word, and what each mark says
PIECE_MARKS = (("Ġ", "Ġ marks a piece that follows a space (byte-level BPE)"),
               ("▁", "▁ marks a piece that follows a space (SentencePiece)"),
               ("##", "## marks a piece that goes on the one before it, in one word (WordPiece)"))


def piece_notation(tokens: list[str], special: list[bool] | None) -> str:
    """A line saying what the marks of the pieces shown mean, for those that hold one (Ġ, ▁,
    ##), or "" where none does."""
    pieces = [t for t, marker in zip(tokens, special or [False] * len(tokens)) if not marker]
    said = [meaning for mark, meaning in PIECE_MARKS if any(p.startswith(mark) and len(p) > len(mark) for p in pieces)]
    return "; ".join(said)


def _predictions(doc: dict) -> list[RenderableType]:
    """A decoder's likeliest next pieces after the sentence (--predict), a row each."""
    if "predict" not in doc:
        return []
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name, justify in (("next piece", "left"), ("id", "right"), ("probability", "right"), ("log p", "right")):
        table.add_column(name, justify=justify, **(FOLDS if name == "next piece" else ONE_LINE))
    for p in doc["predict"]:
        table.add_row("(no piece)" if p["token"] is None else p["token"], f"{p['id']:,}", f"{p['probability']:.3f}",
                      f"{p['logprob']:.3f}")
    words = doc["vectors"]["words"]
    return [Text(), Text(f"the model's {len(doc['predict']):,} likeliest next pieces of {words:,}, after "
                         f"{doc['tokens'][last_piece(doc)]!r} (the softmax of the logits at the sentence's last piece):",
                         style="bold"), table]


def _grid_part(heat: Heatmap, M: np.ndarray, title: str | None = None) -> Group:
    return Group(*([Text(title, style="bold")] if title else []), *heat.grid(M))


def _too_many(T: int, width: int) -> Text:
    return Text(f"{T:,} tokens are too many for a {T:,} x {T:,} grid in {width} columns; each token's top attended "
                "follows (a wider terminal, --max-tokens N, or --format json shows the whole matrix)", style="dim")


def _top_heading(doc: dict) -> Text:
    heading = Text("top attended (by weight α)", style="bold")
    note = left_out(bool(doc.get("include_self")), doc.get("mask"))
    if note:
        heading.append(f", {note}", style="dim")
    heading.append(":", style="bold")
    return heading


def scores_view(doc: dict, *, raw: bool = False, width: int = 80, max_tokens: int | None = None,
                color_system: str | None = None, shown: str | None = None) -> RenderableType:
    """The T x T heatmap (weights, or raw scores), its legend, each token's top attended and,
    with several heads, a heatmap for each head; all as fits in `width` columns."""
    tokens = doc["tokens"]
    T = len(tokens)
    n = T if max_tokens is None else min(T, max_tokens)
    key = shown or ("scores" if raw else "weights")  # "rollout" or "norms": what --rollout, --norms add
    masked = masked_cells(doc, T, window=key != "rollout")[:n, :n]
    raw = raw or key == "norms"  # sizes, not weights: written as scores are
    H = doc["qkv"]["heads"]
    # no grid fits even with one-character numbers: the heads' matrices are not needed
    room = heatmap.plan(tokens[:n], 1, width) is not None

    def cut(M: list[list[float]]) -> np.ndarray:  # the shown part only: a long sentence's T x T is large
        return np.array([row[:n] for row in M[:n]], dtype=float).reshape(n, n)

    mean = cut(doc[key])  # (n, n)
    # a model's 12 heads a layer are the `heads` command's picture, not this one's
    heads = ([cut(head[key]) for head in doc["heads"]] if H > 1 and room and "model" not in doc and key != "rollout"
             else [])
    heat = Heatmap(tokens[:n], [mean, *heads], masked, signed=raw, width=width, color_system=color_system)
    parts: list[RenderableType] = [describe(doc)]
    if heat.fits:
        step = {"scores": "raw scores ω_ij = q_i · k_j",
                "weights": "weights α_ij = softmax_j(ω_ij · scale / temperature)",
                "rollout": "attention rollout R_ij: R_l = (0.5 A_l + 0.5 I) R_l-1, A_l the layer's mean weights"
                           + (f", up to layer {doc['layer']}" if "layer" in doc else ""),
                "norms": "‖α_ij f(x_j)‖: how much j sends i, f(x_j) = " + ("v_j W_O" if "model" in doc else "v_j")}[key]
        which = f", head {doc['head']} of {H:,}" if doc.get("head") else (
            "" if H == 1 else f", the {H:,} heads together" if key == "norms" else f", mean over {H:,} heads")
        parts.append(_grid_part(heat, mean, step + which))
        caption = "row i attends to column j"
        if key in ("weights", "rollout"):
            caption += "; each row sums to 1" if n == T else (f"; each row sums to 1 over all {T:,} columns, "
                                                              f"of which the first {n:,} are shown")
        if masked.any():
            caption += "; · masked"
        if "pieces" in doc:
            caption += "; words: to a word the sum over its pieces, from a word their mean"
        parts += heat.key()
        symbol = {"scores": "ω", "weights": "α", "rollout": "R", "norms": "‖αf‖"}[key]
        parts.append(Text(f"{caption}; {heat.reading(symbol)}", style="dim"))
        if n < T:
            parts.append(Text(f"the grid shows the first {n:,} of {T:,} tokens (--max-tokens); JSON holds them all",
                              style="dim"))
        parts += heat.legend({"scores": "score ω", "weights": "weight α", "rollout": "rollout R",
                              "norms": "norm ‖αf‖"}[key])
        if heads:
            parts.append(Columns([_grid_part(heat, M, f"head {h}") for h, M in enumerate(heads, start=1)],
                                 padding=(1, 2)))
    else:
        parts.append(_too_many(n, width))
    parts.append(Text())
    parts.append(_top_heading(doc))
    twice = repeated(tokens)  # once: a count per row would make a long sentence's list O(T^3)
    parts += [top_line(f"{i} {token}" if not heat.fits else token, top, twice)
              for i, (token, top) in enumerate(zip(tokens, doc["top"]))]
    return Group(*parts, *_predictions(doc))


def rows_view(doc: dict, *, raw: bool = False, width: int = 80, color_system: str | None = None) -> RenderableType:
    """A document's chosen rows (scores --rows): the strip of K rows over its T tokens as a
    heatmap, in blocks of columns that fit `width`, its legend, then each row's top attended."""
    tokens, positions = doc["tokens"], doc["rows"]
    T = len(tokens)
    key = "scores" if raw else "weights"
    strip = np.array(doc[key], dtype=float).reshape(len(positions), T)  # (K, T)
    masked = masked_cells(doc, T, rows=positions)  # (K, T)
    heat = Heatmap(tokens, [strip], masked, signed=raw, width=width, color_system=color_system)
    labels = [f"{i} {tokens[i]}" for i in positions]
    H = doc["model"]["heads"]
    parts: list[RenderableType] = [describe({**doc, "sentence": f"{doc['document']}: {T:,} word pieces, "
                                                                f"{count(len(positions), 'row')} shown"})]
    grid = heat.strip(strip, labels)
    if grid is not None:
        which = f", head {doc['head']} of {H:,}" if doc.get("head") else "" if H == 1 else f", mean over {H:,} heads"
        step = "raw scores ω_ij = q_i · k_j" if raw else "weights α_ij = softmax_j(ω_ij · scale)"
        parts.append(Text(f"{step}{which}", style="bold"))
        parts += grid
        caption = "row i attends to column j"
        if not raw:
            caption += "; each row sums to 1"
        if masked.any():
            caption += "; · masked"
        parts.append(Text(f"{caption}; {heat.reading('ω' if raw else 'α')}", style="dim"))
        parts += heat.legend("score ω" if raw else "weight α")
    else:
        parts.append(Text(f"{width} columns are too few for the rows' grid; each row's top attended follows",
                          style="dim"))
    parts.append(Text())
    parts.append(_top_heading(doc))
    twice = repeated(tokens)
    parts += [top_line(label, top, twice) for label, top in zip(labels, doc["top"])]
    return Group(*parts)


def _vector_summary(v: np.ndarray, shown: int = 4) -> str:
    values = ", ".join(f"{x:.3f}" for x in v[:shown])
    return f"norm {np.linalg.norm(v):.3f}; [{values}{', …' if len(v) > shown else ''}] ({count(len(v), 'value')})"


def context_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """One token's weights as a ranked list with bars, its context vector, and the words
    nearest its own vector beside those nearest its context vector."""
    parts: list[RenderableType] = [describe(doc)]
    if "token" in doc:
        token, i = doc["token"], doc["index"]
        ranked = Table(title=f"how {token!r} (index {i}) attends: weights α_{i}j")
        for name, justify in (("j", "right"), ("token", "left"), ("weight", "right"), ("", "left")):
            ranked.add_column(name, justify=justify, **(FOLDS if name == "token" else ONE_LINE))
        masked = masked_cells(doc, len(doc["tokens"]))[i]
        order = ranking.ranked(np.array(doc["weights"]))  # ties by position, as the top lists
        for j in order:
            w = doc["weights"][j]
            shown = ("masked", "") if masked[j] else (f"{w:.3f}", weight_bar(w))
            ranked.add_row(str(j), doc["tokens"][j] + (" (itself)" if j == i else ""), *shown)
        parts.append(ranked)
        summed = "x_j" if doc["qkv"]["kind"] == "identity" else "v_j (value vectors)"
        parts.append(Text(f"context vector z_{i} = Σ_j α_{i}j {summed}:\n  {_vector_summary(np.array(doc['context']))}"))
        if "model" in doc:
            parts.append(Text("no nearest words: a trained model's hidden states and context vectors are not word "
                              "vectors of a vocabulary", style="dim"))
            return Group(*parts, *_predictions(doc))
        if not _word_space(doc):
            parts.append(Text("no nearest words for z: with projections it lives in value space, not among the word vectors",
                              style="dim"))
        near = Table(title="nearest vocabulary words (cosine)")
        near.add_column(f"to {token!r} itself", **FOLDS)
        near.add_column("cos", justify="right", **ONE_LINE)
        near.add_column(f"to its context vector z_{i}", **FOLDS)
        near.add_column("cos", justify="right", **ONE_LINE)
        own, ctx = doc["token_neighbors"], doc["neighbors"]
        for k in range(min(max(len(own), len(ctx)), TABLE_ROWS)):
            a = own[k] if k < len(own) else {"word": "", "cosine": None}
            b = ctx[k] if k < len(ctx) else {"word": "", "cosine": None}
            near.add_row(a["word"], _cos(a["cosine"]), b["word"], _cos(b["cosine"]))
        parts += [near, *_abridged(max(len(own), len(ctx)), "nearest words")]
    if "contexts" in doc:
        every = Table(title="every token's context vector z_i")
        every.add_column("i", justify="right", **ONE_LINE)
        every.add_column("token", **FOLDS)
        every.add_column("context vector")
        for i, (token, z) in enumerate(zip(doc["tokens"], doc["contexts"])):
            every.add_row(str(i), token, _vector_summary(np.array(z)))
        parts.append(every)
    parts.append(Text("the whole vectors: --format json", style="dim"))
    return Group(*parts, *_predictions(doc))


def _cos(c: float | None) -> str:
    return "" if c is None else f"{c:.3f}"


def _off_diagonal(M: list[list[float | None]]) -> list[float]:
    """The defined cosines between different sentences."""
    return [x for a, row in enumerate(M) for b, x in enumerate(row) if a != b and x is not None]


def _span(values: list[float]) -> str:
    """"0.963", or "0.951 to 0.985" when the values differ at the precision shown; "undefined"
    when none is defined."""
    if not values:
        return "undefined"
    low, high = f"{min(values):.3f}", f"{max(values):.3f}"
    return low if low == high else f"{low} to {high}"


def _cosines(title: str, labels: list[str], M: list[list[float | None]], width: int) -> Group:
    """A k x k matrix of cosines, in blocks of its columns where it is wider than `width`."""
    def table(shown: list[int]) -> Table:
        table = Table(title=title if shown[0] == 0 else None)
        table.add_column("", **ONE_LINE)
        for c in shown:
            table.add_column(labels[c], justify="right", **ONE_LINE)
        for label, row in zip(labels, M):
            table.add_row(label, *(cosine_text(row[c]) for c in shown))
        return table

    return Group(*blocked(table, column_blocks(table, len(labels), width)))


def _notes(doc: dict) -> list[RenderableType]:
    return [Text(note, style="dim") for note in doc.get("notes", ())]


def compare_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """One token across sentences: its top attended in each, the cosines between its context
    vectors and between its raw vectors, and the nearest words, those that moved marked."""
    token, docs = doc["token"], doc["sentences"]
    k = len(docs)
    labels = [f"({n + 1})" for n in range(k)]
    parts: list[RenderableType] = [Text(f"{token!r} in {k:,} sentences", style="bold")]
    for label, d in zip(labels, docs):
        parts += [Text(f"{label} {d['sentence']}", style="bold"),
                  top_line(f"    {token} (index {d['index']})", d["top"], repeated(d["tokens"]))]
    note = left_out(bool(docs[0].get("include_self")), docs[0].get("mask"))
    parts.append(Text(f"→ top attended (by weight α){', ' + note if note else ''}", style="dim"))
    if "hidden_cosine" in doc:
        parts += _model_cosines(doc, labels, width)
        return Group(*parts, *_notes(doc))
    ctx, raw = doc["context_cosine"], doc["raw_cosine"]
    # two small matrices, each headed by the sentences' numbers alone, side by side where they fit
    parts.append(Text(f"cosines between the sentences' vectors of {token!r}:", style="bold"))
    parts.append(Columns([_cosines("context vectors", labels, ctx, width), _cosines("raw vectors", labels, raw, width)],
                         padding=(0, 2)))
    parts += _notes(doc)
    parts.append(Text(
        f"the context vectors of {token!r} have cosine {_span(_off_diagonal(ctx))} between sentences "
        f"(its raw vectors: {_span(_off_diagonal(raw))}). "
        + ("With raw vectors and no learned projections, context barely moves a word: each token attends "
           "mostly to itself, so its context vector stays near its own vector. Learned W_Q, W_K, W_V are what "
           "would let the sentences pull it apart." if docs[0]["qkv"]["kind"] == "identity" else
           "These context vectors are sums of value vectors under the projections given."), style="dim"))
    if not _word_space(docs[0]):
        parts.append(Text("no nearest words for the context vectors: with projections they are sums of value "
                          "vectors, not word vectors", style="dim"))
        return Group(*parts)
    own = [n["word"] for n in docs[0]["token_neighbors"]]
    contexts = [[n["word"] for n in d["neighbors"]] for d in docs]
    rows = max([len(own), *map(len, contexts)])

    def near(shown: list[int]) -> Table:  # the word's own nearest, then the contexts' shown
        table = Table(title="nearest vocabulary words (* = not near the word itself)" if shown[0] == 0 else None)
        table.add_column(f"{token!r} itself", **FOLDS)
        for c in shown:
            table.add_column(f"context {labels[c]}", **FOLDS)
        for r in range(min(rows, TABLE_ROWS)):
            cells = [own[r] if r < len(own) else ""]
            for words in (contexts[c] for c in shown):
                word = words[r] if r < len(words) else ""
                cells.append(Text(f"*{word}", style="bold") if word and word not in own else Text(word))
            table.add_row(*cells)
        return table

    parts += [*blocked(near, column_blocks(near, k, width)), *_abridged(rows, "nearest words")]
    return Group(*parts)


def _word_space(doc: dict) -> bool:
    """Whether the document's context vectors are points among the word vectors (projections.word_space)."""
    return doc["qkv"]["kind"] == "identity" or bool(doc["qkv"].get("trained"))


def _model_cosines(doc: dict, labels: list[str], width: int) -> list[RenderableType]:
    """A trained model's view of one word across sentences: the cosine of its hidden states
    after the embeddings and after each layer, for every pair of sentences; beside it, what
    attention over the word vectors gives (doc["static"])."""
    token, hidden = doc["token"], doc["hidden_cosine"]  # (L + 1, k, k)
    k = len(hidden[0])
    pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]

    def table(shown: list[int]) -> Table:
        table = Table()
        table.add_column("after", **ONE_LINE)
        for p in shown:
            a, b = pairs[p]
            table.add_column(f"{labels[a]}-{labels[b]}", justify="right", **ONE_LINE)
        for l, M in enumerate(hidden):
            table.add_row("embeddings" if l == 0 else f"layer {l}",
                          *(cosine_text(M[a][b]) for a, b in (pairs[p] for p in shown)))
        return table

    parts: list[RenderableType] = [Text(f"cosine of the hidden states of {token!r} between the sentences:",
                                        style="bold"),
                                   *blocked(table, column_blocks(table, len(pairs), width))]
    static = doc.get("static")
    if static is not None:
        ctx, raw = _off_diagonal(static["context_cosine"]), _off_diagonal(static["raw_cosine"])
        parts.append(Text(
            f"over the word vectors {static['vectors']}, with no learned projections, the context vectors of "
            f"{token!r} have cosine {_span(ctx)} (raw vectors: {_span(raw)}): the trained model's "
            "learned W_Q, W_K, W_V and its layers are what let the sentences pull the word apart.", style="dim"))
    return parts


# A table of more rows than this takes rich seconds to lay out, and no one reads it on a
# terminal: it shows the first ones and says so; JSON lists them all.
TABLE_ROWS = 1000


def _abridged(rows: int, what: str) -> list[Text]:
    return ([Text(f"the table shows the first {TABLE_ROWS:,} of {rows:,} {what}; --format json lists them all",
                  style="dim")] if rows > TABLE_ROWS else [])


def neighbors_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    what = f"{doc['word']!r} in {doc['sentence']!r} (its context vector)" if "sentence" in doc else repr(doc["word"])
    table = Table(title=f"nearest words to {what}, by cosine, in {doc['vectors']['name']}")
    table.add_column("word", **FOLDS)
    table.add_column("cosine", justify="right", **ONE_LINE)
    table.add_column("", **ONE_LINE)
    for n in doc["neighbors"][:TABLE_ROWS]:
        table.add_row(n["word"], f"{n['cosine']:.3f}", weight_bar(max(n["cosine"], 0.0), 20))
    return Group(table, *_abridged(len(doc["neighbors"]), "words"))


def _matrix(M: np.ndarray, rows: list[str], width: int, first: int = 0) -> Table:
    """A matrix, its rows labelled, abridged to its first few columns and its last, each
    headed by its index (from `first`: a head's columns among all the heads'): five and the
    last, or fewer where `width` holds fewer whole."""
    n = M.shape[1]

    def table(shown: int) -> Table:
        table = Table(box=None, show_header=True, header_style="dim")
        table.add_column("", **FOLDS)
        columns = list(range(n)) if n <= shown else [*range(shown - 1), None, n - 1]
        for c in columns:
            table.add_column("…" if c is None else str(first + c), justify="right", **ONE_LINE)
        for label, row in zip(rows, M):
            table.add_row(label, *("…" if c is None else f"{row[c]:.3f}" for c in columns))
        return table

    for shown in range(6, 2, -1):
        drawn = table(shown)
        if least_width(drawn) <= width:
            return drawn
    return table(2)


def _followed(doc: dict, masked: np.ndarray, width: int) -> Group:
    """The token's row through the steps, a row a token j (a long sentence grows the table
    down, never across): ω_ij, s_ij and α_ij of the head shown, or their mean over the heads;
    in blocks of these columns where `width` holds fewer than three beside j and the token."""
    i, shown = doc["index"], doc["row"]["shown"]
    names = ("ω_ij", "s_ij", "α_ij")
    cells = [[f"{shown['scores'][j]:.3f}", f"{shown['scaled'][j]:.3f}",
              "·" if masked[i, j] else f"{shown['weights'][j]:.3f}"] for j in range(len(doc["tokens"]))]

    def table(columns: list[int]) -> Table:
        table = Table(box=None, header_style="bold")
        table.add_column("j", justify="right", **ONE_LINE)
        table.add_column("token", **FOLDS)
        for c in columns:
            table.add_column(names[c], justify="right", **ONE_LINE)
        for j, t in enumerate(doc["tokens"]):
            table.add_row(str(j), t + (" (itself)" if j == i else ""), *(cells[j][c] for c in columns))
        return table

    return Group(*blocked(table, column_blocks(table, len(names), width)))


def explain_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """Each step of attention as a titled panel with its shape; with --token, its row too.
    With a model's --head, the steps of that head: its columns of Q, K and V, its grids, its
    context vectors and the token's row in it; else every head's grids, and the token's row
    as the mean over the heads."""
    tokens, steps = doc["tokens"], doc["steps"]
    T, H = len(tokens), len(steps["weights"])
    d, d_k, d_v = len(steps["X"][0]), len(steps["Q"][0]), len(steps["V"][0])
    head = doc.get("head")  # from 1, a model's --head; None: every head
    one = f" of head {head}" if head else ""
    if head:  # the head's own columns of Q, K and V (keys and values written out for each query head)
        d_k, d_v = d_k // H, d_v // H
    first = (head - 1) * d_k if head else 0
    shapes = f"{T:,} x {d_k:,} each" if d_v == d_k else f"{T:,} x {d_k:,}, {T:,} x {d_k:,}, {T:,} x {d_v:,}"
    masked = masked_cells(doc, T)
    identity = doc["qkv"]["kind"] == "identity"
    roles = "Q = K = V = X (no projections)" if identity else "Q = X W_Q, K = X W_K, V = X W_V"
    inputs = "the tokens' word vectors X"
    if "model" in doc and doc["mask"] != "none":  # every decoder attncli reads norms X before its attention
        roles = f"Q = N W_Q + b_Q, K = N W_K + b_K, V = N W_V + b_V, N = X normed, layer {doc['layer']}'s own"
    elif "model" in doc:
        roles = f"Q = X W_Q + b_Q, K = X W_K + b_K, V = X W_V + b_V, layer {doc['layer']}'s own"
    if head:
        roles += f"; head {head}'s columns, {first:,} to {first + d_k - 1:,} of {d_k * H:,}"
    if "model" in doc:
        before = "the embeddings" if doc["layer"] == 1 else f"layer {doc['layer'] - 1}"
        inputs = f"layer {doc['layer']}'s input X, the hidden states after {before}"
    shown_heads = [head] if head else list(range(1, H + 1))

    def per_head(key: str, symbol: str) -> RenderableType:
        signed = key != "weights"
        shown = masked if not signed else np.zeros_like(masked)  # the scores are before the mask
        matrices = [np.array(steps[key][h - 1]) for h in shown_heads]
        heat = Heatmap(tokens, matrices, shown, signed=signed, width=width - 4, color_system=color_system)
        if not heat.fits:
            return Text(f"{T:,} tokens are too many for a {T:,} x {T:,} grid in {width - 4} columns; "
                        "--format json holds every matrix", style="dim")
        grids = [_grid_part(heat, M, f"head {h}" if len(shown_heads) > 1 else None)
                 for h, M in zip(shown_heads, matrices)]
        reading = Text(heat.reading(symbol), style="dim")
        return Group(Columns(grids, padding=(1, 2)) if len(grids) > 1 else grids[0], *heat.key(), reading,
                     *heat.legend(symbol))

    def step(heading: str, detail: str, shape: str, body: RenderableType) -> Panel:
        """A panel titled "heading: detail  (shape)", or, where that is wider than the panel's
        top border holds, "heading  (shape)" with the detail as the panel's first line."""
        title = f"{heading}: {detail}  ({shape})"
        if cell_len(title) <= width - 6:  # "╭─ " and " ─╮"
            return Panel(body, title=Text(title))
        return Panel(Group(Text(detail, style="dim"), body), title=Text(f"{heading}  ({shape})"))

    def columns(name: str) -> np.ndarray:  # (T, d_k): the head's own, or every head's side by side
        M = np.array(steps[name])
        return M[:, first:first + (d_v if name == "V" else d_k)] if head else M

    several = " per head" if H > 1 and not head else one
    panels = [
        describe(doc),
        Panel(_matrix(np.array(steps["X"]), tokens, width - 4), title=Text(f"1. {inputs}  ({T:,} x {d:,})")),
        step(f"2. queries, keys, values{one}", roles, shapes,
             Group(*(Group(Text(name, style="bold"), _matrix(columns(name), tokens, width - 4, first=first))
                     for name in "QKV"))),
        Panel(per_head("scores", "ω"), title=Text(f"3. raw scores ω = Q Kᵀ{several}  ({T:,} x {T:,})")),
        Panel(per_head("scaled", "scaled score"),
              title=Text(f"4. scaled scores ω · {doc['scale']:.4g} / {doc['temperature']:g}{one}  ({T:,} x {T:,})")),
        Panel(per_head("weights", "α"),
              title=Text(f"5. weights α = softmax of each row{one}{', causal mask (· masked)' if masked.any() else ''}  ({T:,} x {T:,})")),
        Panel(_matrix(np.array(steps["context"]), tokens, width - 4),
              title=Text(f"6. context vectors Z = A V{one or (', heads side by side' if H > 1 else '')}  "
                         f"({T:,} x {len(steps['context'][0]):,})")),
    ]
    if "row" in doc:
        i = doc["index"]
        z = np.array(doc["row"]["context"])
        which = f", head {head}" if head else f", the mean over {count(H, 'head')}" if H > 1 else ""
        scaled = Text(f"s_ij = ω_ij · {doc['scale']:.4g} / {doc['temperature']:g}, the scaled score", style="dim")
        panels.append(Panel(Group(_followed(doc, masked, width - 4), scaled, Text(f"z_{i}: {_vector_summary(z)}")),
                            title=Text(f"{doc['token']!r} (index {i}) through every step{which}")))
    return Group(*panels)


def heads_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """Every layer's heads at a glance, as BertViz's model view draws them: a small picture of
    each head's T x T weights, a cell a weight, all on one scale from 0 to 1, so that a
    shade means the same weight in every picture. Where the width allows, a row a line,
    its token at the left and the columns' positions on top; else two rows of cells to a
    line (the upper half block in the first row's colour on the second's) or, without
    colour, a shade a cell. A head that puts more than half its attention on an encoder's
    [CLS] and [SEP], or on a decoder's first piece, is marked * (marked_heads). With
    --ablate, the heads' ablation effects below, as a layers x heads grid (_ablation)."""
    W = np.array(doc["weights"], dtype=float)  # (L, H, T, T): the layers and heads shown
    T = W.shape[2]
    parts: list[RenderableType] = [describe(doc)]
    if "kv_heads" in doc.get("model", {}):
        parts.append(Text(_sharing(doc["model"]), style="dim"))
    if T + 4 > width:
        parts.append(Text(f"{T} tokens are too many for a picture of each head in {width} columns; "
                          "--format json holds every weight", style="dim"))
    else:
        parts += _pictures(doc, W, width, color_system)
    if "ablation" in doc:
        parts += _ablation(doc, width, color_system)
    return Group(*parts)


def _shown(doc: dict, L: int, H: int) -> tuple[list[int], list[int]]:
    """The numbers (from 1) of the layers and heads a heads document shows."""
    return ([doc["layer"]] if doc.get("layer") else list(range(1, L + 1)),
            [doc["head"]] if doc.get("head") else list(range(1, H + 1)))


def _pictures(doc: dict, W: np.ndarray, width: int, color_system: str | None) -> list[RenderableType]:
    """Each head's picture, a layer at a time, and how to read them."""
    L, H, T, _ = W.shape
    layers, heads = _shown(doc, L, H)
    scale = heatmap.sequential(1.0, color_system)
    shares, sink = marked_heads(doc)
    parts: list[RenderableType] = []
    labels = [Text(f"{i} {t}") for i, t in enumerate(doc["tokens"])]
    label_width = min(max(label.cell_len for label in labels), 16)
    across = (width - label_width - 1 + 2) // (T + 2)  # labelled pictures a line, two spaces apart
    for l, number in enumerate(layers):
        names = [f"h{n}" + ("*" if shares is not None and shares[l][h] > 0.5 else "") for h, n in enumerate(heads)]
        parts.append(Text(f"layer {number}" if doc.get("layer") or L > 1 else "heads", style="bold"))
        if across >= 1:
            parts += _labelled_heads(W[l], names, labels, label_width, across, scale)
        else:
            pictures = [Group(Text(name.ljust(T)[:max(T, 4)], style="bold"), *_head_picture(W[l, h], scale))
                        for h, name in enumerate(names)]
            parts.append(Columns(pictures, padding=(0, 2)))
    cut = [label for label in labels if label.cell_len > label_width]
    if across >= 1 and cut:  # a long token's label ends in "…" beside its row: here it is whole
        parts.append(Text("the labels cut short, in full:", style="dim"))
        parts += pack([label.copy() for label in cut], width, sep="   ")
    reading = ("a row a line" if across >= 1 else
               "two rows of cells a line, upper and lower half" if scale is not None else "a row a line")
    parts.append(Text(f"each picture: row i attends to column j ({reading}); one shade scale for every picture, "
                      f"weight 0 to 1 (the largest here {W.max():.2f})"
                      + (f"; * more than half on {sink}" if shares else ""), style="dim"))
    return parts


def _ablation(doc: dict, width: int, color_system: str | None) -> list[RenderableType]:
    """The heads' ablation effects (Michel et al. 2019) as a layers x heads grid, a cell a
    head's number on the colour of its step (heatmap's scales: sequential from 0, or
    diverging around 0 where an effect is below 0, as a decoder's loss can fall), the
    largest marked *; as many heads a line as the width holds; a dash for an effect that is
    undefined (null: the notes say why)."""
    E = np.array(doc["ablation"], dtype=float)  # (L, H) of the heads shown; null -> NaN
    layers, heads = _shown(doc, *E.shape)
    known = E[np.isfinite(E)]
    low, high = float(known.min(initial=0.0)), float(known.max(initial=0.0))
    numbers = heatmap.Numbers.for_scores(E)
    scale = (heatmap.diverging(low, high, color_system) if low < 0 else heatmap.sequential(high, color_system))
    top = np.unravel_index(int(np.nanargmax(E)), E.shape) if known.size else None
    label = max(len(f"layer {n}") for n in layers)
    column = max(numbers.width + 1, max(len(f"h{n}") for n in heads)) + 1  # "*" and a gap before the number
    across = max(1, (width - label) // column)
    lines = [Text("ablation: each head's output zeroed in turn, the model run on from there", style="bold")]
    for first in range(0, len(heads), across):
        shown = range(first, min(first + across, len(heads)))
        lines.append(Text(" " * label + "".join(f"h{heads[h]}".rjust(column) for h in shown), style="bold"))
        for l, number in enumerate(layers):
            line = Text()
            line.append(f"layer {number}".ljust(label), style="bold")
            for h in shown:
                if np.isnan(E[l, h]):
                    line.append(UNDEFINED.rjust(column), style="dim")
                    continue
                cell = ("*" if (l, h) == top else "") + numbers.text(E[l, h])
                line.append(cell.rjust(column), style=None if scale is None else scale.style(scale.step(E[l, h])))
            lines.append(line)
    legend = heatmap.legend(scale, numbers, "Δ", low, high)
    largest = (f"; * the largest, layer {layers[top[0]]} head {heads[top[1]]} ({E[top]:.3g})" if top is not None
               else "")
    lines.append(Text(f"Δ: {doc['ablation_of']}, the model with the head zeroed against the whole model; "
                      f"{numbers.reading('Δ', high)}{largest}", style="dim"))
    return lines + ([legend] if legend is not None else []) + _notes(doc)


def _sharing(m: dict) -> str:
    """Which query heads share a key/value head (grouped-query attention): h1-h2, h3-h4, ..."""
    group = m["heads"] // m["kv_heads"]
    spans = [f"h{g * group + 1}-h{(g + 1) * group}" for g in range(m["kv_heads"])]
    return f"query heads sharing keys and values (grouped-query attention): {', '.join(spans)}"


SHADES = " ░▒▓█"


def _cell(value: float, scale) -> Text:
    """One weight of 0 to 1 as a character: a block in the scale's colour, or a shade."""
    if scale is None:
        return Text(SHADES[min(int(value * (len(SHADES) - 1) + 0.5), len(SHADES) - 1)])
    return Text("█", style=Style(color=scale.colours[scale.step(value)]))


def _labelled_heads(W: np.ndarray, names: list[str], labels: list[Text], label_width: int, across: int,
                    scale) -> list[Text]:
    """One layer's heads W (H, T, T), `across` pictures a line, each row a line beside its
    token's label, each column's position (its last digit) on top."""
    H, T, _ = W.shape
    lines = []
    for first in range(0, H, across):
        shown = range(first, min(first + across, H))
        gap = " " * (label_width + 1)
        lines.append(Text(gap + "  ".join(names[h].ljust(T) for h in shown), style="bold"))
        lines.append(Text(gap + "  ".join("".join(str(j % 10) for j in range(T)) for _ in shown), style="dim"))
        for i in range(T):
            line = labels[i].copy()
            line.truncate(label_width, overflow="ellipsis", pad=True)
            for k, h in enumerate(shown):
                line.append("  " if k else " ")
                for j in range(T):
                    line.append_text(_cell(W[h, i, j], scale))
            lines.append(line)
    return lines


def _head_picture(M: np.ndarray, scale) -> list[Text]:
    """One head's (T, T) weights of 0 to 1: half blocks in colour, or a shade a cell without it."""
    T = len(M)
    if scale is None:
        return [Text("").join(_cell(v, None) for v in row) for row in M]
    lines = []
    for i in range(0, T, 2):
        line = Text()
        for j in range(T):
            top = scale.colours[scale.step(M[i, j])]
            bottom = scale.colours[scale.step(M[i + 1, j])] if i + 1 < T else None
            line.append("▀", style=Style(color=top, bgcolor=bottom))
        lines.append(line)
    return lines
