"""A corpus's sentences through attention, into stats.py's sums: in this process, in N
worker processes (as batch), or on a Dask cluster. Each chunk of lines gives a Partial,
and the partials are merged as they come: the order does not matter (stats.py).

Baselines, computed beside the heads on the same sentences (Wiegreffe & Pinter 2019 ask
for them before reading meaning into attention):
- uniform: each row's weight spread evenly over the positions it may attend to;
- shuffled: the same sentence with its words in a random order (seeded by the seed and
  the line's number, so any chunking gives the same order);
- random: with word vectors, --qkv random for seeds 0 .. k-1 (their sums together).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import itertools
import re
import time
from dataclasses import dataclass, field

import numpy as np

from attncli import batch, limits, stats, workers
from attncli.analyze import Options, Trained, attend
from attncli.errors import AttncliError, InputError
from attncli.load import load_vectors
from attncli.tokenize import is_punctuation


@dataclass(frozen=True)
class StatsJob:
    """What every chunk needs: where the vectors or the model are (batch.Job), and the
    baselines and word table asked for."""

    load: batch.Job = field(default_factory=batch.Job)
    seed: int = 0
    shuffled: bool = True
    random_seeds: int = 3
    by_word: bool = False


def sentence_arrays(text: str, vectors, opts: Options):
    """(alpha (L, H, T, T), allowed (T, T), tokens, punct, cls, sep) of one sentence."""
    att = attend(text, vectors, opts)
    T = len(att.tokens)
    cls = sep = np.zeros(T, dtype=bool)
    if att.layers is not None:  # a model: every layer; an encoder's pieces with [CLS] first and [SEP]s
        alpha = att.layers
        if not vectors.model.causal:  # a decoder's marker (Llama's <s>) is no [CLS]: its share is under first
            special = np.array(att.pieces.special, dtype=bool)
            cls, sep = special & (np.arange(T) == 0), special & (np.arange(T) > 0)
    else:
        alpha = att.weights[None]
    allowed = np.ones((T, T), dtype=bool) if att.mask is None else ~att.mask  # a decoder's mask, or --mask
    punct = np.array([is_punctuation(t) for t in att.tokens], dtype=bool)
    return alpha, allowed, list(att.tokens), punct, cls, sep


def _sums(arrays) -> stats.Observation:
    alpha, allowed, tokens, punct, cls, sep = arrays
    numbers = {t: n for n, t in enumerate(dict.fromkeys(tokens))}
    ids = np.array([numbers[t] for t in tokens])
    return stats.observe(alpha, allowed, ids, punct, cls, sep)


def shuffle(text: str, seed: int, line: int) -> str:
    """The line's words (as split on white space) in a random order of its own."""
    words = text.split()
    order = np.random.default_rng([seed, line]).permutation(len(words))
    return " ".join(words[i] for i in order)


def chunk_partial(chunk: list[tuple], vectors, job: StatsJob) -> stats.Partial:
    """The sums of a chunk of (line number, text, error), with the baselines'; a line with an
    error, or one attention cannot take (no word with a vector, say), is counted as skipped."""
    opts = job.load.opts
    out = stats.Partial(words=stats.WordSums() if job.by_word else None)
    seen: dict[str | None, list[stats.Observation]] = {None: [], "uniform": [], "shuffled": [], "random": []}
    for number, text, error in chunk:
        out.lines += 1
        try:
            if error is not None:
                raise InputError(error)
            arrays = sentence_arrays(text, vectors, opts)
        except AttncliError as e:
            out.skipped += 1
            if out.first_skip is None:
                out.first_skip = (number, str(e))
            continue
        seen[None].append(_sums(arrays))
        alpha, allowed, tokens = arrays[:3]
        seen["uniform"].append(_sums((stats.uniform(allowed), *arrays[1:])))
        if out.words is not None:
            out.words.observe(tokens, alpha, allowed)
        if job.shuffled:  # the same words, so the same errors if any: none here
            seen["shuffled"].append(_sums(sentence_arrays(shuffle(text, job.seed, number), vectors, opts)))
        if not isinstance(vectors, Trained):
            for seed in range(job.random_seeds):
                random = dataclasses.replace(opts, qkv="random", seed=seed, d_k=None)
                seen["random"].append(_sums(sentence_arrays(text, vectors, random)))
    for name, observed in seen.items():
        out.add(name, observed)
    return out


def read_lines(stream, *, jsonl: bool = False, field_name: str = "text", name: str = "CORPUS", jobs: int = 1):
    """(line number, text or None, error or None) of each line that holds something, read a
    line at a time as batch reads them (the corpus is never held whole, nor a line past
    batch.line_most); a line that is not UTF-8 ends the run."""
    for item in batch.read_items(stream, jsonl=jsonl, field_name=field_name, where=name, most=batch.line_most(jobs)):
        if item[2] is not None and item[2].startswith("not UTF-8"):
            raise InputError(f"{name}: line {item[0]} is {item[2]}; give UTF-8 text")
        yield item


def repeated(vocabulary: list[str], count: int, length: int, seed: int):
    """The standard induction test: `count` sequences of `length` words drawn at random
    (seeded) from the vocabulary, each written twice in a row; made as they are read."""
    if not vocabulary:
        raise InputError("--probe repeated draws words from the vectors' vocabulary, and it has no word of "
                         "letters; use other --vectors")
    rng = np.random.default_rng(seed)

    def sequences():
        for n in range(count):
            words = [vocabulary[i] for i in rng.integers(0, len(vocabulary), size=length)]
            yield n + 1, " ".join(words + words), None

    return sequences()


# --- one process, or N of them, as batch runs them ------------------------------------------

def _chunk(chunk: list[tuple]) -> stats.Partial:
    """In a worker that batch._start set up: the chunk's partial, or the reason it could not load."""
    if batch._failed is not None:
        raise InputError(batch._failed)
    return chunk_partial(chunk, batch._vectors, _stats_job)


_stats_job: StatsJob | None = None


def _start(job: StatsJob, worker: bool = False) -> None:
    global _stats_job
    _stats_job = job
    batch._start(job.load, worker)


def run(chunks, job: StatsJob, jobs: int = 1, vectors=None):
    """Each chunk's partial, as it is done; with jobs > 1, at most 2 jobs chunks at a time
    are read ahead, so the corpus is never held whole."""
    if jobs == 1:
        for chunk in chunks:
            yield chunk_partial(chunk, vectors, job)
        return
    yield from workers.in_order(_chunk, chunks, _start, job, jobs)


# --- a Dask cluster -------------------------------------------------------------------------

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


def dask_chunk(chunk: list[tuple], job: StatsJob) -> stats.Partial:
    """A Dask task: the worker loads the vectors (or model) once, from the path all workers
    see, and sums its chunk. Only the chunk's text comes in and the sums go out."""
    return chunk_partial(chunk, _worker_vectors(job.load), job)


def _load(job: batch.Job):

    if job.model is not None:
        from attncli import models  # the model's code, and tokenizers within: the model extra's

        return Trained(models.load_model(job.model, job.revision), job.layer, job.head)
    return load_vectors(job.source, limit=job.limit, trust_pickle=job.trust_pickle)


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
            loaded = _load(job)
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
        raise InputError("--scheduler needs Dask: pip install 'attncli[dask]'") from None
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
                limits.regular_file(named, f"distributed.comm.tls.{key}")
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


def run_dask(chunks, job: StatsJob, address: str, timeout: float = 10.0):
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
    try:
        yield
    except AttncliError:
        raise
    except concurrent.futures.CancelledError:  # Dask's FutureCancelledError: the scheduler is gone
        raise InputError(f"the connection to the Dask scheduler at {address} was lost mid-run; check that it "
                         "still runs, and run again") from None
    except Exception as e:  # noqa: BLE001: a task's own error, raised again here by Dask
        raise InputError(f"the cluster at {address} failed a task: {type(e).__name__}: {e}") from None


# --- the corpus's summary -------------------------------------------------------------------

def check_attention(vectors, opts: Options, random_seeds: int) -> None:
    """Over word vectors: the attention options' own errors (a --heads that does not divide
    d_k, a --qkv file) now, on the vocabulary's first words, not a line's; and the memory the
    random baseline's d x d projections take, whatever --d-k says."""
    sentence_arrays(" ".join(vocabulary(vectors, most=2)) or vectors.vocab.word(0), vectors, opts)
    if random_seeds:
        limits.require(3 * vectors.dim ** 2 * 8, f"the random projections baseline (W_query, W_key, W_value of "
                       f"{vectors.dim:,} x {vectors.dim:,})", "leave it out with --random-seeds 0")


def vocabulary(vectors, most: int = 10_000) -> list[str]:
    """The words --probe repeated draws from: the vectors' first `most` of letters only."""
    out = []
    for i in range(vectors.size):
        word = vectors.vocab.word(i)
        if word.isalpha():
            out.append(word)
            if len(out) == most:
                break
    return out


def summarise(items, job: StatsJob, *, jobs: int = 1, scheduler: str | None = None, vectors=None,
              progress=lambda total: None) -> stats.Partial:
    """The sums of every sentence of `items` (line number, text, error), a chunk of lines a
    task: in this process, in `jobs` workers, or on the Dask cluster at `scheduler`; each
    chunk's partial merged as it comes, and progress(total) told. The workers end before
    this returns or raises."""
    total = stats.Partial()
    chunks = batch.chunks_of(items)
    parts = run_dask(chunks, job, scheduler) if scheduler is not None else run(chunks, job, jobs, vectors)
    with contextlib.closing(parts):
        for part in parts:
            total.merge(part)
            progress(total)
    return total


def summary(total: stats.Partial, name: str, by: str, vectors) -> dict:
    """stats' document of the corpus `name`: a record per head (or per word, `by` "word"),
    with the lines read and skipped. A corpus of no sentence, or none that could be read,
    is an error."""
    if total.lines == 0:
        raise InputError(f"{name} holds no sentence (it is empty or blank)")
    if total.heads is None:
        line, reason = total.first_skip
        raise InputError(f"no line of {name} could be read ({total.skipped:,} skipped; line {line:,}: {reason})")
    model = isinstance(vectors, Trained)
    records = total.words.records() if by == "word" else stats.head_records(total, model=model)
    return {"command": "stats", "corpus": name, "by": by, "lines": total.lines, "skipped": total.skipped,
            "model": vectors.name if model else None, "vectors": None if model else vectors.name, "records": records}
