"""attention.precision: float64 everywhere by default, float32 inside the block that asks
for it (a corpus run's --precision float32), each family's forward pass in it within
float32's rounding of the float64 pass, GELU's float32 the float64 one rounded, and stats'
--precision against the float64 run and refused without a model. Then numbers that leave
float32's range (word embeddings of 1e30, finite, whose squares are not): a layer norm that
refuses them rather than give its bias, the sentence computed in float64 instead
(attention.in_range, layers.forward_many's batches), stats and faithfulness giving a
float64 run's numbers within 1e-12, counting and saying what they redid, and what float64
cannot hold either refused as float64 refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attncli import attention
from attncli.errors import ModelError, OptionError
from attncli.models import layers
from clirunner import fails, ok, one, run

MODELS = Path(__file__).parent / "data" / "models"
FAMILIES = ["tiny-bert", "tiny-distilbert", "tiny-roberta", "tiny-xlm-roberta", "tiny-gpt2", "tiny-llama",
            "tiny-mistral", "tiny-qwen2"]


def test_float64_unless_a_block_asks_for_float32_and_again_after_it():
    assert attention.working() == np.float64
    with attention.precision("float32"):
        assert attention.working() == np.float32
        Q = np.arange(12.0).reshape(3, 4) / 7  # float64 in, float32 out
        omega, alpha, Z = attention.multi_head(Q, Q, Q, 2, 0.5)
        assert omega.dtype == alpha.dtype == Z.dtype == np.float32
    assert attention.working() == np.float64
    with pytest.raises(RuntimeError), attention.precision("float32"):
        raise RuntimeError
    assert attention.working() == np.float64 and attention.multi_head(Q, Q, Q, 2, 0.5)[1].dtype == np.float64
    with pytest.raises(OptionError, match="precision must be one of float64, float32, got 'float16'"):
        with attention.precision("float16"):
            pass


def test_float32_steps_are_float64_s_rounded():
    rng = np.random.default_rng(3)
    Q, K, V = (rng.normal(size=(7, 8)) for _ in range(3))
    omega, alpha, Z = attention.multi_head(Q, K, V, 2, 0.25)
    with attention.precision("float32"):
        omega32, alpha32, Z32 = attention.multi_head(Q, K, V, 2, 0.25)
    eps = np.finfo(np.float32).eps
    assert np.abs(omega32 - omega).max() <= 16 * eps * np.abs(omega).max()
    assert np.abs(alpha32 - alpha).max() <= 16 * eps
    assert np.abs(Z32 - Z).max() <= 16 * eps * np.abs(V).max()


def test_erf_in_float32_is_within_4_2e_7_of_math_erf():
    import math

    x = np.concatenate([np.linspace(-9, 9, 400_001), 10.0 ** np.linspace(-30, 1, 3001),
                        -(10.0 ** np.linspace(-30, 1, 3001)), [0.0, -0.0, np.inf, -np.inf]]).astype(np.float32)
    got = layers.erf_float32(x)
    want = np.array([math.erf(float(v)) for v in x])
    assert got.dtype == np.float32
    assert np.abs(got - want).max() <= 4.2e-7
    small = np.abs(x) < 1e-3  # near 0, relatively: x P(0) / Q(0) = 2 x / sqrt(pi)
    assert (np.abs(got[small] - want[small]) <= 4 * np.finfo(np.float32).eps * np.abs(want[small])).all()
    assert np.isnan(layers.erf_float32(np.float32(np.nan)))


def test_gelu_in_float32_is_within_its_rounding_of_the_float64_gelu():
    X = np.linspace(-8, 8, 100_001)
    exact = layers.gelu(X)
    with attention.precision("float32"):
        narrow = layers.gelu(X.astype(np.float32))
        tanh = layers.gelu(X.astype(np.float32), "gelu_tanh")
    assert narrow.dtype == tanh.dtype == np.float32
    # erf_float32's 4.2e-7 times |x| / 2, and float32's rounding of the inputs and the product
    assert (np.abs(narrow - exact) <= 2.1e-7 * np.abs(X) + 4 * np.finfo(np.float32).eps * (np.abs(exact) + 1e-30)).all()
    assert np.abs(tanh - layers.gelu(X, "gelu_tanh")).max() <= 8 * 8 * np.finfo(np.float32).eps


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_s_pass_in_float32_is_within_its_rounding_of_float64(name):
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    from attncli import models

    model = models.load_model(str(MODELS / name))
    ids = model.encode("The earth is like an orange, and the bank of the river is green").ids
    wide = model.family.forward(ids, model.weights, model.config, keep=(0,))
    with attention.precision("float32"):
        narrow = model.family.forward(ids, model.weights, model.config, keep=(0,))
    assert narrow.hidden.dtype == narrow.weights.dtype == narrow.steps[0]["Q"].dtype == np.float32
    assert wide.hidden.dtype == np.float64
    scale = np.abs(wide.hidden).max(axis=-1, keepdims=True)  # (L + 1, T, 1)
    assert (np.abs(narrow.hidden - wide.hidden) <= 1e-5 * scale).all()
    assert np.abs(narrow.weights - wide.weights).max() <= 1e-5


def test_stats_in_float32_within_float32_s_rounding_and_says_so(tmp_path):
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    corpus = tmp_path / "c.txt"
    corpus.write_text("The earth is like an orange\nI sat on the bank of the river\nThe bank raised rates\n",
                      encoding="utf-8")
    model = str(MODELS / "tiny-bert")
    wide = ok(run("stats", corpus, "--model", model, "--json", "--no-shuffled"))
    narrow = ok(run("stats", corpus, "--model", model, "--json", "--no-shuffled", "--precision", "float32"))
    assert len(wide) == len(narrow) > 1
    for a, b in zip(wide, narrow):
        assert b.pop("redone_in_float64") == 0  # no number left float32's range
        assert a.keys() == b.keys()
        for key, value in a.items():
            if isinstance(value, float):
                assert b[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
            else:
                assert b[key] == value, key
    table = run("stats", corpus, "--model", model, "--precision", "float32", "--format", "table",
                env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "24 tokens (tiny-bert, float32)" in table.stdout
    fails(run("stats", corpus, "--precision", "float32"), code=2, *["--precision sets a trained model's forward passes; give --model NAME|DIR, or leave it out over word vectors"])


# --- numbers that leave float32's range: the sentence computed in float64 instead ---------------

CORPUS = ["The earth is like an orange", "I sat on the bank of the river", "The bank raised rates"]
REDONE_NOTE = ("attncli: note: {n} of 3 sentences left float32's range (their numbers overflow in it) and were "
               "computed in float64 instead (redone_in_float64 in the JSON)\n")


def scaled_embeddings(folder: Path, factor: float, rows=None) -> Path:
    """tiny-bert with its word embeddings (those of `rows` only, if given) times `factor`:
    finite in float32 (1e30 of them), their squares not."""
    from helpers import edited_model

    def change(name, w):
        if name != "embeddings.word_embeddings.weight":
            return None
        w = w.astype(np.float64)
        w[slice(None) if rows is None else rows] *= factor
        return w

    return edited_model(MODELS / "tiny-bert", folder, change)


@pytest.fixture(scope="module")
def huge(tmp_path_factory) -> tuple[Path, Path, Path, Path]:
    """tiny-bert's word embeddings x 1e30 (every sentence leaves float32's range), its
    'orange' alone x 1e30 (the first line only), tinybert.py's x 1e200 (every sentence
    leaves float64's too); and the corpus."""
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    from attncli import models
    from tinybert import TINY, tiny_weights, write_model

    root = tmp_path_factory.mktemp("huge")
    corpus = root / "c.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    pieces = models.load_model(str(MODELS / "tiny-bert")).encode("orange")
    orange = [i for i, p in zip(pieces.ids, pieces.pieces) if p == "orange"]
    # tiny-bert's weights are F32, whose squares float64 holds: tinybert.py's written in F64, x 1e200
    beyond = {k: w.astype(np.float64) * (1e200 if "word_embeddings" in k else 1) for k, w in tiny_weights(TINY).items()}
    return (scaled_embeddings(root / "all", 1e30), scaled_embeddings(root / "orange", 1e30, orange),
            write_model(root / "beyond", weights=beyond), corpus)


def numbers_equal(a, b, tol: float = 1e-12) -> None:
    """Two JSON values the same, their numbers within `tol` (relative, and absolute near 0)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            numbers_equal(a[k], b[k], tol)
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            numbers_equal(x, y, tol)
    elif isinstance(a, float) and not isinstance(b, bool):
        assert b == pytest.approx(a, rel=tol, abs=tol)
    else:
        assert a == b


def test_a_layer_norm_whose_squares_overflow_is_nan_not_beta():
    """Its variance infinite, the row would be beta, a number that looks right: NaN instead,
    which the pass's check refuses naming where (test_model_files holds those messages)."""
    X = np.array([[1e30, -1e30, 2e30, 0.0]])
    gamma, beta = np.ones(4), np.full(4, 0.5)
    wide = layers.layer_norm(X, gamma, beta, 1e-12)  # float64 holds 1e60
    np.testing.assert_allclose(wide, (X - X.mean()) / X.std() + 0.5, rtol=1e-12)
    with attention.precision("float32"), np.errstate(all="raise"):
        assert np.isnan(layers.layer_norm(X.astype(np.float32), gamma, beta, 1e-12)).all()  # was beta
    assert np.isnan(layers.layer_norm(X * 1e150, gamma, beta, 1e-12)).all()
    assert np.isnan(layers.layer_norm(np.array([[1e308, 1e308, -1e308]]), gamma[:3], beta[:3], 1e-12)).all()  # its mean


def test_silu_and_gelu_far_out_are_their_limits_not_an_overflow():
    with attention.precision("float32"), np.errstate(over="raise"):
        X = np.array([-1e4, -100.0, 100.0, 1e20], dtype=np.float32)
        np.testing.assert_array_equal(layers.silu(X), [0.0, 0.0, 100.0, X[3]])
        np.testing.assert_array_equal(layers.gelu(X, "gelu_tanh"), [0.0, 0.0, 100.0, X[3]])


def test_in_range_redoes_in_float64_only_what_leaves_float32_s_range():
    def pass_of(scale):
        def norm():  # a layer norm and a pass's check of what it gives
            dtype = attention.working()
            return layers.finite(layers.layer_norm(np.array([[scale, -scale, 0.0]], dtype), np.ones(3, dtype),
                                                   np.zeros(3, dtype), 1e-12), "the embeddings")
        return norm

    with attention.precision("float32"):
        plain, again = attention.in_range(pass_of(1.0))
        assert plain.dtype == np.float32 and not again
        wide, again = attention.in_range(pass_of(1e30))
        assert wide.dtype == np.float64 and again
        np.testing.assert_allclose(wide, [[np.sqrt(1.5), -np.sqrt(1.5), 0.0]], rtol=1e-12)
        product, again = attention.in_range(lambda: attention.floating(1e30) * attention.floating(1e30))
        assert again and product.dtype == np.float64  # numpy's overflow, made an error, and float64's product
        assert product == pytest.approx(1e60, rel=1e-15)
        assert attention.working() == np.float32  # float32 again after the redo
    with pytest.raises(ModelError, match="float64's range"):  # float64 refuses too: its own error
        with attention.precision("float32"):
            attention.in_range(pass_of(1e200))
    assert attention.in_range(pass_of(1e30))[1] is False  # in float64 nothing is redone


def test_a_batch_redoes_in_float64_only_the_sentence_that_overflows(huge):
    from attncli import models

    model = models.load_model(str(huge[1]))  # 'orange' x 1e30
    ids = [np.array(model.encode(line).ids) for line in CORPUS]
    with attention.precision("float32"):
        runs = dict(layers.forward_many(model.family, ids, model.weights, model.config))
    assert [runs[b].hidden.dtype for b in range(3)] == [np.float64, np.float32, np.float32]
    alone = model.family.forward(ids[0], model.weights, model.config)
    np.testing.assert_allclose(runs[0].hidden, alone.hidden, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(runs[0].weights, alone.weights, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("command", ["faithfulness", "stats"])
def test_float32_that_overflows_gives_float64_s_numbers_and_says_so(command, huge):
    """Every sentence's float32 pass overflows (embeddings of 1e30, finite): each is computed
    in float64, the numbers those of a float64 run within 1e-12, where before every rho was
    null (a layer norm of rows whose squares overflow gives beta for every token)."""
    model, corpus = huge[0], huge[3]
    wide = ok(run(command, corpus, "--model", model, "--json"))
    result = run(command, corpus, "--model", model, "--json", "--precision", "float32")
    assert result.exit_code == 0 and result.stderr == REDONE_NOTE.format(n=3)
    narrow = ok(result, stderr=None)
    for a, b in zip(wide, narrow):
        assert b.pop("redone_in_float64") == 3
        assert b.pop("precision", "float32") == "float32" and a.pop("precision", "float64") == "float64"
        numbers_equal(a, b)
    if command == "faithfulness":
        assert all(d["rolled"]["rho"] is not None and d["rolled"]["undefined"] == 0 for d in wide)
    table = run(command, corpus, "--model", model, "--precision", "float32", "--format", "table",
                env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "float32; 3 sentences left its range, computed in float64" in table.stdout


def test_only_the_sentence_that_overflows_is_redone(huge):
    model, corpus = huge[1], huge[3]
    result = run("stats", corpus, "--model", model, "--json", "--precision", "float32", "--importance")
    assert result.exit_code == 0 and result.stderr == REDONE_NOTE.format(n=1)
    narrow = ok(result, stderr=None)
    wide = ok(run("stats", corpus, "--model", model, "--json", "--importance"))
    for a, b in zip(wide, narrow):
        assert b.pop("redone_in_float64") == 1
        numbers_equal(a, b, tol=1e-5)  # two sentences in float32
    plain = ok(run("faithfulness", corpus, "--model", MODELS / "tiny-bert", "--json", "--precision", "float32"))
    assert all(d["redone_in_float64"] == 0 for d in plain)  # nothing overflows: nothing redone, nothing said


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_what_float64_cannot_hold_either_is_its_error(precision, huge):
    model, corpus = huge[2], huge[3]
    fails(run("faithfulness", corpus, "--model", model, "--precision", precision),
          "no line of", "could be read (3 skipped; line 1: the embeddings leave float64's range")


# --- --precision on every --model command ------------------------------------------------------

SENTENCE_COMMANDS = [["scores", "The earth is like an orange"], ["context", "The earth is like an orange", "--token", "earth"],
                     ["explain", "The earth is like an orange"], ["heads", "The earth is like an orange"],
                     ["contributions", "The earth is like an orange", "--method", "alti"],
                     ["compare", "The earth is like an orange", "An orange is round", "--token", "orange"]]


def without_precision(doc):
    """The document with every `precision` key taken out, and what they said."""
    said = []
    if isinstance(doc, dict):
        if "precision" in doc:
            said.append(doc.pop("precision"))
        for value in doc.values():
            said += without_precision(value)
    elif isinstance(doc, list):
        for value in doc:
            said += without_precision(value)
    return said


@pytest.mark.parametrize("command", SENTENCE_COMMANDS, ids=lambda c: c[0])
def test_every_model_command_takes_float32_and_says_it_ran_in_it(command):
    """A sentence command's numbers in float32 are float64's within float32's rounding, and
    its document says which ran; float64 stays the default."""
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    model = str(MODELS / "tiny-bert")
    wide = ok(run(*command, "--model", model, "--json"))
    narrow = ok(run(*command, "--model", model, "--json", "--precision", "float32"))
    assert set(without_precision(wide)) == {"float64"} and set(without_precision(narrow)) == {"float32"}
    numbers_equal(wide, narrow, tol=1e-4)


def test_a_sentence_float32_cannot_hold_runs_in_float64_and_says_so(huge):
    model = str(huge[0])  # every sentence's embeddings x 1e30
    wide = one(run("scores", CORPUS[0], "--model", model, "--json"))
    narrow = one(run("scores", CORPUS[0], "--model", model, "--json", "--precision", "float32"))
    assert wide["precision"] == narrow["precision"] == "float64"
    numbers_equal(wide, narrow)


def test_batch_takes_the_precision_to_its_workers(tmp_path):
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS * 3) + "\n", encoding="utf-8")
    model = str(MODELS / "tiny-bert")
    one = run("batch", corpus, "--model", model, "--precision", "float32")
    two = run("batch", corpus, "--model", model, "--precision", "float32", "--jobs", "2")
    assert one.exit_code == two.exit_code == 0 and one.stdout == two.stdout
    docs = [json.loads(line) for line in one.stdout.splitlines()]
    assert len(docs) == 9 and {d["precision"] for d in docs} == {"float32"}


@pytest.mark.parametrize("command", [c[0] for c in SENTENCE_COMMANDS] + ["batch", "explore"])
def test_precision_over_word_vectors_is_a_usage_error(command):
    args = {"compare": ["a b", "b c", "--token", "b"], "batch": ["-"], "explore": ["a b"]}.get(command, ["a b"])
    fails(run(command, *args, "--precision", "float32", input="a b\n"), code=2,
          *["--precision sets a trained model's forward passes; give --model NAME|DIR, or leave it out over word "
            "vectors"])
