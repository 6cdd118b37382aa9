"""The worker processes batch, stats and the vectors' parser share: work done on chunks, in
order, by N processes of this machine, and the signals such a run must mind (a Ctrl-C that
reaches every process of the terminal's group, a worker killed by the out-of-memory killer).
Below both batch and sources, which each give it their work.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from attncli.errors import WorkerLost


def worker_signals() -> None:
    """In a worker of in_order, first: SIGINT ignored and the terminal's process group left
    (see batch._start)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.setpgrp()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def in_order(work, chunks: Iterable, start, job, jobs: int = 1) -> Iterator:
    """work(chunk) of each chunk, in input order: here (after start(job)), or in `jobs`
    worker processes each started with start(job, True), with at most 2 jobs chunks read
    ahead, so that the input is never read much beyond what is being worked on. A worker
    that ends before it answers (the out-of-memory killer's SIGKILL) ends the run with
    WorkerLost when its chunk's turn comes, after every chunk before it."""
    if jobs == 1:
        start(job)
        yield from map(work, chunks)
        return
    # Ctrl-C reaches every process of the terminal's group, a worker too until it leaves the
    # group (see batch._start), and only this process may stop: it ends the workers as it leaves the
    # `with` (_started), so that no worker is left and none prints a traceback of its own.
    with _interrupts_held() as release, _started(work, start, job, jobs) as workers:
        release()  # a Ctrl-C that came while the workers started is raised here, and ends them
        yield from _answers(workers, iter(chunks), 2 * jobs)


@dataclass(eq=False)
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection  # this end of its pipe


@contextlib.contextmanager
def _started(work, start, job, jobs: int) -> Iterator[list[_Worker]]:
    """`jobs` worker processes, each serving work over a pipe of its own (_serve), all
    started here, at once, so that each starts with SIGINT held (_interrupts_held); at the
    end, whatever happened, each is ended and waited for."""
    context = multiprocessing.get_context("spawn")
    workers: list[_Worker] = []
    try:
        for _ in range(jobs):
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs, work, start, job), daemon=True)
            process.start()
            theirs.close()
            workers.append(_Worker(process, ours))
        yield workers
    finally:
        for worker in workers:
            worker.process.terminate()
        for worker in workers:
            worker.process.join(2)
            if worker.process.exitcode is None:  # SIGTERM blocked or ignored: SIGKILL cannot be
                worker.process.kill()
                worker.process.join()
            worker.conn.close()


def _serve(conn, work, start, job) -> None:
    """A worker: start(job, True), then for each chunk the parent sends, (True, work(chunk))
    or (False, the exception it raised), until the parent goes away."""
    start(job, True)
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):  # the parent has ended (ECONNRESET: killed, by Ctrl-\ say)
            return
        try:
            answer = (True, work(chunk))
        except Exception as e:  # noqa: BLE001: the parent raises it, in its turn
            answer = (False, e)
        try:
            conn.send(answer)
        except OSError:  # the parent has ended
            return
        except Exception as e:  # noqa: BLE001: an answer that does not pickle (it is pickled before anything is sent)
            conn.send((False, RuntimeError(f"a worker's answer could not be sent back ({type(e).__name__}: {e})")))


def _answers(workers: list[_Worker], chunks: Iterator, ahead: int) -> Iterator:
    """The answers to `chunks` in order: a chunk to each idle worker, one at a time (a
    worker and this process each sending to the other at once, both pipes full, would
    wait for ever), at most `ahead` chunks read but not yet given back. A worker that
    ends loses its chunk (or, idle, the next one), where the run stops (WorkerLost)."""
    living, idle, busy = list(workers), list(workers), {}  # busy: worker -> the number of its chunk
    answers: dict[int, tuple[bool, object]] = {}  # chunk number -> (done, its result or exception)
    read = given = 0  # chunks read from `chunks`, and given back
    more = True

    def bury(worker: _Worker) -> None:
        nonlocal more
        living.remove(worker)
        if worker in busy:
            number = busy.pop(worker)
        else:
            idle.remove(worker)
            number = read if more else None  # idle with nothing more to do: nothing lost
        if number is not None:
            worker.process.join(2)  # it has ended, or is ending: its status
            answers.setdefault(number, (False, _lost(worker.process.exitcode)))
            more = False  # nothing after its chunk can be given back

    while True:
        while more and idle and read - given < ahead:
            chunk = next(chunks, _END)
            if chunk is _END:
                more = False
                break
            worker = idle.pop()
            busy[worker] = read
            read += 1
            try:
                worker.conn.send(chunk)
            except OSError:  # it ended while idle
                bury(worker)
        if given in answers:
            done, value = answers.pop(given)
            if not done:
                raise value
            given += 1
            yield value
            continue
        if not busy:
            return
        ready = multiprocessing.connection.wait([w.conn for w in busy] + [w.process.sentinel for w in living])
        for worker in [w for w in busy if w.conn in ready]:
            try:
                answers[busy[worker]] = worker.conn.recv()
            except (EOFError, OSError):  # it ended before it answered
                bury(worker)
                continue
            idle.append(worker)
            del busy[worker]
        for worker in [w for w in living if w.process.sentinel in ready]:
            bury(worker)


_END = object()


def _lost(status: int | None) -> WorkerLost:
    """The run's end, for a worker process that ended with `status` (minus a signal's number)."""
    how, hint = f"ended with status {status}", ""
    if status is not None and status < 0:
        try:
            how = f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            how = f"was killed by signal {-status}"
        if -status == signal.SIGKILL:
            hint = "; if memory ran short (the out-of-memory killer sends SIGKILL), free some and run again"
    return WorkerLost(f"a worker process {how} before it finished its share of the work{hint}")


@contextlib.contextmanager
def _interrupts_held():
    """SIGINT held back while the workers start: blocked in this thread, so that the workers,
    made from it, start with it blocked (a signal mask lasts through fork and exec) and
    cannot be interrupted before they ignore it. Every worker is started then (_started),
    none later. Blocked, not ignored: an ignored Ctrl-C would be lost, and the run go on to its end. One
    that reaches another thread of this process is noted by a handler of the moment.
    release() (also at the end) restores the mask and the handler, and then raises the
    Ctrl-C held meanwhile, as the handler it restored would have.

    multiprocessing's resource tracker is started first: starting it unblocks SIGINT in the
    thread that starts it, whatever was blocked before, so the first worker's start would
    undo the block."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    held: list[int] = []
    main = threading.current_thread() is threading.main_thread()  # only it can set a handler
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum)) if main else None
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        # the mask first, while the handler of the moment still notes a Ctrl-C pending in this
        # thread: restored the other way round, a Ctrl-C another thread had taken was raised as
        # the handler changed, with SIGINT left blocked for the rest of the process
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if main:
            signal.signal(signal.SIGINT, previous)
        released = True
        if held:
            if callable(previous):
                previous(signal.SIGINT, None)
            elif previous == signal.SIG_DFL:
                signal.raise_signal(signal.SIGINT)

    try:
        yield release
    finally:
        release()
