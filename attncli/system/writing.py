"""Files written whole or not at all, as a run's outputs are: into a temporary file beside
their place, renamed into it once whole, with the mode open() would have given them (the
umask respected), and only where a regular file or nothing stands.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from attncli.errors import OutputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def not_replaceable(path: Path) -> str | None:
    """Why attncli will not replace `path`: only a regular file (or nothing) may be replaced,
    never a device, FIFO, socket or directory, even with --force."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be written: {e.strerror or e}"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a device, FIFO or socket), which attncli never replaces"
    return None


def write_whole(path: Path, write) -> None:
    """write(binary file) into a temporary file beside `path` (beside its target, when it is
    a symlink, so the link stays), then rename it into place: the file is written whole or
    not at all. Any failure (a full disk, a file-size limit, no permission) is an
    OutputError, the temporary file removed."""
    import tempfile

    target = Path(os.path.realpath(path))
    problem = not_replaceable(target)
    if problem:
        raise OutputError(f"{path} {problem}; give another path")
    try:
        fd, temporary = tempfile.mkstemp(prefix=".attncli-", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise OutputError(f"{path}: cannot be written: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(temporary, 0o666 & ~_umask())  # as open() would have made it, not mkstemp's 0600
        os.replace(temporary, target)
    except OSError as e:
        Path(temporary).unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot be written: {e.strerror or e}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
