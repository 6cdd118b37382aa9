"""Where a run's word vectors come from: the bundled entry, a cache entry, or a source
read once (through gensim, or numpy for plain text) and then cached."""

from __future__ import annotations

import os

from collections.abc import Callable

from attncli.errors import VectorsError, whole
from attncli.words import cache
from attncli.words.entry import DamagedEntry, EntryUnreadable, entry_bytes, read_bundled, verify_entry
from attncli.words.vectors import Vectors


def load_vectors(source: str | os.PathLike | None = None, *, limit: int | None = None, trust_pickle: bool = False,
                 use_cache: bool = True, progress: Callable[[int, int], None] | None = None,
                 warn: Callable[[str], None] | None = None, param: str = "--vectors",
                 must_cache: bool = False, verify: bool = False) -> Vectors:
    """Word vectors to look sentences up in.

    source: None for the bundled GloVe 6B 50d vectors; else a word2vec (text or binary),
    GloVe or fastText (.vec or .bin) file, possibly .gz or .bz2, a gensim .kv/.model file
    (only with trust_pickle: it is a pickle), or the name of a downloaded gensim-data model.
    limit: read only the first `limit` words (of the bundled vectors, ordered by frequency, the
    `limit` most frequent: a view of their rows). The first load of a source writes a cache
    entry (see entry.py and cache.py) that later loads memory-map; use_cache=False skips it.
    progress(done, total) is called while a source is read; warn(message) for warnings.
    param: how an error about the source names where it was given ("--vectors", "SOURCE").
    must_cache: a cache entry is what is asked for (`vectors convert`): what would be a
    warning and a run without the cache (a cache directory that cannot be written) is a
    VectorsError instead. verify: an entry already there is used only if every file of it
    is as it was written (entry.verify_entry, which reads it all); else it is converted again.
    """
    warn = warn or (lambda message: None)

    def without_cache(why: str, fix: str) -> None:
        if must_cache:
            raise VectorsError(f"{why}; {fix}")
        warn(f"{why}; going on without the vectors cache ({fix})")

    limit = None if limit is None else whole("limit", limit, 1)
    if source is None:
        bundled = read_bundled()
        return bundled.first(limit) if limit else bundled
    from attncli.words import sources  # file formats and gensim: not needed for the bundled vectors

    src = sources.resolve(os.fspath(source), param)
    options = {"limit": limit, "unicode_errors": sources.UNICODE_ERRORS}
    folder = None
    if use_cache:
        try:
            folder = cache.entry_dir(src.path, src.stat, options)
        except cache.NoCacheDir as e:
            without_cache(e.reason, "set HOME or ATTNCLI_CACHE_DIR to keep one")
    if folder is not None:
        why = None  # what is wrong with the entry there, which is then converted again
        try:
            cached = cache.read_cached(folder, str(src.path))
            if cached is not None and verify:
                why = _unverified(folder / cache.PREFIX, progress)
            if cached is not None and why is None:
                return cached
        except DamagedEntry as e:  # damage only: an entry that cannot be read now (EMFILE) is an error
            why = f"is damaged ({e})"
        if why is not None:
            left = cache.remove_entry(folder)
            if left is None:
                warn(f"the cache entry for {src.path} {why}; converting it again")
            else:
                without_cache(f"the cache entry for {src.path} {why}, and {folder} was left as it is: {left}",
                              "remove that folder to let it be written again")
                folder = None
    try:
        fmt = sources.detect(src)
        vectors = sources.read(src, fmt, limit=limit, trust_pickle=trust_pickle, progress=progress, warn=warn)
    except OSError as e:  # too many open files, no memory for a pipe or a thread: not the file's fault
        raise VectorsError(f"{src.path}: cannot be read: {e.strerror or e}") from None
    meta = {"source": {"path": str(src.path.resolve()), "size": src.stat.st_size,
                       "mtime_ns": src.stat.st_mtime_ns, "format": fmt.kind, "compression": fmt.compression},
            "options": options}
    vectors.meta = meta
    if folder is not None:
        try:
            cache.store(folder, vectors, meta)
        except (OSError, VectorsError) as e:
            without_cache(f"cannot write the vectors cache in {folder.parent} ({getattr(e, 'strerror', None) or e})",
                          "set ATTNCLI_CACHE_DIR to a writable directory")
            return vectors
        try:
            written = cache.read_cached(folder, str(src.path))
        except VectorsError as e:
            without_cache(f"the cache entry {folder} was written but cannot be read back ({e})",
                          "run it again, or set ATTNCLI_CACHE_DIR to another directory")
            return vectors
        if written is not None:
            vectors.meta = written.meta
    return vectors


def _unverified(prefix, progress) -> str | None:
    """What keeps the entry at `prefix` from verifying (entry.verify_entry), said after "the
    cache entry": None when it verifies. An entry that cannot be read now is an error."""
    total, done = entry_bytes(prefix), 0

    def hashed(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    checked = verify_entry(prefix, hashed=hashed)
    if checked["status"] == "unreadable":
        raise EntryUnreadable(checked["problem"])
    if checked["status"] == "unchecked":
        return f"holds no SHA-256s to verify it by ({checked['problem']})"
    return None if checked["ok"] else f"is damaged ({checked['problem']})"
