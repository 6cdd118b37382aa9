"""The math of attention.py against hand-computed cases and an independent loop."""

import math

import numpy as np
import pytest

from attncli import attention, ranking
from attncli.attention import ScaleError
from helpers import by_rule


def loop_attention(X, scale, temperature):
    """Steps I-III written as plain loops over Python floats, independent of numpy's matrix code."""
    X = [[float(v) for v in row] for row in X]
    T, d = len(X), len(X[0])
    omega = [[sum(X[i][k] * X[j][k] for k in range(d)) for j in range(T)] for i in range(T)]
    alpha = []
    for i in range(T):
        logits = [omega[i][j] * scale / temperature for j in range(T)]
        top = max(logits)
        e = [math.exp(x - top) for x in logits]
        alpha.append([x / sum(e) for x in e])
    Z = [[sum(alpha[i][j] * X[j][k] for j in range(T)) for k in range(d)] for i in range(T)]
    return np.array(omega), np.array(alpha), np.array(Z)


def test_scores_by_hand():
    X = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    # x0.x0 = 1, x0.x1 = 1, x0.x2 = 0; x1.x1 = 2, x1.x2 = 2; x2.x2 = 4
    assert attention.scores(X).tolist() == [[1, 1, 0], [1, 2, 2], [0, 2, 4]]


def test_weights_by_hand():
    omega = np.array([[0.0, math.log(3.0)], [2.0, 2.0]])
    # row 0: softmax(0, ln 3) = (1/4, 3/4); row 1: equal scores, equal weights
    alpha = attention.weights(omega, scale=1.0)
    np.testing.assert_allclose(alpha, [[0.25, 0.75], [0.5, 0.5]], rtol=1e-15)


def test_scale_and_temperature_by_hand():
    omega = np.array([[0.0, 2 * math.log(3.0)]])
    # scale 1/2 turns 2 ln 3 into ln 3: weights (1/4, 3/4); temperature 2 does the same
    np.testing.assert_allclose(attention.weights(omega, 0.5), [[0.25, 0.75]], rtol=1e-15)
    np.testing.assert_allclose(attention.weights(omega, 1.0, temperature=2.0), [[0.25, 0.75]], rtol=1e-15)


def test_context_by_hand():
    X = np.array([[2.0, 0.0], [0.0, 4.0]])
    alpha = np.array([[0.25, 0.75], [0.5, 0.5]])
    # z0 = 0.25 (2, 0) + 0.75 (0, 4) = (0.5, 3); z1 = (1, 2)
    assert attention.context(alpha, X).tolist() == [[0.5, 3.0], [1.0, 2.0]]


def test_default_scale_is_one_over_sqrt_d():
    assert attention.default_scale(50) == 1 / math.sqrt(50)
    assert attention.default_scale(4) == 0.5


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("scale,temperature", [(1.0, 1.0), (0.2, 1.0), (1.0, 0.5), (0.3, 3.0)])
def test_against_loop(seed, scale, temperature):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rng.integers(1, 8), rng.integers(2, 6))).astype(np.float32)
    omega, alpha, Z = loop_attention(X, scale, temperature)
    got_omega = attention.scores(X)
    got_alpha = attention.weights(got_omega, scale, temperature)
    np.testing.assert_allclose(got_omega, omega, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_alpha, alpha, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(attention.context(got_alpha, X), Z, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_alpha.sum(axis=1), 1.0, rtol=1e-12)


def test_softmax_is_stable_for_large_scores():
    # exp(1000) overflows; subtracting the row max keeps it finite and exact
    alpha = attention.softmax(np.array([[1000.0, 1000.0 + math.log(3.0)]]))
    np.testing.assert_allclose(alpha, [[0.25, 0.75]], rtol=1e-12)


def test_zero_vectors_attend_uniformly():
    X = np.zeros((3, 4))
    alpha = attention.weights(attention.scores(X), 0.5)
    np.testing.assert_array_equal(alpha, np.full((3, 3), 1 / 3))


def test_overflowing_scale_is_refused():
    with pytest.raises(ScaleError, match="scale"):
        attention.weights(np.array([[10.0, 1.0]]), scale=1e308)


def by_sorting(row, k, exclude, masked):
    """A row's top k as the definition says: positions ranked by weight, ties (within
    ranking.TIE) by position, the excluded and masked ones left out; independent of
    top_attended's numpy sort (helpers.by_rule)."""
    return [j for j in by_rule(row) if j != exclude and (masked is None or not masked[j])][:k]


@pytest.mark.parametrize("T", [1, 2, 5, 17])
def test_top_attended_rows_equal_each_rows_top(T):
    rng = np.random.default_rng(T)
    for trial in range(20):
        # few distinct values, so that ties are common; exact zeros where a mask would put them
        alpha = rng.integers(0, 4, size=(T, T)).astype(float) / 4
        mask = None if trial % 3 == 0 else (attention.causal_mask(T) if trial % 3 == 1 else rng.random((T, T)) < 0.3)
        if mask is not None:
            np.fill_diagonal(mask, False)
        for k in (1, 3, T + 2):
            for include_self in (False, True):
                rows, values = attention.top_attended_rows(alpha, k, include_self, mask)
                for i in range(T):
                    exclude, masked = None if include_self else i, None if mask is None else mask[i]
                    want = attention.top_attended(alpha[i], k, exclude, masked)
                    assert rows[i] == want == by_sorting(alpha[i].tolist(), k, exclude, masked)
                    assert values[i] == [alpha[i, j] for j in want]


def test_top_attended_order_ties_and_exclusion():
    row = np.array([0.1, 0.4, 0.1, 0.4])
    assert attention.top_attended(row, 3) == [1, 3, 0]  # ties: earlier position first
    assert attention.top_attended(row, 3, exclude=1) == [3, 0, 2]
    assert attention.top_attended(row, 10, exclude=0) == [1, 3, 2]
    assert attention.top_attended(np.array([1.0]), 3, exclude=0) == []


# --------------------------------------------------------------------------- parameters, checked


from pathlib import Path  # noqa: E402

from attncli import AttncliError, OptionError, Options, load_vectors, scores_doc  # noqa: E402

BAD_OPTIONS = [
    (dict(temperature=-1), "temperature must be a positive finite number, got -1"),
    (dict(temperature=0), "temperature must be a positive finite number, got 0"),
    (dict(temperature=float("inf")), "temperature must be a positive finite number, got inf"),
    (dict(temperature="2"), "temperature must be a positive finite number, got '2'"),
    (dict(scale=float("nan")), "scale must be a finite number, got nan"),
    (dict(scale=True), "scale must be a finite number, got True"),
    (dict(mask="causl"), "mask must be one of 'none', 'causal', 'self', got 'causl'"),
    (dict(oov="skp"), "oov must be one of 'skip', 'zero', 'error', got 'skp'"),
    (dict(top_k=0), "top_k must be a whole number of 1 or more, got 0"),
    (dict(top_k=2.5), "top_k must be a whole number of 1 or more, got 2.5"),
    (dict(heads=0), "heads must be a whole number of 1 or more, got 0"),
    (dict(d_k=-3), "d_k must be a whole number of 1 or more, got -3"),
    (dict(seed=-1), "seed must be a whole number of 0 or more, got -1"),
    (dict(include_self="yes"), "include_self must be True or False, got 'yes'"),
    (dict(qkv=""), "qkv must be 'identity', 'random' or the path of a .npz file, got ''"),
    (dict(qkv=None), "qkv must be 'identity', 'random' or the path of a .npz file, got None"),
]


@pytest.mark.parametrize("fields,message", BAD_OPTIONS, ids=[m.split(" must")[0] + "=" + m.split("got ")[1]
                                                              for _, m in BAD_OPTIONS])
def test_options_are_checked_when_made_naming_the_field(fields, message):
    with pytest.raises(OptionError) as caught:
        Options(**fields)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, AttncliError)


def test_options_keep_plain_numbers():
    opts = Options(scale=np.float32(0.5), temperature=2, top_k=np.int64(4), qkv=Path("p.npz"), include_self=np.True_)
    assert (opts.scale, opts.temperature, opts.top_k, opts.qkv, opts.include_self) == (0.5, 2.0, 4, "p.npz", True)
    assert type(opts.scale) is float and type(opts.temperature) is float and type(opts.top_k) is int
    assert Options() == Options(None, 1.0, 3, False, False, "skip", "identity", None, 0, 1, "none")


def test_a_negative_temperature_never_inverts_attention():
    with pytest.raises(OptionError, match="temperature"):
        scores_doc("the cat sat", load_vectors(), Options(temperature=-1))


@pytest.mark.filterwarnings("error")  # a numpy RuntimeWarning is a failure here
@pytest.mark.parametrize("scale,temperature,message", [
    (np.float64(0.5), 0, "temperature must be a positive finite number, got 0"),
    (np.float64(0.5), 0.0, "temperature must be a positive finite number, got 0.0"),
    (1.0, -1.0, "temperature must be a positive finite number, got -1.0"),
    (1.0, np.nan, "temperature must be a positive finite number, got nan"),
    (np.inf, 1.0, "scale must be a finite number, got inf"),
    (None, 1.0, "scale must be a finite number, got None"),
])
def test_weights_and_stream_check_scale_and_temperature(scale, temperature, message):
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=np.float32)
    with pytest.raises(OptionError) as caught:
        attention.weights(attention.scores(X), scale, temperature)
    assert str(caught.value) == message
    with pytest.raises(OptionError) as caught:
        next(attention.stream(X, scale, temperature, 2))
    assert str(caught.value) == message


@pytest.mark.parametrize("call,message", [
    (lambda: attention.default_scale(0), "d_k must be a whole number of 1 or more, got 0"),
    (lambda: attention.split_heads(np.ones((2, 4)), 3), "heads must divide d_k = 4, got 3"),
    (lambda: attention.split_heads(np.ones((2, 4)), 0), "heads must be a whole number of 1 or more, got 0"),
    (lambda: next(attention.stream(np.ones((2, 2), np.float32), 1.0, 1.0, 0)), "k must be a whole number of 1 or more"),
    (lambda: next(attention.stream(np.ones((2, 2), np.float32), 1.0, 1.0, 1, window=-1)), "window must be a whole"),
    (lambda: load_vectors(limit=0), "limit must be a whole number of 1 or more, got 0"),
])
def test_the_other_public_functions_check_their_parameters(call, message):
    with pytest.raises(OptionError, match=message.replace("(", r"\(")):
        call()


def test_an_overflow_names_the_parameters_and_their_flags():
    with pytest.raises(ScaleError) as caught:
        attention.weights(np.array([[1e300]]), 1e300, 1.0)
    assert "a smaller scale (--scale) or a larger temperature (--temperature)" in str(caught.value)


def test_mask_self_gives_no_weight_to_a_token_itself_and_the_rest_as_softmax_over_the_others():
    from attncli import attention

    rng = np.random.default_rng(11)
    X = rng.normal(size=(6, 4))
    omega = attention.scores(X)
    alpha = attention.weights(omega, 0.5, 1.0, attention.self_mask(6))
    assert np.all(np.diag(alpha) == 0)
    np.testing.assert_allclose(alpha.sum(axis=1), 1, atol=1e-15)
    for i in range(6):
        others = [j for j in range(6) if j != i]
        e = np.exp(0.5 * omega[i, others] - (0.5 * omega[i, others]).max())
        np.testing.assert_allclose(alpha[i, others], e / e.sum(), rtol=1e-13)


@pytest.mark.parametrize("window", [None, 2])
def test_the_stream_with_mask_self_equals_the_whole_matrix(window):
    from attncli import attention

    rng = np.random.default_rng(12)
    X = rng.normal(size=(40, 5)).astype(np.float32)
    mask = attention.self_mask(40)
    if window is not None:
        mask = mask | attention.window_mask(40, window)
    alpha = attention.weights(attention.scores(X), 0.3, 1.0, mask)
    for start, top, w, Z in attention.stream(X, 0.3, 1.0, 3, block=16, window=window, exclude_self=True):
        for r in range(len(Z)):
            i = start + r
            np.testing.assert_allclose(Z[r], alpha[i] @ X.astype(float), rtol=2e-5, atol=2e-6)
            filled = w[r] >= 0  # -1: a place no candidate filled, its position meaningless
            assert i not in top[r][filled]
            np.testing.assert_allclose(w[r][filled], alpha[i, top[r][filled]], rtol=2e-5)


@pytest.mark.parametrize("k", [1, 3, attention.ROUNDS, attention.ROUNDS + 1, 40])
def test_top_k_by_rounds_and_by_partition_equal_the_definition(k):
    """The stream's _top_k (rounds of argmax up to ROUNDS, argpartition past it) against a
    sort by (-weight, position), on rows full of ties and of masked cells (-1)."""
    rng = np.random.default_rng(k)
    E = rng.integers(0, 5, size=(30, 50)).astype(np.float32) / 4
    E[rng.random(E.shape) < 0.3] = -1.0
    E[0] = -1.0  # a row with no candidate
    top, w = attention._top_k(E.copy(), k)
    for r in range(len(E)):
        want = [j for j in by_sorting(E[r].tolist(), k, None, E[r] < 0)]
        got = [j for j, v in zip(top[r].tolist(), w[r].tolist()) if v >= 0]
        assert got == want
        assert w[r].tolist() == [float(E[r, j]) for j in want] + [-1.0] * (k - len(want))


def test_multi_head_is_each_head_apart_side_by_side():
    rng = np.random.default_rng(3)
    Q, K, V = rng.normal(size=(5, 6)), rng.normal(size=(4, 6)), rng.normal(size=(4, 9))  # T = 5 queries, 4 keys
    mask = np.zeros((5, 4), dtype=bool)
    mask[0, 1:] = True
    omega, alpha, Z = attention.multi_head(Q, K, V, 3, 0.7, 2.0, mask)
    for h in range(3):  # head h: columns 2h, 2h + 1 of Q and K, 3h .. 3h + 2 of V, by a loop over rows
        q, k, v = Q[:, 2 * h:2 * h + 2], K[:, 2 * h:2 * h + 2], V[:, 3 * h:3 * h + 3]
        for i in range(5):
            raw = [float(q[i] @ k[j]) for j in range(4)]
            e = [0.0 if mask[i, j] else math.exp(raw[j] * 0.7 / 2.0) for j in range(4)]
            a = [x / sum(e) for x in e]
            assert omega[h, i] == pytest.approx(raw, abs=1e-12)
            assert alpha[h, i] == pytest.approx(a, abs=1e-12)
            assert Z[i, 3 * h:3 * h + 3] == pytest.approx(sum(a[j] * v[j] for j in range(4)), abs=1e-12)


def loop_softmax_rows(logits, hidden):
    """Each row's softmax over the keys it may attend to, a Python float at a time."""
    out = np.zeros(logits.shape)
    for index in np.ndindex(logits.shape[:-1]):
        row = [float(x) for x, h in zip(logits[index], hidden[index[-1]]) if not h]
        top = max(row)
        total = sum(math.exp(x - top) for x in row)
        out[index] = [0.0 if h else math.exp(float(x) - top) / total for x, h in zip(logits[index], hidden[index[-1]])]
    return out


@pytest.mark.parametrize("window", [None, 3])
def test_blocks_of_rows_give_the_whole_matrix(window):
    """multi_head_rows a block of R query rows at a time, R = 1, 7 and T, the mask made a
    block's rows at a time (causal_mask's and causal_window_mask's rows): the same scores,
    weights and context vectors as multi_head over the whole (T, T) mask, within 1e-12, each
    row's weights its whole softmax (a loop over the row's allowed keys); the rows of a
    mask are the whole mask's rows."""
    rng = np.random.default_rng(7)
    T, H = 23, 3
    Q, K, V = rng.normal(size=(T, 12)), rng.normal(size=(T, 12)), rng.normal(size=(T, 9))
    whole = attention.causal_mask(T) if window is None else attention.causal_window_mask(T, window)
    rows_of = ((lambda rows: attention.causal_mask(T, rows)) if window is None
               else (lambda rows: attention.causal_window_mask(T, window, rows)))
    np.testing.assert_array_equal(whole, np.triu(np.ones((T, T), dtype=bool), k=1) | (
        False if window is None else np.tril(np.ones((T, T), dtype=bool), k=-window)))
    omega, alpha, Z = attention.multi_head(Q, K, V, H, 0.4, 1.5, whole)
    np.testing.assert_allclose(alpha, loop_softmax_rows(omega * 0.4 / 1.5, whole), rtol=0, atol=1e-14)
    for R in (1, 7, T, 100):
        blocks = list(attention.multi_head_rows(Q, K, V, H, 0.4, 1.5, rows_of, rows=R))
        assert [b[0] for b in blocks] == [slice(s, min(s + R, T)) for s in range(0, T, R)]
        assert all(b[2].shape == (H, b[0].stop - b[0].start, T) for b in blocks)  # (H, R, T): never T x T
        for rows, o, a, z in blocks:
            np.testing.assert_array_equal(rows_of(rows), whole[rows])
            np.testing.assert_allclose(o, omega[:, rows], rtol=0, atol=1e-12)
            np.testing.assert_allclose(a, alpha[:, rows], rtol=0, atol=1e-12)
            np.testing.assert_allclose(z, Z[rows], rtol=0, atol=1e-12)
        # the whole mask handed as an array: each block takes its rows
        again = list(attention.multi_head_rows(Q, K, V, H, 0.4, 1.5, whole, rows=R))
        np.testing.assert_allclose(np.concatenate([b[2] for b in again], axis=1), alpha, rtol=0, atol=1e-12)
        # the keys some row of a block sees alone: a causal block's up to its last row
        for rows, o, a, z in attention.multi_head_rows(Q, K, V, H, 0.4, 1.5, rows_of, rows=R, unseen=False):
            n = rows.stop
            assert o.shape == a.shape == (H, rows.stop - rows.start, n)
            assert attention.seen(whole[rows], T) == n and (alpha[:, rows, n:] == 0).all()
            np.testing.assert_allclose(o, omega[:, rows, :n], rtol=0, atol=1e-12)
            np.testing.assert_allclose(a, alpha[:, rows, :n], rtol=0, atol=1e-12)
            np.testing.assert_allclose(z, Z[rows], rtol=0, atol=1e-12)


def test_blocks_of_a_padded_batch_keep_its_padding_mask():
    """A batch (B, T) with a padding mask (B, 1, 1, T), the same for every row: blocks of
    rows equal the whole, and a padding key gets weight 0 in every block."""
    rng = np.random.default_rng(8)
    Q, K, V = rng.normal(size=(2, 9, 8)), rng.normal(size=(2, 9, 8)), rng.normal(size=(2, 9, 8))
    padding = attention.padding_mask(np.array([9, 5]), 9)  # (2, 1, 1, 9)
    _, alpha, Z = attention.multi_head(Q, K, V, 2, 0.5, mask=padding)
    for rows, _, a, z in attention.multi_head_rows(Q, K, V, 2, 0.5, mask=padding, rows=4):
        np.testing.assert_allclose(a, alpha[..., rows, :], rtol=0, atol=1e-12)
        np.testing.assert_allclose(z, Z[:, rows], rtol=0, atol=1e-12)
        assert (a[1, ..., 5:] == 0).all()


def test_multi_head_backward_is_the_gradient():
    rng = np.random.default_rng(4)
    Q, K, V, G = (rng.normal(size=(4, 6)) for _ in range(4))  # G: dL/dZ of L = sum(G * Z)

    def loss(Q, K, V):
        return float((attention.multi_head(Q, K, V, 2, 0.5)[2] * G).sum())

    alpha = attention.multi_head(Q, K, V, 2, 0.5)[1]
    grads = attention.multi_head_backward(Q, K, V, alpha, G, 2, 0.5)
    for which, grad in enumerate(grads):
        for index in np.ndindex(4, 6):
            args = [Q.copy(), K.copy(), V.copy()]
            args[which][index] += 1e-6
            up = loss(*args)
            args[which][index] -= 2e-6
            assert grad[index] == pytest.approx((up - loss(*args)) / 2e-6, abs=1e-6)


@pytest.mark.parametrize("kind,expected", [("none", []), ("self", [(0, 0), (1, 1), (2, 2)]),
                                           ("causal", [(0, 1), (0, 2), (1, 2)]),
                                           ("causal+self", [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)])])
def test_a_mask_hides_what_its_name_says(kind, expected):
    assert sorted(map(tuple, np.argwhere(attention.mask(kind, 3)).tolist())) == expected


def test_norms_over_several_heads_are_of_each_tokens_part_of_the_merged_context(glove):
    """Over word vectors with --heads 2, what j sends i is its part of z_i, the heads' parts
    side by side: ||(alpha^1_ij v^1_j, alpha^2_ij v^2_j)|| = sqrt(sum_h (alpha^h_ij ||v^h_j||)^2),
    and those parts sum to the context vectors. (They were once summed head on head, as
    if the heads' columns were the same.)"""
    from attncli import encoder
    opts = Options(heads=2, qkv="random", seed=1)
    doc = scores_doc("The earth is like an orange", glove, opts, norms=True)
    att = encoder.attend("The earth is like an orange", glove, opts)
    Vh = attention.split_heads(att.V, 2)  # (2, T, d / 2)
    expected = np.sqrt(sum((att.weights[h] * np.linalg.norm(Vh[h], axis=-1)[None, :]) ** 2 for h in range(2)))
    np.testing.assert_allclose(doc["norms"], expected, rtol=1e-12)
    F = attention.in_own_columns(att.V, 2)
    np.testing.assert_allclose(np.einsum("hij,hjd->id", att.weights, F), att.context, rtol=1e-12, atol=1e-15)


def test_weights_a_few_ulps_apart_are_a_tie_in_position_order_on_any_processor():
    """The same word twice gets one weight mathematically, and two a few ulps apart in an
    order a processor's BLAS decides: whichever way round, they rank by position. Weights
    further apart than TIE rank by size."""
    w = 0.08269079992154103
    for up in (1, -1, 4, -4):
        row = np.array([0.1, w, 0.3, np.nextafter(w, w + up) if abs(up) == 1 else w + up * 2.2e-16 * w, 0.2])
        assert attention.top_attended(row, 5) == [2, 4, 0, 1, 3]
        assert ranking.ranked(row).tolist() == [2, 4, 0, 1, 3] == by_rule(row)
    row32 = np.array([0.5, 0.9066915512084961, 0.906691312789917], dtype=np.float32)  # float32 neighbours
    assert ranking.ranked(row32).tolist() == [1, 2, 0]
    apart = np.array([0.4, 0.4 * (1 + 3 * ranking.TIE)])
    assert ranking.ranked(apart).tolist() == [1, 0] == by_rule(apart)


@pytest.mark.parametrize("k", [2, attention.ROUNDS + 2])
def test_the_stream_ranks_near_ties_as_the_whole_row_does(k):
    """_top_k picks k of a row by exact values; a tie straddling its k-th place, or inside
    its k, is ranked again as top_attended ranks the whole row."""
    rng = np.random.default_rng(k)
    base = rng.random((40, 60)).astype(np.float32)
    base[:, 30:] = base[:, :30] * (1 + rng.choice([-2, -1, 0, 1, 2], size=(40, 30)) * 1e-7)  # pairs within ulps
    top, w = attention._top_k(base.copy(), k)
    for r in range(len(base)):
        assert top[r].tolist() == attention.top_attended(base[r], k) == by_rule(base[r])[:k]
