"""What the other views say, at an ordinary 80 columns: whole paths, right plurals, bars
that fit, compare's cosines and headers, what the top-attended lists leave out, and the
pictures (--svg, --html): local fonts only, borders that join when drawn offline.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from clirunner import one, run
from grids import longest_line
from helpers import COLOUR, FRUIT, TWENTY, flat
from attncli.documents.context import compare_doc, explain_doc
from attncli.encoder import Options
from attncli.views import export, sentence, vectors


def draw(renderable, width: int = 80) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


# --------------------------------------------------------------------------- a number beside its word


@pytest.mark.parametrize("width", [10, 20, 33, 80])
def test_pack_breaks_lines_between_items_never_inside_one(width):
    from attncli.views.common import pack

    items = [Text(f"{word} 0.{n:03d},") for n, word in enumerate(("a", "bb", "internationalization", "cat") * 6)]
    lines = pack(items, width, first=Text("orange → "), sep=" ", indent=4)
    plain = [line.plain for line in lines]
    assert plain[0].startswith("orange → ")
    # indented below the first, unless an item is too wide for the indent and a line both
    assert all(line.startswith("    ") or len(line) > width - 4 for line in plain[1:]), plain
    assert " ".join(line.strip() for line in plain).removeprefix("orange → ") == " ".join(i.plain for i in items)
    for line in plain:  # within the width, unless one item alone is wider
        assert len(line) <= width or len(line.strip().split(" ")) <= 2 + 2 * line.startswith("orange"), line
        assert re.fullmatch(r"(orange → )?( *\S+ 0\.\d{3},)+", line), line  # whole "word 0.123," items


LONG_WORDS = ("administration responsibility international government information development environment "
              "organization relationship particularly contemporary neighbourhood")


@pytest.mark.parametrize("width", [40, 60, 80])
def test_a_top_line_longer_than_the_width_keeps_each_weight_beside_its_token(glove, width):
    from attncli.documents.sentence import scores_doc

    doc = scores_doc(LONG_WORDS, glove, Options(top_k=6))
    text = draw(sentence.scores_view(doc, width=width), width)
    lines = text[text.index("keeps it):") + len("keeps it):"):].strip("\n").splitlines()
    assert any(line.startswith("    ") for line in lines)  # a list goes on below its token
    item = r"[a-z]+ \d\.\d{3}"
    for line in lines:
        assert re.fullmatch(rf"(\d+ )?[a-z]+ → {item}(, {item})*,?|    {item}(, {item})*,?", line.rstrip()), line
    listed = " ".join(line.strip() for line in lines)
    for token, top in zip(doc["tokens"], doc["top"]):
        assert f"{token} → " + ", ".join(f"{t['token']} {t['weight']:.3f}" for t in top) in listed


# --------------------------------------------------------------------------- vectors info, clear


def test_vectors_info_folds_a_long_path_instead_of_cutting_it():
    entry = "/home/someone/.cache/attncli/glove.840B.300d.txt-limit-none-" + "0123456789abcdef" * 4
    source = "/home/someone/vectors/a/very/long/path/to/the/file/glove.840B.300d.txt"
    text = draw(vectors.info_view({"name": "x", "cache_entry": entry, "source": source, "words": 2_196_017}))
    assert longest_line(text) <= 80
    assert "…" not in text
    joined = "".join(text.split())  # the value's lines, run together: the whole path
    assert entry in joined and source in joined and "2,196,017" in text


def facts(result) -> dict[str, str]:
    """A table of facts (vectors info, qkv init) at 80 columns: its rows as label: value."""
    assert result.exit_code == 0, result.stderr
    assert longest_line(result.stdout) <= 80
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in result.stdout.splitlines())


def test_vectors_info_says_yes_and_no_not_python_values():
    shown = facts(run("vectors", "info", "--format", "table", env={"COLUMNS": "80"}))
    assert (shown["words"], shown["dim"], shown["cased"], shown["subwords"]) == ("100,000", "50", "no", "no")
    assert set(shown) == {"name", "words", "dim", "cased", "subwords", "source", "format", "cache entry",
                          "load seconds"}
    text = draw(vectors.info_view({"cased": True, "subwords": False, "limit": None, "words": 2_000_000}))
    assert [line.split() for line in text.splitlines()] == [["cased", "yes"], ["subwords", "no"], ["limit", "none"],
                                                            ["words", "2,000,000"]]


def test_qkv_init_names_its_arrays_and_d_k_as_written(tmp_path):
    shown = facts(run("qkv", "init", "--d-k", "4000", "-o", tmp_path / "p.npz", "--format", "table",
                      env={"COLUMNS": "80"}))
    assert shown == {"path": str(tmp_path / "p.npz"), "d": "50", "d_k": "4,000", "seed": "0",
                     "arrays": "W_query, W_key, W_value"}


def test_a_fact_from_outside_is_never_markup():
    text = draw(vectors.info_view({"source": "[bold]x[/bold] \x1b[31m", "arrays": ["[red]W", "W_key"]}))
    assert "[bold]x[/bold] \\x1b[31m" in text and "\x1b" not in text and "[red]W, W_key" in text


def test_vectors_list_heads_its_status_column_and_separates_thousands():
    entry = {"source": "/v/wide.txt", "path": "/c/wide", "words": 12_345, "dim": 40_000, "bytes": 10**6,
             "stale": False, "damaged": None, "limit": None}
    text = draw(vectors.entries_view({"cache_dir": "/c", "entries": [entry, {**entry, "stale": True},
                                                                    {**entry, "damaged": "lacks vectors.npy"}]}))
    rows = [[c.strip() for c in line.strip("┃│").split("┃" if "┃" in line else "│")]
            for line in text.splitlines() if line[:1] in "┃│"]
    assert rows[0] == ["source", "words", "dim", "size", "status"]
    assert [r[1:] for r in rows[1:]] == [["12,345", "40,000", "1.0 MB", status]
                                         for status in ("current", "stale", "damaged: lacks vectors.npy")]
    long = "/home/someone/vectors/a/very/long/path/to/the/file/" + "glove.840B.300d" * 4 + ".txt"
    text = draw(vectors.entries_view({"cache_dir": "/c", "entries": [{**entry, "source": long}]}))
    assert longest_line(text) <= 80 and "…" not in text
    cells = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert "".join(cells) == long  # folded, whole


@pytest.mark.parametrize("n, said", [(0, "removed 0 cache entries"), (1, "removed 1 cache entry "),
                                     (2, "removed 2 cache entries"), (1234, "removed 1,234 cache entries")])
def test_vectors_clear_says_entry_or_entries(n, said):
    text = draw(vectors.cleared_view({"removed": n, "bytes": 10**6, "cache_dir": "/c", "kept": [], "links": []}))
    assert said in text


def test_sizes_of_the_cache_views_are_written_as_everywhere_else():
    from attncli.views import vectors

    text = vectors.cleared_view({"removed": 1, "bytes": 1500, "cache_dir": "/c", "kept": [], "links": []}).plain
    assert "(1.5 kB)" in text and "MB" not in text


# --------------------------------------------------------------------------- rnn


def test_rnn_bars_fit_80_columns():
    sentence = "The books that the professor recommended are expensive"
    doc = one(run("rnn", sentence, "--json"))
    text = run("rnn", sentence, "--format", "table", env={"COLUMNS": "80"}).stdout
    assert longest_line(text) <= 80
    assert "…" not in text  # no bar cut short
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) == len(doc["tokens"])
    bars = [[c.strip() for c in row.strip("│").split("│")] for row in rows]
    longest = max(len(cells[4]) for cells in bars)
    influence = np.array(doc["influence"])
    last = bars[int(np.argmax(influence))][4]
    assert len(last) == longest and set(last) == {"█"}  # the largest influence: a whole bar


def test_rnn_caption_keeps_each_formula_on_one_line_at_80_columns():
    text = run("rnn", "The books that the professor recommended are expensive", "--format", "table",
               env={"COLUMNS": "80"}).stdout
    lines = [line.strip() for line in text.splitlines()]
    assert "influence: ‖∂h_T/∂x_i‖, by the chain rule" in lines
    assert "attention: α_T,i with Q = K = V = X" in lines
    assert not any(line.startswith("=") for line in lines)


# --------------------------------------------------------------------------- counts


@pytest.mark.parametrize("n, noun, plural, said", [(0, "head", None, "0 heads"), (1, "head", None, "1 head"),
                                                   (2, "head", None, "2 heads"), (1, "entry", "entries", "1 entry"),
                                                   (105_098, "line", None, "105,098 lines")])
def test_a_count_is_singular_for_one_and_has_thousands_separators(n, noun, plural, said):
    from attncli.visible import count

    assert count(n, noun, plural) == said


@pytest.mark.parametrize("heads, said", [("1", "; 1 head; "), ("2", "; 2 heads; ")])
def test_scores_says_1_head_and_2_heads(heads, said):
    text = run("scores", FRUIT, "--qkv", "random", "--heads", heads, "--d-k", "10", "--format", "table",
               env={"COLUMNS": "80"}).stdout
    assert said in flat(text) and "head(s)" not in text


def test_batch_and_stats_count_lines_with_thousands_separators(tmp_path):
    lines = ["the cat sat"] * 1_200
    lines[1_099] = "!!"  # no word: a failed line in batch, a skipped one in stats
    result = run("batch", input="\n".join(lines) + "\n")
    assert result.exit_code == 1
    assert result.stderr == 'attncli: 1 of 1,200 lines failed; their objects hold "error"\n'
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run("stats", corpus, "--json", "--no-shuffled", "--random-seeds", "0")
    assert result.exit_code == 0
    assert result.stderr.startswith("attncli: warning: 1 of 1,200 lines skipped (line 1,100: ")


# --------------------------------------------------------------------------- explain


@pytest.mark.parametrize("width,blocks", [(80, 1), (40, 1), (30, 3)])
def test_explain_follows_a_token_in_blocks_of_its_columns_where_they_do_not_fit(glove, width, blocks):
    """Narrower than 80 columns, the token's row folds a long token first ("orange (itself)"
    on two lines at 40), then goes in blocks of ω, s and α, each beside j and the token: every
    number whole."""
    doc = explain_doc("The earth is like an orange", glove, Options(), token="orange")
    text = draw(sentence.explain_view(doc, width=width), width)
    panel = [line.strip("│ ") for line in text[text.index("(index 5) thr"):].splitlines()[1:]]
    heads = [line.split() for line in panel if line.startswith("j  token")]
    assert len(heads) == blocks and [h for head in heads for h in head[2:]] == ["ω_ij", "s_ij", "α_ij"]
    shown = {}
    for line in panel:
        cells = line.split()
        if cells and cells[0].isdigit():
            shown.setdefault(int(cells[0]), []).extend(c for c in cells[2:] if c != "(itself)")
    row = doc["row"]["shown"]
    assert shown == {j: [f"{row[k][j]:.3f}" for k in ("scores", "scaled", "weights")] for j in range(6)}


def test_explain_numbers_the_dimensions_from_0_to_d_minus_1(glove):
    doc = explain_doc("The earth is like an orange", glove, Options())
    text = draw(sentence.explain_view(doc, width=80))
    panel = text[text.index("1. the tokens' word vectors X"):text.index("2. queries")]
    lines = [line.strip().strip("│").strip() for line in panel.splitlines()[1:]]
    assert lines[0].split() == ["0", "1", "2", "3", "4", "…", "49"]  # 50 values: the last is 49
    the = lines[1].split()
    assert the[0] == "the" and the[-1] == f"{doc['steps']['X'][0][49]:.3f}"  # and it is the last value
    assert the[1:6] == [f"{x:.3f}" for x in doc["steps"]["X"][0][:5]]

def test_explain_follows_a_token_of_a_long_sentence_a_row_a_token():
    doc = one(run("explain", TWENTY, "--token", "lecture", "--json"))
    text = run("explain", TWENTY, "--token", "lecture", "--format", "table", env={"COLUMNS": "80"}).stdout
    assert longest_line(text) <= 80
    panel = text[text.index("'lecture' (index 8) through every step"):]
    rows = [line.strip("│ ").split() for line in panel.splitlines() if line.strip("│ ")[:2].strip().isdigit()]
    assert [r[0] for r in rows] == [str(j) for j in range(20)]
    for j, row in enumerate(rows):
        assert row[1] == doc["tokens"][j]
        numbers = row[-3:]  # ω, s, α of the one head
        assert numbers == [f"{doc['row'][key][0][j]:.3f}" for key in ("scores", "scaled", "weights")]


# --------------------------------------------------------------------------- compare


def test_compare_of_four_sentences_has_readable_headers_at_80_columns():
    sentences = [FRUIT, COLOUR, "I ate an orange", "an orange car"]
    doc = one(run("compare", *sentences, "--token", "orange", "--json"))
    text = run("compare", *sentences, "--token", "orange", "--format", "table", env={"COLUMNS": "80"}).stdout
    assert longest_line(text) <= 80
    assert "…" not in text  # no header cut short
    heads = [line for line in text.splitlines() if "(1)" in line and "(4)" in line and "┃" in line]
    assert heads and all(line.count("(4)") >= 1 for line in heads)
    # each matrix's rows: (n) then its k cosines, as the document holds them
    rows = [line for line in text.splitlines() if re.match(r"│ \(\d\) │", line)]
    ctx = [[c.strip() for c in row.split("│")[2:6]] for row in rows[:4]]
    assert ctx == [[f"{x:.3f}" for x in r] for r in doc["context_cosine"]]


TEN = ["I ate an orange", "an orange car", FRUIT, "orange juice is sweet", "orange is a colour", "the orange sky",
       "a big orange", "orange peel", "paint it orange", "one orange"]


def cosine_blocks(text: str) -> list[dict[tuple[str, str], str]]:
    """Each table of cosines in `text` (a block of one, where the table is split) as
    {(row, column): cell}, its columns named by the header above its rows; tables side by
    side (two spaces apart) in the order drawn."""
    text = text[text.index("cosines between"):text.index("the context vectors of")]
    found: list[dict] = []
    columns: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("┃"):  # a header: one or two tables'
            columns = [[c.strip() for c in part.strip("┃").split("┃")][1:] for part in line.strip().split("┃  ┃")]
            found += [{} for _ in columns]
        elif line.startswith("│"):
            for table, part, names in zip(found[-len(columns):], line.strip().split("│  │"), columns, strict=True):
                cells = [c.strip() for c in part.strip("│").split("│")]
                table.update({(cells[0], c): cell for c, cell in zip(names, cells[1:], strict=True)})
    return found


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_compare_of_ten_sentences_gives_every_cosine_whole(glove, width):
    doc = compare_doc(TEN, glove, Options(), token="orange")
    text = draw(sentence.compare_view(doc, width=width), width)
    assert longest_line(text) <= width and "…" not in text
    blocks = cosine_blocks(text)
    assert len(blocks) == (4 if width < 90 else 2)  # each matrix whole, or in two blocks of its columns
    labels = [f"({n + 1})" for n in range(10)]
    for M, held in ((doc["context_cosine"], blocks[:len(blocks) // 2]), (doc["raw_cosine"], blocks[len(blocks) // 2:])):
        cells = {}
        for block in held:
            assert not cells.keys() & block.keys()  # a column in one block only
            cells.update(block)
        assert cells == {(labels[a], labels[b]): f"{M[a][b]:.3f}" for a in range(10) for b in range(10)}


def test_compare_of_two_sentences_gives_one_cosine_not_a_range(glove):
    doc = compare_doc([FRUIT, COLOUR], glove, Options(), token="orange")
    off = doc["context_cosine"][0][1]
    drawn = draw(sentence.compare_view(doc))
    titles = [line.split() for line in drawn.splitlines() if "vectors" in line and "│" not in line]
    assert ["context", "vectors", "raw", "vectors"] in titles  # titles as narrow as their tables
    assert ["vectors"] not in titles  # none wrapped
    text = flat(drawn)
    assert f"cosine {off:.3f} between sentences" in text
    assert f"{off:.3f} to {off:.3f}" not in text
    three = compare_doc([FRUIT, COLOUR, "I ate an orange"], glove, Options(), token="orange")
    M = np.array(three["context_cosine"])[~np.eye(3, dtype=bool)]
    assert f"cosine {M.min():.3f} to {M.max():.3f} between sentences" in flat(draw(sentence.compare_view(three)))


def test_compare_with_projections_draws_no_empty_table_of_nearest_words(glove):
    doc = compare_doc([FRUIT, COLOUR], glove, Options(qkv="random"), token="orange")
    assert all(d["neighbors"] == [] for d in doc["sentences"])
    text = draw(sentence.compare_view(doc))
    assert "no nearest words for the context vectors" in flat(text)
    assert "nearest vocabulary words" not in text and "'orange' itself" not in text


# --------------------------------------------------------------------------- what the lists leave out


LEFT_OUT = "own position left out (--include-self keeps it)"


def test_scores_top_list_says_its_own_position_is_left_out():
    text = flat(run("scores", FRUIT, "--format", "table").stdout)
    assert f"top attended (by weight α), {LEFT_OUT}:" in text
    kept = run("scores", FRUIT, "--format", "table", "--include-self").stdout
    assert "left out" not in kept and "the → the 0.341" in kept  # and then it is there
    causal = flat(run("scores", FRUIT, "--format", "table", "--mask", "causal").stdout)
    assert "own and masked positions left out (--include-self keeps its own)" in causal
    causal_kept = flat(run("scores", FRUIT, "--format", "table", "--mask", "causal", "--include-self").stdout)
    assert "masked positions left out" in causal_kept and "own and masked" not in causal_kept


def test_scores_top_list_of_a_grid_too_wide_says_it_too():
    long = " ".join(["the earth is like an orange and a bright color"] * 4)
    text = flat(run("scores", long, "--format", "table", env={"COLUMNS": "80"}).stdout)
    assert "too many" in text and LEFT_OUT in text


def test_compare_lines_say_their_own_position_is_left_out():
    text = flat(run("compare", FRUIT, COLOUR, "--token", "orange", "--format", "table").stdout)
    assert f"→ top attended (by weight α), {LEFT_OUT}" in text
    kept = run("compare", FRUIT, COLOUR, "--token", "orange", "--format", "table", "--include-self").stdout
    assert "left out" not in kept
    assert "orange (index 5) → orange " in kept  # itself, first


# --------------------------------------------------------------------------- pictures


def test_svg_names_local_fonts_and_loads_nothing(tmp_path):
    svg, html = tmp_path / "s.svg", tmp_path / "s.html"
    assert run("scores", FRUIT, "--svg", svg, "--html", html, "--json").exit_code == 0
    for path in (svg, html):
        text = path.read_text(encoding="utf-8")
        assert "@font-face" not in text and "https://" not in text and "url(\"http" not in text
        assert "DejaVu Sans Mono" in text and "monospace" in text
    picture = svg.read_text(encoding="utf-8")
    ET.fromstring(picture)  # well-formed
    assert not [u for u in re.findall(r"https?://[^\"' )]+", picture) if u != "http://www.w3.org/2000/svg"]
    # no run of text starts with no-break spaces (librsvg drops them, drawing the run to the left)
    assert not re.search(r"<text [^>]*>&#160;", picture)


def html_title(path) -> str:
    import html

    titles = re.findall(r"<title>(.*?)</title>", path.read_text(encoding="utf-8"), flags=re.S)
    assert len(titles) == 1 and "<" not in titles[0]
    return html.unescape(titles[0])


@pytest.mark.parametrize("sentence", ["The earth is like an orange", "the <b>cat</b> & {dog} </title><script>x",
                                      "the cat \x1b]0;owned\x07 sat"])
def test_the_html_page_is_titled_by_the_command_and_sentence_escaped(tmp_path, sentence):
    from attncli.visible import visible

    page = tmp_path / "p.html"
    assert run("scores", sentence, "--html", page, "--json").exit_code == 0
    assert html_title(page) == f"attncli scores: {visible(sentence)}"
    assert "\x1b" not in page.read_text(encoding="utf-8")


def test_the_html_title_of_several_sentences_compare_and_stats(tmp_path):
    page = tmp_path / "p.html"
    assert run("scores", "--html", page, "--json", input="the cat\nthe dog\nthe bird\n").exit_code == 0
    assert html_title(page) == "attncli scores: the cat (and 2 more sentences)"
    assert run("compare", "the river bank", "a bank", "--token", "bank", "--html", page, "--json").exit_code == 0
    assert html_title(page) == "attncli compare: 'bank' in 2 sentences"
    # a document a method: the sentence once, and the methods
    assert run("contributions", "the cat sat", "--method", "raw", "--method", "norm", "--method", "rollout",
               "--html", page, "--json").exit_code == 0
    assert html_title(page) == "attncli contributions: the cat sat (methods raw, norm and rollout)"
    assert run("contributions", "--method", "norm", "--method", "raw", "--html", page, "--json",
               input="the cat sat\nthe dog ran\n").exit_code == 0
    assert html_title(page) == "attncli contributions: the cat sat (and 1 more sentence; methods norm and raw)"
    assert run("contributions", "the cat sat", "--html", page, "--json").exit_code == 0
    assert html_title(page) == "attncli contributions: the cat sat (method raw)"
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat\nthe dog ran\n", encoding="utf-8")
    assert run("stats", corpus, "--html", page, "--json").exit_code == 0
    assert html_title(page) == f"attncli stats: {corpus}"


def test_svg_text_runs_start_where_their_first_character_is():
    console = Console(file=io.StringIO(), width=20, color_system="truecolor", force_terminal=True, record=True)
    console.print(Text("     ab", style="bold"))
    picture = export.svg(console, "t")
    x = float(re.search(r'<text [^>]*?\bx="([0-9.]+)"[^>]*>ab</text>', picture).group(1))
    assert x == pytest.approx(5 * 20 * export.SVG_ASPECT)


@pytest.mark.skipif(shutil.which("rsvg-convert") is None, reason="rsvg-convert (librsvg2-bin) is not installed")
def test_svg_borders_join_when_drawn_offline(tmp_path):
    """A panel's left border, drawn by librsvg: some pixel column is ink from its top corner to
    its bottom corner, with no gap between lines."""
    Image = pytest.importorskip("PIL.Image")
    console = Console(file=io.StringIO(), width=20, color_system="truecolor", force_terminal=True, record=True)
    console.print(Panel("\n".join(["x"] * 8), width=12))
    (tmp_path / "p.svg").write_text(export.svg(console, "t"), encoding="utf-8")
    subprocess.run(["rsvg-convert", tmp_path / "p.svg", "-o", tmp_path / "p.png"], check=True)
    image = np.asarray(Image.open(tmp_path / "p.png").convert("L"), dtype=float)
    cell, line = 20 * export.SVG_ASPECT, 20 * 1.22  # rich's cell width and line height
    x0, y0 = 1 + 8, 1 + 40  # rich's margin and padding: where the terminal's first cell is
    top, bottom = int(y0 + 0.6 * line), int(y0 + 9.4 * line)  # inside the first and last lines: the border's run
    columns = image[top:bottom, int(x0):int(x0 + cell)]
    background = np.median(image[top:bottom, int(x0 + 3 * cell):int(x0 + 5 * cell)])
    ink = columns > background + 60
    assert ink.all(axis=0).any(), "the border has gaps between lines"


def test_several_sentences_on_a_terminal_name_each_once():
    """A sentence a line of input: each table under a plain rule, its sentence named once, by
    the table's own first line."""
    result = run("scores", "--format", "table", "--no-color", input="The earth is like an orange\nthe cat sat\n",
                 env={"COLUMNS": "60"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines.count("The earth is like an orange") == 1
    assert lines.count("the cat sat") == 1 and set(lines[0]) == {"─"} and lines.count("─" * 60) == 2


@pytest.mark.parametrize("model,line", [
    ("tiny-gpt2", "Ġ marks a piece that follows a space (byte-level BPE)"),
    ("tiny-llama", "▁ marks a piece that follows a space (SentencePiece)"),
    ("tiny-bert", "## marks a piece that goes on the one before it, in one word (WordPiece)")])
def test_a_models_pieces_say_what_their_marks_mean(model, line):
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    folder = Path(__file__).parent / "data" / "models" / model
    shown = run("scores", "The earth is like an orangey unbelievably", "--model", folder, "--format", "table",
                "--no-color", env={"COLUMNS": "200"}).stdout.splitlines()
    assert line in shown
    plain = run("scores", "The earth is like an orange", "--format", "table", "--no-color").stdout
    assert "marks a piece" not in plain
