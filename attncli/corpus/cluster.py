"""The Dask path that `batch --scheduler`, `stats --scheduler` and `faithfulness
--scheduler` share: a client of the scheduler, reached within a time-out whatever answers
at its address (not a scheduler, a worker, TLS asked for, no worker at all); each task a
chunk of lines, whose worker loads the vectors or model once, after checking that its
files are the ones the client read; and the runs, batch's in input order and the
partials of stats and faithfulness as they finish, ended in
one line when a task fails, the scheduler is lost, or the cluster is left without a
worker. Only the chunk's text goes to a worker, and its results or sums come back.

Dask itself is imported only in the functions that use it: importing this module costs
no more than batch.py and survey.py, whose tasks these are.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import re
import time

from attncli.corpus import batch
from attncli.errors import AttncliError, InputError
from attncli.system import limits, reading

_loaded: dict = {}  # in a Dask worker: the vectors or model of the last job it ran, by its job


def _same_contents(job: batch.Job, loaded, worker: str) -> None:
    """In a Dask worker, as it loads `job`: what it read holds what the client's held."""
    for what, here in job.contents:
        if what == "vectors":
            sums = (getattr(loaded, "meta", None) or {}).get("checksums", {}).get("sha256")
            there = tuple(sorted(sums.items())) if sums else None
            if there is not None and there != here:  # None: an entry written before checksums, left to its identity
                raise InputError(f"worker {worker} sees other vectors at {job.source} than this run read here (the "
                                 "same size and time, other contents); give every worker the same file")
        elif (there := batch.sha256(what)) != here:
            raise InputError(f"worker {worker} sees another {what} than this run read here (SHA-256 "
                             f"{str(there)[:12]}… there, {str(here)[:12]}… here); give every worker the same file")


def _same_files(files: tuple, worker: str) -> None:
    """In a Dask worker: each file of `files` is the one the client recorded, or an error
    that says which, where, and how it differs."""
    for path, here in files:
        there = batch.identity(path)
        if there != here:
            raise InputError(f"worker {worker} sees another {path} than this run read here "
                             f"({_difference(there, here)}); give every worker the same file, unchanged while the "
                             "run lasts (a copy keeps its time with cp -p or rsync -a)")


def _difference(there, here) -> str:
    """How two identities differ, in words: 12,345 bytes there, 12,400 here."""
    if isinstance(there, str) or isinstance(here, str):
        def said(side) -> str:
            return side if isinstance(side, str) else f"{side[0]:,} bytes"

        return f"{said(there)} there, {said(here)} here"
    if there[0] != here[0]:
        return f"{there[0]:,} bytes there, {here[0]:,} here"
    return f"{here[0]:,} bytes each, modified {_when(there[1])} there and {_when(here[1])} here"


def _when(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns // 10**9)) + f".{ns % 10**9:09d}"


def dask_chunk(chunk: list[tuple], job):
    """A Dask task: the worker loads the vectors (or model) once, from the path all workers
    see, and sums its chunk (job.partial: a survey.StatsJob's, a faithfulness.Job's). Only
    the chunk's text comes in and the sums go out."""
    return job.partial(chunk, _worker_vectors(job.load))


def dask_lines(chunk: list[tuple], job: batch.Job) -> batch.Encoded:
    """A Dask task of `batch --scheduler`: the chunk's results as JSON Lines (batch.encoded_chunk)."""
    return batch.encoded_chunk(chunk, _worker_vectors(job), job)


def _worker_vectors(job: batch.Job):
    """In a Dask worker: the vectors or model of `job`, loaded once, after its files were
    found to be the client's (at every task: a --qkv file is read as the lines are)."""
    from distributed import get_worker

    worker = get_worker().address
    _same_files(job.files, worker)
    if job not in _loaded:
        _loaded.clear()  # a worker that serves many runs holds one job's vectors, not every one's
        try:
            loaded = job.load()
        except (AttncliError, OSError) as e:
            where = job.model or job.source or "the bundled vectors"
            raise InputError(f"worker {worker} could not load {where}: {e}") from None
        _same_contents(job, loaded, worker)
        _loaded[job] = loaded
    return _loaded[job]


ADDRESS = re.compile(r"^(?:(?:tcp|tls|ws|wss)://)?(?:\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$")


def connect(address: str, timeout: float = 10.0):
    """A Dask client of the scheduler at `address`, once it has a worker, or a one-line error
    within `timeout` seconds a step: the scheduler's handshake (_identify), the client's own
    start, the first worker."""
    if not ADDRESS.match(address):
        raise InputError(f"--scheduler {address!r} is not a scheduler's address; give one as tcp://HOST:PORT "
                         "(dask scheduler prints it)")
    try:
        from distributed import Client
    except ImportError:
        raise InputError("--scheduler needs Dask: pip install 'dask[distributed]'") from None
    _identify(address, _connection_args(address), timeout)
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except Exception as e:  # noqa: BLE001: the scheduler answered just now; whatever stops its client is said
        raise InputError(f"the Dask scheduler at {address} answered, but a client of it could not start "
                         f"({type(e).__name__}: {e})") from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        client.close()
        raise InputError(f"the Dask scheduler at {address} has no worker (none joined within {timeout:g} s); "
                         f"start one: dask worker {address}") from None
    return client


def _connection_args(address: str) -> dict:
    """What Dask's configuration gives a client to connect with (a TLS context, if any);
    tls:// and wss:// refused without one, which is all Dask would say in a traceback."""
    import dask.config
    from distributed import Security
    from distributed.comm import parse_address

    for key in ("ca-file", "client.cert", "client.key"):  # opened by Security(): a FIFO would hold it for ever
        named = dask.config.get(f"distributed.comm.tls.{key}", None)
        if named:
            try:
                reading.regular_file(named, f"distributed.comm.tls.{key}")
            except limits.ResourceError as e:
                raise InputError(f"Dask's TLS configuration cannot be used ({e})") from None
    try:
        args = Security().get_connection_args("client")
    except (OSError, ValueError) as e:  # a certificate file named but missing, or not one
        raise InputError(f"Dask's TLS configuration cannot be used ({getattr(e, 'strerror', None) or e}); check "
                         "the files distributed.comm.tls names, or give the scheduler's tcp:// address") from None
    scheme = parse_address(address)[0]
    if scheme in ("tls", "wss") and args.get("ssl_context") is None:
        raise InputError(f"{address} asks for TLS, and Dask's configuration gives attncli no certificate to offer; "
                         "set distributed.comm.tls.ca-file, .client.cert and .client.key (or "
                         "DASK_DISTRIBUTED__COMM__TLS__CA_FILE and the like), or give the scheduler's tcp:// address")
    return args


def _identify(address: str, args: dict, timeout: float) -> None:
    """That a Dask scheduler answers at `address`, the time-out over the whole handshake: the
    connection, Dask's comm handshake (which Dask itself waits on for ever: a server that
    accepts and says nothing held `stats` past 300 s) and a first exchange, its identity.
    Bytes that are not Dask's protocol (an HTTP server's answer) are an error here too,
    not Dask's attempt at a frame of 3.5e18 bytes."""
    import asyncio

    from distributed.comm import CommClosedError, connect as comm_connect

    async def identity():
        # Dask retries a refused connection until its own time-out, 3 s sooner than this one
        # (room for a busy machine), to end with the reason (Connection refused) rather than
        # as a silence would
        comm = await comm_connect(address, timeout=0.7 * timeout, **args)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    _refused(address, timeout)
    try:
        answer = asyncio.run(asyncio.wait_for(identity(), timeout))
    except asyncio.TimeoutError:  # before OSError: from Python 3.11 it is one
        raise InputError(_no_answer(address, timeout)) from None
    except CommClosedError:
        hint = "" if address.startswith(("tls://", "wss://")) else " (a scheduler that asks for TLS takes tls://)"
        raise InputError(f"the server at {address} closed the connection without answering as a Dask scheduler "
                         f"does; check the address{hint}") from None
    except OSError as e:
        raise InputError(_no_answer(address, timeout, e)) from None
    except Exception:  # noqa: BLE001: what Dask makes of bytes not its own (MemoryError, ValueError, ...)
        raise InputError(f"the server at {address} is not a Dask scheduler (it answered, but not in Dask's "
                         "protocol); check the address (dask scheduler prints it)") from None
    kind = answer.get("type") if isinstance(answer, dict) else None
    if kind != "Scheduler":
        what = f"a Dask {kind.lower()}" if kind in ("Worker", "Nanny") else "a Dask server"
        raise InputError(f"the server at {address} is {what}, not the scheduler; give the scheduler's address "
                         "(dask scheduler prints it)")


def _refused(address: str, timeout: float) -> None:
    """Refuse at once, with the system's reason, an address where nothing listens: one TCP
    connection of our own, closed as soon as it is made. Dask would retry until its time-out
    and end, on a busy machine, with its own time-out as the last error and the reason lost."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        host, port = parse_host_port(parse_address(address)[1])
        socket.create_connection((host, port), timeout=0.7 * timeout).close()
    except ConnectionRefusedError as e:
        raise InputError(_no_answer(address, timeout, e)) from None
    except (OSError, ValueError, TypeError):  # anything else: Dask's own connection says what it is
        pass


def _no_answer(address: str, timeout: float, error: BaseException | None = None) -> str:
    """The message of a scheduler that did not answer, with the system's reason if Dask's
    'Timed out trying to connect' wraps one (Connection refused)."""
    while error is not None and not getattr(error, "strerror", None):
        error = error.__cause__ or error.__context__
    reason = f" ({error.strerror})" if error is not None else ""
    return (f"no Dask scheduler answers at {address} within {timeout:g} s{reason}; start one (dask scheduler), "
            "or check the address")


WORKERLESS = 30.0  # seconds a run waits on a cluster left with no worker (a nanny restarts one in a few)


def run_dask_in_order(chunks, job: batch.Job, address: str):
    """`batch --scheduler`: each chunk's results, in input order, with at most 4 chunks a
    worker in flight (a slow chunk holds back the ones after it, not the workers)."""
    from collections import deque

    with connect(address) as client:
        window = 4 * max(1, len(client.scheduler_info().get("workers", {})))
        pending: deque = deque()

        def oldest():
            future = pending.popleft()
            return _patiently(client, address, len(pending) + 1, lambda: future.result(timeout=1))

        with _cluster_errors(address):
            for chunk in chunks:
                pending.append(client.submit(dask_lines, chunk, job, retries=2, pure=False))
                while len(pending) >= window:
                    yield oldest()
            while pending:
                yield oldest()


def run_dask(chunks, job, address: str, timeout: float = 10.0):
    """Each chunk's partial from the cluster at `address`, as they finish, with at most 4
    chunks a worker in flight. A worker lost mid-run has its tasks run again elsewhere
    (Dask's own rescheduling, and 2 retries); a task that fails ends the run."""
    from distributed import wait

    with connect(address, timeout) as client:
        window = 4 * max(1, len(client.scheduler_info().get("workers", {})))
        chunks = iter(chunks)
        with _cluster_errors(address):
            running = {client.submit(dask_chunk, chunk, job, retries=2, pure=False)
                       for chunk in itertools.islice(chunks, window)}
            while running:
                done = _patiently(client, address, len(running),
                                  lambda: wait(list(running), timeout=1, return_when="FIRST_COMPLETED").done)
                for future in done:
                    yield _patiently(client, address, len(running), lambda: future.result(timeout=1))
                    running.discard(future)
                    chunk = next(chunks, None)
                    if chunk is not None:
                        running.add(client.submit(dask_chunk, chunk, job, retries=2, pure=False))


def _patiently(client, address: str, waiting: int, attempt):
    """attempt() (a wait of a second, or TimeoutError), again until it answers, unless the
    cluster has had no worker for WORKERLESS seconds: Dask would wait for a new one for
    ever, for a chunk still to compute or for one whose result was lost with its worker."""
    import asyncio

    alone = None
    while True:
        try:
            with client.as_current():  # wait() takes the current client; ours is no default
                return attempt()
        except (TimeoutError, asyncio.TimeoutError):  # one class from Python 3.11, two before
            pass
        if client.scheduler_info(n_workers=1).get("workers"):
            alone = None
        elif alone is None:
            alone = time.monotonic()
        elif time.monotonic() - alone > WORKERLESS:
            raise InputError(f"the Dask cluster at {address} has had no worker for {WORKERLESS:g} s, and "
                             f"{waiting:,} chunks of lines wait; start workers (dask worker {address}) and run again")


@contextlib.contextmanager
def _cluster_errors(address: str):
    """A task's failure, or the scheduler's loss, as one line of attncli's: an AttncliError a
    worker raised (a line of the input) passes as it is."""
    from distributed.comm import CommClosedError  # loaded with the client already

    try:
        yield
    except AttncliError:
        raise
    # Dask's FutureCancelledError, or the client's own connection closed under a gather (a
    # scheduler killed as a result comes back): the scheduler is gone either way
    except (concurrent.futures.CancelledError, CommClosedError):
        raise InputError(f"the connection to the Dask scheduler at {address} was lost mid-run; check that it "
                         "still runs, and run again") from None
    except Exception as e:  # noqa: BLE001: a task's own error, raised again here by Dask
        raise InputError(f"the cluster at {address} failed a task: {type(e).__name__}: {e}") from None

