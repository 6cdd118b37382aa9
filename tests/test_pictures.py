"""Pictures of a run: --svg and --html (rich's export of the table, in full colour whatever
stdout is), --png (matplotlib's heatmaps), and the paths they are written to.

SVG is parsed as XML, PNG by its header and IHDR chunk; a picture is written whole or not at
all, with the permissions the umask gives and no temporary file left beside it.
"""

from __future__ import annotations

import os
import re
import struct
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clirunner import fails, ok, one, run
from grids import column_labels
from helpers import COLOUR, FORTY, FRUIT, LUNCH, SENTENCE_TOKENS

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- helpers


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def svg_text(path) -> str:
    """The text an SVG shows (rich writes spaces as no-break spaces)."""
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return "".join(root.itertext()).replace("\xa0", " ")


def leftovers(folder) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")]


@pytest.fixture
def umask_022():
    before = os.umask(0o022)
    yield
    os.umask(before)


# --------------------------------------------------------------------------- --svg and --html


@pytest.mark.parametrize("fmt", [["--json"], ["--format", "table"], []])
def test_svg_and_html_with_any_stdout(tmp_path, fmt):
    svg, html = tmp_path / "scores.svg", tmp_path / "scores.html"
    result = run("scores", FRUIT, "--svg", svg, "--html", html, *fmt)
    assert result.exit_code == 0 and result.stderr == ""
    if fmt == ["--format", "table"]:
        assert column_labels(result.stdout, SENTENCE_TOKENS) == SENTENCE_TOKENS
    else:  # the JSON is untouched by the pictures
        assert one(result) == one(run("scores", FRUIT, "--json"))
    shown = svg_text(svg)
    page = html.read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html")
    for token in SENTENCE_TOKENS:
        assert token in shown and token in page
    assert FRUIT in shown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.html", "scores.svg"]


@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1"}])
def test_the_picture_is_the_same_coloured_one_whatever_stdout_is(tmp_path, env):
    """A table piped (no colour on stdout) or JSON: the SVG is drawn in full colour either way."""
    pictures = {}
    for name, fmt in (("table", ["--format", "table"]), ("json", ["--json"])):
        path = tmp_path / f"{name}.svg"
        assert run("scores", FRUIT, "--svg", path, *fmt, env={"COLUMNS": "100", **env}).exit_code == 0
        pictures[name] = re.sub(r"terminal-\d+", "terminal", path.read_text(encoding="utf-8"))
    assert pictures["table"] == pictures["json"]
    fills = set(re.findall(r'fill="(#[0-9a-f]{6})"', pictures["table"]))
    assert len(fills) >= 8  # the heatmap's steps, not only the window's frame


def test_svg_and_html_of_compare_and_neighbors(tmp_path):
    result = run("compare", FRUIT, COLOUR, "--token", "orange", "--svg", tmp_path / "c.svg", "--html", tmp_path / "c.htm")
    doc = one(result)
    shown = svg_text(tmp_path / "c.svg")
    page = (tmp_path / "c.htm").read_text(encoding="utf-8")
    for word in ["earth", "bright", "color"] + [n["word"] for n in doc["sentences"][0]["token_neighbors"]]:
        assert word in shown and word in page
    doc = one(run("neighbors", "orange", "--neighbors", 4, "--svg", tmp_path / "n.svg"))
    shown = svg_text(tmp_path / "n.svg")
    for n in doc["neighbors"]:
        assert n["word"] in shown and f"{n['cosine']:.3f}" in shown
    assert leftovers(tmp_path) == []


def test_svg_escapes_markup_in_the_sentence(tmp_path):
    sentence = 'AT&T says <b>"hi"</b> & bye'
    result = run("scores", sentence, "--keep-punct", "--svg", tmp_path / "m.svg", "--html", tmp_path / "m.html")
    assert result.exit_code == 0
    shown = svg_text(tmp_path / "m.svg")  # parses as XML
    assert "&" in shown and "<" in shown
    assert "<b>" not in (tmp_path / "m.html").read_text(encoding="utf-8").split("<body>", 1)[-1]


# --------------------------------------------------------------------------- --png


def test_png_sizes_follow_the_tokens(tmp_path):
    six, forty = tmp_path / "six.png", tmp_path / "forty.png"
    assert one(run("scores", FRUIT, "--png", six))["tokens"] == SENTENCE_TOKENS
    ok(run("scores", FORTY, "--png", forty))
    w6, h6 = png_size(six.read_bytes())
    w40, h40 = png_size(forty.read_bytes())
    # 100 dpi; a side of max(4, 0.32 T + 2) inches, at most 16, plus room for the colour bar and titles
    assert (w6, h6) == (550, 600)
    assert (w40, h40) == (1630, 1680)
    assert w40 > 2 * w6 and h40 > 2 * h6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["forty.png", "six.png"]


def test_png_is_the_same_bytes_twice(tmp_path):
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    ok(run("scores", FRUIT, "--png", first))
    table = run("scores", FRUIT, "--png", second, "--format", "table")
    assert table.exit_code == 0 and table.stderr == "" and "orange" in table.stdout
    assert first.read_bytes() == second.read_bytes()
    assert b"Software" not in first.read_bytes()  # no version written in it


def test_png_of_compare_context_and_explain(tmp_path):
    sizes = {}
    for name, args in [
        ("compare2", ["compare", FRUIT, COLOUR, "--token", "orange"]),
        ("compare3", ["compare", FRUIT, COLOUR, LUNCH, "--token", "orange"]),
        ("context", ["context", FRUIT, "--token", "orange"]),
        ("context_all", ["context", FRUIT, "--all"]),
        ("explain", ["explain", FRUIT]),
        ("explain_heads", ["explain", FRUIT, "--qkv", "random", "--heads", "2", "--mask", "causal"]),
    ]:
        path = tmp_path / f"{name}.png"
        ok(run(*args, "--png", path))
        sizes[name] = png_size(path.read_bytes())
        assert all(s > 100 for s in sizes[name])
    # one row of weights per sentence: a third sentence adds height, not width
    assert sizes["compare3"][0] == sizes["compare2"][0] and sizes["compare3"][1] > sizes["compare2"][1]
    assert sizes["context"][1] < sizes["compare2"][1]  # one row of weights, not two
    assert sizes["explain_heads"][0] == sizes["explain"][0] and sizes["explain_heads"][1] > sizes["explain"][1]
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("args", [["scores", FRUIT], ["explain", FRUIT, "--qkv", "random", "--heads", "2"],
                                  ["context", FRUIT, "--token", "orange"], ["compare", FRUIT, COLOUR, "--token", "orange"]])
def test_every_png_heatmap_names_its_axes(args):
    """Rows attend, columns are attended: each panel of weights says so on its axes."""
    pytest.importorskip("matplotlib")
    from attncli.views import plot

    docs = ok(run(*args, "--json"))
    plt = plot._pyplot()
    fig = plot.figure(plt, docs)
    try:
        panels = [ax for ax in fig.axes if ax.get_title()]  # the colour bars have none
        assert len(panels) == {"scores": 1, "explain": 2, "context": 1, "compare": 2}[args[0]]
        assert [(ax.get_ylabel(), ax.get_xlabel()) for ax in panels] == \
            [("attending token i", "attended token j")] * len(panels)
    finally:
        plt.close(fig)


def test_the_png_of_every_context_vector_names_its_axes():
    pytest.importorskip("matplotlib")
    from attncli.views import plot

    plt = plot._pyplot()
    fig = plot.figure(plt, ok(run("context", FRUIT, "--all", "--json")))
    try:
        ax = next(ax for ax in fig.axes if ax.get_title())
        assert (ax.get_ylabel(), ax.get_xlabel()) == ("token i", "value k of its context vector z_i")
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- --png for a slide

MODELS = Path(__file__).parent / "data" / "models"
MARKED = "The earth is like an orange, and the moon is grey.\nA cat sat on the mat; the cat sat!\nWhy is the sky blue?\n"


def summary(*args) -> dict:
    """The summary document a corpus command draws (its JSON carries the records only)."""
    from attncli.cli import output

    caught = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(output, "_draw", lambda docs, out, view, view_args: caught.extend(docs))
        assert run(*args, "--format", "table").exit_code == 0
    return caught[0]


def figure_of(docs: list[dict]):
    """--png's figure of `docs`, laid out as it is saved (its tick labels drawn)."""
    from attncli.views import plot

    plt = plot._pyplot()
    fig = plot.figure(plt, docs)
    fig.canvas.draw()
    return plt, fig


def shown_texts(fig) -> list:
    """Every piece of text the figure shows."""
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t.get_figure() is not None
            and (t.axes is None or t.axes.get_visible())]


def colour_bars(fig) -> list:
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


@pytest.mark.parametrize("kind", ["scores", "explain", "context", "compare", "heads", "heads --ablate", "stats",
                                  "contributions", "faithfulness"])
def test_every_png_is_sized_for_a_slide(tmp_path, kind):
    """Every text of every kind of --png is 10 points at the least at the figure's own size
    (numbers in cells, tick labels, titles, colour bars), and every heatmap has its colour bar."""
    pytest.importorskip("matplotlib")
    from attncli.views import plot

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(MARKED, encoding="utf-8")
    gpt2 = MODELS / "tiny-gpt2"
    docs = {
        "scores": lambda: ok(run("scores", FORTY, "--json")),
        "explain": lambda: ok(run("explain", FRUIT, "--qkv", "random", "--heads", "2", "--json")),
        "context": lambda: ok(run("context", FRUIT, "--token", "orange", "--json")),
        "compare": lambda: [one(run("compare", FRUIT, COLOUR, "--token", "orange", "--json"))],
        "heads": lambda: ok(run("heads", FRUIT, "--model", "minilm", "--json")),
        "heads --ablate": lambda: ok(run("heads", FRUIT, "--model", gpt2, "--ablate", "--json")),
        "stats": lambda: [summary("stats", corpus, "--model", MODELS / "tiny-distilbert")],
        "contributions": lambda: ok(run("contributions", FRUIT, "--model", gpt2, "--json")),
        "faithfulness": lambda: [summary("faithfulness", corpus, "--model", gpt2)],
    }[kind]()
    plt, fig = figure_of(docs)
    try:
        texts = shown_texts(fig)
        small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < plot.TEXT]
        assert texts and small == [], small[:5]
        assert colour_bars(fig)
        width, height = fig.get_size_inches()
        assert width <= 30 and height <= 30  # a slide's picture, not a poster
    finally:
        plt.close(fig)


def tick_texts(labels) -> list[str]:
    return [t.get_text() for t in labels]


@pytest.mark.parametrize("sentence,thinned", [(FRUIT, False), (FORTY, True)])
def test_the_heads_png_labels_its_rows_and_columns_with_the_pieces(sentence, thinned):
    """The grid's first column of panels carries the pieces down its rows and its last row
    across its columns, upright; every piece where a panel has room, else every k-th, in
    order; inner panels carry ticks alone; one colour bar for every head, from 0."""
    pytest.importorskip("matplotlib")
    doc = one(run("heads", sentence, "--model", "minilm", "--layer", "2", "--json"))
    pieces = doc["tokens"]
    plt, fig = figure_of([doc])
    try:
        panels = [ax for ax in fig.axes if ax.get_title().startswith("L2 H")]
        assert [ax.get_title().rstrip("*") for ax in panels] == [f"L2 H{h}" for h in range(1, 13)]
        first, *inner = panels
        step = 1 if not thinned else pieces.index(tick_texts(first.get_yticklabels())[1])
        assert (step > 1) == thinned
        assert tick_texts(first.get_yticklabels()) == pieces[::step]
        assert list(first.get_yticks()) == list(range(0, len(pieces), step))
        for ax in panels:  # one row of heads: its panels are the grid's last row
            assert tick_texts(ax.get_xticklabels()) == pieces[::step]
            assert all(t.get_rotation() == 90 for t in ax.get_xticklabels())
        assert all(tick_texts(ax.get_yticklabels()) == [""] * len(ax.get_yticks()) for ax in inner)
        assert (first.get_ylabel(), first.get_xlabel()) == ("attending token i", "attended token j")
        bar, = colour_bars(fig)
        assert bar.get_ylabel().startswith("weight α") and bar.get_ylim()[0] == 0.0
        assert bar.get_ylim()[1] == pytest.approx(max(map(max, (row for head in doc["weights"][0] for row in head))))
    finally:
        plt.close(fig)


def test_the_stats_png_writes_its_numbers_legibly_on_their_colours(tmp_path):
    """Each statistic's panel: heads across and layers down as tick labels, its own colour
    bar, and each number in black or white, whichever its cell's colour shows better (a
    WCAG contrast of 4.5 at the least)."""
    pytest.importorskip("matplotlib")
    from attncli.views.heatmap import contrast

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(MARKED, encoding="utf-8")
    doc = summary("stats", corpus, "--model", MODELS / "tiny-distilbert")
    L, H = max(r["layer"] for r in doc["records"]), max(r["head"] for r in doc["records"])
    plt, fig = figure_of([doc])
    try:
        panels = [ax for ax in fig.axes if ax.get_title()]
        assert len(colour_bars(fig)) == len(panels) > 5
        for ax in panels:
            assert tick_texts(ax.get_xticklabels()) == [str(h) for h in range(1, H + 1)]
            assert tick_texts(ax.get_yticklabels()) == [str(l) for l in range(1, L + 1)]
            image = ax.images[0]
            for text in ax.texts:
                x, y = (round(c) for c in text.get_position())
                cell = [255 * c for c in image.cmap(image.norm(image.get_array()[y, x]))[:3]]
                ink = {"black": (0, 0, 0), "white": (255, 255, 255)}[text.get_color()]
                assert contrast(cell, ink) >= 4.5, (ax.get_title(), text.get_text())
    finally:
        plt.close(fig)


@pytest.mark.parametrize("fmt", [["--json"], ["--format", "table"]])
def test_png_without_matplotlib(tmp_path, monkeypatch, fmt):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails
    result = run("scores", FRUIT, "--png", tmp_path / "w.png", *fmt)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: error: ")
    assert "matplotlib" in lines[0] and "pip install matplotlib" in lines[0]
    assert list(tmp_path.iterdir()) == []  # no picture, no temporary file


def test_png_without_matplotlib_writes_nothing_to_stdout(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    fails(run("scores", FRUIT, "--png", tmp_path / "w.png", "--json"), "pip install matplotlib")


# --------------------------------------------------------------------------- picture paths


@pytest.mark.parametrize("flag, name, words, code", [
    ("--png", "out.svg", [".png"], 2),  # a wrong suffix is the command line's own mistake
    ("--svg", "out.png", [".svg"], 2),
    ("--html", "out.png", [".html"], 2),
    ("--png", "out", [".png"], 2),
    ("--png", "missing/out.png", ["cannot be written", "does not exist"], 1),  # a place that cannot take it
    ("--svg", "missing/deeper/out.svg", ["cannot be written", "does not exist"], 1),
    ("--html", "missing/out.html", ["cannot be written", "does not exist"], 1),
])
def test_bad_picture_paths_are_refused_before_anything_is_written(tmp_path, flag, name, words, code):
    fails(run("scores", FRUIT, flag, tmp_path / name), flag, *words, code=code)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag, name", [("--png", "pics.png"), ("--svg", "pics.svg"), ("--html", "pics.html"),
                                        ("--png", "")])
def test_a_directory_is_not_a_picture_path(tmp_path, flag, name):
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    fails(run("compare", FRUIT, COLOUR, "--token", "orange", flag, folder), flag, "directory",
          code=1 if name else 2)
    assert [p.name for p in tmp_path.iterdir()] == ([name] if name else [])
    assert list(folder.iterdir()) == []


def test_pictures_have_the_usual_permissions_and_no_leftovers(tmp_path, umask_022):
    paths = [tmp_path / "t.svg", tmp_path / "t.html", tmp_path / "t.png"]
    (tmp_path / "t.png").write_bytes(b"old")  # an existing file is replaced whole
    ok(run("compare", FRUIT, COLOUR, "--token", "orange", "--svg", paths[0], "--html", paths[1], "--png", paths[2]))
    for path in paths:
        assert oct(path.stat().st_mode & 0o777) == oct(0o644), path
    assert paths[2].read_bytes()[:8] == PNG_MAGIC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.html", "t.png", "t.svg"]
    assert leftovers(tmp_path) == []


def test_pictures_follow_a_stricter_umask(tmp_path):
    before = os.umask(0o077)
    try:
        ok(run("scores", FRUIT, "--svg", tmp_path / "p.svg", "--png", tmp_path / "p.png"))
    finally:
        os.umask(before)
    for name in ("p.svg", "p.png"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600
    assert leftovers(tmp_path) == []


def test_a_relative_picture_path_lands_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ok(run("scores", FRUIT, "--svg", "here.svg", "--png", "here.png"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here.png", "here.svg"]
    assert "orange" in svg_text(tmp_path / "here.svg")
