"""Many sentences in one run: one result per input line, in input order, in one process or
in N worker processes that share the memory-mapped vectors.

Each worker loads the vectors itself, from the bundled entry or the cache entry the parent
process made before starting them: a memory map, so the pages are shared, never copied.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from attncli.analyze import Options, context_doc, scores_doc
from attncli.errors import AttncliError


@dataclass(frozen=True)
class Job:
    """What every line gets: the vectors to load, and the options of scores or context."""

    source: str | None = None
    limit: int | None = None
    trust_pickle: bool = False
    opts: Options = field(default_factory=Options)
    token: str | None = None  # with a token: a context document per line
    index: int | None = None
    all_contexts: bool = False
    neighbors: int = 5
    model: str | None = None  # a trained model's folder, in place of the vectors
    layer: int = 1
    head: int | None = None
    fields: tuple[str, ...] | None = None  # run_encoded: the keys to write (with `line`), all for None
    ascii_only: bool = False  # run_encoded: JSON for a stream that is not UTF-8


def parse_lines(data: bytes, *, jsonl: bool = False, field_name: str = "text") -> list[tuple[int, str | None, str | None]]:
    """(line number, text, error) for every line that holds something: a bad line is an error,
    never the end of the run. A blank line (nothing but white space) is skipped, as `scores`
    skips it on standard input and as jq skips it in JSON Lines, and the lines keep the
    numbers of their places in the input, so each result's `line` is still its line."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line does not start another
    items = (parse_line(number, raw, jsonl=jsonl, field_name=field_name) for number, raw in enumerate(lines, start=1))
    return [item for item in items if item is not None]


def parse_line(number: int, raw: bytes, *, jsonl: bool = False, field_name: str = "text"):
    """One line as parse_lines reads it: (number, text, error), or None for a blank line."""
    raw = raw.rstrip(b"\r\n")
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a byte order mark
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return number, None, f"not UTF-8: byte 0x{raw[e.start]:02x} at column {e.start + 1}"
    if not line.strip():
        return None
    if not jsonl:
        return number, line, None
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as e:  # RecursionError: nested past Python's depth
        return number, None, f"not JSON: {type(e).__name__}: {e}"
    if not isinstance(record, dict):
        return number, None, "not a JSON object"
    if field_name not in record:
        return number, None, f"no {field_name!r} field (--field chooses another)"
    if not isinstance(record[field_name], str) or not record[field_name].strip():
        return number, None, f"the {field_name!r} field is not a sentence (a non-empty string)"
    if any("\ud800" <= c <= "\udfff" for c in record[field_name]):  # a lone \ud800 escape: no character
        return number, None, f"the {field_name!r} field holds a lone surrogate escape, which is not text"
    return number, record[field_name], None


_job: Job | None = None
_vectors = None
_failed: str | None = None  # why this worker could not load the vectors


def _start(job: Job, worker: bool = False) -> None:
    """Load the vectors once per process. A worker first ignores SIGINT, which it has held
    blocked since it was made (see run), so that a Ctrl-C that came while it started is
    dropped, and leaves the terminal's process group: a Ctrl-C or a `kill` of the job then
    reaches only the parent, which ends the workers itself. A worker killed by the group's
    signal while it waits for a line would die holding the task queue's lock, and the
    parent's Pool.terminate would wait for that lock for ever.

    A worker that cannot load the vectors (its cache entry removed since the parent made
    it, no file descriptors left) must not end: Pool would start another in its place, and
    another, for ever, each printing its traceback. It answers every line with the error."""
    global _job, _vectors, _failed
    from attncli.load import load_vectors

    if worker:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.setpgrp()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _job = job
    try:
        if job.model is not None:
            from attncli import model_files
            from attncli.analyze import Trained

            _vectors = Trained(model_files.load_model(job.model), job.layer, job.head)
        else:
            _vectors = load_vectors(job.source, limit=job.limit, trust_pickle=job.trust_pickle)
    except (AttncliError, OSError, MemoryError) as e:
        if not worker:
            raise
        _failed = f"a worker could not load the vectors: {e}"


def _one(item: tuple[int, str | None, str | None]) -> dict:
    return one_line(item, _vectors, _job, _failed)


def _encoded(item: tuple[int, str | None, str | None]) -> tuple[bool, str]:
    return encoded_line(item, _vectors, _job, _failed)


def only(doc: dict, fields: tuple[str, ...] | None) -> dict:
    """The document with only `fields` among its keys (all of them for None)."""
    return doc if fields is None else {k: v for k, v in doc.items() if k in fields}


def encoded_line(item, vectors, job: Job, failed: str | None = None) -> tuple[bool, str]:
    """(whether the line failed, its result as a line of JSON): where the work is done, so
    that a parent process has only to write it."""
    from attncli.analyze import to_json

    result = one_line(item, vectors, job, failed)
    error = "error" in result
    if not error and job.fields is not None:
        result = only(result, ("line", *job.fields))
    return error, to_json(result, ascii_only=job.ascii_only)


def one_line(item: tuple[int, str | None, str | None], vectors, job: Job, failed: str | None = None) -> dict:
    """A line's result: its document with `line`, or {"line", "error"}."""
    number, text, error = item
    if error is None and failed is not None:
        error = failed
    if error is None:
        try:
            if job.token is None and job.index is None and not job.all_contexts:
                doc = scores_doc(text, vectors, job.opts)
            else:
                doc = context_doc(text, vectors, job.opts, token=job.token, index=job.index,
                                  all_contexts=job.all_contexts, neighbors=job.neighbors)
            return {"line": number, **doc}
        except AttncliError as e:
            error = str(e)
    return {"line": number, "error": error}


def run(items: Iterable[tuple[int, str | None, str | None]], job: Job, jobs: int = 1) -> Iterator[dict]:
    """One result per item, in order: a document with its `line`, or {"line", "error"}."""
    if jobs == 1:
        _start(job)
        yield from map(_one, items)
        return
    # Ctrl-C reaches every process of the terminal's group, a worker too until it leaves the
    # group (_start), and only this process may stop: it ends the workers as it leaves the
    # `with` (Pool.terminate), so that no worker is left and none prints a traceback of its own.
    with _interrupts_held() as release:
        pool = multiprocessing.get_context("spawn").Pool(jobs, initializer=_start, initargs=(job, True))
        with pool:
            release()  # a Ctrl-C that came while the workers started is raised here, and ends them
            yield from pool.imap(_one, items, chunksize=64)


def run_encoded(items: Iterable[tuple[int, str | None, str | None]], job: Job, jobs: int = 1) -> Iterator[tuple[bool, str]]:
    """As run, but each result already a line of JSON, (failed, line), made where it was
    computed: with workers, the parent only writes what they send."""
    if jobs == 1:
        _start(job)
        yield from map(_encoded, items)
        return
    with _interrupts_held() as release:
        pool = multiprocessing.get_context("spawn").Pool(jobs, initializer=_start, initargs=(job, True))
        with pool:
            release()
            yield from pool.imap(_encoded, items, chunksize=64)


@contextlib.contextmanager
def _interrupts_held():
    """SIGINT held back while the pool starts: blocked in this thread, so that the workers,
    made from it, start with it blocked (a signal mask lasts through fork and exec) and
    cannot be interrupted before they ignore it; the threads the pool makes meanwhile keep
    it blocked too, and so do the workers one of them may start later in a dead one's place.
    Blocked, not ignored: an ignored Ctrl-C would be lost, and the run go on to its end. One
    that reaches another thread of this process is noted by a handler of the moment.
    release() (also at the end) restores the handler and the mask, and then raises the
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
        released = True
        if main:
            signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one pending in this thread is raised here
        if held:
            if callable(previous):
                previous(signal.SIGINT, None)
            elif previous == signal.SIG_DFL:
                signal.raise_signal(signal.SIGINT)

    try:
        yield release
    finally:
        release()
