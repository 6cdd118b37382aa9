"""The forward pass hands each layer to its consumers (layers.Consumer) as it makes it: what a
consumer is handed, in every family, is exactly what forward() returns (forward is run()
with layers.Kept: the same process and code path, so equal to the bit), in order, each
layer once; several consumers at once each see all of it, a padded batch too; and a pass
whose consumer keeps nothing holds no (L, H, T, T) array: its peak memory is forward's
less the weights forward keeps."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")

MODELS = Path(__file__).parent / "data" / "models"
SENTENCE = "The earth is like an orange"
NAMES = ["tiny-bert", "tiny-distilbert", "tiny-roberta", "tiny-xlm-roberta", "tiny-gpt2", "tiny-llama", "tiny-qwen2",
         "tiny-mistral"]
DECODERS = {"tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-mistral"}


def load(name: str):
    from attncli import models

    return models.load_model(str(MODELS / name))


def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(MODELS / f"{name}.npz") as data:
        return {key: data[key] for key in data.files}


class Recorder:
    """A consumer that writes down every call, with a copy of what it was handed."""

    def __init__(self):
        self.calls = []

    def begin(self, X):
        self.calls.append(("begin", X.copy()))

    def layer(self, l, X, steps):
        self.calls.append((l, X.copy(), {name: M.copy() for name, M in steps.items()}))

    def end(self, X):
        self.calls.append(("end", X.copy()))


class Nothing:
    """A consumer that keeps nothing."""

    def begin(self, X):
        pass

    def layer(self, l, X, steps):
        pass

    def end(self, X):
        pass


def assert_saw_the_pass(calls: list, run, L: int) -> None:
    """`calls` (a Recorder's) are begin, layers 0 .. L-1 in order, end; each handed exactly
    the hidden states and weights of the Pass `run` (its steps wherever it kept them)."""
    assert [c[0] for c in calls] == ["begin", *range(L), "end"]
    np.testing.assert_array_equal(calls[0][1], run.hidden[0])
    for l, X, steps in calls[1:-1]:
        if l < L - 1:  # the last layer's output as shown is end's (a decoder's after its final norm)
            np.testing.assert_array_equal(X, run.hidden[l + 1])
        np.testing.assert_array_equal(steps["weights"], run.weights[l])
        if l in run.steps:
            assert steps.keys() == run.steps[l].keys()
            for name, M in steps.items():
                np.testing.assert_array_equal(M, run.steps[l][name])
    np.testing.assert_array_equal(calls[-1][1], run.hidden[-1])


@pytest.mark.parametrize("name", NAMES)
def test_a_consumer_sees_every_layer_of_forward_in_order(name):
    model, ref = load(name), reference(name)
    L = model.config.layers
    for k in range(len(ref["sentences"])):
        ids = ref[f"ids_{k}"]
        run = model.family.forward(ids, model.weights, model.config, keep=tuple(range(L)))
        seen = Recorder()
        model.family.run(ids, model.weights, model.config, seen)
        assert_saw_the_pass(seen.calls, run, L)
        last = seen.calls[-2][1]  # layer L-1's output, X_L
        if name in DECODERS:  # before the final norm, as the reference has it (float32); end's after it
            prenorm = ref[f"prenorm_{k}"]
            assert np.abs(last - prenorm).max() < 1e-5 * np.abs(prenorm).max()
            assert not np.allclose(last, seen.calls[-1][1])
        else:
            np.testing.assert_array_equal(last, seen.calls[-1][1])


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-llama"])
def test_two_consumers_at_once_each_see_everything(name):
    from attncli.models import layers

    model, ref = load(name), reference(name)
    L, ids = model.config.layers, ref["ids_4"]
    alone = Recorder()
    model.family.run(ids, model.weights, model.config, alone)
    first, second, kept = Recorder(), Recorder(), layers.Kept(model.config, keep=(1,))
    model.family.run(ids, model.weights, model.config, layers.Fan(first, kept, second))
    run = model.family.forward(ids, model.weights, model.config, keep=(1,))
    for seen in (first, second, alone):
        assert_saw_the_pass(seen.calls, run, L)
    assert_saw_the_pass(first.calls, kept.result, L)
    assert kept.result.steps.keys() == {1}


@pytest.mark.parametrize("name", NAMES)
def test_a_consumer_sees_a_padded_batch_as_forward_gives_it(name):
    model, ref = load(name), reference(name)
    ids = [ref[f"ids_{k}"] for k in range(len(ref["sentences"]))]
    lengths = np.array([len(i) for i in ids])  # (B,)
    padded = np.full((len(ids), lengths.max()), getattr(model.config, "padding_idx", None) or 0)  # (B, T)
    for row, i in enumerate(ids):
        padded[row, :len(i)] = i
    run = model.family.forward(padded, model.weights, model.config, keep=(0,), lengths=lengths)
    seen = Recorder()
    model.family.run(padded, model.weights, model.config, seen, lengths=lengths)
    assert seen.calls[0][1].shape == (len(ids), lengths.max(), model.config.hidden)
    assert_saw_the_pass(seen.calls, run, model.config.layers)


class Blocks(Recorder):
    """A Recorder that also writes down every block of rows a pass run in blocks hands it."""

    def rows(self, l, start, steps):
        self.calls.append(("rows", l, start, {name: M.copy() for name, M in steps.items()}))


@pytest.mark.parametrize("name", NAMES)
def test_a_pass_run_in_blocks_of_rows_is_forward_a_block_at_a_time(name):
    """run(..., rows=R), R = 1, 7 and T: every layer's rows handed block by block, in order,
    before its layer(), each block (H, R, T) and never T x T; the blocks together are
    forward's weights and scores within 1e-12, and every hidden state is forward's within
    1e-12 too (the context vectors filled in a block at a time); layer() is handed the
    other steps but no scores or weights."""
    model, ref = load(name), reference(name)
    c, ids = model.config, ref["ids_4"]
    T = len(ids)
    run = model.family.forward(ids, model.weights, c, keep=tuple(range(c.layers)))
    for R in (1, 7, T):
        seen = Blocks()
        model.family.run(ids, model.weights, c, seen, rows=R)
        starts = list(range(0, T, R))
        assert [call[:3] if call[0] == "rows" else call[0] for call in seen.calls] == \
            ["begin", *(x for l in range(c.layers) for x in [*(("rows", l, s) for s in starts), l]), "end"]
        for l in range(c.layers):
            blocks = [call[3] for call in seen.calls if call[0] == "rows" and call[1] == l]
            assert all(b["weights"].shape == (c.heads, min(R, T - s), T) for b, s in zip(blocks, starts))
            for step in ("weights", "scores"):
                np.testing.assert_allclose(np.concatenate([b[step] for b in blocks], axis=1), run.steps[l][step],
                                           rtol=0, atol=1e-12)
        layers_seen = [call for call in seen.calls if call[0] in range(c.layers)]
        for l, X, steps in layers_seen:
            assert "weights" not in steps and "scores" not in steps
            np.testing.assert_allclose(steps["context"], run.steps[l]["context"], rtol=0, atol=1e-12)
            if l < c.layers - 1:
                np.testing.assert_allclose(X, run.hidden[l + 1], rtol=0, atol=1e-12)
        np.testing.assert_allclose(seen.calls[-1][1], run.hidden[-1], rtol=0, atol=1e-12)


def peak(f) -> int:
    """The most numpy's arrays (tracemalloc) held at once while f() ran."""
    tracemalloc.start()
    try:
        f()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", NAMES)
def test_a_pass_that_keeps_nothing_holds_no_layer_s_weights(name):
    """At T = 64, the most the tiny models take, their L H T^2 float64s are 256 KiB, a sixth
    of forward's peak (2 layers; the working layer's own (H, T, T) arrays are six): a
    consumer that keeps nothing saves at least 90% of them, and its peak is within
    run_bytes, the estimate of a pass without the kept arrays."""
    model = load(name)
    c, T = model.config, 64
    ids = np.arange(T) % 200 + 3
    kept = peak(lambda: model.family.forward(ids, model.weights, c))
    nothing = peak(lambda: model.family.run(ids, model.weights, c, Nothing()))
    assert kept - nothing >= 0.9 * 8 * c.layers * c.heads * T * T
    assert nothing <= model.family.run_bytes(T, c)
    assert kept <= model.family.pass_bytes(T, c)


def test_in_a_deep_model_what_forward_keeps_is_most_of_its_memory_and_a_pass_need_not_hold_it():
    """A random BERT of 16 layers over 128 pieces: the (L, H, T, T) weights, 4 MiB, are most
    of forward's peak; a pass that keeps nothing holds under a third of it."""
    from attncli.models import bert
    from tinybert import TINY, VOCAB, tiny_weights

    raw = {**TINY, "num_hidden_layers": 16, "max_position_embeddings": 128}
    config, weights = bert.read_config(raw, "config.json"), tiny_weights(raw, prefix="")
    T = 128
    ids = np.arange(T) % (len(VOCAB) - 5) + 5  # the words, not the markers
    kept = peak(lambda: bert.forward(ids, weights, config))
    nothing = peak(lambda: bert.run(ids, weights, config, Nothing()))
    weights_bytes = 8 * config.layers * config.heads * T * T
    assert weights_bytes > kept / 2
    assert kept - nothing >= 0.9 * weights_bytes and nothing < kept / 3
    assert nothing <= bert.run_bytes(T, config) and kept <= bert.pass_bytes(T, config)


# --- only the work a consumer reads -------------------------------------------------------------

@pytest.mark.parametrize("name, rest", [("tiny-bert", "after_attention"), ("tiny-gpt2", "after_attention"),
                                        ("tiny-llama", "after_attention")])
def test_no_layer_past_what_the_document_reads_is_run(monkeypatch, name, rest):
    """A document of layer l reads that layer's attention and its input: the layers after l
    are not run, and of l only its attention (no residual sum, feed-forward or norm after
    it); a document of every layer's weights (heads) runs the last layer's attention only;
    one that reads hidden states or the next piece runs every layer whole. The numbers are
    the whole pass's."""
    from attncli.encoder import Options
    from attncli.models.encoder import Trained

    model = load(name)
    family = model.family
    ran = []
    whole = getattr(family, rest)
    monkeypatch.setattr(family, rest, lambda *a, **k: ran.append(a[2]) or whole(*a, **k))  # (Y, weights, l, ...)
    L = model.config.layers
    full = family.forward(model.encode(SENTENCE).ids, model.weights, model.config, keep=tuple(range(L)))
    ran.clear()
    for layer in range(1, L + 1):
        att = Trained(model, layer).attend(SENTENCE, Options())
        assert ran == list(range(layer - 1)), (layer, ran)  # the layers before, whole; none after
        np.testing.assert_array_equal(att.weights, full.weights[layer - 1])
        np.testing.assert_array_equal(att.embedded.X, full.hidden[layer - 1])
        ran.clear()
    Trained(model, 1).attend(SENTENCE, Options(), keep=("layers",))
    assert ran == list(range(L - 1))  # every layer's attention, the last one's alone
    ran.clear()
    for keep in (("hidden",), ("final",)):
        att = Trained(model, 1).attend(SENTENCE, Options(), keep=keep)
        assert ran == list(range(L)), keep
        np.testing.assert_array_equal(att.final, full.hidden[-1])
        ran.clear()


@pytest.mark.parametrize("name", NAMES)
def test_a_reader_of_weights_alone_makes_no_values_of_its_last_layer(monkeypatch, name):
    """Stats reads every layer's weights and nothing else: of the last layer the pass makes
    its scores and weights and not its values' context vectors (nor its output or
    feed-forward); a document of layer 1 that also lists every layer's weights (heads)
    makes layer 1 whole and the last layer's weights alone; a document of the last layer
    makes its context vectors. The weights are the whole pass's, to the bit."""
    from attncli import attention
    from attncli.encoder import Options
    from attncli.models import layers
    from attncli.models.encoder import Trained

    model = load(name)
    L, ids = model.config.layers, [model.encode(s).ids for s in (SENTENCE, "a second sentence")]
    full = [model.family.forward(i, model.weights, model.config) for i in ids]
    made = []
    context = attention.context
    monkeypatch.setattr(attention, "context", lambda alpha, V: made.append(1) or context(alpha, V))
    for b, run in layers.forward_many(model.family, ids, model.weights, model.config, outputs=False, batch=1):
        np.testing.assert_array_equal(run.weights, full[b].weights)
        np.testing.assert_array_equal(run.hidden[:-1], full[b].hidden[:-1])
        assert np.isnan(run.hidden[-1]).all()  # never made, and saying so
    assert len(made) == 2 * (L - 1)
    made.clear()
    att = Trained(model, 1).attend(SENTENCE, Options(), keep=("layers",))
    assert L > 1 and len(made) == L - 1
    np.testing.assert_array_equal(att.layers, full[0].weights)
    made.clear()
    Trained(model, L).attend(SENTENCE, Options(), keep=("layers",))
    assert len(made) == L


def test_a_consumer_without_through_reads_everything_and_a_fan_the_most_of_its_own():
    from attncli.models import layers

    class Some:
        def __init__(self, through):
            self.through = through

    assert layers.Fan(Some(0), Some(1)).through == 1
    assert layers.Fan(Some(0), Some(None)).through is None
    assert layers.Fan(Some(0), object()).through is None
    last = Some(1)
    last.weights_only = True
    assert layers.Fan(Some(0), last).weights_only  # the one that reads layer 1 reads its weights alone
    assert not layers.Fan(Some(1), last).weights_only
