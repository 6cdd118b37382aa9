"""Output taller than the terminal through a pager, as git and gh page theirs.

Only when stdout is a terminal and the text, as drawn, does not fit on it; the pager is
ATTNCLI_PAGER, else PAGER, else less (with LESS=FRX when LESS is unset: it quits at once
on a text that fits, passes colours through and leaves the text on the screen). An empty
value or "cat" means no pager, as does --no-pager. The command is split as a shell would
split it (no shell runs it), and given the text, colours and all, on its standard input.
A pager that cannot be started is a warning, and the text is written directly; one quit
before the end (q) is no error, one that fails (a status other than 0) is, and one that
Ctrl-C ends ends the run as Ctrl-C does. A dumb terminal (TERM=dumb) is never paged.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shlex
import signal
import subprocess
import sys

from attncli.errors import AttncliError

DEFAULT = "less"
DEFAULT_LESS = "FRX"  # -F quit if one screen, -R colours as they are, -X no screen clearing at the end

# what a terminal does not show as characters: the colours rich writes (SGR) and other CSI, OSC
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


class PagerError(AttncliError):
    """The pager ended badly: what it was given may not have been shown."""


def command(environ=os.environ) -> str | None:
    """The pager command line, or None for none (also on a dumb terminal, where less would
    only complain)."""
    if environ.get("TERM") == "dumb":
        return None
    for name in ("ATTNCLI_PAGER", "PAGER"):
        value = environ.get(name)
        if value is not None:
            break
    else:
        value = DEFAULT
    return None if value.strip() in ("", "cat") else value


def rows(text: str, width: int) -> int:
    """How many rows of a terminal `width` columns wide `text` fills: a line longer than
    the width takes more than one."""
    from rich.cells import cell_len

    lines = _ESCAPES.sub("", text).split("\n")
    if lines[-1] == "":  # the end of the last line
        lines.pop()
    return sum(max(1, math.ceil(cell_len(line) / width)) for line in lines)


def fits(text: str, width: int, height: int) -> bool:
    """Whether `text` fits on a screen of `height` rows, the last kept for the prompt (as
    less -F counts)."""
    return rows(text, max(width, 1)) < height


def page(text: str, line: str, warn) -> bool:
    """Show `text` through the pager command `line`; False, after a warning, when it
    cannot be started (the caller writes the text itself)."""
    try:
        argv = shlex.split(line)
    except ValueError as e:
        warn(f"cannot run the pager {line!r}: {e}; writing directly (ATTNCLI_PAGER= turns paging off)")
        return False
    env = dict(os.environ)
    env.setdefault("LESS", DEFAULT_LESS)
    env.setdefault("LV", "-c")  # lv, if that is the pager: colours as they are
    data = text.encode(getattr(sys.stdout, "encoding", None) or "utf-8", "backslashreplace")
    sys.stdout.flush()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env)
    except (OSError, ValueError) as e:
        warn(f"cannot run the pager {line!r}: {getattr(e, 'strerror', None) or e}; writing directly "
             "(ATTNCLI_PAGER= turns paging off)")
        return False
    # Ctrl-C is the pager's while it runs (less stops a search with it); attncli waits
    with _ignoring(signal.SIGINT):
        try:
            proc.communicate(data)  # a pager quit early (q) closes the pipe: communicate ignores that
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if proc.returncode in (-signal.SIGINT, 128 + signal.SIGINT):  # Ctrl-C ended the pager itself
        raise KeyboardInterrupt
    if proc.returncode != 0:
        ended = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
                 else f"ended with status {proc.returncode}")
        raise PagerError(f"the pager {line!r} {ended}, so the output may not have been shown; "
                         "--no-pager writes it directly (or ATTNCLI_PAGER=)")
    return True


@contextlib.contextmanager
def _ignoring(signum):
    try:
        previous = signal.signal(signum, signal.SIG_IGN)
    except ValueError:  # not the main thread (an embedding program): leave it be
        yield
        return
    try:
        yield
    finally:
        signal.signal(signum, previous)
