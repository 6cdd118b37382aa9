"""The vectors cache: a folder of entries (entry.py), one for each source converted, so
that a source is read through gensim once and memory-mapped at every later load.

Cache entries live in ATTNCLI_CACHE_DIR, or else the platform's user cache directory, one
folder each (PREFIX is FOLDER/vectors). A folder is written under a temporary name
(.tmp-*), its marker file .attncli-entry first, and renamed into place whole, so that no
reader ever sees half an entry; its writer holds a lock (flock) on the marker until then,
which tells a folder being written from one a killed run left. Only a folder whose marker
says attncli made it, under its own name, is ever read or removed, and only the file names
attncli writes are removed from it: the cache directory may hold anything else
(ATTNCLI_CACHE_DIR can name a folder of the user's), and that is never touched.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from pathlib import Path

from attncli import reading
from attncli.entry import (BUNDLED, FORMAT, FORMAT_VERSION, META_MOST, NGRAMS, SUFFIXES, DamagedEntry, bundled_prefix,
                           is_int, read_entry, read_meta, read_small, unreadable, write_entry)
from attncli.errors import VectorsError
from attncli.home import expand, no_home
from attncli.vectors import Vectors
from attncli.version import __version__

PREFIX = "vectors"  # a cache entry's files: FOLDER/vectors.npy, FOLDER/vectors.words.txt, ...
MARKER = ".attncli-entry"  # in every folder attncli makes in the cache directory
TEMPORARY = ".tmp-"  # the name a folder has while it is written
OWN_FILES = tuple(PREFIX + s for s in (*SUFFIXES, NGRAMS, ".json"))  # what attncli writes in a folder, with MARKER
MARKER_MOST = 4096
LOCK = "flock"  # a marker's "lock": its writer holds an flock on it while it writes the folder
YOUNG = 3600  # seconds: a temporary folder this recent, whose marker has no lock, may still be being written


class NoCacheDir(VectorsError):
    """There is no cache directory: no ATTNCLI_CACHE_DIR, and no home directory to find the
    platform's user cache directory in."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"{reason}; set HOME or ATTNCLI_CACHE_DIR")


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
        raise unreadable(str(path), e) from None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MARKER_MOST:
        return None
    try:
        doc = json.loads(read_small(str(path), MARKER_MOST, follow=False).decode("utf-8"))
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
        meta = json.loads(read_small(str(folder / f"{PREFIX}.json"), META_MOST, follow=False).decode("utf-8"))
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
        raise unreadable(str(folder), e) from None
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
            run = f"attncli (process {pid})" if is_int(pid) else "a run of attncli"
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
            meta = read_meta(str(folder / PREFIX), bundled=False)
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


# --------------------------------------------------------------------------- the entries vectors verify checks


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
        meta = read_meta(str(folder / PREFIX), bundled=False)
    except VectorsError:
        return set()  # damaged: found by its folder alone
    source = meta.get("source", {}).get("path") if isinstance(meta.get("source"), dict) else None
    return {meta["name"], *([source, os.path.relpath(source)] if isinstance(source, str) else [])}
