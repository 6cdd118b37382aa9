"""models/layers.py's numbers one at a time: erf (Cody's approximations, in numpy) against
the C library's math.erf on dense grids and at the edges of float64, and against erf's
Taylor series summed in 80-digit decimals; GELU against 0.5 x (1 + math.erf(x / sqrt 2))."""

from __future__ import annotations

import math
import warnings
from decimal import Decimal, localcontext

import numpy as np
import pytest

from attncli.models import layers

_math_erf = np.frompyfunc(math.erf, 1, 1)


def math_erf(x: np.ndarray) -> np.ndarray:
    return _math_erf(x).astype(np.float64)


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of the last place of want (np.spacing, the subnormals' too)."""
    return np.where(got == want, 0.0, np.abs(got - want) / np.spacing(np.abs(want)))


def quietly(f, *args):
    """f(*args) where any warning, and any overflow, division by 0 or invalid operation, is an error."""
    with warnings.catch_warnings(), np.errstate(over="raise", divide="raise", invalid="raise"):
        warnings.simplefilter("error")
        return f(*args)


def test_erf_within_two_ulps_of_math_erf_on_a_dense_grid():
    x = np.linspace(-10.0, 10.0, 2_000_001)
    err = ulps(quietly(layers.erf, x), math_erf(x))
    # measured: 2 ulps at most (541 points), all in 0.5 <= |x| < 1, where 1 - erfc carries
    # erfc's rounding; within 1 ulp elsewhere, and equal to math.erf at 97% of the points
    assert err.max() <= 2
    assert err[(np.abs(x) < 0.5) | (np.abs(x) >= 1.0)].max() <= 1
    assert (err == 0).mean() > 0.95
    assert np.array_equal(layers.erf(x[np.abs(x) >= 6]), np.sign(x[np.abs(x) >= 6]))


def test_erf_within_two_ulps_of_math_erf_on_a_log_grid():
    """Magnitudes from the smallest subnormal to 1e308, both signs, tiny ones 2x / sqrt(pi)."""
    magnitudes = np.logspace(-323.5, 308.0, 200_001)
    x = np.concatenate([magnitudes, -magnitudes, np.arange(1, 5000) * 5e-324])
    got = quietly(layers.erf, x)
    err = ulps(got, math_erf(x))
    assert err.max() <= 2
    assert err[np.abs(x) < 0.5].max() <= 1
    assert np.array_equal(np.signbit(got), np.signbit(x))
    tiny = np.abs(x) < 1e-17  # erf(x) = 2x / sqrt(pi) (1 - x^2 / 3 + ..), x^2 / 3 below 1e-34
    assert ulps(got[tiny], 2 / math.sqrt(math.pi) * x[tiny]).max() <= 1


def erf_decimal(x: float) -> Decimal:
    """erf(x), its Taylor series 2 / sqrt(pi) sum_n (-1)^n x^(2n+1) / (n! (2n+1)) in 80 digits,
    from the float's exact value; for |x| <= 6 the largest term is under 1e15, far from 80 digits."""
    with localcontext() as c:
        c.prec = 80
        X = Decimal(x)
        term, total, n = X, X, 0
        while n < 2 * X * X + 10 or abs(term) > Decimal(10) ** -60:
            n += 1
            term = -term * X * X / n
            total += term / (2 * n + 1)
        pi = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899863")
        return 2 / pi.sqrt() * total


def test_erf_within_two_ulps_of_its_taylor_series():
    """The ulps against the true values, apart from math.erf's own: under 1.7 where 1 - erfc
    carries erfc's rounding (0.5 <= x < 1), under 1 elsewhere."""
    x = np.random.default_rng(0).uniform(0, 6, 600)
    x[:100] = np.random.default_rng(1).uniform(0.5, 1.0, 100)
    exact = [erf_decimal(float(v)) for v in x]
    err = np.array([float(abs(Decimal(float(g)) - e) / Decimal(math.ulp(float(e)))) for g, e in zip(layers.erf(x), exact)])
    assert err.max() < 1.7
    assert err[(x < 0.5) | (x >= 1.0)].max() < 1


@pytest.mark.parametrize("x,want", [
    (0.0, 0.0), (-0.0, -0.0), (5e-324, 5e-324), (-5e-324, -5e-324),
    (2.2250738585072014e-308, 2.5107e-308), (1e-300, 1.1283791670955126e-300),
    (5.9, np.nextafter(1.0, 0.0)), (-5.9, -np.nextafter(1.0, 0.0)),  # erfc(5.9) = 5.6e-17, above 2^-54
    (6.0, 1.0), (-6.0, -1.0), (26.6, 1.0), (27.0, 1.0), (-27.0, -1.0), (1e300, 1.0), (-1e300, -1.0),
    (math.inf, 1.0), (-math.inf, -1.0), (math.nan, math.nan),
])
def test_erf_at_the_edges(x, want):
    got = quietly(layers.erf, np.array([x]))[0]
    if math.isnan(x):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(want, rel=1e-4) and np.signbit(got) == np.signbit(want)
        assert got == math.erf(x)  # to the bit


def test_erf_of_a_subnormal_rounds_once():
    """2x / sqrt(pi) rounded to the subnormal nearest it, where math.erf is one off: erf of 4
    of the smallest subnormal is 4.51 of them, 5, and math.erf gives 4 (of 35, 39.49: 39, not 40)."""
    x = np.array([4, 35, 43]) * 5e-324
    assert (layers.erf(x) / 5e-324).tolist() == [5, 39, 49]
    assert [math.erf(v) / 5e-324 for v in x] == [4, 40, 48]


def test_erf_keeps_shapes_across_blocks():
    """Elements go through in blocks: any shape, order, size or dtype gives each element's erf."""
    x = np.random.default_rng(2).normal(0, 3, (3, layers.BLOCK + 5))
    want = layers._erf(x.reshape(-1)).reshape(x.shape)  # all in one block
    assert ulps(want, math_erf(x)).max() <= 2
    assert np.array_equal(layers.erf(x), want)
    assert np.array_equal(layers.erf(x.T), want.T)
    x32 = x.astype(np.float32)
    assert layers.erf(x32).dtype == np.float64 and np.array_equal(layers.erf(x32), layers.erf(x32.astype(np.float64)))
    assert layers.erf(np.zeros((0, 4))).shape == (0, 4)
    assert layers.erf(np.float64(0.3)).shape == () and float(layers.erf(np.float64(0.3))) == math.erf(0.3)


def test_the_near_coefficients_are_codys():
    """x + x (P - Q) / Q near 0: P - Q's coefficients are Cody's A less B (CALERF's A(5) - 1,
    A(1) - B(1), .., A(4) - B(4)), subtracted in decimal from the published digits."""
    A = ("1.85777706184603153e-1", "3.16112374387056560e00", "1.13864154151050156e02", "3.77485237685302021e02",
         "3.20937758913846947e03")
    B = ("1.0", "2.36012909523441209e01", "2.44024637934444173e02", "1.28261652607737228e03",
         "2.84423683343917062e03")
    assert layers._A_MINUS_B == tuple(float(Decimal(a) - Decimal(b)) for a, b in zip(A, B))
    assert layers._B == tuple(float(b) for b in B)


def test_gelu_against_math_erf_element_by_element():
    x = np.concatenate([np.linspace(-12.0, 12.0, 240_001), [0.0, -0.0, 5e-324, -5e-324, 1e-300, -1e-300, 1e300,
                                                             -1e300, 1e-10, -1e-10, 37.5, -37.5]])
    got = quietly(layers.gelu, x)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    # erf within 2 ulps of an erf below 1 (2^-52), 1 + erf's rounding in both (2^-53 each),
    # through 0.5 x, and the product's rounding
    assert (np.abs(got - want) <= np.abs(x) * np.spacing(1.0) + np.spacing(np.abs(want))).all()
    assert (got == want).mean() > 0.9
    assert np.array_equal(np.signbit(got), np.signbit(want))
    assert got[x <= -8.5].max() == 0  # x / sqrt 2 <= -6: erf is -1, and GELU 0 (-0)
    assert np.array_equal(got[x >= 8.5], x[x >= 8.5])
    assert np.isnan(quietly(layers.gelu, np.array([math.nan, -math.nan]))).all()


def test_gelu_is_erf_blockwise():
    """GELU's blocks are erf's: the same bits as 0.5 x (1 + erf(x / sqrt 2)) over the whole array."""
    X = np.random.default_rng(3).normal(-0.3, 2.0, (7, layers.BLOCK // 3))
    assert np.array_equal(layers.gelu(X), 0.5 * X * (1.0 + layers.erf(X / np.sqrt(2.0))))
    assert np.array_equal(layers.gelu(X[:, ::2]), 0.5 * X[:, ::2] * (1.0 + layers.erf(X[:, ::2] / np.sqrt(2.0))))
