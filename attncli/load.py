"""Where a run's word vectors come from: the bundled entry, a cache entry, or a source
read once (through gensim, or numpy for plain text) and then cached."""

from __future__ import annotations

import os

from collections.abc import Callable

from attncli import cache
from attncli.errors import VectorsError, whole
from attncli.vectors import Vectors


def load_vectors(source: str | os.PathLike | None = None, *, limit: int | None = None, trust_pickle: bool = False,
                 use_cache: bool = True, progress: Callable[[int, int], None] | None = None,
                 warn: Callable[[str], None] | None = None, param: str = "--vectors") -> Vectors:
    """Word vectors to look sentences up in.

    source: None for the bundled GloVe 6B 50d vectors; else a word2vec (text or binary),
    GloVe or fastText (.vec or .bin) file, possibly .gz or .bz2, a gensim .kv/.model file
    (only with trust_pickle: it is a pickle), or the name of a downloaded gensim-data model.
    limit: read only the first `limit` words (of the bundled vectors, ordered by frequency, the
    `limit` most frequent: a view of their rows). The first load of a source writes a cache
    entry (see cache.py) that later loads memory-map; use_cache=False skips it.
    progress(done, total) is called while a source is read; warn(message) for warnings.
    param: how an error about the source names where it was given ("--vectors", "SOURCE").
    """
    warn = warn or (lambda message: None)
    limit = None if limit is None else whole("limit", limit, 1)
    if source is None:
        bundled = cache.read_bundled()
        return bundled.first(limit) if limit else bundled
    from attncli import sources  # file formats and gensim: not needed for the bundled vectors

    src = sources.resolve(os.fspath(source), param)
    options = {"limit": limit, "unicode_errors": sources.UNICODE_ERRORS}
    folder = None
    if use_cache:
        try:
            folder = cache.entry_dir(src.path, src.stat, options)
        except cache.NoCacheDir as e:
            warn(f"{e.reason}; going on without the vectors cache (set HOME or ATTNCLI_CACHE_DIR to keep one)")
    if folder is not None:
        try:
            cached = cache.read_cached(folder, str(src.path))
            if cached is not None:
                return cached
        except cache.DamagedEntry as e:  # damage only: an entry that cannot be read now (EMFILE) is an error
            left = cache.remove_entry(folder)
            if left is None:
                warn(f"the cache entry for {src.path} is damaged ({e}); converting it again")
            else:
                warn(f"the cache entry for {src.path} is damaged ({e}), and {folder} was left as it is: {left}; "
                     "going on without the vectors cache (remove that folder to let it be written again)")
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
            warn(f"cannot write the vectors cache in {folder.parent} ({getattr(e, 'strerror', None) or e}); "
                 "going on without it (set ATTNCLI_CACHE_DIR to a writable directory)")
            return vectors
        try:
            written = cache.read_cached(folder, str(src.path))
        except VectorsError as e:
            warn(f"the cache entry {folder} was written but cannot be read back ({e}); going on without it")
            return vectors
        if written is not None:
            vectors.meta = written.meta
    return vectors
