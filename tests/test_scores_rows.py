"""scores --file/--document --model --rows: chosen rows of a whole text's attention. Its
rows are the same rows of the sentence path's whole matrices (scores_doc) for every
family's tiny model, in blocks of any size; its memory grows with T, not T x T; and the
command's JSON, its strip drawn at several widths, and its errors."""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from clirunner import fails, one, run

pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")

from attncli import models  # noqa: E402: after the skip
from attncli.corpus import document  # noqa: E402
from attncli.documents.rows import ChosenRows, Rows, rows_doc  # noqa: E402
from attncli.documents.sentence import scores_doc  # noqa: E402
from attncli.encoder import Options  # noqa: E402
from attncli.models.encoder import Trained  # noqa: E402

MODELS = Path(__file__).parent / "data" / "models"
TEXT = "The bank of the river is like the bank of the earth, and the earth is like an orange."


def trained(name: str, layer: int | None = None, head: int | None = None) -> Trained:
    return Trained.of(models.load_model(str(MODELS / name)), layer, head)


def close(a, b) -> bool:
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=0, atol=1e-12)


@pytest.mark.parametrize("block", [document.ROWS, 5, 1])
@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-llama", "tiny-mistral", "tiny-roberta"])
@pytest.mark.parametrize("layer, head", [(None, None), (1, 2)])
def test_the_rows_are_the_same_rows_of_the_whole_matrix(name, block, layer, head, monkeypatch):
    """Each chosen row's scores, weights and top attended, the mean's (or the head's shown)
    and every head's, are those rows of the sentence's scores document (the whole T x T
    pass) within 1e-12, whatever the block size; a position given twice is shown twice."""
    monkeypatch.setattr(document, "ROWS", block)
    source = trained(name, layer, head)
    opts = Options(top_k=4)
    full = scores_doc(TEXT, source, opts)
    T = len(full["tokens"])
    doc = rows_doc(TEXT, source, Rows.parse(f"0,4,{T - 1},4"), opts)
    assert doc["rows"] == [0, 4, T - 1, 4] and doc["tokens"] == full["tokens"]
    assert (doc["layer"], doc["head"], doc["mask"], doc.get("window")) == (full["layer"], full["head"], full["mask"],
                                                                            full.get("window"))
    assert doc["special"] == full["special"] and doc["offsets"] == full["offsets"]
    for k, i in enumerate(doc["rows"]):
        for key in ("scores", "weights"):
            assert close(doc[key][k], full[key][i])
            for mine, whole in zip(doc["heads"], full["heads"], strict=True):
                assert close(mine[key][k], whole[key][i])
        for mine, whole in [(doc, full), *zip(doc["heads"], full["heads"])]:
            assert [t["index"] for t in mine["top"][k]] == [t["index"] for t in whole["top"][i]]
            assert close([t["weight"] for t in mine["top"][k]], [t["weight"] for t in whole["top"][i]])


def test_last_k_rows_are_the_documents_last():
    source = trained("tiny-gpt2")
    T = len(scores_doc(TEXT, source)["tokens"])
    assert rows_doc(TEXT, source, Rows.parse("last:3"))["rows"] == [T - 3, T - 2, T - 1]
    assert rows_doc(TEXT, source, Rows.parse("last"))["rows"] == [T - 1]
    assert rows_doc(TEXT, source, Rows.parse(f"last:{T + 5}"))["rows"] == list(range(T))


@pytest.mark.parametrize("spec", ["", "last:0", "last:", "first", "1,,2", "-1", "1;2", "last:x", "1, 2x"])
def test_a_garbled_spec_is_refused(spec):
    with pytest.raises(ValueError, match="is not rows: give last, last:K"):
        Rows.parse(spec)


def peak(f) -> int:
    """The most numpy's arrays (tracemalloc) held at once while f() ran."""
    tracemalloc.start()
    try:
        f()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_rows_memory_grows_with_t_not_t_squared(tmp_path, monkeypatch):
    """A tiny Llama of 4,096 positions over 256 and 1,024 pieces, 16 rows a block, the last
    3 rows: the pass and what it keeps peak about four times as high at four times T (T x T
    arrays would take sixteen), within what block_rows and ChosenRows count and the
    listed numbers."""
    import tinyllama

    config = {**tinyllama.LLAMA, "max_position_embeddings": 4096}
    tinyllama.write_model(tmp_path / "m", config, tinyllama.tiny_weights(config))
    model = Trained.of(models.load_model(str(tmp_path / "m")))
    family, c = model.model.family, model.model.config
    monkeypatch.setattr(document, "ROWS", 16)
    words = [w for w in tinyllama.VOCAB if not w.startswith("<")]
    texts = {T: " ".join(words[i % len(words)] for i in range(T - 1)) for T in (256, 1024)}
    spec = Rows.parse("last:3")
    assert len(rows_doc(texts[256], model, spec)["tokens"]) == 256  # what a first run sets up, before measuring
    blocked = {T: peak(lambda: rows_doc(t, model, spec)) for T, t in texts.items()}
    assert 3 <= blocked[1024] / blocked[256] <= 5
    for T in texts:
        assert blocked[T] <= (family.run_bytes(T, c, 16) + document.RowSums.bytes(T, 16, c.heads)
                              + ChosenRows.bytes(T, 3, c.heads) + 130 * 2 * (c.heads + 1) * 3 * T)


@pytest.fixture()
def doc_file(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text(TEXT + "\n", encoding="utf-8")
    return path


def test_the_json_is_one_document_of_the_rows(doc_file):
    """--file and --document give the same document, the rows' over every piece."""
    doc = one(run("scores", "--file", doc_file, "--model", MODELS / "tiny-gpt2", "--rows", "2",
                  "--json"), stderr=None)
    again = one(run("scores", "--document", "--model", MODELS / "tiny-gpt2", "--rows", "2", "--json",
                    input=doc_file.read_text()), stderr=None)
    assert doc["rows"] == [2] and doc["document"] == str(doc_file) and again["document"] == "standard input"
    T = len(doc["tokens"])
    assert np.shape(doc["weights"]) == (1, T) and len(doc["heads"]) == 4
    assert sum(doc["weights"][0]) == pytest.approx(1.0, abs=1e-12)
    assert all(w == 0 for w in doc["weights"][0][3:])  # a decoder's row 2 sees pieces 0 to 2 only
    assert again["weights"] == doc["weights"]


@pytest.mark.parametrize("width", [20, 40, 80, 200])
def test_the_strip_is_drawn_in_blocks_of_columns_that_fit(doc_file, width):
    """Every one of the T columns is drawn once, in blocks no wider than the terminal, each
    cell the weight x 100 rounded, masked cells a dot; then each row's top attended."""
    model = MODELS / "tiny-gpt2"
    doc = one(run("scores", "--file", doc_file, "--model", model, "--rows", "last:2", "--json"), stderr=None)
    result = run("scores", "--file", doc_file, "--model", model, "--rows", "last:2", "--format", "table",
                 env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    T, (a, b) = len(doc["tokens"]), doc["rows"]
    labels = {i: f"{i} {doc['tokens'][i]} " for i in doc["rows"]}
    cells = {i: [] for i in doc["rows"]}
    for line in lines:
        for i, label in labels.items():
            if line.startswith(label) and "→" not in line:
                cells[i] += line[len(label):].split()
    assert all(len(line) <= width for line in lines)
    for k, i in enumerate(doc["rows"]):
        assert len(cells[i]) == T
        for shown, w in zip(cells[i], doc["weights"][k]):
            assert (shown == "·" and w == 0) or abs(int(shown) - w * 100) <= 0.5 + 1e-9
    assert any(line.startswith(f"{b} ") and "→" in line for line in lines)


def test_the_rows_png_svg_and_page_draw_the_strip(doc_file, tmp_path):
    """--png, --svg and --html draw the strip of the rows chosen: the PNG's one panel is the
    (K, T) weights, its rows named by position and piece and its columns by the pieces; the
    SVG is the table view (each row's label and cells); the page holds the document."""
    pytest.importorskip("matplotlib")
    import json
    import xml.etree.ElementTree as ET

    from attncli.views import plot

    model = MODELS / "tiny-gpt2"
    pictures = {kind: tmp_path / f"rows.{kind}" for kind in ("png", "svg", "html")}
    result = run("scores", "--file", doc_file, "--model", model, "--rows", "3,7",
                 "--json", *[a for kind, path in pictures.items() for a in (f"--{kind}", path)])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    T, weights = len(doc["tokens"]), np.array(doc["weights"])
    assert doc["rows"] == [3, 7] and weights.shape == (2, T)
    assert pictures["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plt = plot._pyplot()
    fig = plot.figure(plt, [doc])
    try:
        (panel,) = [ax for ax in fig.axes if ax.get_title()]
        np.testing.assert_allclose(panel.images[0].get_array(), weights, rtol=0, atol=0)
        assert [t.get_text() for t in panel.get_yticklabels()] == [f"3 {doc['tokens'][3]}", f"7 {doc['tokens'][7]}"]
        assert (panel.get_ylabel(), panel.get_xlabel()) == ("attending token i", "attended token j")
        assert str(doc_file) in fig.texts[0].get_text()  # the title names the document
    finally:
        plt.close(fig)
    shown = "".join(ET.parse(pictures["svg"]).getroot().itertext()).replace("\xa0", " ")
    assert f"7 {doc['tokens'][7]} " in shown and "each row sums to 1" in shown
    page = pictures["html"].read_text(encoding="utf-8")
    assert "rowsView" in page and '"rows":[3,7]' in page.replace(" ", "")


@pytest.mark.parametrize("args, words, code", [
    (["--model", "tiny-gpt2"], ["never its T x T", "give --rows"], 2),
    (["--model", "tiny-gpt2", "--rows", "last:0"], ["Invalid value for '--rows'", "is not rows"], 2),
    (["--model", "tiny-gpt2", "--rows", "99"], ["--rows 99 is out of range", "positions 0 to"], 1),
    (["--rows", "last"], ["--rows chooses rows of a trained model's attention"], 2),
    (["--model", "tiny-gpt2", "--rows", "last", "--window", "3"], ["--window is not for a document's rows"], 2),
    (["--model", "tiny-gpt2", "--rows", "last", "--max-tokens", "3"], ["--max-tokens is not for a document's rows"], 2),
])
def test_each_error_is_one_line(doc_file, args, words, code):
    args = [str(MODELS / a) if a.startswith("tiny-") else a for a in args]
    fails(run("scores", "--file", doc_file, *args), *words, code=code)


def test_rows_need_a_document():
    fails(run("scores", "the cat", "--model", MODELS / "tiny-gpt2", "--rows", "last"),
          "--rows chooses rows of a document's attention", code=2)
