"""What several families of views draw alike: a token's top attended as a line, what such a
list leaves out, the cells a mask hides, a weight as a bar, a cosine as text, a model's
markers; and how a view fits its width without cutting a number or a token: items packed
into lines (a number never apart from its word) and a wide table in blocks of columns."""

from __future__ import annotations

import functools
import io
import math
from collections import Counter
from collections.abc import Callable

import numpy as np
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.style import Style
from rich.table import Table
from rich.text import Text

from attncli.visible import listed


# a table's columns keep what they hold whole: words fold onto more lines, never cut to "…";
# numbers, bars and row labels stay on one line, so that rich narrows a column of words first
FOLDS = {"overflow": "fold"}
ONE_LINE = {"no_wrap": True}


def pack(items: list[Text], width: int, *, first: Text | None = None, sep: str = "   ",
         indent: int = 0) -> list[Text]:
    """`items` in lines of at most `width` cells, `sep` between two on a line, each item
    whole on one line ("7 the", "earth 0.108"): a line breaks between items, never inside
    one, so that a number stays beside its word. `first` begins the first line, and each
    line after it begins with `indent` spaces. An item wider than a line has one to itself
    (rich then folds it, whole, over the lines it needs)."""
    lines: list[Text] = []
    line = first.copy() if first is not None else Text()
    empty = True  # no item on `line` yet: `first` alone is no item
    for item in items:
        joined = line.cell_len + (len(sep) if not empty else 0) + item.cell_len
        if not empty and joined > width:
            lines.append(line)
            line, empty = Text(" " * min(indent, max(width - item.cell_len, 0))), True
        if not empty:
            line.append(sep)
        line.append_text(item)
        empty = False
    lines.append(line)
    return lines


class Packed:
    """`pack`'s lines, laid out for the width they are drawn in (a panel's, a stream's)."""

    def __init__(self, items: list[Text], *, first: Text | None = None, sep: str = "   ", indent: int = 0):
        self.items, self.first, self.sep, self.indent = items, first, sep, indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from pack(self.items, options.max_width, first=self.first, sep=self.sep, indent=self.indent)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((item.cell_len for item in self.items), default=0)
        first = self.first.cell_len if self.first is not None else 0
        whole = first + sum(item.cell_len for item in self.items) + len(self.sep) * max(len(self.items) - 1, 0)
        return Measurement(max(widest, first), whole).clamp(max_width=options.max_width)


@functools.lru_cache(maxsize=1)
def _measuring() -> Console:
    return Console(file=io.StringIO(), width=1_000_000, color_system=None, markup=False, emoji=False,
                   highlight=False)


def least_width(table: Table) -> int:
    """The fewest columns `table` is drawn in with nothing cut: its ONE_LINE columns as wide
    as their widest cell, the others (FOLDS) as their longest word, which rich narrows them
    to first."""
    console = _measuring()
    width = Measurement.get(console, console.options, table).maximum  # at its widest, borders and padding in
    for column in table.columns:
        cells = [Measurement.get(console, console.options, cell) for cell in (column.header, *column.cells)]
        if not column.no_wrap:
            width -= max(m.maximum for m in cells) - max(m.minimum for m in cells)
    return width


def column_blocks(table: Callable[[list[int]], Table], n: int, width: int) -> list[list[int]]:
    """The columns 0 to n - 1 of a table too wide for `width`, in the fewest blocks, in
    order, that each fit it as `table(block)` draws them (beside the row labels, which every
    block repeats): a wide table split, never a cell cut. The blocks as even as they can be
    (6 and 6 columns rather than 10 and 2). A column that fits no width beside the labels
    is a block of its own."""
    def fits(block: list[int]) -> bool:
        return least_width(table(block)) <= width

    blocks: list[list[int]] = []
    block: list[int] = []
    for k in range(n):
        if block and not fits([*block, k]):
            blocks.append(block)
            block = []
        block.append(k)
    blocks += [block] if block else []
    if len(blocks) > 1:  # as many blocks, of n // b or n // b + 1 columns, where they fit
        b = len(blocks)
        ends = [round(n * (i + 1) / b) for i in range(b)]
        even = [list(range(start, end)) for start, end in zip([0, *ends[:-1]], ends)]
        if all(fits(block) for block in even):
            return even
    return blocks


def repeated(tokens: list[str]) -> set[str]:
    """The tokens that occur more than once: their mentions carry their position."""
    return {t for t, n in Counter(tokens).items() if n > 1}


def fewest_blocks(forms: list[Callable[[list[int]], Table]], n: int, width: int) -> tuple[int, list[list[int]]]:
    """Which of a table's `forms` (each as column_blocks takes it: its full form first, then
    terser ones) to draw, and its blocks: of those whose every block fits `width`, the one of
    the fewest blocks, the fuller on a tie; where none fits, the one of the fewest blocks,
    the terser on a tie (it loses less)."""
    drawn = []
    for k, form in enumerate(forms):
        blocks = column_blocks(form, n, width)
        cut = any(least_width(form(block)) > width for block in blocks if len(block) == 1)  # a wider one fits
        drawn.append(((cut, len(blocks), -k if cut else k), k, blocks))
    _, best, blocks = min(drawn)
    return best, blocks


def blocked(table: Callable[[list[int]], Table], blocks: list[list[int]]) -> list[RenderableType]:
    """The tables of `blocks` (column_blocks'), a blank line between two."""
    parts: list[RenderableType] = []
    for k, block in enumerate(blocks):
        parts += [Text()] * (k > 0) + [table(block)]
    return parts


def top_line(token: str, top: list[dict], repeated: set[str], *, position: int | None = None) -> Packed:
    """"token → other 0.123, ..."; a token among `repeated` carries its position, and the
    line begins with the token's own `position` (dim) where one is given. Each "other 0.123"
    stays on one line: a list longer than the width goes on, indented, below."""

    def name(t: dict) -> str:
        return f"{t['token']}({t['index']})" if t["token"] in repeated else t["token"]

    before = f"{position} " if position is not None else ""
    first = Text(f"{before}{token} → ", style="bold")
    first.stylize(Style(bold=False, dim=True), 0, len(before))
    items = [Text(f"{name(t)} {t['weight']:.3f}") for t in top] or [Text("(no other token)")]
    indent = len(first.plain) - len(first.plain.lstrip(" ")) + 4  # below the token, a step in
    return Packed([*(item + Text(",") for item in items[:-1]), items[-1]], first=first, sep=" ", indent=indent)


def masked_cells(doc: dict, T: int, *, window: bool = True, rows: list[int] | None = None) -> np.ndarray:
    """(T, T) True where the document's mask hides column j from row i: "causal" every j
    after i, "self" j = i, "causal+window" (a decoder's sliding window) also every j the
    document's "window" W or more before i. Without `window`, a window's cells are not
    hidden: what passes through the layers (a rollout) reaches beyond it. `rows`: of those
    rows only (K, T), a strip's."""
    parts = (doc.get("mask") or "none").split("+")
    i, j = np.meshgrid(np.arange(T) if rows is None else np.asarray(rows, dtype=int), np.arange(T), indexing="ij")
    hidden = np.zeros(i.shape, dtype=bool)
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


def quantized(m: dict) -> str:
    """A GGUF model's quantization, as the header says it: ", Q4_K_M (Q4_K 96, Q6_K 13, F32 65 tensors)"."""
    q = m.get("quantization")
    if q is None:
        return ""
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(q["tensors"].items(), key=lambda item: -item[1]))
    return f", {q.get('file_type', q['type'])} ({kinds} tensors)"
