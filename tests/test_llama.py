"""The Llama family's numpy forward pass (models/llama.py) against the real thing and against
loops: tiny-llama, tiny-qwen2 and tiny-mistral as transformers + torch computed them
(tests/data/models/, made by tests/data/make_model_references.py), every layer, head and
sentence; a tiny model the tests write, held to an independent loop implementation; and
every config.json the family refuses."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from attncli import attention, models, rotary
from attncli.errors import ModelError
from attncli.models import llama
from attncli.system import limits
from clirunner import ok, run

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
from tinyllama import LLAMA, MISTRAL, loop_forward, tiny_weights, write_model  # noqa: E402

DATA = Path(__file__).parent / "data" / "models"
REFERENCES = ("tiny-llama", "tiny-qwen2", "tiny-mistral")


@pytest.fixture(scope="module", params=REFERENCES)
def reference(request):
    with np.load(DATA / f"{request.param}.npz") as data:
        arrays = {key: data[key] for key in data.files}
    return request.param, models.load_model(str(DATA / request.param)), arrays


def sentences(arrays):
    return range(len(arrays["sentences"]))


def test_every_layer_head_and_logit_matches_transformers(reference):
    """Attention weights within 1e-5 and logits within 1e-4, absolute; hidden states within
    1e-5 of each state's own scale. The references are float32, and transformers runs RMSNorm,
    softmax and RoPE in float32 whatever the model's dtype: between the norms the residual
    stream of these random models grows to 60, where float32's spacing is 4e-6, and the
    reference is off by up to 8e-5 there. Against transformers patched to run every step in
    float64 the same pass agrees to 1.2e-13 (hidden states), 1.1e-14 (weights)."""
    name, model, arrays = reference
    for k in sentences(arrays):
        ids = arrays[f"ids_{k}"]
        run_ = llama.forward(ids, model.weights, model.config)
        alphas, hidden = arrays[f"attentions_{k}"], arrays[f"hidden_{k}"]
        assert run_.weights.shape == alphas.shape and run_.hidden.shape == hidden.shape
        np.testing.assert_allclose(run_.weights, alphas, rtol=0, atol=1e-5)
        for state, expected in zip(run_.hidden, hidden):
            assert np.abs(state - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())
        logits = llama.logits(run_.hidden[-1], model.weights, model.config)
        np.testing.assert_allclose(logits, arrays[f"logits_{k}"], rtol=0, atol=1e-4)


def test_the_pieces_are_the_reference_tokenizers(reference):
    name, model, arrays = reference
    for k in sentences(arrays):
        pieces = model.encode(str(arrays["sentences"][k]))
        np.testing.assert_array_equal(pieces.ids, arrays[f"ids_{k}"])
        np.testing.assert_array_equal(np.array(pieces.offsets), arrays[f"offsets_{k}"])


def test_scores_on_the_command_line_is_the_reference(reference):
    """attncli scores --model FOLDER --json, end to end: its pieces the tokenizer's, and every
    head of the last layer (the default) the reference's."""
    name, model, arrays = reference
    k = 1
    (doc,) = ok(run("scores", str(arrays["sentences"][k]), "--model", DATA / name, "--json"))
    assert doc["tokens"] == [model.tokenizer.id_to_token(int(i)) for i in arrays[f"ids_{k}"]]
    np.testing.assert_allclose([head["weights"] for head in doc["heads"]], arrays[f"attentions_{k}"][-1],
                               rtol=0, atol=1e-5)
    assert doc["model"]["heads"] == 4
    assert doc["model"].get("kv_heads") == {"tiny-llama": 2, "tiny-qwen2": 1, "tiny-mistral": 2}[name]
    assert doc["qkv"] == {"kind": "model", "d_k": model.config.hidden, "path": name, "heads": 4}


def test_the_sliding_window_hides_exactly(reference):
    """tiny-mistral's window of 4: every cell more than 3 pieces back, and every cell ahead,
    is exactly 0, in the references as here; a model without one is only causal."""
    name, model, arrays = reference
    for k in sentences(arrays):
        T = len(arrays[f"ids_{k}"])
        hidden = llama.mask(T, model.config)
        expected = attention.causal_window_mask(T, 4) if name == "tiny-mistral" else attention.causal_mask(T)
        np.testing.assert_array_equal(hidden, expected)
        weights = llama.forward(arrays[f"ids_{k}"], model.weights, model.config).weights
        assert (weights[..., hidden] == 0).all() and (arrays[f"attentions_{k}"][..., hidden] == 0).all()
        assert (weights[..., ~hidden] > 0).all()
    if name == "tiny-mistral":
        assert hidden[10, 6] and not hidden[10, 7]  # position i - 4 hidden, i - 3 seen, as transformers


def test_bf16_shards_stay_as_stored(reference):
    """tiny-llama's BF16 weights, in four shards, are kept as their files hold them (16 bits
    a number; the others' F32), widened exactly as a pass reads them: each BF16 number the
    float32 whose upper half it is, and the files never written."""
    name, model, arrays = reference
    as_stored = np.dtype("<u2" if name == "tiny-llama" else "<f4")
    assert {model.weights.stored(n).dtype for n in model.weights} == {as_stored}
    if name == "tiny-llama":
        index = json.loads((DATA / name / "model.safetensors.index.json").read_text())
        assert len(set(index["weight_map"].values())) == 4
        # a BF16 number is a float32's upper half: the lower 16 bits of every weight are 0
        bits = np.concatenate([w.astype(np.float32).view(np.uint32).ravel() for w in model.weights.values()])
        assert not (bits & 0xFFFF).any()
        for n in model.weights:
            upper = model.weights.stored(n).astype(np.uint32) << 16
            np.testing.assert_array_equal(model.weights[n], upper.view(np.float32))


def test_the_steps_are_what_the_scores_use(reference):
    """Pass.steps: Q and K as rotated and shared, so that scores[h] = Q_h K_h^T; the keys and
    values of query heads sharing a key/value head are the same columns."""
    name, model, arrays = reference
    ids = arrays["ids_0"]
    c = model.config
    steps = llama.forward(ids, model.weights, c, keep=(0, 1)).steps[1]
    Qh, Kh, Vh = (attention.split_heads(steps[key], c.heads) for key in ("Q", "K", "V"))
    np.testing.assert_allclose(steps["scores"], Qh @ Kh.swapaxes(-1, -2), rtol=1e-13, atol=1e-12)
    group = c.heads // c.key_heads
    for h in range(c.heads):
        np.testing.assert_array_equal(Kh[h], Kh[h - h % group])
        np.testing.assert_array_equal(Vh[h], Vh[h - h % group])
    np.testing.assert_allclose(steps["Z"], steps["weights"] @ Vh, rtol=1e-12, atol=1e-12)
    # what each head passes on, weighted by its attention and summed, is the attention's output
    F = llama.passed_on(steps["V"], model.weights, 1, c)  # (H, T, D)
    np.testing.assert_allclose(np.einsum("hij,hjd->id", steps["weights"], F), steps["A"], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("config,prefix", [(LLAMA, "model."), (LLAMA, ""), (MISTRAL, "model.")])
def test_forward_equals_a_loop_implementation(tmp_path, config, prefix):
    """A model with what the references lack (attention_bias with b_O, tied embeddings, a
    head_dim of its own, the older rope_scaling key, names without "model.") and a Mistral
    with a window of 3 and llama3 frequencies, against loops: to 1e-12."""
    weights = tiny_weights(config, seed=3, prefix=prefix)
    write_model(tmp_path / "m", config, weights)
    model = models.load_model(str(tmp_path / "m"))
    pieces = model.encode("I sat on the bank of the river , the earth is like an orange")
    assert pieces.pieces[:3] == ["<s>", "▁I", "▁sat"] and pieces.special[:2] == [True, False]
    run_ = llama.forward(pieces.ids, model.weights, model.config, keep=(0,))
    hidden, alphas, logits = loop_forward(list(pieces.ids), weights, config, prefix)
    np.testing.assert_allclose(run_.hidden, hidden, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run_.weights, alphas, rtol=0, atol=1e-13)
    np.testing.assert_allclose(llama.logits(run_.hidden[-1], model.weights, model.config), logits, rtol=0,
                               atol=1e-11)
    np.testing.assert_array_equal(run_.steps[0]["weights"], run_.weights[0])


def test_attention_bias_adds_b_o(tmp_path):
    """A Llama's attention_bias puts a bias on q, k, v and o: with the o bias alone moved, the
    first layer's output moves by exactly it."""
    weights = tiny_weights(LLAMA, seed=1)
    write_model(tmp_path / "m", LLAMA, weights)
    base = models.load_model(str(tmp_path / "m"))
    b = np.float32(0.25) * np.arange(8, dtype=np.float32)
    moved = dict(base.weights)
    moved["layers.0.self_attn.o_proj.bias"] = base.weights["layers.0.self_attn.o_proj.bias"] + b
    c = base.config
    one = llama.attend(base.weights["embed_tokens.weight"][[1, 3, 4]].astype(np.float64), base.weights, 0, c,
                       rotary.rope_angles(np.arange(3), llama.frequencies(c)), llama.mask(3, c))
    two = llama.attend(base.weights["embed_tokens.weight"][[1, 3, 4]].astype(np.float64), moved, 0, c,
                       rotary.rope_angles(np.arange(3), llama.frequencies(c)), llama.mask(3, c))
    np.testing.assert_allclose(two["A"] - one["A"], np.broadcast_to(b, (3, 8)), atol=1e-6)
    assert "layers.0.self_attn.o_proj.bias" in llama.expected_shapes(c)
    plain = llama.read_config({**LLAMA, "attention_bias": False}, "config.json")
    assert not any(name.endswith(".bias") for name in llama.expected_shapes(plain))


def test_linear_scaling_divides_the_positions():
    """rope_scaling linear of factor f: the angles of position m are those of m / f unscaled."""
    c = llama.read_config(LLAMA, "config.json")
    plain = llama.read_config({**LLAMA, "rope_scaling": None}, "config.json")
    m = np.arange(20)
    for ours, theirs in zip(rotary.rope_angles(m, llama.frequencies(c)),
                            rotary.rope_angles(m / 2.0, llama.frequencies(plain))):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-15)
    assert c.rope.theta == 100.0 and plain.rope.kind == "default"


def test_the_api_is_attention_py(monkeypatch, tmp_path):
    """No second copy of the attention math: a layer rotates its queries and keys and shares
    its keys and values (rotary.py's), and runs multi_head_rows (attention.py's), the heads
    split and merged by attention.py alone."""
    write_model(tmp_path / "m")
    model = models.load_model(str(tmp_path / "m"))
    called = []
    for name in ("rotate", "share_heads", "multi_head_rows", "scores", "weights", "context", "merge_heads"):
        module = rotary if name in ("rotate", "share_heads") else attention
        original = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, name=name, f=original, **k: called.append(name) or f(*a, **k))
    llama.forward(model.encode("the earth").ids, model.weights, model.config)
    assert [called.count(n) for n in ("rotate", "share_heads", "multi_head_rows", "scores", "weights", "context")] == \
        [4, 4, 2, 2, 2, 2]
    assert called.count("merge_heads") == 4 + 4 + 2  # inside rotate, share_heads and multi_head_rows alone


@pytest.mark.parametrize("T", [16, 200])
@pytest.mark.parametrize("keep", [(0,), (1,)])
def test_pass_bytes_bounds_what_the_pass_holds(T, keep):
    """The estimate every run is checked against is above the pass's measured peak
    (tracemalloc: numpy's arrays), and not far above it."""
    model = models.load_model(str(DATA / "tiny-qwen2"))
    ids = np.arange(T) % 400
    tracemalloc.start()
    try:
        llama.forward(ids, model.weights, model.config, keep=keep)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0.5 < peak / llama.pass_bytes(T, model.config) <= 1


def test_logits_are_checked_against_memory(monkeypatch):
    model = models.load_model(str(DATA / "tiny-qwen2"))
    X = np.zeros((40, model.config.hidden))
    monkeypatch.setattr(limits, "available", lambda: 100_000)
    with pytest.raises(limits.ResourceError, match="the logits of 40 word pieces over 512 \\(T x V\\)"):
        llama.logits(X, model.weights, model.config)


def test_tied_logits_are_the_embeddings(tmp_path):
    write_model(tmp_path / "m")
    model = models.load_model(str(tmp_path / "m"))
    assert "lm_head.weight" not in model.weights
    X = np.eye(8)[:3]
    np.testing.assert_array_equal(llama.logits(X, model.weights, model.config),
                                  model.weights["embed_tokens.weight"][:, :3].T.astype(np.float64))


def test_the_heads_view_says_which_share(tmp_path):
    result = run("heads", "the earth is like an orange", "--model", DATA / "tiny-qwen2", "--layer", "1",
                 "--format", "table")
    assert result.exit_code == 0, result.stderr
    assert "model tiny-qwen2 (2 layers x 4 heads, 1 key/value head, d_model = 32" in result.stdout
    assert "query heads sharing keys and values (grouped-query attention): h1-h4\n" in result.stdout
    result = run("heads", "the earth is", "--model", write_model(tmp_path / "m"), "--format", "table")
    assert "h1-h2, h3-h4\n" in result.stdout and "scale 0.5 = 1/sqrt(4)" in result.stdout
    (doc,) = ok(run("heads", "the earth is", "--model", tmp_path / "m", "--json"))
    assert doc["model"] == {"name": "m", "layers": 2, "heads": 4, "d_model": 8, "kv_heads": 2, "d_head": 4}


# --- config.json: what the family reads, and what it refuses by name


def _config(base=LLAMA, **changes):
    return {k: v for k, v in {**base, **changes}.items() if v is not None}


def test_what_transformers_reads_is_read():
    c = llama.read_config(_config(num_key_value_heads=None, head_dim=None, rope_scaling=None, rms_norm_eps=None,
                                  hidden_act=None, attention_bias=None, tie_word_embeddings=None), "config.json")
    assert (c.kv_heads, c.d_head, c.rope.theta, c.norm_eps, c.qkv_bias, c.o_bias, c.tied) == \
        (4, 2, 100.0, 1e-6, False, False, False)
    qwen = llama.read_config(_config(model_type="qwen2", attention_bias=None), "config.json")
    assert (qwen.qkv_bias, qwen.o_bias, qwen.window) == (True, False, 0)
    # Mistral's window is every layer's, and 4,096 where config.json says nothing of it
    assert llama.read_config(_config(MISTRAL, sliding_window=None), "config.json").window == 4096
    assert llama.read_config({**MISTRAL, "sliding_window": None}, "config.json").window == 0
    # Qwen2's is every layer's from max_window_layers on, and only with use_sliding_window
    assert llama.read_config(_config(model_type="qwen2", use_sliding_window=True, sliding_window=5,
                                     max_window_layers=0), "config.json").window == 5
    assert llama.read_config(_config(model_type="qwen2", use_sliding_window=False, sliding_window=5,
                                     max_window_layers=0), "config.json").window == 0
    assert llama.read_config(_config(model_type="qwen2", use_sliding_window=True, sliding_window=5),
                             "config.json").window == 0  # max_window_layers 28: no layer of 2
    # rope_scaling (older) wins over rope_parameters, as transformers 5 reads them
    both = llama.read_config(_config(rope_parameters={"rope_type": "default", "rope_theta": 7.0}), "config.json")
    assert (both.rope.kind, both.rope.theta) == ("linear", 100.0)
    llama3 = llama.read_config(MISTRAL, "config.json").rope
    assert (llama3.kind, llama3.theta, llama3.factor, llama3.original_max_positions) == ("llama3", 50.0, 4.0, 8)


@pytest.mark.parametrize("changes,words", [
    ({"rope_scaling": {"type": "yarn", "factor": 4.0}}, "rope_scaling is of type 'yarn'; attncli runs rope_scaling "
                                                        "of type linear or llama3 (or none)"),
    ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "rope_scaling is of type 'dynamic'"),
    ({"rope_scaling": None, "rope_parameters": {"rope_type": "longrope"}}, "rope_parameters is of type 'longrope'"),
    ({"rope_scaling": {"type": "linear"}}, "factor is None; it must be a number of at least 1"),
    ({"rope_scaling": {"type": "linear", "factor": 0.5}}, "factor is 0.5; it must be a number of at least 1"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0}},
     "llama3 scaling needs 0 < low_freq_factor < high_freq_factor"),
    ({"rope_scaling": {"full_attention": {"rope_type": "default"}}}, "gives RoPE by layer type ('full_attention')"),
    ({"rope_scaling": [1, 2]}, "rope_scaling is [1, 2]; it must be an object"),
    ({"partial_rotary_factor": 0.5}, "partial_rotary_factor is 0.5; attncli turns every feature of a head"),
    ({"rope_theta": 0}, "rope_theta is 0; it must be a number of at least 1"),
    ({"rope_theta": float("inf")}, "rope_theta is inf"),
    ({"num_key_value_heads": 3}, "num_key_value_heads 3 does not divide num_attention_heads 4"),
    ({"num_key_value_heads": 8}, "num_key_value_heads is 8; it must be a whole number from 1 to 4"),
    ({"num_key_value_heads": 0}, "num_key_value_heads is 0"),
    ({"num_hidden_layers": 0}, "num_hidden_layers is 0; it must be a whole number from 1 to 128"),
    ({"num_hidden_layers": 10**9}, "num_hidden_layers is 1000000000"),
    ({"hidden_size": "8"}, "hidden_size is '8'"),
    ({"vocab_size": True}, "vocab_size is True"),
    ({"intermediate_size": None}, "intermediate_size is None"),
    ({"max_position_embeddings": 1 << 30}, "max_position_embeddings is 1073741824; it must be a whole number from 1 "
                                           "to 16,777,216"),
    ({"head_dim": 5}, "head_dim is 5; rotary embeddings turn pairs of features, so it must be even"),
    ({"head_dim": 4096}, "head_dim is 4096; it must be a whole number from 2 to 1,024"),
    ({"head_dim": None, "hidden_size": 10}, "hidden_size 10 is not divisible by num_attention_heads 4, and no "
                                            "head_dim is given"),
    ({"rms_norm_eps": 0}, "rms_norm_eps is 0; it must be a number between 0 and 1"),
    ({"hidden_act": "gelu"}, "hidden_act is 'gelu'; attncli runs the Llama family's silu"),
    ({"mlp_bias": True}, "mlp_bias is true; attncli runs Llama models whose feed-forward layers have no biases"),
    ({"attention_bias": "yes"}, "attention_bias is 'yes'; it must be true or false"),
    ({"tie_word_embeddings": 1}, "tie_word_embeddings is 1; it must be true or false"),
    ({"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1},
     "its layers mix sliding_attention and full_attention (use_sliding_window, max_window_layers, layer_types); "
     "attncli runs a sliding window on every layer or on none"),
    ({"model_type": "qwen2", "layer_types": ["sliding_attention"] * 2},
     "layer_types says sliding_attention, and use_sliding_window is false or sliding_window null"),
    ({"model_type": "qwen2", "layer_types": ["full_attention"]}, "layer_types must list one of full_attention, "
                                                                 "sliding_attention for each of its 2 layers"),
    ({"model_type": "mistral", "sliding_window": 0}, "sliding_window is 0; it must be a whole number from 1"),
])
def test_configs_refused(tmp_path, changes, words):
    write_model(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text(json.dumps(_config(**changes), allow_nan=True))
    with pytest.raises(ModelError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        models.load_model(str(tmp_path / "m"))


def test_a_refusal_on_the_command_line_is_one_line(tmp_path):
    write_model(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text(json.dumps(_config(rope_scaling={"type": "yarn", "factor": 4.0})))
    result = run("scores", "the earth", "--model", tmp_path / "m")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (f"attncli: error: {tmp_path / 'm' / 'config.json'}: rope_scaling is of type 'yarn'; "
                             "attncli runs rope_scaling of type linear or llama3 (or none)\n")


def test_a_folder_without_tokenizer_json(tmp_path):
    write_model(tmp_path / "m")
    (tmp_path / "m" / "tokenizer.json").unlink()
    (tmp_path / "m" / "vocab.txt").write_text("the\n")
    with pytest.raises(ModelError, match="lacks tokenizer.json, which a Llama model's folder must hold"):
        models.load_model(str(tmp_path / "m"))


def test_a_tokenizer_past_the_embeddings(tmp_path):
    write_model(tmp_path / "m", _config(vocab_size=10), tiny_weights(_config(vocab_size=10)))
    with pytest.raises(ModelError, match="gives the piece '.+' the id 1[0-5], and config.json's vocab_size is 10"):
        models.load_model(str(tmp_path / "m"))


def test_an_untied_model_needs_its_head(tmp_path):
    weights = tiny_weights(MISTRAL)
    del weights["lm_head.weight"]
    write_model(tmp_path / "m", MISTRAL, weights)
    with pytest.raises(ModelError, match="lacks the tensor lm_head.weight, which a 2-layer model needs"):
        models.load_model(str(tmp_path / "m"))


@pytest.mark.parametrize("scaled,words", [
    (("model.embed_tokens.weight",), "the squares of the hidden states leave float64's range"),
    (("model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight"),
     "layer 1's attention scores leave float64's range"),
])
def test_numbers_that_overflow_are_refused(tmp_path, scaled, words):
    """F64 weights may be finite and far too large: where their products leave float64, the
    pass stops with the overflow named, never a row of zeros or NaN."""
    weights = tiny_weights(LLAMA)
    for name in scaled:
        weights[name] = weights[name].astype(np.float64) * 1e160
    write_model(tmp_path / "m", LLAMA, weights)
    model = models.load_model(str(tmp_path / "m"))
    with pytest.raises(ModelError, match=words):
        llama.forward(model.encode("the earth").ids, model.weights, model.config)


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen2", "tiny-mistral"])
@pytest.mark.parametrize("seed", range(4))
def test_no_piece_attends_to_a_later_one(name, seed):
    """On random sentences of random pieces: every layer's every head gives exactly 0 above
    the diagonal (and beyond Mistral's window), and a piece's states are those of the
    sentence cut after it: what comes later reaches nothing before it."""
    model = models.load_model(str(DATA / name))
    rng = np.random.default_rng(seed)
    T = int(rng.integers(1, model.config.max_positions + 1))
    ids = rng.integers(0, model.config.vocab_size, size=T)
    run = llama.forward(ids, model.weights, model.config)
    hidden = llama.mask(T, model.config)  # (T, T)
    assert (np.triu(np.ones((T, T), dtype=bool), k=1) <= hidden).all()  # the causal cells are among the masked
    assert (run.weights[..., hidden] == 0.0).all()
    np.testing.assert_allclose(run.weights.sum(axis=-1), 1.0, atol=1e-12)
    cut = int(rng.integers(1, T + 1))
    shorter = llama.forward(ids[:cut], model.weights, model.config)
    np.testing.assert_allclose(shorter.hidden, run.hidden[:, :cut], atol=1e-9)
    np.testing.assert_allclose(shorter.weights, run.weights[..., :cut, :cut], atol=1e-12)
