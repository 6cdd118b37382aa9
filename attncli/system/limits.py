"""What a run may take: memory checked before a large allocation.

A size a user or a file declares (a sentence's T, a header's word count, a zip member, a
--d-k) is checked here against the memory this process can still get, before anything of
that size is allocated, so a request that cannot fit is one clear error rather than a
MemoryError half way through, or a machine driven into swap. Files are read within this
budget by reading.py.
"""

from __future__ import annotations

import os
import resource

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
