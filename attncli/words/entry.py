"""A vectors entry: the files that hold one set of word vectors, written and read whole,
and the bundled GloVe vectors, an entry of their own that is only read.

An entry is a few files sharing one path prefix, none of them a pickle:

    PREFIX.npy          (V, d) float32 matrix, memory-mapped when read
    PREFIX.words.txt    the words, one a line, UTF-8, in row order
    PREFIX.offsets.npy  (V + 1,) int64: where each row's word starts in words.txt
    PREFIX.order.npy    (V,) int64: the rows sorted by word, for binary search
    PREFIX.ngrams.npy   (buckets, d) float32: fastText's subword vectors (fastText only)
    PREFIX.json         metadata: name, words, dim, cased, source, options, files, checksums

The bundled entry is embeddings/glove.6B.50d.100k.*, installed as the package
attncli.embeddings (format version 1, no checksums in its metadata: the SHA-256s of its
files are committed beside them, in glove.6B.50d.100k.sha256). Cache entries, each in a
folder of the cache directory, are cache.py's.

Every array is checked for dtype, shape and range before it is used; a cache entry's
metadata also holds the sizes and modification times of its files and CRC-32 checksums of
words.txt, offsets.npy, order.npy, the .npy headers and the metadata itself, all verified
at each load, and the SHA-256 of each file, which only `vectors verify` checks (it reads
the whole matrix). A damaged entry raises DamagedEntry (load.py converts the source
again); an entry that is fine but cannot be read now (too many open files, no memory, no
permission) raises EntryUnreadable and is left as it is.
"""

from __future__ import annotations

import importlib.util
import io
import json
# numpy's memmap imports mmap when first used: imported here, a run short of descriptors fails
# on an entry's file, and says so, not on mmap's shared object
import mmap  # noqa: F401
import os
import stat
import zlib
from pathlib import Path

import numpy as np

from attncli.errors import VectorsError
from attncli.system import limits, reading
from attncli.system.limits import ResourceError
from attncli.words import npyfile
from attncli.words.vectors import Subwords, Vectors, Vocabulary

FORMAT = "attncli-vectors"
FORMAT_VERSION = 2  # 2: a marker in each folder, and checksums verified at each load
BUNDLED_VERSION = 1  # the bundled entry's format, as committed
BUNDLED = "glove.6B.50d.100k"
SUFFIXES = (".npy", ".words.txt", ".offsets.npy", ".order.npy")
NGRAMS = ".ngrams.npy"
CHECKSUM = "crc32"
WHOLE = (".words.txt", ".offsets.npy", ".order.npy")  # checksummed whole; of .npy and .ngrams.npy, the header
META_MOST = 4_000_000  # an entry's metadata is a few hundred bytes


class DamagedEntry(VectorsError):
    """A cache entry whose files are missing, truncated or changed since they were written."""


class EntryUnreadable(VectorsError):
    """An entry that cannot be read now (too many open files, no memory, no permission):
    not damage, so the entry is left as it is."""


def bundled_prefix() -> Path:
    """Where the bundled entry's files are. An install (regular or editable) maps the folder
    embeddings/ at the top of the repository into the package attncli.embeddings, as plain
    files, which can be memory-mapped. Where that package cannot be imported, attncli runs
    from a source tree: uninstalled, or shadowing the installed package (`python -m
    attncli` in the root of a clone, whose attncli/ comes first on sys.path); the folder is
    then embeddings/ beside the package's own source."""
    # the package's folder from its spec, without importing it or importlib.resources (whose
    # readers import zipfile and tempfile: a tenth of a short run's start-up)
    spec = importlib.util.find_spec("attncli.embeddings")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))) / BUNDLED
    package = Path(__file__).resolve().parent.parent
    beside = package.parent / "embeddings"
    if (beside / f"{BUNDLED}.json").is_file():
        return beside / BUNDLED
    raise VectorsError(f"the bundled vectors are not installed with attncli in {package}: install it "
                       "(pip install . in the root of its repository), or give --vectors SOURCE")


def _suffixes(meta: dict) -> list[str]:
    return list(SUFFIXES) + ([NGRAMS] if "subwords" in meta else [])


# --------------------------------------------------------------------------- writing


def write_entry(prefix: Path, vectors: Vectors, meta: dict, *, cache_entry: bool = False) -> dict:
    """Write `vectors` as the files of an entry at `prefix`; returns the metadata written.

    A cache entry (`cache_entry`) also records each file's modification time, the CRC-32s
    verified at each load and the SHA-256 of each file, which `vectors verify` checks; all
    are computed as the bytes are written, so nothing is read back. The bundled entry
    records none: a git checkout sets its own times, and its SHA-256s are committed beside
    it (BUNDLED.sha256)."""
    vocab = vectors.vocab
    contents = {".npy": _npy(vectors.matrix, np.float32), ".words.txt": [memoryview(vocab.blob).cast("B")],
                ".offsets.npy": _npy(vocab.offsets, np.int64), ".order.npy": _npy(vocab.order, np.int64)}
    meta = {
        "format": FORMAT, "version": FORMAT_VERSION if cache_entry else BUNDLED_VERSION, "name": vectors.name,
        "words": vectors.size, "dim": vectors.dim, "cased": vectors.cased, **meta,
    }
    if vectors.subwords is not None:
        contents[NGRAMS] = _npy(vectors.subwords.matrix, np.float32)
        meta["subwords"] = {"min_n": vectors.subwords.min_n, "max_n": vectors.subwords.max_n,
                            "buckets": len(vectors.subwords.matrix)}
    sums = {suffix: _write_file(f"{prefix}{suffix}", parts) for suffix, parts in contents.items()}  # (sha256, crc)
    meta["files"] = {s: os.stat(f"{prefix}{s}").st_size for s in _suffixes(meta)}
    if cache_entry:
        meta["mtimes"] = {s: os.stat(f"{prefix}{s}").st_mtime_ns for s in _suffixes(meta)}
        meta["checksums"] = {"algorithm": CHECKSUM,
                             "files": {s: _hex(sums[s][1]) for s in WHOLE},
                             "headers": {s: _hex(_crc(contents[s][0])) for s in sums if s not in WHOLE},
                             "sha256": {s: sha for s, (sha, _) in sums.items()}}
        meta["checksums"]["metadata"] = _meta_checksum(meta)
    text = json.dumps(meta, indent=1, ensure_ascii=True) + "\n"
    _write_file(f"{prefix}.json", [text.encode("ascii")])
    return meta


CHUNK = 1 << 24  # bytes a write and a hash update: 16 MB, as numpy's own writer takes


def _npy(array, dtype) -> list:
    """[the .npy header, the data] of `array` as `dtype`, C-ordered: np.save's very bytes."""
    array = np.ascontiguousarray(array, dtype=dtype)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    return [header.getvalue(), memoryview(array.reshape(-1)).cast("B")]


def _write_file(path: str, parts) -> tuple[str, int]:
    """Write the buffers `parts` one after another as the file `path`; (its SHA-256, its
    CRC-32), computed from the bytes as they are written."""
    import hashlib

    sha, crc = hashlib.sha256(), 0
    with open(path, "wb") as f:
        for part in parts:
            for start in range(0, len(part), CHUNK):
                piece = part[start:start + CHUNK]
                f.write(piece)
                sha.update(piece)
                crc = _crc(piece, crc)
    return sha.hexdigest(), crc


def _crc(data, value: int = 0) -> int:
    return zlib.crc32(data, value)


def _hex(value: int) -> str:
    return f"{value:08x}"


def _meta_checksum(meta: dict) -> str:
    """The checksum of the metadata itself, all but this checksum, as canonical JSON."""
    rest = {**meta, "checksums": {k: v for k, v in meta["checksums"].items() if k != "metadata"}}
    return _hex(_crc(json.dumps(rest, sort_keys=True, ensure_ascii=True, separators=(",", ":")).encode("ascii")))


# --------------------------------------------------------------------------- reading


def read_entry(prefix: Path, source: str, *, bundled: bool = False) -> Vectors:
    """The vectors of the entry at `prefix`, memory-mapped. DamagedEntry when its files do not
    match what its metadata says; EntryUnreadable when they cannot be read now.

    The bundled entry (`bundled`) has no modification times or checksums to verify, and
    may be reached through symbolic links (a packager's choice); the range checks apply."""
    prefix = str(prefix)
    meta = read_meta(prefix, bundled=bundled)
    for suffix in _suffixes(meta):
        st = _stat(f"{prefix}{suffix}", follow=bundled)
        if st.st_size != meta["files"][suffix]:
            raise DamagedEntry(f"{prefix}{suffix} holds {st.st_size} bytes, not the {meta['files'][suffix]} "
                               "it was written with")
        if not bundled and st.st_mtime_ns != meta["mtimes"][suffix]:
            raise DamagedEntry(f"{prefix}{suffix} was changed after it was written")
    arrays, sums = _read_arrays(prefix, meta, bundled=bundled)
    if not bundled:
        for group in ("files", "headers"):
            for suffix, value in sums[group].items():
                if meta["checksums"][group][suffix] != value:
                    part = "" if group == "files" else "'s header"
                    raise DamagedEntry(f"{prefix}{suffix}{part} was changed after it was written (its checksum differs)")
    matrix, offsets, order, blob, ngrams = arrays
    V = meta["words"]
    _check_index(prefix, V, offsets, order, blob)
    subwords = None
    if "subwords" in meta:
        s = meta["subwords"]
        subwords = Subwords(ngrams, s["min_n"], s["max_n"])
    meta["entry"] = prefix
    return Vectors(meta["name"], Vocabulary(blob, offsets, order), matrix, meta["cased"], source, subwords, meta)


def _check_index(prefix: str, V: int, offsets: np.ndarray, order: np.ndarray, blob) -> None:
    """The word index, whole: offsets from 0 to the end of words.txt, never decreasing; every
    row of order within [0, V). A binary search over anything else reads out of bounds."""
    if offsets[0] != 0 or offsets[-1] != len(blob) or (V and not bool(np.all(offsets[1:] >= offsets[:-1]))):
        raise DamagedEntry(f"{prefix}.offsets.npy does not fit {prefix}.words.txt "
                           "(it must start at 0, never decrease, and end at the file's size)")
    if V and (int(order.min()) < 0 or int(order.max()) >= V):
        raise DamagedEntry(f"{prefix}.order.npy holds rows outside [0, {V})")


def _read_arrays(prefix: str, meta: dict, *, bundled: bool):
    """((matrix, offsets, order, words, ngrams), checksums) of an entry's files, each mapped
    after its header was checked against the metadata."""
    V, d = meta["words"], meta["dim"]
    follow = bundled
    crc = (lambda data, value=0: 0) if bundled else _crc  # the bundled entry has no checksums to compare
    headers, whole = {}, {}
    matrix, headers[".npy"] = _map_npy(f"{prefix}.npy", (V, d), np.float32, follow)
    # the index as plain ndarrays over the same mapped pages: a np.memmap indexed one value
    # at a time, as a binary search does, takes a much slower path
    offsets, head = _map_npy(f"{prefix}.offsets.npy", (V + 1,), np.int64, follow)
    offsets = offsets.view(np.ndarray)
    whole[".offsets.npy"] = _hex(crc(offsets, crc(head)))
    order, head = _map_npy(f"{prefix}.order.npy", (V,), np.int64, follow)
    order = order.view(np.ndarray)
    whole[".order.npy"] = _hex(crc(order, crc(head)))
    blob = _map_bytes(f"{prefix}.words.txt", meta["files"][".words.txt"], follow)
    whole[".words.txt"] = _hex(crc(blob))
    ngrams = None
    if "subwords" in meta:
        ngrams, headers[NGRAMS] = _map_npy(f"{prefix}{NGRAMS}", (meta["subwords"]["buckets"], d), np.float32, follow)
    sums = {"files": whole, "headers": {k: _hex(crc(v)) for k, v in headers.items()}}
    return (matrix, offsets, order, blob, ngrams), sums


def unreadable(path: str, e: BaseException) -> EntryUnreadable:
    why = getattr(e, "strerror", None) or ("not enough memory" if isinstance(e, MemoryError) else str(e))
    return EntryUnreadable(f"{path}: cannot be read: {why}; the cache entry was left as it is")


def _stat(path: str, *, follow: bool) -> os.stat_result:
    """stat (lstat unless `follow`) of an entry file: missing or not a regular file is damage,
    any other error (EACCES, ENOMEM) is not."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise DamagedEntry(f"{path} is missing") from None
    except OSError as e:
        raise unreadable(path, e) from None
    if stat.S_ISLNK(st.st_mode):
        raise DamagedEntry(f"{path} is a symbolic link, not a file attncli wrote")
    if not stat.S_ISREG(st.st_mode):
        raise DamagedEntry(f"{path} is not a regular file")
    return st


def _open(path: str, *, follow: bool):
    """An entry file opened for reading, only if it is a regular file (a FIFO in its place
    would hang the open): reading.open_regular, its refusals sorted into damage or not."""
    _stat(path, follow=follow)
    try:
        return reading.open_regular(path, "a cache entry file")
    except ResourceError as e:
        _stat(path, follow=follow)  # gone, or replaced by a FIFO, since: DamagedEntry
        raise EntryUnreadable(f"{e}; the cache entry was left as it is") from None  # EMFILE, EACCES, ...


def read_small(path: str, most: int, *, follow: bool) -> bytes:
    with _open(path, follow=follow) as f:
        try:
            n = os.fstat(f.fileno()).st_size
            if n > most:
                raise DamagedEntry(f"{path} holds {limits.size(n)}, more than the {limits.size(most)} it ever holds")
            return f.read(n + 1)
        except OSError as e:
            raise unreadable(path, e) from None


def _content_error(path: str, e: BaseException) -> VectorsError:
    """An exception while parsing a file: an OSError with an errno (EIO, ENOMEM), a
    MemoryError or an ImportError (numpy's memmap imports mmap when first used, which too
    many open files can stop) is the machine's; anything else is the content's."""
    if isinstance(e, (MemoryError, ImportError)) or (isinstance(e, OSError) and e.errno is not None):
        return unreadable(path, e)
    return DamagedEntry(f"{path}: {type(e).__name__}: {e}")


def _npy_header(f, path: str) -> tuple[tuple, bool, np.dtype, int]:
    """(shape, fortran_order, dtype, header length) of the .npy file open as `f`, which is
    left at its start (ahead of the data)."""
    try:
        found, fortran, descr, start = npyfile.header(f)
        f.seek(0)
    except Exception as e:  # noqa: BLE001: numpy's header parser raises many kinds on damaged files
        raise _content_error(path, e) from None
    return found, fortran, descr, start


def _map_npy(path: str, shape: tuple, dtype, follow: bool) -> tuple[np.ndarray, bytes]:
    """(the array of a .npy file, memory-mapped, its header bytes), once its header says
    `dtype` and `shape` and the file holds exactly that."""
    with _open(path, follow=follow) as f:
        found, fortran, descr, start = _npy_header(f, path)
        try:
            size = os.fstat(f.fileno()).st_size
        except OSError as e:
            raise unreadable(path, e) from None
        if found != shape or descr != np.dtype(dtype) or fortran:
            order = "Fortran-order " if fortran else ""
            raise DamagedEntry(f"{path} holds a {order}{descr} array of shape {found}, not {np.dtype(dtype)} {shape}")
        need = start + int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
        if size != need:
            raise DamagedEntry(f"{path} holds {size:,} bytes, not the {need:,} its header needs")
        try:
            header = f.read(start)
            if need == start:
                return np.zeros(shape, dtype), header
            return np.memmap(f, dtype=dtype, mode="r", offset=start, shape=shape), header
        except Exception as e:  # noqa: BLE001
            raise _content_error(path, e) from None


def _map_bytes(path: str, size: int, follow: bool):
    """The bytes of words.txt, memory-mapped (b"" when empty)."""
    with _open(path, follow=follow) as f:
        try:
            if os.fstat(f.fileno()).st_size != size:
                raise DamagedEntry(f"{path} changed size while it was read")
            if not size:
                return b""
            return np.memmap(f, dtype=np.uint8, mode="r", shape=(size,)).view(np.ndarray)
        except DamagedEntry:
            raise
        except Exception as e:  # noqa: BLE001
            raise _content_error(path, e) from None


# --------------------------------------------------------------------------- the metadata


def read_meta(prefix: str, *, bundled: bool) -> dict:
    """The metadata of the entry at `prefix`, every field of the type and range it is written
    with (and, for a cache entry, unchanged since: its own checksum), else DamagedEntry."""
    path = f"{prefix}.json"
    data = read_small(path, META_MOST, follow=bundled)
    try:
        meta = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError; deep nesting a RecursionError
        raise DamagedEntry(f"{path} is not valid JSON ({type(e).__name__})") from None
    _check_meta(meta, path, bundled)
    return meta


def _is_sha256(x) -> bool:
    return isinstance(x, str) and len(x) == 64 and not x.strip("0123456789abcdef")


def is_int(x, least: int | None = 0) -> bool:
    return type(x) is int and (least is None or x >= least)


def _check_meta(meta, path: str, bundled: bool) -> None:
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise DamagedEntry(f"{path}: {what}")

    kinds = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "true or false",
             type(None): "null"}
    need(isinstance(meta, dict), f"holds {kinds.get(type(meta), 'something')} in JSON, not an object")
    version = BUNDLED_VERSION if bundled else FORMAT_VERSION
    need(meta.get("format") == FORMAT and is_int(meta.get("version")) and meta["version"] == version,
         f"not an entry of this attncli version (format {FORMAT} {version})")
    if not bundled:
        sums = meta.get("checksums")
        need(isinstance(sums, dict) and sums.get("algorithm") == CHECKSUM and isinstance(sums.get("metadata"), str),
             "no checksums")
        try:
            expected = _meta_checksum(meta)
        except (TypeError, ValueError, RecursionError) as e:
            raise DamagedEntry(f"{path}: {type(e).__name__}: {e}") from None
        need(sums["metadata"] == expected, "was changed after it was written (its checksum differs)")
    need(isinstance(meta.get("name"), str), "no name")
    need(is_int(meta.get("words")) and is_int(meta.get("dim")), "'words' and 'dim' are not counts")
    need(isinstance(meta.get("cased"), bool), "'cased' is not true or false")
    if "subwords" in meta:
        s = meta["subwords"]
        need(isinstance(s, dict) and is_int(s.get("min_n"), None) and is_int(s.get("max_n"), None)
             and is_int(s.get("buckets"), 1), "'subwords' is not min_n, max_n and buckets")
    suffixes = set(_suffixes(meta))
    files_ = meta.get("files")
    need(isinstance(files_, dict) and set(files_) == suffixes and all(is_int(v) for v in files_.values()),
         f"'files' does not give the sizes of {', '.join(sorted(suffixes))}")
    need(isinstance(meta.get("source"), dict), "no source")
    need(isinstance(meta.get("options"), dict), "no options")
    if bundled:
        return
    mtimes = meta.get("mtimes")
    need(isinstance(mtimes, dict) and set(mtimes) == suffixes and all(is_int(v, None) for v in mtimes.values()),
         "'mtimes' does not give the times of its files")
    heads = {".npy"} | ({NGRAMS} & suffixes)
    for group, names in (("files", set(WHOLE)), ("headers", heads)):
        got = sums.get(group)
        need(isinstance(got, dict) and set(got) == names and all(isinstance(v, str) for v in got.values()),
             f"'checksums' lacks its {group}")
    sha = sums.get("sha256")  # absent from an entry written before attncli recorded them (see verify_entry)
    need(sha is None or isinstance(sha, dict) and set(sha) == suffixes and all(map(_is_sha256, sha.values())),
         "'checksums' does not give the SHA-256 of each of its files")
    src = meta["source"]
    need(isinstance(src.get("path"), str) and is_int(src.get("size")) and is_int(src.get("mtime_ns"), None)
         and isinstance(src.get("format"), str) and isinstance(src.get("compression"), (str, type(None))),
         "'source' is not a path, size, time and format")
    need(meta["options"].get("limit") is None or is_int(meta["options"].get("limit"), 1), "'limit' is not a count")
    need(isinstance(meta.get("created"), str) and isinstance(meta.get("created_by"), str),
         "'created' or 'created_by' is not a string")


def read_bundled() -> Vectors:
    return read_entry(bundled_prefix(), "bundled", bundled=True)


# --------------------------------------------------------------------------- verify: every byte, against its SHA-256


SUMS = ".sha256"  # beside the bundled entry: the SHA-256s of its files, as sha256sum writes them
READ = 1 << 22  # bytes a read while hashing
SUMS_MOST = 4096  # BUNDLED.sha256: five lines of sha256sum's


def entry_bytes(prefix: Path) -> int:
    """The bytes verify_entry hashes of the entry at `prefix` (as far as its files are there)."""
    total = 0
    for suffix in (*SUFFIXES, NGRAMS):
        try:
            total += os.stat(f"{prefix}{suffix}").st_size
        except OSError:
            pass
    return total


def verify_entry(prefix: Path, *, bundled: bool = False, hashed=lambda n: None) -> dict:
    """The entry at `prefix` checked whole: every check a load makes, and the SHA-256 of each
    of its files against the one recorded as it was written (in a cache entry's metadata;
    beside the bundled entry, in BUNDLED.sha256). hashed(n) is called as n more bytes are
    hashed. Returns {"name", "path", "source", "limit", "ok", "status", "problem", "files":
    [{"name", "sha256", "expected"}]}, status one of "ok"; "damaged" (problem: which file,
    what differs); "unchecked" (no SHA-256s to check against: an entry written before
    attncli recorded them); "unreadable" (cannot be read now: no permission, too many open
    files)."""
    doc = {"name": prefix.name if bundled else prefix.parent.name, "path": str(prefix if bundled else prefix.parent),
           "source": "bundled" if bundled else None, "limit": None, "ok": False, "status": "damaged", "problem": None,
           "files": []}
    try:
        meta = read_meta(str(prefix), bundled=bundled)
        doc.update(name=meta["name"], limit=meta["options"].get("limit"))
        if not bundled:
            doc["source"] = meta["source"]["path"]
        expected = _bundled_sums(prefix) if bundled else meta["checksums"].get("sha256")
        for suffix in expected or _suffixes(meta):
            doc["files"].append({"name": f"{prefix.name}{suffix}", "sha256": _sha256(f"{prefix}{suffix}", bundled, hashed),
                                 "expected": expected[suffix] if expected else None})
        try:
            read_entry(prefix, "", bundled=bundled)
            loaded = None
        except DamagedEntry as e:
            loaded = str(e)
    except DamagedEntry as e:  # the metadata: nothing to check the files against
        return {**doc, "problem": str(e)}
    except EntryUnreadable as e:
        return {**doc, "status": "unreadable", "problem": str(e)}
    differing = [_differs(prefix, f) for f in doc["files"] if expected and f["sha256"] != f["expected"]]
    if differing or loaded:
        return {**doc, "problem": "; ".join(differing) or loaded}
    if not expected:
        why = (f"{prefix.name}{SUMS} is missing, or not the SHA-256s of its files" if bundled
               else f"written by {meta['created_by']}, before attncli recorded the SHA-256s of an entry's files")
        return {**doc, "status": "unchecked", "problem": why}
    return {**doc, "ok": True, "status": "ok"}


def _differs(prefix: Path, file: dict) -> str:
    if file["sha256"] is None:
        there = os.path.lexists(prefix.with_name(file["name"]))
        return f"{file['name']} is {'not a regular file' if there else 'missing'}"
    return (f"{file['name']} is not as it was written (SHA-256 {file['sha256'][:12]}…, written as "
            f"{file['expected'][:12]}…)")


def _sha256(path: str, follow: bool, hashed) -> str | None:
    """The SHA-256 of an entry file, None when it is missing or not a regular file."""
    import hashlib

    try:
        f = _open(path, follow=follow)
    except DamagedEntry:
        return None
    sha, buffer = hashlib.sha256(), bytearray(READ)
    with f:
        try:
            while n := f.readinto(buffer):
                sha.update(memoryview(buffer)[:n])
                hashed(n)
        except OSError as e:
            raise unreadable(path, e) from None
    return sha.hexdigest()


def _bundled_sums(prefix: Path) -> dict | None:
    """{suffix: SHA-256} of the bundled entry's files, from BUNDLED.sha256 (sha256sum's
    lines: the hash, two spaces, the file's name); None where it is missing or malformed."""
    try:
        text = read_small(f"{prefix}{SUMS}", SUMS_MOST, follow=True).decode("ascii")
    except (DamagedEntry, UnicodeDecodeError):
        return None
    sums = {}
    for line in text.splitlines():
        sha, _, name = line.partition("  ")
        if not (_is_sha256(sha) and name.startswith(prefix.name)):
            return None
        sums[name[len(prefix.name):]] = sha
    return sums if set(sums) == {*SUFFIXES, ".json"} else None
