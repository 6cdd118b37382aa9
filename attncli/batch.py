"""Many sentences in one run: one result per input line, in input order, in one process or
in N worker processes that share the memory-mapped vectors.

Each worker loads the vectors itself, from the bundled entry or the cache entry the parent
process made before starting them: a memory map, so the pages are shared, never copied.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from attncli import limits
from attncli.analyze import Options, context_doc, scores_doc
from attncli.errors import AttncliError, WorkerLost


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
    fields: tuple[str, ...] | None = None  # run_chunks: the keys to write (with `line`), all for None
    ascii_only: bool = False  # run_chunks: JSON for a stream that is not UTF-8
    spool: str | None = None  # run_chunks' workers: the folder of this run where they leave each chunk's lines
    files: tuple = ()  # Dask workers: (path, identity) of each file they read, as this run saw it (survey.for_workers)
    contents: tuple = ()  # Dask workers: (path or "vectors", SHA-256s) of what they read (survey.for_dask)


def parse_lines(data: bytes, *, jsonl: bool = False, field_name: str = "text") -> list[tuple[int, str | None, str | None]]:
    """(line number, text, error) for every line that holds something: a bad line is an error,
    never the end of the run. A blank line (nothing but white space) is skipped, as `scores`
    skips it on standard input and as jq skips it in JSON Lines, and the lines keep the
    numbers of their places in the input, so each result's `line` is still its line."""
    return list(read_items(io.BytesIO(data), jsonl=jsonl, field_name=field_name, most=len(data)))


def read_items(stream, *, jsonl: bool = False, field_name: str = "text", most: int | None = None,
               where: str = "the input") -> Iterator[tuple[int, str | None, str | None]]:
    """parse_lines of a binary stream, read a line at a time, so that a corpus is never held
    whole; a line of more than `most` bytes (default: a tenth of the memory available) is
    refused, a ResourceError, before it is held whole either. Lines end at b"\n" only (a
    final line without one is a line), as str.split("\n") would cut them."""
    most = limits.input_limit() if most is None else most
    number = 0
    while raw := stream.readline(most + 1):
        number += 1
        if len(raw) > most and not raw.endswith(b"\n"):
            raise limits.ResourceError(f"{where}: line {number} holds more than {limits.size(most)}, more than this "
                                       "run can take in memory; split it into lines")
        item = parse_line(number, raw, jsonl=jsonl, field_name=field_name)
        if item is not None:
            yield item


CHUNK = 128  # lines a task: large enough that a task's overhead is small, small enough to spread
CHUNK_TEXT = 1 << 20  # characters of text a task: past them it ends early, so that a chunk holds one long line at most


def chunks_of(items: Iterable, size: int = CHUNK) -> Iterator[list]:
    """The items (line number, text, error) in lists of `size`, as they come; a list ends
    sooner once its texts hold CHUNK_TEXT characters."""
    chunk, held = [], 0
    for item in items:
        chunk.append(item)
        held += len(item[1] or "")
        if len(chunk) == size or held >= CHUNK_TEXT:
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def line_most(jobs: int) -> int:
    """The longest line a run of `jobs` workers takes: in_order holds 2 jobs chunks and the
    workers jobs more, each with one long line at most, and together they stay within the
    input's share of the memory (limits.input_limit)."""
    return max(limits.input_limit() // (3 * jobs), 1 << 20)


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
    blocked since it was made (see in_order), so that a Ctrl-C that came while it started is
    dropped, and leaves the terminal's process group: a Ctrl-C or a `kill` of the job then
    reaches only the parent, which ends the workers itself; a worker the group's signal
    killed would lose its chunk, and the run with it (WorkerLost).

    A worker that cannot load the vectors (its cache entry removed since the parent made
    it, no file descriptors left) must not end, for the same reason, with a traceback of
    its own besides: it answers every line with the error."""
    global _job, _vectors, _failed
    from attncli.load import load_vectors

    if worker:
        worker_signals()
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


def worker_signals() -> None:
    """In a worker of in_order, first: SIGINT ignored and the terminal's process group left
    (see _start)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.setpgrp()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _docs(chunk: list[tuple[int, str | None, str | None]]) -> list[dict]:
    return [one_line(item, _vectors, _job, _failed) for item in chunk]


def _encoded(chunk: list[tuple[int, str | None, str | None]]) -> Encoded:
    done = encoded_chunk(chunk, _vectors, _job, _failed)
    return done if _job.spool is None else done._replace(data=_spooled(done.data, _job.spool))


def _spooled(data: bytes, folder: str) -> bytes | str:
    """A worker's chunk of lines left in a file of `folder`, its path returned: a megabyte
    sent through the pool's pipe costs the parent five copies and the pickling, a file one
    read. Where the file cannot be written (a full disk), the bytes themselves."""
    import tempfile

    try:
        fd, path = tempfile.mkstemp(prefix=SPOOLED, dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return path
    except OSError:
        return data


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


class Encoded(NamedTuple):
    """A chunk of items done: one message from a worker, which the parent writes as it is."""

    failed: int  # its lines whose object holds "error"
    lines: int  # its lines
    last: int  # the number of its last line in the input
    data: bytes  # their results, JSON Lines in UTF-8 (a worker's: or the path of a file holding them)


def encoded_chunk(chunk: list[tuple], vectors, job: Job, failed: str | None = None) -> Encoded:
    """A chunk of items' results, as JSON Lines."""
    lines = [encoded_line(item, vectors, job, failed) for item in chunk]
    text = "".join(line + "\n" for _, line in lines)
    return Encoded(sum(error for error, _ in lines), len(lines), chunk[-1][0],
                   text.encode("utf-8"))  # json_safe escaped every surrogate


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
    for docs in in_order(_docs, chunks_of(items), _start, job, jobs):
        yield from docs


def run_chunks(chunks: Iterable[list[tuple]], job: Job, jobs: int = 1) -> Iterator[Encoded]:
    """encoded_chunk of each chunk, in order, made where it was computed: with workers, the
    parent only writes what they send, a chunk at a time. The workers leave their chunks
    in files of a folder this run makes (and removes, whatever happens: _spool), which the
    parent reads once and deletes; without such a folder (no room for one), through the pipe."""
    if jobs == 1:
        yield from in_order(_encoded, chunks, _start, job, jobs)
        return
    with _spool() as folder:
        results = in_order(_encoded, chunks, _start, dataclasses.replace(job, spool=folder), jobs)
        try:
            for done in results:
                if isinstance(done.data, str):  # a file of the folder: read, then deleted
                    with open(done.data, "rb") as f:
                        data = f.read()
                    os.unlink(done.data)
                    done = done._replace(data=data)
                yield done
        finally:
            results.close()  # the workers end first, so that none writes in the folder as it goes


SPOOL = "attncli-batch-"  # the prefix of a run's folder, in the system's temporary directory
SPOOLED = "chunk-"  # the prefix of its files, a chunk's lines each
OURS = ".attncli-batch"  # its marker, which the run holds locked (limits.lock) while it lasts


@contextlib.contextmanager
def _spool():
    """A folder of this run's for its workers' chunks (None where none can be made), whose
    marker it holds locked from before the marker has its name until the folder is gone.
    First, the folders of runs that ended without removing theirs (killed by SIGKILL, the
    out-of-memory killer's, in the midst) are removed: those whose marker's lock is free."""
    import shutil
    import tempfile

    root = tempfile.gettempdir()
    _sweep(root)
    try:
        folder = tempfile.mkdtemp(prefix=SPOOL, dir=root)
    except OSError:
        yield None
        return
    fd = None
    try:
        with contextlib.suppress(OSError):  # no marker: the folder is removed at the end all the same
            fd = os.open(os.path.join(folder, ".marking"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            if limits.lock(fd, wait=True):  # locked before it is a marker: a sweep never takes a starting run's
                os.rename(os.path.join(folder, ".marking"), os.path.join(folder, OURS))
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if fd is not None:
            os.close(fd)


def _sweep(root: str) -> None:
    """Remove the folders of `root` that runs of this user left (_spool): named so, holding
    only a marker whose lock is free and chunks; anything else there is left as it is."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        try:
            if (not entry.name.startswith(SPOOL) or not entry.is_dir(follow_symlinks=False)
                    or entry.stat(follow_symlinks=False).st_uid != os.getuid()):
                continue
            names = os.listdir(entry.path)
            if OURS not in names or any(n != OURS and not n.startswith(SPOOLED) for n in names):
                continue
            fd = os.open(os.path.join(entry.path, OURS), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if limits.lock(fd, wait=False):  # its run has ended
                for name in os.listdir(entry.path):
                    if name.startswith(SPOOLED):
                        os.unlink(os.path.join(entry.path, name))
                os.unlink(os.path.join(entry.path, OURS))
                os.rmdir(entry.path)
        except OSError:
            pass
        finally:
            os.close(fd)


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
    # group (_start), and only this process may stop: it ends the workers as it leaves the
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
