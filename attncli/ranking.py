"""How numbers are ranked, the same on every machine: largest first, and numbers so close
that only the order of a sum tells them apart taken as equal, in the order of their
positions. Pure numpy, beneath the math (attention's top lists) and the views (a ranked
list of a row) alike.
"""

from __future__ import annotations

import numpy as np

# Weights within TIE of each other (relative) are equal, and equal weights go by position,
# on every machine: a mathematically tied pair (the same word twice) comes out a few ulps
# apart, in an order that depends on how the processor's BLAS summed it (AVX2 against
# AVX-512 kernels). One tolerance for every path, so that a document's stream, in float32,
# ranks as the sentence path does in float64: float32's weights are good to about 1e-6.
TIE = 1e-5


def ranked(values: np.ndarray, positions: np.ndarray | None = None) -> np.ndarray:
    """Indices along the last axis of `values` (..., n), largest first, values within TIE of
    their neighbour in that order taken as equal and put in the order of their `positions`
    (..., n) (None: their indices), smallest first. NaN ranks last."""
    values = np.asarray(values)
    positions = np.broadcast_to(np.arange(values.shape[-1]), values.shape) if positions is None else positions
    order = np.lexsort((positions, -values), axis=-1)  # (..., n): by value, then position
    v = np.take_along_axis(values, order, axis=-1)  # (..., n), descending
    with np.errstate(invalid="ignore"):  # -inf - -inf: masked cells, one group
        apart = (v[..., :-1] - v[..., 1:]) > TIE * np.maximum(np.abs(v[..., :-1]), np.abs(v[..., 1:]))  # (..., n-1)
    group = np.concatenate([np.zeros(v.shape[:-1] + (1,), dtype=np.int64), np.cumsum(apart, axis=-1)], axis=-1)
    by_position = np.lexsort((np.take_along_axis(positions, order, axis=-1), group), axis=-1)  # (..., n)
    return np.take_along_axis(order, by_position, axis=-1)
