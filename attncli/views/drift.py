"""The view of a `quantization` document (documents/drift.py): the two models, then a
layers x heads grid for each measure (the largest and the mean change of a weight, the
mean and largest Jensen-Shannon divergence of a row), each cell shaded by its value on the
measure's own scale, and the one weight that moved most."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.views.common import quantized
from attncli.views.heatmap import sequential

MEASURES = (("max_abs", "largest |Δα|"), ("mean_abs", "mean |Δα| over the cells a row may attend"),
            ("js_mean", "mean JS divergence of a row (nats)"), ("js_max", "largest JS divergence of a row (nats)"))


def _model(m: dict) -> str:
    return f"{m['name']}{quantized(m) or ', unquantized'}"


def _grid(grid: list[list[float]], title: str, color_system: str | None) -> Table:
    """One measure's layers x heads grid, each number shaded on the grid's own scale."""
    high = max((v for row in grid for v in row), default=0.0)
    scale = sequential(high if high > 0 else 1.0, color_system)
    table = Table(title=Text(title, style="bold"), title_justify="left", box=None, pad_edge=False,
                  padding=(0, 1))
    table.add_column("layer", justify="right", style="dim")
    for h in range(len(grid[0]) if grid else 0):
        table.add_column(f"h{h + 1}", justify="right")
    for l, row in enumerate(grid):
        cells = [Text(f"{v:.2e}", style=scale.style(scale.step(v)) if scale is not None else "") for v in row]
        table.add_row(str(l + 1), *cells)
    return table


def quantization_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    big, overall = doc["largest"], doc["overall"]
    head = Text(f"{doc['sentence']}\n", style="bold")
    head.append(f"model {_model(doc['model'])}\nagainst {_model(doc['against'])}\n", style="dim")
    head.append(f"{len(doc['max_abs'])} layers x {len(doc['max_abs'][0])} heads over {len(doc['tokens'])} pieces; "
                f"every weight: largest |Δα| {overall['max_abs']:.3g}, mean {overall['mean_abs']:.3g}; "
                f"mean JS divergence of a row {overall['js_mean']:.3g} nats", style="dim")
    moved = Text(f"moved most: layer {big['layer']} head {big['head']}, {big['token']} (row {big['row']}) on "
                 f"{big['key']} (column {big['column']}): α {big['weight']:.4f} against {big['against']:.4f}")
    return Group(head, *(_grid(doc[key], title, color_system) for key, title in MEASURES), moved)
