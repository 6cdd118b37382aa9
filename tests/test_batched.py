"""Batched forward passes (layers.forward_many): each sentence's pass out of a padded batch
equal to its own pass alone, in every family, its kept steps too; a batch refused run
again a sentence at a time; stats over a model the same as one sentence at a time."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attncli import attention
from attncli.errors import ModelError
from clirunner import ok, run

pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")

MODELS = Path(__file__).parent / "data" / "models"
FAMILIES = ["tiny-bert", "tiny-distilbert", "tiny-roberta", "tiny-xlm-roberta", "tiny-gpt2", "tiny-llama",
            "tiny-mistral", "tiny-qwen2"]
SENTENCES = ["The earth is like an orange", "I sat on the bank of the river and watched the water go by",
             "Bank", "The bank raised interest rates", "An orange is a bright color, and so is the sun at dusk",
             "The earth is like an orange"]


def load(name: str):
    from attncli import models

    return models.load_model(str(MODELS / name))


def close(a: np.ndarray, b: np.ndarray, rel: float = 1e-12) -> bool:
    return a.shape == b.shape and bool((np.abs(a - b) <= rel * max(np.abs(b).max(), 1e-300)).all())


def test_padding_mask_hides_each_sentence_s_padding_keys_only():
    hidden = attention.padding_mask(np.array([3, 1, 4]), 4)
    assert hidden.shape == (3, 1, 1, 4)
    np.testing.assert_array_equal(hidden[:, 0, 0], [[0, 0, 0, 1], [0, 1, 1, 1], [0, 0, 0, 0]])


@pytest.mark.parametrize("name", FAMILIES)
def test_each_sentence_of_a_batch_is_its_own_pass(name):
    from attncli.models import layers

    model = load(name)
    ids = [model.encode(s).ids for s in SENTENCES]
    pad = getattr(model.config, "padding_idx", None) or 0
    got = dict(layers.forward_many(model.family, ids, model.weights, model.config, pad=pad, keep=(0, 1), batch=4))
    assert sorted(got) == list(range(len(ids)))  # each sentence once
    assert len({len(i) for i in ids}) > 2  # batches that pad
    for b, one in enumerate(ids):
        alone = model.family.forward(one, model.weights, model.config, keep=(0, 1))
        batched = got[b]
        assert close(batched.hidden, alone.hidden) and close(batched.weights, alone.weights)
        assert batched.steps.keys() == alone.steps.keys()
        for l in alone.steps:
            for step, M in alone.steps[l].items():
                assert close(batched.steps[l][step], M), (l, step)
        assert (batched.weights.sum(axis=-1) == pytest.approx(1.0, abs=1e-12))


def test_a_batch_of_one_is_the_pass_alone_to_the_bit():
    from attncli.models import layers

    model = load("tiny-bert")
    ids = [model.encode(s).ids for s in SENTENCES[:3]]
    for b, batched in layers.forward_many(model.family, ids, model.weights, model.config, batch=1):
        alone = model.family.forward(ids[b], model.weights, model.config)
        np.testing.assert_array_equal(batched.hidden, alone.hidden)
        np.testing.assert_array_equal(batched.weights, alone.weights)


def test_a_batch_refused_runs_again_a_sentence_at_a_time_and_only_the_one_at_fault_is_refused():
    from attncli.models import bert, layers

    model = load("tiny-bert")
    ids = [model.encode(s).ids for s in SENTENCES[:4]]
    poison = len(ids[1])  # a pass over a sentence of this length overflows, alone or in a batch

    class Family:
        pass_bytes = staticmethod(bert.pass_bytes)

        @staticmethod
        def run(x, weights, config, to, *, lengths=None):
            if poison in (np.shape(x)[-1:] if lengths is None else lengths):
                raise ModelError("the hidden states after layer 1 leave float64's range")
            return bert.run(x, weights, config, to, lengths=lengths)

    got = dict(layers.forward_many(Family, ids, model.weights, model.config))
    hit = [b for b in got if len(ids[b]) == poison]
    for b, result in got.items():
        if b in hit:
            assert isinstance(result, ModelError)
        else:
            assert close(result.weights, bert.forward(ids[b], model.weights, model.config).weights)


def test_stats_over_a_model_in_batches_is_stats_a_sentence_at_a_time(tmp_path, monkeypatch):
    from attncli.models import layers

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES * 3) + "\n", encoding="utf-8")
    for name in ("tiny-bert", "tiny-gpt2"):
        model = str(MODELS / name)
        batched = ok(run("stats", corpus, "--model", model, "--json"))
        monkeypatch.setattr(layers, "BATCH", 1)
        alone = ok(run("stats", corpus, "--model", model, "--json"))
        monkeypatch.undo()
        assert len(batched) == len(alone) > 1
        for a, b in zip(batched, alone):
            x, y = list(_leaves(a)), list(_leaves(b))
            assert [type(v) for v in x] == [type(v) for v in y]
            for u, v in zip(x, y):
                if isinstance(u, float):
                    assert u == pytest.approx(v, rel=1e-12, abs=1e-15)
                else:
                    assert u == v


def _leaves(doc):
    """Every key and value of a JSON document, in order."""
    if isinstance(doc, dict):
        for key in sorted(doc):
            yield key
            yield from _leaves(doc[key])
    elif isinstance(doc, list):
        for item in doc:
            yield from _leaves(item)
    else:
        yield doc


def test_batch_over_a_model_in_batches_is_each_line_alone_and_the_same_bytes_for_any_jobs(tmp_path, monkeypatch):
    """batch --model runs a chunk's lines in batches: each document equals scores_doc's of
    the line alone within 1e-12 relative, a line the model refuses is refused in the words of
    the one-sentence path, and --jobs 2 writes the bytes --jobs 1 does."""
    from attncli.documents.sentence import scores_doc
    from attncli.encoder import Options
    from attncli.models import layers
    from attncli.models.encoder import Trained

    corpus = tmp_path / "c.txt"
    too_long = " ".join(["word"] * 600)  # past the tiny models' positions
    corpus.write_text("\n".join(SENTENCES + ["", too_long] + SENTENCES[::-1]) + "\n", encoding="utf-8")
    for name in ("tiny-bert", "tiny-llama"):
        model = str(MODELS / name)
        one = run("batch", corpus, "--model", model)
        two = run("batch", corpus, "--model", model, "--jobs", "2")
        assert two.stdout == one.stdout and two.exit_code == one.exit_code
        docs = [json.loads(line) for line in one.stdout.splitlines()]
        assert sum("error" in doc for doc in docs) >= 1 and len(docs) > len(SENTENCES)
        trained = load(name)
        monkeypatch.setattr(layers, "BATCH", 1)  # the one-sentence path
        single_run = run("batch", corpus, "--model", model)
        monkeypatch.undo()
        assert single_run.exit_code == one.exit_code
        alone = [json.loads(line) for line in single_run.stdout.splitlines()]
        assert len(alone) == len(docs)
        for doc, single in zip(docs, alone):
            if "error" in single:
                assert doc == single
                continue
            reference = scores_doc(doc["sentence"], Trained(trained, trained.config.layers), Options())
            for got in (doc, single):
                for key in ("scores", "weights"):
                    assert close(np.asarray(got[key]), np.asarray(reference[key]))


def test_linear_weights_are_laid_out_for_the_products_and_embeddings_for_their_rows():
    """bert's and llama's Linear weights (out, in) are read so that their transpose is in C
    order (the products' X W), the same numbers as the file's; the embeddings stay in rows."""

    for name in ("tiny-bert", "tiny-llama"):
        model = load(name)
        for key, W in model.weights.items():
            if W.ndim == 2 and "embed" not in key:
                assert W.T.flags.c_contiguous, key
            elif W.ndim == 2:
                assert W.flags.c_contiguous, key
        import types

        from attncli.models import weights as model_weights

        as_held = types.SimpleNamespace(**{k: getattr(model.family, k) for k in dir(model.family)
                                           if not k.startswith("__") and k != "LINEAR_LAYOUT"})
        raw = model_weights.read_weights(MODELS / name, model.config, as_held)  # the family without it: as the file holds them
        assert raw.keys() == model.weights.keys()
        assert all(np.array_equal(raw[k], model.weights[k]) for k in raw)
