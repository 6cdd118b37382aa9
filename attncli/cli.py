"""The command line: parse, load, compute, render, and map errors to one-line messages.

Only click code lives here; the work is done by analyze (attention over a sentence),
vectors (loading) and render (tables and JSON).
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import math
import os
import signal
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from enum import IntEnum

import click
import numpy as np
from attncli import __version__, attention, cache, limits, projections
from attncli import rnn as recurrent  # `rnn` is the command below
from attncli.analyze import (Options, compare_doc, context_doc, document_rows, explain_doc, neighbors_doc, rnn_doc,
                              scores_doc, to_json)
from attncli.errors import AttncliError, InputError, VectorsError
from attncli.load import load_vectors
from attncli.visible import visible, visible_all


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # bad input, unreadable vectors: the message says what to do
    USAGE = 2  # options or arguments click could not accept
    INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT
    TERMINATED = 143  # SIGTERM (kill), as a shell reports it
    BROKEN_PIPE = 141  # stdout closed early (| head), as a shell reports SIGPIPE


def _line(message: str, most: int = 1200) -> str:
    """One line for stderr: white space run together, control characters written out (a
    message can hold a path or a word from a file), and a message too long for a person
    shortened in its middle, keeping the end that says what to do."""
    line = visible(" ".join(message.split()))
    return line if len(line) <= most else f"{line[: most * 2 // 3]} … {line[-most // 3:]}"


def _fail(message: str) -> None:
    click.echo(f"attncli: error: {_line(message)}", err=True)


class OutputError(AttncliError):
    """Standard output cannot be written (a full disk, a closed descriptor)."""


@contextlib.contextmanager
def _writing_stdout():
    """Writes to stdout inside, flushed at the end: a failure other than a closed pipe is one
    OutputError. Flushed twice: a write that the kernel cuts short (a file-size limit,
    ulimit -f) leaves the rest in Python's buffer without an error, and only the next
    flush, writing the rest, meets the error."""
    try:
        yield
        sys.stdout.flush()
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OutputError(f"cannot write to standard output: {e.strerror or e}") from None


def _standard_streams() -> bool:
    """Give a closed descriptor 0, 1 or 2 /dev/null, so that no file this run opens takes its
    number (and stdout's writes land in it); returns whether stdout was closed.

    Python sets sys.stdin, sys.stdout or sys.stderr to None when its descriptor was closed
    at start-up; a closed stdin then reads as empty, and a closed stderr swallows notes."""
    closed = {name: getattr(sys, name) is None for name in ("stdin", "stdout", "stderr")}
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
    if closed["stdin"]:
        sys.stdin = open(0, "r", closefd=False)
    if closed["stderr"]:
        sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")
    if closed["stdout"]:
        sys.stdout = open(1, "w", closefd=False)  # /dev/null: nothing is written, but nothing fails
    if isinstance(getattr(sys.stdout, "buffer", None), io.FileIO):
        # PYTHONUNBUFFERED=1 writes text straight to the file, and a write the kernel cuts
        # short (ulimit -f) then loses the rest without an error; a buffer writes all or fails
        stdout = sys.stdout
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(stdout.buffer), encoding=stdout.encoding,
                                      errors=stdout.errors, line_buffering=stdout.line_buffering)
    for stream in (sys.stdout, sys.stderr):
        # a locale that is not UTF-8 (LC_ALL=C, PYTHONIOENCODING=ascii): tables degrade to
        # escapes rather than fail; JSON is written as ASCII with \u escapes (see _write_json)
        if not _utf8(stream) and hasattr(stream, "reconfigure"):
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors="backslashreplace")
    return closed["stdout"]


def _utf8(stream) -> bool:
    return (getattr(stream, "encoding", None) or "utf-8").lower().replace("_", "-") in ("utf-8", "utf8")


def _write_json(doc: dict) -> None:
    """A document as one line of JSON on stdout: UTF-8, or ASCII with \\u escapes where stdout
    is not UTF-8. A file name that is not UTF-8 keeps its bytes as \\udcXX escapes, which
    Python's json and os.fsencode turn back into them."""
    sys.stdout.write(to_json(doc, ascii_only=not _utf8(sys.stdout)) + "\n")  # surrogates: escaped by to_json


class _Stopped(Exception):
    """Ctrl-C or a closed stdout, carried past click (which would print a blank line for the
    one and exit 0 for the other) to AttncliGroup.main."""

    def __init__(self, status: ExitStatus):
        self.status = status


class _Terminated(BaseException):
    """SIGTERM, raised where the run is, so that it ends as Ctrl-C does: cleanly, workers and
    temporary files included. A BaseException, so no `except Exception` mistakes it for a
    reader's failure."""


def _terminate(signum, frame):
    raise _Terminated


class AttncliGroup(click.Group):
    """A click group whose every failure is one line on stderr and an ExitStatus."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _Stopped(ExitStatus.INTERRUPTED) from None
        except _Terminated:
            raise _Stopped(ExitStatus.TERMINATED) from None
        except BrokenPipeError:
            raise _Stopped(ExitStatus.BROKEN_PIPE) from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        stdout_closed = _standard_streams()
        with contextlib.suppress(ValueError):  # not the main thread (an embedding program): leave it
            signal.signal(signal.SIGTERM, _terminate)
        try:
            if stdout_closed:
                raise OutputError("standard output is closed; send it to a file or to /dev/null (> /dev/null)")
            rv = super().main(args, prog_name or "attncli", complete_var, standalone_mode=False, **extra)
            status = rv if isinstance(rv, int) else ExitStatus.OK
        except click.exceptions.NoArgsIsHelpError as e:  # a bare `attncli`
            click.echo(e.ctx.get_help(), err=True)
            status = ExitStatus.USAGE
        except click.UsageError as e:
            where = f" (see '{e.ctx.command_path} --help')" if e.ctx else ""
            _fail(e.format_message() + where)
            status = ExitStatus.USAGE
        except click.ClickException as e:
            _fail(e.format_message())
            status = e.exit_code
        except AttncliError as e:
            if isinstance(e, OutputError):
                _silence_stdout()  # what is still buffered would fail again at exit
            _fail(str(e))
            status = ExitStatus.ERROR
        except MemoryError:
            _fail("out of memory; give a shorter input (a long text with --file, which streams it)")
            status = ExitStatus.ERROR
        except OSError as e:  # an operating system's refusal that no reader above put in words
            where = f"{e.filename}: " if e.filename else ""
            _fail(f"{where}{e.strerror or e}" + _cwd_hint())
            status = ExitStatus.ERROR
        except (_Stopped, click.Abort, KeyboardInterrupt) as e:
            status = getattr(e, "status", ExitStatus.INTERRUPTED)
            if status == ExitStatus.BROKEN_PIPE:
                _silence_stdout()
            else:
                # on a terminal, first end the line that holds the echoed ^C
                said = "terminated" if status == ExitStatus.TERMINATED else "interrupted"
                click.echo(("\n" if sys.stderr.isatty() else "") + f"attncli: {said}", err=True)
        except Exception as e:  # noqa: BLE001: a bug; still one line, unless ATTNCLI_DEBUG asks for the traceback
            if os.environ.get("ATTNCLI_DEBUG"):
                raise
            _fail(f"internal error ({type(e).__name__}: {e}); please report it, with the command that caused it "
                  "(ATTNCLI_DEBUG=1 shows where it happened)")
            status = ExitStatus.ERROR
        if standalone_mode:
            sys.exit(int(status))
        return int(status)


def _cwd_hint() -> str:
    """A relative path cannot be found from a folder that was deleted under the run."""
    try:
        os.getcwd()
        return ""
    except OSError:
        return "; the current folder no longer exists: cd to one that does"


def _silence_stdout() -> None:
    """The reader went away: point stdout at /dev/null so the interpreter's last flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (tests): nothing will be flushed to it


class FiniteFloat(click.ParamType):
    """A float that is finite, and above zero when `positive`."""

    name = "float"

    def __init__(self, positive: bool = False):
        self.positive = positive

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.positive and x <= 0:
            self.fail(f"{value!r} must be above 0", param, ctx)
        return x


def _with_options(wrapper, options):
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def _warn(message: str) -> None:
    click.echo(f"attncli: warning: {_line(message)}", err=True)


def vectors_options(f=None, *, source_option: bool = True):
    """--vectors / --limit / --trust-pickle, packed into `load`: a function that loads the
    vectors (with a progress bar on a terminal), called once the input has been read."""
    if f is None:
        return functools.partial(vectors_options, source_option=source_option)

    @functools.wraps(f)
    def wrapper(*args, limit, trust_pickle, **kwargs):
        def load(source, param="--vectors"):
            if not sys.stderr.isatty():
                return load_vectors(source, limit=limit, trust_pickle=trust_pickle, warn=_warn, param=param)
            from attncli import render  # rich: see emit

            with render.LoadProgress() as progress:
                return load_vectors(source, limit=limit, trust_pickle=trust_pickle, progress=progress, warn=_warn,
                                    param=param)

        if source_option:
            source = kwargs.pop("vectors_source")
            bound = functools.partial(load, source)
            bound.limit, bound.trust_pickle = limit, trust_pickle  # for commands that start workers
            return f(*args, load=bound, **kwargs)
        return f(*args, load=load, **kwargs)

    options = [
        click.option("--vectors", "vectors_source", metavar="SOURCE", envvar="ATTNCLI_VECTORS", show_envvar=True,
                     help="Word vectors: a word2vec (text or binary), GloVe or fastText (.vec, .bin) file, "
                          "also .gz or .bz2; a gensim .kv/.model file (with --trust-pickle); or a downloaded "
                          "gensim-data name. Read once, then cached. Default: the bundled GloVe 6B 50d."),
    ] if source_option else []
    options += [
        click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Read only the first N words of the vectors."),
        click.option("--trust-pickle", is_flag=True,
                     help="Allow a gensim .kv/.model file: it is a Python pickle, and loading it runs its code."),
    ]
    return _with_options(wrapper, options)


# options that more than one decorator or command takes, defined once
keep_punct_option = click.option("--keep-punct", is_flag=True, help="Keep punctuation tokens (left out by default).")
oov_option = click.option(
    "--oov", type=click.Choice(["skip", "zero", "error"]), default="skip", show_default=True,
    help="A token without a vector: leave it out, give it a zero vector, or stop with an error.")


neighbors_option = click.option("--neighbors", type=click.IntRange(min=0), default=5, show_default=True,
                                help="How many nearest vocabulary words to list.")


def attention_options(f):
    """The options of every command that computes attention, packed into one Options."""

    @functools.wraps(f)
    def wrapper(*args, scale, temperature, top_k, include_self, keep_punct, oov, qkv, d_k, seed, heads, mask, **kwargs):
        opts = Options(scale, temperature, top_k, include_self, keep_punct, oov, qkv, d_k, seed, heads, mask)
        return f(*args, opts=opts, **kwargs)

    options = [
        click.option("--qkv", default="identity", show_default=True, metavar="identity|random|PATH.npz",
                     help="Query, key and value projections: none (the raw vectors), drawn at random "
                          "(with --seed, --d-k), or read from a .npz of W_query, W_key, W_value."),
        click.option("--d-k", "d_k", type=click.IntRange(min=1), metavar="N",
                     help="Size of queries, keys and values for --qkv random. Default: d, the vectors' size."),
        click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Seed of --qkv random: the same seed gives the same numbers on any machine."),
        click.option("--heads", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Split d_k into this many heads, each attending on its own; it must divide d_k."),
        click.option("--mask", type=click.Choice(["none", "causal"]), default="none", show_default=True,
                     help="causal: token i attends only to tokens j <= i, as a decoder predicting the next word."),
        click.option("--scale", type=FiniteFloat(), default=None,
                     help="Multiply the scores by this before the softmax. Default: 1/sqrt(d_k / heads); "
                          "1 gives plain softmax(q_i . k_j)."),
        click.option("--temperature", type=FiniteFloat(positive=True), default=1.0, show_default=True,
                     help="Divide the scaled scores by this: above 1 flattens the weights, below 1 sharpens them."),
        click.option("--top-k", type=click.IntRange(min=1), default=3, show_default=True,
                     help="How many top-attended tokens to list per token."),
        click.option("--include-self", is_flag=True, help="Let a token's own position count among its top attended."),
        keep_punct_option,
        oov_option,
    ]
    return _with_options(wrapper, options)


@dataclass(frozen=True)
class Output:
    fmt: str  # "table" or "json"
    no_color: bool
    svg: Path | None = None  # the table view, exported
    html: Path | None = None
    png: Path | None = None  # a matplotlib heatmap


def _output_path(kind: str, suffixes: tuple[str, ...] = ()):
    """A click callback: a path to write to, checked before any work is done: its suffix, its
    folder, and that what is there now (if anything) is a regular file attncli may replace."""

    def check(ctx, param, value):
        if value is None:
            return None
        path = Path(value)
        if suffixes and path.suffix.lower() not in suffixes:
            raise click.BadParameter(f"{value} does not end in {' or '.join(suffixes)}; --{kind} writes {kind.upper()}",
                                     ctx, param)
        folder = path.parent if str(path.parent) else Path(".")
        if not path.is_absolute() and _cwd_hint():
            raise click.BadParameter(f"{value}: cannot be written{_cwd_hint()}", ctx, param)
        if not folder.is_dir():
            raise click.BadParameter(f"{value}: the folder {folder} does not exist", ctx, param)
        problem = _not_replaceable(path)
        if problem:
            raise click.BadParameter(f"{value} {problem}; give another path", ctx, param)
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise click.BadParameter(f"{value}: cannot be written here", ctx, param)
        return path

    return check


# the parameters whose value can name a file the run reads, with how a message names them
_INPUTS = {"vectors_source": "--vectors", "qkv": "--qkv", "weights_file": "--weights", "document_file": "--file",
           "input_file": "FILE", "source": "SOURCE"}


def _read_by_this_run(ctx) -> tuple[list[tuple[str, os.stat_result]], list[tuple[str, str]]]:
    """What the run reads: (label, stat) of each input file and of a standard stream that is
    a file; and (label, path prefix) of the files read beside them: a gensim model's side
    files (model.kv.vectors.npy), the bundled vectors, the cache folder."""
    files, prefixes = [], []
    for name, label in _INPUTS.items():
        value = ctx.params.get(name)
        if not isinstance(value, str) or value in ("identity", "random", "-"):
            continue
        path = Path(value)
        if name in ("vectors_source", "source"):
            from attncli import sources

            with contextlib.suppress(AttncliError):  # a gensim-data name: the file it names
                path = sources.resolve(value).path
            prefixes.append((f"{label} {value}", os.path.realpath(path) + "."))
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # not a file: nothing to protect
            files.append((f"{label} {value}", os.stat(path.expanduser())))
    if "vectors_source" in ctx.params and ctx.params["vectors_source"] is None:
        prefixes.append(("the bundled vectors", os.path.realpath(cache.bundled_prefix()) + "."))
    with contextlib.suppress(AttncliError, OSError):
        prefixes.append(("attncli's cache folder", os.path.join(os.path.realpath(cache.cache_dir()), "")))
    for fd, label in ((0, "standard input"), (1, "standard output"), (2, "standard error")):
        with contextlib.suppress(OSError):
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode):
                files.append((label, st))
    return files, prefixes


def _refuse_overwriting_inputs(outputs: dict[str, Path | None]) -> None:
    """An output that is the same file as an input (the --vectors file given to --html, say),
    one of the files read beside it, a standard stream, or another output would destroy it:
    refuse before any work."""
    if not any(outputs.values()):
        return  # nothing to write: the common case pays nothing (no stat, no platformdirs)
    files, prefixes = _read_by_this_run(click.get_current_context())
    written: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        real = os.path.realpath(path)
        if real in written:
            raise click.UsageError(f"{option} {path} is the same file as {written[real]}; give each its own path")
        written[real] = f"{option} {path}"
        for label, prefix in prefixes:
            if real.startswith(prefix):
                raise click.UsageError(f"{option} {path} is among the files of {label}, which it would overwrite; "
                                       "give another path")
        try:
            st = os.stat(path)
        except OSError:
            continue  # not there yet: no input can be it
        for label, other in files:
            if os.path.samestat(st, other):
                raise click.UsageError(f"{option} {path} is the same file as {label}, which it would overwrite; "
                                       "give another path")


png_option = click.option(
    "--png", type=click.Path(dir_okay=False), callback=_output_path("png", (".png",)), metavar="FILE.png",
    help="Also draw the weights as a heatmap picture (needs matplotlib: pip install 'attncli[plot]').")


def output_options(f):
    """--format / --json / --no-color / --svg / --html (and --png, where a command has it),
    resolved once into an Output."""

    @functools.wraps(f)
    def wrapper(*args, fmt, as_json, no_color, svg, html, **kwargs):
        if as_json and fmt == "table":
            raise click.UsageError("--json and --format table ask for different outputs; give one of them")
        fmt = "json" if as_json else fmt or ("table" if sys.stdout.isatty() else "json")
        png = kwargs.pop("png", None)
        _refuse_overwriting_inputs({"--svg": svg, "--html": html, "--png": png, "--output": kwargs.get("output")})
        if png:
            from attncli import plot

            plot.require()  # a missing extra is an error before any output, not after it
        return f(*args, out=Output(fmt, no_color, svg, html, png), **kwargs)

    options = [
        click.option("--format", "fmt", type=click.Choice(["table", "json"]), default=None,
                     help="table (colored, for a terminal) or json (one JSON document per result, a line each). "
                          "Default: table when stdout is a terminal, json when it is not."),
        click.option("--json", "as_json", is_flag=True, help="Same as --format json."),
        click.option("--no-color", is_flag=True, help="No colours in tables (setting NO_COLOR does the same)."),
        click.option("--svg", type=click.Path(dir_okay=False), callback=_output_path("svg", (".svg",)),
                     metavar="FILE.svg", help="Also write the table view, as a terminal shows it, to an SVG picture."),
        click.option("--html", type=click.Path(dir_okay=False), callback=_output_path("html", (".html", ".htm")),
                     metavar="FILE.html", help="Also write the table view to an HTML page."),
    ]
    return _with_options(wrapper, options)


class TextParam(click.ParamType):
    """Text given as an argument: UTF-8, whatever the locale. Python decodes arguments with
    the locale's encoding, keeping the bytes it cannot decode as surrogates; under LC_ALL=C
    a UTF-8 "café" arrives so, and is decoded here; bytes that are not UTF-8 are an error."""

    name = "text"

    def __init__(self, what: str):
        self.what = what

    def convert(self, value, param, ctx):
        if not isinstance(value, str) or not any("\udc80" <= c <= "\udcff" for c in value):
            return value
        try:
            data = value.encode(sys.getfilesystemencoding(), "surrogateescape")
            return data.decode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"{self.what} is not valid UTF-8; give UTF-8 text") from None
        except UnicodeDecodeError as e:
            raise InputError(f"{self.what} is not valid UTF-8: byte 0x{data[e.start]:02x} at position {e.start} "
                             "cannot be decoded; give UTF-8 text") from None


sentence_argument = click.argument("sentence", required=False, type=TextParam("the sentence"))


def read_stdin() -> bytes:
    """All of standard input, within what memory can take (an endless /dev/zero is refused)."""
    stdin = sys.stdin.buffer
    if stdin.isatty():
        raise click.UsageError("no input: give it as an argument or a file, or pipe it on standard input")
    return limits.read_stream(stdin, "standard input")


def decode(data: bytes, where: str) -> str:
    """UTF-8 text, or an error naming the line of the first byte that is not."""
    try:
        return data.decode("utf-8-sig")  # a byte order mark, as some editors write, is not a word
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(f"{where} is not UTF-8: byte 0x{data[e.start]:02x} on line {line} cannot be decoded") from None


def read_sentences(sentence: str | None) -> list[tuple[int | None, str]]:
    """The sentences to run, each with its stdin line number (None for an argument).

    SENTENCE absent or "-": standard input, one sentence per non-blank line.
    """
    if sentence is not None and sentence != "-":
        if not sentence.strip():
            raise InputError("the sentence is empty; give some words, for example: attncli scores \"The earth is like an orange\"")
        return [(None, sentence)]
    text = decode(read_stdin(), "standard input")
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise InputError("standard input holds no sentence (it is empty or blank)")
    return lines


def compute_all(sentences: list[tuple[int | None, str]], make_doc) -> list[dict]:
    """Every document before any output, so a bad sentence leaves stdout untouched."""
    docs = []
    for line, text in sentences:
        try:
            doc = make_doc(text)
        except AttncliError as e:
            raise type(e)(f"line {line}: {e}" if line else str(e)) from None
        missing = list(dict.fromkeys(doc["oov"]))
        if missing:  # one line a sentence, however many words it lacks
            where = f"line {line}: " if line else ""
            done = "given a zero vector" if missing[0] in doc["tokens"] else "left out"
            named = ", ".join(map(repr, missing[:10])) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
            note = f"{where}no vector for {named} in {doc['vectors']['name']}; {done}"
            click.echo(f"attncli: note: {_line(note)}", err=True)
        docs.append(doc)
    return docs


def emit(docs: list[dict], out: Output, view: str, **view_args) -> None:
    """The pictures asked for first, each written whole or not at all, then stdout: JSON
    Lines, or each document drawn by render.`view` (a rule between documents). So a picture
    that cannot be written leaves stdout untouched."""
    if out.png:
        from attncli import plot  # matplotlib: an optional extra, imported only for --png

        _write_whole(out.png, lambda f: plot.heatmaps(visible_all(docs), f))
    if out.fmt == "table" or out.svg or out.html:
        _draw(docs, out, view, view_args)
    if out.fmt == "json":
        with _writing_stdout():
            for doc in docs:
                # a line a write: one huge write to a pipe whose reader has gone can end half
                # done with no error raised, where small ones raise BrokenPipeError
                _write_json(doc)
            sys.stdout.flush()


def make_console(file, out: Output | None = None, **settings):
    """A rich console as every view of the tool is drawn on: no text is read as markup or
    emoji codes (a word "[/x]" or ":smile:" stays as it is), nothing is re-coloured."""
    from rich.console import Console  # rich costs a tenth of a run's start-up, which JSON output need not pay

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich's own exits with status 1; a closed pipe is attncli's quiet 141, as for JSON
            self.quiet = True
            raise BrokenPipeError

    screen = _Console(file=file, markup=False, emoji=False, highlight=False,
                      no_color=True if out is not None and out.no_color else None, **settings)
    # COLUMNS=10**20 would overflow rich, 10**8 stall it, and 0 draw nothing at all
    screen.width = min(max(screen.width, MIN_WIDTH), MAX_WIDTH)
    return screen


MIN_WIDTH, MAX_WIDTH = 20, 1000  # columns: narrower draws nothing useful; wider than any terminal


class _Screen(io.StringIO):
    """A table held until the pictures are written, reporting the encoding of the stdout it
    stands for, so that rich chooses the same boxes and characters as it would there."""

    def __init__(self, encoding: str):
        super().__init__()
        self._encoding = encoding

    @property
    def encoding(self) -> str:
        return self._encoding


def _draw(docs: list[dict], out: Output, view: str, view_args: dict) -> None:
    """Draw the documents, their text from outside made visible (visible_all); write the
    SVG and HTML pictures; then, for a table, stdout."""
    from attncli import render

    exporting = bool(out.svg or out.html)
    if out.fmt == "table":
        screen = make_console(sys.stdout, out)
        drawn = screen if not exporting else make_console(
            _Screen(screen.encoding), out, width=screen.width, color_system=screen.color_system,
            force_terminal=screen.is_terminal, record=True)
    else:  # JSON on stdout: draw the pictures' view off screen, as a 100-column terminal would show it
        screen, drawn = None, make_console(io.StringIO(), width=100, force_terminal=True, color_system="truecolor",
                                      record=True)
    draw = getattr(render, view)
    with _writing_stdout():
        for k, doc in enumerate(visible_all(docs)):
            if len(docs) > 1:
                drawn.rule(doc.get("sentence", ""))
            drawn.print(draw(doc, width=drawn.width, **view_args))
            if k < len(docs) - 1:
                drawn.print()
    title = f"attncli {docs[0].get('command', '')}".strip() if docs else "attncli"
    if out.svg:
        _write_whole(out.svg, lambda f: f.write(drawn.export_svg(title=title, clear=False).encode("utf-8")))
    if out.html:
        _write_whole(out.html, lambda f: f.write(drawn.export_html(clear=False).encode("utf-8")))
    if screen is not None:
        with _writing_stdout():
            if drawn is not screen:
                sys.stdout.write(drawn.file.getvalue())
            sys.stdout.flush()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _not_replaceable(path: Path) -> str | None:
    """Why attncli will not replace `path`: only a regular file (or nothing) may be replaced,
    never a device, FIFO, socket or directory, even with --force."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be written: {e.strerror or e}"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a device, FIFO or socket), which attncli never replaces"
    return None


def _write_whole(path: Path, write) -> None:
    """write(binary file) into a temporary file beside `path` (beside its target, when it is
    a symlink, so the link stays), then rename it into place."""
    import tempfile

    target = Path(os.path.realpath(path))
    problem = _not_replaceable(target)
    if problem:
        raise InputError(f"{path}: {problem}; give another path")
    try:
        fd, temporary = tempfile.mkstemp(prefix=".attncli-", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise InputError(f"{path}: cannot be written: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(temporary, 0o666 & ~_umask())  # as open() would have made it, not mkstemp's 0600
        os.replace(temporary, target)
    except OSError as e:
        Path(temporary).unlink(missing_ok=True)
        raise InputError(f"{path}: cannot be written: {e.strerror or e}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@click.group(cls=AttncliGroup, context_settings={"help_option_names": ["-h", "--help"]},
             short_help="see self-attention between the words of a sentence")
@click.version_option(__version__, "-V", "--version", prog_name="attncli")
def cli():
    """See self-attention on real text: the dot-product attention scores, softmax weights
    and context vectors between the tokens of a sentence, over pretrained word vectors.

    \b
    Examples:
      attncli scores "The earth is like an orange"
      attncli context "The earth is like an orange" --token orange
      attncli scores "The earth is like an orange" | jq '.weights'
    """


@cli.command(short_help="attention weights between every pair of tokens, as a heatmap")
@sentence_argument
@click.option("--raw", is_flag=True, help="Show the raw scores x_i . x_j instead of the weights.")
@click.option("--max-tokens", type=click.IntRange(min=1), metavar="N",
              help="Draw the table for the first N tokens only (JSON always holds them all).")
@click.option("--file", "document_file", type=click.Path(dir_okay=False), metavar="DOC.txt",
              help="Treat this whole text file as one sequence: per token, its top attended and context "
                   "vector, streamed as computed, in memory that grows with T, not T x T.")
@click.option("--document", is_flag=True, help="The same for standard input, read whole as one sequence.")
@click.option("--window", type=click.IntRange(min=1), metavar="W",
              help="With --file or --document: attend only within W tokens either side.")
@vectors_options
@attention_options
@png_option
@output_options
def scores(sentence, raw, max_tokens, document_file, document, window, load, opts, out):
    """Attention between every pair of tokens of SENTENCE: a T x T table.

    Step I scores every pair by the dot product of their word vectors; Step II turns each
    row into weights that sum to 1 with softmax(scores * scale / temperature). The table
    shows the weights (or, with --raw, the scores) colored as a heatmap, then each token's
    top-attended tokens. SENTENCE absent or "-": one sentence per line of standard input
    (blank lines skipped).

    \b
    Examples:
      attncli scores "The earth is like an orange"
      attncli scores "The earth is like an orange" --raw
      attncli scores "The earth is like an orange" | jq '.weights'
      attncli scores --scale 1 < sentences.txt
    """
    if document_file or document:
        return score_document(sentence, document_file, document, window, raw, max_tokens, load, opts, out)
    if window:
        raise click.UsageError("--window needs a document: --file DOC.txt or --document")
    sentences = read_sentences(sentence)
    vectors = load()
    docs = compute_all(sentences, lambda text: scores_doc(text, vectors, opts))
    emit(docs, out, "scores_view", raw=raw, max_tokens=max_tokens)


def score_document(sentence, document_file, document, window, raw, max_tokens, load, opts, out) -> None:
    """scores --file / --document: one long sequence, streamed a row at a time."""
    if sentence is not None:
        raise click.UsageError("give a SENTENCE or a document (--file, --document), not both")
    if document_file and document:
        raise click.UsageError("give --file or --document (standard input), not both")
    drawn = [name for name, given in (("--png", out.png), ("--svg", out.svg), ("--html", out.html), ("--raw", raw),
                                       ("--max-tokens", max_tokens)) if given]
    if drawn:
        raise click.UsageError(f"{drawn[0]} draws a T x T table, which a document never holds; leave it out")
    where = document_file or "standard input"
    data = limits.read_file(document_file, "--file") if document_file else read_stdin()
    text = decode(data, where)
    if not text.strip():
        raise InputError(f"{where} is empty")
    vectors = load()
    # a long document's T x T work takes minutes: a progress bar, unless its rows are drawn on the terminal
    with _progress("rows", shown=out.fmt == "json") as update:
        rows = document_rows(text, vectors, opts, window=window, progress=update)
        first = next(rows)  # no known word, or scores that overflow: an error here, before any output
        _write_rows(itertools.chain([first], rows), out, where, vectors.name, opts, window)


def _write_rows(rows, out: Output, where: str, vectors_name: str, opts, window) -> None:
    """A document's rows to stdout as they come: JSON Lines, or a line of text each."""
    if out.fmt == "json":
        def write(row: dict) -> None:
            _write_json(row)
    else:
        from attncli import render

        screen = make_console(sys.stdout, out)
        with _writing_stdout():
            screen.print(render.document_header(visible(where), visible(vectors_name), opts, window))

        def write(row: dict) -> None:
            screen.print(render.document_row(visible_all(row)))
    written = 0
    try:
        with _writing_stdout():
            for row in rows:
                write(row)
                written += 1
            sys.stdout.flush()
    except AttncliError as e:  # a stream can fail midway only where no check could foresee it
        raise type(e)(f"{e} (the output stopped after {written:,} rows; it is incomplete)") from None


@cli.command(short_help="many sentences, one a line: one JSON result a line, in order")
@click.argument("input_file", required=False, metavar="[FILE]")
@click.option("--jsonl", is_flag=True, help="Lines are JSON objects; the sentence is in their --field.")
@click.option("--field", "field_name", default="text", show_default=True, type=TextParam("--field"),
              help="The field of --jsonl lines to read.")
@click.option("--token", metavar="WORD", type=TextParam("--token"),
              help="Give each line's context document for this token instead of scores.")
@click.option("--index", type=click.IntRange(min=0), metavar="N", help="Its position, when it occurs more than once.")
@click.option("--all", "all_contexts", is_flag=True, help="With context documents: every token's context vector too.")
@neighbors_option
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes (at most one a core); they share the memory-mapped vectors, and the output "
                   "keeps input order.")
@vectors_options
@attention_options
def batch(input_file, jsonl, field_name, token, index, all_contexts, neighbors, jobs, load, opts):
    """A corpus in one run: FILE (or standard input), one sentence a line, or with --jsonl one
    JSON object a line. Out: JSON Lines, one object per input line in input order, the
    `scores` document (or, with --token, the `context` one) plus `line`, the input line
    number from 1. A blank line is skipped (as by scores), the others keep their numbers.
    A bad line gives {"line", "error"} and the run goes on; at the end, a count of them on
    stderr, and exit status 1 if there was any.

    \b
    Examples:
      attncli batch corpus.txt > results.jsonl
      attncli batch corpus.jsonl --jsonl --field body --token orange --jobs 2
      cat corpus.txt | attncli batch --scale 1 | jq -c '.top[0]'
    """
    from attncli import batch as batches

    data = _read_input(input_file)
    items = batches.parse_lines(data, jsonl=jsonl, field_name=field_name)
    if not items:
        raise InputError(f"{input_file or 'standard input'} holds no sentence (it is empty or blank)")
    jobs = min(jobs, len(items), os.cpu_count() or 1)  # more workers than lines or cores only cost start-up
    vectors = load()  # here, once: converts and caches a new source before workers start
    job = batches.Job(source=vectors.source if vectors.source != "bundled" else None, limit=load.limit,
                      trust_pickle=load.trust_pickle, opts=opts, token=token, index=index,
                      all_contexts=all_contexts, neighbors=neighbors)
    failed = 0
    with _progress("lines") as update, _writing_stdout():
        for done, result in enumerate(batches.run(items, job, jobs), start=1):
            failed += "error" in result
            _write_json(result)
            update(done, len(items))
        sys.stdout.flush()
    if failed:
        click.echo(f"attncli: {failed} of {len(items)} lines failed; their objects hold \"error\"", err=True)
        return ExitStatus.ERROR


def _read_input(input_file: str | None) -> bytes:
    return read_stdin() if input_file in (None, "-") else limits.read_file(input_file, "FILE")


@contextlib.contextmanager
def _progress(unit: str, *, shown: bool = True):
    """update(done, total) as the work goes; a progress bar (count, rate, time left) on
    stderr when it is a terminal and `shown`."""
    if not (shown and sys.stderr.isatty()):
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    # redirect_stdout=False: by default rich would route the results on stdout to the terminal
    with Progress(unit, BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                  TimeRemainingColumn(), transient=True, console=_stderr_console(),
                  redirect_stdout=False, redirect_stderr=False) as bar:
        task = bar.add_task(unit, total=None, rate="")
        start = time.monotonic()

        def update(done: int, total: int) -> None:
            rate = done / max(time.monotonic() - start, 1e-9)
            bar.update(task, completed=done, total=total, rate=f"{rate:,.0f} {unit}/s")

        yield update


def _stderr_console():
    return make_console(sys.stderr)


@cli.command(short_help="one token's attention, context vector and nearest words")
@sentence_argument
@click.option("--token", metavar="WORD", type=TextParam("--token"),
              help="The token whose attention and context vector to show.")
@click.option("--index", type=click.IntRange(min=0), metavar="N",
              help="Its position among the tokens (from 0), when it occurs more than once; alone, picks the token at N.")
@click.option("--all", "all_contexts", is_flag=True, help="Also give every token's context vector.")
@neighbors_option
@vectors_options
@attention_options
@png_option
@output_options
def context(sentence, token, index, all_contexts, neighbors, load, opts, out):
    """One token's attention over SENTENCE and its context vector.

    Step III: the context vector z_i = sum_j alpha_ij x_j mixes every token's vector by
    the token's weights. Shown: the token's weights ranked, its context vector, and the
    vocabulary words nearest (cosine) to the context vector beside those nearest to the
    token's own vector, to see whether context moved its meaning. SENTENCE absent or "-":
    one sentence per line of standard input.

    \b
    Examples:
      attncli context "The earth is like an orange" --token orange
      echo "Orange is a bright color" | attncli context --token orange --format json
      attncli context "the cat saw the dog" --token the --index 3
      attncli context "The earth is like an orange" --all
    """
    if token is None and index is None and not all_contexts:
        raise click.UsageError("say which token: --token WORD (or --index N), or --all for every token")
    sentences = read_sentences(sentence)
    vectors = load()
    docs = compute_all(
        sentences,
        lambda text: context_doc(text, vectors, opts, token=token, index=index,
                                 all_contexts=all_contexts, neighbors=neighbors),
    )
    emit(docs, out, "context_view")


@cli.command(short_help="one word in several sentences: has context moved its meaning?")
@click.argument("sentences", nargs=-1, metavar="SENTENCE_A SENTENCE_B [...]", type=TextParam("a sentence"))
@click.option("--token", metavar="WORD", required=True, type=TextParam("--token"),
              help="The word to follow through the sentences.")
@neighbors_option
@vectors_options
@attention_options
@png_option
@output_options
def compare(sentences, token, neighbors, load, opts, out):
    """The same word in two or more sentences: in each, what it attends to and its context
    vector; between them, the cosine of the context vectors beside the cosine of the raw
    vectors (1 for the same word); and the words nearest each, the moved ones marked.

    With raw pretrained vectors and no learned projections the context vectors of one word
    stay close whatever the sentence: attention alone, untrained, barely moves a meaning.
    That is why the trainable form learns W_Q, W_K and W_V.

    \b
    Examples:
      attncli compare "The earth is like an orange" "Orange is a bright color" --token orange
      attncli compare "I sat on the bank" "The bank raised rates" "A river bank" --token bank --json
    """
    if len(sentences) < 2:
        raise click.UsageError(f"compare needs two sentences or more, and got {len(sentences)}")
    for n, text in enumerate(sentences, start=1):
        if not text.strip():
            raise InputError(f"sentence {n} is empty")
    vectors = load()
    doc = compare_doc(list(sentences), vectors, opts, token=token, neighbors=neighbors)
    emit([doc], out, "compare_view")


@cli.command(short_help="the vocabulary words nearest a word, or its context vector")
@click.argument("word", type=TextParam("WORD"))
@click.option("-k", "--k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="How many words.")
@click.option("--context", "sentence", metavar="SENTENCE", type=TextParam("--context"),
              help="Use WORD's context vector in SENTENCE instead of its own vector.")
@vectors_options
@attention_options
@output_options
def neighbors(word, k, sentence, load, opts, out):
    """The K vocabulary words nearest (cosine) WORD's vector, or, with --context, its context
    vector in SENTENCE; the word itself and punctuation left out. Exact: every word of the
    vocabulary is compared.

    \b
    Examples:
      attncli neighbors orange
      attncli neighbors orange --context "The earth is like an orange" --k 5
    """
    vectors = load()
    emit([neighbors_doc(word, vectors, opts, k=k, sentence=sentence)], out, "neighbors_view")


@cli.group()
def vectors():
    """Word vectors: what a source holds, and the cache that makes its second load fast.

    The first load of a source reads it through gensim (slowly, once) and writes a cache
    entry: the matrix as a .npy file that later runs memory-map, and the words in a form
    searched without building a dictionary. ATTNCLI_CACHE_DIR sets where entries go.

    \b
    Examples:
      attncli vectors info
      attncli vectors convert ~/vectors/glove.840B.300d.txt
      attncli vectors info --vectors glove-wiki-gigaword-300
      attncli vectors list
      attncli vectors clear
    """


def _info(vectors, seconds: float) -> dict:
    meta = vectors.meta
    return {
        "name": vectors.name, "words": vectors.size, "dim": vectors.dim, "cased": vectors.cased,
        "subwords": vectors.subwords is not None, "source": vectors.source,
        "format": (meta.get("source") or {}).get("format", "attncli-vectors"),
        "cache_entry": meta.get("entry"),
        "load_seconds": round(seconds, 4),
    }


@vectors.command(short_help="what a vectors source holds, and how long it took to load")
@vectors_options
@output_options
def info(load, out):
    """Name, words, dimension, case, source and cache entry of the vectors, and the time
    this load took (the first load of a source includes reading and caching it).

    \b
    Examples:
      attncli vectors info
      attncli vectors info --vectors GoogleNews-vectors-negative300.bin
      attncli vectors info --vectors vectors.txt --limit 50000 --json
    """
    start = time.perf_counter()
    vectors = load()
    emit([_info(vectors, time.perf_counter() - start)], out, "info_view")


@vectors.command(short_help="read a source once and cache it")
@click.argument("source")
@vectors_options(source_option=False)
@output_options
def convert(source, load, out):
    """Read SOURCE (any --vectors source) and write its cache entry now, so that the first
    real run is fast too. An entry already there is kept.

    \b
    Examples:
      attncli vectors convert ~/vectors/glove.840B.300d.txt
      attncli vectors convert cc.en.300.bin
      attncli vectors convert my-model.kv --trust-pickle
    """
    start = time.perf_counter()
    vectors = load(source, param="SOURCE")
    if not vectors.meta.get("entry"):
        raise VectorsError(f"{source} was read but could not be cached (see the warning above)")
    emit([_info(vectors, time.perf_counter() - start)], out, "info_view")


@vectors.command(name="list", short_help="the cache entries and their sizes")
@output_options
def list_(out):
    """Every cache entry: its source, words, dimension and size on disk. "stale" means the
    source has changed or gone since, so the entry will not be used again; "damaged" says
    what is wrong with an entry whose files changed after they were written (its source is
    converted again on its next use).

    \b
    Examples:
      attncli vectors list
      attncli vectors list --json | jq -s 'map(.bytes) | add'
    """
    docs = [_entry_doc(entry) for entry in cache.entries()]
    if out.fmt == "json":
        emit(docs, out, "")
    else:
        emit([{"entries": docs, "cache_dir": str(cache.cache_dir())}], out, "entries_view")


def _entry_doc(entry: dict) -> dict:
    # a damaged entry's metadata may be anything, or nothing: only fields of the right type are shown
    source = entry.get("source") if isinstance(entry.get("source"), dict) else {}
    options = entry.get("options") if isinstance(entry.get("options"), dict) else {}
    try:
        st = os.stat(source.get("path", ""))
        stale = (st.st_size, st.st_mtime_ns) != (source.get("size"), source.get("mtime_ns"))
    except (OSError, TypeError, ValueError):
        stale = True
    return {"path": entry["path"], "name": entry.get("name"), "words": entry.get("words"), "dim": entry.get("dim"),
            "bytes": entry["bytes"], "source": source.get("path"), "limit": options.get("limit"),
            "created": entry.get("created"), "stale": stale, "damaged": entry.get("damaged")}


@vectors.command(short_help="remove every cache entry")
@output_options
def clear(out):
    """Remove every cache entry; a source is read again on its next use.

    Only folders attncli made (each holds its marker file, .attncli-entry) are touched, and
    only the files attncli wrote in them: anything else in the cache directory, or added to
    an entry, is left as it is, and said so ("kept"). A temporary folder less than an hour
    old may belong to a run still writing it, and is kept too.

    \b
    Example:
      attncli vectors clear
    """
    done = cache.clear()
    for kept in done["kept"]:
        _warn(f"{kept['path']}: left as it is: {kept['reason']}")
    for link in done["links"]:
        _warn(f"{link['path']}: a symbolic link to {link['target']}, removed; what it points to was left as it is")
    emit([{"removed": done["removed"], "bytes": done["bytes"], "cache_dir": str(cache.cache_dir()),
           "kept": done["kept"], "links": done["links"]}], out, "cleared_view")


@cli.command(short_help="walk a sentence through every step of attention")
@sentence_argument
@click.option("--token", metavar="WORD", type=TextParam("--token"), help="Follow this token's row through each step.")
@click.option("--index", type=click.IntRange(min=0), metavar="N", help="Its position, when it occurs more than once.")
@vectors_options
@attention_options
@png_option
@output_options
def explain(sentence, token, index, load, opts, out):
    """Every step of attention over SENTENCE, each with its shape: the embeddings X (T x d),
    the queries Q = X W_Q, keys K = X W_K and values V = X W_V (T x d_k), the raw scores
    Q K^T, the scaled scores, the weights, and the context vectors Z = A V. With --token,
    one token's row through each step, as the seed's worked example follows "orange".
    --format json gives every matrix under "steps".

    \b
    Examples:
      attncli explain "The earth is like an orange"
      attncli explain "The earth is like an orange" --qkv random --seed 0 --heads 2 --mask causal
      attncli explain "The earth is like an orange" --token orange --json | jq '.row.weights'
    """
    sentences = read_sentences(sentence)
    vectors = load()
    docs = compute_all(sentences, lambda text: explain_doc(text, vectors, opts, token=token, index=index))
    emit(docs, out, "explain_view")


@cli.command(short_help="the recurrent network attention replaced, beside attention")
@sentence_argument
@click.option("--hidden", type=click.IntRange(min=1), metavar="N",
              help="Size N of the hidden state. Default: 32, or what --weights holds.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the RNN's random weights (uniform on ±1/sqrt(N), as PyTorch's nn.RNN).")
@click.option("--weights", "weights_file", type=click.Path(dir_okay=True), metavar="FILE.npz",
              help="Read W_hx (N x d), W_hh (N x N) and b_h (N) from a .npz instead.")
@vectors_options
@keep_punct_option
@oov_option
@output_options
def rnn(sentence, hidden, seed, weights_file, load, keep_punct, oov, out):
    """The seed's RNN, reduce(lambda h, x: tanh(W_hx @ x + W_hh @ h + b_h), inputs, h0),
    folded over SENTENCE from h0 = 0: each state's norm, and how strongly each input still
    moves the final state (the Frobenius norm of d h_T / d x_i, exact, by the chain rule),
    beside the last token's attention over the same inputs. The RNN's influence fades with
    distance, step by step; attention reaches every position in one step.

    \b
    Examples:
      attncli rnn "The books that the professor recommended during the lecture are expensive"
      attncli rnn "The earth is like an orange" --hidden 8 --seed 1 --json | jq '.influence'
    """
    sentences = read_sentences(sentence)
    vectors = load()
    if weights_file:
        weights = projections.load_rnn_weights(weights_file, vectors.dim)
        if hidden is not None and hidden != len(weights["b_h"]):
            raise click.UsageError(f"--hidden {hidden} does not match {weights_file}, whose N is {len(weights['b_h'])}")
    else:
        weights = recurrent.init_weights(vectors.dim, hidden or 32, seed)
    opts = Options(keep_punct=keep_punct, oov=oov)
    origin = {"path": weights_file} if weights_file else {"seed": seed}
    docs = compute_all(sentences, lambda text: rnn_doc(text, vectors, opts, weights=weights, origin=origin))
    emit(docs, out, "rnn_view")


@cli.group()
def qkv():
    """Query, key and value projections, as files to edit, train elsewhere or share.

    \b
    Example:
      attncli qkv init --d-k 16 --seed 0 -o proj.npz
      attncli scores "The earth is like an orange" --qkv proj.npz
    """


@qkv.command(short_help="write random projections to a .npz file")
@click.option("--d-k", "d_k", type=click.IntRange(min=1), metavar="N", help="Size of queries, keys and values. Default: d.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="The random seed.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), callback=_output_path("output"), required=True,
              help="The .npz file to write.")
@click.option("--force", is_flag=True, help="Replace the file if it exists.")
@vectors_options
@output_options
def init(d_k, seed, output, force, load, out):
    """Write W_query, W_key and W_value of shape (d, d_k), drawn as --qkv random draws them
    (Keras's "uniform": uniform on [-0.05, 0.05]), for the vectors' d. The file is written
    whole or not at all.

    \b
    Examples:
      attncli qkv init --d-k 16 --seed 0 -o proj.npz
      attncli qkv init --vectors GoogleNews-vectors-negative300.bin --d-k 64 -o big.npz
    """
    path = Path(output)
    if path.exists() and not force:
        raise click.UsageError(f"{path} exists; give --force to replace it")
    d = load().dim
    arrays = attention.init_projections(d, d_k or d, seed)
    _write_whole(path, lambda f: np.savez(f, **arrays))
    emit([{"path": str(path), "d": d, "d_k": d_k or d, "seed": seed, "arrays": list(arrays)}], out, "info_view")


main = cli
