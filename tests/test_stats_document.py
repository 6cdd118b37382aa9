"""stats --document: a long text through a trained model as one sequence, a block of query
rows at a time. Its statistics are a sentence's wherever both run (a one-line file, every
family's tiny model); its blocks of any size give the same sums; its profiles are the
weights' mass by distance and by tenth, computed again from forward's whole matrices; its
memory grows with T, not T x T; and the command's JSON, table and errors."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from clirunner import fails, ok, run

pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")

from attncli import models  # noqa: E402: after the skip
from attncli.corpus import document, stats  # noqa: E402
from attncli.models.encoder import Trained  # noqa: E402

MODELS = Path(__file__).parent / "data" / "models"
NAMES = ["tiny-bert", "tiny-distilbert", "tiny-roberta", "tiny-xlm-roberta", "tiny-gpt2", "tiny-llama", "tiny-qwen2",
         "tiny-mistral"]
TEXT = "The bank of the river is like the bank of the earth, and the earth is like an orange."
COUNTS = ("sentences", "tokens", "rows", "rows_previous", "rows_next", "rows_repeat")


def trained(name: str) -> Trained:
    return Trained.of(models.load_model(str(MODELS / name)))


def close(a, b, tol: float) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= tol)


@pytest.fixture(scope="module")
def one_line(tmp_path_factory):
    path = tmp_path_factory.mktemp("document") / "one.txt"
    path.write_text(TEXT + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("rows", [document.ROWS, 5])
@pytest.mark.parametrize("name", NAMES)
def test_a_one_line_document_gives_the_sentence_paths_statistics(one_line, name, rows, monkeypatch):
    """The same line as a corpus of one sentence (the batched whole-matrix pass, stats.observe)
    and as a document (blocks of rows, observe_rows; the line's 20 to 30 pieces one block, or
    blocks of 5 rows): every head's every statistic, its counts, and its uniform and
    shuffled baselines' within 1e-9."""
    monkeypatch.setattr(document, "ROWS", rows)
    as_line = ok(run("stats", one_line, "--model", MODELS / name, "--json"), stderr=None)
    as_document = ok(run("stats", one_line, "--model", MODELS / name, "--document", "--json"), stderr=None)
    assert [(r["layer"], r["head"]) for r in as_line] == [(r["layer"], r["head"]) for r in as_document]
    for line, doc in zip(as_line, as_document):
        assert {k: doc[k] for k in COUNTS} == {k: line[k] for k in COUNTS}
        for key in stats.STATISTICS:
            assert close(doc[key], line[key], 1e-9), (key, doc[key], line[key])
        assert doc["baselines"].keys() == line["baselines"].keys() == {"uniform", "shuffled"}
        for baseline, values in line["baselines"].items():
            for key, value in values.items():
                assert close(doc["baselines"][baseline][key], value, 1e-9), (baseline, key)
        assert doc["like_baseline"] == line["like_baseline"]


TORCH = Path(__file__).parent / "data" / "documents.npz"  # made by tests/data/make_document_references.py


@pytest.mark.parametrize("name", NAMES)
def test_at_every_position_the_statistics_are_those_of_torchs_attention(name, monkeypatch):
    """A text as long as the model reads (64 pieces), through attncli's blocked pass (blocks
    of 5 rows) and, its sums made the same way, through the attention matrices transformers
    + torch's output_attentions gave for it (float32, eager): every head's every statistic
    and profile within 1e-6."""
    with np.load(TORCH) as data:
        text, ids, alpha = str(data[f"{name}_text"]), data[f"{name}_ids"], data[f"{name}_attentions"]
    model = trained(name)
    assert np.array_equal(document.Text.of(text, model).ids, ids)  # the same pieces, at every position
    monkeypatch.setattr(document, "ROWS", 5)
    ours = document.summary(text, model, "reference", shuffled=False)

    def through_torch(t, trained, R, progress):  # the same sums, over torch's matrices: a block of every row
        sums = document.RowSums(t, len(alpha))
        for l, weights in enumerate(alpha):
            sums.rows(l, 0, {"weights": weights.astype(np.float64)})  # (H, T, T)
        return sums.observation()

    monkeypatch.setattr(document, "observed", through_torch)
    theirs = document.summary(text, model, "reference", shuffled=False)
    assert len(ours["records"]) == len(theirs["records"]) == alpha.shape[0] * alpha.shape[1]
    for a, b in zip(ours["records"], theirs["records"]):
        for key in (*stats.STATISTICS, "distance_profile", "tenths_profile"):
            np.testing.assert_allclose(np.array(a[key], dtype=float), np.array(b[key], dtype=float), rtol=1e-6,
                                       atol=1e-6, err_msg=f"{name} {a['layer']}.{a['head']} {key}")
        assert a["sink"] == b["sink"] and a["like_baseline"] == b["like_baseline"]


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-mistral"])
def test_blocks_of_any_size_give_the_same_sums(name):
    """A document's pass and sums a block of 1, 7 or T rows at a time: the same sums, within
    1e-12, and the same counts."""
    model = trained(name)
    text = document.Text.of(TEXT, model)
    T = len(text.ids)
    sums = {R: document.observed(text, model, R, lambda rows: None) for R in (1, 7, T)}
    for R in (1, 7):
        assert sums[R].counts == sums[T].counts
        assert sums[R].sums.keys() == sums[T].sums.keys()
        for key, value in sums[T].sums.items():
            np.testing.assert_allclose(sums[R].sums[key], value, rtol=0, atol=1e-12, err_msg=key)


@pytest.mark.parametrize("name", ["tiny-roberta", "tiny-llama", "tiny-mistral"])
def test_the_profiles_are_the_weights_mass_by_distance_and_by_tenth(name):
    """Each head's distance_profile and tenths_profile, against forward's whole (L, H, T, T)
    weights cut by a mask a bucket at a time (distances 0, 1, 2-3, 4-7, ...; the keys of each
    tenth, for the last 64 rows: here every row); sink as the first position's mean share
    above 0.3."""
    model = trained(name)
    text = " ".join([TEXT] * 2) + " I sat on the bank of the river"  # about 55 pieces: seven distance buckets
    doc = document.summary(text, model, "t", shuffled=False)
    ids = model.model.encode(text).ids
    T = len(ids)
    alpha = model.model.family.forward(ids, model.model.weights, model.model.config).weights  # (L, H, T, T)
    d = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :])  # (T, T)
    buckets = [d == 0] + [(d >= 2 ** (k - 1)) & (d < 2 ** k) for k in range(1, 64) if 2 ** (k - 1) < T]
    tenth = [(np.arange(T) * 10 >= t * T) & (np.arange(T) * 10 < (t + 1) * T) for t in range(10)]
    tail = slice(max(0, T - 64), T)
    for r in doc["records"]:
        a = alpha[r["layer"] - 1, r["head"] - 1]  # (T, T)
        expected = [a[b].sum() / T for b in buckets]
        assert r["distance_profile"] == pytest.approx(expected, abs=1e-12)
        assert r["tenths_profile"] == pytest.approx([a[tail][:, t].sum() / len(range(T)[tail]) for t in tenth],
                                                    abs=1e-12)
        assert r["tenths_rows"] == min(T, 64) and r["tokens"] == T
        assert r["sink"] == (a[:, 0].mean() > 0.3)
    uniform = doc["records"][0]["baselines"]["uniform"]
    assert sum(uniform["distance_profile"]) == pytest.approx(1.0, abs=1e-12)


def peak(f) -> int:
    """The most numpy's arrays (tracemalloc) held at once while f() ran."""
    tracemalloc.start()
    try:
        f()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_documents_memory_grows_with_t_not_t_squared(tmp_path):
    """A tiny Llama of 4,096 positions over 256 and 1,024 pieces, 16 rows a block: the
    document's pass and sums peak (tracemalloc) about four times as high at four times T
    (T x T arrays would take sixteen), within what block_rows counts; the whole matrices'
    pass (forward) more than twelve times."""
    import tinyllama

    config = {**tinyllama.LLAMA, "max_position_embeddings": 4096}
    tinyllama.write_model(tmp_path / "m", config, tinyllama.tiny_weights(config))
    model = Trained.of(models.load_model(str(tmp_path / "m")))
    family, c = model.model.family, model.model.config
    words = [w for w in tinyllama.VOCAB if not w.startswith("<")]
    texts = {T: document.Text.of(" ".join(words[i % len(words)] for i in range(T - 1)), model) for T in (256, 1024)}
    assert [len(t.ids) for t in texts.values()] == [256, 1024]  # <s> and the words
    document.observed(texts[256], model, 16, lambda rows: None)  # what a first run sets up, before measuring
    blocked = {T: peak(lambda: document.observed(t, model, 16, lambda rows: None)) for T, t in texts.items()}
    whole = {T: peak(lambda: family.forward(t.ids, model.model.weights, c)) for T, t in texts.items()}
    assert 3 <= blocked[1024] / blocked[256] <= 5
    assert whole[1024] / whole[256] > 12
    for T in texts:
        assert blocked[T] <= family.run_bytes(T, c, 16) + document.RowSums.bytes(T, 16, c.heads)
    assert document.block_rows(1024, model) == document.ROWS  # memory to spare: the largest block


def test_a_block_is_as_large_as_memory_allows_and_one_no_row_of_which_fits_is_refused(monkeypatch):
    """block_rows halves the block until its pass and sums take at most half the memory
    available, and refuses, before any pass, a document of which one row does not fit."""
    from attncli.system import limits

    model = trained("tiny-llama")
    family, c = model.model.family, model.model.config
    T = 60

    def need(R: int) -> int:
        return family.run_bytes(T, c, R) + document.RowSums.bytes(T, R, c.heads)

    monkeypatch.setattr(limits, "available", lambda: 2 * need(16))
    assert document.block_rows(T, model) == 15  # 60, 30, 15
    monkeypatch.setattr(limits, "available", lambda: need(1) - 1)
    with pytest.raises(limits.ResourceError, match=r"^tiny-llama's forward pass over a document of 60 word pieces, 1 "
                                                   r"row at a time needs about .*; give a shorter document$"):
        document.block_rows(T, model)


def test_the_json_and_the_table_mark_the_sink_heads(tmp_path):
    """Records a head, each with its profiles, sink and the counts; the table marks the
    records' sink heads, and says how many each layer has."""
    path = tmp_path / "doc.txt"
    path.write_text(" ".join([TEXT] * 2) + "\n", encoding="utf-8")
    records = ok(run("stats", path, "--model", MODELS / "tiny-gpt2", "--document", "--json"), stderr=None)
    assert len(records) == 2 * 4
    for r in records:
        assert r["sink"] == (r["first"] > 0.3)
        assert sum(r["distance_profile"]) == pytest.approx(1.0, abs=1e-12)
        assert sum(r["tenths_profile"]) == pytest.approx(1.0, abs=1e-12)
        assert r["distance_profile"][0] == pytest.approx(r["self"], abs=1e-12)
        assert r["distance_profile"][1] == pytest.approx(r["previous_token"], abs=1e-12)  # a decoder's: i - 1 alone
    sinks = {f"{r['layer']}.{r['head']}" for r in records if r["sink"]}
    assert sinks  # this text gives tiny-gpt2 some
    table = run("stats", path, "--model", MODELS / "tiny-gpt2", "--document", "--format", "table",
                env={"COLUMNS": "120"})
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith(f"{path}: one text of {records[0]['tokens']:,} word pieces")
    marked = {line.split()[0].rstrip("•") for line in lines if re.match(r"\d+\.\d+•", line)}
    assert marked == sinks
    text = re.sub(r"\s+", " ", " ".join(lines))
    by_layer = ", ".join(f"{l}: {sum(r['sink'] for r in records if r['layer'] == l)} of 4" for l in (1, 2))
    assert f"sink heads by layer: {by_layer}." in text


def test_standard_input_and_a_file_give_the_same_records(one_line):
    from_file = ok(run("stats", one_line, "--model", MODELS / "tiny-llama", "--document", "--json"), stderr=None)
    piped = ok(run("stats", "--model", MODELS / "tiny-llama", "--document", "--json", input=one_line.read_bytes()),
               stderr=None)
    assert piped == from_file
    leading = ok(run("stats", "--model", MODELS / "tiny-llama", "--document", "--json",
                     input=b"\n\n  " + one_line.read_bytes() + b"\n\n"), stderr=None)
    assert leading == from_file  # the white space at a text's ends: no piece of it


def test_a_text_past_the_models_positions_is_refused_in_one_line(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text(" ".join([TEXT] * 4), encoding="utf-8")
    fails(run("stats", path, "--model", MODELS / "tiny-gpt2", "--document"), "the document is",
          "word pieces long, and tiny-gpt2 reads at most 64; give a shorter one")
    (tmp_path / "empty.txt").write_text(" \n\n")
    fails(run("stats", tmp_path / "empty.txt", "--model", MODELS / "tiny-gpt2", "--document"), "is empty")


def test_document_without_a_model_is_a_usage_error_saying_what_to_do(one_line):
    fails(run("stats", one_line, "--document"), "--document runs a trained model", "give --model", code=2)


@pytest.mark.parametrize("option", [["--jsonl"], ["--probe", "repeated"], ["--by", "word"], ["--importance"],
                                    ["--jobs", "2"], ["--scheduler", "tcp://127.0.0.1:8786"]])
def test_what_reads_a_corpus_a_line_at_a_time_is_refused_with_document(one_line, option):
    name = option[0] if option[0] != "--by" else "--by word"
    fails(run("stats", one_line, "--model", MODELS / "tiny-gpt2", "--document", *option),
          f"{name} ", "--document reads CORPUS whole as one sequence", f"leave out {name}", code=2)


def test_float32_gives_float64s_numbers_to_its_precision(one_line):
    wide = ok(run("stats", one_line, "--model", MODELS / "tiny-qwen2", "--document", "--json"), stderr=None)
    narrow = ok(run("stats", one_line, "--model", MODELS / "tiny-qwen2", "--document", "--json", "--precision",
                    "float32"), stderr=None)
    for a, b in zip(wide, narrow):
        assert b["redone_in_float64"] == 0
        assert b["entropy"] == pytest.approx(a["entropy"], rel=1e-4)
        assert b["distance_profile"] == pytest.approx(a["distance_profile"], abs=1e-5)
    assert json.dumps(narrow)  # every number a JSON number
