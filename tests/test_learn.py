"""Learning W_Q, W_K, W_V (learn.py): the hide objective's gradients against central
finite differences in float64, and Adam lowering the loss on a task it can learn."""

from __future__ import annotations

import numpy as np
import pytest

from attncli.learning import learn
from test_gradients import numeric  # central differences, one helper for every gradient check


def training_case(seed: int, B=4, m=3, d=5, V_out=7, d_k=None, masked=False):
    """Random parameters, a batch of B examples (a word of d values, m context words, padding
    and a target) and the output vectors E (V_out, d); d_k: queries and keys narrower than d;
    masked: every query's input the learned mask vector (the mask objective)."""
    rng = np.random.default_rng(seed)
    d_k = d if d_k is None else d_k
    params = {"W_query": rng.normal(scale=0.5, size=(d, d_k)), "W_key": rng.normal(scale=0.5, size=(d, d_k)),
              "W_value": rng.normal(scale=0.5, size=(d, d)), "b_out": rng.normal(scale=0.1, size=V_out)}
    if masked:
        params["mask"] = rng.normal(size=d)
    pad = np.zeros((B, m), dtype=bool)
    pad[0, 2] = pad[1, 1:] = True  # fewer visible words in some examples
    C = rng.normal(size=(B, m, d)) * ~pad[..., None]
    x = None if masked else rng.normal(size=(B, d))
    batch = learn.Batch(x=x, C=C, pad=pad, target=rng.integers(0, V_out, size=B))
    return params, batch, rng.normal(size=(V_out, d))


@pytest.mark.parametrize("seed,heads", [(0, 1), (1, 1), (2, 1), (0, 2), (1, 3)])
def test_the_hide_objectives_gradients_equal_finite_differences(seed, heads):
    params, batch, E = training_case(seed, d=6)
    scale = 1 / np.sqrt(6 // heads)
    loss, kept = learn.forward(params, batch, E, scale, heads=heads)
    grads = learn.backward(params, batch, E, scale, kept)
    for name, P in params.items():
        expected = numeric(lambda: learn.forward(params, batch, E, scale, heads=heads)[0], P)
        np.testing.assert_allclose(grads[name], expected, rtol=1e-6, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("seed,heads,d_k,masked", [(0, 1, 4, False), (1, 2, 2, False), (0, 1, 6, True),
                                                   (1, 2, 4, True), (2, 3, 3, True)])
def test_narrow_queries_and_the_mask_vector_get_the_gradients_of_finite_differences(seed, heads, d_k, masked):
    params, batch, E = training_case(seed, d=6, d_k=d_k, masked=masked)
    scale = 1 / np.sqrt(d_k // heads)
    sampled = learn.sample(np.random.default_rng(seed), np.full(7, 1 / 7), 4)
    for s in (None, sampled):
        loss, kept = learn.forward(params, batch, E, scale, s, heads=heads)
        grads = learn.backward(params, batch, E, scale, kept)
        assert set(grads) == set(params)
        for name, P in params.items():
            expected = numeric(lambda: learn.forward(params, batch, E, scale, s, heads=heads)[0], P)
            np.testing.assert_allclose(grads[name], expected, rtol=1e-6, atol=1e-9, err_msg=name)


def test_padding_gets_no_weight_and_no_gradient():
    params, batch, E = training_case(4)
    _, kept = learn.forward(params, batch, E, 0.5)
    assert np.all(kept["alpha"][:, 0, 0, :][batch.pad] == 0)
    moved = learn.Batch(batch.x, batch.C + 5.0 * batch.pad[..., None], batch.pad, batch.target)
    assert learn.forward(params, moved, E, 0.5)[0] == pytest.approx(learn.forward(params, batch, E, 0.5)[0], abs=1e-12)


def test_adam_learns_to_attend_to_the_word_that_predicts_the_target():
    """In each example one of three visible words, marked, tells the target; the others are
    noise. Adam brings the loss far down, and the weights come to rest on the marked word."""
    rng = np.random.default_rng(0)
    d, V_out, B = 6, 6, 64
    E = np.eye(V_out, d) * 3.0
    params = {"W_query": np.eye(d) * 0.1, "W_key": np.eye(d) * 0.1, "W_value": np.eye(d),
              "b_out": np.zeros(V_out)}
    marker = np.ones(d) / np.sqrt(d)

    def batch():
        target = rng.integers(0, V_out, size=B)
        C = rng.normal(scale=0.3, size=(B, 3, d))
        C[:, 2] = E[target] / 3.0 + marker  # the word that tells the target, marked
        order = np.argsort(rng.random((B, 3)), axis=1)  # anywhere among the three
        C = np.take_along_axis(C, order[..., None], axis=1)
        return learn.Batch(x=np.tile(marker, (B, 1)), C=C, pad=np.zeros((B, 3), dtype=bool), target=target)

    adam = learn.Adam(lr=0.05)
    first = learn.forward(params, batch(), E, 1.0)[0]
    for _ in range(300):
        b = batch()
        loss, kept = learn.forward(params, b, E, 1.0)
        adam.step(params, learn.backward(params, b, E, 1.0, kept))
    last = np.mean([learn.forward(params, batch(), E, 1.0)[0] for _ in range(5)])
    assert last < 0.1 * first, (first, last)
    b = batch()
    alpha = learn.forward(params, b, E, 1.0)[1]["alpha"][:, 0, 0, :]  # (B, 3): the one head's
    informative = np.argmax(b.C @ marker, axis=1)  # where the marked word went
    assert alpha[np.arange(B), informative].mean() > 0.9


@pytest.mark.parametrize("seed", range(3))
def test_the_sampled_softmax_gradients_equal_finite_differences(seed):
    params, batch, E = training_case(seed, V_out=9)
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.ones(9))
    sampled = learn.sample(rng, q, 5)
    sampled = learn.Sampled(np.union1d(sampled.candidates, batch.target[:1]), sampled.log_q)  # an accidental hit
    loss, kept = learn.forward(params, batch, E, 0.4, sampled)
    grads = learn.backward(params, batch, E, 0.4, kept)
    for name, P in params.items():
        expected = numeric(lambda: learn.forward(params, batch, E, 0.4, sampled)[0], P)
        np.testing.assert_allclose(grads[name], expected, rtol=1e-6, atol=1e-9, err_msg=name)


def test_a_candidate_that_is_the_target_is_left_out_and_q_is_the_chance_of_being_drawn():
    q = np.array([0.5, 0.3, 0.2])
    sampled = learn.sample(np.random.default_rng(0), q, 4)
    np.testing.assert_allclose(np.exp(sampled.log_q), 1 - (1 - q) ** 4, rtol=1e-14)
    params, batch, E = training_case(1, V_out=3)
    true, others = learn._logits(params, np.ones((4, 5)), E, batch.target, learn.Sampled(np.arange(3), sampled.log_q))
    for b, t in enumerate(batch.target):
        assert others[b, t] == -np.inf and np.isfinite(true[b])
        assert np.isfinite(np.delete(others[b], t)).all()
