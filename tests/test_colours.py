"""Colours a person can read, in every colour mode: the contrast of each cell's text with its
background, computed from the escape codes rich writes (256 and 16 colour indices mapped to
RGB with rich's own palettes, WCAG 2 relative luminance); the legend's steps against the
cells; and no colour legend where there is no colour.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from rich._palettes import EIGHT_BIT_PALETTE, STANDARD_PALETTE
from rich.console import Console

from clirunner import run
from grids import grid
from helpers import FRUIT, SENTENCE_TOKENS
from attncli.documents.sentence import scores_doc
from attncli.encoder import Options
from attncli.views import heatmap, sentence

MODES = ["truecolor", "256", "standard"]

SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _colour(params: list[int], k: int) -> tuple[tuple, int]:
    """The colour that the parameters at k (38 or 48) start, and the index after them."""
    if params[k + 1] == 5:
        return ("index", params[k + 2]), k + 3
    return ("rgb", tuple(params[k + 2:k + 5])), k + 5


def runs(text: str) -> list[list[tuple[str, tuple | None, tuple | None]]]:
    """Each line of `text` as runs of (characters, foreground, background), from the SGR
    codes rich writes; a colour is ("rgb", (r, g, b)) or ("index", n)."""
    lines, fg, bg = [], None, None
    for line in text.split("\n"):
        out, pos = [], 0
        for m in SGR.finditer(line):
            if m.start() > pos:
                out.append((line[pos:m.start()], fg, bg))
            pos = m.end()
            params = [int(p) for p in m.group(1).split(";") if p] or [0]
            k = 0
            while k < len(params):
                p = params[k]
                if p == 0:
                    fg = bg = None
                elif p in (38, 48):
                    colour, k = _colour(params, k)
                    fg, bg = (colour, bg) if p == 38 else (fg, colour)
                    continue
                elif 30 <= p <= 37 or 90 <= p <= 97:
                    fg = ("index", p - 30 if p < 90 else p - 82)
                elif 40 <= p <= 47 or 100 <= p <= 107:
                    bg = ("index", p - 40 if p < 100 else p - 92)
                elif p == 39:
                    fg = None
                elif p == 49:
                    bg = None
                k += 1
        if pos < len(line):
            out.append((line[pos:], fg, bg))
        lines.append(out)
    return lines


def rgb(colour: tuple) -> tuple[int, int, int]:
    kind, value = colour
    if kind == "rgb":
        return value
    return tuple(STANDARD_PALETTE[value] if value < 16 else EIGHT_BIT_PALETTE[value])


def luminance(c) -> float:
    """WCAG 2 relative luminance, written out again here."""
    def linear(v):
        v /= 255
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(float(v)) for v in c)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def drawn(doc: dict, color_system: str | None, width: int = 100, **kw) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=color_system, force_terminal=color_system is not None,
                      markup=False, highlight=False)
    console.print(sentence.scores_view(doc, width=width, color_system=color_system, **kw))
    return out.getvalue()


def grid_cells(text: str, labels: list[str]) -> list[list[tuple[str, tuple]]]:
    """The grid rows carrying `labels`: each cell's number and background."""
    rows = []
    for line in runs(text):
        plain = "".join(t for t, _, _ in line)
        fields = plain.split()
        if len(rows) < len(labels) and fields and fields[0] == labels[len(rows)]:
            cells = [(t.strip(), bg) for t, _, bg in line if bg is not None]
            if len(cells) == len(labels):
                rows.append(cells)
                continue
        if rows and len(rows) < len(labels):
            rows = []
    assert len(rows) == len(labels), text
    return rows


def legend_steps(text: str) -> list[tuple[str, tuple]]:
    """The legend's steps: each its number and background, in order."""
    for line in runs(text):
        plain = "".join(t for t, _, _ in line)
        if " by colour: " in plain:
            return [(t.strip(), bg) for t, _, bg in line if bg is not None]
    raise AssertionError("no legend")


@pytest.fixture(scope="module")
def docs(glove):
    return {
        "fruit": scores_doc(FRUIT, glove),
        "random": scores_doc(FRUIT, glove, Options(qkv="random", seed=3, scale=30.0)),
        "causal": scores_doc(FRUIT, glove, Options(mask="causal", scale=0.5)),
    }


# --------------------------------------------------------------------------- contrast


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["fruit", "random", "causal"])
@pytest.mark.parametrize("raw", [False, True])
def test_every_cell_and_legend_step_meets_wcag_aa(docs, mode, name, raw):
    text = drawn(docs[name], mode, raw=raw)
    coloured = [(t, fg, bg) for line in runs(text) for t, fg, bg in line if bg is not None and t.strip()]
    assert len(coloured) >= 21 + 2  # the unmasked cells and the legend's steps at least
    for t, fg, bg in coloured:
        assert fg is not None, t
        ratio = contrast(rgb(fg), rgb(bg))
        assert ratio >= 4.5, (mode, t, fg, bg, ratio)


def test_the_scales_meet_aa_in_every_mode_with_either_text_colour_they_pick():
    for mode in MODES:
        for scale in (heatmap.sequential(1.0, mode), heatmap.diverging(-1.0, 1.0, mode)):
            for s, colour in enumerate(scale.colours):
                bg, fg = heatmap.rgb_of(colour, mode), heatmap.rgb_of(scale.text[s], mode)
                assert contrast(fg, bg) >= 4.5, (mode, s, bg, fg)


# --------------------------------------------------------------------------- 256 colours


def test_256_colour_legend_steps_are_distinct_ordered_by_lightness_and_are_the_cells_colours(docs):
    doc = docs["fruit"]
    text = drawn(doc, "256")
    steps = legend_steps(text)
    colours = [bg for _, bg in steps]
    assert len(steps) >= 8 and all(kind == "index" and n >= 16 for kind, n in colours)
    assert len(set(colours)) == len(colours)
    lightness = [luminance(rgb(c)) for c in colours]
    assert lightness == sorted(lightness) and len(set(lightness)) == len(lightness)
    cells = grid_cells(text, SENTENCE_TOKENS)
    weights = np.array(doc["weights"])
    order = []
    for i, row in enumerate(cells):
        for j, (number, bg) in enumerate(row):
            assert bg in colours, (number, bg)  # a legend step's colour, exactly
            order.append((weights[i, j], colours.index(bg)))
    order.sort()
    steps_by_value = [s for _, s in order]
    assert steps_by_value == sorted(steps_by_value)  # a larger weight never gets an earlier step
    assert steps_by_value[0] == 0 and steps_by_value[-1] == len(colours) - 1
    # the middle of the weights no longer share one colour: 0.092 and 0.200 differ
    colour_of = {f"{weights[i, j]:.3f}": cells[i][j][1] for i in range(6) for j in range(6)}
    assert colour_of["0.092"] != colour_of["0.200"]
    assert len({bg for row in cells for _, bg in row}) >= 6


def test_the_256_colour_ladders_are_distinct_and_ordered():
    seq = [luminance(EIGHT_BIT_PALETTE[n]) for n in heatmap.SEQUENTIAL_256]
    assert len(set(heatmap.SEQUENTIAL_256)) == len(seq) >= 8 and seq == sorted(seq)
    div = [luminance(EIGHT_BIT_PALETTE[n]) for n in heatmap.DIVERGING_256]
    half = len(div) // 2
    assert len(set(heatmap.DIVERGING_256)) == len(div)
    assert div[:half] == sorted(div[:half]) and div[half:] == sorted(div[half:], reverse=True)  # light at 0


def test_the_cli_on_a_256_colour_terminal_uses_the_ladder():
    result = run("scores", FRUIT, "--format", "table", env={"FORCE_COLOR": "1", "TERM": "xterm-256color",
                                                            "COLORTERM": None})
    assert result.exit_code == 0
    used = {bg[1] for line in runs(result.stdout) for _, _, bg in line if bg is not None}
    assert used and used <= set(heatmap.SEQUENTIAL_256)
    assert len(used) >= 6


# --------------------------------------------------------------------------- 16 colours


def test_16_colours_say_their_shades_are_coarse(docs):
    text = drawn(docs["fruit"], "standard")
    assert "16 colours: the shades are coarse" in " ".join(text.split())
    steps = legend_steps(text)
    assert len({bg for _, bg in steps}) == len(steps) >= 4
    # piped with FORCE_COLOR=1 and no TERM, rich draws 16 colours: the same ladder, several shades
    result = run("scores", FRUIT, "--format", "table", env={"FORCE_COLOR": "1", "TERM": None, "COLORTERM": None})
    used = {bg for line in runs(result.stdout) for _, _, bg in line if bg is not None}
    assert len(used) >= 4 and all(n < 16 for _, n in used)


# --------------------------------------------------------------------------- no colour


@pytest.mark.parametrize("args, env", [
    ([], {"NO_COLOR": "1", "FORCE_COLOR": "1"}),
    (["--no-color"], {"FORCE_COLOR": "1"}),
    ([], {"TERM": "dumb", "FORCE_COLOR": "1"}),
    ([], {}),  # a pipe
])
def test_no_colour_no_colour_legend(args, env):
    for raw in ([], ["--raw"]):
        result = run("scores", FRUIT, "--format", "table", *args, *raw, env=env)
        assert result.exit_code == 0, result.stderr
        text = result.stdout
        assert not [bg for line in runs(text) for _, _, bg in line if bg is not None]
        assert "by colour" not in text and "▁" not in text and "█" not in text  # no shading to explain
        assert "cells: " in text  # the numbers are still explained
        assert grid(SGR.sub("", text), SENTENCE_TOKENS)


# --------------------------------------------------------------------------- --raw


def test_raw_legend_spans_the_scores_there_are(docs):
    doc = docs["fruit"]
    scores = np.array(doc["scores"])
    assert scores.min() > 0  # every score of these raw vectors is positive
    for mode in MODES:
        steps = legend_steps(drawn(doc, mode, raw=True))
        numbers = [int(t) for t, _ in steps]
        assert numbers[0] == round(scores.min()) and all(n >= 0 for n in numbers)  # no unused half below 0
        text = " ".join(drawn(doc, mode, raw=True).split())
        assert f"to {round(scores.max())}" in text


@pytest.mark.parametrize("mode", ["256", "truecolor"])
def test_raw_scale_is_centred_on_0(docs, mode):
    doc = docs["random"]
    scores = np.array(doc["scores"])
    assert scores.min() < 0 < scores.max()
    text = drawn(doc, mode, raw=True)
    cells = grid_cells(text, SENTENCE_TOKENS)
    scale = heatmap.diverging(float(scores.min()), float(scores.max()), mode)
    half = len(scale.colours) // 2
    m = float(np.abs(scores).max())
    np.testing.assert_allclose(scale.edges, np.linspace(-m, m, len(scale.colours) + 1))
    colours = [("index", c.number) if mode == "256" else ("rgb", tuple(c.triplet)) for c in scale.colours]
    for i, row in enumerate(cells):
        for j, (_, bg) in enumerate(row):
            step = colours.index(bg)
            assert (step < half) == (scores[i, j] < 0), (scores[i, j], step)  # blue below 0, red above
    for v in np.linspace(-0.95 * m, 0.95 * m, 11):
        if not np.any(np.isclose(v, scale.edges)):
            assert scale.step(v) + scale.step(-v) == len(scale.colours) - 1  # -v mirrors v
    # scores all 0 (every vector zero): 0's own step, the light middle, not the darkest blue
    flat = heatmap.diverging(0.0, 0.0, mode)
    assert flat.step(0.0) == half


def test_weights_with_heads_share_one_scale(glove):
    doc = scores_doc(FRUIT, glove, Options(qkv="random", heads=2, scale=40.0))
    text = drawn(doc, "256", width=200)
    legend = [bg for _, bg in legend_steps(text)]
    for line in runs(text):
        for t, _, bg in line:
            if bg is not None:
                assert bg in legend, t  # every head's cells on the legend's steps


@pytest.mark.parametrize("color_system", ["truecolor", "256"])
def test_each_legend_label_names_one_colour(glove, color_system):
    """Steps narrower than a cell's rounding (scores from -2.7 to 2.6 in ten steps) get labels
    precise enough to tell them apart, never one label for two colours."""
    doc = scores_doc("The books that the professor recommended during the lecture on medieval history are very "
                     "expensive for most of the students", glove, Options(qkv="random", heads=2))
    steps = legend_steps(drawn(doc, color_system, width=80, raw=True))
    labels = [label for label, _ in steps]
    assert len(steps) >= 8 and len(set(labels)) == len(labels), labels
    assert [float(label) for label in labels] == sorted(float(label) for label in labels)
