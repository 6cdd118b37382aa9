"""Files read only when they are regular files, and only to a size this run can hold.

A FIFO with no writer would hang a reader for ever and a device never ends, so neither is
read as a file; a file, standard input or a line larger than its share of the memory left
(limits.py) is refused: before it is read when its size says so, else as soon as it holds
more. Also the lock a run holds, while it lasts, on a marker file it made.
"""

from __future__ import annotations

import errno
import os
import stat

from attncli.system import limits
from attncli.system.limits import ResourceError, size


def regular_file(path: str | os.PathLike, what: str) -> os.stat_result:
    """stat() of `path`, refusing what is not a regular file (a FIFO with no writer would hang
    a reader for ever, a device never ends) with an error naming it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ResourceError(f"{path}: no such file; give {what} a file that exists") from None
    except OSError as e:
        raise ResourceError(f"{path}: cannot be read: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ResourceError(f"{path}: is a directory; give {what} a file")
    if not stat.S_ISREG(st.st_mode):
        raise ResourceError(f"{path}: not a regular file (a device, FIFO or socket); give {what} a regular file")
    return st


def open_regular(path: str | os.PathLike, what: str):
    """A binary file object for a regular file, opened without blocking (a FIFO put in its
    place after a stat would otherwise hang the open) and checked again once open."""
    regular_file(path, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise ResourceError(f"{path}: cannot be read: {e.strerror or e}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ResourceError(f"{path}: not a regular file (a device, FIFO or socket); give {what} a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_file(path: str | os.PathLike, what: str, *, most: int | None = None) -> bytes:
    """The bytes of a regular file, to its end, refused when larger than `most` (default:
    what memory can hold a few copies of, as decoding and splitting make them): before
    reading when its size says so, else as soon as it holds more. A file's size is only a
    hint: /proc files are regular and of size 0, and a file may grow while it is read."""
    most = input_limit() if most is None else most
    with open_regular(path, what) as f:
        n = os.fstat(f.fileno()).st_size
        _check_input_size(n, str(path), most)
        try:
            first = f.read(n + 1)  # all of a file its size describes, in one read
            if len(first) <= n:
                return first
            return _read_to_end(f, str(path), most, first=first)
        except OSError as e:
            raise ResourceError(f"{path}: cannot be read: {e.strerror or e}") from None


def read_stream(stream, where: str, *, most: int | None = None, chunk: int = 1 << 20) -> bytes:
    """All of a stream (standard input), a chunk at a time, stopping with an error once it
    holds more than `most` bytes: an endless stream (/dev/zero) must not take all memory."""
    most = input_limit() if most is None else most
    try:
        return _read_to_end(stream, where, most, chunk=chunk)
    except OSError as e:
        if e.errno == errno.EBADF:
            return b""  # a closed standard input holds nothing
        raise


def _read_to_end(f, where: str, most: int, *, first: bytes = b"", chunk: int = 1 << 20) -> bytes:
    """`first` and the rest of `f`, a chunk at a time, refused once more than `most` bytes."""
    parts, total = [first], len(first)
    while True:
        if total > most:
            raise ResourceError(f"{where} holds more than {size(most)}, more than this run can take in memory "
                                "(a few copies of the text are made); give a smaller input, or split it")
        data = f.read(chunk)
        if not data:
            return b"".join(parts)
        total += len(data)
        parts.append(data)


def input_limit() -> int:
    """The most bytes of input (a file, standard input, a line) a run takes in memory."""
    # the text is decoded (up to 4 bytes a character in memory), split and tokenized: a tenth
    # of the memory available keeps all of that within it
    return max(limits.available() // 10, 1 << 20)


def _check_input_size(n: int, where: str, most: int | None) -> None:
    most = input_limit() if most is None else most
    if n > most:
        raise ResourceError(f"{where} holds {size(n)}, more than this run can take in memory ({size(most)}); "
                            "give a smaller input, or split it")


def lock(fd: int, *, wait: bool) -> bool | None:
    """An exclusive flock of `fd`: True once held, False when another open file holds it
    (only without `wait`), None where the filesystem has no locks. The kernel lets a lock go
    when its process ends, however it ends (SIGKILL, the OOM killer): a file locked now
    belongs to a run that goes on, one whose lock is free to a run that ended."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    except OSError as e:
        if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return None
        raise
    return True
