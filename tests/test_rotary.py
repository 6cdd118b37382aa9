"""Rotary position embeddings, their scalings, grouped-query attention and the sliding window
of rotary.py (what the Llama family's attention adds), against their formulas: worked
cases, loops written from the papers and transformers' code, and properties for any input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli import attention, rotary
from attncli.errors import OptionError
from tinyllama import meta_apply_scaling

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def angles(T: int, d: int, theta: float = 10_000.0):
    return rotary.rope_angles(np.arange(T), rotary.rope_frequencies(d, theta))


def test_the_frequencies_are_roformers():
    """theta_i = base^(-2i/d), i = 0 .. d/2 - 1, the first pair the fastest (1 a position)."""
    for d, theta in ((2, 10_000.0), (8, 10_000.0), (64, 500_000.0), (16, 1e6)):
        expected = [theta ** (-2 * i / d) for i in range(d // 2)]
        np.testing.assert_allclose(rotary.rope_frequencies(d, theta), expected, rtol=1e-15)
    assert rotary.rope_frequencies(8, 10_000.0)[0] == 1.0


def test_the_pairs_are_the_halves_not_neighbours():
    """transformers' rotate_half: feature i turns with feature i + d/2. At position m, with
    d = 4 and frequencies (1, theta^-1/2), x = (a, b, c, e) becomes
    (a cos m - c sin m, b cos m w - e sin m w, c cos m + a sin m, e cos m w + b sin m w)."""
    theta, m = 100.0, 3
    w = theta ** -0.5
    x = np.array([0.3, -1.2, 2.0, 0.7])
    M = np.tile(x, (m + 1, 1))  # (T, 4): the same vector at positions 0 .. m
    cos, sin = rotary.rope_angles(np.arange(m + 1), rotary.rope_frequencies(4, theta))
    a, b, c, e = x
    expected = [a * math.cos(m) - c * math.sin(m), b * math.cos(m * w) - e * math.sin(m * w),
                c * math.cos(m) + a * math.sin(m), e * math.cos(m * w) + b * math.sin(m * w)]
    np.testing.assert_allclose(rotary.rotate(M, 1, cos, sin)[m], expected, rtol=1e-14)
    np.testing.assert_array_equal(rotary.rotate(M, 1, cos, sin)[0], x)  # position 0 is not turned
    np.testing.assert_array_equal(rotary.rotate_half(x), [-c, -e, a, b])


def test_each_head_is_turned_on_its_own():
    """rotate over H heads is the one-head rotation of each head's columns, side by side."""
    rng = np.random.default_rng(0)
    T, H, d = 5, 3, 6
    M = rng.normal(size=(T, H * d))
    cos, sin = angles(T, d)
    out = rotary.rotate(M, H, cos, sin)
    for h in range(H):
        np.testing.assert_array_equal(out[:, h * d:(h + 1) * d], rotary.rotate(M[:, h * d:(h + 1) * d], 1, cos, sin))


@FAST
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(1, 40), H=st.integers(1, 4), half=st.integers(1, 8),
       theta=st.sampled_from([10.0, 10_000.0, 1e6]))
def test_a_rotation_keeps_every_heads_norm(seed, T, H, half, theta):
    d = 2 * half
    M = np.random.default_rng(seed).normal(size=(T, H * d)) * 10
    out = rotary.rotate(M, H, *angles(T, d, theta))
    norms = lambda A: np.linalg.norm(attention.split_heads(A, H), axis=-1)  # noqa: E731: (H, T)
    np.testing.assert_allclose(norms(out), norms(M), rtol=1e-12)


@FAST
@given(seed=st.integers(0, 2**32 - 1), half=st.integers(1, 8), theta=st.sampled_from([10.0, 10_000.0, 1e6]),
       m=st.integers(0, 60), n=st.integers(0, 60), shift=st.integers(-60, 60))
def test_a_rotated_score_depends_on_the_distance_alone(seed, half, theta, m, n, shift):
    """q_m . k_n after rotation is q . R((n - m) theta) k: moving both tokens by the same
    shift changes nothing."""
    shift = max(shift, -min(m, n))
    d = 2 * half
    q, k = np.random.default_rng(seed).normal(size=(2, d))
    T = max(m, n) + max(shift, 0) + 1
    cos, sin = angles(T, d, theta)
    Q = rotary.rotate(np.tile(q, (T, 1)), 1, cos, sin)  # (T, d): q at every position
    K = rotary.rotate(np.tile(k, (T, 1)), 1, cos, sin)
    assert Q[m] @ K[n] == pytest.approx(Q[m + shift] @ K[n + shift], rel=1e-9, abs=1e-9)
    if m == n:
        assert Q[m] @ K[n] == pytest.approx(q @ k, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("d,theta,factor,low,high,old,bands", [
    (128, 500_000.0, 8.0, 1.0, 4.0, 8192, None),  # Llama 3.1's own
    (16, 10_000.0, 8.0, 1.0, 4.0, 32, (1, 1, 6)),  # tiny-llama's: one kept, one smoothed, six slowed
    (32, 10_000.0, 4.0, 2.0, 8.0, 64, None),
])
def test_llama3_frequencies_are_metas_loop(d, theta, factor, low, high, old, bands):
    inv_freq = rotary.rope_frequencies(d, theta)
    got = rotary.llama3_frequencies(inv_freq, factor, low, high, old)
    np.testing.assert_allclose(got, meta_apply_scaling(inv_freq.tolist(), factor, low, high, old), rtol=1e-15)
    kept, slowed = np.sum(got == inv_freq), np.sum(np.isclose(got, inv_freq / factor, rtol=1e-15))
    assert kept >= 1 and slowed >= 1  # the cases reach the bands at either end
    if bands is not None:
        assert (kept, d // 2 - kept - slowed, slowed) == bands


def test_llama3_refuses_parameters_it_cannot_band():
    inv_freq = rotary.rope_frequencies(8, 10_000.0)
    with pytest.raises(OptionError, match="high_freq_factor must be above low_freq_factor, got 1 and 1"):
        rotary.llama3_frequencies(inv_freq, 8.0, 1.0, 1.0, 32)
    with pytest.raises(OptionError, match="factor must be a positive finite number, got 0"):
        rotary.llama3_frequencies(inv_freq, 0, 1.0, 4.0, 32)


def test_rotary_embeddings_need_an_even_head():
    with pytest.raises(OptionError, match="d must be even, got 5"):
        rotary.rope_frequencies(5, 10_000.0)


def softmax_row(scores):
    top = max(scores)
    e = [math.exp(s - top) for s in scores]
    return [v / math.fsum(e) for v in e]


@pytest.mark.parametrize("H,KV", [(4, 2), (4, 1), (6, 3), (3, 3), (8, 2)])
def test_grouped_query_attention_is_each_query_head_with_its_key_value_head(H, KV):
    """share_heads, then multi_head: query head h with key/value head h // (H / KV), by loops."""
    rng = np.random.default_rng(H * 10 + KV)
    T, d = 5, 3
    Q, K, V = rng.normal(size=(T, H * d)), rng.normal(size=(T, KV * d)), rng.normal(size=(T, KV * d))
    scale = 1 / math.sqrt(d)
    hidden = attention.causal_mask(T)
    _, alpha, Z = attention.multi_head(Q, rotary.share_heads(K, KV, H), rotary.share_heads(V, KV, H), H,
                                       scale, mask=hidden)
    for h in range(H):
        g = h // (H // KV)
        q, k, v = Q[:, h * d:(h + 1) * d], K[:, g * d:(g + 1) * d], V[:, g * d:(g + 1) * d]
        for i in range(T):
            row = softmax_row([math.fsum(q[i] * k[j]) * scale for j in range(i + 1)])
            np.testing.assert_allclose(alpha[h, i, :i + 1], row, rtol=1e-13)
            assert not alpha[h, i, i + 1:].any()
            z = [math.fsum(row[j] * v[j, c] for j in range(i + 1)) for c in range(d)]
            np.testing.assert_allclose(Z[i, h * d:(h + 1) * d], z, rtol=1e-12, atol=1e-15)


def test_share_heads_is_repeat_kv():
    """transformers' repeat_kv: (KV, T, d) -> each head n_rep times in a row, head by head."""
    M = np.arange(2 * 6).reshape(2, 6).astype(float)  # T = 2, KV = 3 heads of d = 2
    out = rotary.share_heads(M, 3, 6)
    assert out[0].tolist() == [0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5]
    np.testing.assert_array_equal(rotary.share_heads(M, 3, 3), M)
    with pytest.raises(OptionError, match="kv_heads must divide heads = 4, got 3"):
        rotary.share_heads(np.zeros((2, 6)), 3, 4)


@pytest.mark.parametrize("window", [1, 2, 4, 9])
def test_a_sliding_window_sees_its_own_piece_and_the_window_less_one_before(window):
    T = 8
    hidden = attention.causal_window_mask(T, window)
    for i in range(T):
        assert [j for j in range(T) if not hidden[i, j]] == list(range(max(0, i - window + 1), i + 1))
    if window >= T:
        np.testing.assert_array_equal(hidden, attention.causal_mask(T))
    with pytest.raises(OptionError):
        attention.causal_window_mask(T, 0)
