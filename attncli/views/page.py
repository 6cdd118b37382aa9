"""The interactive page of --html and of a notebook's display (attncli.show): one HTML file
that holds its script, its style and its numbers, and loads nothing.

- The numbers are the documents themselves (less their "top" lists, which the page ranks
  from the weights), once, as JSON in a `<script
  type="application/json">` element: each matrix (an array of two dimensions or more) to
  DECIMALS places, the four the page shows of it, every other float to SIGNIFICANT digits,
  compare's cosines whole (WHOLE); the JSON output keeps every digit. At 512 word pieces
  a page of a layer's twelve heads holds 3 million numbers, and the file's size is what
  its first draw waits on (benchmarks/README.md). The JSON escapes `<`, `>` and `&`, so
  that no text of a document can end its element, and is ASCII.
- The script (page.js, beside this file) reads that JSON and sets every label with
  textContent, never as HTML; the table view as a terminal draws it is rich's recording,
  which escapes its text.
- A Content-Security-Policy meta element forbids every load but the page's own script and
  style, named by their SHA-256 hashes: no font, script, image or connection from anywhere,
  and a text that somehow became markup could run nothing.
- In a notebook the page sits in a sandboxed frame as tall as the page, which
  frame_height reckons from what the page draws.

Knows no rich, no click: the recording comes in as its stylesheet and its code.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from html import escape
from importlib import resources

import numpy as np

from attncli.visible import visible

SIGNIFICANT = 6  # digits of a number in the page's JSON that is not in a matrix
DECIMALS = 4  # places of a matrix's numbers: the page shows them to four (num() in page.js)
# compare's cosines, which the page prints to the terminal's three places, keep every digit:
# rounded to four places first, a number can print otherwise (0.98249: 0.982 on the terminal,
# 0.9825 and then 0.983 on the page); they are few, k x k a table
WHOLE = frozenset({"context_cosine", "raw_cosine", "hidden_cosine"})

# Every head its colour in the head view and the model view: Okabe & Ito's and Paul Tol's
# colour-blind-safe palettes, each darkened where needed to a 3:1 contrast with the page's
# white (WCAG 2.1, 1.4.11, for graphics; tests/test_page.py checks it), in the order that
# keeps neighbouring heads apart; past twelve heads the colours repeat, the head's number
# beside each toggle telling them apart.
HEAD_COLOURS = ("#0072B2", "#D55E00", "#117733", "#AA4499", "#332288", "#B8860B",
                "#882255", "#2F8F83", "#CC3311", "#5F6B00", "#6A3D9A", "#8C564B")


def _asset(name: str) -> str:
    return resources.files("attncli.views").joinpath(name).read_text(encoding="utf-8")


def _rounded_array(a: np.ndarray) -> list:
    """A float array as a list of floats, each rounded to SIGNIFICANT digits: the double
    nearest the decimal, so that JSON writes the decimal itself (n / 10^k is correctly
    rounded where 10^k is exact, k <= 22)."""
    out = a.astype(np.float64)  # (...), a copy
    nonzero = np.isfinite(out) & (out != 0)
    exponent = np.zeros(out.shape, dtype=np.int64)
    exponent[nonzero] = np.floor(np.log10(np.abs(out[nonzero]))).astype(np.int64)
    k = SIGNIFICANT - 1 - exponent  # decimals kept
    fast = nonzero & (np.abs(k) <= 22)
    down = fast & (k >= 0)
    up = fast & (k < 0)
    out[down] = np.round(out[down] * 10.0 ** k[down]) / 10.0 ** k[down]
    out[up] = np.round(out[up] / 10.0 ** -k[up]) * 10.0 ** -k[up]
    flat = out.reshape(-1)
    for index in np.flatnonzero((nonzero & ~fast).reshape(-1)):  # far below 1e-16: a few, by hand
        flat[index] = float(f"{flat[index]:.{SIGNIFICANT}g}")
    return out.tolist()


def rounded(value):
    """A document with each matrix's floats to DECIMALS places and every other float to
    SIGNIFICANT digits, but for the keys of WHOLE; ints, bools, strings and None as they are.
    A list of numbers (any depth, rectangular) goes through numpy at once."""
    if isinstance(value, dict):
        return {key: v if key in WHOLE else rounded(v) for key, v in value.items()}
    if isinstance(value, float):
        return _rounded_array(np.array(value)) if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        try:
            a = np.asarray(value)
        except ValueError:  # ragged
            a = None
        if a is not None and a.dtype.kind == "f" and a.ndim >= 2:
            return np.round(a, DECIMALS).tolist()  # np.round: the double nearest the decimal
        if a is not None and a.dtype.kind == "f":
            return _rounded_array(a)
        if a is not None and a.dtype.kind in "iub":
            return list(value)
        return [rounded(v) for v in value]
    return value


def _untopped(value):
    """The documents without their "top" lists, which the page ranks from the weights
    themselves."""
    if isinstance(value, dict):
        return {key: _untopped(v) for key, v in value.items() if key != "top"}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [_untopped(v) for v in value]
    return value


def data_json(payload: dict) -> str:
    """The page's JSON: ASCII, with <, > and & escaped, so that nothing in it can end the
    script element that holds it or be read as markup."""
    text = json.dumps(payload, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


PAGE = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="generator" content="attncli">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src {script_hash}; \
style-src {style_hash}; img-src data:; base-uri 'none'; form-action 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<header><h1 id="title"></h1><p id="subtitle"></p></header>
<main id="app"><noscript><p>The interactive views need JavaScript; the table view below needs none.</p></noscript></main>
<section id="table" aria-labelledby="table-heading">
<h2 id="table-heading">The table view</h2>
<pre class="terminal"><code>{code}</code></pre>
</section>
<script type="application/json" id="attncli-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""


def page(docs: list[dict], title: str, table_style: str = "", table_code: str = "") -> str:
    """The page of `docs` (the JSON documents of one run, their text already made visible),
    called `title` (made visible here, whoever made it: it goes to the window's title, the
    page's heading and a notebook frame's title), with the table view a terminal shows:
    `table_style` and `table_code`, rich's recording as HTML (its stylesheet, and its escaped
    code)."""
    title = visible(title)
    payload = {"title": title, "colours": list(HEAD_COLOURS), "docs": rounded(_untopped(docs))}
    style = _asset("page.css") + "\n" + table_style
    script = _asset("page.js")
    return PAGE.format(script_hash=_hash(script), style_hash=_hash(style), title=escape(title), style=style,
                       code=table_code, data=data_json(payload), script=script)


# --- a page's height in a frame --------------------------------------------------------------
# A notebook shows a page in a sandboxed frame with no origin of its own: nothing outside can
# measure what it holds, and the page cannot size its frame. So its height is reckoned here
# from what page.js draws and how page.css lays it out, at the frame's least width and in the
# widest of the fonts page.css names (DejaVu's): an upper bound, which a wider frame or a
# narrower font only leaves room under. In px; 1rem is 16.

FRAME_WIDTH = 800  # the frame's least width (its min-width), the heatmap's and the model view's about
WIDTH = FRAME_WIDTH - 48  # the body's, within its margins of 1.5rem
SANS = 0.6  # the mean advance of a sans-serif font's character, in em, at its widest (DejaVu Sans: 0.55)
MONO = 0.61  # a monospace font's (DejaVu Sans Mono: 0.602)
BAR = 17  # a scroll bar along the bottom of what is wider than its box: the frame, the table view
TERMINAL_LINE = 19.5  # a line of the table view: 16 px of monospace at its font's own spacing (DejaVu: 19)


# The characters of page.js's notes and captions, rounded up (a token, a name and numbers
# where they hold some, counted apart): what the lines they wrap to are counted from.
NOTES = {"scores": 130, "scores heatmap": 80, "model view": 180, "heads": 140, "heads heatmap": 75, "context": 70,
         "compare": 105, "context vectors": 145, "raw vectors": 130, "hidden states": 200, "static": 220,
         "summary": 320, "nearest": 56, "contributions": 70, "stats": 30, "profiles": 420, "generate": 300,
         "written rows": 110}


def _lines(chars: int, size: float, width: float = WIDTH) -> int:
    """The lines a text of `chars` characters wraps to at `size` px in `width` px: each at the
    widest mean advance, which leaves a line room for the part of a word that breaks it."""
    return max(1, math.ceil(chars / max(1, int(width / (size * SANS)))))


def _h2(chars: int = 0) -> float:  # 1.1rem at 1.4, 1.2rem above it and .4rem under it
    return _lines(chars, 17.6) * 24.64 + 25.6


def _p(chars: int, size: float = 16, width: float = WIDTH) -> float:  # a paragraph, .6rem under it
    return (_lines(chars, size, width) * size * 1.4 if chars else 0) + 9.6


def _table(rows: int, caption: int = 1, width: float = WIDTH) -> float:
    """A table of rows of 23.5 px (13 px at 1.4, 2 px padding, a border) under its caption,
    .3rem above it and .6rem under it."""
    return _lines(caption, 13, width) * 18.2 + 3.2 + rows * 23.5 + 14.4


def _toggles(heads: int) -> float:
    """The fieldset of head toggles, four a row at least (each at most 110 px, 1rem apart),
    .4rem apart; its legend, border and padding 40 px, .4rem above and under it."""
    rows = math.ceil(heads / 4)
    return rows * 22.4 + (rows - 1) * 6.4 + 40 + 12.8


def _head_view(T: int) -> float:
    """A token's line of 16 px, or the top attended beside them, as tall as a heading (two
    lines where the column is narrow) over the head's six lines of 13 px."""
    return max(16 * T, 180)


def _heatmap(tokens: list[str], tip: int, selectors: int, undefined: bool = False) -> float:
    """Page.js's Heatmap of T tokens: its selectors, the axes' line, the columns' labels
    (rotated: as long as the longest, at most 10em of 11 px), the grid of ⌊560 / T⌋ px cells
    (2 to 40), or the colour scale beside it where that is taller (with the grey of an
    undefined number under it where there is one), and the tooltip of `tip` lines of 12 px
    (at least 5.6em), its padding and border."""
    T = len(tokens)
    cell = max(2, min(40, 560 // max(T, 1)))
    labels = min(max(map(len, tokens), default=1), 10) * 11 * MONO + 4
    scale = 21.6 + min(max(T * cell - 24, 96), 216) + (32 if undefined else 0)
    return selectors * 36 + 23 + labels + max(T * cell, scale) + max(67.2, tip * 14.4) + 18


def _scores(doc: dict) -> float:
    """The head view (the toggles of the heads and their mean) and the heatmap."""
    heads = len(doc.get("heads") or ())
    shown = heads + 1 if heads > 1 else 1
    return (_h2() + _p(NOTES["scores"] if heads > 1 else 0) + _toggles(shown) + _head_view(len(doc["tokens"]))
            + _h2() + _p(NOTES["scores heatmap"]) + _heatmap(doc["tokens"], 5, heads > 1))


def _heads(doc: dict) -> float:
    """The model view (a row of thumbnails of 79.4 px a layer, 6 px apart), the head view of
    a layer (its selector, its heads' toggles and their mean's) and the heatmap."""
    L, H = len(doc["weights"]), len(doc["weights"][0])
    return (_h2() + _p(NOTES["model view"]) + L * 85.4 + 6.8
            + _h2() + _p(NOTES["heads"] if H > 1 else 0) + 36 + _toggles(H + (H > 1)) + _head_view(len(doc["tokens"]))
            + _h2() + _p(NOTES["heads heatmap"]) + _heatmap(doc["tokens"], 3, 0))


def _context(doc: dict) -> float:
    """The bars, 12 px at 1.4 a token, and each list of nearest words under its heading."""
    lists = sum(40 + 22.4 * len(doc[key]) + 32 for key in ("neighbors", "token_neighbors") if doc.get(key))
    heading = len(f"What {doc['token']} ({doc['index']}) attends to")
    return _h2(heading) + _p(NOTES["context"]) + 16.8 * len(doc["tokens"]) + lists


def _sentences(docs: list[dict]) -> float:
    """compare's sentences, side by side where they fit, 2rem apart (a flex box that wraps):
    each its heading (bold, "(1) " before it) over its rows of tokens, a box of 13 px
    monospace each and 8 px about it."""
    height, row, used = 0.0, 0.0, None
    for k, d in enumerate(docs):
        tokens = sum(len(t) * 13 * MONO + 8 for t in d["tokens"])
        heading = (len(d["sentence"]) + len(str(k + 1)) + 3) * 16 * (SANS + 0.05)
        width = min(max(tokens, heading), WIDTH)
        tall = 17.6 + _lines(len(d["sentence"]), 16) * 22.4 + math.ceil(tokens / WIDTH) * 23
        if used is not None and used + 32 + width <= WIDTH:
            used, row = used + 32 + width, max(row, tall)
        else:
            height, used, row = height + row + (32 if used is not None else 0), width, tall
    return height + row


def _compare(doc: dict) -> float:
    """The sentences; the cosines, each table with its caption at most 24rem wide, 1.5rem
    apart, side by side where they fit; the notes and the summary; the nearest words."""
    docs, token = doc["sentences"], len(doc["token"])
    height = (_h2(token + 20) + _p(NOTES["compare"]) + _sentences(docs)
              + 40 + sum(_p(len(note)) for note in doc.get("notes") or ()))  # the heading of the cosines
    if doc.get("hidden_cosine") is not None:
        static = token + len((doc.get("static") or {}).get("vectors", "")) + NOTES["static"]
        return (height + _table(len(doc["hidden_cosine"]) + 1) + _p(NOTES["hidden states"], 13, 384)
                + _p(static, 13))
    side_by_side = 2 * (384 + 24) <= WIDTH
    tables = (1 if side_by_side else 2) * (_table(len(docs) + 1) + _p(NOTES["context vectors"], 13, 384))
    words = max(len(d.get("neighbors") or ()) for d in [*docs, {"neighbors": docs[0].get("token_neighbors")}])
    return height + tables + _p(token + NOTES["summary"], 13) + _table(words + 1, NOTES["nearest"], 320)


def _contributions(docs: list[dict]) -> float:
    """Each sentence's documents (a method each): a heading where there are several
    sentences, the view's heading and note, the method and layer selectors, the heatmap and
    under it the notes of the method shown (the longest of them)."""
    sentences: dict = {}
    for d in docs:  # a sentence's documents share its tokens
        sentences.setdefault(d.get("sentence"), []).append(d)
    headed = len(sentences) > 1

    def undefined(d: dict) -> bool:
        return any(None in row for M in d.get("contributions") or () for row in M)

    return sum((_h2(len(sentence or "")) if headed else 0) + _h2() + _p(NOTES["contributions"])
               + _heatmap(group[0]["tokens"], 4, 1, any(map(undefined, group)))
               + max(sum(_p(len(note)) for note in d.get("notes") or ()) for d in group)
               for sentence, group in sentences.items())


def _profiles(records: list[dict]) -> float:
    """stats --document's profiles: the note, the scales' line, the canvas of a block a
    layer (ProfileView in page.js: its sizes), and the tooltip of a head's numbers."""
    L, H = max(r["layer"] for r in records), max(r["head"] for r in records)
    K = len(records[0]["distance_profile"])
    row = max(4, min(16, 240 // H))
    block = 30 + (K + 10) * 12 + 16  # the margin, the columns and the gap between the profiles
    down = math.ceil(L / max(1, min(L, WIDTH // (block + 16))))
    tooltip = 6.4 + 9.6 + 2 + (K + 13) * 12 * 1.4  # a line each: the head, two headings, K + 10 numbers
    return _h2() + _p(NOTES["profiles"]) + _p(40) + down * (18 + H * row + 16) + tooltip


def _stats(doc: dict) -> float:
    """The table of a statistic by layer and head, and its selector (none by word); with
    --document, the profiles above it."""
    records = doc.get("records") or ()
    layers = max((r.get("layer", 0) for r in records), default=0)
    profiles = _profiles(records) if layers and "distance_profile" in records[0] else 0.0
    return profiles + _h2() + _p(NOTES["stats"]) + 36 + _table(layers + 1) if layers else 0.0


def _generate(doc: dict) -> float:
    """generate's view (GeneratedView in page.js): its note, the selector, the pieces (13 px
    monospace, 6 px about each, wrapping), the row's tooltip of four lines, the grid's
    caption, the grid of a line of cells a written piece (⌊720 / columns⌋ px, 2 to 14) and
    its tooltip."""
    pieces = sum(len(t or "(no piece)") * 13 * MONO + 8 for t in doc["tokens"])
    columns = max(1, len(doc["tokens"]) - 1)
    cell = max(2, min(14, 720 // columns))
    tooltip = max(67.2, 4 * 14.4) + 18
    return (_h2() + _p(NOTES["generate"]) + 36 + math.ceil(pieces / WIDTH) * 21 + tooltip
            + _p(NOTES["written rows"], 13) + len(doc["weights"]) * cell + tooltip)


VIEWS = {"scores": _scores, "heads": _heads, "context": _context, "compare": _compare, "generate": _generate}


def frame_height(html: str) -> int:
    """The height of a frame that holds the page `html` whole, as it opens and once a token
    or a cell has been pointed at: the title and subtitle, the views of its documents (as
    main() in page.js draws them), the table view, the body's margins of 1rem, and a scroll
    bar under what is wider than the frame."""
    data = data_of(html)
    docs = data["docs"]
    code = html[html.index("<code>") + len("<code>"):html.index("</code>")]
    command = docs[0].get("command") if docs else None
    if command == "contributions":
        views = _contributions(docs)
    elif command == "stats":
        views = _stats(docs[0])
    else:  # each document's, under its sentence where there are several
        views = sum((_h2(len(d.get("sentence", ""))) if len(docs) > 1 else 0) + VIEWS[d["command"]](d)
                    for d in docs if d.get("command") in VIEWS)
    about = docs and any(key in docs[0] for key in ("model", "vectors", "layer", "scale"))  # the subtitle's
    header = 16 + _lines(len(data["title"]), 20.8) * 29.12 + 3.2 + (22.4 if about else 0)
    table = _h2() + 9.6 + code.count("\n") * TERMINAL_LINE + 19.2 + BAR + 16
    return math.ceil(header + views + table + BAR)


def data_of(html: str) -> dict:
    """The JSON a page holds (for tests and for whoever reads a saved page back)."""
    start = html.index('<script type="application/json" id="attncli-data">') + len(
        '<script type="application/json" id="attncli-data">')
    return json.loads(html[start:html.index("</script>", start)])
