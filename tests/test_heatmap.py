"""The heatmap grid on an ordinary terminal: its layout decided once from the width, a number
in every cell, each the document's value at the precision shown; and scores' table at any
width: words or positions as labels, --max-tokens, top lines where no grid fits.

The grids are read back from the text rich writes (tests/grids.py): a row its label and one
number a column; the column labels above, across or written downwards.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from rich.console import Console

from clirunner import one, run
from grids import check_weights, column_labels, grid, grids, longest_line
from helpers import FORTY, FRUIT, SENTENCE_TOKENS, TWENTY, flat
from attncli.documents.sentence import scores_doc
from attncli.views import heatmap, sentence

# 32 tokens
THIRTY_TWO = ("When the old ship finally reached the harbour after a long and stormy night at sea the tired sailors "
              "cheered loudly together with their families and all the friends who had waited")
# 9 long words: their names as column labels do not fit 120 columns, their positions do
LONG9 = ("government information development international environment responsibility organization relationship "
         "particularly")
# distinct words, some long, to cut sentences of any length from
WORDS = ("administration the responsibility of international government information development environment "
         "organization relationship particularly contemporary neighbourhood photographers manufacturers "
         "championships infrastructure investigation headquarters entertainment "
         "a cat sat on mats near old houses where children play games under tall green trees during warm "
         "summer days with friends from school after lunch").split()


def draw(view, doc: dict, width: int, **kw) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(view(doc, width=width, **kw))
    return out.getvalue()


def scores_cells_match(rows: list[list[str]], scores, reading: str) -> None:
    """Each cell of a grid of raw scores is its score at the precision the caption gives."""
    factor = {"cells: ω, rounded": 1.0, "cells: ω × 10, rounded": 10.0, "cells: ω / 10, rounded": 0.1}[reading]
    for cells, row in zip(rows, scores):
        for cell, s in zip(cells, row):
            assert abs(int(cell) - s * factor) <= 0.5 + 1e-9, (cell, s, reading)


# --------------------------------------------------------------------------- the goal: whole grids


def test_twenty_tokens_at_80_columns_through_the_cli():
    doc = one(run("scores", TWENTY, "--json"))
    tokens = doc["tokens"]
    assert len(tokens) == 20
    result = run("scores", TWENTY, "--format", "table", env={"COLUMNS": "80"})
    assert result.exit_code == 0 and result.stderr == ""
    text = result.stdout
    assert longest_line(text) <= 80
    rows = grid(text, tokens)
    assert len(rows) == 20 and all(len(r) == 20 for r in rows)  # T rows of T numbers
    check_weights(rows, doc["weights"])  # each the document's weight, to 0.005
    assert column_labels(text, tokens) == tokens  # written downwards, whole
    assert "cells: α × 100, rounded" in text
    assert "too many" not in text


def test_twenty_tokens_at_80_columns_in_a_console(glove):
    doc = scores_doc(TWENTY, glove)
    text = draw(sentence.scores_view, doc, 80)
    assert longest_line(text) <= 80
    check_weights(grid(text, doc["tokens"]), doc["weights"])


@pytest.mark.parametrize("T, width", [(T, 80) for T in (8, 9, 10, 14, 20)] + [(T, 120) for T in (21, 27, 32)])
def test_every_sentence_of_up_to_20_tokens_at_80_columns_and_32_at_120(glove, T, width):
    """Long words first, so that the row labels take what they can: the grid still fits."""
    doc = scores_doc(" ".join(WORDS[:T]), glove)
    tokens = doc["tokens"]
    assert len(tokens) == T and doc["oov"] == []
    text = draw(sentence.scores_view, doc, width)
    assert longest_line(text) <= width
    labels = tokens if grids(text, tokens) else [str(i) for i in range(T)]
    check_weights(grid(text, labels), doc["weights"])
    assert "too many" not in text


def test_thirty_two_tokens_at_120_columns_through_the_cli():
    doc = one(run("scores", THIRTY_TWO, "--json"))
    assert len(doc["tokens"]) == 32
    text = run("scores", THIRTY_TWO, "--format", "table", env={"COLUMNS": "120"}).stdout
    assert longest_line(text) <= 120
    check_weights(grid(text, doc["tokens"]), doc["weights"])
    # at 80 columns, 32 tokens are too many even by position (2 + 32 x 3 = 98): the top-k list
    narrow = run("scores", THIRTY_TWO, "--format", "table", env={"COLUMNS": "80"}).stdout
    assert "32 tokens are too many for a 32 x 32 grid in 80 columns" in " ".join(narrow.split())
    assert len([line for line in narrow.splitlines() if "→" in line]) == 32


# --------------------------------------------------------------------------- one place decides


def test_plan_decides_the_layout_from_the_width():
    tokens = ["the", "earth", "is"]
    # across, every column as wide as the widest token and its gap: 5 + 3 x 6
    assert heatmap.plan(tokens, 2, 23) == heatmap.Layout("across", (6, 6, 6), 5)
    # a column less: each as wide as its own token, at least a number
    assert heatmap.plan(tokens, 2, 22) == heatmap.Layout("across", (4, 6, 3), 5)
    # then written downwards, 3 a column
    assert heatmap.plan(tokens, 2, 17) == heatmap.Layout("down", (3, 3, 3), 5)
    assert heatmap.plan(tokens, 2, 14) == heatmap.Layout("down", (3, 3, 3), 5)
    # then by position, the labels one digit
    assert heatmap.plan(tokens, 2, 13) == heatmap.Layout("positions", (3, 3, 3), 1)
    assert heatmap.plan(tokens, 2, 10) == heatmap.Layout("positions", (3, 3, 3), 1)
    assert heatmap.plan(tokens, 2, 9) is None
    # 20 tokens of up to 20 letters at 80 columns: named rows; longer, by position
    assert heatmap.plan(["w" * 20] * 20, 2, 80).columns == "down"
    assert heatmap.plan(["w" * 21] * 20, 2, 80).columns == "positions"
    assert heatmap.plan(["www"] * 26, 2, 80).columns == "positions"  # 2 + 26 x 3 = 80
    assert heatmap.plan(["www"] * 27, 2, 80) is None


def test_a_token_longer_than_the_header_ends_in_an_ellipsis(glove):
    tokens = ["responsibility", "cat"]
    layout = heatmap.plan(tokens, 2, 20)
    assert layout.columns == "down"
    lines = [line.plain for line in heatmap.header(tokens, layout)]
    assert len(lines) == heatmap.DOWN_LINES
    assert column_labels("\n".join(lines + ["responsibility 01 02", "cat            03 04"]), tokens) == [
        "responsibil…", "cat"]


# --------------------------------------------------------------------------- numbers


def test_weights_are_two_digits_and_1_fits_where_there_is_room():
    numbers = heatmap.Numbers.for_weights()
    assert [numbers.text(w) for w in (0.0, 0.004, 0.006, 0.34, 0.994, 0.996, 1.0)] == [
        "00", "00", "01", "34", "99", "1.", "1."]
    roomy = heatmap.Numbers(-2, 3, True)
    assert roomy.text(1.0) == "100" and roomy.text(0.34) == "34"
    assert numbers.reading("α", 0.61) == "cells: α × 100, rounded"
    assert numbers.reading("α", 1.0) == "cells: α × 100, rounded; 1. is 1"


@pytest.mark.parametrize("values, most, exponent, texts", [
    ([6.35, 27.56], None, 0, ["6", "28"]),
    ([-3.1, 12.0], None, 0, ["-3", "12"]),
    ([-12.3, 27.6], None, 0, ["-12", "28"]),
    ([-12.3, 27.6], 2, 1, ["-1", "3"]),
    ([0.9, 3.9], None, -1, ["9", "39"]),
    ([-0.0123, 0.05], None, -3, ["-12", "50"]),
    ([99.4, 1.0], None, 0, ["99", "1"]),
    ([99.6, 1.0], None, 1, ["10", "0"]),
    ([1234.0, -5.0], None, 2, ["12", "0"]),
    ([0.0, 0.0], None, 0, ["0", "0"]),
])
def test_scores_are_two_significant_digits(values, most, exponent, texts):
    numbers = heatmap.Numbers.for_scores(np.array(values), most=most)
    assert numbers.exponent == exponent
    assert [numbers.text(v) for v in values] == texts
    assert numbers.width == max(map(len, texts))
    for v, t in zip(values, texts):
        assert abs(numbers.value(t) - v) <= 0.5 * 10.0**exponent + 1e-12


def test_negative_scores_of_two_digits_still_fit_20_tokens_at_80_columns():
    tokens = [f"w{j}" for j in range(20)]
    M = np.linspace(-12.0, 27.0, 400).reshape(20, 20)
    heat = heatmap.Heatmap(tokens, [M], np.zeros((20, 20), dtype=bool), signed=True, width=80, color_system=None)
    assert heat.fits and heat.numbers.exponent == 1 and heat.numbers.width == 2
    assert heat.reading("ω") == "cells: ω / 10, rounded"
    text = "\n".join(line.plain for line in heat.grid(M))
    assert longest_line(text) <= 80
    scores_cells_match(grid(text, tokens), M, "cells: ω / 10, rounded")
    # with room, the precise form: one digit more
    wide = heatmap.Heatmap(tokens, [M], np.zeros((20, 20), dtype=bool), signed=True, width=120, color_system=None)
    assert wide.numbers.exponent == 0 and wide.numbers.width == 3


# --------------------------------------------------------------------------- --raw, --heads, explain


def test_raw_scores_grid_at_80_columns(glove):
    doc = scores_doc(TWENTY, glove)
    text = draw(sentence.scores_view, doc, 80, raw=True)
    assert longest_line(text) <= 80
    reading = "cells: ω, rounded"
    assert reading in text
    scores_cells_match(grid(text, doc["tokens"]), doc["scores"], reading)


def test_each_head_gets_its_grid_at_80_columns():
    args = ("scores", TWENTY, "--qkv", "random", "--heads", "2", "--scale", "40")
    doc = one(run(*args, "--json"))
    text = run(*args, "--format", "table", env={"COLUMNS": "80"}).stdout
    assert longest_line(text) <= 80
    mean, *heads = grids(text, doc["tokens"])
    check_weights(mean, doc["weights"])
    assert len(heads) == 2
    for rows, head in zip(heads, doc["heads"]):
        check_weights(rows, head["weights"])
    assert "head 1" in text and "head 2" in text and "head 0" not in text  # from 1, as --head counts


def test_explain_matrices_at_80_columns():
    doc = one(run("explain", TWENTY, "--json"))
    text = run("explain", TWENTY, "--format", "table", env={"COLUMNS": "80"}).stdout
    assert longest_line(text) <= 80
    tokens = doc["tokens"]
    step3 = text[text.index("3. raw scores"):text.index("4. scaled")]
    scores_cells_match(grid(step3, tokens, panel=True), doc["steps"]["scores"][0], "cells: ω, rounded")
    step5 = text[text.index("5. weights"):text.index("6. context")]
    check_weights(grid(step5, tokens, panel=True), doc["steps"]["weights"][0])


# --------------------------------------------------------------------------- a cut grid


def test_a_cut_grid_says_what_its_rows_sum_to(glove):
    doc = scores_doc("The earth is like an orange", glove)
    text = " ".join(draw(sentence.scores_view, doc, 80, max_tokens=3).split())
    shown = np.array(doc["weights"])[:3, :3].sum(axis=1)
    assert np.all(shown < 0.9)  # what the grid shows of a row is well short of 1
    assert "each row sums to 1;" not in text
    assert "each row sums to 1 over all 6 columns, of which the first 3 are shown" in text
    full = " ".join(draw(sentence.scores_view, doc, 80).split())
    assert "each row sums to 1;" in full


# --------------------------------------------------------------------------- tables by width


@pytest.mark.parametrize("width", [80, 200])
def test_six_tokens_show_their_names_as_columns(glove, width):
    doc = scores_doc(FRUIT, glove)
    text = draw(sentence.scores_view, doc, width)
    assert longest_line(text) <= width
    assert column_labels(text, SENTENCE_TOKENS) == SENTENCE_TOKENS
    check_weights(grid(text, SENTENCE_TOKENS), doc["weights"])
    assert "too many" not in text and "columns by position" not in text


def test_forty_tokens_give_top_lines_not_a_grid_at_80_columns(glove):
    doc = scores_doc(FORTY, glove)
    tokens = doc["tokens"]
    assert len(tokens) == 40 and len(set(tokens)) == 40 and doc["oov"] == []
    text = draw(sentence.scores_view, doc, 80)
    assert longest_line(text) <= 80
    assert grids(text, tokens) == [] and grids(text, [str(i) for i in range(40)]) == []  # no grid at all
    assert "40 tokens are too many for a 40 x 40 grid in 80 columns" in flat(text)
    tops = [line for line in text.splitlines() if "→" in line]
    assert len(tops) == 40
    for i, (line, token, top) in enumerate(zip(tops, tokens, doc["top"])):
        assert line.startswith(f"{i} {token} → "), line
        assert line.rstrip().endswith(", ".join(f"{t['token']} {t['weight']:.3f}" for t in top))


def test_forty_tokens_get_their_grid_at_200_columns(glove):
    doc = scores_doc(FORTY, glove)
    text = draw(sentence.scores_view, doc, 200)
    assert longest_line(text) <= 200
    assert column_labels(text, doc["tokens"]) == doc["tokens"]  # written downwards
    check_weights(grid(text, doc["tokens"]), doc["weights"])
    assert "too many" not in text


def test_long_words_get_rows_and_columns_by_position(glove):
    doc = scores_doc(LONG9, glove)
    tokens = doc["tokens"]
    assert len(tokens) == 9
    # the widest word and 9 columns of 3 need 41 columns; their positions 1 + 27
    width = 40
    text = draw(sentence.scores_view, doc, width)
    assert longest_line(text) <= width
    positions = [str(j) for j in range(9)]
    assert column_labels(text, positions) == positions
    check_weights(grid(text, positions), doc["weights"])
    assert all(f"{j} {t}" in flat(text) for j, t in enumerate(tokens))  # the key
    assert "too many" not in text
    # one column more and the words label the rows, the columns their words written downwards
    text = draw(sentence.scores_view, doc, 41)
    assert column_labels(text, tokens) == [t[:11] + "…" if len(t) > 12 else t for t in tokens]
    check_weights(grid(text, tokens), doc["weights"])


def test_a_grid_that_fits_is_drawn(glove):
    doc = scores_doc("The earth is like a big orange", glove)
    tokens = doc["tokens"]
    text = draw(sentence.scores_view, doc, 80)
    assert column_labels(text, tokens) == tokens
    check_weights(grid(text, tokens), doc["weights"])


def test_max_tokens_caps_the_view_function(glove):
    doc = scores_doc(FORTY, glove)
    text = draw(sentence.scores_view, doc, 200, max_tokens=5)
    assert longest_line(text) <= 200
    five = doc["tokens"][:5]
    assert column_labels(text, five) == five
    check_weights(grid(text, five), [row[:5] for row in doc["weights"][:5]])
    assert "the grid shows the first 5 of 40 tokens" in flat(text)
    assert len([line for line in text.splitlines() if "→" in line]) == 40


def test_max_tokens_on_the_command_line():
    full = one(run("scores", FORTY, "--json"))
    assert len(full["tokens"]) == 40
    assert one(run("scores", FORTY, "--max-tokens", 5, "--json")) == full  # JSON is never abridged
    assert np.array(full["weights"]).shape == (40, 40)
    result = run("scores", FORTY, "--max-tokens", 5, "--format", "table")
    assert result.exit_code == 0 and result.stderr == ""
    table = result.stdout
    assert longest_line(table) <= 200
    five = full["tokens"][:5]
    assert column_labels(table, five) == five
    check_weights(grid(table, five), [row[:5] for row in full["weights"][:5]])
    assert "first 5 of 40 tokens (--max-tokens); JSON holds them all" in flat(table)
    # under the cap, nothing is said
    small = run("scores", FRUIT, "--max-tokens", 6, "--format", "table")
    assert small.exit_code == 0 and "--max-tokens" not in small.stdout
    assert column_labels(small.stdout, SENTENCE_TOKENS) == SENTENCE_TOKENS


def test_scores_table_at_80_columns_fits():
    result = run("scores", FORTY, "--format", "table", env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert longest_line(result.stdout) <= 80
    assert "40 tokens are too many" in flat(result.stdout)


# --------------------------------------------------------------------------- the key below a grid by position

# 24 distinct words: at 80 columns explain's grids (76 inside a panel) are laid out by position
TWENTY_FOUR = ("the cat sat on a mat while dog was sleeping under old wooden table near warm quiet fire burning "
               "bright in house of my")


def key_pairs(lines: list[str]) -> list[list[str]]:
    """Each line of a key split into its "position token" pairs (three spaces apart)."""
    return [line.strip().split("   ") for line in lines]


def check_key(lines: list[str], tokens: list[str], width: int) -> None:
    """Every line within `width`, made of whole "j token" pairs, the pairs those of `tokens` in order."""
    assert all(len(line.rstrip()) <= width for line in lines), lines
    pairs = [pair for line in key_pairs(lines) for pair in line]
    assert pairs == [f"{j} {t}" for j, t in enumerate(tokens)], lines
    for line in key_pairs(lines):  # a line neither ends in a bare position nor begins with a bare token
        assert all(re.fullmatch(r"\d+ \S+", pair) for pair in line), line


@pytest.mark.parametrize("width", [20, 40, 80, 100, 120, 200])
def test_the_key_keeps_each_position_beside_its_token(width):
    tokens = WORDS[:60]
    lines = [line.plain for line in heatmap.key(tokens, width)]
    assert len(lines) > 1
    check_key(lines, tokens, width)
    # as full as a line can be: the next line's first pair would not have fitted on it
    for line, after in zip(key_pairs(lines), key_pairs(lines)[1:]):
        assert len("   ".join([*line, after[0]])) > width


def test_a_key_of_more_than_twenty_tokens_at_80_columns_through_explain():
    doc = one(run("explain", TWENTY_FOUR, "--json"))
    tokens = doc["tokens"]
    assert len(tokens) == 24
    text = run("explain", TWENTY_FOUR, "--format", "table", env={"COLUMNS": "80"}).stdout
    assert longest_line(text) <= 80
    lines = [line.strip().strip("│").strip() for line in text.splitlines()]
    starts = [k for k, line in enumerate(lines) if line.startswith("0 the   1 cat")]
    assert len(starts) == 3  # under the grids of steps 3, 4 and 5
    for k in starts:
        end = next(e for e in range(k, len(lines)) if lines[e].startswith("cells:"))
        check_key(lines[k:end], tokens, 76)
