"""GPT-2's forward pass (attncli/models/gpt2.py) against the real thing: tests/data/models/
tiny-gpt2, a tiny random GPT-2, and what transformers + torch computed with it
(tiny-gpt2.npz): every layer's attention and hidden states to 1e-5, the logits to 1e-4,
from the reference's own ids; its tokenizer's pieces and offsets; the causal mask on any
sentence; and what config.json and the weights' file may hold."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from attncli import attention, models
from attncli.errors import ModelError
from attncli.models import files, gpt2

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")

TINY = Path(__file__).parent / "data" / "models" / "tiny-gpt2"


@pytest.fixture(scope="module")
def model():
    return models.load_model(str(TINY))


@pytest.fixture(scope="module")
def reference():
    with np.load(TINY.with_suffix(".npz")) as data:
        return {key: data[key] for key in data.files}


def cases(reference):
    return range(len(reference["sentences"]))


def test_it_is_read_as_gpt2(model):
    c = model.config
    assert model.family is gpt2 and model.causal
    assert (c.layers, c.heads, c.hidden, c.intermediate, c.max_positions, c.vocab_size) == (2, 4, 32, 128, 64, 501)
    assert c.activation == "gelu_tanh" and c.norm_eps == 1e-5 and c.tied and c.d_head == 8


def test_every_layer_and_head_matches_transformers(model, reference):
    for k in cases(reference):
        run = gpt2.forward(reference[f"ids_{k}"], model.weights, model.config)
        alphas, hidden = reference[f"attentions_{k}"], reference[f"hidden_{k}"]
        assert run.weights.shape == alphas.shape and run.hidden.shape == hidden.shape
        for l in range(model.config.layers):
            assert np.abs(run.weights[l] - alphas[l]).max() < 1e-5, (k, l)
        for l in range(model.config.layers + 1):  # the last after ln_f, as transformers gives it
            assert np.abs(run.hidden[l] - hidden[l]).max() < 1e-5, (k, l)
        logits = gpt2.logits(run.hidden[-1], model.weights, model.config)  # (T, V)
        assert logits.shape == reference[f"logits_{k}"].shape
        assert np.abs(logits - reference[f"logits_{k}"]).max() < 1e-4, k


def test_the_state_before_the_final_norm_is_the_references(model, reference):
    """Pass.hidden's last entry is after ln_f; before it, the last block's output (prenorm)."""
    for k in cases(reference):
        ids = reference[f"ids_{k}"]
        run = gpt2.forward(ids[:], model.weights, model.config, keep=(1,))
        X = run.hidden[1] + run.steps[1]["A"]  # the residual after the last attention
        prenorm = X + gpt2.feed_forward(gpt2.norm(X, model.weights, "h.1.ln_2", model.config), model.weights, 1,
                                        model.config)
        assert np.abs(prenorm - reference[f"prenorm_{k}"]).max() < 1e-5


def test_word_pieces_and_offsets_are_the_reference_tokenizers(model, reference):
    for k in cases(reference):
        pieces = model.encode(str(reference["sentences"][k]))
        np.testing.assert_array_equal(pieces.ids, reference[f"ids_{k}"])
        np.testing.assert_array_equal(np.array(pieces.offsets), reference[f"offsets_{k}"])
        assert not any(pieces.special)  # GPT-2 adds no marker to a sentence


@pytest.mark.parametrize("seed", range(6))
def test_no_piece_attends_to_a_later_one(model, seed):
    """On random sentences of random pieces: every layer's every head gives exactly 0 above
    the diagonal, and a piece's states are those of the sentence cut after it (what comes
    later reaches nothing before it)."""
    rng = np.random.default_rng(seed)
    T = int(rng.integers(1, model.config.max_positions + 1))
    ids = rng.integers(0, model.config.vocab_size, size=T)
    run = gpt2.forward(ids, model.weights, model.config)
    above = np.triu(np.ones((T, T), dtype=bool), k=1)
    assert (run.weights[..., above] == 0.0).all()
    np.testing.assert_allclose(run.weights.sum(axis=-1), 1.0, atol=1e-12)
    cut = int(rng.integers(1, T + 1))
    shorter = gpt2.forward(ids[:cut], model.weights, model.config)
    np.testing.assert_allclose(shorter.hidden, run.hidden[:, :cut], atol=1e-12)
    np.testing.assert_allclose(shorter.weights, run.weights[..., :cut, :cut], atol=1e-12)


def test_the_steps_are_the_layers_projections(model, reference):
    """Q, K, V are c_attn's three blocks over the normed input; the output is the heads' sum
    of alpha_ij f(x_j) plus c_proj's bias (passed_on)."""
    ids = reference["ids_0"]
    run = gpt2.forward(ids, model.weights, model.config, keep=(0, 1))
    for l in (0, 1):
        steps = run.steps[l]
        N = gpt2.norm(run.hidden[l], model.weights, f"h.{l}.ln_1", model.config)
        W, b = gpt2.projections(model.weights, l)
        for role, M in (("query", steps["Q"]), ("key", steps["K"]), ("value", steps["V"])):
            np.testing.assert_allclose(M, N @ W[f"W_{role}"].astype(np.float64) + b[f"b_{role}"], atol=1e-12)
        F = gpt2.passed_on(steps["V"], model.weights, l, model.config)  # (H, T, D)
        A = np.einsum("hij,hjd->id", steps["weights"], F) + model.weights[f"h.{l}.attn.c_proj.bias"]
        np.testing.assert_allclose(A, steps["A"], atol=1e-12)
        np.testing.assert_allclose(steps["scores"], np.einsum("htd,hsd->hts", *(
            attention.split_heads(M, 4) for M in (steps["Q"], steps["K"]))), atol=1e-12)


def test_the_attention_is_attention_py(monkeypatch, model, reference):
    called = []
    for name in ("scores", "weights", "context", "multi_head_rows", "causal_mask"):
        original = getattr(attention, name)
        monkeypatch.setattr(attention, name, lambda *a, name=name, f=original, **k: called.append(name) or f(*a, **k))
    gpt2.forward(reference["ids_0"], model.weights, model.config)
    assert called.count("multi_head_rows") == called.count("scores") == called.count("weights") == 2
    assert called.count("causal_mask") == 1


def _copy(tmp_path) -> Path:
    folder = tmp_path / "m"
    shutil.copytree(TINY, folder)
    return folder


def _edit_config(folder: Path, **changes) -> None:
    raw = json.loads((folder / "config.json").read_text())
    raw.update(changes)
    (folder / "config.json").write_text(json.dumps({k: v for k, v in raw.items() if v is not ...}))


@pytest.mark.parametrize("changes,words", [
    ({"scale_attn_weights": False}, "scale_attn_weights is False; attncli runs GPT-2's attention with "
                                    "scale_attn_weights true"),
    ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx is True; attncli runs GPT-2's "
                                                "attention with scale_attn_by_inverse_layer_idx false"),
    ({"reorder_and_upcast_attn": "yes"}, "reorder_and_upcast_attn is 'yes'; it must be true or false"),
    ({"tie_word_embeddings": 1}, "tie_word_embeddings is 1; it must be true or false"),
    ({"activation_function": "relu"}, "activation_function is 'relu'; attncli runs gelu_new, gelu_pytorch_tanh, gelu"),
    ({"n_head": 5}, "n_embd 32 is not divisible by n_head 5"),
    ({"n_layer": 0}, "n_layer is 0; it must be a whole number from 1 to 128"),
    ({"n_embd": ...}, "n_embd is None; it must be a whole number from 1 to 16,384"),
    ({"n_positions": 10 ** 9}, "n_positions is 1000000000; it must be a whole number from 1 to 65,536"),
    ({"n_inner": 0}, "n_inner is 0; it must be a whole number from 1 to 65,536"),
    ({"n_inner": True}, "n_inner is True"),
    ({"layer_norm_epsilon": -1}, "layer_norm_epsilon is -1; it must be a number between 0 and 1"),
])
def test_configs_refused_by_name(tmp_path, changes, words):
    folder = _copy(tmp_path)
    _edit_config(folder, **changes)
    with pytest.raises(ModelError, match=f"config.json: {words}".replace("(", r"\(").replace(")", r"\)")):
        models.load_model(str(folder))


def test_what_a_config_may_leave_out(tmp_path, model, reference):
    """n_inner null is 4 n_embd; reorder_and_upcast_attn (torch's float32 product) changes
    nothing in float64; the epsilon and activation have GPT-2's defaults."""
    folder = _copy(tmp_path)
    _edit_config(folder, n_inner=None, reorder_and_upcast_attn=True, layer_norm_epsilon=..., activation_function=...)
    again = models.load_model(str(folder))
    assert again.config == model.config


def _rewrite(path: Path, names, extra: dict | None = None) -> None:
    """The safetensors file with its tensors renamed by names(old) and `extra` raw tensors added."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header, body = json.loads(data[8:8 + n]), data[8 + n:]
    out = {("__metadata__" if k == "__metadata__" else names(k)): v for k, v in header.items()}
    for name, (dtype, shape, raw) in (extra or {}).items():
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    head = json.dumps(out).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + body)


def test_names_without_the_prefix_and_torch_buffers(tmp_path, model, reference):
    """The hub's gpt2 stores h.0.attn.c_attn.weight, wte.weight (no "transformer."), and older
    files hold the causal mask as attn.bias and attn.masked_bias: read as well, never used."""
    folder = _copy(tmp_path)
    T = 64
    causal = np.tril(np.ones((1, 1, T, T), dtype=np.uint8)).tobytes()
    _rewrite(folder / "model.safetensors", lambda k: k.removeprefix("transformer."),
             {"h.0.attn.bias": ("U8", [1, 1, T, T], causal), "h.0.attn.masked_bias": ("F32", [], b"\x00\x00\x00\xc0")})
    again = models.load_model(str(folder))
    ids = reference["ids_1"]
    np.testing.assert_array_equal(gpt2.forward(ids, again.weights, again.config).hidden,
                                  gpt2.forward(ids, model.weights, model.config).hidden)


def test_an_untied_head_is_lm_head(tmp_path, model, reference):
    folder = _copy(tmp_path)
    _edit_config(folder, tie_word_embeddings=False)
    with pytest.raises(ModelError, match="lacks the tensor lm_head.weight"):
        models.load_model(str(folder))
    head = np.random.default_rng(0).normal(size=(501, 32)).astype("<f4")
    _rewrite(folder / "model.safetensors", lambda k: k, {"lm_head.weight": ("F32", [501, 32], head.tobytes())})
    untied = models.load_model(str(folder))
    X = gpt2.forward(reference["ids_0"], untied.weights, untied.config).hidden[-1]
    np.testing.assert_allclose(gpt2.logits(X, untied.weights, untied.config), X @ head.T.astype(np.float64),
                               atol=1e-12)


def test_logits_are_the_same_a_block_of_the_vocabulary_at_a_time(model, reference, monkeypatch):
    X = gpt2.forward(reference["ids_2"], model.weights, model.config).hidden[-1]
    whole = X @ model.weights["wte.weight"].T.astype(np.float64)
    monkeypatch.setattr(gpt2, "LOGIT_ROWS", 100)  # 501 rows: five blocks, the last of one row
    np.testing.assert_allclose(gpt2.logits(X, model.weights, model.config), whole, rtol=1e-13, atol=1e-13)


def test_logits_that_overflow_are_refused(model):
    weights = {**model.weights, "wte.weight": model.weights["wte.weight"] * np.float32(1e30)}
    with pytest.raises(ModelError, match="the logits leave float64's range"):
        gpt2.logits(np.full((1, 32), 1e300), weights, model.config)


def test_a_tokenizer_past_the_embedding_table(tmp_path):
    folder = _copy(tmp_path)
    raw = json.loads((folder / "tokenizer.json").read_text())
    raw["model"]["vocab"]["Ġfaraway"] = 900
    (folder / "tokenizer.json").write_text(json.dumps(raw))
    with pytest.raises(ModelError, match="gives the piece 'Ġfaraway' the id 900, and config.json's vocab_size is 501"):
        models.load_model(str(folder))
    (folder / "tokenizer.json").write_text('{"model": 3}')
    with pytest.raises(ModelError, match="tokenizer.json: its model is None; attncli reads GPT-2's tokenizers, of type "
                                         "'BPE'"):
        models.load_model(str(folder))
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="lacks tokenizer.json"):
        models.load_model(str(folder))


def test_a_sentence_beyond_the_positions(model):
    with pytest.raises(ModelError, match="word pieces long, and tiny-gpt2 reads at most 64"):
        model.encode("the bank " * 40)


def test_pass_bytes_counts_the_weights_and_states(model):
    T = 20
    assert gpt2.pass_bytes(T, model.config) >= 8 * (2 * 4 * T * T + 3 * T * 32) + T * T
    assert files.Model.piece(model, 500) == "<|endoftext|>" and model.piece(10_000) is None
