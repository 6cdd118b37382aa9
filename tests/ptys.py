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


# DEC private modes a program may set, and how a terminal starts: the cursor shown (25) and
# lines wrapped (7); no alternate screen (1049), mouse tracking (1000, 1002, 1003, 1006,
# 1015, 1016), focus events (1004), bracketed paste (2004) or size reports (2048)
MODES = {"25": True, "7": True, **dict.fromkeys(("1049", "1000", "1002", "1003", "1004", "1006", "1015", "1016",
                                                 "2004", "2048"), False)}
_MODE = re.compile(rb"\x1b\[\?([\d;]+)([hl])")
_KITTY = re.compile(rb"\x1b\[(>\d*|<\d*)u")  # the kitty keyboard protocol's push and pop of its flags
_CONTROL = re.compile(r"(\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()][0-9A-Za-z]?|[\r\n\b])")


@dataclass
class Terminal:
    """A process whose streams named in `on_tty` are one pseudo-terminal; the others pipes."""

    proc: subprocess.Popen
    master: int
    tty: str = ""  # the terminal's device, /dev/pts/N
    before: list = field(default_factory=list)  # its termios settings before the process started
    after: list = field(default_factory=list)  # and once it has ended (finish)
    screen: bytearray = field(default_factory=bytearray)  # what the process wrote to the terminal
    done: threading.Event = field(default_factory=threading.Event)

    def settings(self) -> list:
        """The terminal's termios settings now (as `stty -g` reads them)."""
        fd = os.open(self.tty, os.O_RDWR | os.O_NOCTTY)
        try:
            return termios.tcgetattr(fd)
        finally:
            os.close(fd)

    def modes_left(self) -> dict[str, bool]:
        """The modes of MODES the process left otherwise than a terminal starts (True: on),
        and "kitty" for keyboard flags it pushed and did not pop."""
        now = dict(MODES)
        for numbers, setting in _MODE.findall(bytes(self.screen)):
            for number in numbers.decode().split(";"):
                if number in now:
                    now[number] = setting == b"h"
        left = {mode: on for mode, on in now.items() if on != MODES[mode]}
        pushed = sum(1 if op.startswith(b">") else -1 for op in _KITTY.findall(bytes(self.screen)))
        return {**left, **({"kitty": True} if pushed > 0 else {})}

    def shown(self) -> list[str]:
        """The lines the main screen shows now, as a terminal draws what was written to it:
        characters at the cursor, carriage returns, backspaces, cursor up, erased lines,
        the alternate screen kept apart; a line is not wrapped at the width."""
        screens = {False: [[]], True: [[]]}  # each screen's lines, as lists of characters
        cursors = {False: [0, 0], True: [0, 0]}  # each screen's (row, column)
        alternate = False
        for part in filter(None, _CONTROL.split(self.screen.decode("utf-8", "replace"))):
            lines, at = screens[alternate], cursors[alternate]
            if part == "\n":
                at[0] += 1
            elif part == "\r":
                at[1] = 0
            elif part == "\b":
                at[1] = max(at[1] - 1, 0)
            elif part in ("\x1b[?1049h", "\x1b[?1049l"):
                alternate = part.endswith("h")
                if alternate:  # a fresh alternate screen each time
                    screens[True], cursors[True] = [[]], [0, 0]
            elif re.fullmatch(r"\x1b\[\d*A", part):
                at[0] = max(at[0] - int(part[2:-1] or 1), 0)
            elif re.fullmatch(r"\x1b\[[012]?K", part):
                lines += [[] for _ in range(at[0] + 1 - len(lines))]
                line, how = lines[at[0]], part[2:-1] or "0"
                lines[at[0]] = [] if how == "2" else line[: at[1]] if how == "0" else [" "] * at[1] + line[at[1]:]
            elif not part.startswith("\x1b"):
                lines += [[] for _ in range(at[0] + 1 - len(lines))]
                line = lines[at[0]]
                line += [" "] * (at[1] - len(line))
                line[at[1] : at[1] + len(part)] = part
                at[1] += len(part)
        return ["".join(line).rstrip() for line in screens[False]]

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

    def read(self) -> None:
        """Read what the process writes to the terminal, from now on (start, reading=False)."""
        threading.Thread(target=self._read, daemon=True).start()

    def stall(self) -> None:
        """Fill the terminal's output until it takes nothing more, as one whose reader has
        stalled (not reading, start's reading=False): the process's next write waits."""
        fd = os.open(self.tty, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            while True:
                os.write(fd, b"." * 4096)
        except BlockingIOError:
            pass
        finally:
            os.close(fd)

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
        """(exit status, stdout if a pipe, stderr if a pipe, the terminal's text); `after`,
        the terminal's termios settings then."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:  # a test that fails leaves no process behind it
            self.proc.kill()
            self.proc.communicate()
            raise
        self.done.wait(timeout)
        self.after = self.settings()
        os.close(self.master)
        return self.proc.returncode, out or b"", err or b"", self.screen.decode("utf-8", "replace")


def start(args, *, on_tty=("stdin", "stdout", "stderr"), input: bytes | None = None, env=None, rows=24, cols=100,
          cwd=None, stdout=None, stdin=None, program=(ATTNCLI,), reading=True) -> Terminal:
    """Start `attncli args` (or `program args`) with the streams in `on_tty` on a new
    terminal of rows x cols, its controlling terminal (as a pager reading keys from
    /dev/tty needs), in a session of its own whose foreground it is, as a shell's job is:
    a Ctrl-C typed (b"\\x03") reaches it as SIGINT. The other streams are pipes, or stdout
    the file `stdout` and stdin the file or pipe `stdin`; stdin, when a pipe of ours, is
    given `input`. What the process writes to the terminal is read as it comes, unless not
    `reading` (then Terminal.read starts it). `env` adds to the environment (a value None
    unsets), in which ATTNCLI_PAGER is empty (no pager) unless it gives one."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    # NOFLSH: at a Ctrl-C the kernel otherwise discards what the process wrote that our reader
    # thread has not yet read (a bar's last erase, say), so what the screen shows would hang on
    # when that thread last ran; a terminal window reads at once, and we would test the race
    modes = termios.tcgetattr(slave)
    modes[3] |= termios.NOFLSH
    termios.tcsetattr(slave, termios.TCSANOW, modes)
    tty, before = os.ttyname(slave), termios.tcgetattr(slave)
    full_env = {k: v for k, v in os.environ.items() if k not in QUIET}
    full_env.update({"TERM": "xterm-256color", "ATTNCLI_PAGER": "", **(env or {})})  # no pager unless asked for
    full_env = {k: v for k, v in full_env.items() if v is not None}  # None: unset
    pipe = subprocess.PIPE
    streams = {name: (slave if name in on_tty else pipe) for name in ("stdin", "stdout", "stderr")}
    if "stdin" not in on_tty and input is None:
        streams["stdin"] = subprocess.DEVNULL if stdin is None else stdin
    if "stdout" not in on_tty and stdout is not None:
        streams["stdout"] = stdout
    tty_fd = {"stdin": 0, "stdout": 1, "stderr": 2}[on_tty[0]] if on_tty else None

    def controlling_terminal():
        if tty_fd is not None:
            fcntl.ioctl(tty_fd, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([*program, *map(str, args)], **streams, env=full_env, cwd=cwd, start_new_session=True,
                            preexec_fn=controlling_terminal)
    os.close(slave)
    terminal = Terminal(proc, master, tty, before)
    if reading:
        terminal.read()
    if input is not None and proc.stdin is not None:
        proc.stdin.write(input)
        proc.stdin.close()
        proc.stdin = None
    return terminal


def run(args, **kwargs) -> tuple[int, bytes, bytes, str]:
    """start(args, ...) to its end."""
    return start(args, **kwargs).finish()


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name: [state, ppid, pgrp, session, ...], or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def in_session(sid: int) -> list[int]:
    """The live processes of session `sid`: a run's workers leave its process group, never
    its session, so this finds every process it started, reparented or not."""
    found = []
    for entry in os.listdir("/proc"):
        fields = stat_fields(int(entry)) if entry.isdigit() else None
        if fields and int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            found.append(int(entry))
    return found


def none_left(sid: int, timeout: float = 3) -> list[int]:
    """in_session(sid) once it is empty, or after `timeout` seconds: multiprocessing's
    resource tracker ends by itself a moment after its pipe from the run has closed."""
    deadline = time.monotonic() + timeout
    while (left := in_session(sid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left
