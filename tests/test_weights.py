"""A model's weights at the cost of their bytes (models.weights.Weights): mapped from their files
as stored, never read into memory whole; widened into the pass's precision a layer at a
time, each tensor once a pass, and let go; an embedding's rows and an LM head's blocks
widened alone; every number checked finite at load, a NaN named with its tensor; a file
changed since then refused; the numbers the same, to the bit, as those of the weights held
in memory the way they were before (float32 for BF16, Linear layers laid out for their
products); and a progress bar on a terminal while they are read."""

from __future__ import annotations

import json
import mmap
import struct
import subprocess
import sys
import tracemalloc
import weakref
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
import ptys  # noqa: E402
from clirunner import fails, run  # noqa: E402
from tinyllama import write_model  # noqa: E402

from attncli import attention, models  # noqa: E402
from attncli.errors import ModelError  # noqa: E402
from attncli.models import layers, llama  # noqa: E402
from attncli.models import weights as model_weights  # noqa: E402

MODELS = Path(__file__).parent / "data" / "models"
NAMES = ["tiny-bert", "tiny-distilbert", "tiny-roberta", "tiny-xlm-roberta", "tiny-gpt2", "tiny-llama", "tiny-qwen2",
         "tiny-mistral"]
# six layers whose weights outweigh what a pass over a few pieces makes, and an embedding
# table (50,000 x 128) outweighing a layer's weights 24 times over
WIDE = {"model_type": "llama", "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 128, "intermediate_size": 512, "max_position_embeddings": 64, "vocab_size": 50_000,
        "rms_norm_eps": 1e-5, "hidden_act": "silu", "tie_word_embeddings": True}


def bf16_file(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A safetensors file of `tensors` as BF16 (each float32's upper 16 bits, rounded to
    nearest even; a uint16 array is written as the bits it holds)."""
    header, blobs, offset = {}, [], 0
    for name, x in tensors.items():
        if x.dtype != np.uint16:
            bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
            x = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        data = x.astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(x.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def random_weights(config: dict, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"model.{name}": (np.ones(shape, np.float32) if "norm" in name
                              else rng.normal(scale=0.05, size=shape).astype(np.float32))
            for name, shape in llama.expected_shapes(llama.read_config(config, "config.json")).items()}


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """WIDE's folder, its weights in BF16, and the model."""
    folder = write_model(tmp_path_factory.mktemp("wide") / "m", WIDE, weights={})
    bf16_file(folder / "model.safetensors", random_weights(WIDE))
    return folder, models.load_model(str(folder))


class Nothing:
    """A consumer that keeps nothing (layers.Consumer)."""

    def begin(self, X):
        pass

    def layer(self, l, X, steps):
        pass

    def end(self, X):
        pass


def layer_numbers(config: dict) -> int:
    return sum(int(np.prod(shape)) for name, shape in llama.expected_shapes(llama.read_config(config, "c")).items()
               if name.startswith("layers.0."))


# --- mapped, not read


def test_a_tensor_is_a_view_of_its_mapped_file(wide):
    """Each tensor as stored (BF16 as the uint16 its file holds) is a view of the file mapped
    into memory: the bytes at the offset its header gives, nothing read into an array."""
    folder, model = wide
    name = "layers.3.mlp.up_proj.weight"
    view = model.weights.stored(name)
    base = view
    while not isinstance(base, mmap.mmap):
        base = base.obj if isinstance(base, memoryview) else base.base
    assert view.dtype == np.dtype("<u2") and view.shape == (512, 128) and not view.flags.owndata
    s = model.weights.tensors[name]
    with open(folder / "model.safetensors", "rb") as f:
        f.seek(s.offset)
        assert f.read(view.nbytes) == view.tobytes()


LOAD = """
import resource, sys
from attncli import models
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
model = models.load_model(sys.argv[1])
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_loading_a_model_takes_far_less_memory_than_its_weights(tmp_path):
    """A model of 420 MB of BF16 weights (its numbers zeros, the file sparse), loaded and every
    number checked: the process's peak resident memory grows by less than a tenth of that
    (the files are mapped, and the pages the check reads given back)."""
    config = {**WIDE, "hidden_size": 1024, "intermediate_size": 1024, "num_hidden_layers": 2,
              "vocab_size": 200_000}
    folder = write_model(tmp_path / "big", config, weights={})
    shapes = {f"model.{name}": shape for name, shape in
              llama.expected_shapes(llama.read_config(config, "config.json")).items()}
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + offset)  # zeros, on no disk
    assert offset > 400e6
    done = subprocess.run([sys.executable, "-c", LOAD, str(folder)], capture_output=True, text=True, check=True)
    before, after = map(int, done.stdout.split())  # kB
    assert (after - before) * 1024 < offset / 10, (before, after, offset)


# --- widened a layer at a time


def test_a_pass_widens_each_layer_once_and_lets_it_go(wide, monkeypatch):
    """Over six layers, more than the weights kept whole (layers.HOLD, here 0): every tensor
    of a layer widened once (though a layer reads several twice: a norm, a product's
    weight), the embedding table never, only the rows looked up; numpy's peak within one
    layer's weights widened to float64, the pass's own arrays (a layer's work) and a tile's
    float32 bits as a tensor is widened, and after the pass no layer's weights held."""
    folder, model = wide
    config = model.config
    monkeypatch.setattr(layers, "HOLD", 0)
    mapped = []
    stored = model_weights.Weights.stored
    monkeypatch.setattr(model_weights.Weights, "stored", lambda self, name: mapped.append(name) or stored(self, name))
    ids = np.arange(8) * 997 % WIDE["vocab_size"]
    model.weights["norm.weight"]  # no layer's weights held before the pass, as after a load
    layer = 8 * layer_numbers(WIDE)
    tracemalloc.start()
    try:
        llama.run(ids, model.weights, config, Nothing())
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    per_layer = [name for name in mapped if name.startswith("layers.")]
    assert sorted(per_layer) == sorted(n for n in model.weights if n.startswith("layers."))  # each once
    assert mapped.count("embed_tokens.weight") == 1  # the rows looked up
    work = llama.run_bytes(len(ids), config) - layers.widened_held(llama.expected_shapes, config)
    assert layer < peak <= layer + work + 4 * model_weights.TILE ** 2
    table = 8 * WIDE["vocab_size"] * WIDE["hidden_size"]
    assert peak < table / 10  # the embedding table widened whole would be 51 MB
    assert current < layer / 10  # the last layer's let go at the final norm


def test_a_layer_is_widened_into_the_last_ones_arrays_unless_they_are_held(wide, monkeypatch):
    """From one layer to the next the widened arrays are written over, never while anything
    holds one (a caller's reference, a view of it): a held array keeps its numbers."""
    _, model = wide
    monkeypatch.setattr(layers, "HOLD", 0)
    w = model.weights
    w["norm.weight"]  # none held
    up0 = w["layers.0.mlp.up_proj.weight"]
    kept = up0.copy()
    view = w["layers.0.mlp.gate_proj.weight"].T  # a view holds gate_proj's array
    gate0 = view.base
    gate0_numbers = gate0.copy()
    q0 = weakref.ref(w["layers.0.self_attn.q_proj.weight"])  # held by no one
    up1, gate1, q1 = (w[f"layers.1.{n}.weight"] for n in ("mlp.up_proj", "mlp.gate_proj", "self_attn.q_proj"))
    assert not np.shares_memory(up1, up0) and not np.shares_memory(gate1, gate0)
    assert q0() is q1  # written over: nothing held it
    np.testing.assert_array_equal(up0, kept)
    np.testing.assert_array_equal(gate0, gate0_numbers)
    for name, W in (("mlp.up_proj", up1), ("self_attn.q_proj", q1)):
        bits = model.weights.stored(f"layers.1.{name}.weight").astype(np.uint32) << 16
        np.testing.assert_array_equal(W, bits.view(np.float32))


def test_a_small_models_layers_are_widened_once_a_run(wide, monkeypatch):
    """Every layer's weights within layers.HOLD (WIDE's 12.6 MB, within the 256 MB held): kept
    from one pass to the next, so that a corpus's passes widen them once; the embeddings'
    rows each pass."""
    _, model = wide
    assert 8 * model.weights.layered <= layers.HOLD
    ids = np.arange(8)
    first = llama.forward(ids, model.weights, model.config)
    mapped = []
    stored = model_weights.Weights.stored
    monkeypatch.setattr(model_weights.Weights, "stored", lambda self, name: mapped.append(name) or stored(self, name))
    again = llama.forward(ids, model.weights, model.config)
    assert mapped == ["embed_tokens.weight"]
    assert np.array_equal(first.hidden, again.hidden) and np.array_equal(first.weights, again.weights)
    with attention.precision("float32"):  # another precision: widened again, once
        llama.forward(ids, model.weights, model.config)
        llama.forward(ids, model.weights, model.config)
    assert len([n for n in mapped if n.startswith("layers.")]) == sum(n.startswith("layers.") for n in model.weights)


def test_the_lm_head_is_widened_a_block_at_a_time(wide):
    """The tied head (the 50,000 x 128 embeddings) is never widened whole for the logits:
    numpy's peak is the logits and a block of the head's rows."""
    _, model = wide
    X = np.random.default_rng(0).normal(size=(2, WIDE["hidden_size"]))
    model.weights["norm.weight"]
    tracemalloc.start()
    try:
        z = llama.logits(X, model.weights, model.config)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    head = (model.weights.stored("embed_tokens.weight").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    np.testing.assert_allclose(z, X @ head.T, rtol=1e-12, atol=1e-12)
    assert peak < z.nbytes + (1 << 24) + (1 << 20) < head.nbytes / 2  # the logits, 16 MB of the head, and room


def test_float32_widens_into_float32(wide):
    _, model = wide
    with attention.precision("float32"):
        W = model.weights["layers.2.self_attn.o_proj.weight"]
        rows = model.weights.rows("embed_tokens.weight", np.array([5, 7]))
    assert W.dtype == rows.dtype == np.float32 and W.T.flags.c_contiguous
    assert model.weights["layers.2.self_attn.o_proj.weight"].dtype == np.float64


# --- checked


@pytest.mark.parametrize("dtype,bits", [("BF16", 0x7FC0), ("BF16", 0xFF80), ("F16", 0x7C00), ("F32", 0x7FC00000)])
def test_a_number_that_is_not_finite_in_a_mapped_shard_is_named(tmp_path, dtype, bits):
    """A NaN or an infinity, as its bits, the last number of a tensor in the second of two
    shards, past the first block the check reads: refused as the model loads, naming the
    shard and the tensor, before any sentence."""
    weights = random_weights(WIDE)
    folder = write_model(tmp_path / "m", WIDE, weights={})
    (folder / "model.safetensors").unlink()
    first = [n for n in weights if n.startswith(("model.layers.0.", "model.layers.1.", "model.layers.2."))]
    second = [n for n in weights if n not in first]
    bf16_file(folder / "model-1.safetensors", {n: weights[n] for n in first})
    damaged = "model.embed_tokens.weight"
    assert damaged in second and weights[damaged].size > model_weights.CHECK_BLOCK
    layout = {"BF16": "<u2", "F16": "<u2", "F32": "<u4"}[dtype]
    if dtype == "BF16":
        tensors = {n: weights[n] for n in second}
        raw = ((weights[damaged].view(np.uint32) + 0x8000) >> 16).astype(np.uint16)
        raw.reshape(-1)[-1] = bits
        tensors[damaged] = raw
        bf16_file(folder / "model-2.safetensors", tensors)
    else:
        from safetensors.numpy import save_file

        held = {"F16": np.float16, "F32": np.float32}[dtype]
        tensors = {n: weights[n].astype(held) for n in second}
        tensors[damaged].view(layout).reshape(-1)[-1] = bits
        save_file(tensors, str(folder / "model-2.safetensors"))
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {**{n: "model-1.safetensors" for n in first}, **{n: "model-2.safetensors" for n in second}}}))
    message = f"model-2.safetensors: the tensor {damaged} holds NaN or infinite values; the model's file is damaged"
    with pytest.raises(ModelError, match=message):
        models.load_model(str(folder))
    assert message in fails(run("scores", "the earth", "--model", folder))


def test_a_file_changed_since_it_was_checked_is_refused(tmp_path):
    """Another file put in its place, or the file written over, once its numbers were
    checked: refused as a layer's weights are next mapped, never read unchecked."""
    folder = write_model(tmp_path / "m", WIDE, weights={})
    bf16_file(folder / "model.safetensors", random_weights(WIDE))
    model = models.load_model(str(folder))
    model.weights["layers.0.mlp.up_proj.weight"]
    path = folder / "model.safetensors"
    copy = path.read_bytes()
    path.unlink()
    path.write_bytes(copy)  # the same bytes, another file
    with pytest.raises(ModelError, match="model.safetensors: has changed since attncli checked it"):
        model.weights["layers.1.mlp.up_proj.weight"]
    with pytest.raises(ModelError, match="has changed since attncli checked it"):
        llama.forward(np.arange(4), model.weights, model.config)


# --- the same numbers


def as_before(model) -> dict[str, np.ndarray]:
    """The model's weights as they were held before they were mapped: each tensor read whole,
    F32 and F64 as they are, F16 as float16, BF16 widened to float32; a Linear layer's laid
    out so that its transpose is in C order (LINEAR_LAYOUT), an embedding by its rows."""
    out = {}
    for name, s in model.weights.tensors.items():
        raw = model.weights.stored(name)
        held = ((raw.astype(np.uint32) << 16).view(np.float32) if s.dtype == "BF16"
                else raw.astype({"F16": np.float16, "F32": np.float32, "F64": np.float64}[s.dtype]))
        linear = getattr(model.family, "LINEAR_LAYOUT", False) and held.ndim == 2 and "embed" not in name
        out[name] = np.asfortranarray(held) if linear else np.ascontiguousarray(held)
    return out


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_the_numbers_are_those_of_the_weights_held_as_before(name, precision):
    """Every layer's hidden states, attention weights and steps, a decoder's logits, the
    projections, what each head passes on and each layer's parts: equal to the bit to those
    of the same weights held in memory as read before (a dict of arrays, widened for each
    product), in the same process."""
    model = models.load_model(str(MODELS / name))
    before = as_before(model)
    family, config = model.family, model.config
    ids = model.encode("The earth is like an orange, I sat on the bank of the river").ids
    last = config.layers - 1
    with attention.precision(precision):
        runs = [family.forward(ids, w, config, keep=(0, last)) for w in (model.weights, before)]
        for a, b in zip(runs[0].hidden, runs[1].hidden):
            assert np.array_equal(a, b)
        assert np.array_equal(runs[0].weights, runs[1].weights)
        for l in (0, last):
            for step in runs[0].steps[l]:
                assert np.array_equal(runs[0].steps[l][step], runs[1].steps[l][step]), (l, step)
        if model.causal:
            assert np.array_equal(*(family.logits(runs[0].hidden[-1], w, config) for w in (model.weights, before)))
        ours, theirs = (family.projections(w, last) for w in (model.weights, before))
        for part in (0, 1):
            for key in ours[part]:
                assert np.array_equal(ours[part][key], theirs[part][key]), key
        V = runs[0].steps[last]["V"]
        assert np.array_equal(*(family.passed_on(V, w, last, config) for w in (model.weights, before)))
    if precision == "float64":
        for a, b in zip(*(family.blocks(ids, w, config) for w in (model.weights, before))):
            for part in ("weights", "passed", "bias", "total", "output"):
                assert np.array_equal(getattr(a, part), getattr(b, part)), part
            assert np.array_equal(a.rest(a.total), b.rest(b.total))


# --- the progress of a load


def test_a_load_tells_its_progress_in_bytes(wide):
    folder, _ = wide
    told = []
    model = models.load_model(str(folder), progress=lambda done, total: told.append((done, total)))
    total = sum(s.nbytes for s in model.weights.tensors.values())
    assert told[-1] == (total, total) and all(t == total for _, t in told)
    assert [d for d, _ in told] == sorted(d for d, _ in told) and len(told) > 2


BAR = "━"
SHOWN_AT_ONCE = ("import sys; from attncli.views import progress; progress.LoadProgress.DELAY = 0; "
                 "from attncli.__main__ import main; sys.argv[0] = 'attncli'; main()")


def test_a_bar_on_a_terminal_while_the_weights_are_read(wide):
    """On a terminal, a bar "reading weights" (shown here at once: a load of these few
    megabytes takes less than the half second it waits), gone before the result; none on a
    pipe."""
    folder, _ = wide
    status, out, _, screen = ptys.run(["scores", "the earth", "--model", folder, "--json"], on_tty=("stderr",),
                                      program=(sys.executable, "-c", SHOWN_AT_ONCE))
    assert status == 0 and json.loads(out)["model"]["layers"] == 6
    assert BAR in screen and "reading weights" in ptys.plain(screen)
    done = subprocess.run([sys.executable, "-c", SHOWN_AT_ONCE, "scores", "the earth", "--model", str(folder),
                           "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""


def test_a_matrix_is_widened_in_strips_alike_on_any_thread_or_none(monkeypatch):
    """in_strips shares a matrix's strips of rows among threads: the bits are the serial
    copy's; where no thread can start (ulimit -v), the caller's thread does it all."""
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(1000, 37)).astype(np.float32)
    serial = np.empty((1000, 37), order="F")
    model_weights.widen(raw, "F32", serial)
    threaded = np.empty((1000, 37), order="F")
    model_weights.in_strips(raw, threaded, lambda r, o: model_weights.widen(r, "F32", o))
    assert (threaded == serial).all()

    class NoThreads:
        def submit(self, *args, **kwargs):
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(model_weights, "_pool", NoThreads())
    alone = np.empty((1000, 37), order="F")
    model_weights.in_strips(raw, alone, lambda r, o: model_weights.widen(r, "F32", o))
    assert (alone == serial).all()
