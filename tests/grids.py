"""Reading the heatmap grids a table view prints: rows of numbers under their labels."""

from __future__ import annotations

import re

from rich.cells import cell_len

CELL = re.compile(r"-?\d+|1\.|·")  # a number as a grid shows it, or a masked cell


def _row(line: str, label: str, T: int) -> list[str] | None:
    """The cells of a grid row carrying `label`, or None when `line` is not one."""
    fields = line.split()
    if len(fields) != T + 1 or fields[0] != label or not all(CELL.fullmatch(f) for f in fields[1:]):
        return None
    return fields[1:]


def grids(text: str, labels: list[str], *, panel: bool = False) -> list[list[list[str]]]:
    """Every grid in `text` whose rows carry `labels` in order (a row: its label, then one
    cell a column, apart by spaces): a list of rows of cells for each. `panel`: the lines
    are inside a box (explain's panels), whose edges are dropped first."""
    T = len(labels)
    lines = text.splitlines()
    if panel:
        lines = [line.strip().strip("│").rstrip() for line in lines]
    found, k = [], 0
    while k + T <= len(lines):
        rows = []
        for i, label in enumerate(labels):
            cells = _row(lines[k + i], label, T)
            if cells is None:
                break
            rows.append(cells)
        if len(rows) == T:
            found.append(rows)
            k += T
        else:
            k += 1
    return found


def grid(text: str, labels: list[str], **kw) -> list[list[str]]:
    """The one grid whose rows carry `labels`."""
    found = grids(text, labels, **kw)
    assert len(found) == 1, (len(found), text)
    return found[0]


def weight(cell: str) -> float:
    """A weight as a grid cell shows it: α × 100 rounded, "1." or "100" for 1."""
    assert re.fullmatch(r"\d\d|1\.|100", cell), cell
    return 1.0 if cell in ("1.", "100") else int(cell) / 100


def check_weights(rows: list[list[str]], weights, masked=None) -> None:
    """Each cell is its weight at the precision shown (half a unit of 0.01), or "·" where masked."""
    for i, (cells, row) in enumerate(zip(rows, weights)):
        assert len(cells) == len(row)
        for j, (cell, w) in enumerate(zip(cells, row)):
            if masked is not None and masked[i][j]:
                assert cell == "·", (i, j, cell)
            else:
                assert abs(weight(cell) - w) <= 0.005 + 1e-12, (i, j, cell, w)


def longest_line(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def column_labels(text: str, labels: list[str]) -> list[str]:
    """The column labels above the grid whose rows carry `labels`: each run of characters on
    the lines above that ends where a column's cells end belongs to that column, read top
    down (a token across the top, or written downwards a character a line)."""
    lines = text.splitlines()
    T = len(labels)
    first = next(k for k in range(len(lines) - T + 1)
                 if all(_row(lines[k + i], label, T) is not None for i, label in enumerate(labels)))
    row = lines[first]
    ends = [m.end() for m in re.finditer(r"\S+", row)][1:]  # where each cell ends, the label's left out
    pieces: list[list[str]] = [[] for _ in ends]
    for line in reversed(lines[:first]):
        runs = [(m.end(), m.group()) for m in re.finditer(r"\S+", line)]
        if not runs or any(end not in ends for end, _ in runs):
            break
        for end, piece in runs:
            pieces[ends.index(end)].insert(0, piece)
    return ["".join(p) for p in pieces]
