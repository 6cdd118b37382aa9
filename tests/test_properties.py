"""Properties of attention (hypothesis): what must hold for every input, not one worked case.

For random vectors, projections, heads, scales, temperatures and masks (none, causal,
window): the weights are a probability distribution per row with masked cells exactly 0;
attention commutes with permuting the tokens; softmax ignores a constant per row and
scale/temperature trade off; low and high temperatures give one-hot and uniform rows;
context vectors stay inside the convex hull of the values; extreme vectors give finite
numbers or ScaleError, never NaN; the blockwise stream equals the whole matrix to float32
precision; and the JSON documents round-trip and match the manual's documented keys and
shapes (a small schema checker below) and the numbers they are drawn from.

Shapes are kept small (T <= 10, d <= 6) and examples bounded, so the file runs in seconds.

Two properties pin, with their failing cases as @example, what they once caught: a spurious
ScaleError when omega * scale overflowed on the way to a finite scaled score, and one from
stream() when scale / temperature exceeded float32's range although the scaled scores did not.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attncli import attention, load_vectors, ranking
from attncli.attention import ScaleError
from attncli.documents import context as context_docs
from attncli.documents import sentence as sentence_docs
from attncli.encoder import Options
from attncli.views.json import to_json
from attncli.words.tokenize import is_punctuation
from helpers import by_rule

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here,
# as the rest of the suite does.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

EPS64 = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)
LOG10_MAX = math.log10(np.finfo(np.float64).max)  # 308.25...

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DOCS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- strategies


def divisors(n: int) -> list[int]:
    return [h for h in range(1, n + 1) if n % h == 0]


def bounded(bound: float):
    return st.floats(-bound, bound, allow_nan=False, allow_infinity=False)


def matrices(rows: int, cols: int, bound: float = 10.0, dtype=np.float64):
    width = 32 if dtype == np.float32 else 64
    return hnp.arrays(dtype, (rows, cols),
                      elements=st.floats(-bound, bound, allow_nan=False, allow_infinity=False, width=width))


def log_uniform(lo: float, hi: float):
    """Positive floats spread over orders of magnitude, 10**[log10 lo, log10 hi]."""
    return st.floats(math.log10(lo), math.log10(hi), allow_nan=False).map(lambda e: 10.0 ** e)


MASK_KINDS = ("none", "causal", "window", "causal+window")


def make_mask(kind: str, T: int, window: int) -> np.ndarray | None:
    if kind == "none":
        return None
    mask = np.zeros((T, T), dtype=bool)
    if "causal" in kind:
        mask |= attention.causal_mask(T)
    if "window" in kind:
        mask |= attention.window_mask(T, window)
    return mask


@st.composite
def masks(draw, T: int):
    kind = draw(st.sampled_from(MASK_KINDS))
    return kind, make_mask(kind, T, draw(st.integers(0, T)))


@st.composite
def pipelines(draw, with_mask: bool = True):
    """Vectors X (T, d), projections (identity, or W_Q, W_K, W_V of shape d x d_k), heads H
    dividing d_k, scale (None: the default 1/sqrt(d_k/H)), temperature, mask."""
    T = draw(st.integers(1, 8))
    d = draw(st.integers(1, 6))
    X = draw(matrices(T, d, 10.0))
    if draw(st.booleans()):
        W = None
        d_k = d
    else:
        d_k = draw(st.integers(1, 6))
        W = [draw(matrices(d, d_k, 2.0)) for _ in range(3)]
    H = draw(st.sampled_from(divisors(d_k)))
    scale = draw(st.one_of(st.none(), log_uniform(1e-3, 10.0)))
    scale = attention.default_scale(d_k // H) if scale is None else scale
    temperature = draw(log_uniform(0.05, 20.0))
    kind, mask = draw(masks(T)) if with_mask else ("none", None)
    return dict(X=X, W=W, H=H, scale=scale, temperature=temperature, mask_kind=kind, mask=mask)


def run_pipeline(X, W, H, scale, temperature, mask):
    """Steps I-III through attention's functions, each head on its own slice."""
    if W is None:
        Q = K = V = np.asarray(X, dtype=np.float64)
    else:
        Q, K, V = (attention.project(X, w) for w in W)
    Qh, Kh, Vh = (attention.split_heads(M, H) for M in (Q, K, V))  # (H, T, d_k/H)
    omega = attention.scores(Qh, Kh)  # (H, T, T)
    alpha = attention.weights(omega, scale, temperature, mask)  # (H, T, T)
    Z = attention.merge_heads(attention.context(alpha, Vh))  # (T, d_k)
    return Q, K, V, omega, alpha, Z


def logit_bound(Q, K, H, scale, temperature) -> float:
    """max_ij sum_c |q_ic k_jc| * scale / temperature over the heads: what rounding of a
    scaled score is relative to."""
    Qh, Kh = attention.split_heads(np.abs(Q), H), attention.split_heads(np.abs(K), H)
    return float(np.max(Qh @ np.swapaxes(Kh, -1, -2), initial=0.0)) * scale / temperature


def weight_tol(d: int, bound: float) -> float:
    """Absolute error of a float64 weight: each logit is off by about d eps |bound|, and a
    weight (<= 1) moves by at most twice the largest logit error."""
    return 8 * (d + 2) * EPS64 * (1.0 + bound) + 1e-15


def assert_distribution(alpha, mask, tol=4 * EPS32):
    """Each row of alpha (..., T, T): finite, in [0, 1], summing to 1, masked cells exactly 0."""
    assert np.all(np.isfinite(alpha))
    assert np.all(alpha >= 0.0) and np.all(alpha <= 1.0)
    T = alpha.shape[-1]
    np.testing.assert_allclose(alpha.sum(axis=-1), 1.0, rtol=0, atol=tol * max(T, 1))
    if mask is not None:
        assert np.all(alpha[..., mask] == 0.0)  # exactly, not approximately


# --------------------------------------------------------------------------- Step II: distributions


@FAST
@given(pipelines())
def test_every_row_is_a_distribution_and_masked_cells_are_exactly_zero(p):
    Q, K, V, omega, alpha, Z = run_pipeline(p["X"], p["W"], p["H"], p["scale"], p["temperature"], p["mask"])
    T = len(p["X"])
    assert omega.shape == alpha.shape == (p["H"], T, T)
    assert_distribution(alpha, p["mask"])
    if p["mask"] is not None:  # the unmasked cells of a row: never all zero, the diagonal is free
        assert np.all(np.diagonal(p["mask"]) == False)  # noqa: E712
    # split_heads and merge_heads are inverse: the heads' slices side by side are Q again
    np.testing.assert_array_equal(attention.merge_heads(attention.split_heads(Q, p["H"])), Q)


@FAST
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=8), elements=bounded(1e6)))
def test_softmax_is_a_distribution_over_the_last_axis(logits):
    assert_distribution(attention.softmax(logits), None)


# --------------------------------------------------------------------------- permutation


@FAST
@given(pipelines(with_mask=False), st.data())
def test_permuting_tokens_permutes_scores_weights_and_contexts(p, data):
    T = len(p["X"])
    perm = np.array(data.draw(st.permutations(range(T))), dtype=np.intp)
    Q, K, V, omega, alpha, Z = run_pipeline(p["X"], p["W"], p["H"], p["scale"], p["temperature"], None)
    _, _, _, omega_p, alpha_p, Z_p = run_pipeline(p["X"][perm], p["W"], p["H"], p["scale"], p["temperature"], None)
    d = Q.shape[1]
    om_bound = logit_bound(Q, K, p["H"], 1.0, 1.0)
    np.testing.assert_allclose(omega_p, omega[:, perm][:, :, perm], rtol=0, atol=4 * (d + 1) * EPS64 * (1 + om_bound))
    tol_w = weight_tol(d, logit_bound(Q, K, p["H"], p["scale"], p["temperature"]))
    np.testing.assert_allclose(alpha_p, alpha[:, perm][:, :, perm], rtol=0, atol=tol_w)
    v_max = float(np.max(np.abs(V), initial=0.0))
    np.testing.assert_allclose(Z_p, Z[perm], rtol=0, atol=(T + 2) * (tol_w + 4 * EPS64) * (1 + v_max))


# --------------------------------------------------------------------------- shift and scale invariance


@st.composite
def score_matrices(draw, bound=100.0):
    T = draw(st.integers(1, 8))
    omega = draw(matrices(T, T, bound))
    kind, mask = draw(masks(T))
    return omega, mask


@FAST
@given(score_matrices(), st.data(), log_uniform(1e-2, 10.0), log_uniform(0.05, 20.0))
def test_adding_a_constant_to_a_row_of_scores_changes_no_weight(om_mask, data, scale, temperature):
    omega, mask = om_mask
    T = len(omega)
    c = data.draw(matrices(T, 1, 100.0))  # one constant per row
    bound = (np.max(np.abs(omega)) + np.max(np.abs(c))) * scale / temperature
    tol = weight_tol(2, bound)
    np.testing.assert_allclose(attention.weights(omega + c, scale, temperature, mask),
                               attention.weights(omega, scale, temperature, mask), rtol=0, atol=tol)
    # and softmax itself: softmax(L + c) == softmax(L)
    L = omega * scale / temperature
    np.testing.assert_allclose(attention.softmax(L + c), attention.softmax(L), rtol=0,
                               atol=weight_tol(2, np.max(np.abs(L)) + np.max(np.abs(c))))


@FAST
@given(score_matrices(), log_uniform(1e-2, 10.0), log_uniform(0.05, 20.0), log_uniform(1e-3, 1e3))
def test_multiplying_the_scores_by_s_is_dividing_the_temperature_by_s(om_mask, scale, temperature, s):
    omega, mask = om_mask
    bound = float(np.max(np.abs(omega))) * scale / temperature * s
    np.testing.assert_allclose(attention.weights(s * omega, scale, temperature, mask),
                               attention.weights(omega, scale, temperature / s, mask),
                               rtol=0, atol=weight_tol(2, bound))


# --------------------------------------------------------------------------- temperature limits


@st.composite
def tied_scores(draw):
    """Scores that are small integers times a random unit: ties are common and exact, and
    two different scores of a row differ by at least the unit."""
    T = draw(st.integers(1, 8))
    ints = draw(hnp.arrays(np.int64, (T, T), elements=st.integers(-3, 3)))
    unit = draw(log_uniform(1e-2, 1e2))
    kind, mask = draw(masks(T))
    return ints.astype(np.float64) * unit, unit, mask


@FAST
@given(tied_scores(), log_uniform(1e-2, 10.0))
def test_low_temperature_gives_one_hot_rows_with_ties_split_evenly(scores_unit_mask, scale):
    omega, unit, mask = scores_unit_mask
    T = len(omega)
    # the smallest gap between a row's maximum and any other scaled score is >= unit * scale:
    # at this temperature the others weigh at most T e^-60 together
    temperature = unit * scale / 60.0
    alpha = attention.weights(omega, scale, temperature, mask)
    free = np.ones((T, T), dtype=bool) if mask is None else ~mask
    for i in range(T):
        row_max = omega[i][free[i]].max()
        tied = free[i] & (omega[i] == row_max)
        expected = np.where(tied, 1.0 / tied.sum(), 0.0)
        np.testing.assert_allclose(alpha[i], expected, rtol=0, atol=T * 1e-24 + 4 * EPS64)


@FAST
@given(score_matrices(), log_uniform(1e-2, 10.0))
def test_high_temperature_gives_uniform_rows_over_the_unmasked_cells(om_mask, scale):
    omega, mask = om_mask
    T = len(omega)
    largest = float(np.max(np.abs(omega))) * scale
    temperature = max(largest, 1.0) * 1e12  # every scaled score within 1e-12 of 0
    alpha = attention.weights(omega, scale, temperature, mask)
    free = np.ones((T, T), dtype=bool) if mask is None else ~mask
    expected = free / free.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(alpha, expected, rtol=0, atol=1e-11)


@FAST
@given(score_matrices(), log_uniform(1e-2, 10.0), log_uniform(0.05, 20.0), st.floats(1.01, 100.0))
def test_cooling_never_lowers_a_rows_largest_weight(om_mask, scale, temperature, factor):
    """d/dbeta of the argmax's softmax weight is p_max (l_max - E[l]) >= 0: falling temperature
    only sharpens a row."""
    omega, mask = om_mask
    warm = attention.weights(omega, scale, temperature, mask)
    cold = attention.weights(omega, scale, temperature / factor, mask)
    bound = float(np.max(np.abs(omega))) * scale / temperature * factor
    assert np.all(cold.max(axis=1) >= warm.max(axis=1) - weight_tol(2, bound))


# --------------------------------------------------------------------------- Step III: convex hull


@FAST
@given(pipelines())
def test_every_context_vector_lies_in_the_convex_hull_of_the_values_it_may_attend_to(p):
    Q, K, V, omega, alpha, Z = run_pipeline(p["X"], p["W"], p["H"], p["scale"], p["temperature"], p["mask"])
    T, d_k = V.shape
    free = np.ones((T, T), dtype=bool) if p["mask"] is None else ~p["mask"]
    tol = 8 * (T + 2) * EPS64 * (1.0 + float(np.max(np.abs(V), initial=0.0)))
    for i in range(T):
        reachable = V[free[i]]  # (n, d_k): the rows token i may attend to
        lo, hi = reachable.min(axis=0), reachable.max(axis=0)
        assert np.all(Z[i] >= lo - tol) and np.all(Z[i] <= hi + tol), (i, Z[i], lo, hi)


# --------------------------------------------------------------------------- extreme inputs


@st.composite
def extreme_vectors(draw, dtype=np.float64):
    """Vectors with norms around 1e4 (1e3 .. 1e5), identical vectors, zero vectors, or a mix."""
    T = draw(st.integers(1, 8))
    d = draw(st.integers(1, 6))
    directions = draw(matrices(T, d, 1.0))
    norms = np.array(draw(st.lists(log_uniform(1e3, 1e5), min_size=T, max_size=T)))
    lengths = np.linalg.norm(directions, axis=1)
    unit = np.where(lengths[:, None] > 1e-3, directions / np.where(lengths > 1e-3, lengths, 1.0)[:, None], 0.0)
    unit[lengths <= 1e-3, 0] = 1.0  # a direction too short to normalise: the first axis
    huge = unit * norms[:, None]
    kind = draw(st.sampled_from(["huge", "identical", "zero", "mixed"]))
    if kind == "huge":
        X = huge
    elif kind == "identical":
        X = np.repeat(draw(st.sampled_from([huge[:1], np.zeros((1, d)), directions[:1]])), T, axis=0)
    elif kind == "zero":
        X = np.zeros((T, d))
    else:
        choice = draw(st.lists(st.sampled_from(["huge", "zero", "same", "small"]), min_size=T, max_size=T))
        X = np.array([{"huge": huge[i], "zero": np.zeros(d), "same": huge[0], "small": directions[i]}[c]
                      for i, c in enumerate(choice)])
    return X.astype(dtype)


SCALES = st.one_of(st.just(1.0), log_uniform(1e-300, 1e300))
TEMPERATURES = st.one_of(st.just(1.0), log_uniform(1e-300, 1e300))


def log10_largest_scaled(omega, scale, temperature) -> float:
    m = float(np.max(np.abs(omega)))
    return -math.inf if m == 0.0 else math.log10(m) + math.log10(scale) - math.log10(temperature)


@FAST
@given(extreme_vectors(), SCALES, TEMPERATURES, st.data())
def test_extreme_vectors_give_finite_weights_or_scale_error_never_nan(X, scale, temperature, data):
    T = len(X)
    kind, mask = data.draw(masks(T))
    if data.draw(st.booleans()):
        scale = attention.default_scale(X.shape[1])
    omega = attention.scores(X)
    assert np.all(np.isfinite(omega))  # norms <= 1e5: scores <= 1e10
    try:
        alpha = attention.weights(omega, scale, temperature, mask)
    except ScaleError as e:
        assert "overflow" in str(e)
        # refused only when the scaled scores (or the product omega * scale on the way) exceed float64
        m = float(np.max(np.abs(omega)))
        assert m > 0 and math.log10(m) + math.log10(scale) + max(0.0, -math.log10(temperature)) > LOG10_MAX - 1e-9
        return
    assert_distribution(alpha, mask)
    Z = attention.context(alpha, X)
    assert np.all(np.isfinite(Z))
    if not np.any(X):  # zero vectors: every score 0, every row uniform over what it may see
        free = np.ones((T, T), dtype=bool) if mask is None else ~mask
        np.testing.assert_allclose(alpha, free / free.sum(axis=1, keepdims=True), rtol=0, atol=4 * EPS64)
    if np.all(X == X[:1]):  # identical vectors: identical scores, uniform rows, z_i = x
        np.testing.assert_allclose(Z, X, rtol=8 * T * EPS64, atol=1e-300)  # (subnormal x: alpha x rounds)


@FAST
@example(omega=np.array([[1e8, 0.0]]), scale=1e301, temperature=1e10)
@given(omega=matrices(2, 2, 1e10), scale=SCALES, temperature=TEMPERATURES)
def test_scale_error_only_when_the_scaled_scores_really_overflow(omega, scale, temperature):
    largest = log10_largest_scaled(omega, scale, temperature)
    assume(abs(largest - LOG10_MAX) > 1e-6)  # not on the border itself
    try:
        alpha = attention.weights(omega, scale, temperature)
    except ScaleError:
        assert largest > LOG10_MAX, f"ScaleError, but the largest scaled score is 1e{largest:.3f}"
        return
    assert largest < LOG10_MAX and np.all(np.isfinite(alpha))


# --------------------------------------------------------------------------- blockwise stream


@st.composite
def stream_inputs(draw):
    T = draw(st.integers(1, 10))
    d = draw(st.integers(1, 6))
    X = draw(matrices(T, d, 4.0, dtype=np.float32))
    return dict(
        X=X,
        scale=draw(st.one_of(st.just(attention.default_scale(d)), log_uniform(1e-2, 3.0))),
        temperature=draw(log_uniform(0.1, 10.0)),
        k=draw(st.integers(1, T + 2)),
        causal=draw(st.booleans()),
        window=draw(st.one_of(st.none(), st.integers(0, T))),
        include_self=draw(st.booleans()),
        block=draw(st.integers(1, T + 2)),
    )


def stream_mask(T, causal, window):
    mask = np.zeros((T, T), dtype=bool)
    if causal:
        mask |= attention.causal_mask(T)
    if window is not None:
        mask |= attention.window_mask(T, window)
    return mask if (causal or window is not None) else None


@FAST
@given(stream_inputs())
@example(dict(X=np.array([[4], [-1], [-2.101024e-06], [-2.101024e-06]], dtype=np.float32), scale=1.0,
              temperature=1.0, k=2, causal=False, window=None, include_self=True, block=1))  # equal keys, 1e-5 apart
def test_stream_equals_the_whole_matrix_to_float32_precision(s):
    X, T, d = s["X"], len(s["X"]), s["X"].shape[1]
    mask = stream_mask(T, s["causal"], s["window"])
    X64 = X.astype(np.float64)
    alpha = attention.weights(attention.scores(X64), s["scale"], s["temperature"], mask)  # (T, T)
    Z = attention.context(alpha, X64)  # (T, d)
    # float32 rounding: a scaled score is off by about (d + 2) eps32 times sum_c |x_ic x_jc| c
    bound = float(np.max(np.abs(X64) @ np.abs(X64).T, initial=0.0)) * s["scale"] / s["temperature"]
    rel = 4 * (d + 3) * EPS32 * (1.0 + bound) + 4 * (T + 2) * EPS32
    atol_z = 2 * (rel + (T + 2) * EPS32) * (1.0 + float(np.max(np.abs(X64), initial=0.0)))
    free = np.ones((T, T), dtype=bool) if mask is None else ~mask
    kk = min(s["k"], T)

    expected_start = 0
    for start, top, w, Zb in attention.stream(X, s["scale"], s["temperature"], s["k"], causal=s["causal"],
                                              window=s["window"], include_self=s["include_self"], block=s["block"]):
        b = min(s["block"], T - start)
        assert start == expected_start and top.shape == w.shape == (b, kk) and Zb.shape == (b, d)
        expected_start += b
        np.testing.assert_allclose(Zb, Z[start:start + b], rtol=0, atol=atol_z)
        for r in range(b):
            i = start + r
            candidates = free[i].copy()
            if not s["include_self"]:
                candidates[i] = False
            n = min(s["k"], int(candidates.sum()))
            valid = w[r] >= 0
            assert valid.sum() == n and np.all(valid[:n]) and np.all(w[r][~valid] == -1.0)
            pos, wt = top[r][:n], w[r][:n]
            assert len(set(pos.tolist())) == n and np.all(candidates[pos])
            # largest first, but for weights within ranking.TIE of each other, which are ties and
            # go by position, or within float32's rounding of each other (rel: the online
            # softmax rescales a block's weights by its own factor, so equal scores in two
            # blocks may come out that far apart, in either order); tie order is checked on
            # exact ties below: two float32 weights equal after the division by the row's total
            # may come from unequal scores
            assert np.all(np.diff(wt) <= max(ranking.TIE, 2 * rel) * np.abs(wt[:-1]))
            np.testing.assert_allclose(wt, alpha[i, pos], rtol=rel, atol=1e-30)
            best = np.sort(alpha[i][candidates])[::-1][:n]  # the n largest candidate weights
            np.testing.assert_allclose(wt, best, rtol=rel, atol=1e-30)
    assert expected_start == T


@st.composite
def exact_stream_inputs(draw):
    """Small integer vectors, many repeated, and c = scale / temperature a power of two: every
    scaled score is exact in float32 and float64 alike, so ties are exact ties in both, and
    |scaled score| <= 13.5 keeps every exp() far from float32's underflow."""
    T = draw(st.integers(1, 10))
    d = draw(st.integers(1, 6))
    pool = draw(hnp.arrays(np.int64, (draw(st.integers(1, T)), d), elements=st.integers(-3, 3)))
    X = pool[draw(st.lists(st.integers(0, len(pool) - 1), min_size=T, max_size=T))].astype(np.float32)
    c = 2.0 ** draw(st.integers(-6, -2))
    temperature = 2.0 ** draw(st.integers(-1, 2))
    return dict(X=X, scale=c * temperature, temperature=temperature, k=draw(st.integers(1, T + 1)),
                causal=draw(st.booleans()), window=draw(st.one_of(st.none(), st.integers(0, T))),
                include_self=draw(st.booleans()), block=draw(st.integers(1, T + 1)))


@FAST
@given(exact_stream_inputs())
def test_stream_top_lists_are_top_attended_exactly_ties_to_the_earlier_position(s):
    """With exact ties, the blockwise top list must be the sentence path's own (top_attended):
    the same positions, in the same order, the earlier of equal weights first, also at the
    k-th place."""
    X, T = s["X"], len(s["X"])
    mask = stream_mask(T, s["causal"], s["window"])
    alpha = attention.weights(attention.scores(X), s["scale"], s["temperature"], mask)
    for start, top, w, _ in attention.stream(X, s["scale"], s["temperature"], s["k"], causal=s["causal"],
                                             window=s["window"], include_self=s["include_self"], block=s["block"]):
        for r in range(len(top)):
            i = start + r
            expected = attention.top_attended(alpha[i], s["k"], None if s["include_self"] else i,
                                              None if mask is None else mask[i])
            got = [int(j) for j, wt in zip(top[r], w[r]) if wt >= 0]
            assert got == expected, (i, got, expected, alpha[i])


@FAST
@given(extreme_vectors(dtype=np.float32), SCALES, TEMPERATURES, st.booleans(),
       st.one_of(st.none(), st.integers(0, 8)), st.integers(1, 9))
def test_stream_on_extreme_vectors_gives_finite_numbers_or_scale_error(X, scale, temperature, causal, window, block):
    try:
        for start, top, w, Zb in attention.stream(X, scale, temperature, 3, causal=causal, window=window,
                                                  block=block):
            assert np.all(np.isfinite(w)) and np.all(np.isfinite(Zb))
            assert np.all((w == -1.0) | ((w >= 0) & (w <= 1)))
    except ScaleError:
        pass


FLT_MAX = float(np.finfo(np.float32).max)


@FAST
@example(X=np.zeros((1, 1), np.float32), scale=1e39, temperature=1.0)
@example(X=np.full((1, 1), 1e-20, np.float32), scale=1e39, temperature=1.0)
@given(extreme_vectors(dtype=np.float32), SCALES, TEMPERATURES)
def test_stream_refuses_only_scaled_scores_beyond_float32(X, scale, temperature):
    """The blockwise path computes in float32, so it may refuse scaled scores float64 could hold;
    but it should not refuse scores that fit in float32 with room to spare (half its maximum)."""
    assume(math.isfinite(scale / temperature))  # a ratio beyond float64 is refused by both paths
    omega = attention.scores(X)  # float64, exact enough
    largest = log10_largest_scaled(omega, scale, temperature)
    try:
        for _ in attention.stream(X, scale, temperature, 2):
            pass
    except ScaleError:
        assert largest > math.log10(FLT_MAX / 2), f"ScaleError, but the largest scaled score is 1e{largest:.3f}"


# --------------------------------------------------------------------------- JSON documents: schema


class Schema:
    def check(self, value, path: str) -> None:  # raises AssertionError naming the path
        raise NotImplementedError


class _Num(Schema):
    def check(self, value, path):
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{path}: {value!r} is not a number"
        assert math.isfinite(value), f"{path}: {value!r} is not finite"


class _Int(Schema):
    def check(self, value, path):
        assert isinstance(value, int) and not isinstance(value, bool), f"{path}: {value!r} is not an integer"


class _Str(Schema):
    def check(self, value, path):
        assert isinstance(value, str), f"{path}: {value!r} is not a string"


class _Bool(Schema):
    def check(self, value, path):
        assert isinstance(value, bool), f"{path}: {value!r} is not true or false"


NUM, INT, STR, BOOL = _Num(), _Int(), _Str(), _Bool()


class Enum(Schema):
    def __init__(self, *values):
        self.values = values

    def check(self, value, path):
        assert value in self.values and type(value) is type(self.values[0]), f"{path}: {value!r} not one of {self.values}"


class Arr(Schema):
    """A list of `item`s, exactly n long when n is given, at most max_n."""

    def __init__(self, item: Schema, n: int | None = None, max_n: int | None = None):
        self.item, self.n, self.max_n = item, n, max_n

    def check(self, value, path):
        assert isinstance(value, list), f"{path}: {type(value).__name__} is not a list"
        if self.n is not None:
            assert len(value) == self.n, f"{path}: length {len(value)}, not {self.n}"
        if self.max_n is not None:
            assert len(value) <= self.max_n, f"{path}: length {len(value)} > {self.max_n}"
        for i, v in enumerate(value):
            self.item.check(v, f"{path}[{i}]")


class Obj(Schema):
    """A dict with exactly the `required` keys plus any of the `optional` ones."""

    def __init__(self, required: dict, optional: dict | None = None):
        self.required, self.optional = required, optional or {}

    def check(self, value, path):
        assert isinstance(value, dict), f"{path}: {type(value).__name__} is not an object"
        missing = set(self.required) - set(value)
        extra = set(value) - set(self.required) - set(self.optional)
        assert not missing and not extra, f"{path}: missing keys {sorted(missing)}, undocumented keys {sorted(extra)}"
        for key, schema in {**self.required, **self.optional}.items():
            if key in value:
                schema.check(value[key], f"{path}.{key}")


class OneOf(Schema):
    def __init__(self, *options: Schema):
        self.options = options

    def check(self, value, path):
        errors = []
        for option in self.options:
            try:
                option.check(value, path)
                return
            except AssertionError as e:
                errors.append(str(e))
        raise AssertionError(f"{path}: matches none of: " + " | ".join(errors))


def matrix(rows: int, cols: int) -> Arr:
    return Arr(Arr(NUM, cols), rows)


TOP_ITEM = Obj({"token": STR, "index": INT, "weight": NUM})
NEIGHBOR = Obj({"word": STR, "cosine": NUM})
QKV = OneOf(
    Obj({"kind": Enum("identity"), "d_k": INT, "heads": INT}),
    Obj({"kind": Enum("random"), "d_k": INT, "heads": INT, "seed": INT}),
    Obj({"kind": Enum("file"), "d_k": INT, "heads": INT, "path": STR}),
)


def common_keys(command: str, T: int) -> dict:
    """The keys every document has, `command` down to `temperature` (docs/reference/json.md)."""
    return {
        "command": Enum(command),
        "sentence": STR,
        "tokens": Arr(STR, T),
        "lookups": Arr(Enum("word", "subwords", "zero"), T),
        "oov": Arr(STR),
        "vectors": Obj({"name": STR, "dim": INT, "words": INT}),
        "qkv": QKV,
        "mask": Enum("none", "causal"),
        "scale": NUM,
        "temperature": NUM,
    }


def scores_schema(T: int, H: int, top_k: int) -> Schema:
    top = Arr(Arr(TOP_ITEM, max_n=top_k), T)
    return Obj({**common_keys("scores", T), "scores": matrix(T, T), "weights": matrix(T, T), "top": top,
                "include_self": BOOL, "heads": Arr(Obj({"scores": matrix(T, T), "weights": matrix(T, T), "top": top}), H)})


def context_schema(T: int, d_k: int, H: int, top_k: int, neighbors: int, token: bool, all_contexts: bool) -> Schema:
    keys = common_keys("context", T)
    if token:
        keys.update({
            "token": STR, "index": INT, "weights": Arr(NUM, T), "top": Arr(TOP_ITEM, max_n=top_k),
            "include_self": BOOL, "heads": Arr(Obj({"weights": Arr(NUM, T), "top": Arr(TOP_ITEM, max_n=top_k)}), H),
            "context": Arr(NUM, d_k),
            "neighbors": Arr(NEIGHBOR, max_n=neighbors), "token_neighbors": Arr(NEIGHBOR, max_n=neighbors),
        })
    if all_contexts:
        keys["contexts"] = matrix(T, d_k)
    return Obj(keys)


def explain_schema(T: int, d: int, d_k: int, H: int, token: bool) -> Schema:
    cube = Arr(matrix(T, T), H)  # H x T x T
    keys = {**common_keys("explain", T), "steps": Obj({
        "X": matrix(T, d), "Q": matrix(T, d_k), "K": matrix(T, d_k), "V": matrix(T, d_k),
        "scores": cube, "scaled": cube, "weights": cube, "context": matrix(T, d_k)})}
    if token:
        keys.update({"token": STR, "index": INT, "row": Obj({
            "x": Arr(NUM, d), "q": Arr(NUM, d_k), "scores": matrix(H, T), "scaled": matrix(H, T),
            "weights": matrix(H, T), "context": Arr(NUM, d_k),
            "shown": Obj({"scores": Arr(NUM, T), "scaled": Arr(NUM, T), "weights": Arr(NUM, T)})})})
    return Obj(keys)


def test_the_schema_checker_rejects_what_it_should():
    """The checker itself: a wrong shape, a missing or extra key, a bool for a number, NaN."""
    good = {"token": "a", "index": 0, "weight": 0.5}
    TOP_ITEM.check(good, "$")
    for bad in ({"token": "a", "index": 0}, {**good, "extra": 1}, {**good, "index": True},
                {**good, "weight": float("nan")}, {**good, "index": 0.0}):
        with pytest.raises(AssertionError):
            TOP_ITEM.check(bad, "$")
    with pytest.raises(AssertionError):
        matrix(2, 2).check([[1.0, 2.0], [3.0]], "$")
    with pytest.raises(AssertionError):
        QKV.check({"kind": "random", "d_k": 2, "heads": 1}, "$")  # random without its seed


def no_constants(name):
    raise ValueError(f"{name} in the JSON")


def round_trip(doc: dict) -> dict:
    text = to_json(doc)
    assert "\n" not in text  # one line
    back = json.loads(text, parse_constant=no_constants)
    assert back == doc  # nothing lost: plain lists, ints, floats and strings only
    return back


# --------------------------------------------------------------------------- JSON documents: a vocabulary of exact values

D = 6
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
PUNCT = [",", "."]
OOV_WORDS = ["zzz", "qux", "!"]  # "!" is punctuation without a vector


def exact_vocabulary() -> dict[str, np.ndarray]:
    """Every value a multiple of 1/64 (or an integer), exact in float32 and in decimal."""
    rng = np.random.default_rng(7)
    vocab = {w: rng.integers(-128, 129, size=D) / 64 for w in WORDS + PUNCT}
    vocab["twin"] = vocab["theta"].copy()  # identical vectors
    vocab["nil"] = np.zeros(D)  # a zero vector
    vocab["huge"] = rng.choice([-1, 1], size=D) * rng.integers(3000, 5000, size=D).astype(float)  # norm ~ 1e4
    return vocab


VOCAB = exact_vocabulary()
IN_VOCAB = [w for w in VOCAB if not is_punctuation(w)]


@pytest.fixture(scope="module")
def exact_vectors_qkv(tmp_path_factory):
    """VOCAB as a word2vec text file (tiny.txt), loaded once; a projections file (d_k 4), and its W."""
    folder = tmp_path_factory.mktemp("exact")
    lines = [f"{len(VOCAB)} {D}"] + [w + " " + " ".join(repr(float(v)) for v in vec) for w, vec in VOCAB.items()]
    (folder / "tiny.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    vectors = load_vectors(folder / "tiny.txt")
    rng = np.random.default_rng(3)
    W = {name: rng.integers(-64, 65, size=(D, 4)) / 64 for name in ("W_query", "W_key", "W_value")}
    np.savez(folder / "proj.npz", **W, b_query=np.full(4, 0.25))
    return vectors, str(folder / "proj.npz"), W


@st.composite
def sentences(draw):
    """A sentence of vocabulary words (at least one), punctuation and words without vectors,
    some capitalised, and the tokens, lookups and oov the document must show for it."""
    items = draw(st.lists(st.sampled_from(IN_VOCAB + PUNCT + OOV_WORDS), max_size=7))
    items.insert(draw(st.integers(0, len(items))), draw(st.sampled_from(IN_VOCAB)))
    caps = draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items)))
    return " ".join(w.capitalize() if c else w for w, c in zip(items, caps)), items


@st.composite
def options(draw):
    qkv = draw(st.sampled_from(["identity", "random", "file"]))
    if qkv == "identity":
        d_k_opt, d_k = draw(st.sampled_from([None, D])), D
    elif qkv == "random":
        d_k_opt = draw(st.one_of(st.none(), st.integers(1, 8)))
        d_k = d_k_opt or D
    else:
        d_k_opt, d_k = draw(st.sampled_from([None, 4])), 4
    return Options(
        scale=draw(st.one_of(st.none(), log_uniform(1e-3, 10.0))),
        temperature=draw(log_uniform(0.05, 20.0)),
        top_k=draw(st.integers(1, 10)),
        include_self=draw(st.booleans()),
        keep_punct=draw(st.booleans()),
        oov=draw(st.sampled_from(["skip", "zero"])),
        qkv=qkv,  # "file" is replaced by the path in the test
        d_k=d_k_opt,
        seed=draw(st.integers(0, 3)),
        heads=draw(st.sampled_from(divisors(d_k))),
        mask=draw(st.sampled_from(["none", "causal"])),
    ), d_k


def with_path(opts: Options, path: str) -> Options:
    from dataclasses import replace

    return replace(opts, qkv=path) if opts.qkv == "file" else opts


def expected_tokens(items: list[str], opts: Options):
    """tokens, lookups, oov as docs/reference/json.md says: punctuation left out unless
    keep_punct; a word without a vector left out (skip) or kept with a zero vector (zero), and
    listed in oov."""
    tokens, lookups, oov = [], [], []
    for w in items:
        if is_punctuation(w) and not opts.keep_punct:
            continue
        if w in VOCAB:
            tokens.append(w)
            lookups.append("word")
        else:
            oov.append(w)
            if opts.oov == "zero":
                tokens.append(w)
                lookups.append("zero")
    return tokens, lookups, oov


def check_common(doc, sentence, items, opts, d_k, vectors, path):
    tokens, lookups, oov = expected_tokens(items, opts)
    assert doc["sentence"] == sentence
    assert (doc["tokens"], doc["lookups"], doc["oov"]) == (tokens, lookups, oov)
    assert doc["vectors"]["dim"] == D and doc["vectors"]["words"] == len(VOCAB) == vectors.size
    qkv = {"kind": {"identity": "identity", "random": "random"}.get(opts.qkv, "file"), "d_k": d_k, "heads": opts.heads}
    if opts.qkv == "random":
        qkv["seed"] = opts.seed
    elif opts.qkv == path:
        qkv["path"] = path
    assert doc["qkv"] == qkv
    assert doc["mask"] == opts.mask and doc["temperature"] == opts.temperature
    default = attention.default_scale(d_k // opts.heads)
    assert doc["scale"] == (default if opts.scale is None else opts.scale)
    return tokens


def check_weights(weights, mask_kind):
    """A T x T (or one row, as rows[i:i+1] with its row index) of weights: rows sum to 1,
    masked (j > i) cells exactly 0."""
    W = np.array(weights)
    assert np.all((W >= 0) & (W <= 1))
    np.testing.assert_allclose(W.sum(axis=-1), 1.0, rtol=0, atol=4 * EPS32 * W.shape[-1])
    if mask_kind == "causal":
        assert np.all(W[np.triu_indices(len(W), k=1)] == 0.0)


def check_top(top, tokens, row, i, opts):
    """One token's top list against its row of weights: documented order and exclusions."""
    T = len(tokens)
    candidates = [j for j in range(T) if (opts.include_self or j != i) and not (opts.mask == "causal" and j > i)]
    assert len(top) == min(opts.top_k, len(candidates))
    for item in top:
        j = item["index"]
        assert j in candidates and item["token"] == tokens[j] and item["weight"] == row[j]
    expected = [j for j in by_rule(row) if j in candidates][:len(top)]  # largest first, ties earlier first
    assert [item["index"] for item in top] == expected


def check_neighbors(neighbors, v, exclude: set[str], k: int):
    """Vocabulary words nearest v by cosine, nearest first, the word itself and punctuation
    and zero vectors left out; as many as there are, up to k."""
    v = np.asarray(v, dtype=np.float64)
    eligible = {w: vec for w, vec in VOCAB.items() if w not in exclude and not is_punctuation(w) and np.any(vec)}
    if not np.any(v):
        assert neighbors == []
        return
    cos = {w: float(vec @ v / (np.linalg.norm(vec) * np.linalg.norm(v))) for w, vec in eligible.items()}
    assert len(neighbors) == min(k, len(eligible))
    got = [n["word"] for n in neighbors]
    assert len(set(got)) == len(got) and set(got) <= set(eligible)
    cosines = [n["cosine"] for n in neighbors]
    assert all(a >= b for a, b in zip(cosines, cosines[1:]))
    for n in neighbors:
        assert abs(n["cosine"] - cos[n["word"]]) <= 1e-5
    if neighbors:  # nobody left out is nearer than the last one kept
        assert all(c <= cosines[-1] + 1e-5 for w, c in cos.items() if w not in got)


@DOCS
@given(sentences(), options())
def test_scores_document_round_trips_and_matches_the_schema(exact_vectors_qkv, sentence_items, opts_dk):
    vectors, path, _ = exact_vectors_qkv
    (sentence, items), (opts, d_k) = sentence_items, opts_dk
    opts = with_path(opts, path)
    doc = round_trip(sentence_docs.scores_doc(sentence, vectors, opts))
    tokens, _, _ = expected_tokens(items, opts)
    T = len(tokens)
    scores_schema(T, opts.heads, opts.top_k).check(doc, "$")
    check_common(doc, sentence, items, opts, d_k, vectors, path)
    check_weights(doc["weights"], opts.mask)
    assert doc["include_self"] is opts.include_self  # what the top lists may hold
    for i in range(T):
        check_top(doc["top"][i], tokens, doc["weights"][i], i, opts)
    for head in doc["heads"]:
        check_weights(head["weights"], opts.mask)
        for i in range(T):
            check_top(head["top"][i], tokens, head["weights"][i], i, opts)
    if opts.qkv == "identity":  # Q = K = X: head h's scores are x_i . x_j over its columns
        X = np.array([VOCAB.get(t, np.zeros(D)) for t in tokens])
        Xh = attention.split_heads(X, opts.heads)
        np.testing.assert_allclose([h["scores"] for h in doc["heads"]], Xh @ np.swapaxes(Xh, -1, -2),
                                   rtol=1e-12, atol=1e-12 * (1 + np.max(np.abs(X)) ** 2))
    # with several heads, the top-level matrices are the heads' mean
    for key in ("scores", "weights"):
        mean = np.mean([h[key] for h in doc["heads"]], axis=0)
        np.testing.assert_allclose(doc[key], mean, rtol=1e-12, atol=1e-12 * (1 + np.max(np.abs(mean))))


@DOCS
@given(sentences(), options(), st.data())
def test_context_document_round_trips_and_matches_the_schema(exact_vectors_qkv, sentence_items, opts_dk, data):
    vectors, path, _ = exact_vectors_qkv
    (sentence, items), (opts, d_k) = sentence_items, opts_dk
    opts = with_path(opts, path)
    tokens, _, _ = expected_tokens(items, opts)
    T = len(tokens)
    how = data.draw(st.sampled_from(["index", "token+index", "token", "all"]))
    i = data.draw(st.integers(0, T - 1))
    if how == "token" and tokens.count(tokens[i]) > 1:
        how = "token+index"  # a repeated token needs its index
    token = tokens[i] if how in ("token", "token+index") else None
    index = i if how in ("index", "token+index") else None
    all_contexts = how == "all" or data.draw(st.booleans())
    k = data.draw(st.integers(1, 12))
    doc = round_trip(context_docs.context_doc(sentence, vectors, opts, token=token, index=index,
                                         all_contexts=all_contexts, neighbors=k))
    followed = how != "all"
    context_schema(T, d_k, opts.heads, opts.top_k, k, followed, all_contexts).check(doc, "$")
    check_common(doc, sentence, items, opts, d_k, vectors, path)
    # the same numbers as the scores document: the two views never disagree
    whole = sentence_docs.scores_doc(sentence, vectors, opts)
    X = np.array([VOCAB.get(t, np.zeros(D)) for t in tokens])
    z = None
    if opts.qkv == "identity":  # V = X, so z_i = sum_j alpha^h_ij x_j, head h on its columns of x
        cols = D // opts.heads
        z = np.concatenate([np.array(h["weights"]) @ X[:, h_i * cols:(h_i + 1) * cols]
                            for h_i, h in enumerate(whole["heads"])], axis=1)  # (T, d)
        z_tol = 1e-12 * (1 + np.max(np.abs(X))) * T
        if all_contexts:
            np.testing.assert_allclose(doc["contexts"], z, rtol=0, atol=z_tol)
    if not followed:
        return
    assert doc["token"] == tokens[i] and doc["index"] == i
    assert doc["weights"] == whole["weights"][i] and doc["top"] == whole["top"][i]
    assert doc["include_self"] is opts.include_self
    assert doc["heads"] == [{"weights": h["weights"][i], "top": h["top"][i]} for h in whole["heads"]]
    check_weights([doc["weights"]], "none")
    if opts.mask == "causal":
        assert all(w == 0.0 for w in doc["weights"][i + 1:])
    check_top(doc["top"], tokens, doc["weights"], i, opts)
    if all_contexts:
        assert doc["contexts"][i] == doc["context"]
    own = {tokens[i]}
    check_neighbors(doc["token_neighbors"], X[i], own, k)
    if opts.qkv != "identity":
        assert doc["neighbors"] == []  # a sum of value vectors, not a word vector
        return
    np.testing.assert_allclose(doc["context"], z[i], rtol=0, atol=z_tol)
    check_neighbors(doc["neighbors"], doc["context"], own, k)


@DOCS
@given(sentences(), options(), st.data())
def test_explain_document_round_trips_and_matches_the_schema(exact_vectors_qkv, sentence_items, opts_dk, data):
    vectors, path, W = exact_vectors_qkv
    (sentence, items), (opts, d_k) = sentence_items, opts_dk
    opts = with_path(opts, path)
    tokens, _, _ = expected_tokens(items, opts)
    T, H = len(tokens), opts.heads
    follow = data.draw(st.booleans())
    i = data.draw(st.integers(0, T - 1))
    doc = round_trip(context_docs.explain_doc(sentence, vectors, opts, index=i if follow else None))
    explain_schema(T, D, d_k, H, follow).check(doc, "$")
    check_common(doc, sentence, items, opts, d_k, vectors, path)
    steps = {k: np.array(v) for k, v in doc["steps"].items()}
    X = np.array([VOCAB.get(t, np.zeros(D)) for t in tokens])
    np.testing.assert_array_equal(steps["X"], X)  # the file's numbers, exactly
    if opts.qkv == "identity":
        for key in "QKV":
            np.testing.assert_array_equal(steps[key], X)
    else:  # the file's W (and b_query), or the seed's draws as the math guide documents them
        Ws = W if opts.qkv == path else attention.init_projections(D, d_k, opts.seed)
        b = 0.25 if opts.qkv == path else 0.0
        np.testing.assert_allclose(steps["Q"], X @ Ws["W_query"] + b, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(steps["K"], X @ Ws["W_key"], rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(steps["V"], X @ Ws["W_value"], rtol=1e-12, atol=1e-9)
    Qh, Kh, Vh = (attention.split_heads(steps[key], H) for key in "QKV")
    np.testing.assert_allclose(steps["scores"], Qh @ np.swapaxes(Kh, -1, -2), rtol=1e-12,
                               atol=1e-12 * (1 + np.max(np.abs(steps["scores"]))))
    np.testing.assert_array_equal(steps["scaled"], steps["scores"] * doc["scale"] / doc["temperature"])
    for h in range(H):
        check_weights(steps["weights"][h], opts.mask)
    z = attention.merge_heads(steps["weights"] @ Vh)
    np.testing.assert_allclose(steps["context"], z, rtol=1e-12, atol=1e-12 * (1 + np.max(np.abs(steps["V"]))) * T)
    if follow:
        assert doc["token"] == tokens[i] and doc["index"] == i
        row = doc["row"]
        assert row["x"] == doc["steps"]["X"][i] and row["q"] == doc["steps"]["Q"][i]
        assert row["context"] == doc["steps"]["context"][i]
        for key in ("scores", "scaled", "weights"):
            assert row[key] == [m[i] for m in doc["steps"][key]]
            # over word vectors no head is chosen: the heads' mean
            np.testing.assert_allclose(row["shown"][key], np.mean(row[key], axis=0), rtol=1e-12, atol=0)
