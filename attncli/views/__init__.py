"""Documents drawn for people: a module per family of commands (rich tables for a terminal),
the compact heatmap, the SVG, HTML and PNG pictures, and every JSON writer. A view knows no
files and computes nothing of the attention: it draws the documents that documents/ and mixing/ make.

Every view is drawn from the same document the JSON carries, so what a table shows is
exactly what `--format json` prints. Each view takes the width it may fill and the colour
system of the console it is drawn on (rich's Console.color_system, None where there is no
colour), to choose its colours for it.
"""

from __future__ import annotations

import importlib

# the view each command names (emit's `view`): the module of views/ that draws it
VIEWS = {
    "scores_view": "sentence", "context_view": "sentence", "compare_view": "sentence",
    "neighbors_view": "sentence", "explain_view": "sentence", "heads_view": "sentence",
    "rows_view": "sentence",
    "contributions_view": "mixing", "quantization_view": "drift", "generate_view": "generation",
    "stats_view": "corpus", "faithfulness_view": "corpus",
    "rnn_view": "training", "train_view": "training",
    "info_view": "vectors", "entries_view": "vectors", "verified_view": "vectors", "cleared_view": "vectors",
}


def view(name: str):
    """The function that draws the documents of the view `name`. Its module is imported
    now, not with this package: rich costs a tenth of a run's start-up, which JSON output,
    written by views.json, need not pay."""
    return getattr(importlib.import_module(f"attncli.views.{VIEWS[name]}"), name)
