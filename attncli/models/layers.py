"""The pieces every trained model's forward pass is made of, in numpy: its sizes (Config),
a linear layer, layer norm and RMSNorm, GELU (and its erf, Cody's approximations in numpy)
and SiLU, and the check that the numbers stay within float64. A family (bert.py, llama.py)
puts them together in its own order around attention.py's attention, and its pass
(every_layer) hands each layer to a Consumer as it is made: Kept keeps them all, the Pass
that forward() gives. A pass may run each layer's attention a block of query rows at a
time (Blocks, attention_of), handing the consumer each block's weights and letting them
go, so that a long text's pass holds nothing T x T.

Weights are stored as a Linear layer stores them, (out, in); `W` below is their
transpose, (in, out). A family reads them by name, weights[name], each in the working
precision (a model's weights.Weights widens a layer's tensors as its pass reads them), and an
embedding table's rows by rows_of(). Arithmetic is float64 throughout (float32 where a corpus run asks for
it: attention.precision), and a pass whose numbers leave its range (finite weights of
1e300, say) is refused where they do, never shown (RangeError): at every layer's output,
scores and logits, and where a norm's squares overflow, which would leave a finite but
wrong number (a row divided by an infinite root is 0). A float32 pass so refused may run
again in float64 (attention.in_range).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

import numpy as np

from attncli import attention
from attncli.errors import AttncliError, ModelError, RangeError
from attncli.system import limits


@dataclass(frozen=True)
class Config:
    """The sizes of a model, as its config.json gives them, that every family has; a family
    adds its own (bert.BertConfig: token types, RoBERTa's positions)."""

    layers: int  # L
    heads: int  # H, the query heads
    hidden: int  # D
    intermediate: int  # F
    max_positions: int
    vocab_size: int
    norm_eps: float
    activation: str  # "gelu" (exact, with erf), "gelu_tanh" (the tanh approximation) or "silu"
    kv_heads: int = 0  # key and value heads, each serving heads / kv_heads query heads; 0: H
    head_dim: int = 0  # d_head where config.json gives it; 0: D / H

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def key_heads(self) -> int:
        return self.kv_heads or self.heads

    def length_limit(self) -> tuple[int, str]:
        """The most word pieces a sentence may have, and why, where that is not one a position."""
        return self.max_positions, ""


def whole(raw: dict, key: str, path, least: int, most: int, default: int | None = None) -> int:
    """config.json's `key`, a whole number from `least` to `most` (`default` where it leaves
    it out), checked before anything of its size is made."""
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= most:
        raise ModelError(f"{path}: {key} is {value!r}; it must be a whole number from {least:,} to {most:,}")
    return value


def epsilon(raw: dict, key: str, default: float, path) -> float:
    """A norm's epsilon, config.json's `key` (`default` where it leaves it out): a number
    between 0 and 1."""
    eps = raw.get(key, default)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not (0 < eps < 1 and math.isfinite(eps)):
        raise ModelError(f"{path}: {key} is {eps!r}; it must be a number between 0 and 1")
    return float(eps)


def layer_norm(X: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """Each row to mean 0 and variance 1 (the population variance), then scaled and shifted.
    A row whose mean or squares overflow comes out NaN, for the pass's check to refuse
    naming where (the embeddings, the hidden states after layer l): its variance would be
    infinite and the row beta, a number that looks right (float32's range ends at 3.4e38,
    so rows of 1e20 do)."""
    with np.errstate(over="ignore", invalid="ignore"):  # a row past the range: NaN, as said
        mean = X.mean(axis=-1, keepdims=True)  # (T, 1)
        var = ((X - mean) ** 2).mean(axis=-1, keepdims=True)  # (T, 1)
        var = np.where(np.isfinite(var), var, np.nan)  # (T, 1)
        return (X - mean) / np.sqrt(var + eps) * gamma + beta  # (T, D)


# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23
# (1969) 631-638, its coefficients as his CALERF (SPECFUN, netlib.org/specfun/erf, 1990) gives
# them for IEEE double, each approximating its function to 18 digits or more: every polynomial
# here with its highest power first (CALERF's C(9), C(1), .., C(8)), a denominator's leading 1
# written out. Cody's ranges are |x| <= 0.5 for erf, 0.46875 to 4 and beyond 4 for erfc.
# CALERF changes from erf to erfc at 0.46875; here at 0.5, past x = 0.477 where erf and erfc
# cross 0.5, so that 1 - erfc, erfc below 0.5, is rounded to erf's own ulp (from 0.46875 to
# 0.477 erfc's ulp is twice erf's, and 1 - erfc up to 4 ulps off).
ERF_NEAR = 0.5  # |x| < this: erf(x) = x P(x^2) / Q(x^2), computed as x + x (P - Q)(x^2) / Q(x^2)
# P - Q: CALERF's A(5) - 1, A(1) - B(1), .., A(4) - B(4), subtracted exactly in decimal; the
# small correction to x that it makes keeps erf within an ulp, where x P / Q, as CALERF
# computes it, is up to 3 ulps off
_A_MINUS_B = (-8.14222293815396847e-1, -2.044016720847355530e01, -1.30160483783394017e02,
              -9.05131288392070259e02, 3.6514075569929885e02)
_B = (1.0, 2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
ERF_MIDDLE = 4.0  # up to this: erfc(x) = exp(-x^2) P(x) / Q(x)
_C = (2.15311535474403846e-8, 5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
      2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03, 2.05107837782607147e03,
      1.23033935479799725e03)
_D = (1.0, 1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02, 1.62138957456669019e03,
      3.29079923573345963e03, 4.36261909014324716e03, 3.43936767414372164e03, 1.23033935480374942e03)
# beyond: erfc(x) = exp(-x^2) / x (1 / sqrt(pi) - z P(z) / Q(z)), z = 1 / x^2
_P = (1.63153871373020978e-2, 3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
      1.60837851487422766e-2, 6.58749161529837803e-4)
_Q = (1.0, 2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1, 6.05183413124413191e-2,
      2.33520497626869185e-3)
ERF_ONE = 6.0  # from here erfc(x) <= 2.2e-17, under half float64's spacing below 1: erf(x) rounds to 1
# elements at a time: a block's arrays stay in the cache, in memory the allocator holds already,
# where a new array of a whole (T, F) costs more in fresh pages than its arithmetic does
BLOCK = 1 << 15


def _horner(t: np.ndarray, coefficients: tuple[float, ...]) -> np.ndarray:
    """c_0 t^n + c_1 t^(n-1) + .. + c_n, by Horner's rule."""
    p = np.full_like(t, coefficients[0])
    for c in coefficients[1:]:
        p *= t
        p += c
    return p


def _erfc(y: np.ndarray) -> np.ndarray:
    """erfc(y) for y (N,) from 0.5 to 6 (NaN stays NaN), as Cody's CALERF computes it: y^2
    split into s^2, s a whole number of sixteenths (s^2 exact), and the rest (y - s)(y + s),
    so that exp(-y^2) loses none of the digits a rounded y^2 would."""
    ratio = np.empty_like(y)
    middle = y <= ERF_MIDDLE
    i = np.flatnonzero(middle)
    t = y[i]
    ratio[i] = _horner(t, _C) / _horner(t, _D)
    i = np.flatnonzero(~middle)
    t = y[i]
    z = 1.0 / (t * t)
    ratio[i] = (1.0 / np.sqrt(np.pi) - z * (_horner(z, _P) / _horner(z, _Q))) / t
    s = np.trunc(y * 16.0) / 16.0
    return np.exp(-s * s) * np.exp(-(y - s) * (y + s)) * ratio  # (N,)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf of x (N,), as erf() gives it."""
    y = np.abs(x)  # (N,)
    out = np.empty_like(y)
    # each range's elements by their indices, which numpy gathers and scatters several
    # times faster than by a boolean mask
    near = y < ERF_NEAR  # NaN is not
    i = np.flatnonzero(near)
    t = y[i]
    z = t * t  # underflows for a tiny t: (P - Q) / Q is then its value at 0, as it should be
    out[i] = t + t * (_horner(z, _A_MINUS_B) / _horner(z, _B))
    i = np.flatnonzero(~near)
    # erfc < 0.48 here: 1 - erfc, one rounding, has erfc's absolute error and no more
    out[i] = 1.0 - _erfc(np.minimum(y[i], ERF_ONE))  # infinity to 6, NaN kept
    return np.copysign(out, x)


def _blockwise(f, x: np.ndarray) -> np.ndarray:
    """f of x's elements, BLOCK of them at a time, computed in float64 (a block widened from
    float32 in the cache costs next to nothing), in x's shape and the working precision."""
    flat = np.asarray(x).reshape(-1)  # (N,)
    out = np.empty(np.shape(x), dtype=attention.working())
    flat_out = out.reshape(-1)  # (N,), a view: out is C-contiguous
    for start in range(0, flat.size, BLOCK):
        flat_out[start:start + BLOCK] = f(np.asarray(flat[start:start + BLOCK], dtype=np.float64))
    return out


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, (2 / sqrt pi) int_0^x e^(-t^2) dt, of every element of x, float64,
    within 2 ulps (1 outside 0.5 <= |x| < 1): Cody's approximations (above) over |x|, erf
    itself near 0 and 1 - erfc beyond, the sign x's. erf(-0) is -0, a tiny x gives 2x / sqrt(pi)
    down to the subnormals, |x| from 6 on (infinity too) gives 1 exactly, and NaN gives NaN;
    nothing overflows or divides by 0 on the way. In numpy, as scipy's would cost a run 0.2 s
    of imports."""
    return _blockwise(_erf, x)


# In float32 (attention.precision("float32"), the corpus commands' --precision), erf is the
# float32 rational approximation of Eigen's erf and XLA's (MaterializeErfApproximationF32):
# x P(x^2) / Q(x^2) over x clamped to [-4, 4], its polynomials' highest power first,
# computed in float32 in a few whole-array steps (four float32 arrays of X's size, within the
# ten float64 ones pass_bytes counts); within 4.2e-7 of erf (tests/test_precision.py), where
# Cody's ranges above cost a float32 pass of MiniLM's over 37 pieces a third of its time
_ERF32_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
            -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF32_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
            -1.42647390514189e-02)


def erf_float32(x: np.ndarray) -> np.ndarray:
    """erf of every element of x, in float32, within 4.2e-7 (7 float32 ulps near 3.3, and
    a few elsewhere); NaN gives NaN."""
    x = np.clip(np.asarray(x, dtype=np.float32), np.float32(-4), np.float32(4))
    z = x * x
    p, q = _horner(z, tuple(np.float32(c) for c in _ERF32_P)), _horner(z, tuple(np.float32(c) for c in _ERF32_Q))
    p *= x
    p /= q
    return p


def _gelu(X: np.ndarray) -> np.ndarray:
    """Exact GELU of X (N,)."""
    return 0.5 * X * (1.0 + _erf(X / np.sqrt(2.0)))  # (N,)


def gelu(X: np.ndarray, activation: str = "gelu") -> np.ndarray:
    """GELU(x) = x Phi(x): exactly, 0.5 x (1 + erf(x / sqrt 2)), erf() above, a block of
    numbers at a time (in float32, erf_float32 over the whole array); or its tanh
    approximation."""
    if activation == "gelu_tanh":
        # X * X * X: numpy's X**3 calls pow() element by element, several times slower; its
        # overflow, far out, is tanh's limit, 1 or -1, and GELU's own there: not an overflow
        with np.errstate(over="ignore"):
            return 0.5 * X * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (X + 0.044715 * (X * X * X))))
    if attention.working() == np.float32:
        E = erf_float32(X * np.float32(1 / math.sqrt(2.0)))
        E += 1
        E *= X
        E *= np.float32(0.5)
        return E
    return _blockwise(_gelu, X)


def finite(M: np.ndarray, what: str) -> np.ndarray:
    """M, when every number of it is finite; else RangeError."""
    if not np.isfinite(M).all():
        raise RangeError(f"{what} leave {attention.working().name}'s range (they overflow to infinity or NaN): "
                         "the model's weights, though finite, are far larger than a trained model's; its model.safetensors is damaged or "
                         "not a trained model's")
    return M


def rms_norm(X: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    """Zhang & Sennrich, "Root Mean Square Layer Normalization" (2019): each row divided by
    its root mean square, then scaled, gamma x / sqrt(mean(x^2) + eps); no mean is taken
    off and nothing is added. A row whose squares overflow is refused: its mean square
    would be infinite and the row 0, a number that looks right."""
    with np.errstate(over="ignore"):  # checked just below
        squares = (X * X).mean(axis=-1, keepdims=True)  # (T, 1)
    return gamma * (X / np.sqrt(finite(squares, "the squares of the hidden states") + eps))  # (T, D)


def silu(X: np.ndarray) -> np.ndarray:
    """SiLU(x) = x sigmoid(x) = x / (1 + e^-x) (Elfwing et al. 2017; "swish"); far below 0,
    e^-x overflows to infinity and the quotient is 0, as it should be: no overflow to flag."""
    with np.errstate(over="ignore"):
        return X / (1.0 + np.exp(-X))


def dense(X: np.ndarray, weights: dict, name: str) -> np.ndarray:
    """X W + b of the Linear layer `name`: attention.project, with W the stored weight
    transposed, and b where the layer has one (a Llama's layers have none)."""
    b = weights.get(f"{name}.bias")
    return attention.project(X, weights[f"{name}.weight"].T, None if b is None else attention.floating(b))


def norm(X: np.ndarray, weights: dict, name: str, config: Config) -> np.ndarray:
    return layer_norm(X, weights[f"{name}.weight"], weights[f"{name}.bias"], config.norm_eps)


def layer_of(name: str) -> int | None:
    """The layer (from 0) of the tensor a family names `name`: the first whole number among
    the parts of its name (layers.3.mlp.up_proj.weight, h.3.attn.c_attn.weight), which hold
    no other; None for what no layer reads (the embeddings, a final norm, an LM head)."""
    return next((int(part) for part in name.split(".") if part.isascii() and part.isdigit()), None)


# Bytes of widened weights a model's weights keep from one layer to the next (weights.Weights):
# a small model's every layer, widened once a run rather than at every pass of a corpus's
# thousands (MiniLM's come to 85 MB in float64); a larger model's a layer at a time.
HOLD = 1 << 28


def widened_held(expected_shapes, config: Config) -> int:
    """The bytes of the weights a pass holds widened to float64 (weights.Weights): every layer's
    tensors (among a family's expected_shapes(config)) where they come to HOLD at most,
    else the largest layer's."""
    largest, every = _layer_numbers(expected_shapes, config)
    return 8 * (every if 8 * every <= HOLD else largest)


@functools.lru_cache(maxsize=32)
def _layer_numbers(expected_shapes, config: Config) -> tuple[int, int]:
    """The numbers of the largest layer's tensors, and of every layer's."""
    numbers = {}
    for name, shape in expected_shapes(config).items():
        if (l := layer_of(name)) is not None:
            numbers[l] = numbers.get(l, 0) + math.prod(shape)
    return max(numbers.values(), default=0), sum(numbers.values())


def rows_of(weights: Mapping, name: str, index) -> np.ndarray:
    """Rows `index` of the tensor `name` in the working precision (an embedding table's rows
    looked up, a block of an LM head's): of a model's weights (weights.Weights) those rows
    alone are widened, never the table; of a dict of arrays (weights changed by hand), they
    are taken, then widened."""
    if hasattr(weights, "rows"):
        return weights.rows(name, index)
    return attention.floating(weights[name][index])


class Renamed(Mapping):
    """Weights under other names, `names` (new -> old), read from `weights` as they are asked
    for (the same arrays, not copies): DistilBERT's under BERT's."""

    def __init__(self, weights: Mapping, names: dict[str, str]):
        self.weights, self.names = weights, names

    def __getitem__(self, name: str) -> np.ndarray:
        return self.weights[self.names[name]]

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name) -> bool:
        return name in self.names

    def rows(self, name: str, index) -> np.ndarray:
        return rows_of(self.weights, self.names[name], index)


class Consumer(Protocol):
    """What a forward pass hands each layer to, as it makes it, so that a pass holds only
    what its consumers keep: Kept keeps every layer's arrays (forward's Pass); a reader of
    a long document or of a corpus keeps its sums. A family's run(ids, weights, config, to)
    calls it: begin once, layer after each layer in order, end once; and a pass run a
    block of query rows at a time (run(..., rows=R)), rows for each block of each layer,
    before that layer's layer(). A consumer that reads no more than the attention of the
    layers up to l (from 0) says so by `through = l` (every_layer then runs no layer after
    l, and of l its attention only), and one that reads of layer l its scores and weights
    alone by `weights_only = True` (then not even l's values, context vectors or output
    are made); without them, every layer and end."""

    through: int | None  # the last layer whose attention it reads; None (or none): all, and the last states
    weights_only: bool  # of layer `through`, the scores and weights alone (none: False)
    seen_only: bool  # a block's keys that some row sees alone (none: False; rows())

    def begin(self, X: np.ndarray) -> None:
        """X_0 ([B,] T, D), the embeddings."""

    def rows(self, l: int, start: int, steps: dict[str, np.ndarray]) -> None:
        """In a pass run in blocks only: layer l's query rows start .. start + R - 1, their
        scores and weights ([B,] H, R, T), each row's weights its whole softmax over the T
        keys; let go of once this returns, so that no T x T array exists. A consumer that
        is `seen_only` is handed the first n keys alone, those some row of the block may
        see (a decoder's: up to the block's last row), ([B,] H, R, n): the weights past
        them are 0, and their scores are not computed."""

    def layer(self, l: int, X: np.ndarray, steps: dict[str, np.ndarray]) -> None:
        """Layer l's (from 0) output X_{l+1} ([B,] T, D), checked finite, and its attention's
        steps (the family's attend: weights ([B,] H, T, T), Q, K, V, ...; in a pass run in
        blocks, no scores or weights, which rows was handed), which the pass lets go of
        before the next layer: what is not kept here is gone."""

    def end(self, X: np.ndarray) -> None:
        """The last hidden states as shown ([B,] T, D): X_L, a decoder's after its final norm."""


class Fan:
    """Several consumers over one pass: each is handed every call, in the order given."""

    def __init__(self, *consumers: Consumer):
        self.consumers = consumers

    @property
    def through(self) -> int | None:
        """The most any of them reads: None where one reads every layer and the last states."""
        each = [getattr(c, "through", None) for c in self.consumers]
        return None if None in each else max(each)

    @property
    def seen_only(self) -> bool:
        return all(getattr(c, "seen_only", False) for c in self.consumers)

    @property
    def weights_only(self) -> bool:
        """Whether of that layer every one that reads it reads the weights alone."""
        last = self.through
        return all(getattr(c, "weights_only", False) for c in self.consumers if getattr(c, "through", None) == last)

    def begin(self, X: np.ndarray) -> None:
        for c in self.consumers:
            c.begin(X)

    def rows(self, l: int, start: int, steps: dict[str, np.ndarray]) -> None:
        for c in self.consumers:
            c.rows(l, start, steps)

    def layer(self, l: int, X: np.ndarray, steps: dict[str, np.ndarray]) -> None:
        for c in self.consumers:
            c.layer(l, X, steps)

    def end(self, X: np.ndarray) -> None:
        for c in self.consumers:
            c.end(X)


class Cache:
    """A decoder's keys and values of every piece read so far, each layer's (T, KV d_head):
    what a generation step runs its new piece against. A family's run(..., cache=) runs its
    rows from position `start` (the pieces cached), writing each layer's new keys and values
    after that layer's before its attention, and moves `start` past them when done; its rows
    then attend as a full pass over the whole sequence would (held equal to it). Each
    layer's are arrays of `capacity` rows, the most pieces it will hold, made once."""

    def __init__(self, layers: int, capacity: int):
        self.K, self.V = [None] * layers, [None] * layers  # each layer's (capacity, KV d_head), or None
        self.capacity = capacity
        self.start = 0

    def extend(self, l: int, K: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Layer l's keys and values of every piece, the rows now running (R, ...) after the cached."""
        end = self.start + K.shape[-2]
        if end > self.capacity:
            raise ValueError(f"a cache of {self.capacity} pieces is given {end}")
        if self.K[l] is None:
            shape = K.shape[:-2] + (self.capacity, K.shape[-1])
            self.K[l], self.V[l] = np.empty(shape, K.dtype), np.empty(shape, V.dtype)
        self.K[l][..., self.start:end, :], self.V[l][..., self.start:end, :] = K, V
        return self.K[l][..., :end, :], self.V[l][..., :end, :]

    def advance(self, n: int) -> None:
        self.start += n


@dataclass(frozen=True)
class Blocks:
    """A pass run a block of query rows at a time (a family's run(..., rows=R)): `size`
    rows a block, each block's scores and weights handed to `to`'s rows() as they are made."""

    size: int
    to: Consumer


def attention_of(Q: np.ndarray, K: np.ndarray, V: np.ndarray, l: int, config: Config, masked,
                 blocks: Blocks | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Layer l's Steps I-III over its Q, K (..., T, H d_head) and V, at the scale
    1/sqrt(d_head), its scores refused where they overflow: attention.multi_head_rows, the
    mask `masked` as it takes one. Without `blocks`, every row as one block, its scores
    and weights (..., H, T, T) among the steps given back; with them, a block of
    blocks.size query rows at a time, each block's scores and weights (..., H, R, T)
    handed to blocks.to.rows() and let go, none given back (of the keys some row of the
    block sees alone, where blocks.to is `seen_only`). -> (those steps, the context vectors
    side by side (..., T, H d_v), each block's rows filled in; None where V is: the weights
    alone)"""
    kept, Z = {}, None
    T = Q.shape[-2]
    for rows, omega, alpha, Z_rows in attention.multi_head_rows(
            Q, K, V, config.heads, attention.default_scale(config.d_head), mask=masked,
            check=lambda omega: finite(omega, f"layer {l + 1}'s attention scores"),
            rows=None if blocks is None else blocks.size,
            unseen=blocks is None or not getattr(blocks.to, "seen_only", False)):
        if Z_rows is None or rows.start == 0 and rows.stop == T:  # none, or one block of every row: Z
            Z = Z_rows
        else:
            if Z is None:
                Z = np.empty((*Z_rows.shape[:-2], T, Z_rows.shape[-1]), Z_rows.dtype)  # (..., T, H d_v)
            Z[..., rows, :] = Z_rows
        if blocks is None:
            kept = {"scores": omega, "weights": alpha}
        else:
            blocks.to.rows(l, rows.start, {"scores": omega, "weights": alpha})
    return kept, Z


# How much of a layer a pass makes, the `part` of a family's layer(X, l, part): "whole";
# "attention" (no residual sum, no feed-forward, no norm after it); "weights", its scores
# and weights alone (not even its values, their context vectors or the attention's output).


def every_layer(X: np.ndarray, config: Config, layer, to: Consumer, shown=None) -> None:
    """X_0 (T, D), or a batch's (B, T, D), through every layer, layer(X, l, part) -> (its
    output, its attention's steps), each output checked to be finite and handed to `to`
    with the steps; the last, through shown(X_L) where given (a decoder's final norm), to
    to.end. Only the work `to` asks for (its `through`, where it has one: the last layer
    whose attention it reads): no layer after that one is run, of that one its attention
    only (part "attention"), or its weights only where `to` reads no more (its
    weights_only: part "weights"), its output handed on as None; and no end."""
    through = getattr(to, "through", None)  # a consumer without it reads every layer and the last states
    last = "weights" if getattr(to, "weights_only", False) else "attention"
    to.begin(X)
    for l in range(config.layers if through is None else through + 1):
        part = "whole" if through is None or l < through else last
        X, steps = layer(X, l, part)
        to.layer(l, finite(X, f"the hidden states after layer {l + 1}") if part == "whole" else None, steps)
        del steps  # its (H, T, T) arrays go before the next layer makes its own, unless `to` kept them
    if through is None:
        to.end(X if shown is None else shown(X))


class Kept:
    """The consumer forward() runs: every layer's hidden states and weights filled into the
    (L + 1, [B,] T, D) and (L, [B,] H, T, T) arrays a layer at a time (stacking lists at the
    end would hold every layer's weights twice), and the steps of the layers in `keep`
    (indices from 0); its `result` the Pass. Without `outputs`, what a reader of weights
    alone needs (stats): the last layer's attention only, of its weights alone unless it
    is kept, and no last hidden states (X_L NaN: never made)."""

    def __init__(self, config: Config, keep: tuple[int, ...] = (), outputs: bool = True):
        self.config, self.keep, self.outputs = config, keep, outputs
        if not outputs:
            self.through = config.layers - 1
            self.weights_only = self.through not in keep

    def begin(self, X: np.ndarray) -> None:
        L, H, (*lead, T, D) = self.config.layers, self.config.heads, X.shape
        dtype = attention.working()
        self.result = Pass(np.empty((L + 1, *lead, T, D), dtype), np.empty((L, *lead, H, T, T), dtype), {})
        self.result.hidden[0] = X
        if not self.outputs:
            self.result.hidden[-1] = np.nan

    def layer(self, l: int, X: np.ndarray, steps: dict[str, np.ndarray]) -> None:
        if X is not None:
            self.result.hidden[l + 1] = X
        self.result.weights[l] = steps["weights"]
        if l in self.keep:
            self.result.steps[l] = {**steps, "weights": self.result.weights[l]}

    def end(self, X: np.ndarray) -> None:
        self.result.hidden[-1] = X


def kept_bytes(T: int, config: Config) -> int:
    """What Kept holds for T pieces, float64: every layer's weights (L, H, T, T) and hidden
    states (L + 1, T, D); a family's pass_bytes is its run_bytes and this."""
    L, H, D = config.layers, config.heads, config.hidden
    return 8 * (L * H * T * T + (L + 1) * T * D)


@dataclass(frozen=True)
class Pass:
    """What a forward pass gives (Kept's result): every layer's hidden states and attention
    weights, and the steps of the layers asked to keep them."""

    hidden: np.ndarray  # (L + 1, T, D): X_0 .. X_L
    weights: np.ndarray  # (L, H, T, T): alpha of every layer and head
    steps: dict[int, dict[str, np.ndarray]]  # layer index (from 0) -> its attention's steps

    def cut(self, b: int, n: int) -> "Pass":
        """Sentence b's own pass out of a batch's, its first n pieces: what forward gives
        that sentence alone (its steps' T axes cut as each step holds them)."""
        return Pass(self.hidden[:, b, :n], self.weights[:, b, :, :n, :n],
                    {l: {name: _cut_step(name, M[b], n) for name, M in steps.items()}
                     for l, steps in self.steps.items()})


def _cut_step(name: str, M: np.ndarray, n: int) -> np.ndarray:
    """A step of one sentence of a batch, cut to its n pieces: scores and weights (H, T, T),
    Z (H, T, d_head), and Q, K, V, context and A (T, ...)."""
    if name in ("scores", "weights"):
        return M[:, :n, :n]
    return M[:, :n] if name == "Z" else M[:n]


# At most this many sentences a batch, and no more than BATCH_BYTES of their pass: one
# product per layer for all of them, where one a sentence leaves a short sentence's products
# too small to keep the BLAS busy (benchmarks/README.md), and memory held to a few batches'
BATCH = 16
BATCH_BYTES = 1 << 28


def forward_many(family, ids: list[np.ndarray], weights: dict, config: Config, *, pad: int = 0,
                 keep: tuple[int, ...] = (), batch: int | None = None,
                 outputs: bool = True) -> Iterator[tuple[int, "Pass | AttncliError"]]:
    """(b, the pass of ids[b] (T_b,), or the AttncliError that refuses it) for each sentence,
    its pass as family.forward gives it alone, computed in batches: the sentences sorted by
    length (stably), up to `batch` of them at a time (BATCH by default; fewer where their
    pass would pass BATCH_BYTES), padded on the right with the piece `pad` to the longest of
    them, run as one (B, T) input whose padding keys the attention masks (family.forward's
    `lengths`), and each cut out again (Pass.cut); a batch refused runs again a sentence at
    a time (in float32, the one whose numbers leave its range in float64: _alone). Given a
    batch at a time, in that order, so that only a batch is held. The batches depend only
    on the sentences, so the numbers do too; they equal the sentences' own passes up to the
    order the products add in (tests/test_batched.py: within 1e-12). Without `outputs`,
    only what a reader of every layer's weights needs (Kept's)."""
    batch = BATCH if batch is None else batch
    forward = functools.partial(_forward, family, weights=weights, config=config, keep=keep, outputs=outputs)
    order = sorted(range(len(ids)), key=lambda b: len(ids[b]))
    start = 0
    while start < len(order):
        end = start + 1  # the longest of a group is its last: the group grows while its pass fits
        while (end < len(order) and end - start < batch
               and (end + 1 - start) * family.pass_bytes(len(ids[order[end]]), config) <= BATCH_BYTES):
            end += 1
        group, start = order[start:end], end
        try:
            runs = list(_batch([ids[b] for b in group], family, config, pad, forward))
        except AttncliError:  # the batch refused (memory, or a number overflowing in one of its sentences):
            runs = [_alone(ids[b], family, config, forward) for b in group]  # only the one at fault is
        yield from zip(group, runs)


def _forward(family, ids: np.ndarray, *, weights: dict, config: Config, keep: tuple[int, ...], outputs: bool,
             lengths: np.ndarray | None = None) -> Pass:
    """family.forward's Pass, of only what Kept(..., outputs) reads."""
    kept = Kept(config, keep, outputs)
    family.run(ids, weights, config, kept, lengths=lengths)
    return kept.result


def _batch(ids: list[np.ndarray], family, config: Config, pad: int, forward):
    """The passes of sentences `ids`, as one padded batch."""
    lengths = np.array([len(i) for i in ids])  # (B,)
    limits.require(len(ids) * family.pass_bytes(int(lengths.max()), config),
                   f"the forward pass over {len(ids)} sentences of up to {lengths.max():,} word pieces",
                   "give shorter sentences")
    padded = np.full((len(ids), lengths.max()), pad, dtype=np.int64)  # (B, T)
    for row, i in enumerate(ids):
        padded[row, :len(i)] = i
    run = forward(padded, lengths=lengths)
    return (run.cut(row, n) for row, n in enumerate(lengths))


def _alone(ids: np.ndarray, family, config: Config, forward):
    """A sentence's pass on its own, or the AttncliError that refuses it; in float32, one
    whose numbers leave float32's range is run in float64 (attention.in_range), its
    arrays float64 to say so."""
    try:
        limits.require(family.pass_bytes(len(ids), config), f"the forward pass over {len(ids):,} word pieces",
                       "give a shorter sentence")
        return attention.in_range(lambda: forward(ids))[0]
    except AttncliError as e:
        return e


# A layer in the parts the measures of context mixing take apart (contributions.py): each
# family's block(X, weights, l, config) gives them, from the same steps as its layer().


@dataclass(frozen=True)
class Norm:
    """A layer norm as the forward pass applied it to its input Y (T, D): its weight gamma,
    bias beta, and each row's factor 1 / sqrt(var(y_i) + eps), read off that pass. Held
    fixed, the factor makes the norm linear in its input but for beta (Kobayashi et al.
    2021, section 3): LN(y_i) = sum_k part(y_ik, i) + beta for any parts y_ik summing to y_i."""

    gamma: np.ndarray  # (D,)
    beta: np.ndarray  # (D,)
    factor: np.ndarray  # (T, 1): 1 / sqrt(var(y_i) + eps) of the forward pass

    @classmethod
    def of(cls, Y: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> "Norm":
        var = ((Y - Y.mean(axis=-1, keepdims=True)) ** 2).mean(axis=-1, keepdims=True)  # (T, 1)
        return cls(np.asarray(gamma, dtype=np.float64), np.asarray(beta, dtype=np.float64), 1.0 / np.sqrt(var + eps))

    def part(self, Z: np.ndarray, rows: slice | np.ndarray = slice(None)) -> np.ndarray:
        """g_i(z) = gamma * (z - mean(z)) / sqrt(var(y_i) + eps) of every vector z of row i
        in Z (b, ..., D), for the rows i of `rows`: each part as the norm treats it,
        without beta."""
        factor = self.factor[rows].reshape((-1,) + (1,) * (Z.ndim - 1))  # (b, 1, ..)
        return self.gamma * (Z - Z.mean(axis=-1, keepdims=True)) * factor  # (b, ..., D)


@dataclass(frozen=True)
class Block:
    """Layer l over its input X (T, D), as a family's block() gives it: the attention's
    weights and what each head passes on, so that the attention sublayer's sum is

        Y_i = r_i + sum_j sum_h alpha^h_ij f^h(x_j) + b_O

    (r the residual stream, X itself), and the layer's output rest(Y). `norms` are the layer
    norms after the residual, as the pass applied them: a post-LN encoder's (BERT) the one
    on Y and the one on the feed-forward's sum; a pre-LN decoder's none, its norms being
    inside f (before the attention) and on the feed-forward's input."""

    weights: np.ndarray  # (H, T, T) alpha
    passed: np.ndarray  # (H, T, D) f^h(x_j): each head's value of token j through its rows of W_O
    bias: np.ndarray  # (D,) b_O (0 where the model has none)
    residual: np.ndarray  # (T, D) r
    total: np.ndarray  # (T, D) Y
    norms: tuple[Norm, ...]  # (LN1 on Y, LN2 on X' + FFN(X')) or ()
    output: np.ndarray  # (T, D) the layer's output, the next layer's input
    rest: Callable[[np.ndarray], np.ndarray]  # Y (..., T, D) -> the layer's hidden state as shown (..., T, D)
