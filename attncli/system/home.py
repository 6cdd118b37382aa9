"""The user's home directory, when there is one.

A process can run without one: HOME unset (a service, `env -i`, some containers) and a
uid with no entry in the passwd database. Python then leaves "~" as it is
(os.path.expanduser) or raises RuntimeError (Path.home, Path.expanduser), and a path
built on it would be relative: a folder named "~" made in whatever directory the run
started in. Here there is either an absolute home directory, or None and a reason.
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path | None:
    """The home directory as os.path.expanduser finds it (HOME, else the passwd entry of this
    uid), or None when that is no absolute path."""
    if os.environ.get("HOME") == "":  # expanduser would make "~/x" into "/x"
        return None
    expanded = os.path.expanduser("~")
    return Path(expanded) if os.path.isabs(expanded) else None


def no_home() -> str:
    """Why there is no home directory, for a message."""
    value = os.environ.get("HOME")
    if value is not None:
        return "HOME is empty" if not value else f"HOME is {value!r}, not an absolute path"
    uid = os.getuid() if hasattr(os, "getuid") else None
    try:
        import pwd

        pwd.getpwuid(uid)
    except (ImportError, KeyError, TypeError):
        return f"HOME is not set and user {uid} has no entry in the passwd database"
    return f"HOME is not set and the passwd entry of user {uid} gives no home directory"


def expand(spec: str) -> str | None:
    """`spec` with a leading ~ or ~user expanded; None when it cannot be (no home directory,
    no such user). A spec without a leading ~ is returned as it is."""
    if not spec.startswith("~"):
        return spec
    head = spec.split(os.sep, 1)[0]
    if head == "~":
        return None if home() is None else os.path.expanduser(spec)
    expanded = os.path.expanduser(spec)
    return expanded if os.path.isabs(expanded) else None
