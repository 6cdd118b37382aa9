"""Learned weights from outside: query, key and value projections (none, drawn at random,
or read from a .npz), and the RNN's weights.

A projections .npz holds W_query, W_key, W_value of shape (d, d_k), the seed's names, and
optionally b_query, b_key, b_value of shape (d_k,); an RNN's holds W_hx (N, d), W_hh (N, N)
and b_h (N,). Both are read with allow_pickle=False: an object array (a pickle) is refused,
never run.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from attncli import attention
from attncli.errors import AttncliError

WEIGHTS = ("W_query", "W_key", "W_value")
BIASES = ("b_query", "b_key", "b_value")


class ProjectionError(AttncliError):
    """A projections file that is missing, unreadable, or of the wrong shape."""


@dataclass(frozen=True)
class Projections:
    kind: str  # "identity", "random" or "file"
    W: dict = field(default_factory=dict)  # W_query, W_key, W_value: (d, d_k); empty for identity
    b: dict = field(default_factory=dict)  # b_query, b_key, b_value: (d_k,), those given
    seed: int | None = None
    path: str | None = None

    def apply(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Q, K, V: each (T, d_k); the raw vectors themselves for identity."""
        if self.kind == "identity":
            X = np.asarray(X, dtype=np.float64)  # (T, d)
            return X, X, X
        QKV = tuple(attention.project(X, self.W[w], self.b.get(b)) for w, b in zip(WEIGHTS, BIASES))
        self.check_finite("the queries, keys and values (X W)", *QKV)
        return QKV

    def check_finite(self, what: str, *arrays: np.ndarray) -> None:
        """Projections too large for the vectors overflow float64: say so, and whose they are."""
        if not all(np.all(np.isfinite(a)) for a in arrays):
            where = self.path or f"--qkv {self.kind}"
            raise ProjectionError(f"{where}: {what} overflow to infinity; the projections are too large for these vectors")

    def describe(self, d: int) -> dict:
        """The JSON `qkv` key: kind, d_k, and the seed or the file."""
        out = {"kind": self.kind, "d_k": d if self.kind == "identity" else int(self.W["W_query"].shape[1])}
        if self.seed is not None:
            out["seed"] = self.seed
        if self.path is not None:
            out["path"] = self.path
        return out


def resolve(spec: str, d: int, d_k: int | None, seed: int) -> Projections:
    """--qkv identity|random|PATH.npz for vectors of dimension d."""
    if spec == "identity":
        if d_k is not None and d_k != d:
            raise ProjectionError(f"--d-k {d_k} needs projections: identity keeps d_k = d = {d}; add --qkv random")
        return Projections("identity")
    if spec == "random":
        return _random(d, d_k or d, seed)
    try:
        st = os.stat(spec)
    except OSError:
        st = None
    proj = _load(spec, d, st and (st.st_size, st.st_mtime_ns))  # a changed file is read again
    if d_k is not None and d_k != proj.W["W_query"].shape[1]:
        raise ProjectionError(f"{spec}: holds projections of d_k = {proj.W['W_query'].shape[1]}, not the --d-k {d_k} asked for")
    return proj


@lru_cache(maxsize=8)
def _random(d: int, d_k: int, seed: int) -> Projections:
    return Projections("random", attention.init_projections(d, d_k, seed), seed=seed)


@lru_cache(maxsize=8)
def _load(spec: str, d: int, version: tuple | None) -> Projections:
    return load(spec, d)


def read_arrays(path: str | Path, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """The named arrays of a .npz file, as float64, each checked to be real, finite numbers;
    never unpickled."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":  # a .npz is a zip archive of .npy files
                raise ProjectionError(f"{path}: not a .npz file; it needs {', '.join(required)} (numpy.savez writes one)")
        with warnings.catch_warnings(), np.load(path, allow_pickle=False) as npz:
            warnings.simplefilter("ignore", SyntaxWarning)  # numpy parses a damaged header as Python
            arrays = {name: npz[name] for name in npz.files if name in required + optional}
    except ProjectionError:
        raise
    except FileNotFoundError:
        raise ProjectionError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ProjectionError(f"{path}: is a directory, not a .npz file") from None
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise ProjectionError(f"{path}: holds an object array, which would be unpickled; save plain numeric arrays") from None
        raise ProjectionError(f"{path}: not a .npz file of arrays ({e})") from None
    except Exception as e:  # noqa: BLE001: a damaged zip or .npy member raises many kinds (zlib, zipfile, tokenize, ...)
        raise ProjectionError(f"{path}: cannot be read as a .npz file ({type(e).__name__}: {e})") from None
    missing = [name for name in required if name not in arrays]
    if missing:
        raise ProjectionError(f"{path}: lacks {', '.join(missing)}; it needs {', '.join(required)}")
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray):  # a member that is not a .npy comes back as raw bytes
            raise ProjectionError(f"{path}: {name} is not a numpy array")
        if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
            raise ProjectionError(f"{path}: {name} holds {a.dtype} values, not real numbers")
        if not np.all(np.isfinite(a)):
            raise ProjectionError(f"{path}: {name} holds NaN or infinity")
    return {name: a.astype(np.float64) for name, a in arrays.items()}


def _check_shapes(path: str | Path, arrays: dict[str, np.ndarray], shapes: dict[str, tuple]) -> None:
    for name, want in shapes.items():
        if name in arrays and arrays[name].shape != want:
            raise ProjectionError(f"{path}: {name} has shape {arrays[name].shape}, but these vectors need {want}")


def load(path: str, d: int) -> Projections:
    """Projections from a .npz: W_query, W_key, W_value (d, d_k); b_query, b_key, b_value (d_k,)."""
    arrays = read_arrays(path, WEIGHTS, BIASES)
    W_query = arrays["W_query"]
    d_k = W_query.shape[1] if W_query.ndim == 2 and W_query.shape[1] else None
    if d_k is None:
        raise ProjectionError(f"{path}: W_query has shape {W_query.shape}, not (d, d_k) = ({d}, d_k)")
    _check_shapes(path, arrays, {**{w: (d, d_k) for w in WEIGHTS}, **{b: (d_k,) for b in BIASES}})
    return Projections("file", {w: arrays[w] for w in WEIGHTS}, {b: arrays[b] for b in BIASES if b in arrays},
                       path=str(path))


def load_rnn_weights(path: str, d: int) -> dict[str, np.ndarray]:
    """The RNN's W_hx (N, d), W_hh (N, N) and b_h (N,) from a .npz."""
    arrays = read_arrays(path, ("W_hx", "W_hh", "b_h"))
    N = arrays["W_hh"].shape[0] if arrays["W_hh"].ndim == 2 and arrays["W_hh"].shape[0] else None
    if N is None:
        raise ProjectionError(f"{path}: W_hh has shape {arrays['W_hh'].shape}, not (N, N)")
    _check_shapes(path, arrays, {"W_hx": (N, d), "W_hh": (N, N), "b_h": (N,)})
    return arrays
