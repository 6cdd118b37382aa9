"""Learned weights from outside: query, key and value projections (none, drawn at random,
or read from a .npz), and the RNN's weights.

A projections .npz holds W_query, W_key of shape (d, d_k) and W_value of shape (d, d_v)
(d_v is d_k, unless the file says otherwise), and optionally their biases b_query, b_key
(d_k,) and b_value (d_v,); an RNN's holds W_hx (N, d), W_hh (N, N)
and b_h (N,). Both are read with allow_pickle=False: an object array (a pickle) is refused,
never run. A .npz is a zip archive, in which a few kB can declare GBs: every member's .npy
header (dtype and shape), its size and the memory the arrays will take are checked before
any of their data is read.
"""

from __future__ import annotations

import bisect
import math
import os
import struct
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.lib import format as npy

from attncli import attention, rnn
from attncli.errors import AttncliError
from attncli.system import limits, reading
from attncli.words import npyfile

if TYPE_CHECKING:  # zipfile is imported where a .npz is read: the identity's runs need not pay for it
    import zipfile

WEIGHTS = ("W_query", "W_key", "W_value")
BIASES = ("b_query", "b_key", "b_value")

# The widest queries, keys and values (d_k, d_v) of --d-k or of a file: 64 times the widest
# transformers' d_model of 1,024, and 4 times the largest hidden size any model has (16,384).
# A file that declares more is not a projection any attention uses (a few MB of zeros can
# declare GBs, a zip bomb), and is refused from its headers, before its data is inflated.
MOST_D_K = 65_536


class ProjectionError(AttncliError):
    """A projections file that is missing, unreadable, or of the wrong shape."""


# The --mask each of attncli train's objectives is to be shown with: hide and mask never
# show a hidden word among its keys, next sees only the words up to its own.
OBJECTIVES = ("hide", "mask", "next")  # train's, each shown with its mask
SHOWN_WITH = {"hide": "self", "mask": "self", "next": "causal"}

RECORD_MOST = 1 << 20  # bytes of train's record: its JSON is a few kB, and a member may declare GBs


@dataclass(frozen=True)
class Recorded:
    """How a file attncli train wrote is to be shown: its heads, and its objective's mask."""

    objective: str
    heads: int

    @property
    def mask(self) -> str:
        return SHOWN_WITH[self.objective]


def recorded(path: str) -> Recorded | None:
    """The heads and objective train recorded in a .npz (its `train` member, a JSON record);
    None for a file without one (qkv init's, one made by hand)."""
    record = _train_record(path)
    if record is None:
        return None
    # train before its objectives and heads wrote neither: its runs were of hide, one head
    options = record.get("options", {}) if isinstance(record, dict) else None
    if not isinstance(options, dict):
        raise ProjectionError(f"{path}: its train record is not the JSON object attncli train writes; it was changed "
                              "after train wrote it")
    heads, objective = options.get("heads", 1), options.get("objective", "hide")
    if type(heads) is not int or heads < 1 or objective not in SHOWN_WITH:
        raise ProjectionError(f"{path}: its train record gives heads {heads!r} and objective {objective!r}, which "
                              "attncli train never writes; it was changed after train wrote it")
    return Recorded(objective, heads)


def _train_record(path: str):
    """The JSON of a .npz's `train` member, or None where it has none. Its header is checked
    before its data is read, as every member's is (read_arrays)."""
    import json
    import zipfile

    try:
        with reading.open_regular(path, "--qkv") as f:
            if f.read(4) != b"PK\x03\x04":
                return None  # not a .npz: load says what it is
            _check_directory(f, path)
            with zipfile.ZipFile(f) as archive:
                info = _members(archive, ("train",)).get("train")
                if info is None:
                    return None
                _check_compression({"train": info}, path)
                shape, dtype, _ = header = _header(archive, info, path, "train")
                if dtype.kind != "U" or shape != (1,) or dtype.itemsize > RECORD_MOST:
                    raise ProjectionError(f"{path}: its train member is not the record attncli train writes (an "
                                          f"array of {dtype}, shape {shape}); save the file without it")
                return json.loads(str(_read_member(archive, info, header)[0]))
    except AttncliError:
        raise
    except ValueError as e:  # JSON that does not parse, a damaged header
        raise ProjectionError(f"{path}: its train record cannot be read ({e}); it was changed after attncli train "
                              "wrote it") from None
    except Exception:  # noqa: BLE001: a damaged archive (zlib, zipfile): load says what is wrong with it
        return None


@dataclass(frozen=True)
class Projections:
    kind: str  # "identity", "random" or "file"
    W: dict = field(default_factory=dict)  # W_query, W_key: (d, d_k), W_value: (d, d_v); empty for identity
    b: dict = field(default_factory=dict)  # b_query, b_key: (d_k,), b_value: (d_v,), those given
    seed: int | None = None
    path: str | None = None
    trained: bool = False  # made by attncli train (d_k = d): its context vectors live among the word vectors
    record: Recorded | None = None  # made by attncli train: the heads and mask it is to be shown with

    @property
    def word_space(self) -> bool:
        """Whether a context vector is a point among the word vectors, so that words near it mean something."""
        return self.kind == "identity" or self.trained

    def apply(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Q, K (T, d_k) and V (T, d_v); the raw vectors themselves for identity."""
        if self.kind == "identity":
            X = np.asarray(X, dtype=np.float64)  # (T, d)
            return X, X, X
        (T, d), d_k, d_v = np.shape(X), self.W["W_query"].shape[1], self.W["W_value"].shape[1]
        # Q, K (T, d_k), V (T, d_v), a bias's sum beside one of them, and X as float64 (T, d)
        limits.require((2 * T * d_k + 2 * T * max(d_k, d_v) + T * d) * 8,
                       f"projecting {T:,} tokens to queries, keys and values of d_k = {d_k:,}",
                       "choose a smaller --d-k, or a shorter sentence")
        QKV = tuple(attention.project(X, self.W[w], self.b.get(b)) for w, b in zip(WEIGHTS, BIASES))
        self.check_finite("the queries, keys and values (X W)", *QKV)
        return QKV

    def check_finite(self, what: str, *arrays: np.ndarray) -> None:
        """Projections too large for the vectors overflow float64: say so, and whose they are."""
        if not all(np.isfinite(a).all() for a in arrays):
            where = self.path or f"--qkv {self.kind}"
            raise ProjectionError(f"{where}: {what} overflow to infinity; the projections are too large for these vectors")

    def d_v(self, d: int) -> int:
        """The values' size: d_k, unless a file's W_value says otherwise."""
        return d if self.kind == "identity" else int(self.W["W_value"].shape[1])

    def describe(self, d: int) -> dict:
        """The JSON `qkv` key: kind, d_k, d_v where it is not d_k, and the seed or the file."""
        out = {"kind": self.kind, "d_k": d if self.kind == "identity" else int(self.W["W_query"].shape[1])}
        if self.d_v(d) != out["d_k"]:
            out["d_v"] = self.d_v(d)
        if self.seed is not None:
            out["seed"] = self.seed
        if self.path is not None:
            out["path"] = self.path
        if self.trained:
            out["trained"] = True
        if self.record is not None:
            out["train"] = {"objective": self.record.objective, "heads": self.record.heads, "mask": self.record.mask}
        return out


def resolve(spec: str, d: int, d_k: int | None, seed: int, heads: int = 1) -> Projections:
    """--qkv identity|random|PATH.npz for vectors of dimension d, split into `heads` heads.

    Every option is checked against the others (--d-k against identity or the file's,
    --heads against d_k and d_v) before any array is drawn or read: --d-k 3000000 with
    --heads 7 is refused at once, not after drawing 3.6 GB of weights."""
    if spec == "identity":
        if d_k is not None and d_k != d:
            raise ProjectionError(f"--d-k {d_k} needs projections: identity keeps d_k = d = {d:,}; add --qkv random")
        check_heads(heads, d, d)
        return Projections("identity")
    if spec == "random":
        check_heads(heads, d_k or d, d_k or d)
        return _random(d, d_k or d, seed)
    try:
        st = os.stat(spec)
    except OSError:
        st = None
    return _load(spec, d, d_k, heads, st and (st.st_size, st.st_mtime_ns))  # a changed file is read again


def check_heads(heads: int, d_k: int, d_v: int, where: str = "") -> None:
    """Refuse heads that do not divide both the queries' and keys' d_k and the values' d_v,
    listing the counts that do (the dozen nearest the one asked for, when there are more)."""
    if d_k % heads or d_v % heads:  # before the sizes: a --heads above d_k is this mistake, not a memory limit
        small = [h for h in range(1, math.isqrt(d_k) + 1) if d_k % h == 0]
        divisors = sorted(h for h in {*small, *(d_k // h for h in small)} if d_v % h == 0)
        at = bisect.bisect(divisors, heads)
        near = divisors[max(0, at - 6):at + 6]
        listed = ("…, " if near[0] != divisors[0] else "") + ", ".join(map(str, near)) + \
            (", …" if near[-1] != divisors[-1] else "")
        sizes = f"d_k = {d_k}" if d_v == d_k else f"both d_k = {d_k} and d_v = {d_v}"
        raise ProjectionError(f"{where}--heads {heads} does not divide {sizes}; choose one of {listed}")


@lru_cache(maxsize=8)
def _random(d: int, d_k: int, seed: int) -> Projections:
    return Projections("random", attention.init_projections(d, d_k, seed), seed=seed)


@lru_cache(maxsize=8)
def _load(spec: str, d: int, d_k: int | None, heads: int, version: tuple | None) -> Projections:
    return load(spec, d, d_k=d_k, heads=heads)


def read_arrays(path: str | Path, required: tuple[str, ...], optional: tuple[str, ...] = (), *,
                expect=None, working=None, what: str = "--qkv",
                hint: str = "use a file of smaller arrays") -> dict[str, np.ndarray]:
    """The named arrays of a .npz file, as float64, each checked to be real, finite numbers;
    never unpickled.

    Nothing of an array's data is read before its member's .npy header has been checked:
    a numeric dtype, the shape expect(shapes) asks for (given every header's shape; it may
    refuse a shape of the wrong rank itself), a member size that fits that shape, and the
    memory the arrays, their float64 copies and working(shapes) bytes more will take. A
    .npz is a zip archive, so a few kB can declare GBs: the headers are what may be trusted
    to say how much, once the member sizes agree with them."""
    try:
        with reading.open_regular(path, what) as f:
            if f.read(4) != b"PK\x03\x04":  # a .npz is a zip archive of .npy files
                raise ProjectionError(f"{path}: not a .npz file; it needs {', '.join(required)} (numpy.savez writes one)")
            _check_directory(f, path)
            import zipfile

            with warnings.catch_warnings(), zipfile.ZipFile(f) as archive:
                warnings.simplefilter("ignore", SyntaxWarning)  # numpy parses a damaged header as Python
                warnings.simplefilter("ignore", UserWarning)  # ... or as Python 2's; and duplicate member names
                members = _members(archive, required + optional)
                missing = [name for name in required if name not in members]
                if missing:
                    raise ProjectionError(f"{path}: lacks {', '.join(missing)}; it needs {', '.join(required)}")
                _check_compression(members, path)
                headers = {name: _header(archive, info, path, name) for name, info in members.items()}
                _check_headers(path, members, headers, expect, working, hint)
                arrays = {name: _read_member(archive, members[name], headers[name]) for name in members}
    except ProjectionError:
        raise
    except limits.ResourceError as e:
        raise ProjectionError(str(e)) from None
    except ValueError as e:
        raise ProjectionError(f"{path}: not a .npz file of arrays ({e})") from None
    except Exception as e:  # noqa: BLE001: a damaged zip or .npy member raises many kinds (zlib, zipfile, tokenize, ...)
        raise ProjectionError(f"{path}: cannot be read as a .npz file ({type(e).__name__}: {e})") from None
    with np.errstate(over="ignore"):  # a longdouble beyond float64's range becomes infinity, refused below
        arrays = {name: a.astype(np.float64, copy=False) for name, a in arrays.items()}
    for name, a in arrays.items():
        if not np.all(np.isfinite(a)):
            raise ProjectionError(f"{path}: {name} holds NaN or infinity (or numbers beyond float64's range)")
    return arrays


DIRECTORY_MOST = 16 << 20  # bytes of zip directory: numpy.savez writes about 100 a member


def _check_directory(f, path) -> None:
    """Refuse an archive whose zip directory (its list of members, which zipfile reads whole,
    at about ten times its size in memory) is larger than a .npz of arrays ever needs."""
    end = f.seek(0, os.SEEK_END)
    f.seek(max(0, end - (22 + 0xFFFF)))  # the end record: 22 bytes and a comment of up to 64 kB
    tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        return  # not a zip archive: zipfile says so
    members, directory = struct.unpack_from("<HI", tail, at + 10)
    locator = at - 20  # zip64: its end record, found through a locator just before
    if (members == 0xFFFF or directory == 0xFFFFFFFF) and locator >= 0 and tail[locator:locator + 4] == b"PK\x06\x07":
        f.seek(struct.unpack_from("<Q", tail, locator + 8)[0])
        record = f.read(56)
        if len(record) == 56 and record[:4] == b"PK\x06\x06":
            members, directory = struct.unpack_from("<QQ", record, 32)
    if directory > DIRECTORY_MOST:
        raise ProjectionError(f"{path}: declares a zip directory of {limits.size(directory)} ({members:,} members), "
                              f"more than a .npz of a few arrays needs ({limits.size(DIRECTORY_MOST)} at most); "
                              "save only the arrays it needs")


def _members(archive: zipfile.ZipFile, names: tuple[str, ...]) -> dict[str, zipfile.ZipInfo]:
    """The member each wanted array is in, as np.load finds it: NAME itself, else NAME.npy."""
    infos = {info.filename: info for info in archive.infolist()}  # the last of a repeated name, as zipfile
    found = {}
    for name in names:
        info = infos.get(name) or infos.get(f"{name}.npy")
        if info is not None:
            found[name] = info
    return found


def _check_compression(members: dict, path) -> None:
    """Refuse a member compressed other than numpy writes it (stored by savez, deflated by
    savez_compressed): zipfile inflates bzip2 and LZMA a block of input at a time, with no
    bound on its output, so that the first bytes of a member of 3 kB took 6 GB."""
    import zipfile

    for name, info in members.items():
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            method = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "LZMA"}.get(info.compress_type,
                                                                               f"method {info.compress_type}")
            raise ProjectionError(f"{path}: {name} is compressed with {method}, which numpy does not write; save "
                                  "the file with numpy.savez or numpy.savez_compressed")


def _header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path, name: str) -> tuple:
    """(shape, dtype, offset of the data) from a member's .npy header: only its first bytes
    are decompressed."""
    with archive.open(info) as member:
        try:
            shape, _, dtype, offset = npyfile.header(member)
        except npyfile.NotNpy:
            raise ProjectionError(f"{path}: {name} is not a numpy array") from None
        except ValueError as e:
            raise ValueError(f"{name} {e}") from None
        return shape, dtype, offset


def _check_headers(path, members: dict, headers: dict, expect, working, hint: str) -> None:
    """Every check that the headers and the member sizes allow, before any data is read."""
    for name, (shape, dtype, _) in headers.items():
        if dtype.hasobject:
            raise ProjectionError(f"{path}: holds an object array, which would be unpickled; save plain numeric arrays")
        if not np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.complexfloating):
            raise ProjectionError(f"{path}: {name} holds {dtype} values, not real numbers")
        if any(n < 0 for n in shape):
            raise ValueError(f"{name} has shape {shape}, with a negative length")
    shapes = {name: header[0] for name, header in headers.items()}
    for name, want in (expect(shapes) if expect else {}).items():
        if name in shapes and shapes[name] != want:
            raise ProjectionError(f"{path}: {name} has shape {shapes[name]}, but these vectors need {want}")
    counts = {name: math.prod(shape) for name, shape in shapes.items()}
    need = sum(counts[name] * (dtype.itemsize + (0 if dtype == np.float64 else 8)) for name, (_, dtype, _) in headers.items())
    need += max(counts.values(), default=0) + (working(shapes) if working else 0)  # isfinite's bools; the caller's
    limits.require(need, f"{path}: reading {', '.join(headers)} ({sum(counts.values()):,} numbers)", hint)
    for name, (shape, dtype, offset) in headers.items():
        data, want = members[name].file_size - offset, counts[name] * dtype.itemsize
        if data < want:
            raise ProjectionError(f"{path}: {name} holds {limits.size(data)} of data, less than its shape {shape} of "
                                  f"{dtype} needs ({limits.size(want)}); the file is cut short or damaged")
        if data > want + SLACK:
            raise ProjectionError(f"{path}: {name} declares {limits.size(data)} of data, far more than its shape "
                                  f"{shape} of {dtype} needs ({limits.size(want)}); the file is damaged or was not "
                                  "written by numpy.savez")


SLACK = 1 << 16  # bytes a member may hold beyond its array (numpy writes none)


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, header: tuple) -> np.ndarray:
    """The array, once its header has passed: read a chunk at a time into one array."""
    with archive.open(info) as member:
        a = npy.read_array(member, allow_pickle=False)
    if a.shape != header[0] or a.dtype != header[1]:  # numpy read the header as it was checked
        raise ValueError(f"{info.filename}: its header reads differently the second time")
    return a


def load(path: str, d: int, *, d_k: int | None = None, heads: int = 1) -> Projections:
    """Projections from a .npz: W_query, W_key, W_value (d, d_k); b_query, b_key, b_value (d_k,).
    A d_k asked for, and the heads, are checked against the headers before any data is read."""
    asked = d_k

    def expect(shapes: dict[str, tuple]) -> dict[str, tuple]:
        W_query = shapes["W_query"]
        if len(W_query) != 2 or not W_query[1]:
            raise ProjectionError(f"{path}: W_query has shape {W_query}, not (d, d_k) = ({d}, d_k)")
        d_k = W_query[1]  # as W_query says: W_key must agree
        for name in ("W_query", "W_value"):
            if len(shapes[name]) == 2 and shapes[name][1] > MOST_D_K:
                raise ProjectionError(f"{path}: {name} has shape {shapes[name]}, {shapes[name][1]:,} columns, more "
                                      f"than any attention's queries, keys or values need ({MOST_D_K:,} at most)")
        if asked is not None and asked != d_k:
            raise ProjectionError(f"{path}: holds projections of d_k = {d_k}, not the --d-k {asked} asked for")
        W_value = shapes["W_value"]  # the values may be of another size, d_v (attncli train keeps d)
        d_v = W_value[1] if len(W_value) == 2 and W_value[1] else d_k
        want = {"W_query": (d, d_k), "W_key": (d, d_k), "W_value": (d, d_v),
                "b_query": (d_k,), "b_key": (d_k,), "b_value": (d_v,)}
        if all(shapes.get(name, want[name]) == want[name] for name in want):  # the shapes' own errors first
            check_heads(heads, d_k, d_v, f"{path}: ")
        return want

    arrays = read_arrays(path, WEIGHTS, BIASES, expect=expect, what="--qkv", hint="use projections of a smaller d_k")
    # attncli train writes its record beside the weights, and learns them to predict words
    # from the context vectors: with d_k = d those vectors are points among the word vectors
    record = recorded(path)
    return Projections("file", {w: arrays[w] for w in WEIGHTS}, {b: arrays[b] for b in BIASES if b in arrays},
                       path=str(path), trained=record is not None and arrays["W_value"].shape == (d, d), record=record)


def load_rnn_weights(path: str, d: int) -> dict[str, np.ndarray]:
    """The RNN's W_hx (N, d), W_hh (N, N) and b_h (N,) from a .npz; refused, before reading,
    when they and the run's derivatives (rnn.working_bytes) cannot fit in memory."""

    def expect(shapes: dict[str, tuple]) -> dict[str, tuple]:
        W_hh = shapes["W_hh"]
        if len(W_hh) != 2 or not W_hh[0]:
            raise ProjectionError(f"{path}: W_hh has shape {W_hh}, not (N, N)")
        N = W_hh[0]  # as W_hh says: the others must agree
        if N > rnn.MOST_HIDDEN:
            raise ProjectionError(f"{path}: W_hh has shape {W_hh}, a hidden size of {N:,}, more than the "
                                  f"{rnn.MOST_HIDDEN:,} attncli runs")
        return {"W_hx": (N, d), "W_hh": (N, N), "b_h": (N,)}

    return read_arrays(path, ("W_hx", "W_hh", "b_h"), expect=expect, what="--weights",
                       working=lambda shapes: rnn.working_bytes(shapes["W_hh"][0], d),
                       hint="use weights of a smaller hidden size N")
