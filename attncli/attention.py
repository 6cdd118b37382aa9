"""Self-attention between the tokens of a sentence, in pure numpy: the seeds' Steps I-III.

    Step I    scores    omega_ij = x_i . x_j                                   scores(X)
    Step II   weights   alpha_i  = softmax_j(omega_ij * scale / temperature)   weights(omega, scale, temperature)
    Step III  context   z_i      = sum_j alpha_ij x_j                          context(alpha, X)

The scale defaults to 1/sqrt(d), the scaled dot-product of Vaswani et al., "Attention Is All
You Need" (2017), where d_k = d because the keys are the embeddings themselves; scale = 1
gives the seeds' plain Step II.

Dimensions: T tokens, d the size of a word vector. Every array is float64, so the numbers
carry no rounding beyond that of the float32 vectors they start from.
"""

from __future__ import annotations

import numpy as np

from attncli.errors import AttncliError


class ScaleError(AttncliError):
    """The scale and temperature make the scaled scores overflow to infinity."""


def scores(X: np.ndarray) -> np.ndarray:
    """Step I: omega_ij = x_i . x_j, the raw dot product of every pair of tokens."""
    X = np.asarray(X, dtype=np.float64)  # (T, d)
    return X @ X.T  # (T, T)


def default_scale(d: int) -> float:
    """1/sqrt(d_k) of Vaswani et al.; with raw embeddings as keys, d_k = d."""
    return 1.0 / np.sqrt(d)


def softmax(logits: np.ndarray) -> np.ndarray:
    """softmax over the last axis, computed stably.

    Subtracting each row's maximum changes no weight (it cancels between numerator and
    denominator) but keeps exp() from overflowing: the largest term becomes exp(0) = 1.
    """
    shifted = logits - logits.max(axis=-1, keepdims=True)  # (T, T), each row's max is 0
    e = np.exp(shifted)  # (T, T), in (0, 1]
    return e / e.sum(axis=-1, keepdims=True)  # (T, T), each row sums to 1


def weights(omega: np.ndarray, scale: float, temperature: float = 1.0) -> np.ndarray:
    """Step II: alpha_i = softmax_j(omega_ij * scale / temperature), row by row."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is caught just below
        logits = omega * scale / temperature  # (T, T)
    if not np.all(np.isfinite(logits)):
        raise ScaleError(
            f"scale {scale:g} / temperature {temperature:g} makes the scaled scores overflow; "
            "use a smaller --scale or a larger --temperature"
        )
    return softmax(logits)  # (T, T)


def context(alpha: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Step III: z_i = sum_j alpha_ij x_j, each token's weighted sum of all the token vectors."""
    return alpha @ np.asarray(X, dtype=np.float64)  # (T, T) @ (T, d) -> (T, d)


def top_attended(alpha_i: np.ndarray, k: int, exclude: int | None = None) -> list[int]:
    """The positions of the k largest weights of one row, largest first (ties: earlier first).

    `exclude` leaves one position out, usually the token's own: with raw vectors as
    queries and keys, x_i . x_i = |x_i|^2 makes a token attend mostly to itself.
    """
    order = np.argsort(-alpha_i, kind="stable")  # (T,)
    return [int(j) for j in order if j != exclude][:k]
