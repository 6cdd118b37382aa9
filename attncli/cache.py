"""Vectors entries on disk: the bundled GloVe vectors, and the cache of converted sources.

An entry is a few files sharing one path prefix, none of them a pickle:

    PREFIX.npy          (V, d) float32 matrix, memory-mapped when read
    PREFIX.words.txt    the words, one a line, UTF-8, in row order
    PREFIX.offsets.npy  (V + 1,) int64: where each row's word starts in words.txt
    PREFIX.order.npy    (V,) int64: the rows sorted by word, for binary search
    PREFIX.ngrams.npy   (buckets, d) float32: fastText's subword vectors (fastText only)
    PREFIX.json         metadata: name, words, dim, cased, source, options, files

The bundled entry is embeddings/glove.6B.50d.100k.*, installed as the package
attncli.embeddings. Cache entries live in ATTNCLI_CACHE_DIR, or else the platform's user
cache directory, one folder each, written under a temporary name and renamed into place
so that no reader ever sees half an entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from importlib.resources import files
from pathlib import Path

import numpy as np

from attncli import __version__
from attncli.errors import VectorsError
from attncli.vectors import Subwords, Vectors, Vocabulary

FORMAT = "attncli-vectors"
FORMAT_VERSION = 1
BUNDLED = "glove.6B.50d.100k"
SUFFIXES = (".npy", ".words.txt", ".offsets.npy", ".order.npy")


class DamagedEntry(VectorsError):
    """A cache entry whose files are missing, truncated or changed since they were written."""


def bundled_prefix() -> Path:
    # A regular or editable install keeps package data as plain files, which can be memory-mapped.
    return Path(str(files("attncli.embeddings") / BUNDLED))


def cache_dir() -> Path:
    """ATTNCLI_CACHE_DIR, or the platform's user cache directory for attncli."""
    if os.environ.get("ATTNCLI_CACHE_DIR"):
        return Path(os.environ["ATTNCLI_CACHE_DIR"])
    import platformdirs  # only runs that use a cache pay for it

    return Path(platformdirs.user_cache_dir("attncli"))


def entry_dir(source: Path, stat: os.stat_result, options: dict) -> Path:
    """The folder of a source's entry. Its name covers everything that changes the vectors:
    the file (path, size, modification time), the options, the entry format."""
    identity = json.dumps(
        {"path": str(source.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
         "options": options, "format": FORMAT_VERSION},
        sort_keys=True,
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:20]
    return cache_dir() / f"{source.name[:80]}-{digest}"  # a file name can be longer than a folder name may


def _suffixes(meta: dict) -> list[str]:
    return list(SUFFIXES) + ([".ngrams.npy"] if meta.get("subwords") else [])


def write_entry(prefix: Path, vectors: Vectors, meta: dict, *, mtimes: bool = False) -> dict:
    """Write `vectors` as the files of an entry at `prefix`; returns the metadata written.

    With `mtimes`, the metadata records each file's modification time too, so that a file
    edited by hand later is noticed even when its size stays the same. (The bundled entry
    does not: a git checkout sets its own times.)"""
    vocab = vectors.vocab
    np.save(f"{prefix}.npy", np.ascontiguousarray(vectors.matrix, dtype=np.float32), allow_pickle=False)
    Path(f"{prefix}.words.txt").write_bytes(bytes(vocab.blob))
    np.save(f"{prefix}.offsets.npy", np.asarray(vocab.offsets, dtype=np.int64), allow_pickle=False)
    np.save(f"{prefix}.order.npy", np.asarray(vocab.order, dtype=np.int64), allow_pickle=False)
    meta = {
        "format": FORMAT, "version": FORMAT_VERSION, "name": vectors.name, "words": vectors.size,
        "dim": vectors.dim, "cased": vectors.cased, **meta,
    }
    if vectors.subwords is not None:
        np.save(f"{prefix}.ngrams.npy", np.ascontiguousarray(vectors.subwords.matrix, dtype=np.float32), allow_pickle=False)
        meta["subwords"] = {"min_n": vectors.subwords.min_n, "max_n": vectors.subwords.max_n,
                            "buckets": len(vectors.subwords.matrix)}
    meta["files"] = {s: os.stat(f"{prefix}{s}").st_size for s in _suffixes(meta)}
    if mtimes:
        meta["mtimes"] = {s: os.stat(f"{prefix}{s}").st_mtime_ns for s in _suffixes(meta)}
    Path(f"{prefix}.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return meta


def read_entry(prefix: Path, source: str) -> Vectors:
    """The vectors of the entry at `prefix`, memory-mapped; DamagedEntry when its files do not
    match what its metadata says."""
    try:
        meta = json.loads(Path(f"{prefix}.json").read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION:
            raise DamagedEntry(f"{prefix}.json: not an entry of this attncli version")
        for suffix, size in meta["files"].items():
            actual = os.stat(f"{prefix}{suffix}").st_size
            if actual != size:
                raise DamagedEntry(f"{prefix}{suffix} holds {actual} bytes, not the {size} it was written with")
        for suffix, mtime in meta.get("mtimes", {}).items():
            if os.stat(f"{prefix}{suffix}").st_mtime_ns != mtime:
                raise DamagedEntry(f"{prefix}{suffix} was changed after it was written")
        V, d = meta["words"], meta["dim"]
        matrix = _load_array(f"{prefix}.npy", (V, d), np.float32)
        # the index as plain ndarrays over the same mapped pages: a np.memmap indexed one value
        # at a time, as a binary search does, takes a much slower path
        offsets = _load_array(f"{prefix}.offsets.npy", (V + 1,), np.int64).view(np.ndarray)
        order = _load_array(f"{prefix}.order.npy", (V,), np.int64).view(np.ndarray)
        blob = (np.memmap(f"{prefix}.words.txt", dtype=np.uint8, mode="r").view(np.ndarray)
                if meta["files"][".words.txt"] else b"")
        # cheap checks only: a load must not read the whole index (sizes and times cover the rest)
        if V and (offsets[0] != 0 or offsets[-1] != len(blob) or not 0 <= order[0] < V or not 0 <= order[-1] < V):
            raise DamagedEntry(f"{prefix}.offsets.npy or .order.npy does not fit {prefix}.words.txt")
        subwords = None
        if meta.get("subwords"):
            s = meta["subwords"]
            subwords = Subwords(_load_array(f"{prefix}.ngrams.npy", (s["buckets"], d), np.float32), s["min_n"], s["max_n"])
    except DamagedEntry:
        raise
    except Exception as e:  # noqa: BLE001: numpy's readers raise many kinds on damaged files; all mean the same
        raise DamagedEntry(f"{prefix}: {type(e).__name__}: {e}") from e
    if not isinstance(meta.get("name"), str) or not isinstance(meta.get("cased"), bool):
        raise DamagedEntry(f"{prefix}.json: no name or case")
    meta["entry"] = str(prefix)
    return Vectors(meta["name"], Vocabulary(blob, offsets, order), matrix, meta["cased"], source, subwords, meta)


def _load_array(path: str, shape: tuple, dtype) -> np.ndarray:
    with warnings.catch_warnings():  # numpy parses a damaged header as Python and may warn of it
        warnings.simplefilter("ignore", SyntaxWarning)
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    if array.shape != shape or array.dtype != dtype:
        raise DamagedEntry(f"{path} holds a {array.dtype} array of shape {array.shape}, not {np.dtype(dtype)} {shape}")
    return array


def read_bundled() -> Vectors:
    return read_entry(bundled_prefix(), "bundled")


def read_cached(folder: Path, source: str) -> Vectors | None:
    """The cached vectors in `folder`, None when there is no entry. A damaged entry raises
    DamagedEntry; remove_entry then lets it be converted again."""
    if not folder.exists():
        return None
    if not (folder / "vectors.json").exists():  # entries are renamed into place whole: this one was tampered with
        raise DamagedEntry(f"{folder} has no vectors.json")
    return read_entry(folder / "vectors", source)


def store(folder: Path, vectors: Vectors, meta: dict) -> Path:
    """Write an entry under a temporary name beside `folder`, then rename it into place.

    Two processes converting the same source both succeed: the second rename finds the
    folder there, and that process keeps the first one's entry. Raises OSError when the
    cache directory cannot be written.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    try:
        write_entry(temporary / "vectors", vectors, {**meta, "created_by": f"attncli {__version__}",
                                                     "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                    mtimes=True)
        try:
            os.rename(temporary, folder)
        except OSError:
            if not (folder / "vectors.json").exists():
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return folder


def remove_entry(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def entries() -> list[dict]:
    """Every cache entry: its folder, metadata and size on disk, the newest first."""
    found = []
    root = cache_dir()
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        meta_file = folder / "vectors.json"
        if folder.name.startswith(".tmp-") or not meta_file.is_file():
            continue
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
        found.append({"path": str(folder), "bytes": size, **meta})
    return sorted(found, key=lambda e: e.get("created", ""), reverse=True)


def clear() -> tuple[int, int]:
    """Remove every cache entry (and any temporary folder left by an interrupted run);
    returns (entries removed, bytes freed)."""
    root = cache_dir()
    count = freed = 0
    for folder in root.iterdir() if root.is_dir() else []:
        if folder.is_dir() and ((folder / "vectors.json").exists() or folder.name.startswith(".tmp-")):
            freed += sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
            count += not folder.name.startswith(".tmp-")
            shutil.rmtree(folder, ignore_errors=True)
    return count, freed
