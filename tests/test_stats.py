"""attncli stats: each statistic against a computation of its own, partial sums merged in
any order, the baselines, and the command through the CLI on one process and on several."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from attncli.corpus import stats
from attncli.views import corpus as corpus_views
from clirunner import fails, ok, run

WORDS = ("the cat sat on a mat and the dog ran to the park while a bird sang in the tree "
         "she said that he was not there but they were here with us today").split()


def loops(alpha, allowed, ids, punct, cls, sep):
    """Every statistic's sum over the rows, one number at a time, as the definitions read."""
    L, H, T, _ = alpha.shape
    out = {name: np.zeros((L, H)) for name in stats.STATISTICS}
    repeats = len(set(ids.tolist())) < T
    for l in range(L):
        for h in range(H):
            for i in range(T):
                a = alpha[l, h, i]
                out["entropy"][l, h] -= sum(x * math.log(x) for x in a if x > 0)
                out["distance"][l, h] += sum(a[j] * abs(i - j) for j in range(T))
                out["self"][l, h] += a[i]
                out["previous"][l, h] += a[i - 1] if i > 0 else 0.0
                out["next"][l, h] += a[i + 1] if i < T - 1 else 0.0
                out["first"][l, h] += a[0]
                out["cls"][l, h] += sum(a[j] for j in range(T) if cls[j])
                out["sep"][l, h] += sum(a[j] for j in range(T) if sep[j])
                out["punct"][l, h] += sum(a[j] for j in range(T) if punct[j])
                out["previous_token"][l, h] += a[i - 1] if i > 0 else 0.0
                if repeats:
                    out["duplicate_token"][l, h] += sum(a[j] for j in range(i) if ids[j] == ids[i])
                    out["induction"][l, h] += sum(a[j] for j in range(1, i + 1) if ids[j - 1] == ids[i])
    return out


def random_sentence(rng, L=2, H=3, T=7, masked=False):
    logits = rng.normal(size=(L, H, T, T))
    allowed = np.tril(np.ones((T, T), dtype=bool)) if masked else np.ones((T, T), dtype=bool)
    logits = np.where(allowed, logits, -np.inf)
    alpha = np.exp(logits - logits.max(-1, keepdims=True))
    alpha /= alpha.sum(-1, keepdims=True)
    ids = rng.integers(0, 4, size=T)
    flags = [rng.random(T) < 0.3 for _ in range(3)]
    return alpha, allowed, ids, *flags


@pytest.mark.parametrize("seed,masked", [(0, False), (1, True), (2, False)])
def test_each_statistic_is_its_definition(seed, masked):
    arrays = random_sentence(np.random.default_rng(seed), masked=masked)
    sums = stats.observe(*arrays)
    for name, expected in loops(*arrays).items():
        np.testing.assert_allclose(sums.sums[name], expected, rtol=1e-12, atol=1e-14, err_msg=name)
    T = len(arrays[2])
    assert sums.counts["rows"] == T and sums.counts["rows_previous"] == T - 1
    assert sums.counts["rows_next"] == (0 if masked else T - 1)  # causal: no row may attend to the next


@pytest.mark.parametrize("seed,masked", [(4, False), (5, True)])
def test_a_sequence_summed_a_block_of_rows_at_a_time_is_its_sums_at_once(seed, masked):
    """observe_rows over blocks of 1, 7 and T rows of one layer (H, R, T), each with its rows
    of the mask and of the patterns, added: observe's sums of the whole (L, H, T, T), its
    counts too; so a document needs no T x T array to be summed."""
    T = 23
    alpha, allowed, ids, punct, cls, sep = random_sentence(np.random.default_rng(seed), T=T, masked=masked)
    ids = np.arange(T) % 5  # tokens that repeat
    whole = stats.observe(alpha, allowed, ids, punct, cls, sep)
    for R in (1, 7, T):
        sums, counts = {}, {}
        for start in range(0, T, R):
            for l in range(alpha.shape[0]):
                block = stats.observe_rows(alpha[l, :, start:start + R], start, allowed[start:start + R], ids, punct,
                                           cls, sep, repeats=True)
                for name, v in block.sums.items():
                    sums.setdefault(name, np.zeros(alpha.shape[:2]))[l] += v
                if l == 0:
                    for name, n in block.counts.items():
                        counts[name] = counts.get(name, 0) + n
        for name in stats.STATISTICS:
            np.testing.assert_allclose(sums[name], whole.sums[name], rtol=1e-12, atol=1e-14, err_msg=name)
        assert {**counts, "sentences": 1, "tokens": T} == whole.counts


def loop_profiles(alpha, T):
    """Each head's distance and tenths profiles of a sequence's weights (H, T, T), a cell at a
    time: the bucket of distance d is 0 for 0, else the k with 2^(k-1) <= d < 2^k; the tenth
    of key j the t with t T / 10 <= j < (t + 1) T / 10."""
    H = alpha.shape[0]
    K = 1 + max(k for k in range(64) if 2 ** (k - 1) <= max(T - 1, 0)) if T > 1 else 1
    distance, tenths = np.zeros((H, K)), np.zeros((H, 10))
    tail = range(max(0, T - 64), T)
    for h in range(H):
        for i in range(T):
            for j in range(T):
                d = abs(i - j)
                k = 0 if d == 0 else next(k for k in range(1, 64) if 2 ** (k - 1) <= d < 2 ** k)
                distance[h, k] += alpha[h, i, j]
                if i in tail:
                    tenths[h, next(t for t in range(10) if t * T <= 10 * j < (t + 1) * T)] += alpha[h, i, j]
    return distance / T, tenths / len(tail)


@pytest.mark.parametrize("T,masked", [(1, False), (9, True), (150, False), (150, True)])
def test_the_profiles_are_the_mass_by_distance_and_the_last_rows_mass_by_tenth(T, masked):
    """observe_rows(profiles=True), blocks of 16 rows summed and divided by their counts as
    HeadSums does, against a loop over every cell: the distance buckets 0, 1, 2-3, 4-7, ...
    and each tenth of the text as the last 64 rows see it; each profile sums to 1."""
    rng = np.random.default_rng(T)
    alpha, allowed, ids, punct, cls, sep = random_sentence(rng, L=1, H=2, T=T, masked=masked)
    total = stats.HeadSums((1, 2))
    for start in range(0, T, 16):
        total.add([stats.observe_rows(alpha[:, :, start:start + 16], start, allowed[start:start + 16], ids, punct,
                                      cls, sep, repeats=False, profiles=True)])
    means = total.means()
    distance, tenths = loop_profiles(alpha[0], T)
    np.testing.assert_allclose(means["distance_profile"][0], distance, rtol=0, atol=1e-12)
    np.testing.assert_allclose(means["tenths_profile"][0], tenths, rtol=0, atol=1e-12)
    np.testing.assert_allclose(means["distance_profile"].sum(-1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(means["tenths_profile"].sum(-1), 1.0, rtol=0, atol=1e-12)
    assert total.counts["tenths_rows"] == min(T, 64) and total.counts["rows"] == T
    record = stats.head_records(stats.Partial(heads=total))[0]
    assert record["distance_profile"] == pytest.approx(distance[0].tolist(), abs=1e-12)
    assert len(record["tenths_profile"]) == 10 and record["tenths_rows"] == min(T, 64)


def test_next_is_undefined_under_a_causal_mask_and_first_only_for_a_model():
    arrays = random_sentence(np.random.default_rng(3), masked=True)
    total = stats.Partial()
    total.add(None, [stats.observe(*arrays)])
    model, vectors = stats.head_records(total)[0], stats.head_records(total, model=False)[0]
    assert model["next"] is None and model["rows_next"] == 0
    assert model["first"] == pytest.approx(arrays[0][0, 0, :, 0].mean(), rel=1e-12)
    assert "first" not in vectors and "first" not in vectors["baselines"].get("uniform", {})
    assert [k for k in model if k not in vectors] == ["first"]


def test_uniform_attention_has_the_entropy_ln_n_and_the_mean_distance():
    T = 6
    allowed = np.tril(np.ones((T, T), dtype=bool))
    even = stats.uniform(allowed)
    sums = stats.observe(even, allowed, np.arange(T), *(np.zeros(T, bool),) * 3)
    assert sums.sums["entropy"][0, 0] == pytest.approx(sum(math.log(i + 1) for i in range(T)), rel=1e-14)
    assert sums.sums["distance"][0, 0] == pytest.approx(sum(sum(range(i + 1)) / (i + 1) for i in range(T)))


def test_partial_sums_merge_in_any_order_to_the_same_numbers():
    rng = np.random.default_rng(3)
    parts = [stats.observe(*random_sentence(rng, T=int(rng.integers(2, 12)))) for _ in range(300)]

    def merged(order):
        total = stats.HeadSums((2, 3))
        for group in np.array_split(order, 7):  # chunks, then the chunks merged
            chunk = stats.HeadSums((2, 3))
            chunk.add([parts[i] for i in group])
            total.merge(chunk)
        return total.means()

    a, b = merged(np.arange(300)), merged(rng.permutation(300))
    for name in stats.STATISTICS:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-12, atol=0, err_msg=name)


def test_compensated_sums_keep_what_plain_float_addition_loses():
    s = stats.Compensated(())
    for x in [1e16, 1.0, -1e16] * 1000:
        s.add(x)
    assert s.value == 1000.0  # plain addition gives 0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS, size=rng.integers(3, 12))) for _ in range(400)]
    lines[10] = ""  # blank: not a line of the corpus
    lines[20] = "... !!"  # no word: counted and skipped
    path = tmp_path_factory.mktemp("stats") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def records(result):
    return ok(result, stderr=None)


def test_stats_gives_a_record_a_head_with_counts_and_baselines(corpus):
    result = run("stats", corpus, "--heads", "2", "--json")
    docs = records(result)
    assert [(d["layer"], d["head"]) for d in docs] == [(1, 1), (1, 2)]
    assert docs[0]["sentences"] == 398 and "1 of 399 lines skipped (line 21" in result.stderr
    assert set(docs[0]["baselines"]) == {"uniform", "shuffled", "random"}
    # with word vectors and no positions attention ignores order: shuffling the words
    # changes none of the statistics that do not look at positions
    for d in docs:
        for key in ("entropy", "self", "punct"):
            assert d[key] == pytest.approx(d["baselines"]["shuffled"][key], rel=1e-9, abs=1e-12), key
            assert "shuffled" in d["like_baseline"][key]
    assert docs[0]["baselines"]["uniform"]["entropy"] > docs[0]["entropy"]


def test_stats_equals_a_computation_of_its_own_from_scores(corpus):
    """The heads' entropy and self share over the corpus, from each line's `batch` weights."""
    docs = records(run("stats", corpus, "--json", "--no-shuffled", "--random-seeds", "0"))
    lines = [line for line in corpus.read_text().splitlines() if line.strip()]
    result = run("batch", input="\n".join(lines) + "\n")
    assert result.exit_code == 1  # the line of no word: an error object, as stats skips it
    batch = [json.loads(line) for line in result.stdout.splitlines()]
    entropy = selfs = rows = 0.0
    for doc in batch:
        if "error" in doc:
            continue
        W = np.array(doc["weights"])
        entropy -= float(np.sum(np.where(W > 0, W * np.log(np.where(W > 0, W, 1)), 0)))
        selfs += float(np.trace(W))
        rows += len(W)
    assert docs[0]["rows"] == rows
    assert docs[0]["entropy"] == pytest.approx(entropy / rows, rel=1e-12)
    assert docs[0]["self"] == pytest.approx(selfs / rows, rel=1e-12)
    assert set(docs[0]["baselines"]) == {"uniform"}


def test_two_jobs_give_the_numbers_of_one(corpus):
    one_job, two_jobs = (records(run("stats", corpus, "--json", "--jobs", n)) for n in ("1", "2"))
    assert len(one_job) == len(two_jobs) == 1
    a, b = one_job[0], two_jobs[0]
    for key, value in a.items():
        if isinstance(value, float):
            assert b[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
        else:
            assert b[key] == value, key


def test_repeated_sequences_show_what_duplicate_and_induction_scores_measure():
    docs = records(run("stats", "--probe", "repeated", "--probe-count", "20", "--probe-length", "8", "--json"))
    d = docs[0]
    assert d["sentences"] == 20 and d["tokens"] == 20 * 16 and d["rows_repeat"] == d["rows"]
    # raw word vectors: a word is most like itself, so its earlier copy draws much attention
    assert d["duplicate_token"] > 3 * d["baselines"]["uniform"]["duplicate_token"]
    fails(run("stats", "some.txt", "--probe", "repeated"), "leave out CORPUS", code=2)


def test_by_word_gives_each_words_attention_against_uniform(corpus):
    docs = records(run("stats", corpus, "--by", "word", "--json"))
    words = {d["word"]: d for d in docs}
    assert set(words) <= set(WORDS)
    assert sum(d["count"] for d in docs) == records(run("stats", corpus, "--json"))[0]["tokens"]
    for d in docs:
        assert d["ratio"] == pytest.approx(d["received"] / d["uniform"])
    assert [d["ratio"] for d in docs] == sorted((d["ratio"] for d in docs), reverse=True)


def test_bad_corpora(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"the cat sat\nthe \xff dog\n")
    fails(run("stats", bad), "line 2 is not UTF-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    fails(run("stats", empty), "holds no sentence")
    words = tmp_path / "none.txt"
    words.write_text("zzqx qqzz\n!!!\n")
    fails(run("stats", words), "no line of", "2 skipped")


def test_a_table_on_a_terminal_marks_what_a_baseline_equals(corpus):
    result = run("stats", corpus, "--format", "table", env={"COLUMNS": "100"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[1].split()[:3] == ["head", "entr", "dist"]
    row = lines[2].split()
    assert row[0] == "1.1" and row[1].endswith("†")  # the entropy, as the shuffled baseline's
    assert all(len(line) <= 100 for line in lines)


def table_of(result) -> tuple[list[list[str]], str]:
    """A stats table's rows split into cells, and its notes joined into one line."""
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    start = next(n for n, line in enumerate(lines) if line.startswith("head "))  # a long path takes two lines
    end = next(n for n, line in enumerate(lines) if line.startswith("entr:"))
    return [line.split() for line in lines[start:end]], " ".join(line.strip() for line in lines[end:])


def test_the_marks_are_footnote_signs_beside_the_numbers_never_letters(corpus):
    rows, notes = table_of(run("stats", corpus, "--format", "table", env={"COLUMNS": "80"}))
    assert rows[0] == ["head", "entr", "dist", "self", "prev", "next", "prevT", "dupT", "indT"]
    docs = records(run("stats", corpus, "--json"))
    marks = {"uniform": "*", "shuffled": "†", "random": "‡"}
    for cell, (key, _) in zip(rows[1][1:], corpus_views.stats_columns(docs)):
        value = f"{docs[0][key]:.2f}"
        assert cell == value + "".join(marks[b] for b in docs[0]["like_baseline"][key]), key
    assert rows[1][1] == f"{docs[0]['entropy']:.2f}†" and rows[1][3] == f"{docs[0]['self']:.2f}†"
    assert [r[0] for r in rows[2:]] == ["uniform", "shuffled", "random"]
    assert not any(re.search(r"\d[a-z]", cell) for row in rows[1:] for cell in row[1:])
    assert ("Dim and marked: as good as equal (0.005, or 1%) to a baseline: * uniform, † shuffled and ‡ random "
            "projections;") in notes


def test_the_legend_names_only_the_columns_the_table_has(corpus, tmp_path):
    _, notes = table_of(run("stats", corpus, "--format", "table", env={"COLUMNS": "80"}))
    assert notes.startswith("entr: entropy of a row (nats); dist: distance attended (positions); self, prev and "
                            "next: shares of a row's attention; prevT, dupT and indT: TransformerLens's "
                            "previous-token, duplicate-token and induction scores. ")
    assert "punct" not in notes and "[CLS]" not in notes
    marked = tmp_path / "marked.txt"
    marked.write_text("the cat , sat .\nthe dog ran ; far\n", encoding="utf-8")
    rows, notes = table_of(run("stats", marked, "--keep-punct", "--no-shuffled", "--format", "table",
                               env={"COLUMNS": "80"}))
    assert rows[0] == ["head", "entr", "dist", "self", "prev", "next", "punct", "prevT"]  # no token repeats
    assert notes.startswith("entr: entropy of a row (nats); dist: distance attended (positions); self, prev, next "
                            "and punct: shares of a row's attention; prevT: TransformerLens's previous-token score. "
                            "Dim and marked: as good as equal (0.005, or 1%) to a baseline: * uniform and ‡ random "
                            "projections; ")


DISTILBERT = Path(__file__).parent / "data" / "models" / "tiny-distilbert"


def summary_of(*args) -> dict:
    """The summary a `stats` run draws as its table (the JSON carries its records only)."""
    from attncli.cli import output

    caught = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(output, "_draw", lambda docs, out, view, view_args: caught.extend(docs))
        assert run("stats", *args, "--format", "table").exit_code == 0
    return caught[0]


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """An encoder's summary of twelve statistics: a table wider than 80 columns, even with one mark a cell."""
    path = tmp_path_factory.mktemp("wide") / "corpus.txt"
    path.write_text("The earth is like an orange, and the moon is grey.\nA cat sat on the mat; the cat sat!\n"
                    "Why is the sky blue? The sky is blue.\nThe cat and the dog are friends.\n", encoding="utf-8")
    return summary_of(path, "--model", DISTILBERT, "--importance")


def stats_blocks(text: str) -> list[list[list[str]]]:
    """The blocks of a stats table: each a heading row, then a row a head and a baseline, split into cells."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("head "))  # a long path takes two lines
    end = next(n for n, line in enumerate(lines) if line.startswith("entr:"))
    blocks, block = [], None
    for line in lines[start:end]:
        if line.startswith("head "):
            block = [line.split()]
            blocks.append(block)
        elif line.strip():
            block.append(line.split())
    return blocks


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120, 200])
def test_every_number_of_a_wide_table_is_whole_at_any_width(wide, width):
    """No cell is cut: where the table is wider than the terminal it is drawn in blocks of
    columns, each with the heads down its left, and every number of every record is there
    once, as the record holds it to the decimals shown, with its marks (or "~")."""
    import io

    from rich.console import Console

    records = wide["records"]
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(corpus_views.stats_view(wide, width=width))
    text = out.getvalue()
    assert all(len(line) <= width for line in text.splitlines()) and "…" not in text
    blocks = stats_blocks(text)
    columns = corpus_views.stats_columns(records, wide.get("markers"))
    assert len(columns) == 12 and (len(blocks) > 1) == (width <= 80), len(blocks)
    assert [h for block in blocks for h in block[0][1:]] == [heading for _, heading in columns]  # each column once
    compact = "~: to one of them" in " ".join(text.split())
    marks = {"uniform": "*", "shuffled": "†", "random": "‡"}
    for block in blocks:
        shown = [next(key for key, heading in columns if heading == h) for h in block[0][1:]]
        baselines = list(records[0]["baselines"])
        assert [row[0] for row in block[1:]] == [f"{r['layer']}.{r['head']}" for r in records] + baselines
        for r, row in zip(records, block[1:]):
            for key, cell in zip(shown, row[1:], strict=True):
                mark = "".join(marks[b] for b in r["like_baseline"].get(key, []))
                value = f"{r[key]:.{corpus_views.places(records, key)}f}"
                assert cell == value + ("~" if compact and mark else mark), (key, cell, r[key])
        for name, row in zip(baselines, block[len(records) + 1:], strict=True):
            means = [f"{np.mean([r['baselines'][name][key] for r in records]):.2f}" for key in shown
                     if key not in corpus_views.OWN_COLUMNS]
            assert row[1:] == means


def test_the_png_marks_each_number_as_the_table_does(corpus):
    pytest.importorskip("matplotlib")
    from attncli.views import plot

    docs = records(run("stats", corpus, "--heads", "2", "--json"))
    doc = {"command": "stats", "corpus": "corpus.txt", "model": None, "vectors": "glove.6B.50d.100k", "records": docs}
    plt = plot._pyplot()
    fig = plot.figure(plt, [doc])
    try:
        shown = {ax.get_title(): sorted(t.get_text() for t in ax.texts) for ax in fig.axes if ax.get_title()}
        assert list(shown) == [h for _, h in corpus_views.stats_columns(docs)]
        for key, heading in corpus_views.stats_columns(docs):
            assert shown[heading] == sorted(f"{d[key]:.2f}{corpus_views.baseline_marks(d['like_baseline'][key])}"
                                            for d in docs), heading
        assert "as good as equal to a baseline: * uniform, † shuffled and ‡ random projections" in \
            fig._suptitle.get_text().replace("\n", " ")
        assert any("†" in t for texts in shown.values() for t in texts)
    finally:
        plt.close(fig)


def test_by_word_leaves_out_the_uniform_column_where_it_is_1_and_says_why(corpus):
    result = run("stats", corpus, "--by", "word", "--format", "table", env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    headings = [line.split() for line in lines if line.split()[:1] == ["word"]]
    assert headings == [["word", "count", "received", "ratio"]] * 2
    assert "uniform attention gives every word 1 (with no causal mask, the n rows that may attend to it give it " \
           "1/n each), so the ratio is what it receives" in " ".join(line.strip() for line in lines)
    docs = records(run("stats", corpus, "--by", "word", "--json"))
    assert all(d["uniform"] == pytest.approx(1.0, abs=1e-12) for d in docs)  # why it is left out
    causal = run("stats", corpus, "--by", "word", "--mask", "causal", "--format", "table", env={"COLUMNS": "80"})
    lines = causal.stdout.splitlines()
    assert [line.split() for line in lines if line.split()[:1] == ["word"]] == \
        [["word", "count", "received", "uniform", "ratio"]] * 2
    assert "ratio: received / uniform" in " ".join(line.strip() for line in lines)


def test_a_models_heads_and_their_share_on_cls_and_sep(tmp_path):
    pytest.importorskip("safetensors")
    from attncli import models
    from tinybert import TINY, loop_forward, tiny_weights, write_model

    folder = write_model(tmp_path / "tiny")
    sentences = ["the earth is like an orange", "an orange is like the earth"]
    path = tmp_path / "c.txt"
    path.write_text("\n".join(sentences) + "\n")
    docs = records(run("stats", path, "--model", folder, "--json"))
    L, H = TINY["num_hidden_layers"], TINY["num_attention_heads"]
    assert [(d["layer"], d["head"]) for d in docs] == [(l + 1, h + 1) for l in range(L) for h in range(H)]
    model = models.load_model(str(folder))
    cls = np.zeros((L, H))
    sep = np.zeros((L, H))
    rows = 0
    for sentence in sentences:
        ids = list(model.encode(sentence).ids)
        _, alpha = loop_forward(ids, tiny_weights(TINY), TINY)  # (L, H, T, T)
        cls += alpha[..., 0].sum(-1)
        sep += alpha[..., -1].sum(-1)
        rows += len(ids)
    for d in docs:
        assert d["cls"] == pytest.approx(cls[d["layer"] - 1, d["head"] - 1] / rows, rel=1e-9)
        assert d["sep"] == pytest.approx(sep[d["layer"] - 1, d["head"] - 1] / rows, rel=1e-9)
        assert set(d["baselines"]) == {"uniform", "shuffled"}  # no random projections of a model
    fails(run("stats", path, "--model", folder, "--by", "word"), "--by word counts words")


# --- a Dask cluster ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, silence_logs=50) as c:
        yield c


def test_a_dask_cluster_gives_the_numbers_of_one_process(corpus, cluster):
    local = records(run("stats", corpus, "--json"))
    remote = records(run("stats", corpus, "--json", "--scheduler", cluster.scheduler_address))
    assert remote[0]["sentences"] == local[0]["sentences"] == 398
    for key, value in local[0].items():
        if isinstance(value, float):
            assert remote[0][key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
        elif key != "baselines":
            assert remote[0][key] == value, key


def test_a_worker_killed_mid_run_has_its_chunks_run_again(corpus, cluster):
    import os
    import signal

    from attncli.corpus import batch, cluster as cluster_module, survey
    from distributed import Client

    with Client(cluster.scheduler_address, set_as_default=False) as client:
        pids = list(client.run(os.getpid).values())
    job = survey.StatsJob(batch.Job(), random_seeds=1)
    lines = list(survey.read_lines(open(corpus, "rb")))

    def chunks():
        for n, chunk in enumerate(batch.chunks_of(lines, 16)):
            if n == 6:
                os.kill(pids[0], signal.SIGKILL)  # one worker dies with tasks of its own
            yield chunk

    merged, expected = stats.Partial(), stats.Partial()
    for part in cluster_module.run_dask(chunks(), job, cluster.scheduler_address):
        merged.merge(part)
    for part in survey.run(batch.chunks_of(lines, 16), job, 1, vectors=_bundled()):
        expected.merge(part)
    assert merged.lines == expected.lines == len(lines) and merged.skipped == expected.skipped == 1
    assert merged.heads.counts == expected.heads.counts
    np.testing.assert_allclose(merged.heads.means()["entropy"], expected.heads.means()["entropy"], rtol=1e-12)


def _bundled():
    from attncli.words.load import load_vectors

    return load_vectors()


def test_workers_that_cannot_load_the_vectors_name_themselves_and_the_path(cluster):
    from attncli.corpus import batch, cluster as cluster_module, survey
    from attncli.errors import InputError

    job = survey.StatsJob(batch.Job(source="/nowhere/vectors.txt"))
    with pytest.raises(InputError, match=r"worker tcp://127\.0\.0\.1:\d+ could not load /nowhere/vectors\.txt"):
        list(cluster_module.run_dask([[(1, "the cat sat", None)]], job, cluster.scheduler_address))


def test_a_scheduler_that_does_not_answer_is_an_error_in_seconds(corpus):
    import time

    pytest.importorskip("distributed")
    start = time.monotonic()
    fails(run("stats", corpus, "--scheduler", "tcp://127.0.0.1:9"), "no Dask scheduler answers at tcp://127.0.0.1:9")
    assert time.monotonic() - start < 20


def test_batch_on_a_dask_cluster_gives_the_lines_of_one_process_in_order(corpus, cluster):
    local = run("batch", corpus)
    remote = run("batch", corpus, "--scheduler", cluster.scheduler_address)
    assert remote.exit_code == local.exit_code == 1  # the line of no word
    assert remote.stdout == local.stdout
    assert [json.loads(line)["line"] for line in remote.stdout.splitlines()][:3] == [1, 2, 3]
    fails(run("batch", corpus, "--scheduler", cluster.scheduler_address, "--jobs", "2"), "give one of them", code=2)


@pytest.mark.parametrize("address", ["foo", "tcp://", "", "tcp://host:port", "tcp://127.0.0.1:0", "tcp://127.0.0.1:65536",
                                     "127.0.0.1:99999"])
def test_what_is_not_an_address_is_a_usage_error(corpus, address):
    for command in ("stats", "batch"):
        fails(run(command, corpus, "--scheduler", address), "is not a scheduler's address", code=2)


def test_option_errors_are_said_at_once_not_as_skipped_lines(corpus, tmp_path):
    fails(run("stats", corpus, "--heads", "7"), "--heads 7 does not divide d_k = 50")
    fails(run("stats", corpus, "--by", "word", "--png", tmp_path / "w.png"), "--by word has none", code=2)
    assert not (tmp_path / "w.png").exists()


def test_the_random_baseline_is_held_to_memory_before_a_line_is_read(corpus, monkeypatch):
    """It draws d x d projections whatever --d-k says: where they cannot fit, the run says so
    at once and how to leave the baseline out, rather than naming --d-k."""
    from attncli.system import limits

    monkeypatch.setattr(limits, "available", lambda: 50_000)  # the bundled d = 50: 60,000 bytes
    fails(run("stats", corpus), "the random projections baseline (W_query, W_key, W_value of 50 x 50) needs about "
          "60.0 kB", "--random-seeds 0")
