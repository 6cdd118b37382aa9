"""The vectors cache: a folder of entries (entry.py), one for each source converted, so
that a source is read through gensim once and memory-mapped at every later load.

Cache entries live in ATTNCLI_CACHE_DIR, or else the platform's user cache directory, one
folder each (PREFIX is FOLDER/vectors). A folder is written under a temporary name
(.tmp-*), its marker file .attncli-entry first, and renamed into place whole, so that no
reader ever sees half an entry; its writer holds a lock (flock) on the marker until then,
which tells a folder being written from one a killed run left. While a temporary folder
is made or removed, its marker is linked beside it too (its journal, .tmp-*.attncli-entry),
so that a run killed in that moment leaves nothing that no marker proves attncli's. Only a
folder whose marker says attncli made it, under its own name, is ever read or removed, and
only the file names attncli writes are removed from it: the cache directory may hold
anything else (ATTNCLI_CACHE_DIR can name a folder of the user's), and that is never touched.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from pathlib import Path

from attncli.system import reading
from attncli.words.entry import (BUNDLED, FORMAT, FORMAT_VERSION, META_MOST, NGRAMS, SUFFIXES, DamagedEntry,
                                 bundled_prefix, is_int, read_entry, read_meta, read_small, unreadable, write_entry)
from attncli.errors import VectorsError
from attncli.system.home import expand, no_home
from attncli.version import __version__
from attncli.words.vectors import Vectors

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
    return _marker_at(folder / MARKER)


def _marker_at(path: Path) -> dict | None:
    """The marker in the file `path` (a regular file), None when it is not one attncli wrote."""
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


JOURNAL = MARKER  # a temporary folder NAME's marker, while it is made or removed, is linked as NAME + JOURNAL too


# how a system says it cannot make a file without a name (O_TMPFILE: an old kernel, a filesystem
# without it), or cannot give it one (no /proc mounted, a /proc that does not follow its links)
UNNAMED_REFUSED = (errno.EISDIR, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOENT, errno.EXDEV, errno.EPERM)


def _journal(folder: Path) -> Path:
    return folder.with_name(folder.name + JOURNAL)


def _journal_of(path: Path, folder: Path) -> bool:
    """Whether `path` is the journal of the temporary folder `folder` (there or not)."""
    doc = _marker_at(path)
    return doc is not None and doc.get("temporary") == folder.name and folder.name.startswith(TEMPORARY)


def _proof(folder: Path) -> Path | None:
    """The marker that proves `folder` a temporary folder of attncli's, or proves that one
    was there (a run killed as it made or removed it): its own, else its journal beside it."""
    if _kind(folder) == "temporary":
        return folder / MARKER
    journal = _journal(folder)
    if not _journal_of(journal, folder):
        return None
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return journal  # the folder is gone, or was never made: the journal is what is left
    return journal if stat.S_ISDIR(st.st_mode) else None


def _temporary(root: Path, entry: str) -> tuple[Path, int]:
    """A new temporary folder in `root` for the entry `entry`, and its marker's descriptor,
    locked: the lock is held from before the marker says whose folder it is until the
    descriptor is closed, after the folder was renamed into place or removed. The kernel
    lets a lock go when its process ends, however it ends (SIGKILL, the OOM killer), so a
    folder whose marker is locked is being written now, and one whose lock is free was left.

    The marker is made whole and locked before it has a name (O_TMPFILE), then linked beside
    the folder to be (its journal), and only then is the folder made, the marker linked into
    it and the journal unlinked: whenever the run is killed, what it leaves is proved attncli's
    by a whole marker, in the folder or beside it (_proof). Where the filesystem cannot make a
    file without a name, the marker is written in the new folder (_temporary_in_place)."""
    try:
        fd = os.open(root, os.O_TMPFILE | os.O_WRONLY, 0o644)
    except AttributeError:  # no O_TMPFILE here (macOS)
        return _temporary_in_place(root, entry)
    except OSError as e:
        if e.errno not in UNNAMED_REFUSED:
            raise
        return _temporary_in_place(root, entry)
    folder = journal = None
    try:
        locked = reading.lock(fd, wait=True)
        while folder is None:
            name = TEMPORARY + os.urandom(8).hex()
            doc = json.dumps(_marker_doc(entry, name, bool(locked)), ensure_ascii=True) + "\n"
            os.ftruncate(fd, 0)
            os.pwrite(fd, doc.encode("ascii"), 0)  # a few hundred bytes: written whole
            journal = _journal(root / name)  # ours only once it is this very file (_discard looks)
            try:
                _link_open(fd, journal)
            except FileExistsError:  # someone else's file, by chance
                continue
            except OSError as e:  # no /proc to name the file by: as a filesystem without O_TMPFILE
                if e.errno not in UNNAMED_REFUSED:
                    raise
                os.close(fd)
                return _temporary_in_place(root, entry)
            try:
                os.mkdir(root / name, 0o700)
            except FileExistsError:  # someone else's folder, by chance: never ours to touch
                os.unlink(journal)
                continue
            folder = root / name
        os.link(journal, folder / MARKER)
        os.unlink(journal)
    except BaseException:
        if journal is not None:
            _discard(journal.with_name(name), fd, journal)
        os.close(fd)
        raise
    return folder, fd


def _link_open(fd: int, path: Path) -> None:
    """Give the file open as `fd`, made without a name (O_TMPFILE), the name `path`."""
    where = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:  # a directory descriptor makes os.link call linkat, which follows /proc's link to the file
        os.link(f"/proc/self/fd/{fd}", path.name, dst_dir_fd=where, follow_symlinks=True)
    finally:
        os.close(where)


def _temporary_in_place(root: Path, entry: str) -> tuple[Path, int]:
    """_temporary where the marker cannot be made before its folder: the folder, then its
    marker in it, locked, then written. A run killed between leaves a folder whose marker is
    missing or empty, which nothing proves attncli's: it stays."""
    import tempfile

    temporary = Path(tempfile.mkdtemp(prefix=TEMPORARY, dir=root))
    fd = None
    try:
        fd = os.open(temporary / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        locked = reading.lock(fd, wait=True)
        with open(fd, "w", encoding="utf-8", closefd=False) as f:
            f.write(json.dumps(_marker_doc(entry, temporary.name, bool(locked)), ensure_ascii=True) + "\n")
    except BaseException:
        _discard(temporary, fd)
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
            _discard(temporary, marker)
        os.close(marker)  # the lock goes only now: the folder is in place, or gone
    return folder


def _discard(temporary: Path, marker: int | None, journal: Path | None = None) -> None:
    """Remove this process's own temporary folder, whose marker it has open as `marker`:
    what it holds of this run's, by that very file (its marker, its journal: linked already
    by _temporary as it makes the folder), never a file or folder of someone else's that
    happens to have its name. Nothing is read, so that a run out of descriptors still
    removes it."""
    try:
        marked = _same_file(temporary / MARKER, marker)
        if journal is not None and not _same_file(journal, marker):
            journal = None
        if journal is None and marked:
            journal = _with_journal(temporary, marker)
        _remove_journaled(temporary, journal, marked=marked)
    except (OSError, VectorsError):
        pass  # its marker or journal stays, if it could not be removed: a later clear takes it


def _same_file(path: Path, fd: int | None) -> bool:
    """Whether `path` is the very file open as `fd`."""
    try:
        return fd is not None and os.path.samestat(os.lstat(path), os.fstat(fd))
    except OSError:
        return False


def _with_journal(folder: Path, marker: int) -> Path | None:
    """`folder`'s marker, open as `marker`, linked beside it as its journal (or found there
    already), for its removal; None where it cannot be (a filesystem without hard links)."""
    journal = _journal(folder)
    try:
        os.link(folder / MARKER, journal)
    except FileExistsError:  # left there by a run killed as it made or removed the folder, or someone else's
        return journal if _same_file(journal, marker) else None
    except OSError:
        return None
    return journal


def _remove_journaled(folder: Path, journal: Path | None, *, marked: bool) -> tuple[int, list[str]]:
    """Remove a temporary folder, its journal (its marker, linked beside it) unlinked last:
    a run killed while it removes the folder, between its marker and the folder itself,
    leaves the journal, which proves the empty folder attncli's. `marked`: the folder holds
    its marker (_remove_own); else only the journal proves it (a run killed as it made the
    folder, before its marker was in it), and it is removed only if empty: nothing is
    written in a folder before its marker."""
    try:
        if marked:
            return _remove_own(folder)
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not os.path.isdir(folder):
                raise
            return 0, sorted(os.listdir(folder))
        return 0, []
    finally:
        if journal is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(journal)


def _remove_temporary(folder: Path, now: float) -> tuple[int, list[str]] | str:
    """Remove a temporary folder that its writer left: (bytes freed, names left in it), or
    why it was kept. A writer holds the lock on its marker, or on the journal that proves
    the folder its (_proof, _temporary); the lock is taken here before anything is removed,
    so a run making or writing the folder now is never touched.
    A marker without a lock (an older attncli, a filesystem without locks) is judged by
    its age instead."""
    marker = _proof(folder)
    if marker is None:
        return 0, []  # renamed into place since it was listed
    doc = _marker_at(marker) or {}
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
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
        proof = _proof(folder)
        if proof is None:
            return 0, []  # its writer placed it and let the lock go while this looked: an entry now
        marked = proof == folder / MARKER
        return _remove_journaled(folder, _with_journal(folder, fd) if marked else proof, marked=marked)
    finally:
        os.close(fd)


def _temporary_named(path: Path) -> Path | None:
    """The temporary folder `path` names (itself, or the folder its journal is named for),
    None for any other name; proved attncli's or not (_proof)."""
    if not path.name.startswith(TEMPORARY):
        return None
    if path.name.endswith(JOURNAL):
        return path.with_name(path.name[: -len(JOURNAL)])
    return path


def _sweep(root: Path, entry: str) -> None:
    """Remove the temporary folders that runs converting the entry `entry` left (killed
    while writing): a new conversion of the same source does not leave them to a clear."""
    now = time.time()
    try:
        for path in map(_temporary_named, _children(root)):
            proof = _proof(path) if path is not None else None
            if proof is not None and (_marker_at(proof) or {}).get("folder") == entry:
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
            named = _temporary_named(path)
            if named is not None and named != path:  # a journal: taken with its folder, or alone when that is gone
                if os.path.lexists(named) or _proof(named) is None:
                    continue
                path = named
            kind = _kind(path) or ("temporary" if named is not None and _proof(path) is not None else None) or (
                "entry" if path.is_dir() and _legacy(path) else None)
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
