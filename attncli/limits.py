"""What a run may take: memory checked before a large allocation, and files read only when
they are regular files of a size the caller can hold.

A size a user or a file declares (a sentence's T, a header's word count, a zip member, a
--d-k) is checked here against the memory this process can still get, before anything of
that size is allocated, so a request that cannot fit is one clear error rather than a
MemoryError half way through, or a machine driven into swap.
"""

from __future__ import annotations

import errno
import os
import resource
import stat

from attncli.errors import AttncliError


class ResourceError(AttncliError):
    """A request larger than the memory this process can get, or an input larger than it may be."""


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (OSError, ValueError, AttributeError):
        return None


def _status(field: bytes) -> int:
    """A field of /proc/self/status in bytes (VmSize, VmData), 0 when unknown."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(field + b":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _cgroup_room() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max", "rb") as f:
            limit = f.read().strip()
        if limit == b"max":
            return None
        with open("/sys/fs/cgroup/memory.current", "rb") as f:
            return int(limit) - int(f.read().strip())
    except (OSError, ValueError):
        return None


def available() -> int:
    """Bytes this process can still allocate: the least of the memory the system has free,
    the room left under an address-space or data-size limit (ulimit -v, -d), and the room
    left in a control group's limit."""
    room = [_meminfo_available()]
    for limit, used in ((resource.RLIMIT_AS, b"VmSize"), (resource.RLIMIT_DATA, b"VmData")):
        soft = resource.getrlimit(limit)[0]
        if soft != resource.RLIM_INFINITY:
            room.append(soft - _status(used))
    room.append(_cgroup_room())
    known = [r for r in room if r is not None]
    return max(min(known), 0) if known else 1 << 62


def size(n: float) -> str:
    """A byte count for people: 1.2 GB, 340 MB, 12 kB (and 3.2e+26 bytes past petabytes)."""
    if n >= 1e15:
        return f"{n:.1e} bytes"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n)} bytes"


def require(need: float, what: str, hint: str) -> None:
    """Refuse, before allocating, a request of `need` bytes that memory cannot hold."""
    room = available()
    if need > room:
        raise ResourceError(f"{what} needs about {size(need)} of memory, and {size(room)} is available; {hint}")


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
    return max(available() // 10, 1 << 20)


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
