"""A model's weights at the cost of their bytes: its safetensors files (one, or the shards
an index names) read as their headers declare them, every declaration checked against the
file and every number checked finite at load, a block at a time on the stored bits; then
kept in their files as stored (BF16, F16, F32, F64), mapped while a tensor is read, and
widened into the pass's precision a layer at a time as the pass reads them (Weights).
The numbers are read here, at the offsets the checked header gives, rather than by the
safetensors library: its numpy reader has no bfloat16 (read_weights says more).
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import re
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli import attention
from attncli.errors import ModelError
from attncli.models import layers
from attncli.models.files import GROWTH, need, parse_json, read
from attncli.models.layers import Config, layer_of
from attncli.system import limits, reading

# safetensors' dtypes attncli reads: their layout in the file (little-endian) and the
# smallest numpy dtype that holds their numbers exactly. numpy has no bfloat16: a BF16
# number is a float32's upper 16 bits, so its 16 bits shifted up are that float32 (widen).
DTYPES = {"F32": ("<f4", np.float32), "F64": ("<f8", np.float64), "F16": ("<f2", np.float16),
          "BF16": ("<u2", np.float32)}
INDEX_MOST = 100_000_000  # bytes of a model.safetensors.index.json: SmolLM2-135M's is 24 kB
SHARD = re.compile(r"[A-Za-z0-9_.-]{1,200}\.safetensors")  # a shard's file name, in the model's folder
HEADER_MOST = 100_000_000  # bytes of a safetensors header: safetensors' own limit


def read_header(path: Path) -> tuple[dict, int, tuple[int, ...]]:
    """A safetensors file's header (tensor name -> dtype, shape, data_offsets) and where its
    data starts, each entry checked against the file's size, and its __metadata__ a map of
    strings to strings, as safetensors takes it; and the identity of the file the header
    was read from (identity), which the weights' maps hold it to."""
    need(path)
    with reading.open_regular(path, "--model") as f:
        st = os.fstat(f.fileno())  # the file read, whatever stands at its path by now
        head = f.read(8)
        if len(head) < 8:
            raise ModelError(f"{path}: too short to be a safetensors file")
        (n,) = struct.unpack("<Q", head)
        if n > min(HEADER_MOST, st.st_size - 8):
            raise ModelError(f"{path}: declares a header of {n:,} bytes in a file of {st.st_size:,}; "
                             "it is not a whole safetensors file")
        limits.require(n * GROWTH, f"the header of {path} ({limits.size(n)}, {GROWTH} times that once parsed)",
                       "give the model's own file, or free some memory")
        header = parse_json(f.read(n), path, "its header ", "a safetensors file")
    if not isinstance(header, dict):
        raise ModelError(f"{path}: its header is not a JSON object; it is not a safetensors file")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        raise ModelError(f"{path}: its header's __metadata__ is not a map of strings to strings; it is not a "
                         "safetensors file")
    data_size = st.st_size - 8 - n
    for name, entry in header.items():
        ok = (isinstance(entry, dict) and set(entry) == {"dtype", "shape", "data_offsets"}
              and isinstance(entry.get("dtype"), str) and isinstance(entry.get("shape"), list)
              and all(_whole(s) and s >= 0 for s in entry["shape"])
              and isinstance(entry.get("data_offsets"), list) and len(entry["data_offsets"]) == 2
              and all(_whole(o) for o in entry["data_offsets"]))
        if not ok:
            raise ModelError(f"{path}: the header's entry for {name!r} is not a tensor's (dtype, shape, data_offsets)")
        begin, end = entry["data_offsets"]
        itemsize = np.dtype(DTYPES[entry["dtype"]][0]).itemsize if entry.get("dtype") in DTYPES else None
        if not 0 <= begin <= end <= data_size or (itemsize and end - begin != math.prod(entry["shape"]) * itemsize):
            raise ModelError(f"{path}: the header puts {name!r} at bytes {begin:,} to {end:,}, which do not hold its "
                             f"shape {entry['shape']} within the file's {data_size:,} bytes of data")
    _check_layout(header, data_size, path)
    return header, 8 + n, identity(st)


def identity(st: os.stat_result) -> tuple[int, ...]:
    """What makes a file the one its header was checked in: its device and inode (another file
    renamed into its place is not), size and modification time (nor is one written over)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _check_layout(header: dict, data_size: int, path: Path) -> None:
    """The tensors' bytes one after another, in the order of their offsets, from the data's
    first byte to its last: no two tensors reading the same bytes, no bytes between them or
    after the last, as safetensors' own reader requires (its Metadata::validate; attncli
    reads the file itself, so it holds the same rules)."""
    at = 0
    for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin, end = entry["data_offsets"]
        if begin != at:
            what = "overlap the tensor before them" if begin < at else f"leave bytes {at:,} to {begin:,} unread"
            raise ModelError(f"{path}: the header puts {name!r} at bytes {begin:,} to {end:,}, which {what}; in a "
                             "safetensors file each tensor's bytes follow the one before: download the file again")
        at = end
    if at != data_size:
        raise ModelError(f"{path}: the header's tensors end at byte {at:,} of the file's {data_size:,} bytes of data; "
                         "in a safetensors file they cover the data exactly: download the file again")


def _whole(n) -> bool:
    """Whether a header's number is a whole number, as safetensors takes one: true and false are not."""
    return isinstance(n, int) and not isinstance(n, bool)


def weight_files(where: Path) -> list[Path]:
    """The folder's safetensors files: model.safetensors, or the shards its
    model.safetensors.index.json names (each a file of the folder). A checkpoint of
    pytorch_model.bin alone is refused: it is a pickle, which can run any code when read."""
    if os.path.lexists(where / "model.safetensors") or not os.path.lexists(where / "model.safetensors.index.json"):
        if not os.path.lexists(where / "model.safetensors"):
            for pickled in ("pytorch_model.bin", "pytorch_model.bin.index.json"):
                if os.path.lexists(where / pickled):
                    raise ModelError(f"{where}: holds its weights as {pickled} (a pickle, which can run any code "
                                     "when read, so attncli never reads one); convert it to model.safetensors, "
                                     "e.g. with transformers: AutoModel.from_pretrained(FOLDER).save_pretrained(NEW)")
        return [where / "model.safetensors"]
    path = where / "model.safetensors.index.json"
    index = parse_json(read(path, INDEX_MOST), path, "", "a model.safetensors.index.json")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelError(f"{path}: holds no weight_map (tensor names -> their files); it is not a safetensors index")
    # checked before they are gathered into a set: a list or an object is no file's name, nor hashable
    bad = next((f for f in weight_map.values() if not (isinstance(f, str) and SHARD.fullmatch(f) and ".." not in f)),
               None)
    if bad is not None:
        raise ModelError(f"{path}: names the file {bad!r} for its tensors, where a shard is a .safetensors file of "
                         "the model's folder")
    return [where / f for f in sorted(set(weight_map.values()))]


def read_headers(paths: list[Path], identities: dict | None = None) -> dict[str, tuple[Path, int, dict]]:
    """Every tensor of the safetensors files `paths`: name -> (its file, where the file's
    data starts, its header entry); a name in two files is refused. Each file's identity
    is put in `identities`, where given."""
    tensors = {}
    for path in paths:
        header, start, file = read_header(path)
        if identities is not None:
            identities[path] = file
        for name, entry in header.items():
            if name in tensors:
                raise ModelError(f"{path}: holds the tensor {name!r}, which {tensors[name][0].name} holds too; "
                                 "give the model's own files")
            tensors[name] = (path, start, entry)
    return tensors


def _wanted(tensors: dict, paths: list[Path], config: Config, family) -> dict[str, str]:
    """The tensors the forward pass reads (the family's expected_shapes), each checked for
    dtype and shape against config.json: their names -> their names in the files `paths`
    (the family's stored_name)."""
    wanted = {}
    for name, shape in family.expected_shapes(config).items():
        stored = family.stored_name(name, tensors)
        if stored is None:
            raise ModelError(f"{_where(paths)}: lacks the tensor {name}, which a {config.layers}-layer model needs")
        path, _, entry = tensors[stored]
        if entry["dtype"] not in DTYPES:
            raise ModelError(f"{path}: {stored} is {entry['dtype']}; attncli reads {', '.join(DTYPES)} tensors")
        if tuple(entry["shape"]) != shape:
            raise ModelError(f"{path}: {stored} has shape {tuple(entry['shape'])}, and config.json asks for {shape}")
        wanted[name] = stored
    return wanted


def _where(paths: list[Path]) -> str:
    """The weights' file, or their folder and how many files they are."""
    return str(paths[0]) if len(paths) == 1 else f"{paths[0].parent} (its {len(paths)} safetensors files)"


def read_weights(where: Path, config: Config, family, progress=None) -> Weights:
    """The tensors the family's forward pass reads, by their names there, each checked
    before it is mapped (_wanted), then every number of them checked finite (Weights.check,
    which tells progress(done, total) the bytes it has read), and what a pass holds of them
    widened to float64 (a layer's, or a small model's every layer's: layers.widened_held)
    checked against memory.

    The numbers are checked as the model loads, on their stored bits, rather than as a pass
    first widens them: a damaged file is named before any sentence meets it (and before a
    corpus's workers start), an embedding table or tied LM head whose rows a pass widens a
    few at a time is checked whole all the same, and the check costs one read of the files,
    which leaves them in the page cache for the passes.

    The numbers are the file's own bytes at the offsets the checked header gives, mapped
    rather than read by the safetensors library: its numpy reader has no bfloat16, the dtype
    of most Llama-family checkpoints, and the format is the header and the tensors' bytes,
    little-endian."""
    paths = weight_files(where)
    identities = {}
    tensors = read_headers(paths, identities)
    linear = getattr(family, "LINEAR_LAYOUT", False)
    weights = Weights({name: Stored.of(name, stored, *tensors[stored], linear=linear)
                       for name, stored in _wanted(tensors, paths, config, family).items()}, identities)
    held = layers.widened_held(family.expected_shapes, config)
    limits.require(held, f"the weights of {where.name} a pass holds widened ({limits.size(held)} of float64)",
                   "give a smaller model")
    weights.check(progress)
    return weights


@dataclass(frozen=True)
class Stored:
    """A tensor where its file holds it, as the checked header says: its file, its name
    there (`key`), its first byte, safetensors' dtype and its shape; whether it is a Linear
    layer's weight (out, in), widened laid out for the products (its transpose (in, out) in
    C order); and the layer whose pass reads it (None: the embeddings, a final norm, an LM
    head)."""

    path: Path
    key: str
    offset: int
    dtype: str
    shape: tuple[int, ...]
    linear: bool = False
    layer: int | None = None

    @classmethod
    def of(cls, name: str, key: str, path: Path, start: int, entry: dict, *, linear: bool = False) -> Stored:
        """The tensor the family names `name`, `key` in the file `path` whose data starts at
        `start`, at its header `entry`; `linear`: the family's Linear layers are laid out for
        the products (LINEAR_LAYOUT), its embeddings by rows all the same."""
        shape = tuple(entry["shape"])
        return cls(path, key, start + entry["data_offsets"][0], entry["dtype"], shape,
                   linear and len(shape) == 2 and "embed" not in name, layer_of(name))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(DTYPES[self.dtype][0]).itemsize


class _Held:
    """The widened tensors of one layer (None: of no layer) in one precision, by their
    Stored; and the layer's before, kept to be written over."""

    def __init__(self):
        self.layer, self.dtype, self.arrays, self.spare = None, None, {}, []

    def start(self, layer: int | None, dtype: np.dtype) -> None:
        """Hold `layer`'s tensors in `dtype` from now: the last ones are let go, or, from one
        layer to the next, kept as spares (every layer's tensors have the same shapes)."""
        self.spare = list(self.arrays.values()) if self.layer is not None and layer is not None else []
        self.layer, self.dtype, self.arrays = layer, dtype, {}

    def spare_for(self, shape: tuple[int, ...], dtype: np.dtype, order: str) -> np.ndarray | None:
        """A spare of this shape, dtype and layout that nothing else holds (a caller's
        reference, a view of it), to be written over: a new array of a layer's size costs
        its pages, which the kernel zeroes, about half what widening into it does. A spare
        another holds is let go."""
        fitting = [k for k, a in enumerate(self.spare) if a.shape == shape and a.dtype == dtype
                   and (a.flags.f_contiguous if order == "F" else a.flags.c_contiguous)]
        for k in reversed(fitting):  # from the last, so that the others' places stay
            a = self.spare.pop(k)
            if sys.getrefcount(a) == 2:  # `a` and getrefcount's argument: no one else's
                return a
        return None


class Weights(Mapping):
    """A model's weights by the names its family reads them by, kept where their files hold
    them, as stored: each file mapped into memory for as long as a tensor of it is read,
    never read into memory whole (`stored`: a tensor's numbers as the file holds them).

    weights[name] is the tensor widened into the pass's precision (attention.working():
    float64, or float32 where a run asks for it), laid out for its products, exactly (BF16
    through the float32 whose upper half it is); widened once, and kept while its layer
    runs, for a layer reads a tensor more than once (a product's weight, its bias, a norm),
    then let go as a tensor of another layer is asked for: a pass holds one layer's widened
    weights at a time, and its pages of the files only while it widens them. A small
    model's every layer, layers.HOLD bytes widened at most (layers.widened_held), is kept
    from one layer and one pass to the next, widened once a run. rows() widens the rows
    asked for alone (an embedding's pieces, an LM head a block at a time), never a table
    whole. Each file is held to the one whose header and numbers were checked
    (`identities`): a file changed since is refused, never mapped past its end."""

    def __init__(self, tensors: dict[str, Stored], identities: dict[Path, tuple[int, ...]]):
        self.tensors, self.identities = tensors, identities
        self.held = _Held()
        self.layered = sum(s.size for s in tensors.values() if s.layer is not None)  # every layer's numbers
        self.whole = False  # every layer kept widened, whatever its size (holding)

    @contextlib.contextmanager
    def holding(self):
        """Keep every tensor widened while the block runs, where memory holds them (else a
        layer at a time, as ever): a generation's steps each run one piece through every
        layer, and widening the whole model again for each piece would cost more than the
        piece's products. Let go after."""
        need = sum(s.size for s in self.tensors.values()) * attention.working().itemsize  # the head's rows too
        keep = need <= limits.available()
        self.whole = keep
        try:
            yield keep
        finally:
            self.whole = False
            self.held.start(None, None)

    def __getitem__(self, name: str) -> np.ndarray:
        s = self.tensors[name]
        dtype = attention.working()
        held = self.held
        every = self.whole or self.layered * dtype.itemsize <= layers.HOLD  # a small model's: every layer's kept
        if held.dtype != dtype or (held.layer != s.layer and not every):  # another layer's
            held.start(s.layer, dtype)
        arrays = held.arrays
        W = arrays.get(s)
        if W is None:
            order = "F" if s.linear else "C"
            W = held.spare_for(s.shape, dtype, order)
            if W is None:
                limits.require(s.size * dtype.itemsize, f"the tensor {s.key} of {s.path.name} widened to "
                               f"{dtype.name}", "give a smaller model, or free some memory")
                W = np.empty(s.shape, dtype=dtype, order=order)
            self.widen_into(name, self.stored(name), W)
            arrays[s] = W
        return W

    def __iter__(self):
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    def __contains__(self, name) -> bool:  # without widening it, as Mapping's own would
        return name in self.tensors

    def stored(self, name: str) -> np.ndarray:
        """The tensor `name` as its file holds it (safetensors' dtype, BF16 as uint16), in C
        order: a view of its bytes in the file, mapped into memory for as long as the view
        lasts, read from the disk (or the page cache) as it is touched."""
        return self._mapped(name)[1]

    def widen_into(self, name: str, raw: np.ndarray, out: np.ndarray) -> None:
        """Write `raw`, numbers of the tensor `name` as its file holds them, widened into `out`
        (a strip of rows at a time, in_strips)."""
        dtype = self.tensors[name].dtype
        in_strips(raw, out, lambda raw, out: widen(raw, dtype, out))

    def _mapped(self, name: str, dtype: str | None = None, count: int | None = None) -> tuple[mmap.mmap | None,
                                                                                            np.ndarray]:
        """The map of the file's bytes holding `name` (from a page at or before its first), and
        the tensor's view of them (of a tensor of no numbers, no map, an empty array): `count`
        items of `dtype` (its dtype's, its numbers, where not given), flat where given."""
        s = self.tensors[name]
        start = s.offset - s.offset % mmap.ALLOCATIONGRANULARITY  # where a map may begin
        with reading.open_regular(s.path, "--model") as f:
            st = os.fstat(f.fileno())
            if st.st_size < s.offset + s.nbytes:
                raise ModelError(f"{s.path}: ends inside the tensor {s.key}; the file was cut short: download it "
                                 "again")
            if identity(st) != self.identities[s.path]:
                raise ModelError(f"{s.path}: has changed since attncli checked it (another file, or written over); "
                                 "run again once the model's files are whole")
            if not s.nbytes:
                return None, np.empty(s.shape if count is None else (0,), dtype=dtype or DTYPES[s.dtype][0])
            try:
                held = mmap.mmap(f.fileno(), s.offset + s.nbytes - start, offset=start, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as e:  # no room for the map (ulimit -v)
                raise limits.ResourceError(f"{s.path}: its tensor {s.key} ({limits.size(s.nbytes)}) cannot be mapped "
                                           f"into memory: {getattr(e, 'strerror', None) or e}; free some memory, or "
                                           "raise the limit on it (ulimit -v)") from None
        view = np.frombuffer(held, dtype=dtype or DTYPES[s.dtype][0], count=s.size if count is None else count,
                             offset=s.offset - start)
        return held, view if count is not None else view.reshape(s.shape)

    def rows(self, name: str, index) -> np.ndarray:
        """Rows `index` of the tensor `name` (a row's number, a slice, or an array of them
        as numpy indexes a first axis), widened into the working precision as weights[name]
        would be, and nothing else of it."""
        s = self.tensors[name]
        if self.whole:  # every tensor kept widened (holding): the rows of the whole, widened once
            return self[name][index]
        raw = self.stored(name)[index]
        shape = (*raw.shape[:-1], s.shape[-1])  # a quantized tensor's rows are its blocks' bytes
        out = np.empty(shape, dtype=attention.working(), order="F" if s.linear and raw.ndim == 2 else "C")
        self.widen_into(name, raw, out)
        return out

    def check(self, progress=None) -> None:
        """Refuse a tensor that holds a number which is not finite (NaN, an infinity), by its
        name in the file: every number of every tensor, checked on its stored bits (a number
        whose exponent's bits are all ones is not finite), a block of them at a time, so
        that nothing of a tensor's size is made; file by file, in the order of their bytes.
        progress(done, total), where given, is told the bytes read. The pages read are given
        back once checked (MADV_DONTNEED, where the system has it): they stay in the page
        cache for the passes, and this process need not hold them. A tensor of a type not among
        SPECIAL's (a GGUF's quantized one) is checked as its numbers are made instead."""
        checked = {name: s for name, s in self.tensors.items() if s.dtype in SPECIAL}
        total, done = sum(s.nbytes for s in checked.values()), 0
        for name, s in sorted(checked.items(), key=lambda item: (str(item[1].path), item[1].offset)):
            held, view = self._mapped(name)
            unsigned, magnitude, infinity = SPECIAL[s.dtype]
            bits = view.reshape(-1).view(unsigned)  # (N,)
            block = np.empty(min(CHECK_BLOCK, bits.size), dtype=np.dtype(unsigned).newbyteorder("="))
            lead = s.offset % mmap.ALLOCATIONGRANULARITY  # the tensor's first byte in the map
            given_back = 0  # bytes of the map given back
            if held is not None and hasattr(mmap, "MADV_SEQUENTIAL"):
                held.madvise(mmap.MADV_SEQUENTIAL)
            for i in range(0, bits.size, CHECK_BLOCK):
                n = min(CHECK_BLOCK, bits.size - i)
                np.bitwise_and(bits[i:i + n], magnitude, out=block[:n])
                if block[:n].max() >= infinity:
                    raise ModelError(f"{s.path}: the tensor {s.key} holds NaN or infinite values; the model's file is "
                                     "damaged: download it again")
                done += n * bits.itemsize
                upto = (lead + (i + n) * bits.itemsize) // mmap.PAGESIZE * mmap.PAGESIZE
                if hasattr(mmap, "MADV_DONTNEED") and upto > given_back:
                    held.madvise(mmap.MADV_DONTNEED, given_back, upto - given_back)
                    given_back = upto
                if progress is not None:
                    progress(done, total)
            del bits, view, held  # the map closed


# Each dtype's numbers as unsigned integers of their width, the bits of a number's magnitude,
# and the magnitude of infinity: a number whose magnitude's bits are that or more (its
# exponent's bits all ones) is an infinity or NaN, whatever its sign
SPECIAL = {"BF16": ("<u2", np.uint16(0x7FFF), 0x7F80), "F16": ("<u2", np.uint16(0x7FFF), 0x7C00),
           "F32": ("<u4", np.uint32(0x7FFF_FFFF), 0x7F80_0000),
           "F64": ("<u8", np.uint64(0x7FFF_FFFF_FFFF_FFFF), 0x7FF0_0000_0000_0000)}
CHECK_BLOCK = 1 << 20  # numbers checked at a time
TILE = 256  # rows and columns widened at a time: a tile's numbers in each layout stay in the cache


STRIP = 256  # rows of a matrix widened at a time, each strip by one of the threads
_pool = None


def threads() -> int:
    """The threads that widen a matrix: the processors this process may run on, 4 at most."""
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def in_strips(raw: np.ndarray, out: np.ndarray, fill) -> None:
    """fill(raw rows, out rows) over strips of STRIP rows of the matrix `raw` (rows, ...) and
    `out`, the strips shared among threads(): widening a layer's matrices is a copy (and a
    dequantization) numpy does with the GIL let go, which a second processor halves (a 1B
    model's Q4_K layers: 1.7 times faster on two); each strip is its own rows of `out`, so the
    numbers are the same on any number of threads. A vector is filled at once."""
    global _pool
    if raw.ndim < 2 or raw.shape[0] <= STRIP or threads() == 1:
        fill(raw, out)
        return
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor  # only a model's weights need it

        _pool = ThreadPoolExecutor(max_workers=threads(), thread_name_prefix="attncli-widen")
    try:
        done = [_pool.submit(fill, raw[r:r + STRIP], out[r:r + STRIP]) for r in range(0, raw.shape[0], STRIP)]
    except RuntimeError:  # no thread could start (ulimit -v leaves no room for its stack): this one does it all
        fill(raw, out)
        return
    for strip in done:
        strip.result()  # a strip's error (a NaN dequantized) raised here, as one thread's would be


def widen(raw: np.ndarray, stored: str, out: np.ndarray) -> None:
    """Write `raw`, numbers as the file holds them (safetensors' dtype `stored`; BF16 as the
    upper halves of float32s, uint16), into `out` of the same shape, a float dtype and any
    layout: exactly, BF16 as the float32 whose upper half it is. A tile at a time, so that a
    matrix written into its transpose's layout (a Linear layer's) is read and written within
    the cache, and BF16's float32 bits are made a tile at a time."""
    if raw.ndim != 2:  # a vector, a row, a batch's rows: C order (only a matrix is laid out otherwise)
        last = raw.shape[-1] if raw.ndim else 1
        raw, out = raw.reshape(-1, last), out.reshape(-1, last)
    rows, columns = raw.shape
    bits = np.empty((min(TILE, rows), min(TILE, columns)), dtype=np.uint32) if stored == "BF16" else None
    for r in range(0, rows, TILE):
        for c in range(0, columns, TILE):
            tile = raw[r:r + TILE, c:c + TILE]
            if bits is not None:
                upper = bits[:tile.shape[0], :tile.shape[1]]
                np.copyto(upper, tile)
                upper <<= 16
                tile = upper.view(np.float32)
            out[r:r + TILE, c:c + TILE] = tile
