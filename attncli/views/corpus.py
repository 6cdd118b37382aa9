"""The views of a corpus: a long document's rows as they stream (scores --file), and stats'
table of heads, or of words, against the baselines."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.views.common import FOLDS, ONE_LINE, blocked, decimals, fewest_blocks, left_out, top_line
from attncli.visible import count, listed


def document_header(name: str, vectors: str, opts, window: int | None, *, scale: float | None = None) -> Text:
    """The lines above a document's rows: what it is, the numbers its weights were computed
    with (`scale`, documents.long.document_scale's), what its lists leave out."""
    text = Text(f"{name}: each token's top attended, as computed\n", style="bold")
    shown = f"scale {scale:.6g}, " if scale is not None else ""
    text.append(f"vectors {vectors}; {shown}temperature {opts.temperature:g}; mask {opts.mask}"
                + (f"; window {window}" if window else ""), style="dim")
    note = left_out(opts.include_self, opts.mask)
    text.append(f"\ni token → token(j) α_ij, its top attended first{'; ' + note if note else ''}", style="dim")
    return text


def document_row(row: dict) -> RenderableType:
    """A document's token and its top attended, every one with its position: a stream cannot
    know which words its later rows repeat, and "it → it" would read as attending to itself."""
    return top_line(row["token"], row["top"], {t["token"] for t in row["top"]}, position=row["index"])


# what the stats table shows of each record: (key, heading), and the baselines' marks
STATS_COLUMNS = (("entropy", "entr"), ("distance", "dist"), ("self", "self"), ("previous", "prev"),
                 ("next", "next"), ("first", "first"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("punct", "punct"),
                 ("previous_token", "prevT"), ("duplicate_token", "dupT"), ("induction", "indT"),
                 ("importance", "imp"))
# the columns no baseline has (stats.ADDED's), each written with the decimals its numbers need
OWN_COLUMNS = ("importance",)


SHARES = ("self", "previous", "next", "first", "cls", "sep", "punct")


# footnote marks, never letters: "1.68s" read as seconds
BASELINE_MARKS = {"uniform": "*", "shuffled": "†", "random": "‡"}


BASELINE_NAMES = {"uniform": "uniform", "shuffled": "shuffled", "random": "random projections"}


def stats_columns(records: list[dict], markers: dict | None = None) -> list[tuple[str, str]]:
    """The (key, heading) of STATS_COLUMNS a corpus has numbers for: the first position with
    a model, unless it is [CLS] in every sentence (an encoder's), whose column says the same;
    [CLS], [SEP] and punctuation only where there are some, the markers headed as the
    model's tokenizer names them (`markers`, the document's: RoBERTa's <s> and </s>); a head's
    own (importance) where it was asked for, dashes and all. The table and the PNG show the same."""
    def values(key: str) -> list:
        return [r[key] for r in records] + [b.get(key) for r in records for b in r["baselines"].values()]

    def seen(key: str) -> bool:
        if key not in records[0]:
            return False
        if key in OWN_COLUMNS:  # asked for: a column of dashes says that no sentence gave one
            return True
        if key == "first" and all(a is not None and b is not None and abs(a - b) <= 1e-9
                                  for a, b in zip(values("first"), values("cls"))):
            return False
        return any(v is not None for v in values(key)) and (key not in ("cls", "sep", "punct") or any(values(key)))

    names = {key: name for key, name in (markers or {}).items() if name}
    return [(k, names.get(k, h)) for k, h in STATS_COLUMNS if seen(k)]


def baseline_marks(names: list[str]) -> str:
    """The marks of the baselines a statistic is as good as equal to."""
    return "".join(BASELINE_MARKS[b] for b in names)


def marks_legend(baselines) -> str:
    """"* uniform, † shuffled, ‡ random projections", of the baselines there are."""
    return listed([f"{BASELINE_MARKS[b]} {BASELINE_NAMES[b]}" for b in baselines])


def places(records: list[dict], key: str) -> int:
    """The decimals a column is written with: two, or as many as its numbers need (an
    importance of 0.0019: four, views.common.decimals)."""
    return decimals([r[key] for r in records]) if key in OWN_COLUMNS else 2


def _stats_legend(columns: list[tuple[str, str]], importance_of: str | None = None) -> str:
    """What the headings of `columns` mean, naming only those."""
    headings = dict(columns)
    said = {"entropy": "entr: entropy of a row (nats)", "distance": "dist: distance attended (positions)"}
    parts = [said[k] for k in said if k in headings]
    shares = [headings[k] for k in SHARES if k in headings]
    if shares:
        parts.append(f"{listed(shares)}: shares of a row's attention")
    detectors = [(headings[k], name) for k, name in (("previous_token", "previous-token"),
                                                     ("duplicate_token", "duplicate-token"),
                                                     ("induction", "induction")) if k in headings]
    if detectors:
        parts.append(f"{listed([h for h, _ in detectors])}: TransformerLens's "
                     f"{listed([n for _, n in detectors])} score{'s' if len(detectors) > 1 else ''}")
    if "importance" in headings:
        parts.append(f"{headings['importance']}: a head's importance, the mean over the sentences of its ablation "
                     f"effect ({importance_of}, the model with the head zeroed against the whole model)")
    return "; ".join(parts)


SINK_MARK = "•"  # beside a sink head's name (stats --document)


def sink_note(doc: dict) -> str:
    """What the sink mark means, and how many heads of each layer have it (stats --document's
    records say which: `sink`)."""
    records = doc["records"]
    layers: dict[int, list[bool]] = {}
    for r in records:
        layers.setdefault(r["layer"], []).append(bool(r.get("sink")))
    counts = ", ".join(f"{l}: {sum(marks)} of {len(marks)}" for l, marks in layers.items())
    return (f"{SINK_MARK} a sink head: on average more than {doc['sink_threshold']:g} of a row's attention on the "
            f"first position (Gu et al. 2025); sink heads by layer: {counts}.")


def redone_text(redone: int) -> str:
    """What a float32 run says of the sentences it computed in float64 instead, if any."""
    return f"; {count(redone, 'sentence')} left its range, computed in float64" if redone else ""


def stats_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """A row per head, each statistic marked by the baselines it equals (* uniform, †
    shuffled, ‡ random projections), then each baseline's mean over the heads; or, --by
    word, the words that draw the most and the least attention against uniform attention's.
    Where the table is too wide for `width`, a statistic's marks become one "~"; where it
    still is, it is drawn in blocks of columns, each with the heads' numbers down its left."""
    if doc["by"] == "word":
        return _stats_words(doc)
    records = doc["records"]
    columns = stats_columns(records, doc.get("markers"))
    first = records[0]
    source = doc["model"] or doc["vectors"]
    if doc.get("precision", "float64") != "float64":  # a model run in float32 says so, and what it redid
        source += f", {doc['precision']}" + redone_text(first.get("redone_in_float64", 0))
    if doc.get("document"):
        head = Text(f"{doc['corpus']}: one text of {first['tokens']:,} word pieces, read as one sequence ({source})",
                    style="bold")
    else:
        head = Text(f"{doc['corpus']}: {first['sentences']:,} sentences, {first['tokens']:,} tokens ({source})",
                    style="bold")
    decimals = {key: places(records, key) for key, _ in columns}
    letters = len(first["baselines"])  # a mark a baseline, if the width has room for them

    def table(shown: list[int], compact: bool) -> Table:
        pad = 1 if compact else letters
        table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 1))
        table.add_column("head", **ONE_LINE)
        for k in shown:  # a model's marker is text from its tokenizer: never markup
            table.add_column(Text(columns[k][1]), justify="right", **ONE_LINE)
        for r in records:
            cells = [Text(f"{r['layer']}.{r['head']}") + Text(SINK_MARK if r.get("sink") else "", style="bold")]
            for key, _ in (columns[k] for k in shown):
                marks = baseline_marks(r["like_baseline"].get(key, []))
                marks = "~" if compact and marks else marks
                value = r[key]
                cells.append(Text("-" if value is None else f"{value:.{decimals[key]}f}", style="dim" if marks else "")
                             + Text(marks.ljust(pad), style="dim"))
            table.add_row(*cells)
        for name in first["baselines"]:
            cells = [Text(name[:8], style="italic")]
            for key, _ in (columns[k] for k in shown):
                if key in OWN_COLUMNS:  # no baseline of its own
                    cells.append(Text(""))
                    continue
                values = [r["baselines"][name][key] for r in records if r["baselines"][name][key] is not None]
                cells.append(Text((f"{sum(values) / len(values):.2f}" if values else "-") + " " * pad, style="italic"))
            table.add_row(*cells)
        return table

    # every mark where that takes no more blocks than one "~" a statistic does
    forms = [lambda shown: table(shown, False), lambda shown: table(shown, True)]
    k, blocks = fewest_blocks(forms, len(columns), width)
    compact = k == 1
    notes = Text(f"{_stats_legend(columns, doc.get('importance_of'))}. Dim and marked: as good as equal (0.005, or 1%) to a baseline: "
                 f"{marks_legend(first['baselines'])}"
                 + (" (~: to one of them; a wider terminal says which)" if compact else "")
                 + "; the baseline rows: their mean over the heads.", style="dim")
    if doc["skipped"]:
        notes.append(f" {doc['skipped']:,} of {doc['lines']:,} lines skipped.", style="dim")
    if doc.get("document"):
        notes.append(f" {sink_note(doc)} The JSON holds each head's distance_profile and tenths_profile.",
                     style="dim")
    return Group(head, *blocked(forms[k], blocks), notes)


def _stats_words(doc: dict, shown: int = 15, least: int = 5) -> RenderableType:
    """The words seen at least `least` times that draw the most and the least attention. Where
    uniform attention gives every word 1 (no causal mask: the n rows that may attend to a
    column give it 1/n each), its column would say nothing and the ratio is what it receives: the column is
    left out and a line says why."""
    records = [r for r in doc["records"] if r["count"] >= least and r["ratio"] is not None]
    even = all(abs(r["uniform"] - 1.0) < 5e-4 for r in records)  # 1.000 as the column shows it
    headings = ("word", "count", "received", "ratio") if even else ("word", "count", "received", "uniform", "ratio")
    parts: list[RenderableType] = [Text(f"{doc['corpus']}: attention each word receives, against uniform "
                                        f"attention's (words seen {least:,} times or more)", style="bold")]
    for title, chosen in (("most", records[:shown]), ("least", records[::-1][:shown])):
        table = Table(title=Text(f"drawing the {title}"), box=None, header_style="bold")
        for heading in headings:
            table.add_column(heading, **(FOLDS if heading == "word" else {"justify": "right", **ONE_LINE}))
        for r in chosen:
            cells = {"word": Text(r["word"]), "count": f"{r['count']:,}", "received": f"{r['received']:.3f}",
                     "uniform": f"{r['uniform']:.3f}", "ratio": f"{r['ratio']:.2f}"}
            table.add_row(*(cells[h] for h in headings))
        parts.append(table)
    if even:
        parts.append(Text("received: Σ_i α_ij, the heads' mean over the word's occurrences; uniform attention "
                          "gives every word 1 (with no causal mask, the n rows that may attend to it give it 1/n each), so "
                          "the ratio is what it receives",
                          style="dim"))
    else:
        parts.append(Text("received: Σ_i α_ij, the heads' mean over the word's occurrences; uniform: what "
                          "uniform attention gives it; ratio: received / uniform", style="dim"))
    return Group(*parts)


# faithfulness: a row a method, a column a layer and one rolled out

BEST_MARK = "*"  # beside the best method's mean in each column


def interval_cell(c: dict, *, with_interval: bool = True) -> str:
    """"0.42 [0.39, 0.45]": a column's mean rho and its interval; "-" where no sentence gave one."""
    if c["rho"] is None:
        return "-"
    return f"{c['rho']:.2f} [{c['low']:.2f}, {c['high']:.2f}]" if with_interval else f"{c['rho']:.2f}"


def column_keys(records: list[dict]) -> list[int | None]:
    """The columns of a faithfulness table: each layer (from 1), then None, rolled out."""
    return [l["layer"] for l in records[0]["layers"]] + [None]


def column_cell(record: dict, key: int | None) -> dict | None:
    """A record's cell of the column `key` (None: rolled out); None where it has none (the
    baseline's layers)."""
    if key is None:
        return record["rolled"]
    return next((l for l in record["layers"] if l["layer"] == key), None)


def best_methods(records: list[dict]) -> dict[int | None, set[str]]:
    """Each column's best methods, those of the highest mean rho (the baseline never among
    them), by column_keys."""
    out = {}
    for key in column_keys(records):
        means = {r["method"]: column_cell(r, key)["rho"] for r in records if not r["baseline"]}
        top = max((m for m in means.values() if m is not None), default=None)
        out[key] = {method for method, m in means.items() if top is not None and m == top}
    return out


def faithfulness_cells(records: list[dict], with_interval: bool = True) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """The headings of the columns (each layer's, then rolled out) and, for each record, its
    cells as the table and the PNG write them, each with whether it is its column's best."""
    keys = column_keys(records)
    top = best_methods(records)
    headings = [f"layer {l}" for l in keys[:-1]] + ["rolled out"]
    rows = []
    for r in records:
        cells = []
        for key in keys:
            c = column_cell(r, key)
            cells.append(("-" if c is None else interval_cell(c, with_interval=with_interval), r["method"] in top[key]))
        rows.append(cells)
    return headings, rows


def _aligned(headings: list[str], rows: list[list[tuple[str, bool]]]) -> tuple[list[str], list[list[str]]]:
    """Headings and cells padded to their column's width, the numbers' ends in line and the
    best's mark after its number (rich strips the trailing space a right-justified cell
    would need)."""
    widths = [max(len(h), 1 + max(len(cells[k][0]) for cells in rows)) for k, h in enumerate(headings)]
    return ([h.rjust(w) for h, w in zip(headings, widths)],
            [[text.rjust(w - 1) + (BEST_MARK if top else "") for (text, top), w in zip(cells, widths)]
             for cells in rows])


def faithfulness_legend(doc: dict) -> str:
    """What the numbers are, said below the table and the picture."""
    row = "its rows' mean over the tokens" if doc["output_row"] == "mean" else "its last row, the piece predicted next"
    return (f"ρ: Spearman's rank correlation, sentence by sentence, between each method's attribution of the "
            f"output ({row}) and {doc['reference']}'s effect of each token on it ({doc['effect']}, the token "
            f"left out); the mean over the sentences [its {doc['level']:.0%} percentile bootstrap interval, "
            f"{doc['resamples']:,} resamples, seed {doc['seed']}]; {BEST_MARK} the best method of its column. "
            "rolled out: over every layer (raw's is Abnar & Zuidema's rollout); random: a uniform random "
            "attribution a sentence, the baseline.")


def faithfulness_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """A row a method, the random baseline last; a column a layer and one rolled out, each
    cell the mean rho and its interval, the best method of each column bold and marked.
    Where the intervals take more blocks of columns than the means alone (a table wider
    than `width` is drawn in blocks, each with the methods down its left), only the means."""
    records = doc["records"]
    model = doc["model"]["name"]
    if doc["precision"] != "float64":
        model += f", {doc['precision']}" + redone_text(doc.get("redone_in_float64", 0))
    head = Text(f"{doc['corpus']}: {doc['sentences']:,} sentences ({model}): each method's agreement with "
                f"{doc['reference']}", style="bold")
    best = [[top for _, top in cells] for cells in faithfulness_cells(records, with_interval=False)[1]]
    forms = {with_interval: _aligned(*faithfulness_cells(records, with_interval=with_interval))
             for with_interval in (True, False)}

    def table(shown: list[int], with_interval: bool) -> Table:
        headings, rows = forms[with_interval]
        table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 1))
        table.add_column("method", **ONE_LINE)
        for k in shown:
            table.add_column(headings[k], **ONE_LINE)
        for r, cells, marks in zip(records, rows, best):
            style = "italic" if r["baseline"] else ""
            table.add_row(Text(r["method"], style=style),
                          *(Text(cells[k], style=style or ("bold" if marks[k] else "")) for k in shown))
        return table

    tables = [lambda shown: table(shown, True), lambda shown: table(shown, False)]
    k, blocks = fewest_blocks(tables, len(forms[True][0]), width)
    with_interval = k == 0
    notes = Text(faithfulness_legend(doc), style="dim")
    if not with_interval:
        notes.append(" The 95% intervals need a wider terminal; the JSON holds them.", style="dim")
    undefined = max(c["undefined"] for r in records for c in (*r["layers"], r["rolled"]))
    if undefined:
        notes.append(f" A sentence whose ρ is undefined (an attribution or effects that are constant, or that hold "
                     f"a share that cannot be computed) is left out of that column: at most {undefined:,} in one "
                     "column here.", style="dim")
    if doc["skipped"]:
        notes.append(f" {doc['skipped']:,} of {doc['lines']:,} lines skipped.", style="dim")
    return Group(head, *blocked(tables[k], blocks), notes)
