"""Many sentences in one run: one result per input line, in input order, in one process or
in N worker processes that share the memory-mapped vectors.

Each worker loads the vectors itself, from the bundled entry or the cache entry the parent
process made before starting them: a memory map, so the pages are shared, never copied.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from attncli import attention
from attncli.corpus.workers import in_order, worker_signals
from attncli.documents.context import context_doc
from attncli.documents.sentence import scores_doc, scores_listed
from attncli.encoder import Options
from attncli.errors import AttncliError
from attncli.system import limits, reading
from attncli.views.json import to_json
from attncli.words.load import load_vectors


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
    model: str | None = None  # a trained model's folder, or its name in the Hugging Face cache, for the vectors
    revision: str | None = None  # the cache's model: the commit of its snapshot, as this run read it
    named: str | None = None  # the name this run gave a model that workers load by its path (an ollama NAME:TAG)
    layer: int = 1
    head: int | None = None
    precision: str = "float64"  # the model's passes (attention.PRECISIONS), as --precision gives it
    generation: object | None = None  # generate --file: what each line is written after as (documents.generation.Asked)
    fields: tuple[str, ...] | None = None  # run_chunks: the keys to write (with `line`), all for None
    ascii_only: bool = False  # run_chunks: JSON for a stream that is not UTF-8
    spool: str | None = None  # run_chunks' workers: the folder of this run where they leave each chunk's lines
    files: tuple = ()  # Dask workers: (path, identity) of each file they read, as this run saw it (for_workers)
    contents: tuple = ()  # Dask workers: (path or "vectors", SHA-256s) of what they read (for_dask)

    @classmethod
    def from_source(cls, source, loaded, opts: Options, *, dask: bool = False, **fields) -> Job:
        """The Job that workers (--jobs, Dask) load this run's vectors or model by, as
        `source` (the options' Source: its model, limit, trust_pickle) loaded them here as
        `loaded`: its paths resolved and its files recorded for workers elsewhere
        (for_workers), with `dask` their contents too (for_dask). `fields`: the Job's others."""
        if source.model:
            model = loaded.model
            job = cls(model=model.name if model.revision else str(model.path), revision=model.revision,
                      named=None if model.revision else model.name, layer=loaded.layer, head=loaded.head,
                      precision=source.precision, opts=opts, **fields)
        else:
            job = cls(source=loaded.source if loaded.source != "bundled" else None, limit=source.limit,
                      trust_pickle=source.trust_pickle, opts=opts, **fields)
        job = for_workers(job)
        return for_dask(job, loaded) if dask else job

    def load(self):
        """The vectors or the model (models.encoder.Trained) the job names, as a worker loads it."""
        if self.model is not None:
            from attncli.models import encoder  # the model's code, and tokenizers within: the model extra's

            trained = encoder.load(self.model, self.revision, self.layer, self.head)
            if self.named is not None:  # named in the documents as this run names it, not by its file
                trained.model.name = self.named
            return trained
        return load_vectors(self.source, limit=self.limit, trust_pickle=self.trust_pickle)


def for_workers(job: Job) -> Job:
    """`job` as Dask workers must take it: every path it names absolute, as this process's
    folder sees it (a worker starts in a folder of its own), and the identity of each file
    they will read, recorded now, which a worker checks before it computes anything."""
    qkv = job.opts.qkv if job.opts.qkv in ("identity", "random") else os.path.abspath(job.opts.qkv)
    job = dataclasses.replace(job, source=_absolute(job.source),
                              model=job.model if job.revision else _absolute(job.model),
                              opts=dataclasses.replace(job.opts, qkv=qkv))
    return dataclasses.replace(job, files=tuple((path, identity(path)) for path in _files_read(job)))


def for_dask(job: Job, vectors) -> Job:
    """`job` for_workers made, with what a Dask worker must find inside the files it reads
    too: a copy of another file of the same size and time (cp -p of another version, a
    mount) would otherwise pass. The vectors' by the SHA-256s their cache entry recorded as
    it was written (nothing read again: a worker's own entry records its own); the --qkv and
    model files by their own SHA-256, read once here and once by each worker as it loads."""
    contents = []
    sums = (getattr(vectors, "meta", None) or {}).get("checksums", {}).get("sha256") if job.source else None
    if sums:
        contents.append(("vectors", tuple(sorted(sums.items()))))
    contents += [(path, sha256(path)) for path, _ in job.files if path != job.source]
    return dataclasses.replace(job, contents=tuple(contents))


def sha256(path: str) -> str | None:
    """A file's SHA-256, a megabyte at a time; None where it cannot be read (the worker's
    identity check then says why)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _absolute(path: str | None) -> str | None:
    return None if path is None else os.path.abspath(path)


def _files_read(job: Job) -> list[str]:
    """The files a worker reads for `job`: the vectors (none for the bundled ones, which come
    with attncli), the --qkv file, the model's."""
    paths = [job.source] if job.source is not None else []
    if job.opts.qkv not in ("identity", "random"):
        paths.append(job.opts.qkv)
    if job.model is not None:
        from attncli import models  # the model's code, and tokenizers within: the model extra's

        paths += [str(path) for path in models.files_read(models.locate(job.model, job.revision)[1])]
    return paths


def identity(path: str) -> tuple[int, int] | str:
    """A file's (size, modification time in ns), or why it has none: what the vectors cache
    takes to mean the same file, known from a stat, where a hash would read gigabytes on
    every machine at every run."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        return (getattr(e, "strerror", None) or str(e)).lower()
    return st.st_size, st.st_mtime_ns


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
    most = reading.input_limit() if most is None else most
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
    input's share of the memory (reading.input_limit)."""
    return max(reading.input_limit() // (3 * jobs), 1 << 20)


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

    if worker:
        worker_signals()
    _job = job
    try:
        _vectors = job.load()
    except (AttncliError, OSError, MemoryError) as e:
        if not worker:
            raise
        _failed = f"a worker could not load the vectors: {e}"


def _docs(chunk: list[tuple[int, str | None, str | None]]) -> list[dict]:
    with attention.precision(_job.precision):  # in a worker too, which the command's own does not reach
        done = batched(chunk, _vectors, _job, _failed)
        return [one_line(item, _vectors, _job, _failed, done.get(item[0])) for item in chunk]


def batched(chunk: list[tuple], vectors, job: Job, failed: str | None = None) -> dict:
    """{line number: its Attention} of a chunk's lines for their scores documents, the source
    run over them as it runs best (Encoder.attend_many: a model in batches); a line it
    refuses is left out, to be refused again alone, in the words of the one-sentence path.
    With a token to follow, a run that failed, or a source that gains nothing by batches
    (word vectors: a chunk's T x T arrays would be held at once): none. The batches are the
    chunk's, the same whatever the number of workers, and so are the numbers."""
    if failed is not None or not vectors.batches or job.token is not None or job.index is not None \
            or job.all_contexts or job.generation is not None:
        return {}
    lines = [(number, text) for number, text, error in chunk if error is None]
    done = vectors.attend_many([text for _, text in lines], job.opts, listed=scores_listed(job.opts))
    return {lines[k][0]: att for k, att in done if not isinstance(att, AttncliError)}


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


def encoded_line(item, vectors, job: Job, failed: str | None = None, att=None) -> tuple[bool, str]:
    """(whether the line failed, its result as a line of JSON): where the work is done, so
    that a parent process has only to write it."""

    result = one_line(item, vectors, job, failed, att)
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
    """A chunk of items' results, as JSON Lines, computed in the job's precision (in a worker
    too, which the command's own does not reach)."""
    with attention.precision(job.precision):
        done = batched(chunk, vectors, job, failed)
        lines = [encoded_line(item, vectors, job, failed, done.get(item[0])) for item in chunk]
    text = "".join(line + "\n" for _, line in lines)
    return Encoded(sum(error for error, _ in lines), len(lines), chunk[-1][0],
                   text.encode("utf-8"))  # json_safe escaped every surrogate


def one_line(item: tuple[int, str | None, str | None], vectors, job: Job, failed: str | None = None,
             att=None) -> dict:
    """A line's result: its document with `line`, or {"line", "error"}; `att`, its
    Attention where a batch computed it (batched)."""
    number, text, error = item
    if error is None and failed is not None:
        error = failed
    if error is None:
        try:
            if job.generation is not None:
                doc = job.generation.doc(text, vectors)
            elif job.token is None and job.index is None and not job.all_contexts:
                doc = scores_doc(text, vectors, job.opts, att=att)
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
OURS = ".attncli-batch"  # its marker, which the run holds locked (reading.lock) while it lasts


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
            if reading.lock(fd, wait=True):  # locked before it is a marker: a sweep never takes a starting run's
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
            if reading.lock(fd, wait=False):  # its run has ended
                for name in os.listdir(entry.path):
                    if name.startswith(SPOOLED):
                        os.unlink(os.path.join(entry.path, name))
                os.unlink(os.path.join(entry.path, OURS))
                os.rmdir(entry.path)
        except OSError:
            pass
        finally:
            os.close(fd)


