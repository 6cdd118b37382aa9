"""Vectors entries on disk: the bundled GloVe vectors, and the cache of converted sources.

An entry is a few files sharing one path prefix, none of them a pickle:

    PREFIX.npy          (V, d) float32 matrix, memory-mapped when read
    PREFIX.words.txt    the words, one a line, UTF-8, in row order
    PREFIX.offsets.npy  (V + 1,) int64: where each row's word starts in words.txt
    PREFIX.order.npy    (V,) int64: the rows sorted by word, for binary search
    PREFIX.ngrams.npy   (buckets, d) float32: fastText's subword vectors (fastText only)
    PREFIX.json         metadata: name, words, dim, cased, source, options, files, checksums

The bundled entry is embeddings/glove.6B.50d.100k.*, installed as the package
attncli.embeddings (format version 1, no checksums in its metadata: the SHA-256s of its
files are committed beside them, in glove.6B.50d.100k.sha256).

Cache entries live in ATTNCLI_CACHE_DIR, or else the platform's user cache directory, one
folder each (PREFIX is FOLDER/vectors). A folder is written under a temporary name
(.tmp-*), its marker file .attncli-entry first, and renamed into place whole, so that no
reader ever sees half an entry; its writer holds a lock (flock) on the marker until then,
which tells a folder being written from one a killed run left. Only a folder whose marker
says attncli made it, under its own name, is ever read or removed, and only the file names
attncli writes are removed from it: the cache directory may hold anything else
(ATTNCLI_CACHE_DIR can name a folder of the user's), and that is never touched.

Every array is checked for dtype, shape and range before it is used; a cache entry's
metadata also holds the sizes and modification times of its files and CRC-32 checksums of
words.txt, offsets.npy, order.npy, the .npy headers and the metadata itself, all verified
at each load, and the SHA-256 of each file, which only `vectors verify` checks (it reads
the whole matrix). A damaged entry raises DamagedEntry (load.py converts the source
again); an entry that is fine but cannot be read now (too many open files, no memory, no
permission) raises EntryUnreadable and is left as it is.
"""

from __future__ import annotations

import errno
import importlib.util
import io
import json
import os
import stat
import time
import zlib
from pathlib import Path

import numpy as np

from attncli import limits, npyfile, reading
from attncli.version import __version__
from attncli.errors import VectorsError
from attncli.home import expand, no_home
from attncli.limits import ResourceError
from attncli.vectors import Subwords, Vectors, Vocabulary

FORMAT = "attncli-vectors"
FORMAT_VERSION = 2  # 2: a marker in each folder, and checksums verified at each load
BUNDLED_VERSION = 1  # the bundled entry's format, as committed
BUNDLED = "glove.6B.50d.100k"
SUFFIXES = (".npy", ".words.txt", ".offsets.npy", ".order.npy")
NGRAMS = ".ngrams.npy"
PREFIX = "vectors"  # a cache entry's files: FOLDER/vectors.npy, FOLDER/vectors.words.txt, ...
MARKER = ".attncli-entry"  # in every folder attncli makes in the cache directory
TEMPORARY = ".tmp-"  # the name a folder has while it is written
OWN_FILES = tuple(PREFIX + s for s in (*SUFFIXES, NGRAMS, ".json"))  # what attncli writes in a folder, with MARKER
CHECKSUM = "crc32"
WHOLE = (".words.txt", ".offsets.npy", ".order.npy")  # checksummed whole; of .npy and .ngrams.npy, the header
META_MOST = 4_000_000  # an entry's metadata is a few hundred bytes
MARKER_MOST = 4096
LOCK = "flock"  # a marker's "lock": its writer holds an flock on it while it writes the folder
YOUNG = 3600  # seconds: a temporary folder this recent, whose marker has no lock, may still be being written


class DamagedEntry(VectorsError):
    """A cache entry whose files are missing, truncated or changed since they were written."""


class EntryUnreadable(VectorsError):
    """An entry that cannot be read now (too many open files, no memory, no permission):
    not damage, so the entry is left as it is."""


class NoCacheDir(VectorsError):
    """There is no cache directory: no ATTNCLI_CACHE_DIR, and no home directory to find the
    platform's user cache directory in."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"{reason}; set HOME or ATTNCLI_CACHE_DIR")


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
    package = Path(__file__).resolve().parent
    beside = package.parent / "embeddings"
    if (beside / f"{BUNDLED}.json").is_file():
        return beside / BUNDLED
    raise VectorsError(f"the bundled vectors are not installed with attncli in {package}: install it "
                       "(pip install . in the root of its repository), or give --vectors SOURCE")


def cache_dir() -> Path:
    """ATTNCLI_CACHE_DIR (a leading ~ expanded), or the platform's user cache directory for
    attncli; NoCacheDir when neither can be found (no home directory)."""
    configured = os.environ.get("ATTNCLI_CACHE_DIR")
    if configured:
        expanded = expand(configured)
        if expanded is None:
            raise NoCacheDir(f"there is no cache directory: ATTNCLI_CACHE_DIR is {configured!r}, and "
                             f"~ cannot be expanded without a home directory ({no_home()})")
        return Path(expanded)
    import platformdirs  # only runs that use a cache pay for it

    # Without a home directory, platformdirs gives "~/.cache/attncli" as it is (a folder "~"
    # in the working directory) or, in later versions, raises RuntimeError: never use either.
    try:
        path = platformdirs.user_cache_dir("attncli")
    except RuntimeError:
        path = "~/.cache/attncli"
    if os.path.isabs(path):
        return Path(path)
    start = os.path.expanduser("~")
    shown = "~" + path[len(start):] if path.startswith(start + os.sep) else path  # start: "~", or HOME's relative path
    raise NoCacheDir(f"there is no cache directory: the vectors cache would be in {shown}, but {no_home()}")


def entry_dir(source: Path, stat_: os.stat_result, options: dict) -> Path:
    """The folder of a source's entry. Its name covers everything that changes the vectors:
    the file (path, size, modification time), the options, the entry format."""
    return cache_dir() / _entry_name(source.name, str(source.resolve()), stat_.st_size, stat_.st_mtime_ns,
                                     options, FORMAT_VERSION)


def _entry_name(name: str, path: str, size: int, mtime_ns: int, options: dict, version: int) -> str:
    identity = json.dumps({"path": path, "size": size, "mtime_ns": mtime_ns, "options": options, "format": version},
                          sort_keys=True)
    import hashlib  # here, and tempfile in _temporary: reading the bundled vectors needs neither

    digest = hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return f"{name[:80]}-{digest}"  # a file name can be longer than a folder name may


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
    meta = _read_meta(prefix, bundled=bundled)
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


def _unreadable(path: str, e: BaseException) -> EntryUnreadable:
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
        raise _unreadable(path, e) from None
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


def _read_small(path: str, most: int, *, follow: bool) -> bytes:
    with _open(path, follow=follow) as f:
        try:
            n = os.fstat(f.fileno()).st_size
            if n > most:
                raise DamagedEntry(f"{path} holds {limits.size(n)}, more than the {limits.size(most)} it ever holds")
            return f.read(n + 1)
        except OSError as e:
            raise _unreadable(path, e) from None


def _content_error(path: str, e: BaseException) -> VectorsError:
    """An exception while parsing a file: an OSError with an errno (EIO, ENOMEM) or a
    MemoryError is the machine's; anything else is the content's."""
    if isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno is not None):
        return _unreadable(path, e)
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
            raise _unreadable(path, e) from None
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


def _read_meta(prefix: str, *, bundled: bool) -> dict:
    """The metadata of the entry at `prefix`, every field of the type and range it is written
    with (and, for a cache entry, unchanged since: its own checksum), else DamagedEntry."""
    path = f"{prefix}.json"
    data = _read_small(path, META_MOST, follow=bundled)
    try:
        meta = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError; deep nesting a RecursionError
        raise DamagedEntry(f"{path} is not valid JSON ({type(e).__name__})") from None
    _check_meta(meta, path, bundled)
    return meta


def _is_sha256(x) -> bool:
    return isinstance(x, str) and len(x) == 64 and not x.strip("0123456789abcdef")


def _is_int(x, least: int | None = 0) -> bool:
    return type(x) is int and (least is None or x >= least)


def _check_meta(meta, path: str, bundled: bool) -> None:
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise DamagedEntry(f"{path}: {what}")

    kinds = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "true or false",
             type(None): "null"}
    need(isinstance(meta, dict), f"holds {kinds.get(type(meta), 'something')} in JSON, not an object")
    version = BUNDLED_VERSION if bundled else FORMAT_VERSION
    need(meta.get("format") == FORMAT and _is_int(meta.get("version")) and meta["version"] == version,
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
    need(_is_int(meta.get("words")) and _is_int(meta.get("dim")), "'words' and 'dim' are not counts")
    need(isinstance(meta.get("cased"), bool), "'cased' is not true or false")
    if "subwords" in meta:
        s = meta["subwords"]
        need(isinstance(s, dict) and _is_int(s.get("min_n"), None) and _is_int(s.get("max_n"), None)
             and _is_int(s.get("buckets"), 1), "'subwords' is not min_n, max_n and buckets")
    suffixes = set(_suffixes(meta))
    files_ = meta.get("files")
    need(isinstance(files_, dict) and set(files_) == suffixes and all(_is_int(v) for v in files_.values()),
         f"'files' does not give the sizes of {', '.join(sorted(suffixes))}")
    need(isinstance(meta.get("source"), dict), "no source")
    need(isinstance(meta.get("options"), dict), "no options")
    if bundled:
        return
    mtimes = meta.get("mtimes")
    need(isinstance(mtimes, dict) and set(mtimes) == suffixes and all(_is_int(v, None) for v in mtimes.values()),
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
    need(isinstance(src.get("path"), str) and _is_int(src.get("size")) and _is_int(src.get("mtime_ns"), None)
         and isinstance(src.get("format"), str) and isinstance(src.get("compression"), (str, type(None))),
         "'source' is not a path, size, time and format")
    need(meta["options"].get("limit") is None or _is_int(meta["options"].get("limit"), 1), "'limit' is not a count")
    need(isinstance(meta.get("created"), str) and isinstance(meta.get("created_by"), str),
         "'created' or 'created_by' is not a string")


def read_bundled() -> Vectors:
    return read_entry(bundled_prefix(), "bundled", bundled=True)


# --------------------------------------------------------------------------- folders attncli made


def _marker_doc(folder: str, temporary: str, locked: bool) -> dict:
    doc = {"made_by": "attncli", "kind": "cache-entry", "folder": folder, "temporary": temporary,
           "created_by": f"attncli {__version__}", "pid": os.getpid()}
    return {**doc, "lock": LOCK} if locked else doc


def _marker(folder: Path) -> dict | None:
    """The marker of `folder` (a folder, not a link to one), None when it has none that
    attncli wrote; EntryUnreadable when it cannot be read now."""
    path = folder / MARKER
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise _unreadable(str(path), e) from None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MARKER_MOST:
        return None
    try:
        doc = json.loads(_read_small(str(path), MARKER_MOST, follow=False).decode("utf-8"))
    except DamagedEntry:
        return None
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("made_by") != "attncli" or doc.get("kind") != "cache-entry":
        return None
    return doc


def _kind(folder: Path) -> str | None:
    """"entry" for a cache entry folder attncli made, "temporary" for a folder it was writing
    one in, None for anything else (a link, a file, a folder of someone else's)."""
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    doc = _marker(folder)
    if doc is None:
        return None
    if doc.get("folder") == folder.name:
        return "entry"
    if folder.name.startswith(TEMPORARY) and doc.get("temporary") == folder.name:
        return "temporary"
    return None


def _legacy(folder: Path) -> bool:
    """Whether `folder` is an entry of format 1 (attncli 0.2.0 and before, no marker): its
    name ends in the digest of the source its metadata names, which only attncli computes."""
    try:
        meta = json.loads(_read_small(str(folder / f"{PREFIX}.json"), META_MOST, follow=False).decode("utf-8"))
        src = meta["source"]
        if meta.get("format") != FORMAT or type(meta.get("version")) is not int or meta["version"] != 1:
            return False
        name = _entry_name("", src["path"], src["size"], src["mtime_ns"], meta["options"], 1)
    except (VectorsError, ValueError, RecursionError, TypeError, KeyError, AttributeError):
        return False
    return isinstance(src["path"], str) and folder.name.endswith(name) and len(folder.name) <= len(name) + 80


def _temporary(root: Path, entry: str) -> tuple[Path, int]:
    """A new temporary folder in `root` for the entry `entry`, and its marker's descriptor,
    locked: the lock is held from before the marker says whose folder it is until the
    descriptor is closed, after the folder was renamed into place or removed. The kernel
    lets a lock go when its process ends, however it ends (SIGKILL, the OOM killer), so a
    folder whose marker is locked is being written now, and one whose lock is free was left."""
    import tempfile

    temporary = Path(tempfile.mkdtemp(prefix=TEMPORARY, dir=root))
    fd = None
    try:
        fd = os.open(temporary / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        locked = reading.lock(fd, wait=True)
        with open(fd, "w", encoding="utf-8", closefd=False) as f:
            f.write(json.dumps(_marker_doc(entry, temporary.name, bool(locked)), ensure_ascii=True) + "\n")
    except BaseException:
        _discard(temporary)
        if fd is not None:
            os.close(fd)
        raise
    return temporary, fd


def _remove_own(folder: Path) -> tuple[int, list[str]]:
    """Unlink the file names attncli writes in a folder (its marker last), then remove the
    folder if that left it empty. Returns (bytes freed, names left in it). A link or FIFO in
    place of a file is unlinked, never what it points to; nothing else is touched."""
    freed = 0
    for name in (*OWN_FILES, MARKER):
        path = folder / name
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode):
            continue  # attncli never makes a folder inside one
        os.unlink(path)
        freed += st.st_size if stat.S_ISREG(st.st_mode) else 0
    try:
        os.rmdir(folder)
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not os.path.isdir(folder):
            raise
        return freed, sorted(os.listdir(folder))
    return freed, []


def _own_bytes(folder: Path) -> int:
    total = 0
    for name in (*OWN_FILES, MARKER):
        try:
            st = os.lstat(folder / name)
        except OSError:
            continue
        total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


def _last_written(folder: Path) -> float:
    times = []
    for path in (folder, *(folder / n for n in (*OWN_FILES, MARKER))):
        try:
            times.append(os.lstat(path).st_mtime)
        except OSError:
            pass
    return max(times, default=time.time())  # gone meanwhile: as good as new


def _children(root: Path) -> list[Path]:
    if not os.path.isdir(root):  # not there yet, or under a file: nothing in it
        return []
    try:
        return sorted(root / name for name in os.listdir(root))
    except OSError as e:
        raise VectorsError(f"{root}: the cache directory cannot be read: {e.strerror or e}") from None


def read_cached(folder: Path, source: str) -> Vectors | None:
    """The cached vectors in `folder`, None when there is no entry. A damaged entry (or a
    folder there that attncli did not make) raises DamagedEntry; remove_entry then lets it
    be converted again."""
    try:
        st = os.lstat(folder)
    except (FileNotFoundError, NotADirectoryError):  # no entry, or no cache directory (a file in its way)
        return None
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:  # a cache directory no entry can be written in (store says so)
            return None
        raise _unreadable(str(folder), e) from None
    if stat.S_ISLNK(st.st_mode):
        raise DamagedEntry(f"{folder} is a symbolic link, not a folder attncli made")
    if _kind(folder) != "entry":
        raise DamagedEntry(f"{folder} has no {MARKER} marker of attncli's")
    return read_entry(folder / PREFIX, source)


def store(folder: Path, vectors: Vectors, meta: dict) -> Path:
    """Write an entry under a temporary name beside `folder`, its marker first, then rename
    it into place. What a run killed while converting this source left is removed first.

    Two processes converting the same source both succeed: the second rename finds the
    folder there, and that process keeps the first one's entry. Raises OSError when the
    cache directory cannot be written; whatever fails, no temporary folder is left.
    """
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file, or a device, where the cache directory should be
        raise VectorsError("it is not a folder") from None
    _sweep(folder.parent, folder.name)
    temporary, marker = _temporary(folder.parent, folder.name)
    placed = False
    try:
        write_entry(temporary / PREFIX, vectors, {**meta, "created_by": f"attncli {__version__}",
                                                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                    cache_entry=True)
        try:
            os.rename(temporary, folder)
            placed = True
        except OSError:
            if _kind(folder) != "entry":
                raise
    finally:
        if not placed:
            _discard(temporary)
        os.close(marker)  # the lock goes only now: the folder is in place, or gone
    return folder


def _discard(temporary: Path) -> None:
    """Remove this process's own temporary folder: only the names it writes."""
    try:
        _remove_own(temporary)
    except OSError:
        pass  # its marker stays, if it could not be removed: a later clear takes it


def _remove_temporary(folder: Path, now: float) -> tuple[int, list[str]] | str:
    """Remove a temporary folder that its writer left: (bytes freed, names left in it), or
    why it was kept. A writer holds the lock on its marker (see _temporary); the lock is
    taken here before anything is removed, so a run writing the folder now is never touched.
    A marker without a lock (an older attncli, a filesystem without locks) is judged by
    its age instead."""
    doc = _marker(folder) or {}
    try:
        fd = os.open(folder / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return 0, []  # renamed into place since it was listed
    try:
        held = reading.lock(fd, wait=False) if doc.get("lock") == LOCK else None
        if held is False:
            pid = doc.get("pid")
            run = f"attncli (process {pid})" if _is_int(pid) else "a run of attncli"
            return f"{run} is writing it now"
        if held is None and now - _last_written(folder) < YOUNG:
            minutes = max(int((now - _last_written(folder)) // 60), 0)
            return (f"a run may still be writing it (written {minutes} min ago, by a run that left no lock to tell "
                    "by); it is removed once it is an hour old")
        if _kind(folder) != "temporary":
            return 0, []  # its writer placed it and let the lock go while this looked: an entry now
        return _remove_own(folder)
    finally:
        os.close(fd)


def _sweep(root: Path, entry: str) -> None:
    """Remove the temporary folders that runs converting the entry `entry` left (killed
    while writing): a new conversion of the same source does not leave them to a clear."""
    now = time.time()
    try:
        for path in _children(root):
            if path.name.startswith(TEMPORARY) and _kind(path) == "temporary" and _marker(path)["folder"] == entry:
                _remove_temporary(path, now)
    except (OSError, VectorsError):
        pass  # what is left, clear removes


def remove_entry(folder: Path) -> str | None:
    """Remove a damaged entry before it is converted again: only what attncli wrote in it, and
    only when its marker shows attncli made the folder; a symbolic link in its place is
    removed, never what it points to. Returns None once the folder is gone, else why it was
    left."""
    try:
        st = os.lstat(folder)
        if stat.S_ISLNK(st.st_mode):
            os.unlink(folder)
            return None
        if _kind(folder) != "entry":
            return f"it has no {MARKER} marker, so it is not a folder attncli made"
        _, left = _remove_own(folder)
    except FileNotFoundError:
        return None
    except (OSError, VectorsError) as e:
        return f"it could not be removed: {getattr(e, 'strerror', None) or e}"
    return f"it holds files attncli did not write: {', '.join(left[:5])}" if left else None


def entries() -> list[dict]:
    """Every cache entry (a folder attncli's marker names): its folder, size on disk,
    metadata when that is sound, and `damaged` (None, or what is wrong), the newest first."""
    found = []
    for folder in _children(cache_dir()):
        if _kind(folder) != "entry":
            continue
        entry = {"path": str(folder), "bytes": _own_bytes(folder), "damaged": None}
        try:
            meta = _read_meta(str(folder / PREFIX), bundled=False)
            entry.update({k: v for k, v in meta.items() if k not in entry})
            read_entry(folder / PREFIX, "")  # every check a load makes
        except DamagedEntry as e:
            entry["damaged"] = str(e)
        found.append(entry)
    return sorted(found, key=lambda e: e.get("created") or "", reverse=True)


def clear() -> dict:
    """Remove every cache entry and every temporary folder a run left (killed while writing
    it: see _remove_temporary), only what attncli wrote in them. Returns {"removed": entries removed,
    "bytes": bytes freed, "kept": [{"path", "reason"}] of what was left and why, "links":
    [{"path", "target"}] of symbolic links to entries, removed without touching their
    targets}."""
    result = {"removed": 0, "bytes": 0, "kept": [], "links": []}
    now = time.time()
    for path in _children(cache_dir()):
        try:
            if os.path.islink(path):
                if os.path.isdir(path) and _marker(path) is not None:  # a link to an entry elsewhere
                    target = os.readlink(path)
                    os.unlink(path)
                    result["links"].append({"path": str(path), "target": target})
                continue
            kind = _kind(path) or ("entry" if path.is_dir() and _legacy(path) else None)
            if kind is None:
                continue  # not attncli's
            done = _remove_own(path) if kind == "entry" else _remove_temporary(path, now)
        except (OSError, VectorsError) as e:
            result["kept"].append({"path": str(path), "reason": f"cannot be removed: {getattr(e, 'strerror', None) or e}"})
            continue
        if isinstance(done, str):
            result["kept"].append({"path": str(path), "reason": done})
            continue
        freed, left = done
        result["bytes"] += freed
        result["removed"] += kind == "entry"
        if left:
            shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
            result["kept"].append({"path": str(path), "reason": f"holds files attncli did not write: {shown}"})
    return result


# --------------------------------------------------------------------------- verify: every byte, against its SHA-256


SUMS = ".sha256"  # beside the bundled entry: the SHA-256s of its files, as sha256sum writes them
READ = 1 << 22  # bytes a read while hashing


def to_verify(name: str | None = None) -> list[tuple[Path, bool]]:
    """The entries `vectors verify` checks, as (prefix, bundled): without `name`, the bundled
    entry and every cache entry; else the bundled entry by its name (BUNDLED), or the cache
    entries whose vectors have that name (`vectors list` shows it), or the one whose folder
    has that name or path. VectorsError when `name` names none."""
    found = [(bundled_prefix(), True)] if name in (None, BUNDLED) else []
    if name != BUNDLED:
        for folder in _children(cache_dir()):
            if _kind(folder) == "entry" and (name is None or name == folder.name
                                            or os.path.abspath(name) == os.path.abspath(folder)
                                            or name in _names_of(folder)):
                found.append((folder / PREFIX, False))
    if not found:
        raise VectorsError(f"no cache entry is named {name!r}: give a name or path that `attncli vectors list` shows, "
                           f"or {BUNDLED} (the bundled vectors)")
    return found


def _names_of(folder: Path) -> set[str]:
    """What names an entry: its vectors' name, and the path of the source it was made from
    (as given, and as this folder sees it), which `vectors list` shows."""
    try:
        meta = _read_meta(str(folder / PREFIX), bundled=False)
    except VectorsError:
        return set()  # damaged: found by its folder alone
    source = meta.get("source", {}).get("path") if isinstance(meta.get("source"), dict) else None
    return {meta["name"], *([source, os.path.relpath(source)] if isinstance(source, str) else [])}


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
        meta = _read_meta(str(prefix), bundled=bundled)
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
            raise _unreadable(path, e) from None
    return sha.hexdigest()


def _bundled_sums(prefix: Path) -> dict | None:
    """{suffix: SHA-256} of the bundled entry's files, from BUNDLED.sha256 (sha256sum's
    lines: the hash, two spaces, the file's name); None where it is missing or malformed."""
    try:
        text = _read_small(f"{prefix}{SUMS}", MARKER_MOST, follow=True).decode("ascii")
    except (DamagedEntry, UnicodeDecodeError):
        return None
    sums = {}
    for line in text.splitlines():
        sha, _, name = line.partition("  ")
        if not (_is_sha256(sha) and name.startswith(prefix.name)):
            return None
        sums[name[len(prefix.name):]] = sha
    return sums if set(sums) == {*SUFFIXES, ".json"} else None
