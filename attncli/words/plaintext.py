"""A text vectors file of plain decimals parsed by numpy, to the very words and float32 values
gensim's reader gives (`read_plain_text`), a block of lines at a time and, for a large file,
in worker processes; any other file is left to gensim (sources.py), which says what is wrong.
"""

from __future__ import annotations

import os
import warnings
import zlib
from collections.abc import Callable

import numpy as np

from attncli.corpus import workers
from attncli.errors import VectorsError, WorkerLost
from attncli.words.feed import UNICODE_ERRORS, Progress, Ticker, decompressed, line_most

# What a plain text vectors file's numbers are made of: digits, a point, signs, exponents.
PLAIN = b"0123456789.+-eE "
BLOCK = 1 << 20  # bytes of text parsed at a time (about 6 MB in flight): only the matrix grows with the file


def read_plain_text(source, fmt, limit: int | None, done: Callable[[int], int], total: int,
                    progress: Progress | None) -> tuple[list[str], np.ndarray] | None:
    """The words and float32 matrix of a text file (word2vec text, fastText .vec, GloVe,
    compressed or not) in which every line is a word, a space, and fmt.dim decimal numbers
    between single spaces, exactly as gensim's load_word2vec_format reads them: the first
    vector of a repeated word, a word's bad bytes as U+FFFD, each number parsed to the
    nearest double and that rounded to float32, as gensim's np.float32(text) does; None for
    any other file, which gensim then reads, with today's errors.

    gensim parses a number at a time in Python (94 s for 400,000 x 300); here numpy parses a
    block of text at once (np.fromstring, the same correctly rounded strtod as Python's
    float), in worker processes too for a large file (np.fromstring holds the GIL). It stops
    early at what it cannot read, with a warning (an error here), and its separator " "
    would take runs of spaces as one: so each line's spaces are counted, the block holds
    only PLAIN bytes and no two spaces together, and the count of numbers read must be the
    count of tokens, one number a token.

    `source` and `fmt` are sources.py's Source and Format, read for their fields only: this
    module sits below sources.py, which calls it."""
    wanted = min(fmt.count, limit) if limit else fmt.count
    try:
        matrix = np.empty((wanted, fmt.dim), dtype=np.float32)  # (V, d): the header was checked against memory
    except (ValueError, MemoryError):  # a shape numpy refuses (0 words of 2^63 values), or no room
        return None  # gensim's path says which
    try:
        with open(source.path, "rb") as raw, decompressed(raw, fmt.compression) as f, \
                Ticker(lambda: done(raw.tell()), total, progress):
            blocks = _plain_blocks(f, fmt.dim, wanted, fmt.kind == "word2vec-text", limit is None, line_most(fmt.dim))
            return _assemble(blocks, matrix, _parsers(source.stat.st_size))
    except (_NotPlain, OSError, EOFError, zlib.error):
        return None  # gensim reads it again, and says what is wrong
    except WorkerLost as e:  # read again, it would meet the same end
        raise VectorsError(f"{source.path}: its numbers were not all parsed, so nothing was loaded: {e}") from None


class _NotPlain(Exception):
    """A file read_plain_text leaves to gensim."""


PARALLEL = 64 << 20  # bytes of a file from which worker processes parse its numbers


def _parsers(size: int) -> int:
    """Processes to parse a file's numbers: one a core (at most four) for a large file, none
    (this one) for a small one, or where this process is itself a worker (of batch, of Dask)."""
    import multiprocessing

    if size < PARALLEL or multiprocessing.parent_process() is not None:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cores, 4)  # past about four, this process's splitting of the lines is the limit


def _plain_blocks(f, dim: int, wanted: int, header: bool, whole: bool, most: int):
    """(words as bytes, their numbers' text) of each block of lines; _NotPlain at a line
    that is not a word and `dim` plain numbers, and past `wanted` lines when `whole`."""
    lines_read, carry, rest = 0, b"", []
    while lines_read < wanted:
        block = f.read(BLOCK)
        lines = (carry + block).split(b"\n")
        carry = lines.pop() if block else b""  # a line the next block ends; at the end, the last line is one
        if len(carry) > most:
            raise _NotPlain
        if header and lines:
            lines, header = lines[1:], False  # "COUNT DIM", which detect has read
        rest = lines[wanted - lines_read :]  # lines past the header's count
        lines = [line.rstrip() for line in lines[: wanted - lines_read]]  # as gensim strips a line
        if not lines:
            if not block:
                raise _NotPlain  # fewer lines than the header says
            continue
        if max(map(len, lines)) > most:
            raise _NotPlain  # gensim's path names the line
        split = [line.partition(b" ") for line in lines]  # (word, " ", numbers)
        numbers = [part[2] for part in split]
        if any(n.count(b" ") != dim - 1 for n in numbers):
            raise _NotPlain
        text = b" ".join(numbers)
        if text.translate(None, PLAIN) or b"  " in text:
            raise _NotPlain
        yield [part[0] for part in split], text
        lines_read += len(lines)
    if whole and (rest or carry or f.read(1)):  # more than the header says: gensim's path says what
        raise _NotPlain


def _parse_numbers(block: tuple[bytes, int, int]) -> np.ndarray | None:
    """A block's text of n x d numbers as float32 (n, d), each cast as gensim casts it;
    None where it is not one number a token."""
    text, n, d = block
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # numpy's "could not be read to its end"
            values = np.fromstring(text, dtype=np.float64, sep=" ")  # (n * d,)
    except (ValueError, DeprecationWarning):
        return None
    if values.size != n * d:
        return None
    with np.errstate(over="ignore"):  # beyond float32: infinity, as gensim's cast; the finite check names it
        return values.reshape(n, d).astype(np.float32)  # (n, d)


def _parser_start(job, worker: bool = False) -> None:
    if worker:
        workers.worker_signals()


def _assemble(blocks, matrix: np.ndarray, jobs: int) -> tuple[list[str], np.ndarray]:
    """The blocks' numbers parsed (by `jobs` processes, in order) into `matrix` (V, d), the
    first row of each word kept."""
    from collections import deque

    d = matrix.shape[1]
    words: dict[str, None] = {}  # the words kept, in order: a repeated one is not kept again
    stash: deque = deque()  # the words of the blocks sent to be parsed, in order

    def texts():
        for block_words, text in blocks:
            stash.append(block_words)
            yield text, len(block_words), d

    parsed = workers.in_order(_parse_numbers, texts(), _parser_start, None, jobs)
    try:
        for rows in parsed:
            block_words = stash.popleft()
            if rows is None:
                raise _NotPlain
            keep = []
            for k, word in enumerate(block_words):
                word = word.decode("utf-8", UNICODE_ERRORS)
                if word not in words:
                    words[word] = None
                    keep.append(k)
            matrix[len(words) - len(keep) : len(words)] = rows if len(keep) == len(rows) else rows[keep]
    finally:
        parsed.close()  # with workers: they end here, whatever happened
    return list(words), matrix[: len(words)]
