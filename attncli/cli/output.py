"""What a run writes: one-line messages on stderr, JSON and tables on stdout, the pictures
(SVG, HTML, PNG) written whole or not at all, and progress bars."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click
from attncli.errors import OutputError
from attncli.system.writing import not_replaceable, write_whole
from attncli.views.json import pretty_json, utf8, write_json
from attncli.views.progress import fitted_bar
from attncli.visible import visible, visible_all


def one_line(message: str, most: int = 1200) -> str:
    """One line for stderr: white space run together, control characters written out (a
    message can hold a path or a word from a file), and a message too long for a person
    shortened in its middle, keeping the end that says what to do."""
    line = visible(" ".join(message.split()))
    return line if len(line) <= most else f"{line[: most * 2 // 3]} … {line[-most // 3:]}"


def fail(message: str) -> None:
    click.echo(f"attncli: error: {one_line(message)}", err=True)



@contextlib.contextmanager
def writing_stdout():
    """Writes to stdout inside, flushed at the end: a failure other than a closed pipe is one
    OutputError. Flushed twice: a write that the kernel cuts short (a file-size limit,
    ulimit -f) leaves the rest in Python's buffer without an error, and only the next
    flush, writing the rest, meets the error. What was to be said of the results is said
    first (say_later)."""
    say_now()
    try:
        yield
        sys.stdout.flush()
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OutputError(f"cannot write to standard output: {e.strerror or e}") from None


def say_later(line: str) -> None:
    """A warning or a note on what a run computes ("warning: ..."), said on stderr once its
    results are written, or about to be (say_now): a run that fails before says only its
    error, in one line. Kept in the run's click context, so that nothing outlives the run."""
    click.get_current_context().meta.setdefault("attncli.said", []).append(line)


def say_now() -> None:
    """What say_later kept, said now, once."""
    ctx = click.get_current_context(silent=True)
    said = ctx.meta.pop("attncli.said", []) if ctx is not None else []
    for line in said:
        click.echo(f"attncli: {one_line(line)}", err=True)


def cwd_hint() -> str:
    """A relative path cannot be found from a folder that was deleted under the run."""
    try:
        os.getcwd()
        return ""
    except OSError:
        return "; the current folder no longer exists: cd to one that does"


def silence_stdout() -> None:
    """The reader went away: point stdout at /dev/null so the interpreter's last flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (tests): nothing will be flushed to it


def warn(message: str) -> None:
    click.echo(f"attncli: warning: {one_line(message)}", err=True)


def note_redone(redone: int, sentences: int) -> None:
    """Said once a run, where a --precision float32 run computed `redone` of its `sentences`
    in float64 (attention.in_range): its numbers are float64's there, and it took longer."""
    if redone:
        click.echo(f"attncli: note: {redone:,} of {sentences:,} sentences left float32's range (their numbers "
                   "overflow in it) and were computed in float64 instead (redone_in_float64 in the JSON)", err=True)


DASK_MODULES = ("distributed", "dask", "tornado", "asyncio")  # Dask's, and those its client runs on


def quiet_dask() -> None:
    """Dask's own voice kept off stderr for the rest of this run: its log lines, its warnings,
    and the exceptions its objects raise as they are collected (Client.__del__, at exit
    too), which Python prints as tracebacks. attncli says what went wrong, in one line; an
    unraisable exception of anything else is still Python's to print."""
    import logging
    import warnings

    logging.disable(logging.CRITICAL)  # attncli itself logs nothing
    warnings.simplefilter("ignore")
    if getattr(sys.unraisablehook, "keeps_dask_quiet", False):
        return
    previous = sys.unraisablehook

    def hook(unraisable) -> None:
        if not _of_dask(unraisable):
            previous(unraisable)

    hook.keeps_dask_quiet = True
    sys.unraisablehook = hook


def _of_dask(unraisable) -> bool:
    """Whether an unraisable exception is Dask's: its object's module, or a frame it passed through."""
    names = [getattr(unraisable.object, "__module__", None) or type(unraisable.object).__module__]
    frame = unraisable.exc_traceback
    while frame is not None:
        names.append(frame.tb_frame.f_globals.get("__name__", ""))
        frame = frame.tb_next
    return any(str(name).split(".")[0] in DASK_MODULES for name in names)


@dataclass(frozen=True)
class Output:
    fmt: str  # "table" or "json"
    no_color: bool
    svg: Path | None = None  # the table view, exported
    html: Path | None = None
    png: Path | None = None  # a matplotlib heatmap
    pager: bool = True  # through the pager, on a terminal, what does not fit on it (see pager.py)
    fields: tuple[str, ...] | None = None  # --fields: the JSON documents' keys to write


def emit(docs: list[dict], out: Output, view: str, json_docs: list[dict] | None = None, **view_args) -> None:
    """The pictures asked for first, each written whole or not at all, then stdout: JSON
    Lines, or each document drawn by views.view(`view`) (a rule between documents). So a picture
    that cannot be written leaves stdout untouched. json_docs: what JSON writes, where it
    is not the documents drawn (the records a summary's table shows, a line each)."""
    if out.png:
        from attncli.views import plot  # matplotlib: an optional extra, imported only for --png

        write_whole(out.png, lambda f: plot.heatmaps(visible_all(docs), f))
    if out.fmt == "table" or out.svg or out.html:
        _draw(docs, out, view, view_args)
    shown = docs if json_docs is None else json_docs
    if out.fields is not None:
        from attncli.corpus.batch import only  # multiprocessing, at workers' top: 20 ms

        shown = [only(doc, out.fields) for doc in shown]
    if out.fmt == "json" and sys.stdout.isatty():  # a person reads it: laid out, and coloured
        screen = make_console(sys.stdout, out)
        _show(_json_screen(shown, screen), screen, out)
    elif out.fmt == "json":  # the contract: one document a line
        with writing_stdout():
            for doc in shown:
                # a line a write: one huge write to a pipe whose reader has gone can end half
                # done with no error raised, where small ones raise BrokenPipeError
                write_json(doc)
            sys.stdout.flush()


MOST_PAINTED = 1 << 20  # characters of JSON coloured; beyond, rich would take seconds for a screenful's worth


def _json_screen(docs: list[dict], screen) -> str:
    """The documents as pretty_json, coloured for `screen` as rich colours JSON, unless it
    has no colours (NO_COLOR, --no-color, TERM=dumb): then without any escape sequence."""
    text = "".join(pretty_json(doc, ascii_only=not utf8(sys.stdout)) + "\n" for doc in docs)
    if screen.no_color or screen.color_system is None or len(text) > MOST_PAINTED:
        return text
    from rich.highlighter import JSONHighlighter
    from rich.text import Text

    painted = make_console(_Screen(screen.encoding), width=screen.width, color_system=screen.color_system,
                           force_terminal=True)
    # soft_wrap: no line is cut or wrapped by rich; the terminal wraps a long one itself
    painted.print(JSONHighlighter()(Text(text, end="")), soft_wrap=True)
    return painted.file.getvalue()


def make_console(file, out: Output | None = None, **settings):
    """A rich console as every view of the tool is drawn on: no text is read as markup or
    emoji codes (a word "[/x]" or ":smile:" stays as it is), nothing is re-coloured."""
    from rich.console import Console  # rich costs a tenth of a run's start-up, which JSON output need not pay

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich's own exits with status 1; a closed pipe is attncli's quiet 141, as for JSON
            self.quiet = True
            raise BrokenPipeError

    if "width" not in settings:  # decided here, never by rich, which takes COLUMNS=0 for 0 columns
        settings["width"], settings["height"] = terminal_size(file)
    screen = _Console(file=file, markup=False, emoji=False, highlight=False,
                      no_color=settings.pop("no_color", True if out is not None and out.no_color else None), **settings)
    screen.width = drawn_width(screen.width)
    return screen


MIN_WIDTH, MAX_WIDTH = 20, 1000  # columns: narrower draws nothing useful; wider than any terminal


def drawn_width(columns: int) -> int:
    """The width a view is drawn to on a terminal of `columns`: at least MIN_WIDTH (a
    narrower terminal wraps what is drawn), at most MAX_WIDTH (COLUMNS=10**20 would
    overflow rich, 10**8 stall it)."""
    return min(max(columns, MIN_WIDTH), MAX_WIDTH)


def terminal_size(stream) -> tuple[int, int]:
    """(columns, lines) of the terminal `stream` is drawn on: COLUMNS and LINES where they
    are whole numbers above 0, else the terminal's own size (the stream's, else that of the
    first standard stream that is a terminal, as rich looks), else 80 x 25. COLUMNS=0, -5
    or "wide" is no width: the terminal's is used."""
    size = [None, None]
    for fd in (_fileno(stream), 0, 1, 2):
        try:
            size = [n or None for n in os.get_terminal_size(fd)]  # a terminal that does not know says 0
            break
        except (OSError, TypeError, ValueError):
            continue
    for k, name in enumerate(("COLUMNS", "LINES")):
        value = os.environ.get(name, "").strip()
        if value.isdecimal() and value.isascii() and int(value) > 0:
            size[k] = int(value)
    return size[0] or 80, size[1] or 25


def _fileno(stream) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a StringIO, tests' streams)
        return None


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
    SVG and HTML pictures; then, for a table, stdout. The pictures are drawn on a console
    of their own, in full colour, so that they are the same whatever stdout is (a pipe, a
    terminal without colour): at the terminal's width for a table, else 100 columns."""
    from attncli import views  # rich, at the views' top: 40 ms
    from attncli.views import export  # and its pages

    draw = views.view(view)
    shown = visible_all(docs)

    def paint(console) -> None:
        export.paint(console, shown, draw, view_args)

    screen = make_console(sys.stdout, out) if out.fmt == "table" else None
    if out.svg or out.html:
        picture = export.recording(screen.width if screen is not None else 100)  # NO_COLOR is the terminal's
        paint(picture)
        title = f"attncli {docs[0].get('command', '')}".strip() if docs else "attncli"
        if out.svg:
            write_whole(out.svg, lambda f: f.write(export.svg(picture, title).encode("utf-8")))
        if out.html:
            page = export.html(picture, export.picture_title(shown), shown)
            write_whole(out.html, lambda f: f.write(page.encode("utf-8")))
    if screen is None:
        return
    if out.pager and sys.stdout.isatty():  # drawn whole first, to see whether it fits
        held = make_console(_Screen(screen.encoding), out, width=screen.width, color_system=screen.color_system,
                            force_terminal=screen.is_terminal)
        with writing_stdout():
            paint(held)
        _show(held.file.getvalue(), screen, out)
        return
    with writing_stdout():
        paint(screen)
        sys.stdout.flush()


def _show(text: str, screen, out: Output) -> None:
    """Text drawn for the terminal stdout is: through the pager when it does not fit there
    (and paging is on), else written."""
    from attncli.cli import pager  # subprocess, at pager's top: only a terminal's output is paged

    line = pager.command() if out.pager else None
    columns, _ = terminal_size(sys.stdout)
    # a terminal narrower than the drawing wraps it (less would show it a character a line, and wait)
    if line and columns >= screen.width and not pager.fits(text, columns, screen.height) and pager.page(text, line, warn):
        return
    with writing_stdout():
        sys.stdout.write(text)
        sys.stdout.flush()


def show(text: str, color: bool | None = None) -> None:
    """Plain text (--help) on stdout: on a terminal, as a result is shown (_show: the pager
    when it does not fit); else written as click writes it."""
    if not sys.stdout.isatty():
        click.echo(text, nl=False, color=color)
        return
    columns, lines = terminal_size(sys.stdout)
    _show(text, _Size(drawn_width(columns), lines), Output("table", no_color=True))


@dataclass(frozen=True)
class _Size:
    """What _show asks of a console: the width drawn to and the terminal's height."""

    width: int
    height: int


def unwritable(path: Path) -> str | None:
    """Why `path` cannot be written now, said after its name ("is a directory"), or None:
    checked before any work, so that a run does not compute for minutes and then fail."""
    folder = path.parent if str(path.parent) else Path(".")
    if not path.is_absolute() and cwd_hint():
        return f"cannot be written{cwd_hint()}"
    if not folder.is_dir():
        return f"cannot be written: the folder {folder} does not exist"
    problem = not_replaceable(path)
    if problem:
        return problem
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return "cannot be written: permission denied"
    return None


def same_terminal(one, other) -> bool:
    """Whether two streams are the same terminal (the same device, however opened): what
    is drawn on the one lands among the lines of the other."""
    try:
        if not (one.isatty() and other.isatty()):
            return False
        a, b = os.fstat(one.fileno()), os.fstat(other.fileno())
    except (OSError, ValueError, AttributeError):  # closed, or not a file (tests)
        return False
    return os.path.samestat(a, b) or a.st_rdev == b.st_rdev


@contextlib.contextmanager
def progress(unit: str, *, shown: bool = True, streaming: bool = True):
    """update(done, total, note="") as the work goes; a progress bar (count, rate, time left,
    the note) on stderr when it is a terminal and `shown`, unless the results are `streaming`
    to stdout and stdout is that same terminal: the bar would be drawn among them."""
    if not (shown and progress_shown(streaming)):
        yield lambda done, total, note="": None
        return
    # redirect_stdout=False: by default rich would route the results on stdout to the terminal
    with bar_console() as console, fitted_bar(unit, console) as bar:
        task = bar.add_task(unit, total=None, rate="", note="")
        start = time.monotonic()

        def update(done: int, total: int, note: str = "") -> None:
            rate = done / max(time.monotonic() - start, 1e-9)
            bar.update(task, completed=done, total=total, rate=f"{rate:,.0f} {unit}/s", note=note)

        yield update


def progress_shown(streaming: bool = True) -> bool:
    """Whether progress draws its bar: stderr is a terminal, and not the one results stream to."""
    return sys.stderr.isatty() and not (streaming and same_terminal(sys.stdout, sys.stderr))


@contextlib.contextmanager
def bar_console():
    """A console for a progress bar on stderr's terminal, drawn through a Patient writer:
    rich redraws a bar from a thread of its own, holding a lock that its stop (at the end,
    at a Ctrl-C) waits for, so a write that waited on a terminal which takes nothing would
    hold the run's end for ever."""
    with contextlib.closing(Patient(sys.stderr)) as screen:
        yield make_console(screen)


class Patient(io.TextIOBase):
    """A terminal written through a descriptor of its own that never blocks: what the
    terminal cannot take now (its reader stalled) waits for the next write, a frame of a
    bar written meanwhile is dropped (the next one draws it whole), and at close what is
    left gets `patience` seconds, then is given up."""

    WAITING = 1 << 14  # bytes held for a terminal that takes nothing, past which a write is dropped

    def __init__(self, stream, patience: float = 0.5):
        super().__init__()
        try:
            self.fd = os.open(os.ttyname(stream.fileno()), os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError:  # a terminal without a name here: its own descriptor, which may wait
            self.fd = os.dup(stream.fileno())
        self._encoding, self.patience, self.waiting = stream.encoding, patience, b""

    @property
    def encoding(self) -> str:
        return self._encoding

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if len(self.waiting) < self.WAITING:
            self.waiting += text.encode(self._encoding, "backslashreplace")
        self.flush()
        return len(text)

    def flush(self) -> None:
        while self.waiting:
            try:
                self.waiting = self.waiting[os.write(self.fd, self.waiting):]
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # the terminal hung up: nothing can reach it
                self.waiting = b""

    def close(self) -> None:
        import select

        if self.closed:
            return
        deadline = time.monotonic() + self.patience
        while self.waiting and (left := deadline - time.monotonic()) > 0:
            select.select([], [self.fd], [], left)
            self.flush()
        os.close(self.fd)
        super().close()


def to_terminal(stream, line: str) -> None:
    """`line` on `stream`, where it is a terminal through a Patient writer: the last words of
    a run that was stopped, which a stalled terminal must not hold for ever."""
    if not stream.isatty():
        stream.write(line)
        stream.flush()
        return
    stream.flush()
    with contextlib.closing(Patient(stream)) as screen:
        screen.write(line)
