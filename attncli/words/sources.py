"""Users' word vectors, read through gensim, with the checks gensim leaves out.

`resolve` turns a SOURCE into a local regular file (a path, or a gensim-data name already
downloaded); `detect` tells its format from its content, never from its name alone; `read`
loads it with gensim into Vectors, except a text file of plain decimals, which numpy parses
to the very words and float32 values gensim's reader gives (plaintext.py). gensim is
imported only here, and only when a file must be read by it: a cached or bundled load
never needs it. A file's bytes reach gensim through a thread that counts and bounds its
lines (feed.py).

gensim raises bare ValueError or EOFError for most broken files, allocates whatever a header
claims, and silently stops at a header's word count; the checks here name the file, the
line or the word, and what to do.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import os
import stat
import struct
import sys
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli.errors import AttncliError, VectorsError
from attncli.words.feed import (CHUNK, FIRST_LINE_MOST, UNICODE_ERRORS, WORD_MOST, Feed, Lines, LongLine, Progress,
                                Ticker, decompressed, line_most)
from attncli.system.home import expand, home, no_home
from attncli.system.reading import read_file
from attncli.visible import count
from attncli.words.plaintext import read_plain_text
from attncli.words.vectors import Subwords, Vectors, Vocabulary

Warn = Callable[[str], None]

FASTTEXT_MAGIC = (793712314).to_bytes(4, "little")  # Facebook's .bin models start with it
VECTOR_SUFFIXES = (".txt", ".vec", ".bin", ".gz", ".bz2", ".kv", ".model", ".w2v", ".glove")


def _long_line(path: Path, e: LongLine, dim: int | None) -> VectorsError:
    values = f"a word and {dim:,} values" if dim else "the line that gives a GloVe file's dimension"
    return VectorsError(f"{path}: line {e.number:,} is longer than {e.most:,} bytes, more than {values} can take "
                        "(64 bytes a value, 1 MB for the word); it is not a vectors file, or it is damaged")


@dataclass
class Source:
    path: Path  # a local regular file
    label: str  # the source as the user named it
    stat: os.stat_result


@dataclass
class Format:
    kind: str  # "word2vec-text", "word2vec-binary", "glove", "fasttext" or "pickle"
    compression: str | None = None  # "gzip" or "bz2"
    count: int | None = None  # words, from a word2vec header or (GloVe) counted
    dim: int | None = None


def gensim_data_dir() -> Path:
    # gensim.downloader's own rule, repeated so that finding a downloaded model does not
    # import gensim (a second of start-up): GENSIM_DATA_DIR, or else ~/gensim-data.
    if os.environ.get("GENSIM_DATA_DIR"):
        return Path(os.environ["GENSIM_DATA_DIR"])
    base = home()
    if base is None:
        raise VectorsError(f"gensim-data models are kept in GENSIM_DATA_DIR or ~/gensim-data, and {no_home()}; "
                           "set GENSIM_DATA_DIR or HOME")
    return base / "gensim-data"


def shortened(text: str, most: int = 200) -> str:
    """A path for a message: a very long one shown by its start and end."""
    return text if len(text) <= most else f"{text[:most // 2]}...{text[-most // 4:]} ({len(text):,} characters)"


def resolve(spec: str, param: str = "--vectors") -> Source:
    """The local regular file a SOURCE names; VectorsError for anything else. `param` is how
    a message names where the source was given (the option, or an argument: SOURCE)."""
    if "://" in spec:
        raise VectorsError(f"{shortened(spec)}: only local files are read; download it first and give its path")
    try:
        return _resolve(spec, param)
    except OSError as e:  # a name too long, a loop of links, an I/O error: whatever stat or listing meets
        raise VectorsError(f"{shortened(spec)}: cannot be read: {e.strerror or e}") from None
    except ValueError as e:  # an embedded NUL
        raise VectorsError(f"{shortened(spec)}: not a usable path: {e}") from None


def _resolve(spec: str, param: str) -> Source:
    expanded = expand(spec)
    if expanded is None:
        head = spec.split(os.sep, 1)[0]
        if head != "~" and os.path.lexists(spec):
            expanded = spec  # a file named "~name" in this folder, with no user "name" to expand
        elif head == "~":
            raise VectorsError(f"{shortened(spec)}: ~ cannot be expanded without a home directory ({no_home()}); "
                               "give the full path, or set HOME")
        else:
            raise VectorsError(f"{shortened(spec)}: {shortened(head)} cannot be expanded: there is no user "
                               f"{shortened(head[1:])!r}; give the full path")
    path = Path(expanded)
    if not path.exists() and os.sep not in spec and not spec.lower().endswith(VECTOR_SUFFIXES):
        path = _gensim_data_file(spec)
    shown = shortened(str(path))
    try:
        st = path.stat()
    except FileNotFoundError:
        choices = ("a word vectors file, a downloaded gensim-data name, or leave it out for the bundled vectors"
                   if param.startswith("--") else "a word vectors file or a downloaded gensim-data name")
        raise VectorsError(f"{shown}: no such file; give {param} {choices}") from None
    except OSError as e:
        raise VectorsError(f"{shown}: cannot be read: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise VectorsError(f"{shown}: is a directory; give {param} a word vectors file")
    if not stat.S_ISREG(st.st_mode):
        raise VectorsError(f"{shown}: not a regular file (a device, FIFO or socket); give {param} a word vectors file")
    if not os.access(path, os.R_OK):
        raise VectorsError(f"{shown}: permission denied")
    return Source(path, spec, st)


def _gensim_data_file(name: str) -> Path:
    """The file gensim.downloader keeps for a model: BASE/NAME/NAME.gz. attncli never
    downloads (no network at run time); when it is missing, say how to get it."""
    try:
        base = gensim_data_dir()
    except VectorsError as e:
        raise VectorsError(f"{shortened(name)}: no such file, and no folder to look for a gensim-data model of that "
                           f"name in: {e}") from None
    folder = base / name
    found = sorted(p for p in folder.glob(f"{name}*") if p.is_file()) if folder.is_dir() else []
    if found:
        return next((p for p in found if p.name == f"{name}.gz"), found[0])
    size = ""
    try:  # gensim keeps its catalogue here once it has fetched it
        catalogue = json.loads(read_file(base / "information.json", "the gensim-data catalogue", most=64 << 20))
        entry = {**catalogue.get("models", {}), **catalogue.get("corpora", {})}.get(name)
        if entry and entry.get("file_size"):
            size = f" ({entry['file_size'] / 1e6:,.0f} MB)"
    except (AttncliError, OSError, ValueError, AttributeError, TypeError, RecursionError):
        pass
    raise VectorsError(
        f"{name}: no such file, and no gensim-data model of that name in {base}; if it is one, "
        f"download it once{size} with: python -m gensim.downloader --download {name}"
    )


def _read_error(path: Path, compression: str | None, e: BaseException) -> VectorsError:
    """What an exception while reading a file means: an OSError with an errno (too many open
    files, an I/O error) is the machine's; any other (zlib, gzip, bz2, EOF) the data's."""
    if isinstance(e, OSError) and e.errno is not None:
        return VectorsError(f"{path}: cannot be read: {e.strerror or e}")
    return VectorsError(f"{path}: the {compression} data is corrupt: {e}")


def _is_text(chunk: bytes, dim: int) -> bool:
    """Whether what follows a word2vec header is text lines rather than packed float32.

    A first vector line of "word" and `dim` numbers is text. Otherwise (a malformed text
    line, or binary) the bytes decide: packed floats hold NULs and invalid UTF-8 within a
    few vectors, and many control characters; text has none of these, or a stray few."""
    if _vector_line_size(chunk.split(b"\n", 1)[0]) == dim:
        return True
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(chunk)  # a character cut at the end is fine
    except UnicodeDecodeError:
        return False
    controls = sum(ord(c) < 32 and c not in "\t\n\r" for c in text)
    return "\x00" not in text and controls <= len(text) // 100


def _vector_line_size(line: bytes) -> int | None:
    """How many numbers follow the word when `line` reads as "word v1 v2 ...", else None.
    NaN and infinity count as numbers here: the check for them names the word."""
    try:
        fields = line.decode("utf-8").rstrip().split(" ")
        values = [float(x) for x in fields[1:]]
    except (UnicodeDecodeError, ValueError):
        return None
    return len(values) or None


def detect(source: Source) -> Format:
    """The format of a file, from its first bytes (decompressed first where it is .gz or .bz2)."""
    path = source.path
    with open(path, "rb") as raw:
        head = raw.read(4)
    compression = "gzip" if head[:2] == b"\x1f\x8b" else "bz2" if head[:3] == b"BZh" else None
    try:
        with open(path, "rb") as raw, decompressed(raw, compression) as f:
            first = f.readline(FIRST_LINE_MOST + 1)
            rest = f.read(CHUNK)
    except (OSError, EOFError, zlib.error) as e:
        raise _read_error(path, compression, e) from None
    if not first:
        raise VectorsError(f"{path}: is empty, not a word vectors file")
    if len(first) > FIRST_LINE_MOST and first[:4] != FASTTEXT_MAGIC and first[:1] != b"\x80":
        raise _long_line(path, LongLine(1, FIRST_LINE_MOST), None)
    if first[:1] == b"\x80" and first[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return Format("pickle", compression)
    if first[:4] == FASTTEXT_MAGIC:
        if compression:
            raise VectorsError(f"{path}: a compressed fastText .bin model; decompress it first")
        return Format("fasttext")
    header = first.split()
    if len(header) == 2 and all(x.isdigit() for x in header):
        count, dim = int(header[0]), int(header[1])
        if dim < 1:
            raise VectorsError(f"{path}: line 1 says vectors of {dim:,} values")
        return Format("word2vec-text" if _is_text(rest, dim) else "word2vec-binary", compression, count, dim)
    if _vector_line_size(first):
        return Format("glove", compression)
    raise VectorsError(
        f"{path}: not a word vectors file: line 1 is neither a word2vec 'COUNT DIM' header nor a "
        "GloVe 'word value value ...' line, and the file is no fastText .bin or gensim model"
    )


@contextlib.contextmanager
def _quiet():
    """gensim's and numpy's own warnings and log lines silenced while a reader runs: what
    they would say raw (a value beyond float32, a nonsense sampling threshold, a word that
    is not UTF-8) is checked here and said once, in plain words, as attncli's error or
    warning; the loggers' levels are restored after."""
    loggers = [logging.getLogger(name) for name in ("gensim", "smart_open")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def read(source: Source, fmt: Format, *, limit: int | None = None, trust_pickle: bool = False,
         progress: Progress | None = None, warn: Warn | None = None) -> Vectors:
    """Load a source (through gensim, or read_plain_text) and check what gensim does not."""
    warn = warn or (lambda message: None)
    with _quiet():
        return _read(source, fmt, limit, trust_pickle, progress, warn)


def _read(source: Source, fmt: Format, limit: int | None, trust_pickle: bool, progress: Progress | None,
          warn: Warn) -> Vectors:
    if fmt.kind == "pickle":
        words, matrix, subwords = _read_pickle(source, trust_pickle, limit)
    elif fmt.kind == "fasttext":
        words, matrix, subwords = _read_fasttext(source, limit, progress)
    else:
        words, matrix, subwords = _read_word2vec(source, fmt, limit, progress, warn)
    if not words:
        raise VectorsError(f"{source.path}: holds no word vectors")
    _check_finite(source.path, words, matrix)
    if subwords is not None and not np.all(np.isfinite(subwords.matrix)):
        raise VectorsError(f"{source.path}: its subword (n-gram) vectors hold NaN or infinity")
    replaced = sum("\ufffd" in w for w in words)
    if replaced:
        warn(f"{source.path}: {count(replaced, 'word')} {'is' if replaced == 1 else 'are'} not valid UTF-8; "
             f"{'its' if replaced == 1 else 'their'} bad bytes are shown as \ufffd")
    cased = any(w != w.lower() for w in words)
    name = Path(source.label).name  # the file's name, or the gensim-data model's
    return Vectors(name, Vocabulary.from_words(words), matrix, cased, str(source.path), subwords)


def _check_finite(path: Path, words: list[str], matrix: np.ndarray, block: int = 1 << 16) -> None:
    """The first word whose vector holds NaN or infinity, named; a block of rows at a time, so
    the check never holds a second matrix-sized array."""
    bad = np.concatenate([start + np.flatnonzero(~np.isfinite(matrix[start : start + block]).all(axis=1))
                          for start in range(0, len(matrix), block)] or [np.empty(0, dtype=np.int64)])
    if len(bad):
        raise VectorsError(f"{path}: the vector of {words[bad[0]]!r} holds NaN or infinity"
                           + (f" ({len(bad):,} words in all)" if len(bad) > 1 else ""))


def _import_gensim() -> None:
    """Import gensim, with or without a home directory. smart_open, which gensim imports,
    expands ~/.ssh/config as it is imported, and Path.expanduser raises RuntimeError when
    there is no home directory (HOME unset, no passwd entry): that import alone is given a
    HOME that does not exist. The path is used only for ssh:// URLs, which attncli never opens."""
    if "gensim.models" in sys.modules or not os.path.expanduser("~").startswith("~"):
        import gensim.models  # noqa: F401
        return
    os.environ["HOME"] = "/nonexistent"
    try:
        import gensim.models  # noqa: F401
    finally:
        del os.environ["HOME"]


def _read_pickle(source: Source, trust_pickle: bool, limit: int | None):
    if not trust_pickle:
        raise VectorsError(
            f"{source.path}: a gensim model file is a Python pickle, and loading one runs whatever code "
            "it holds; give --trust-pickle only if you trust where it came from"
        )
    _import_gensim()
    from gensim.models import KeyedVectors
    from gensim.utils import SaveLoad

    try:
        obj = SaveLoad.load(str(source.path))
    except Exception as e:  # unpickling can raise anything the pickle's code raises
        raise VectorsError(f"{source.path}: cannot be loaded as a gensim model: {type(e).__name__}: {e}") from e
    kv = getattr(obj, "wv", obj)
    if not isinstance(kv, KeyedVectors):
        raise VectorsError(f"{source.path}: holds a {type(obj).__name__}, not word vectors")
    try:
        return _from_keyed_vectors(kv, limit)
    except Exception as e:  # noqa: BLE001: an unpickled object's parts (its side files) can be anything
        raise VectorsError(f"{source.path}: a gensim model whose vectors cannot be read "
                           f"({type(e).__name__}: {e}); is a side file (.npy beside it) damaged?") from e


def _from_keyed_vectors(kv, limit: int | None):
    # gensim preallocates a slot for every word a header promises and leaves the slots of
    # skipped duplicates empty (None) at the end: the filled ones come first
    words = [w for w in kv.index_to_key[:limit] if w is not None]
    matrix = np.asarray(kv.vectors[: len(words)], dtype=np.float32)  # (V, d)
    subwords = None
    if getattr(kv, "bucket", 0) and getattr(kv, "vectors_ngrams", None) is not None and len(kv.vectors_ngrams):
        subwords = Subwords(np.asarray(kv.vectors_ngrams, dtype=np.float32), int(kv.min_n), int(kv.max_n))
    return words, matrix, subwords


def _read_fasttext(source: Source, limit: int | None, progress: Progress | None):
    _import_gensim()
    from gensim.models.fasttext import load_facebook_vectors

    # gensim reads the matrix with numpy.fromfile, which needs a real file: give it one by
    # descriptor, and follow the descriptor's offset for the progress bar.
    _check_fasttext_size(source)
    fd = os.open(source.path, os.O_RDONLY)
    try:
        with Ticker(lambda: os.lseek(fd, 0, os.SEEK_CUR), source.stat.st_size, progress):
            kv = load_facebook_vectors(fd)
    except Exception as e:  # noqa: BLE001: gensim's binary reader raises anything on a damaged model
        raise VectorsError(f"{source.path}: not a valid fastText .bin model: {type(e).__name__}: {e}") from e
    finally:
        os.close(fd)
    return _from_keyed_vectors(kv, limit)


def _check_fasttext_size(source: Source) -> None:
    """Refuse a fastText .bin smaller than its header says it must be: gensim reads the words
    a byte at a time until a NUL, and at the end of a truncated file it would loop forever.

    Layout (Facebook's fasttext.cc): magic, version, 12 int32 args and a double (64 bytes);
    then size, nwords, nlabels (int32), ntokens, pruneidx_size (int64); then each word, a
    NUL, an int64 count and a byte; then the input matrix, (nwords + bucket) x dim float32.
    """
    with open(source.path, "rb") as f:
        head = f.read(92)
    if len(head) < 92:
        raise VectorsError(f"{source.path}: a fastText .bin model cut short in its header")
    dim, bucket = struct.unpack_from("<i", head, 8)[0], struct.unpack_from("<i", head, 40)[0]
    entries, nwords = struct.unpack_from("<2i", head, 64)  # gensim reads `entries` words, the matrix has nwords rows
    if dim < 1 or min(bucket, entries, nwords) < 0:
        raise VectorsError(f"{source.path}: not a valid fastText .bin model: its header holds sizes below 1")
    least = 92 + entries * 11 + 16 + (nwords + bucket) * dim * 4
    if source.stat.st_size < least:
        raise VectorsError(f"{source.path}: a fastText .bin model of {source.stat.st_size:,} bytes, but its header "
                           f"needs at least {least:,}: it is truncated, or not a fastText model")
    _check_fasttext_words(source, entries)


def _check_fasttext_words(source: Source, entries: int, block: int = 1 << 20) -> None:
    """Refuse a word of the dictionary longer than WORD_MOST: gensim reads each a byte at a
    time up to its NUL, and a word of hundreds of megabytes (a damaged model) would take it
    minutes. Each word is followed by an int64 count and a byte of type."""
    with open(source.path, "rb") as f:
        f.seek(92)
        buf, pos, at = b"", 0, 92  # at: the file offset of buf[0]; pos may run past buf's end
        for k in range(entries):
            while (end := buf.find(b"\0", pos, pos + WORD_MOST + 1)) < 0:
                if len(buf) - pos > WORD_MOST:
                    raise VectorsError(f"{source.path}: word {k + 1:,} of its dictionary (at byte {at + pos:,}) is "
                                       f"longer than {WORD_MOST:,} bytes: no NUL ends it; the model is damaged, or "
                                       "not a fastText model")
                more = f.read(block)
                if not more:
                    raise VectorsError(f"{source.path}: a fastText .bin model cut short in its dictionary "
                                       f"(word {k + 1:,} of {entries:,})")
                keep = min(pos, len(buf))
                buf, at, pos = buf[keep:] + more, at + keep, pos - keep
            pos = end + 10  # past the NUL, the count and the type


def _check_header(source: Source, fmt: Format, limit: int | None) -> None:
    """Refuse a header that claims more than the file could hold or memory take, before
    gensim allocates a matrix of that size."""
    words = min(fmt.count, limit) if limit else fmt.count
    need = words * fmt.dim * 4
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > memory:
        raise VectorsError(f"{source.path}: its header claims {fmt.count:,} words of {fmt.dim:,} values "
                           f"({need / 1e9:,.1f} GB), more than this machine's memory; is the header wrong? "
                           "--limit N reads only the first N words")
    smallest = fmt.dim * 4 + 2 if fmt.kind == "word2vec-binary" else fmt.dim * 2  # 4 bytes a value; "0 " a value
    # compressed, the file can hold at most ~1,000 times its size (deflate's limit is 1032:1;
    # bzip2 can go further only on data no vectors file holds)
    room = source.stat.st_size * (1032 if fmt.compression else 1)
    if words * smallest > room:
        raise VectorsError(f"{source.path}: its header claims {fmt.count:,} words of {fmt.dim:,} values, "
                           f"more than a file of {source.stat.st_size:,} bytes can hold")
    if fmt.compression and words * smallest > 50 * source.stat.st_size:
        # vectors compress 2 to 4 times; a claim this far beyond that is checked against
        # the decompressed file before gensim allocates a slot for every word it claims
        held = _words_held(source, fmt)
        if held < words:
            raise VectorsError(f"{source.path}: its header claims {fmt.count:,} words, but the file holds at most "
                               f"{held:,}; it is truncated, or its header is wrong")


def _words_held(source: Source, fmt: Format) -> int:
    """The most words the decompressed file can hold: its lines (text), or its bytes over the
    smallest record (binary)."""
    lines = size = 0
    try:
        with open(source.path, "rb") as raw, decompressed(raw, fmt.compression) as f:
            while chunk := f.read(CHUNK):
                lines += chunk.count(b"\n")
                size += len(chunk)
    except (OSError, EOFError, zlib.error) as e:
        raise _read_error(source.path, fmt.compression, e) from None
    return size // (4 * fmt.dim + 2) if fmt.kind == "word2vec-binary" else lines


def _glove_size(source: Source, fmt: Format, progress: Progress | None) -> tuple[int, int]:
    """(words, dim) of a GloVe file, which has no header to say them: one pass over it, the
    first half of the progress bar. Every line is held to line_most of the dimension line 1
    gives (line 1 itself to FIRST_LINE_MOST)."""
    count = dim = 0
    size = source.stat.st_size
    lines = Lines(FIRST_LINE_MOST)
    try:
        with open(source.path, "rb") as raw, decompressed(raw, fmt.compression) as f, \
                Ticker(lambda: raw.tell(), 2 * size, progress, final=size):
            for _, line in lines.iterate(f):
                if line.strip():
                    count += 1
                    if not dim:
                        dim = len(line.rstrip().split(b" ")) - 1
                        lines.most = line_most(dim)
    except LongLine as e:
        raise _long_line(source.path, e, dim) from None
    return count, dim


def _read_word2vec(source: Source, fmt: Format, limit: int | None, progress: Progress | None, warn: Warn):
    prefix, done_before, size = b"", 0, source.stat.st_size
    if fmt.kind == "glove":
        try:
            fmt.count, fmt.dim = _glove_size(source, fmt, progress)
        except (OSError, EOFError, zlib.error) as e:
            raise _read_error(source.path, fmt.compression, e) from None
        prefix = f"{fmt.count} {fmt.dim}\n".encode()  # gensim's one-pass reader wants a word2vec header
        done_before = size  # the second half of the progress bar
    _check_header(source, fmt, limit)
    binary = fmt.kind == "word2vec-binary"
    plain = None if binary else read_plain_text(source, fmt, limit, lambda done: done_before + done,
                                                done_before + size, progress)
    if plain is not None:
        words, matrix = plain
    else:
        words, matrix = _read_through_gensim(source, fmt, limit, progress, prefix, done_before, size)
    expected = min(fmt.count, limit) if limit else fmt.count
    if len(words) < expected:
        twice = expected - len(words)
        warn(f"{source.path}: " + ("1 word occurs twice or more; its first vector is kept" if twice == 1 else
                                   f"{twice:,} words occur twice or more; the first vector of each is kept"))
    return words, matrix, None


def _read_through_gensim(source: Source, fmt: Format, limit: int | None, progress: Progress | None, prefix: bytes,
                         done_before: int, size: int) -> tuple[list[str], np.ndarray]:
    _import_gensim()
    from gensim.models import KeyedVectors

    binary = fmt.kind == "word2vec-binary"
    feed = Feed(source.path, fmt.compression, prefix, drain=not limit, dim=fmt.dim, binary=binary,
                header_line=fmt.kind == "word2vec-text")
    feed.start()
    try:
        # a value beyond float32 becomes infinity as gensim casts it, named by word below (_quiet: not warned of)
        with Ticker(lambda: done_before + feed.position, done_before + size, progress):
            kv = KeyedVectors.load_word2vec_format(feed.read_fd, binary=binary, limit=limit,
                                                   unicode_errors=UNICODE_ERRORS)
    except (ValueError, EOFError, UnicodeDecodeError, IndexError, MemoryError) as e:
        feed.finish()
        if feed.error:
            raise _read_error(source.path, fmt.compression, feed.error) from None
        if feed.too_long:  # the feed stopped there, and gensim met the end of what it was given
            raise _too_long(source, fmt, feed) from None
        raise VectorsError(_explain(source, fmt, feed, e)) from e
    feed.finish()
    if feed.error:
        raise _read_error(source.path, fmt.compression, feed.error)
    if feed.too_long:
        raise _too_long(source, fmt, feed)
    if feed.bad_line:  # gensim broadcasts a row of one value to the whole row, silently
        raise VectorsError(_wrong_length(source, fmt, feed))
    words, matrix, _ = _from_keyed_vectors(kv, None)
    if not limit:
        _check_nothing_left(source, fmt, feed, words)
    return words, matrix


def _too_long(source: Source, fmt: Format, feed: Feed) -> VectorsError:
    if isinstance(feed.too_long, LongLine):
        return _long_line(source.path, feed.too_long, fmt.dim)
    return VectorsError(f"{source.path}: from byte {feed.too_long:,} on, more than {4 * fmt.dim + 1 + WORD_MOST:,} "
                        f"bytes hold no space, so a word there is longer than {WORD_MOST:,} bytes (the space after "
                        "a word ends it); it is not a word2vec binary file, or it is damaged")


def _wrong_length(source: Source, fmt: Format, feed: Feed) -> str:
    number, values = feed.bad_line
    said = "its header says" if fmt.kind == "word2vec-text" else "its first line has"
    return f"{source.path}: line {number:,} holds {values:,} values, but {said} {fmt.dim:,}"


def _explain(source: Source, fmt: Format, feed: Feed, e: Exception) -> str:
    if isinstance(e, EOFError):
        held = f", but the file holds {feed.lines - (fmt.kind == 'word2vec-text')}" if fmt.kind != "word2vec-binary" else ""
        return (f"{source.path}: ends before the {fmt.count:,} words its header promises{held}; "
                "it is truncated, or its header is wrong")
    if isinstance(e, MemoryError):
        return f"{source.path}: too large for this machine's memory; --limit N reads only the first N words"
    if feed.bad_line:
        return _wrong_length(source, fmt, feed)
    where = "" if fmt.kind == "word2vec-binary" else _first_bad_line(source, fmt)
    return f"{source.path}: not a valid {fmt.kind} file{where}: {e}"


def _first_bad_line(source: Source, fmt: Format) -> str:
    """", line N" for the first line that is not "word" and DIM numbers; gensim's own
    messages rarely say where."""
    try:
        with open(source.path, "rb") as raw, decompressed(raw, fmt.compression) as f:
            for number, line in Lines(line_most(fmt.dim)).iterate(f):
                if number == 1 and fmt.kind == "word2vec-text":
                    continue
                if _vector_line_size(line.rstrip(b"\r")) != fmt.dim:
                    return f", line {number}"
    except LongLine as e:
        return f", line {e.number} (longer than {e.most:,} bytes)"
    return ""


def _check_nothing_left(source: Source, fmt: Format, feed: Feed, words: list[str]) -> None:
    """gensim stops at the header's word count without a word about the rest of the file."""
    if fmt.kind == "word2vec-binary":
        # "COUNT DIM\n", then each word's bytes, a space and 4 bytes a value, and a newline
        # if the file's first record has one; a duplicate gensim dropped counts as long as
        # the longest word, and a word whose bad bytes became U+FFFD counts longer than it was
        header = feed.head.index(b"\n") + 1
        first = feed.head.find(b" ", header) + 1 + 4 * fmt.dim
        newline = int(feed.head[first : first + 1] == b"\n")
        record = 1 + 4 * fmt.dim + newline
        lengths = [len(w.encode()) for w in words]
        most = header + sum(lengths) + len(lengths) * record + (fmt.count - len(lengths)) * (max(lengths, default=0) + record)
        if feed.bytes > most:
            raise VectorsError(f"{source.path}: holds more than the {fmt.count:,} words its header says; "
                               "its header is wrong")
    else:
        lines = feed.lines - (fmt.kind == "word2vec-text")
        if lines > fmt.count:
            raise VectorsError(f"{source.path}: its header says {fmt.count:,} words, but it holds {lines:,} "
                               "lines of vectors; its header is wrong")
