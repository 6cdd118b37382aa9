"""How a run of the command ends: its exit statuses, and the signals that end it (Ctrl-C,
SIGTERM, SIGHUP), minded from the first line of its start-up to the last of its end.

Below the command line and above nothing: it imports only the standard library, so that
the command (attncli.__main__) holds these signals before it imports the rest (numpy,
click: most of a start-up), and cli.AttncliGroup.main ends the run on one held meanwhile as
on any other, in one line with its status. A signal's handler raises where the run is, once;
after that first one, and once the run's outcome is decided, they are ignored: a second
Ctrl-C then would turn a clean end (workers stopped, files removed or written whole, the
last line said) into a traceback, or kill the process by the signal after it has said
how it ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # bad input, unreadable vectors: the message says what to do
    USAGE = 2  # options or arguments click could not accept
    HANGUP = 129  # SIGHUP (the terminal closed, or kill -HUP), as a shell reports it
    INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT
    TERMINATED = 143  # SIGTERM (kill), as a shell reports it
    BROKEN_PIPE = 141  # stdout closed early (| head), as a shell reports SIGPIPE


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised where the run is, so that it ends as Ctrl-C does: cleanly,
    workers and temporary files included, with its status. A BaseException, so no `except
    Exception` mistakes it for a reader's failure."""

    def __init__(self, status: ExitStatus):
        self.status = status


# the signals that end a run as Ctrl-C does, each with its status (SIGINT is Python's KeyboardInterrupt)
ENDING = {signal.SIGTERM: ExitStatus.TERMINATED, signal.SIGHUP: ExitStatus.HANGUP}
SAID = {ExitStatus.INTERRUPTED: "interrupted", ExitStatus.TERMINATED: "terminated", ExitStatus.HANGUP: "hung up"}
SIGNALS = (signal.SIGINT, *ENDING)


class _Run:
    """What _stop needs to know of the run under way (one at a time: the main thread's)."""

    ended = False  # its outcome is decided: a signal now has nothing left to stop
    noted: list[int] | None = None  # a command that ends itself at a Ctrl-C notes it here (ctrl_c_noted)


RUN = _Run()


def _stop(signum, frame):
    """Ctrl-C, SIGTERM or SIGHUP: the run ends, raised where it is (KeyboardInterrupt, or
    Terminated), unless its outcome is decided already, or a command has asked to note a
    Ctrl-C instead (ctrl_c_noted). Any of them again is ignored from now on, so that the
    run's own ending is not cut short."""
    for other in SIGNALS:
        if signal.getsignal(other) == _stop:
            signal.signal(other, signal.SIG_IGN)
    if RUN.ended:
        return
    if signum == signal.SIGINT and RUN.noted is not None:
        RUN.noted.append(signum)
        return
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated(ENDING[signum])


def ending_signals() -> dict[int, ExitStatus]:
    """ENDING, less a signal this run was started ignoring (nohup ignores SIGHUP): that stays ignored."""
    return {signum: status for signum, status in ENDING.items() if signal.getsignal(signum) != signal.SIG_IGN}


def hold() -> set[int]:
    """The command's first act: SIGNALS blocked until stopping(held=)'s take() gives them
    their handler and unblocks them: one that comes before is held by the kernel, and
    raised there. Returns the mask to restore then."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


def _relay(wakeups: int, main: int) -> None:
    """The relay's thread: each of SIGNALS that Python's handler met (in whichever thread
    the kernel gave it to) sent on to the main thread, once; the copy that comes back from
    the main thread's own handler is not sent again."""
    sent: set[int] = set()
    while data := os.read(wakeups, 64):  # b"": the run is over (stopping closed the other end)
        for signum in data:
            if signum not in SIGNALS:
                continue
            if signum in sent:  # the one this thread sent, as the main thread met it
                sent.discard(signum)
                continue
            sent.add(signum)
            with contextlib.suppress(OSError):
                signal.pthread_kill(main, signum)


@contextlib.contextmanager
def _relayed() -> Iterator[None]:
    """Each of SIGNALS reaches the main thread, whichever thread the kernel gives it to.
    Python runs a signal's handler in the main thread, between two bytecodes; a signal that
    another thread takes (numpy's BLAS threads, rich's, Dask's: a process stopped and then
    continued gives it to whichever of its threads runs first) only marks it for the main
    thread, which, blocked in a read or a write that never returns (an idle pipe on stdin,
    a stalled reader of stdout), would never run it. Python's handler writes the signal's
    number to the wakeup descriptor, from any thread; a thread of ours, which the signals
    never reach (started with them blocked), reads it and sends the signal to the main
    thread itself, whose read or write it interrupts."""
    wakeups, wake = os.pipe()
    os.set_blocking(wake, False)  # as set_wakeup_fd needs: a signal's handler never waits
    previous = signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
    relay = threading.Thread(target=_relay, args=(wakeups, threading.main_thread().ident), daemon=True)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # inherited by the thread
    try:
        relay.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(wake)
        relay.join(1)
        os.close(wakeups)


def quiet_races(hook: Callable) -> Callable:
    """sys.unraisablehook `hook`, but for what Python writes when one of SIGNALS is ignored
    as it comes: taken by another thread (numpy's BLAS threads) just as its handler became
    SIG_IGN, it is marked for the main thread, which then finds no handler to run and writes
    "Signal 2 ignored due to race condition" with a traceback to stderr. Ignoring it is what
    the run asked for (a second Ctrl-C while it ends, any after it): nothing to say."""

    def unraisable(args) -> None:
        if isinstance(args.exc_value, OSError) and str(args.exc_value).endswith("ignored due to race condition"):
            return
        hook(args)

    return unraisable


@contextlib.contextmanager
def stopping(held: set[int] | None = None) -> Iterator[Callable[[], None]]:
    """_stop for SIGNALS while the run lasts (not for one started ignoring it: nohup, a
    shell's background job), from the call of the function yielded, which the run makes
    inside the `try` that turns its ending into a line and a status. For the command
    (`held` given: hold's mask, restored then, raising one held meanwhile), each reaches
    the main thread (_relayed), and after the run they stay ignored to its exit (its
    process exits next); for a program that runs it (a test's CliRunner), they are as they
    were before. RUN.ended is set by the run as its outcome is decided."""
    handled = [signum for signum in SIGNALS if signal.getsignal(signum) != signal.SIG_IGN]
    previous = {signum: signal.getsignal(signum) for signum in handled}  # recorded before any is replaced
    RUN.ended, RUN.noted = False, None
    with contextlib.ExitStack() as stack:

        def take() -> None:
            try:
                for signum in handled:
                    signal.signal(signum, _stop)
            except ValueError:  # not the main thread (an embedding program): leave them
                previous.clear()
            if held is not None:
                stack.enter_context(_relayed())
                sys.unraisablehook = quiet_races(sys.unraisablehook)
                signal.pthread_sigmask(signal.SIG_SETMASK, held)

        try:
            yield take
        finally:
            RUN.ended = True
            with contextlib.suppress(ValueError):
                for signum, handler in previous.items():
                    signal.signal(signum, signal.SIG_IGN if held is not None else handler)


@contextlib.contextmanager
def ctrl_c_noted() -> Iterator[Callable[[], bool]]:
    """stopped() turns True at a Ctrl-C, which then raises nothing: for a command that ends
    itself at a Ctrl-C, cleanly and with what it has done (train: after the step under way,
    writing what it learned). As when one raises, Ctrl-C and the other ending signals are
    ignored from then on to the run's end, so that a second Ctrl-C cannot cut short the
    writing. Where no handler is ours (not the main thread), Ctrl-C stays as it is."""
    noted: list[int] = []
    RUN.noted = noted
    try:
        yield lambda: bool(noted)
    finally:
        RUN.noted = None
