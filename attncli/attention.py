"""Self-attention between the tokens of a sentence, in pure numpy: its three steps.

    Step I    scores    omega_ij = q_i . k_j                                   scores(Q, K)
    Step II   weights   alpha_i  = softmax_j(omega_ij * scale / temperature)   weights(omega, scale, temperature, mask)
    Step III  context   z_i      = sum_j alpha_ij v_j                          context(alpha, V)

With the raw word vectors as queries, keys and values (Q = K = V = X) these are the plain
Steps I-III: omega_ij = x_i . x_j and z_i = sum_j alpha_ij x_j. The trainable form projects
each vector into its three roles first, Q = X W_Q, K = X W_K, V = X W_V (project), so that
what a token looks for, how it is found and what it passes on can be learned apart.

The scale defaults to 1/sqrt(d_k), the scaled dot-product of Vaswani et al., "Attention Is
All You Need" (2017); scale = 1 gives the plain Step II, softmax_j(omega_ij). Several heads split d_k
into H slices of d_k/H columns (split_heads), each attending on its own, their context
vectors side by side again after (merge_heads). A causal mask lets token i attend only to
j <= i, as a decoder predicting the next word must. The Llama family adds two things before
Step I, which rotary.py holds: its queries and keys turned by their positions (rotary
embeddings) and its keys and values shared by groups of query heads.

Dimensions: T tokens, d the size of a word vector, d_k of a query/key/value, H heads.
Every function takes a leading (H,) axis too. Arrays are float64, so the numbers carry no
rounding beyond that of the float32 vectors they start from; a corpus run may ask for
float32 instead, the precision torch runs a model in (`with precision("float32"):`).
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from typing import Callable, TypeVar

import numpy as np

from attncli.errors import AttncliError, OptionError, RangeError, finite, positive, whole
from attncli.ranking import TIE, ranked
from attncli.system import limits

Result = TypeVar("Result")  # what in_range's run gives


class ScaleError(AttncliError):
    """The scale and temperature make the scaled scores overflow to infinity."""


# The precision Steps I-III and the models' forward passes compute in: float64, unless a
# corpus run asks for float32 (`--precision float32`), about twice as fast a product and
# what torch computes in (benchmarks/README.md gives both, and the one's error against the
# other). A context variable rather than an argument: it is a property of the whole run,
# as numpy's errstate is, and threads through every function below without each caller
# passing it on.
PRECISIONS = ("float64", "float32")
_PRECISION = contextvars.ContextVar("attncli_precision", default=np.dtype(np.float64))


@contextlib.contextmanager
def precision(name: str):
    """Compute in `name` (one of PRECISIONS) inside the block, float64 again after it."""
    if name not in PRECISIONS:
        raise OptionError(f"precision must be one of {', '.join(PRECISIONS)}, got {name!r}")
    token = _PRECISION.set(np.dtype(name))
    try:
        yield
    finally:
        _PRECISION.reset(token)


def in_range(run: Callable[[], Result]) -> tuple[Result, bool]:
    """run(), and whether it had to run again in float64. In float32, a number that leaves
    float32's range where float64 may hold it (a finite weight of 1e30 squared) makes a
    pass refuse it (models' RangeError) or, outside the passes' own checks, numpy flag an
    overflow (made an error here: it would pass on as infinity, or as a finite but wrong
    number); either runs run() again in float64, whose own refusal is then its error. In
    float64, run() as it is. A corpus run redoes a sentence so, and counts it."""
    if _PRECISION.get() != np.float32:
        return run(), False
    try:
        with np.errstate(over="raise"):
            return run(), False
    except (RangeError, FloatingPointError):
        with precision("float64"):
            return run(), True


def working() -> np.dtype:
    """The dtype the arithmetic is in: float64, or float32 inside precision("float32")."""
    return _PRECISION.get()


def floating(M) -> np.ndarray:
    """M in the working precision (a copy only where its dtype is another)."""
    return np.asarray(M, dtype=_PRECISION.get())


def _overflow(scale: float, temperature: float) -> ScaleError:
    return ScaleError(f"scale {scale:g} / temperature {temperature:g} makes the scaled scores overflow; "
                      "use a smaller scale (--scale) or a larger temperature (--temperature)")


def project(X: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """One role of every token: Q = X W_Q (+ b_Q), and likewise K and V."""
    X, W = floating(X), floating(W)
    with np.errstate(over="ignore", invalid="ignore"):  # the caller checks for overflow
        if X.ndim > 2 and W.ndim == 2:  # a batch (..., T, d): one product of all its rows, not one a sentence
            P = (X.reshape(-1, X.shape[-1]) @ W).reshape(*X.shape[:-1], W.shape[1])  # (..., T, d_k)
        else:
            P = X @ W  # (T, d) @ (d, d_k) -> (T, d_k)
        return P if b is None else P + b  # (T, d_k)


def split_heads(M: np.ndarray, H: int) -> np.ndarray:
    """Head h takes the columns h*d_k/H .. (h+1)*d_k/H - 1 of Q, K or V (any leading axes
    before T, a batch of sentences say, are kept)."""
    *lead, T, d_k = M.shape
    H = whole("heads", H, 1)
    if d_k % H:
        raise OptionError(f"heads must divide d_k = {d_k:,}, got {H}")
    return M.reshape(*lead, T, H, d_k // H).swapaxes(-2, -3)  # (..., T, d_k) -> (..., H, T, d_k/H)


def merge_heads(Z: np.ndarray) -> np.ndarray:
    """The heads' context vectors side by side again: the inverse of split_heads."""
    *lead, H, T, d_h = Z.shape
    return Z.swapaxes(-3, -2).reshape(*lead, T, H * d_h)  # (..., H, T, d_k/H) -> (..., T, d_k)


def scores(Q: np.ndarray, K: np.ndarray | None = None) -> np.ndarray:
    """Step I: omega_ij = q_i . k_j, every query against every key; with K left out, K = Q
    (the raw vectors: omega_ij = x_i . x_j)."""
    Q = floating(Q)  # (T, d_k)
    K = Q if K is None else floating(K)  # (T, d_k)
    with np.errstate(over="ignore", invalid="ignore"):  # the caller checks for overflow
        return Q @ np.swapaxes(K, -1, -2)  # (T, T)


def default_scale(d_k: int) -> float:
    """1/sqrt(d_k) of Vaswani et al. (with raw vectors as keys, d_k = d)."""
    return 1.0 / np.sqrt(whole("d_k", d_k, 1))


def causal_mask(T: int, rows: slice = slice(None)) -> np.ndarray:
    """True where token i may not attend to token j: every j after i. For the query rows
    `rows` (a block of them, R) only: those rows of the (T, T) mask, made without it. (R, T)"""
    i = np.arange(T)[rows]  # (R,) the rows' positions
    return i[:, None] < np.arange(T)[None, :]  # (R, T): j > i


def self_mask(T: int) -> np.ndarray:
    """True where token i may not attend to token j: j = i itself, so that a token's context
    is made of the others (raw vectors' x_i . x_i = |x_i|^2 would otherwise dominate its row)."""
    return np.eye(T, dtype=bool)  # (T, T)


def padding_mask(lengths: np.ndarray, T: int) -> np.ndarray:
    """True where a key is padding: for a batch of sentences of `lengths` (B,) padded on the
    right to T, key j of sentence b is hidden from every head and query when j >= its
    length, so that a sentence's real rows are its own attention alone. (B, 1, 1, T),
    against scores (B, H, T, T)."""
    return (np.arange(T) >= np.asarray(lengths)[:, None])[:, None, None, :]  # (B, 1, 1, T)


def mask(kind: str, T: int) -> np.ndarray:
    """True where token i may not attend to token j, by the masks `kind` names: "none",
    "causal", "self", or both joined by "+" (T, T)."""
    hidden = np.zeros((T, T), dtype=bool)
    for part in kind.split("+"):
        if part != "none":
            hidden |= {"causal": causal_mask, "self": self_mask}[part](T)
    return hidden  # (T, T)


def softmax(logits: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """softmax over the last axis, computed stably, into `out` where given (logits itself:
    the caller's own array, overwritten).

    Subtracting each row's maximum changes no weight (it cancels between numerator and
    denominator) but keeps exp() from overflowing: the largest term becomes exp(0) = 1.
    """
    shifted = np.subtract(logits, logits.max(axis=-1, keepdims=True), out=out)  # (T, T), each row's max is 0
    e = np.exp(shifted, out=shifted)  # (T, T), in (0, 1]
    e /= e.sum(axis=-1, keepdims=True)  # (T, T), each row sums to 1
    return e


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """The logarithm of softmax over the last axis, computed stably: each logit less the
    logarithm of its row's sum of exponentials (after the same shift by the maximum), so
    that a probability too small for a float64 (exp(-800)) still has its logarithm."""
    shifted = logits - logits.max(axis=-1, keepdims=True)  # (..., V), each row's max is 0
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # (..., V)


def weights(omega: np.ndarray, scale: float, temperature: float = 1.0, mask: np.ndarray | None = None) -> np.ndarray:
    """Step II: alpha_i = softmax_j(omega_ij * scale / temperature), row by row; a masked
    cell's logit is -inf, so its weight is exactly 0. The scale must be finite and the
    temperature above 0 and finite (OptionError): a temperature of 0 divides by 0, and one
    below 0 would turn the weights upside down, the least similar attended most."""
    scale, temperature = finite("scale", scale), positive("temperature", temperature)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is caught just below
        # scale / temperature first: omega * scale could overflow where the scaled score does
        # not; and when that ratio itself overflows, the other order may still fit
        c = scale / temperature
        logits = omega * c if np.isfinite(c) else omega * scale / temperature  # (T, T), our own
    if logits.size and not (np.isfinite(logits.max()) and np.isfinite(logits.min())):  # an inf, or a NaN
        raise _overflow(scale, temperature)
    if mask is not None:
        np.copyto(logits, -np.inf, where=mask)  # (T, T); no row is all masked: i may attend to i
    return softmax(logits, out=logits)  # (T, T)


def context(alpha: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Step III: z_i = sum_j alpha_ij v_j, each token's weighted sum of every token's value."""
    with np.errstate(over="ignore", invalid="ignore"):  # the caller checks for overflow
        return alpha @ floating(V)  # (T, T) @ (T, d_k) -> (T, d_k)


def multi_head_rows(Q: np.ndarray, K: np.ndarray, V: np.ndarray, heads: int, scale: float, temperature: float = 1.0,
                    mask=None, check=None, rows: int | None = None, unseen: bool = True):
    """Steps I-III over `heads` heads, a block of `rows` query rows at a time (None: every
    row, as one block): Q, K (..., T, d_k) and V (..., T', d_v) split into heads once; then
    for each block of R rows, its scores against every key, its weights and its context
    vectors, the heads side by side again. Yields (the block's rows, a slice of T; omega
    and alpha (..., H, R, T'); Z (..., R, d_v)), each let go once the caller moves on, so
    that no T x T' array need exist: each row's softmax is exact all the same, its maximum
    and sum taken over the whole row of T' keys at once.

    `mask`: None; the (..., T, T') mask, or one whose row axis is 1 (a batch's padding
    keys, the same for every row), of which each block takes its rows; or a function of a
    block's rows (a slice) giving that block's (..., R, T') (a family's mask(T, config,
    rows)), so that the whole mask is never made either. check(omega), when given, sees
    each block's scores before Step II, to refuse in the caller's words scores that
    overflowed. V None: the scores and weights alone, no context vectors (Z None).

    Steps II and III run over the first n keys some row of the block sees (seen), the
    weights past them 0; not `unseen`: omega and alpha are those n keys' alone (..., H, R, n),
    and the scores past them are not computed either (a reader of the weights alone)."""
    Qh, Kh = split_heads(Q, heads), split_heads(K, heads)  # (..., H, T, d_k/H) each
    Vh = None if V is None else split_heads(V, heads)  # (..., H, T', d_v/H)
    T = Qh.shape[-2]
    if mask is None or callable(mask):
        rows_of = mask
    else:
        rows_of = (lambda block: mask) if mask.shape[-2] == 1 else (lambda block: mask[..., block, :])
    step = T if rows is None else whole("rows", rows, 1)
    for start in range(0, max(T, 1), max(step, 1)):
        block = slice(start, min(start + step, T))
        hidden = None if rows_of is None else rows_of(block)  # (..., R, T')
        n = seen(hidden, Kh.shape[-2])  # the keys from the first that some row sees: the rest weigh 0
        omega = scores(Qh[..., block, :], Kh if unseen else Kh[..., :n, :])  # (..., H, R, T'), or (..., H, R, n)
        if check is not None:
            check(omega)
        alpha = weights(omega[..., :n], scale, temperature, None if hidden is None else hidden[..., :n])
        Z = None if Vh is None else merge_heads(context(alpha, Vh[..., :n, :]))  # (..., R, d_v)
        if omega.shape[-1] > n:  # every key's weight: 0 past the seen
            alpha = np.concatenate([alpha, np.zeros((*alpha.shape[:-1], omega.shape[-1] - n), alpha.dtype)], axis=-1)
        yield block, omega, alpha, Z  # (..., H, R, T' or n) twice


def seen(hidden: np.ndarray | None, T: int) -> int:
    """How many keys, from the first, some row of a mask `hidden` (..., R, T) may attend to:
    past them every row's weight is exactly 0 (a decoder's block of rows sees no piece after
    its last), so Steps II and III need not run over them."""
    if hidden is None:
        return T
    some = ~hidden.all(axis=tuple(range(hidden.ndim - 1)))  # (T,): a key some row sees
    return int(np.flatnonzero(some)[-1]) + 1 if some.any() else T


def multi_head(Q: np.ndarray, K: np.ndarray, V: np.ndarray, heads: int, scale: float, temperature: float = 1.0,
               mask: np.ndarray | None = None, check=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps I-III over `heads` heads, every row at once, as the word vectors' path,
    training's forward pass and its probe run them: multi_head_rows' one block (a trained
    model's layer runs multi_head_rows itself, in blocks where its pass asks for them).
    Gives omega and alpha (..., H, T, T') and Z (..., T, d_v)."""
    ((_, omega, alpha, Z),) = multi_head_rows(Q, K, V, heads, scale, temperature, mask, check)
    return omega, alpha, Z


def causal_window_mask(T: int, window: int, rows: slice = slice(None)) -> np.ndarray:
    """True where token i may not attend to token j: every j after i, and every j `window`
    or more places before it, so that a row sees its own token and the window - 1 before
    (Mistral's sliding window, as transformers' sliding_window_overlay keeps kv_idx >
    q_idx - window: position i - window is hidden). For the query rows `rows` only, as
    causal_mask. (R, T)"""
    window = whole("window", window, 1)
    offset = np.arange(T)[rows][:, None] - np.arange(T)[None, :]  # (R, T): i - j
    return (offset < 0) | (offset >= window)  # (R, T)


def window_mask(T: int, window: int) -> np.ndarray:
    """True where token j is more than `window` tokens away from token i, either side."""
    distance = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :])  # (T, T)
    return distance > window


def stream(X: np.ndarray, scale: float, temperature: float, k: int, *, causal: bool = False,
           window: int | None = None, include_self: bool = False, block: int = 256, exclude_self: bool = False):
    """Steps I-III for a long sequence, a block of rows at a time, so the T x T matrix never
    exists: a softmax over a row needs only that row. Yields, for each block of rows b:
    (start, top (b, k') positions, their weights (b, k'), Z (b, d) context vectors), with
    k' = min(k, T) and a weight of -1 (its position meaningless) for a place a row had no
    candidate to fill; the same numbers, to float32 precision, as weights() and context()
    on the whole matrix, and the same top lists as top_attended.

    A block of rows start .. end - 1 computes only the columns its rows may attend to: with
    a window W, the band j = start - W .. end - 1 + W (b + 2W columns, so a document costs
    O(T W d), not O(T^2 d)), and each row's top list is drawn from its own 2W + 1; without
    a window but causal, only j < end. A block holds at most `block` rows, fewer when
    memory is short, never below one.

    Before the first block, so that nothing is written for a run that cannot finish, the
    O(T d) arrays are checked against the memory available and the scaled scores for
    overflow: with c = scale / temperature, row i holds its own score c |x_i|^2, and no
    score is larger in size than c max_i |x_i|^2 (Cauchy-Schwarz: |x_i . x_j| <= |x_i| |x_j|),
    so for c > 0 the scores overflow iff c max_i |x_i|^2 does; for c < 0 that refuses
    whatever might overflow, as weights() refuses any overflowing cell.

    For speed (the products are the floor): the keys are a scaled copy of X, so that
    X_b (c X)^T = omega_b * c with no pass over the scores (numpy's X @ X.T would also
    take a slower symmetric path); exp() runs in place; the context vectors are normalised
    after the product, as (E V) / sum(E), rather than E.
    """
    scale, temperature = finite("scale", scale), positive("temperature", temperature)
    k, block = whole("k", k, 1), whole("block", block, 1)
    window = None if window is None else whole("window", window, 0)
    X = np.asarray(X)  # (T, d), float32 as loaded: the products run at float32 speed
    T, d = X.shape
    if window is not None and window >= T - 1:
        window = None  # every token is within the window of every other: nothing is masked
    W = 0 if window is None else window
    with np.errstate(over="ignore"):  # an infinite ratio is refused just below, as an overflow
        c = np.float64(scale) / np.float64(temperature)
    sq = _largest_square_norm(X)  # max_i |x_i|^2
    with np.errstate(over="ignore"):  # inf: refused just below
        reach = sq and sq * (abs(c) if np.isfinite(c) else abs(np.float64(scale)) / np.float64(temperature))
    dtype = _working_dtype(X, c, reach, sq, T if window is None else min(T, block) + 2 * W)
    # the keys (T + 2W, d), X itself when it must be widened, a check of the keys (T, d) bool
    need = (T + 2 * W) * d * dtype.itemsize + (0 if X.dtype == dtype else T * d * dtype.itemsize) + T * d
    limits.require(need, f"a document of {T:,} tokens x {d:,} dimensions", "split it into shorter documents")
    if not _fits(reach, d, np.float64):  # past float64, weights() refuses the same sentence
        raise _overflow(scale, temperature)
    X = X.astype(dtype, copy=False)
    keys = np.zeros((T + 2 * W, d), dtype=dtype)  # (T + 2W, d): W rows of zeros either side of c X
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(c):
            np.multiply(X, c, out=keys[W:W + T])
        else:  # scale / temperature overflows: the formula's own order, as weights() does
            np.divide(np.multiply(X, scale, out=keys[W:W + T]), temperature, out=keys[W:W + T])
    if not np.all(np.isfinite(keys[W:W + T])):
        raise _overflow(scale, temperature)
    b = _block_rows(T, window, block, dtype)
    kk = min(k, T)
    for start in range(0, T, b):
        end = min(start + b, T)
        rows = np.arange(start, end)  # (b,) the block's rows i
        lo, hi = (0, end if causal else T) if window is None else (start - W, end + W)
        columns = np.arange(lo, hi)  # (n,) the columns j it computes; with a window, some outside 0 .. T - 1
        E = _scaled_scores(X[start:end], keys[lo + W:hi + W])  # (b, n)
        hidden = None
        if causal or window is not None or exclude_self:
            hidden = np.zeros(E.shape, dtype=bool)  # (b, n)
            if exclude_self:  # --mask self: i never attends to i
                hidden |= columns[None, :] == rows[:, None]
            if causal:
                hidden |= columns[None, :] > rows[:, None]  # j > i
            if window is not None:
                hidden |= (columns[None, :] > rows[:, None] + W) | (columns[None, :] < rows[:, None] - W)  # |j - i| > W
                hidden |= (columns < 0) | (columns >= T)  # outside the document
            E[hidden] = -np.inf
        top_logit = E.max(axis=1, keepdims=True)  # (b, 1)
        if not np.all(np.isfinite(top_logit)):  # a safety net: the check before the first block catches it
            raise _overflow(scale, temperature)
        with np.errstate(over="ignore"):  # a score far below its row's maximum may reach -inf: weight 0
            E -= top_logit
        np.exp(E, out=E)  # (b, n), unnormalised weights in [0, 1]
        total = E.sum(axis=1, keepdims=True)  # (b, 1)
        inside = slice(max(lo, 0), min(hi, T))  # the columns in the document
        Z = (E[:, inside.start - lo:inside.stop - lo] @ X[inside]) / total  # (b, n') @ (n', d) -> (b, d)
        if hidden is not None:
            E[hidden] = -1.0  # masked cells rank last
        if not include_self:
            E[np.arange(end - start), rows - lo] = -1.0
        if window is None:
            top, weights_ = _top_k(E, min(kk, hi - lo))
            top += lo  # (b, k'): columns -> positions j
        else:  # row r's own window, j = i - W .. i + W, is columns r .. r + 2W of E: a top list of 2W + 1
            own = np.lib.stride_tricks.as_strided(E, (end - start, 2 * W + 1), (E.strides[0] + E.strides[1], E.strides[1]))
            top, weights_ = _top_k(own.copy(), min(kk, 2 * W + 1))
            top += (rows - W)[:, None]  # (b, k'): places in the window -> positions j
        if top.shape[1] < kk:  # fewer columns than k: places nothing can fill
            top = np.pad(top, ((0, 0), (0, kk - top.shape[1])), constant_values=-1)
            weights_ = np.pad(weights_, ((0, 0), (0, kk - weights_.shape[1])), constant_values=-1.0)
        yield start, top, np.where(weights_ >= 0, weights_ / total, -1.0), Z


def _scaled_scores(X_b: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Steps I and II's scaling at once, for a block of rows against the band of keys it
    computes: X_b (c X_band)^T = omega_b * c."""
    with np.errstate(over="ignore", invalid="ignore"):  # checked before the first block
        return X_b @ keys.T  # (b, d) @ (d, n) -> (b, n)


def _fits(reach: float, d: int, dtype) -> bool:
    """Whether scaled scores of size up to `reach` fit `dtype`, with room for the rounding
    of a d-term product."""
    return reach * (1 + (d + 2) * float(np.finfo(dtype).eps)) <= float(np.finfo(dtype).max)


def _working_dtype(X: np.ndarray, c: float, reach: float, sq: float, n: int) -> np.dtype:
    """float32, the vectors' own, unless the numbers leave its range, and then float64: a c
    beyond it (or below its smallest normal), scaled scores up to `reach` = |c| max_i |x_i|^2
    beyond it (a --scale of 1e38 over vectors of length 5), or a context sum over n
    columns, at most n max_j |x_j| = n sqrt(sq), that could overflow it. So the stream
    refuses only what float64, and so the sentence's own path, cannot hold."""
    f32 = np.finfo(np.float32)
    if X.dtype != np.float32 or not (c == 0 or float(f32.tiny) <= abs(c) < float(f32.max)):
        return np.dtype(np.float64)
    if not _fits(reach, X.shape[1], np.float32) or not n * np.sqrt(sq) < float(f32.max) / 2:
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def _largest_square_norm(X: np.ndarray, chunk: int = 1 << 12) -> float:
    """max_i |x_i|^2 in float64, a chunk of rows at a time (no (T, d) float64 copy): 4,096
    rows, 1.6 MB at d = 50, so that the chunk weighs nothing beside the O(T d) arrays even for
    a short document (65,536 rows took more than X itself up to that many tokens)."""
    most = 0.0
    for start in range(0, len(X), chunk):
        part = np.asarray(X[start:start + chunk], dtype=np.float64)  # (chunk, d)
        most = max(most, float(np.einsum("ij,ij->i", part, part).max(initial=0.0)))
    return most


def _block_rows(T: int, window: int | None, block: int, dtype: np.dtype) -> int:
    """Rows a block may hold, so that its arrays take at most a quarter of the memory
    available: per cell, the scores in `dtype`, argpartition's int64 positions and the masks."""
    cell = dtype.itemsize + 8 + 4
    n = T if window is None else min(T, block) + 2 * window  # the widest row of a block
    b = max(1, min(block, limits.available() // 4 // (cell * n)))
    limits.require(b * cell * n, f"a block of weights over {n:,} tokens", "give --window W, or split the document")
    return b


ROUNDS = 16  # the largest k _top_k finds by rounds of argmax


def _top_k(E: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's k largest entries >= 0, largest first and, among equals (within TIE), the
    earlier position first (as top_attended); a row with fewer fills the rest with -1. E is
    overwritten.

    For a small k, k rounds of argmax, each taking every row's largest and putting -inf
    there: a pass of SIMD comparisons a round, 40 times faster than argpartition on 256 x
    16,000. For a larger k, argpartition. Either may pick any of the entries tied at the
    k-th place: the k picked are ranked, and the few rows where an entry left out ties with
    the k-th are ranked again whole, exactly as top_attended ranks them.
    """
    b, T = E.shape
    rows = np.arange(b)
    if k <= ROUNDS:
        top, w = np.empty((b, k), dtype=np.int64), np.empty((b, k), dtype=E.dtype)  # (b, k)
        for t in range(k):
            top[:, t] = E.argmax(axis=1)
            w[:, t] = E[rows, top[:, t]]
            E[rows, top[:, t]] = -np.inf
    else:
        top = np.argpartition(E, T - k, axis=1)[:, T - k:]  # (b, k), unordered
        w = np.take_along_axis(E, top, axis=1)  # (b, k)
        E[rows[:, None], top] = -np.inf  # E holds what was left out
    order = ranked(w, top)  # (b, k)
    top, w = np.take_along_axis(top, order, axis=1), np.take_along_axis(w, order, axis=1)
    kth = w.min(axis=1)  # (b,)
    near = kth - TIE * np.abs(kth)  # (b,): where ranked's groups part
    for r in np.flatnonzero((kth >= 0) & (E >= near[:, None]).any(axis=1)):
        row = E[r].copy()  # (T,)
        row[top[r]] = w[r]  # the whole row again
        top[r] = ranked(row)[:k]
        w[r] = row[top[r]]
    return top, np.where(w >= 0, w, -1.0)


def init_projections(d: int, d_k: int, seed: int) -> dict[str, np.ndarray]:
    """W_query, W_key, W_value of shape (d, d_k), drawn in that order as Keras's "uniform"
    initializer draws them: uniform on [-0.05, 0.05], here from numpy's PCG64 generator,
    so the same seed gives the same numbers on any machine. Refused, before drawing, when
    the three (d, d_k) float64 arrays cannot fit in memory."""
    limits.require(3 * d * d_k * 8, f"drawing W_query, W_key, W_value of {d:,} x {d_k:,}", "choose a smaller --d-k")
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-0.05, 0.05, size=(d, d_k)) for name in ("W_query", "W_key", "W_value")}


def top_attended(alpha_i: np.ndarray, k: int, exclude: int | None = None, masked: np.ndarray | None = None) -> list[int]:
    """The positions of the k largest weights of one row, largest first (ties, within TIE:
    earlier first).

    `exclude` leaves one position out, usually the token's own: with raw vectors as
    queries and keys, x_i . x_i = |x_i|^2 makes a token attend mostly to itself. Masked
    positions (weight 0 by construction) are left out too.
    """
    order = ranked(alpha_i)  # (T,)
    kept = (int(j) for j in order if j != exclude and (masked is None or not masked[j]))
    return list(itertools.islice(kept, k))  # stops at k: a long row is not walked in Python


def top_attended_rows(alpha: np.ndarray, k: int, include_self: bool = False,
                      mask: np.ndarray | None = None) -> tuple[list[list[int]], list[list[float]]]:
    """top_attended for every row i of alpha (T, T), its own position i left out unless
    `include_self`: the positions and their weights, row by row. The same lists as T calls
    of top_attended, from one sort of the whole matrix (each row sorted alone, as there)."""
    T = alpha.shape[-1]
    order = ranked(alpha)  # (T, T)
    hidden = np.zeros((T, T), dtype=bool) if mask is None else np.array(mask, dtype=bool)  # (T, T)
    if not include_self:
        np.fill_diagonal(hidden, True)
    kept = ~hidden[np.arange(T)[:, None], order]  # (T, T), in each row's sorted order
    chosen = kept & (np.cumsum(kept, axis=-1) <= k)  # (T, T): a row's first k kept
    rows, places = np.nonzero(chosen)  # row-major: each row's choices together, in sorted order
    positions = order[rows, places]  # (n,)
    ends = np.cumsum(chosen.sum(axis=-1)).tolist()  # (T,)
    flat, weights = positions.tolist(), alpha[rows, positions].tolist()
    starts = [0, *ends[:-1]]
    return ([flat[a:b] for a, b in zip(starts, ends)], [weights[a:b] for a, b in zip(starts, ends)])


# What the weights leave out, measured two ways from the literature.


def rollout(A: np.ndarray) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, "Quantifying Attention Flow in Transformers",
    2020): how much token j reaches token i through every layer up to l, counting the
    residual connection as attention to oneself. With A_l a layer's weights (the mean over
    its heads), A'_l = 0.5 A_l + 0.5 I renormalised by rows, and

        R_1 = A'_1,    R_l = A'_l R_{l-1}.

    A (L, T, T) -> R (L, T, T), each row summing to 1."""
    L, T, _ = A.shape
    R = np.empty((L, T, T))
    for l in range(L):
        P = 0.5 * A[l] + 0.5 * np.eye(T)  # (T, T)
        P = P / P.sum(axis=-1, keepdims=True)  # (T, T), rows sum to 1
        R[l] = P if l == 0 else P @ R[l - 1]  # (T, T)
    return R


def weighted_norms(alpha: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Kobayashi et al., "Attention is Not Only a Weight" (2020): the size of what token j
    actually sends token i, ||alpha_ij f(x_j)||, where f(x_j) is what a head passes on for
    j (its value, and in a transformer that value through the head's slice of W_O).
    alpha (H, T, T), F (H, T, D) -> (H, T, T); alpha_ij >= 0, so it is alpha_ij ||f(x_j)||."""
    return alpha * np.linalg.norm(F, axis=-1)[:, None, :]  # (H, T, T)


def in_own_columns(V: np.ndarray, H: int) -> np.ndarray:
    """What each of H heads passes on over raw values V (T, d_v): its value in its own
    columns of the merged context, 0 in the other heads', so that sum_h alpha^h_ij f^h(x_j)
    is token j's part of z_i, the heads side by side (the W_O of a model being the identity).
    -> (H, T, d_v)"""
    Vh = split_heads(np.asarray(V, dtype=np.float64), H)  # (H, T, d_v / H)
    H, T, w = Vh.shape
    F = np.zeros((H, T, H * w))  # (H, T, d_v)
    for h in range(H):
        F[h, :, h * w:(h + 1) * w] = Vh[h]
    return F


def summed_norms(alpha: np.ndarray, F: np.ndarray, block: int = 64) -> np.ndarray:
    """||sum_h alpha^h_ij f^h(x_j)||: what j sends i through all heads together, the layer's
    own measure of the same paper. A block of rows at a time, so no (T, T, D) is held.
    alpha (H, T, T), F (H, T, D) -> (T, T)."""
    H, T, _ = alpha.shape
    out = np.empty((T, T))
    for start in range(0, T, block):
        rows = slice(start, min(start + block, T))
        G = np.einsum("hij,hjd->ijd", alpha[:, rows], F)  # (b, T, D): each head's part, summed
        out[rows] = np.linalg.norm(G, axis=-1)  # (b, T)
    return out


# Backward passes: the gradients of the steps above, for learning W_Q, W_K and W_V by
# backpropagation. Each takes the gradient of a loss with respect to a step's output and
# gives it with respect to the step's inputs; each works with a leading (H,) axis too. They
# are written out (no autograd library) because they are the subject: the chain rule
# through the three steps, a line each.


def context_backward(alpha: np.ndarray, V: np.ndarray, dZ: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step III, Z = alpha V: d_alpha = dZ V^T (T, T) and dV = alpha^T dZ (T, d_k)."""
    return dZ @ np.swapaxes(V, -1, -2), np.swapaxes(alpha, -1, -2) @ dZ


def softmax_backward(alpha: np.ndarray, d_alpha: np.ndarray) -> np.ndarray:
    """alpha_i = softmax(s_i) row by row: the Jacobian-vector product
    ds_ij = alpha_ij (d_alpha_ij - sum_k alpha_ik d_alpha_ik). A masked cell's alpha is 0,
    so its gradient is 0: the mask is not learned through."""
    return alpha * (d_alpha - (alpha * d_alpha).sum(axis=-1, keepdims=True))  # (T, T)


def weights_backward(alpha: np.ndarray, d_alpha: np.ndarray, scale: float, temperature: float = 1.0) -> np.ndarray:
    """Step II, alpha = softmax(omega * scale / temperature): d_omega (T, T)."""
    return softmax_backward(alpha, d_alpha) * (scale / temperature)


def scores_backward(Q: np.ndarray, K: np.ndarray, d_omega: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step I, omega = Q K^T: dQ = d_omega K (T, d_k) and dK = d_omega^T Q (T, d_k)."""
    return d_omega @ K, np.swapaxes(d_omega, -1, -2) @ Q


def multi_head_backward(Q: np.ndarray, K: np.ndarray, V: np.ndarray, alpha: np.ndarray, dZ: np.ndarray,
                        heads: int, scale: float, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """multi_head's chain rule: from dZ (..., T, d_v) and what its forward pass took and gave
    (Q, K, V and alpha), the gradients dQ, dK (..., T, d_k) and dV (..., T', d_v)."""
    Qh, Kh, Vh = (split_heads(M, heads) for M in (Q, K, V))  # (..., H, T, d_k/H), twice, and (..., H, T', d_v/H)
    d_alpha, dVh = context_backward(alpha, Vh, split_heads(dZ, heads))  # (..., H, T, T'), (..., H, T', d_v/H)
    d_omega = weights_backward(alpha, d_alpha, scale, temperature)  # (..., H, T, T')
    dQh, dKh = scores_backward(Qh, Kh, d_omega)  # (..., H, T, d_k/H), (..., H, T', d_k/H)
    return merge_heads(dQh), merge_heads(dKh), merge_heads(dVh)


def project_backward(X: np.ndarray, W: np.ndarray, dP: np.ndarray,
                     inputs: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """P = X W + b: dW = X^T dP (d, d_k), db = the sum of dP's rows (d_k,), dX = dP W^T (T, d)
    (None with inputs=False, when X is data and not learned)."""
    X = np.asarray(X, dtype=np.float64)
    dX = dP @ np.asarray(W, dtype=np.float64).T if inputs else None
    return X.T @ dP, dP.sum(axis=0), dX
