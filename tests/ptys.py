"""Running the installed attncli with some of its standard streams on a terminal: a
pseudo-terminal of a given size, the others pipes, as a user's shell would arrange them."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ATTNCLI = str(Path(sys.executable).parent / "attncli")

# The environment of every run: nothing that changes colour, vectors or paging, unless given.
QUIET = ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CLICOLOR_FORCE", "ATTNCLI_VECTORS", "COLUMNS",
         "LINES", "PAGER", "ATTNCLI_PAGER", "LESS", "PYTHONWARNINGS")

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()][0-9A-Za-z]?")


def plain(text: str) -> str:
    """`text` without terminal escape sequences and carriage returns."""
    return ANSI.sub("", text).replace("\r", "")


@dataclass
class Terminal:
    """A process whose streams named in `on_tty` are one pseudo-terminal; the others pipes."""

    proc: subprocess.Popen
    master: int
    screen: bytearray = field(default_factory=bytearray)  # what the process wrote to the terminal
    done: threading.Event = field(default_factory=threading.Event)

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every end of the terminal is closed
                break
            if not data:
                break
            self.screen += data
        self.done.set()

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def wait_for(self, text: str, timeout: float = 60) -> None:
        """Until `text` is on the terminal (escape sequences aside)."""
        end = time.monotonic() + timeout
        while text not in plain(self.screen.decode("utf-8", "replace")):
            if time.monotonic() > end or self.proc.poll() is not None and self.done.is_set():
                raise AssertionError(f"{text!r} never showed; the terminal holds {bytes(self.screen)!r}")
            time.sleep(0.05)

    def finish(self, timeout: float = 120) -> tuple[int, bytes, bytes, str]:
        """(exit status, stdout if a pipe, stderr if a pipe, the terminal's text)."""
        out, err = self.proc.communicate(timeout=timeout)
        self.done.wait(timeout)
        os.close(self.master)
        return self.proc.returncode, out or b"", err or b"", self.screen.decode("utf-8", "replace")


def start(args, *, on_tty=("stdin", "stdout", "stderr"), input: bytes | None = None, env=None, rows=24, cols=100,
          cwd=None) -> Terminal:
    """Start `attncli args` with the streams in `on_tty` on a new terminal of rows x cols,
    its controlling terminal (as a pager reading keys from /dev/tty needs); stdin, when a
    pipe, is given `input`. `env` adds to the environment (a value None unsets), in which
    ATTNCLI_PAGER is empty (no pager) unless it gives one."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    full_env = {k: v for k, v in os.environ.items() if k not in QUIET}
    full_env.update({"TERM": "xterm-256color", "ATTNCLI_PAGER": "", **(env or {})})  # no pager unless asked for
    full_env = {k: v for k, v in full_env.items() if v is not None}  # None: unset
    pipe = subprocess.PIPE
    streams = {name: (slave if name in on_tty else pipe) for name in ("stdin", "stdout", "stderr")}
    if "stdin" not in on_tty and input is None:
        streams["stdin"] = subprocess.DEVNULL
    tty_fd = {"stdin": 0, "stdout": 1, "stderr": 2}[on_tty[0]] if on_tty else None

    def controlling_terminal():
        if tty_fd is not None:
            fcntl.ioctl(tty_fd, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([ATTNCLI, *map(str, args)], **streams, env=full_env, cwd=cwd, start_new_session=True,
                            preexec_fn=controlling_terminal)
    os.close(slave)
    terminal = Terminal(proc, master)
    threading.Thread(target=terminal._read, daemon=True).start()
    if input is not None and proc.stdin is not None:
        proc.stdin.write(input)
        proc.stdin.close()
        proc.stdin = None
    return terminal


def run(args, **kwargs) -> tuple[int, bytes, bytes, str]:
    """start(args, ...) to its end."""
    return start(args, **kwargs).finish()
