"""The tiny models of tests/data/models/ and their references (NAME.npz, what transformers +
torch computed with them; made by tests/data/make_model_references.py) agree with
themselves: rows of weights sum to 1, a decoder sees no later piece and Mistral none
beyond its window, every array has the sizes config.json gives, and the weights files are
the ones the references were computed with. Numpy alone: no torch, nothing of attncli."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

MODELS = Path(__file__).parent / "data" / "models"
NAMES = ["tiny-bert", "tiny-distilbert", "tiny-roberta", "tiny-xlm-roberta", "tiny-gpt2", "tiny-llama", "tiny-qwen2",
         "tiny-mistral"]
DECODERS = {"tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-mistral"}
# config.json's names for layers, heads and the hidden size, where a family has its own
SIZES = {"distilbert": ("n_layers", "n_heads", "dim"), "gpt2": ("n_layer", "n_head", "n_embd")}
SIZES_MOST = ("num_hidden_layers", "num_attention_heads", "hidden_size")
SENTENCES = ["The earth is like an orange", "I sat on the bank of the river", "The bank raised interest rates",
             "Attention didn't tokenize unbelievably well"]


def config(name: str) -> dict:
    return json.loads((MODELS / name / "config.json").read_text(encoding="utf-8"))


def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(MODELS / f"{name}.npz") as data:
        return {key: data[key] for key in data.files}


def sentences(ref: dict[str, np.ndarray]) -> range:
    return range(len(ref["sentences"]))


def sizes(name: str) -> tuple[int, int, int, int]:
    """Layers, heads (the query heads), hidden size and vocabulary, as config.json says."""
    c = config(name)
    layers, heads, hidden = SIZES.get(c["model_type"], SIZES_MOST)
    return c[layers], c[heads], c[hidden], c["vocab_size"]


def test_every_model_has_its_folder_and_reference():
    assert sorted(p.name for p in MODELS.iterdir() if p.is_dir()) == sorted(NAMES)
    # beside them the references of the measures of context mixing (test_contributions.py)
    assert sorted(p.stem for p in MODELS.glob("*.npz") if not p.stem.startswith("contributions-")) == sorted(NAMES)
    contributions = {p.stem.removeprefix("contributions-") for p in MODELS.glob("contributions-*.npz")}
    assert contributions <= set(NAMES) | {"minilm"}


def test_the_models_and_references_stay_small():
    total = sum(p.stat().st_size for p in MODELS.rglob("*") if p.is_file())
    assert total < 3_500_000  # 3.24 MB: eight models, their references, and those of contributions.py


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_covers_the_sentences_and_one_longer_than_the_window(name):
    ref = reference(name)
    assert list(ref["sentences"][:4]) == SENTENCES
    assert len(str(ref["sentences"][4]).split()) >= 20


@pytest.mark.parametrize("name", NAMES)
def test_shapes_follow_config(name):
    layers, heads, hidden, vocab = sizes(name)
    ref = reference(name)
    for k in sentences(ref):
        ids = ref[f"ids_{k}"]
        T = ids.shape[0]
        assert ids.dtype == np.int32 and ids.ndim == 1
        assert 0 <= ids.min() and ids.max() < vocab
        assert ref[f"offsets_{k}"].shape == (T, 2) and ref[f"offsets_{k}"].dtype == np.int32
        assert ref[f"attentions_{k}"].shape == (layers, heads, T, T)
        assert ref[f"hidden_{k}"].shape == (layers + 1, T, hidden)
        assert {ref[f"{key}_{k}"].dtype for key in ("attentions", "hidden")} == {np.dtype(np.float32)}
        if name in DECODERS:
            assert ref[f"prenorm_{k}"].shape == (T, hidden)
            assert ref[f"logits_{k}"].shape == (T, vocab)
        else:
            assert f"prenorm_{k}" not in ref and f"logits_{k}" not in ref


@pytest.mark.parametrize("name", NAMES)
def test_offsets_are_spans_of_the_sentence(name):
    ref = reference(name)
    for k in sentences(ref):
        start, end = ref[f"offsets_{k}"].T
        assert (0 <= start).all() and (start <= end).all() and end.max() == len(ref["sentences"][k])


@pytest.mark.parametrize("name", NAMES)
def test_every_row_of_attention_sums_to_one(name):
    ref = reference(name)
    for k in sentences(ref):
        attentions = ref[f"attentions_{k}"]
        assert (attentions >= 0).all()
        np.testing.assert_allclose(attentions.sum(axis=-1), 1, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_decoders_see_no_later_piece_and_encoders_see_all(name):
    ref = reference(name)
    for k in sentences(ref):
        attentions = ref[f"attentions_{k}"]
        later = np.triu(np.ones(attentions.shape[-2:], dtype=bool), k=1)  # (T, T)
        if name in DECODERS:
            assert (attentions[..., later] == 0).all()
        else:
            assert (attentions > 0).all()


def test_mistral_sees_its_own_piece_and_the_window_before_it():
    """sliding_window w: a row t keeps the keys t - w + 1 .. t, and nothing before."""
    w = config("tiny-mistral")["sliding_window"]
    ref = reference("tiny-mistral")
    long = max(sentences(ref), key=lambda k: ref[f"ids_{k}"].shape[0])
    attentions = ref[f"attentions_{long}"]
    T = attentions.shape[-1]
    assert T > 2 * w
    q, k = np.indices((T, T))
    window = (k <= q) & (k > q - w)
    assert (attentions[..., ~window] == 0).all()
    assert (attentions[..., window] > 0).all()


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_the_last_hidden_state_is_after_the_final_norm(name):
    ref = reference(name)
    for k in sentences(ref):
        assert not np.allclose(ref[f"prenorm_{k}"], ref[f"hidden_{k}"][-1])


@pytest.mark.parametrize("name", NAMES)
def test_attention_is_far_from_uniform(name):
    """A reference whose rows were nearly uniform would hide a wrong score (RoPE, a scale)."""
    ref = reference(name)
    peaks = [ref[f"attentions_{k}"].max(axis=-1).mean() for k in sentences(ref)]
    uniform = [(1 / (ref[f"attentions_{k}"] > 0).sum(axis=-1)).mean() for k in sentences(ref)]
    assert np.mean(peaks) > 2 * np.mean(uniform)


@pytest.mark.parametrize("name", NAMES)
def test_weights_files_are_those_the_reference_was_made_with(name):
    recorded = dict(v.split(" sha256=") for v in reference(name)["versions"] if " sha256=" in v)
    folder = MODELS / name
    assert sorted(recorded) == sorted(p.name for p in folder.glob("*.safetensors"))
    for file, digest in recorded.items():
        assert hashlib.sha256((folder / file).read_bytes()).hexdigest() == digest, file


@pytest.mark.parametrize("name", NAMES)
def test_a_sharded_model_indexes_every_shard(name):
    folder = MODELS / name
    index = folder / "model.safetensors.index.json"
    shards = sorted(p.name for p in folder.glob("*.safetensors"))
    if not index.exists():
        assert shards == ["model.safetensors"]
        return
    assert set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()) == set(shards)
    assert len(shards) >= 2


@pytest.mark.parametrize("name", NAMES)
def test_no_file_save_pretrained_would_not_write(name):
    names = {p.name for p in (MODELS / name).iterdir()}
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= names
    assert "pytorch_model.bin" not in names
    assert ("generation_config.json" in names) == (name in DECODERS)
