"""Heatmaps: a T x T matrix as a compact grid of numbers on colours. Knows rich, no files.

A cell is a short number (two characters, three for a negative score of two digits) on the
colour of its step of the scale; the legend under the grid says how to read the numbers
("cells: α × 100") and, in colour, shows each step. A grid is laid out once, by `plan`,
from the width it may take: the tokens as column labels across the top when they fit,
else written downwards above their columns, else rows and columns by position with a key
below; and when even that cannot fit, no grid (the views list each token's top attended).

Colours are chosen for the console's colour system (rich's `color_system`), never left to
rich's nearest-colour downgrade, which merges neighbouring steps and can make a low value
look more saturated than a middle one:

- truecolor: the anchors of viridis (weights) or RdBu (scores), one colour a step;
- 256 colours: distinct xterm palette entries, one a step, ordered by lightness;
- 16 colours: a short ladder, and the legend says its shades are coarse;
- none (NO_COLOR, --no-color, TERM=dumb, a pipe): numbers alone, and no colour legend.

Each cell's text is black or white, whichever contrasts more with the colour the terminal
is sent (with rich's palettes for 256 and 16 colours): the larger of the two WCAG contrast
ratios is never below sqrt(21), about 4.58, so every cell meets WCAG AA (4.5:1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rich._palettes import EIGHT_BIT_PALETTE, STANDARD_PALETTE, WINDOWS_PALETTE
from rich.cells import cell_len
from rich.color import Color
from rich.style import Style
from rich.text import Text

from attncli.views.common import UNDEFINED, pack

# Colour-blind-safe scales, written out as anchor colours because matplotlib (which has
# them) is too heavy a dependency for 20 numbers. Weights are non-negative: the sequential
# viridis. Raw scores are dot products that can be negative: ColorBrewer's diverging RdBu,
# blue below 0, white at 0, red above.
VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"]
RDBU = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
        "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f"]  # fmt: skip

# The steps of each scale in each colour mode. 256 colours: xterm entries nearest viridis
# (CIE L*a*b*) among those of some chroma, their L* rising at least 3 a step: 21, 28, 40,
# 51, 64, 77, 81, 87. RdBu: 5 blues rising to 0 (L* 40 to 94), 5 reds falling from it
# (89 to 27). 16 colours: magenta, bright blue, cyan, bright green, bright yellow; and
# blue, bright blue, bright red, red.
SEQUENTIAL_256 = (53, 55, 25, 30, 36, 77, 148, 220)
DIVERGING_256 = (25, 32, 74, 153, 255, 224, 216, 173, 167, 88)
SEQUENTIAL_16 = (5, 12, 6, 10, 11)
DIVERGING_16 = (4, 12, 9, 1)
SEQUENTIAL_STEPS, DIVERGING_STEPS = len(SEQUENTIAL_256), len(DIVERGING_256)

# black and white text in each mode: pure black and pure white wherever the palette has them
_TEXT = {"truecolor": (Color.from_rgb(0, 0, 0), Color.from_rgb(255, 255, 255)),
         "256": (Color.from_ansi(16), Color.from_ansi(231)),
         "16": (Color.from_ansi(0), Color.from_ansi(15))}


def mode(color_system: str | None) -> str | None:
    """"truecolor", "256", "16" or None (no colour), from rich's Console.color_system."""
    return {"truecolor": "truecolor", "256": "256", "standard": "16", "windows": "16"}.get(color_system or "")


def _rgb(hex_color: str) -> np.ndarray:
    return np.array([int(hex_color[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)


def color_at(scale: list[str], t: float) -> tuple[int, int, int]:
    """The colour at t in [0, 1] along `scale`, linearly between its anchors."""
    t = min(max(float(t), 0.0), 1.0) * (len(scale) - 1)
    i = min(int(t), len(scale) - 2)
    rgb = _rgb(scale[i]) + (t - i) * (_rgb(scale[i + 1]) - _rgb(scale[i]))
    return tuple(int(round(c)) for c in rgb)


def luminance(rgb) -> float:
    """WCAG 2 relative luminance of an sRGB colour (0-255 a channel)."""
    def linear(c: float) -> float:
        c = c / 255.0
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(float(c)) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b) -> float:
    """WCAG 2 contrast ratio of two sRGB colours, from 1 to 21."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def rgb_of(color: Color, color_system: str | None = None) -> tuple[int, int, int]:
    """The RGB rich's palettes give a colour as a terminal of that system is sent it."""
    if color.triplet is not None:
        return tuple(color.triplet)
    palette = WINDOWS_PALETTE if color_system == "windows" else STANDARD_PALETTE
    return tuple(palette[color.number] if color.number < 16 else EIGHT_BIT_PALETTE[color.number])


class Scale:
    """A value's colour step: `edges` (N + 1 values, rising) bound N steps, step s the
    colour colours[s], its text black or white, whichever contrasts more."""

    def __init__(self, edges: np.ndarray, colours: list[Color], color_system: str | None, *, coarse: bool,
                 middle: int = 0):
        self.edges, self.colours, self.coarse, self.middle = edges, colours, coarse, middle
        backgrounds = [rgb_of(c, color_system) for c in colours]
        black, white = _TEXT[mode(color_system)]
        self.text = [black if contrast(bg, rgb_of(black, color_system)) >= contrast(bg, rgb_of(white, color_system))
                     else white for bg in backgrounds]

    def step(self, value: float) -> int:
        low, high = self.edges[0], self.edges[-1]
        if not high > low:  # every value the same (scores all 0): the scale's middle, 0's own step
            return self.middle
        n = len(self.colours)
        return min(max(int(math.floor((value - low) / (high - low) * n)), 0), n - 1)

    def style(self, step: int) -> Style:
        return Style(color=self.text[step], bgcolor=self.colours[step])


def _colours(kind: str, colour_mode: str) -> list[Color]:
    if colour_mode == "256":
        return [Color.from_ansi(n) for n in (SEQUENTIAL_256 if kind == "sequential" else DIVERGING_256)]
    if colour_mode == "16":
        return [Color.from_ansi(n) for n in (SEQUENTIAL_16 if kind == "sequential" else DIVERGING_16)]
    if kind == "sequential":
        n = SEQUENTIAL_STEPS
        return [Color.from_rgb(*color_at(VIRIDIS, s / (n - 1))) for s in range(n)]
    n = DIVERGING_STEPS
    return [Color.from_rgb(*color_at(RDBU, (s + 0.5) / n)) for s in range(n)]


def sequential(high: float, color_system: str | None) -> Scale | None:
    """Steps from 0 to `high` (weights); None without colour."""
    colour_mode = mode(color_system)
    if colour_mode is None:
        return None
    colours = _colours("sequential", colour_mode)
    return Scale(np.linspace(0.0, max(high, 0.0), len(colours) + 1), colours, color_system, coarse=colour_mode == "16")


def diverging(low: float, high: float, color_system: str | None) -> Scale | None:
    """Steps symmetric around 0, out to the largest magnitude (scores); None without colour."""
    colour_mode = mode(color_system)
    if colour_mode is None:
        return None
    colours = _colours("diverging", colour_mode)
    m = max(abs(low), abs(high))
    return Scale(np.linspace(-m, m, len(colours) + 1), colours, color_system, coarse=colour_mode == "16",
                 middle=len(colours) // 2)


@dataclass(frozen=True)
class Numbers:
    """How a cell writes its value v: round(v / 10**exponent), `width` characters at most.
    Weights: exponent -2 (α × 100), "00" to "99", and for a weight that rounds to 1 "100",
    or "1." where a cell has room for two characters only.
    Scores: the exponent that gives the largest magnitude two digits."""

    exponent: int
    width: int
    weights: bool

    @classmethod
    def for_weights(cls) -> Numbers:
        return cls(-2, 2, True)

    @classmethod
    def for_scores(cls, values: np.ndarray, most: int | None = None) -> Numbers:
        """The largest magnitude in two digits ("-12", "28"); with `most`, in as many
        characters at most, sign included, a digit less where needed ("-1", "3": ω / 10)."""
        finite = values[np.isfinite(values)]
        if not finite.size:
            return cls(0, 1, False)
        m = float(np.abs(finite).max())
        exponent = 0 if m == 0 else math.floor(math.log10(m)) - 1
        while m and abs(round(_scaled(m, exponent))) > 99:  # 99.5 and up round to 100: one digit more
            exponent += 1
        low, high = float(finite.min()), float(finite.max())

        def widest(e: int) -> int:
            probe = cls(e, 0, False)
            return max(len(probe.text(low)), len(probe.text(high)))

        while most is not None and widest(exponent) > most:
            exponent += 1
        return cls(exponent, widest(exponent), False)

    def text(self, value: float) -> str:
        n = int(round(_scaled(value, self.exponent)))
        if self.weights:
            return ("100" if self.width >= 3 else "1.") if n >= 100 else f"{max(n, 0):02d}"
        return str(n)

    def value(self, text: str) -> float:
        """What a cell's text stands for (the inverse of `text`, to its precision)."""
        n = 100 if text == "1." else int(text)
        return n * 10.0**self.exponent if self.exponent < 0 else float(n * 10**self.exponent)

    def reading(self, symbol: str, high: float = 0.0) -> str:
        """How to read the cells, for the caption: "cells: α × 100, rounded"; what "1." is,
        when a value as `high` shows so."""
        if self.exponent == 0:
            factor = ""
        elif self.exponent < 0:
            factor = f" × {10 ** -self.exponent:,}" if self.exponent >= -4 else f" × 1e{-self.exponent}"
        else:
            factor = f" / {10 ** self.exponent:,}" if self.exponent <= 4 else f" / 1e{self.exponent}"
        extra = "; 1. is 1" if self.weights and self.text(high) == "1." else ""
        return f"cells: {symbol}{factor}, rounded{extra}"


def _scaled(value: float, exponent: int) -> float:
    return value * 10**-exponent if exponent <= 0 else value / 10**exponent


@dataclass(frozen=True)
class Layout:
    """Where a grid's parts go: `columns` "across" (each token above its column, the
    column as wide as the token), "down" (each token written downwards above its column)
    or "positions" (rows and columns by position, a key below); each column's width
    (its gap of one space included) and the row labels' width."""

    columns: str
    widths: tuple[int, ...]
    label: int

    @property
    def width(self) -> int:
        return self.label + sum(self.widths)


def plan(tokens: list[str], number_width: int, width: int, labels: list[str] | None = None,
         first: int = 0) -> Layout | None:
    """The one place a grid's layout is decided, from the columns it may take: the tokens
    across the top if they fit (in columns of one width, else each as wide as its token),
    else downwards, else positions; None when nothing fits. `labels`: the rows' own, where
    they are not the tokens (a strip of chosen rows); `first`: the first column's position."""
    T = len(tokens)
    label = max(map(cell_len, tokens if labels is None else labels), default=0)
    even = (max(label, number_width) + 1,) * T  # every column as wide as the widest token
    across = tuple(max(cell_len(t), number_width) + 1 for t in tokens)  # each as wide as its own
    for widths in (even, across):
        if label + sum(widths) <= width:
            return Layout("across", widths, label)
    if label + T * (number_width + 1) <= width:
        return Layout("down", (number_width + 1,) * T, label)
    layout = by_position(T, number_width, first, None if labels is None else label)
    return layout if layout.width <= width else None


def by_position(T: int, number_width: int, first: int = 0, label: int | None = None) -> Layout:
    """Rows and columns by position: the narrowest layout of T tokens, whatever they are
    (the rows labelled `label` wide where they have labels of their own)."""
    position = len(str(first + T - 1))
    return Layout("positions", (max(number_width, position) + 1,) * T, position if label is None else label)


# a token written downwards above its column takes at most this many lines; a longer one
# ends in "…" (its row, below, carries it whole)
DOWN_LINES = 12


def _glyphs(text: str) -> list[str]:
    """The characters of `text`, each with the zero-width marks that follow it."""
    out: list[str] = []
    for c in text:
        if out and cell_len(c) == 0:
            out[-1] += c
        else:
            out.append(c)
    return out


def _right(text: str, width: int) -> str:
    return " " * max(width - cell_len(text), 0) + text


def _left(text: str, width: int) -> str:
    return text + " " * max(width - cell_len(text), 0)


def _line(*parts) -> Text:
    text = Text(no_wrap=True, overflow="crop", end="\n")
    for part, style in parts:
        text.append(part, style=style)
    return text


def header(tokens: list[str], layout: Layout, first: int = 0) -> list[Text]:
    """The column labels above a grid: a line of tokens or positions (the first `first`),
    or the tokens downwards, a character a line."""
    pad = " " * layout.label
    T = len(tokens)
    if layout.columns == "across":
        return [_line((pad + "".join(_right(t, w) for t, w in zip(tokens, layout.widths)), "bold"))]
    if layout.columns == "positions":
        labels = [str(first + j) for j in range(T)]
        return [_line((pad + "".join(_right(t, w) for t, w in zip(labels, layout.widths)), "bold"))]
    columns = []
    for t in tokens:
        glyphs = _glyphs(t)
        if len(glyphs) > DOWN_LINES:
            glyphs = glyphs[: DOWN_LINES - 1] + ["…"]
        columns.append(glyphs)
    lines = []
    for k in range(max(map(len, columns), default=0)):
        row = "".join(_right(g[k] if k < len(g) else "", w) for g, w in zip(columns, layout.widths))
        lines.append(_line(((pad + row).rstrip(), "bold")))
    return lines


def rows(tokens: list[str], M: np.ndarray, masked: np.ndarray, layout: Layout, numbers: Numbers,
         scale: Scale | None, cursor: tuple[int, int] | None = None, labels: list[str] | None = None) -> list[Text]:
    """A grid's rows: the row label (`labels`' where given), then each cell's number
    right-aligned in its column, on its colour (the column's gap included, so the colours
    join); a masked cell "·", and an undefined one (NaN: a share that cannot be computed) a
    dash. A cursor (row, column) is drawn in reverse, its row's label underlined."""
    lines = []
    for i, row in enumerate(M):
        by_position = layout.columns == "positions" and labels is None
        name = labels[i] if labels is not None else str(i) if by_position else tokens[i]
        label = "bold underline reverse" if cursor is not None and cursor[0] == i else "bold"
        line = _line((_right(name, layout.label) if by_position else _left(name, layout.label), label))
        for j, (value, w) in enumerate(zip(row, layout.widths)):
            here = cursor == (i, j)
            if masked[i, j] or math.isnan(value):
                line.append(_right("·" if masked[i, j] else UNDEFINED, w), style="reverse" if here else "dim")
                continue
            text = numbers.text(float(value))
            style = None if scale is None else scale.style(scale.step(float(value)))
            line.append(_right(text, w), style=Style(reverse=True, bold=True) if here else style)
        lines.append(line)
    return lines


def key(tokens: list[str], width: int) -> list[Text]:
    """Positions to tokens, for a grid laid out by position, in lines of `width`: each
    "7 the" whole on its line, never a position at one line's end and its token on the next."""
    lines = pack([Text(f"{j} {t}") for j, t in enumerate(tokens)], width, sep="   ")
    for line in lines:
        line.stylize("dim")
    return lines


def legend(scale: Scale | None, numbers: Numbers, label: str, low: float, high: float) -> Text | None:
    """The colour steps that the values from `low` to `high` fall in, each drawn as a cell
    of that step showing the value where the step (or the values) begin; None without
    colour, where there is no shading to explain."""
    if scale is None:
        return None
    first, last = scale.step(low), scale.step(high)
    starts = [low if s == first else float(scale.edges[s]) for s in range(first, last + 1)]
    labels = _distinct(numbers, [*starts, high])
    width = max(len(t) for t in labels[:-1])
    text = Text(f"{label} by colour: ")
    for s, shown in zip(range(first, last + 1), labels):
        text.append(_right(shown, width + 1) + " ", style=scale.style(s))
    text.append(f" to {labels[-1]}")
    if scale.coarse:
        text.append(" (16 colours: the shades are coarse)")
    return text


def _distinct(numbers: Numbers, values: list[float]) -> list[str]:
    """`values` in the cells' units, as the cells write them where that tells them apart,
    else with as many decimals as it takes (steps narrower than a cell's rounding would
    otherwise show one label for two colours)."""
    labels = [numbers.text(v) for v in values]
    for decimals in range(1, 4):
        if len(set(labels)) == len(labels):
            break
        labels = [f"{_scaled(v, numbers.exponent):.{decimals}f}" for v in values]
    return labels


class Heatmap:
    """Grids of the same tokens (a mean and its heads, say) on one scale and one layout:
    the layout decided once, by `plan`, for `width`."""

    def __init__(self, tokens: list[str], matrices: list[np.ndarray], masked: np.ndarray, *, signed: bool,
                 width: int, color_system: str | None):
        self.tokens, self.masked, self.signed, self.width = tokens, masked, signed, width
        shown = np.concatenate([M[~masked] for M in matrices]) if matrices else np.zeros(0)
        shown = shown[np.isfinite(shown)]
        self.low = float(shown.min()) if shown.size else 0.0
        self.high = float(shown.max()) if shown.size else 0.0
        self.numbers = Numbers.for_scores(shown) if signed else Numbers.for_weights()
        self.scale = (diverging(self.low, self.high, color_system) if signed
                      else sequential(self.high, color_system))
        self.layout = plan(tokens, self.numbers.width, width)
        if self.layout is None and signed and self.numbers.width > 2:
            # a negative score of two digits takes three characters: one digit less, and the grid fits
            self.numbers = Numbers.for_scores(shown, most=2)
            self.layout = plan(tokens, self.numbers.width, width)
        if not signed and self.layout is not None and min(self.layout.widths, default=0) > 3:
            self.numbers = Numbers(-2, 3, True)  # room for "100" beside its gap: no need of "1."

    @property
    def fits(self) -> bool:
        return self.layout is not None

    def grid(self, M: np.ndarray, cursor: tuple[int, int] | None = None) -> list[Text]:
        """Column labels and rows of one matrix (assumes `fits`), a cursor's cell marked."""
        return header(self.tokens, self.layout) + rows(self.tokens, M, self.masked, self.layout, self.numbers,
                                                       self.scale, cursor)

    def strip(self, M: np.ndarray, labels: list[str]) -> list[Text] | None:
        """A strip of chosen rows M (K, T) over every token, its rows labelled `labels`, in
        blocks of columns that each fit the width, a blank line between them (on this
        heatmap's one scale: the masked cells `masked`, (K, T)); None where not one column
        fits beside the labels."""
        lines: list[Text] = []
        start, T = 0, len(self.tokens)
        while start < T:
            n = min(T - start, self.width // 2)  # the most columns from `start` that fit: halved, then stepped
            while n > 0 and plan(self.tokens[start:start + n], self.numbers.width, self.width, labels, start) is None:
                n //= 2
            if n == 0:
                return None
            while (start + n < T
                   and plan(self.tokens[start:start + n + 1], self.numbers.width, self.width, labels, start)):
                n += 1
            cut = slice(start, start + n)
            layout = plan(self.tokens[cut], self.numbers.width, self.width, labels, start)
            lines += [Text()] * bool(lines) + header(self.tokens[cut], layout, start)
            lines += rows(self.tokens[cut], M[:, cut], self.masked[:, cut], layout, self.numbers, self.scale,
                          labels=labels)
            start += n
        return lines

    def key(self) -> list[Text]:
        return key(self.tokens, self.width) if self.layout is not None and self.layout.columns == "positions" else []

    def reading(self, symbol: str) -> str:
        return self.numbers.reading(symbol, self.high)

    def legend(self, label: str) -> list[Text]:
        shown = legend(self.scale, self.numbers, label, self.low, self.high)
        return [shown] if shown is not None else []
