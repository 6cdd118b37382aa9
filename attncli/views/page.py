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


def data_of(html: str) -> dict:
    """The JSON a page holds (for tests and for whoever reads a saved page back)."""
    start = html.index('<script type="application/json" id="attncli-data">') + len(
        '<script type="application/json" id="attncli-data">')
    return json.loads(html[start:html.index("</script>", start)])
