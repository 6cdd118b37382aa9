"""A model in one GGUF file, as llama.cpp, ollama and LM Studio run it: its header read and
checked, its metadata turned into the config.json its family reads (the family's
gguf_config), its tensors found under llama.cpp's names (tensor_name) and kept
in the file, each dequantized when its layer runs (Quantized, GGUFWeights), never the whole
model at once.

The format (GGUF version 2 or 3, little-endian, as gguf-py's constants name its parts):

    "GGUF"  version u32  tensor_count u64  kv_count u64
    kv_count times:      key (u64 length, UTF-8)  value type u32  value
    tensor_count times:  name  n_dims u32  dims u64 x n_dims (innermost first)  type u32
                         offset u64 (from the start of the data, a multiple of the alignment)
    the data, from the first multiple of general.alignment (32) after the tensor infos

A value is a number (u8 ... f64, a bool), a string (u64 length, UTF-8), or an array (item
type u32, count u64, its items). A tensor of ggml type t holds, for each row of its
innermost dimension, row / block_size blocks of type_size bytes (gguf's GGML_QUANT_SIZES):
F32, F16 and BF16 are blocks of one number; Q8_0 32 numbers in 34 bytes, Q4_K 256 in 144.

The header is read here, every length and count checked against the bytes after it and
the memory this run has before anything of that size is made, rather than by gguf-py's
GGUFReader: that reader makes a numpy array of every string of the vocabulary (8.7 s and
677 MB for a Llama 3 vocabulary's 128,256 pieces and 280,000 merges, an 8.8 MB header) and
follows a count it reads without holding it to the file. gguf-py's own code is what
dequantizes (gguf.quants.dequantize, llama.cpp's reference in numpy), and its constants
name the types.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli.errors import ModelError
from attncli.models import layers
from attncli.models import weights as stored_weights
from attncli.models.layers import Config, layer_of
from attncli.system import limits, reading

MAGIC = b"GGUF"
VERSIONS = (2, 3)
INSTALL = "pip install gguf"  # the gguf extra's: llama.cpp's gguf-py
# GGUF's value types: each number's struct format
NUMBERS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
KEYS_MOST = 1 << 16  # metadata keys: a model's file has about 40
TENSORS_MOST = 1 << 16  # tensors: a 128-layer model's are about 1,200
NAME_MOST = 1 << 10  # bytes of a key or a tensor's name (llama.cpp's GGML_MAX_NAME is 64)
DIMS_MOST = 4  # ggml's GGML_MAX_DIMS
STRING_COST = 96  # bytes of memory a string of an array takes beyond its own: a str object and its slot
FLOATS = {"F32": "F32", "F16": "F16", "BF16": "BF16", "F64": "F64"}  # ggml's float types: weights.py's dtypes
ROWS = 256  # rows dequantized at a time: a Q4_K row of 8,192 numbers is 32 kB of float32


@dataclass(frozen=True)
class Tensor:
    """A tensor as the header declares it: its ggml type's name (F32, Q4_K ...), its shape in
    numpy's order (outermost first: a Linear layer's (out, in), as safetensors holds it), and
    where its bytes are in the file."""

    name: str
    kind: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


@dataclass(frozen=True)
class Header:
    """A GGUF file's metadata (key -> a number, a string, a list of strings or a numpy array)
    and its tensors by name."""

    path: Path
    metadata: dict
    tensors: dict[str, Tensor]
    identity: tuple[int, ...] = ()  # the file's as its header was read (weights.identity): a file changed since is refused

    def get(self, key: str, default=None):
        return self.metadata.get(key, default)

    def need(self, *keys: str) -> None:
        """Refuse a file whose metadata lacks one of `keys` (the architecture's, after "ARCH."),
        in GGUF's own words, before its config is made of them."""
        arch = self.architecture
        missing = [f"{arch}.{key}" for key in keys if f"{arch}.{key}" not in self.metadata]
        if missing:
            raise ModelError(f"{self.path}: lacks {', '.join(missing)}, which a {arch} model's GGUF declares; the file "
                             "is damaged or was not written by llama.cpp's converter")

    @property
    def architecture(self) -> str:
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str):
            raise ModelError(f"{self.path}: lacks general.architecture, which every GGUF model file names; it is not "
                             "a model's GGUF file")
        return arch

    def quantization(self) -> dict:
        """The ggml types of its tensors: the most common among the matrices (the file's
        quantization, as llama.cpp's Q4_K_M is mostly Q4_K), and how many tensors are of
        each type."""
        counts: dict[str, int] = {}
        for t in self.tensors.values():
            counts[t.kind] = counts.get(t.kind, 0) + 1
        matrices: dict[str, int] = {}
        for t in self.tensors.values():
            if len(t.shape) == 2:
                matrices[t.kind] = matrices.get(t.kind, 0) + math.prod(t.shape)
        main = max(sorted(matrices), key=matrices.get, default=next(iter(counts), "F32"))
        found = {"type": main, "tensors": dict(sorted(counts.items()))}
        file_type = _file_type(self.metadata.get("general.file_type"))
        return {**found, "file_type": file_type} if file_type else found


def _file_type(value) -> str | None:
    """general.file_type's name, as llama.cpp's quantize calls it (15: Q4_K_M), or None where
    it gives none gguf-py knows."""
    gguf = need_gguf()
    try:
        return gguf.LlamaFileType(value).name.removeprefix("MOSTLY_").removeprefix("ALL_") if isinstance(value, int) else None
    except ValueError:
        return None


def is_gguf(path: Path) -> bool:
    """Whether the regular file `path` begins with GGUF's magic (a file of any name)."""
    try:
        with reading.open_regular(path, "--model") as f:
            return f.read(4) == MAGIC
    except (OSError, limits.ResourceError):
        return False


def need_gguf():
    """gguf-py's package, or the line that says how to install it."""
    try:
        import gguf
        import gguf.quants  # noqa: F401: dequantize
    except ImportError:
        raise ModelError(f"a GGUF model needs the gguf package (llama.cpp's gguf-py), which is not installed; install "
                         f"it with: {INSTALL}") from None
    return gguf


class _Cursor:
    """Reads the header from the file's bytes (`data`, mapped), each read held to its end."""

    def __init__(self, data, path: Path):
        self.data, self.path, self.at = data, path, 0

    def take(self, n: int, what: str) -> int:
        """The offset of the next `n` bytes, refused where the file ends before them."""
        if n < 0 or self.at + n > len(self.data):
            raise ModelError(f"{self.path}: ends inside its header ({what} at byte {self.at:,} declares {n:,} bytes, "
                             f"and the file holds {len(self.data):,}); the file was cut short or is not GGUF: "
                             "download it again")
        at, self.at = self.at, self.at + n
        return at

    def number(self, fmt: str, what: str):
        return struct.unpack_from(fmt, self.data, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what: str, most: int | None = None) -> str:
        n = self.number("<Q", what)
        if most is not None and n > most:
            raise ModelError(f"{self.path}: {what} is {n:,} bytes long, more than {most:,}; the file is not a model's "
                             "GGUF")
        at = self.take(n, what)
        try:
            return bytes(self.data[at:at + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise ModelError(f"{self.path}: {what} is not UTF-8 text; the file is damaged or is not GGUF") from None

    def value(self, kind: int, key: str):
        if kind in NUMBERS:
            return self.number(NUMBERS[kind], key)
        if kind == STRING:
            return self.string(f"the value of {key}")
        if kind != ARRAY:
            raise ModelError(f"{self.path}: {key} is of value type {kind}, which GGUF does not define")
        item, n = self.number("<I", key), self.number("<Q", key)
        left = len(self.data) - self.at
        if item in NUMBERS:
            size = struct.calcsize(NUMBERS[item])
            at = self.take(n * size, f"the array {key}")
            limits.require(n * size, f"{self.path}'s array {key} ({n:,} numbers)", "give a model's own GGUF file")
            return np.frombuffer(self.data, dtype=NUMBERS[item], count=n, offset=at).copy()
        if item != STRING:
            raise ModelError(f"{self.path}: {key} is an array of value type {item}; attncli reads arrays of numbers "
                             "and of strings, as a model's GGUF holds")
        if n * 8 > left:  # each string takes its 8-byte length at the least
            self.take(n * 8, f"the array {key}")
        limits.require(n * STRING_COST, f"{self.path}'s array {key} ({n:,} strings)",
                       "give a model's own GGUF file, or free some memory")
        return [self.string(f"an item of {key}") for _ in range(n)]


def read_header(path: Path) -> Header:
    """The header of the GGUF file `path`: its metadata and its tensors, each tensor's bytes
    held within the file and apart from every other's."""
    gguf = need_gguf()
    with reading.open_regular(path, "--model") as f:
        st = os.fstat(f.fileno())
        size = st.st_size
        if size < 24:
            raise ModelError(f"{path}: is {size} bytes long, too short for a GGUF file's header")
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            raise limits.ResourceError(f"{path}: cannot be mapped into memory: {getattr(e, 'strerror', None) or e}; "
                                       "free some memory, or raise the limit on it (ulimit -v)") from None
    with data:
        cursor = _Cursor(data, path)
        if bytes(data[:4]) != MAGIC:
            raise ModelError(f"{path}: does not begin with GGUF's magic; it is not a GGUF file")
        cursor.take(4, "the magic")
        version = cursor.number("<I", "the version")
        if version not in VERSIONS:
            raise ModelError(f"{path}: is GGUF version {version}; attncli reads versions 2 and 3 (a file llama.cpp "
                             "wrote since 2023)")
        n_tensors, n_keys = cursor.number("<Q", "the tensor count"), cursor.number("<Q", "the key count")
        if n_tensors > TENSORS_MOST or n_keys > KEYS_MOST:
            raise ModelError(f"{path}: declares {n_tensors:,} tensors and {n_keys:,} keys, more than a model's GGUF "
                             f"holds ({TENSORS_MOST:,} and {KEYS_MOST:,} at most)")
        metadata = {}
        for _ in range(n_keys):
            key = cursor.string("a key", NAME_MOST)
            if key in metadata:
                raise ModelError(f"{path}: gives the key {key!r} twice; the file is damaged")
            metadata[key] = cursor.value(cursor.number("<I", key), key)
        infos = [_tensor_info(cursor, gguf) for _ in range(n_tensors)]
        alignment = metadata.get("general.alignment", 32)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1) or alignment > 1 << 20:
            raise ModelError(f"{path}: general.alignment is {alignment!r}; it must be a power of two")
        start = -(-cursor.at // alignment) * alignment
    return Header(path, metadata, _placed(infos, start, alignment, size, path), stored_weights.identity(st))


def _tensor_info(cursor: _Cursor, gguf) -> tuple[str, str, tuple[int, ...], int, int]:
    """(name, ggml type, numpy shape, offset, bytes) of the next tensor's info."""
    name = cursor.string("a tensor's name", NAME_MOST)
    n_dims = cursor.number("<I", name)
    if not 1 <= n_dims <= DIMS_MOST:
        raise ModelError(f"{cursor.path}: the tensor {name} has {n_dims} dimensions; ggml's have 1 to {DIMS_MOST}")
    dims = [cursor.number("<Q", name) for _ in range(n_dims)]
    raw = cursor.number("<I", name)
    offset = cursor.number("<Q", name)
    try:
        kind = gguf.GGMLQuantizationType(raw)
        block, type_size = gguf.GGML_QUANT_SIZES[kind]
    except (ValueError, KeyError):
        raise ModelError(f"{cursor.path}: the tensor {name} is of ggml type {raw}, which gguf-py does not know; a newer "
                         "gguf package may (pip install -U gguf)") from None
    if not all(1 <= d < 1 << 40 for d in dims) or math.prod(dims) >= 1 << 42:
        raise ModelError(f"{cursor.path}: the tensor {name} has dimensions {dims}; each must be a whole number from "
                         "1, and all of them a size a file can hold")
    if dims[0] % block:
        raise ModelError(f"{cursor.path}: the tensor {name}'s rows are {dims[0]:,} numbers, not a whole number of "
                         f"{kind.name}'s blocks of {block}")
    nbytes = math.prod(dims) // block * type_size
    return name, kind.name, tuple(reversed(dims)), offset, nbytes


def _placed(infos: list, start: int, alignment: int, size: int, path: Path) -> dict[str, Tensor]:
    """The tensors by name, each found within the file (from `start`, the data's first
    byte), aligned, and overlapping no other."""
    tensors, end = {}, start
    for name, kind, shape, offset, nbytes in sorted(infos, key=lambda info: info[3]):
        if name in tensors:
            raise ModelError(f"{path}: holds two tensors named {name}; the file is damaged")
        if offset % alignment or start + offset < end:
            raise ModelError(f"{path}: the tensor {name}'s data (at {offset:,}) is not aligned to {alignment} bytes or "
                             "overlaps another's; the file is damaged")
        end = start + offset + nbytes
        if end > size:
            raise ModelError(f"{path}: ends inside the tensor {name} ({size:,} bytes, and it ends at {end:,}); the file "
                             "was cut short: download it again")
        tensors[name] = Tensor(name, kind, shape, start + offset, nbytes)
    return tensors


# --- the weights


@dataclass(frozen=True)
class Quantized(stored_weights.Stored):
    """A tensor of a GGUF file in a quantized ggml type (Q8_0, Q4_K ...), its rows blocks of
    `row_bytes` bytes; or, as any of the file's tensors, one llama.cpp's converter laid out
    for its own RoPE (`heads`: a query or key projection whose rows it permuted, head by head,
    from the rotate-half pairing to interleaved pairs; 0 for any other)."""

    row_bytes: int = 0
    heads: int = 0
    transposed: bool = False  # stored (out, in) for a family that reads it (in, out): GPT-2's Conv1D weights

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """Its shape in the file, numpy's order: the family's, or its transpose."""
        return self.shape[::-1] if self.transposed else self.shape

    @property
    def nbytes(self) -> int:
        if self.dtype in FLOATS:
            return super().nbytes
        return math.prod(self.stored_shape[:-1]) * self.row_bytes


def unpermuted(rows: int, heads: int) -> np.ndarray:
    """Which stored row each of a RoPE projection's `rows` rows is, after llama.cpp's
    converter (LlamaModel.permute in convert_hf_to_gguf.py) permuted them per head from
    pairs (i, i + d/2) to pairs (2i, 2i + 1): transformers' reverse_permute_weights as an
    index, W_hf = W_gguf[unpermuted(...)]. (rows,)"""
    half = rows // heads // 2
    stored = np.arange(rows).reshape(heads, half, 2)  # the converter's rows: head, i, which of the pair
    return stored.swapaxes(1, 2).reshape(rows)  # head, which of the pair, i: transformers' order


class GGUFWeights(stored_weights.Weights):
    """weights.Weights over a GGUF file's tensors: a float tensor widened as a safetensors
    file's is, a quantized one dequantized by gguf-py a block of ROWS rows at a time into
    the working precision (its numbers checked finite as they are made, for the file holds
    them only as blocks' scales and codes), and a RoPE projection's rows put back in
    transformers' order."""

    def _mapped(self, name: str):
        """The tensor's bytes as the file lays them out: a float tensor's numbers in its shape
        there, a quantized one's rows of blocks (rows, row_bytes)."""
        s = self.tensors[name]
        if s.dtype in FLOATS:
            held, view = super()._mapped(name, dtype=stored_weights.DTYPES[s.dtype][0], count=s.size)
            return held, view.reshape(s.stored_shape)
        held, view = super()._mapped(name, dtype="<u1", count=s.nbytes)
        return held, view.reshape(*s.stored_shape[:-1], s.row_bytes)

    def widen_into(self, name: str, raw: np.ndarray, out: np.ndarray) -> None:
        s = self.tensors[name]
        if s.heads:  # the stored rows put back in transformers' order before they are widened
            raw = raw[unpermuted(s.stored_shape[0], s.heads)]
        into = out.T if s.transposed else out  # a view of `out` in the file's layout
        if s.dtype in FLOATS:
            stored_weights.in_strips(raw, into, lambda raw, out: stored_weights.widen(raw, s.dtype, out))
        else:
            stored_weights.in_strips(raw, into, lambda raw, out: dequantize(raw, s, out))


def dequantizer(kind: str):
    """gguf-py's dequantizer of the ggml type `kind`: its class in gguf.quants (Q4_K ...),
    whose dequantize_rows takes rows of blocks (R, row_bytes) to (R, numbers) float32 (the
    rows at once, where gguf.quants.dequantize would go 16 rows at a time); None for a type
    gguf-py cannot dequantize."""
    gguf = need_gguf()
    found = getattr(gguf.quants, kind, None)
    if found is None or not hasattr(found, "dequantize_rows"):
        return None
    found.init_grid()  # the IQ types' tables, made once
    return found.dequantize_rows


def dequantize(raw: np.ndarray, s: Quantized, out: np.ndarray) -> None:
    """The quantized rows `raw` (..., row_bytes) of the tensor `s`, dequantized by gguf-py
    into `out` (..., its numbers a row) a block of ROWS rows at a time, each block checked
    finite (a scale of infinity or NaN in the file) and written into `out` a tile at a time
    (weights.widen: `out` may be laid out for the products, its transpose's layout)."""
    rows = dequantizer(s.dtype)
    flat_raw, flat_out = raw.reshape(-1, raw.shape[-1]), out.reshape(-1, out.shape[-1])
    for r in range(0, flat_raw.shape[0], ROWS):
        with np.errstate(all="ignore"):  # a scale of NaN makes NaNs: refused just below, by name
            block = rows(np.ascontiguousarray(flat_raw[r:r + ROWS]))  # (R, n) float32
        if not np.isfinite(block).all():
            raise ModelError(f"{s.path}: the tensor {s.key} holds NaN or infinite values once dequantized; the "
                             "model's file is damaged: download it again")
        stored_weights.widen(block, "F32", flat_out[r:r + ROWS])


def readable(t: Tensor, path: Path) -> None:
    """Refuse a tensor of a type gguf-py cannot dequantize (an integer type, a type only
    llama.cpp's C code reads)."""
    if t.kind not in FLOATS and dequantizer(t.kind) is None:
        raise ModelError(f"{path}: the tensor {t.name} is of type {t.kind}, which gguf-py cannot dequantize; attncli "
                         "reads F32, F16, BF16 and the quantized types gguf-py reads (Q4_0 ... Q8_0, Q2_K ... Q6_K, "
                         "the IQ types)")


def tensor_name(family, name: str) -> str:
    """The name llama.cpp gives the tensor a family names `name`, by the family's GGUF_NAMES:
    layers.3.self_attn.q_proj.weight (a layer's, under the family's GGUF_LAYERS) is
    blk.3.attn_q.weight, embed_tokens.weight token_embd.weight."""
    stem, kind = name.rsplit(".", 1)
    if stem.startswith(f"{family.GGUF_LAYERS}."):
        _, l, part = stem.split(".", 2)
        return f"blk.{l}.{family.GGUF_NAMES[part]}.{kind}"
    return f"{family.GGUF_NAMES[stem]}.{kind}"


def read_weights(header: Header, config: Config, family) -> GGUFWeights:
    """The tensors the family's forward pass reads, found by their names in the GGUF
    (tensor_name), each checked for shape against the config the metadata made; the
    float ones' numbers checked finite now, as a safetensors file's are."""
    path = header.path
    wanted = {}
    for name, shape in family.expected_shapes(config).items():
        key = tensor_name(family, name)
        t = header.tensors.get(key)
        if t is None:
            raise ModelError(f"{path}: lacks the tensor {key}, which a {config.layers}-layer {header.architecture} "
                             "model needs")
        transposed = family.gguf_transposed(name)
        if t.shape != (shape[::-1] if transposed else shape):
            raise ModelError(f"{path}: {key} has shape {t.shape}, and its metadata asks for "
                             f"{shape[::-1] if transposed else shape}")
        readable(t, path)
        row_bytes = t.nbytes // max(1, math.prod(t.shape[:-1]))
        wanted[name] = Quantized(path, key, t.offset, FLOATS.get(t.kind, t.kind), shape,
                                 getattr(family, "LINEAR_LAYOUT", False) and len(shape) == 2 and "embed" not in name,
                                 layer_of(name), row_bytes, family.gguf_permuted(name, config, header.architecture),
                                 transposed)
    weights = GGUFWeights(wanted, {path: header.identity})
    held = layers.widened_held(family.expected_shapes, config)
    limits.require(held, f"the weights of {path.name} a pass holds dequantized ({limits.size(held)} of float64)",
                   "give a smaller model")
    weights.check()
    return weights
