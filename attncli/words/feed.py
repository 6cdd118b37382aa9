"""How a vectors file's bytes reach a reader, bounded: decompressed by content, cut into lines
a chunk at a time, each line held to a bound (`line_most`) as soon as it grows past it.

`Feed` is the thread that copies a file's decompressed bytes into the pipe gensim reads by
descriptor, counting the lines and bytes gensim does not check and stopping where a line or
a word is too long for gensim to be given it; `Ticker` reports a load's progress while it
runs. Neither knows gensim: the readers (sources.py, plaintext.py) use them.
"""

from __future__ import annotations

import bz2
import gzip
import os
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

Progress = Callable[[int, int], None]  # (bytes read, bytes in all)

UNICODE_ERRORS = "replace"  # a word that is not valid UTF-8 keeps its place, its bad bytes shown as U+FFFD
CHUNK = 1 << 16
# The longest word a vectors file may hold, and with it the longest line: a word, then d
# values of at most 64 bytes each ("-1.2345678901234567e-308" is 24). Past it a file is
# refused at once, naming the line: a line of hundreds of megabytes (a file that is not
# vectors, or a damaged one) would otherwise be gathered whole, by gensim and here.
WORD_MOST = 1 << 20
VALUE_MOST = 64
# Line 1 of a GloVe file gives the dimension, so its bound cannot come from it: 4 MiB holds
# a word and 49,152 values of 64 bytes.
FIRST_LINE_MOST = 4 << 20


def line_most(dim: int) -> int:
    """The longest line a text vectors file of dimension `dim` may hold."""
    return VALUE_MOST * dim + WORD_MOST


class LongLine(Exception):
    """A line longer than its bound: (line number, bound)."""

    def __init__(self, number: int, most: int):
        super().__init__(number, most)
        self.number, self.most = number, most


class Lines:
    """The lines of a stream given a chunk at a time, numbered from 1 (blank ones too) and
    each refused past `most` bytes as soon as it grows beyond them, however long it goes on:
    a line is gathered only once it ends, so a long one costs no repeated copying."""

    def __init__(self, most: int):
        self.most = most
        self.number = 0  # lines ended so far
        self._parts: list[bytes] = []  # the line still open
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines `chunk` ends (without their newline); LongLine past the bound."""
        pieces = chunk.split(b"\n")
        if len(pieces) == 1:
            self._parts.append(chunk)
            self._size += len(chunk)
            if self._size > self.most:
                raise LongLine(self.number + 1, self.most)
            return []
        lines = [b"".join(self._parts) + pieces[0], *pieces[1:-1]]
        for k, line in enumerate(lines):
            if len(line) > self.most:
                raise LongLine(self.number + k + 1, self.most)
        self.number += len(lines)
        self._parts, self._size = [pieces[-1]], len(pieces[-1])
        if self._size > self.most:
            raise LongLine(self.number + 1, self.most)
        return lines

    def end(self) -> bytes:
        """The last line, which no newline ended (b"" when the stream ended with one)."""
        return b"".join(self._parts)

    def iterate(self, stream):
        """(number, line) for every line of a binary stream, read a chunk at a time."""
        while chunk := stream.read(CHUNK):
            lines = self.feed(chunk)
            first = self.number - len(lines) + 1
            yield from enumerate(lines, start=first)
        last = self.end()
        if last:
            yield self.number + 1, last


def decompressed(raw, compression: str | None):
    """An open file's content decompressed as `compression` says (detect tells it from the
    first bytes): a gzip or bz2 stream over it, or the file itself."""
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "bz2":
        return bz2.BZ2File(raw, mode="rb")
    return raw


class Feed(threading.Thread):
    """Copies a file's decompressed content into a pipe that gensim reads by descriptor.

    Through it attncli sees how far a load has got (progress), gives GloVe text the
    header gensim's one-pass reader wants, decompresses by content rather than by name,
    and counts the lines and bytes the file holds, which gensim does not check. It stops
    at a line longer than line_most(dim) (text), or a word longer than WORD_MOST (binary:
    a run of bytes without a space longer than a vector and such a word), so that gensim
    never gathers one: `too_long` then says where.
    """

    def __init__(self, path: Path, compression: str | None, prefix: bytes, *, drain: bool, dim: int,
                 binary: bool = False, header_line: bool = False):
        super().__init__(daemon=True)
        self.path, self.compression, self.prefix, self.drain = path, compression, prefix, drain
        self.dim, self.binary, self.header_line = dim, binary, header_line
        self.read_fd, self._write_fd = os.pipe()
        self.position = 0  # bytes of the file read so far (compressed bytes, for .gz and .bz2)
        self.bytes = 0  # decompressed bytes
        self.head = b""  # the first decompressed chunk
        self.lines = 0  # non-blank lines (text formats)
        self.bad_line: tuple[int, int] | None = None  # (line number, values) of the first of the wrong length
        self.too_long: LongLine | int | None = None  # text: the line; binary: where a run without a space starts
        self.error: Exception | None = None

    def run(self) -> None:
        sending = True
        lines = None if self.binary else Lines(line_most(self.dim))
        run = 0  # binary: bytes since the last space
        most_run = 4 * self.dim + 1 + WORD_MOST  # a vector, a newline, a word: between one record's space and the next
        try:
            with open(self.path, "rb") as raw, decompressed(raw, self.compression) as stream:
                sending = self._send(self.prefix)
                while chunk := stream.read(CHUNK):
                    self.position = raw.tell()
                    self.head = self.head or chunk
                    if lines is not None:
                        first = lines.number + 1
                        for number, line in enumerate(lines.feed(chunk), start=first):
                            self._check(number, line)
                    else:  # a chunk is far shorter than most_run: only a run across chunks can pass it
                        space = chunk.find(b" ")
                        if space >= 0 and run + space <= most_run:
                            run = len(chunk) - chunk.rfind(b" ") - 1
                        elif space >= 0 or run + len(chunk) > most_run:
                            self.too_long = self.bytes - run  # where the run without a space starts
                            break
                        else:
                            run += len(chunk)
                    self.bytes += len(chunk)
                    if sending:
                        sending = self._send(chunk)
                    if not sending and not self.drain:
                        break
                else:
                    if lines is not None and lines.end():
                        self._check(lines.number + 1, lines.end())
        except LongLine as e:
            self.too_long = e
        except (OSError, EOFError, zlib.error) as e:  # a corrupt .gz or .bz2
            self.error = e
        finally:
            self._close_write()

    def _check(self, number: int, line: bytes) -> None:
        """Count a text line, and note it if it holds the wrong number of values (split as
        gensim splits it: on single spaces, trailing white space stripped)."""
        line = line.rstrip()
        if not line:
            return
        self.lines += 1
        values = line.count(b" ")
        if values != self.dim and self.bad_line is None and not (number == 1 and self.header_line):
            self.bad_line = (number, values)

    def _send(self, data: bytes) -> bool:
        """Write all of `data`; False once the reader has gone (gensim has what it needs)."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._write_fd, view):]
        except BrokenPipeError:
            self._close_write()
            return False
        return True

    def _close_write(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    def finish(self) -> None:
        """After gensim: close our end (a feed still writing gets BrokenPipeError) and wait."""
        if self.read_fd is not None:
            os.close(self.read_fd)
            self.read_fd = None
        self.join()


class Ticker:
    """Calls progress(position(), total) every tenth of a second while a load runs, and
    progress(final, total) at its end (final: total, unless a later pass follows)."""

    def __init__(self, position: Callable[[], int], total: int, progress: Progress | None, final: int | None = None):
        self.position, self.total, self.progress = position, total, progress
        self.final = total if final is None else final
        self._done = threading.Event()

    def __enter__(self):
        if self.progress:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._done.wait(0.1):
            self.progress(self.position(), self.total)

    def __exit__(self, *exc):
        self._done.set()
        if self.progress:
            self._thread.join()
            if exc[0] is None:
                self.progress(self.final, self.total)
