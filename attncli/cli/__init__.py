"""The command line: parse, load, compute, render, and map errors to one-line messages.

Only click code lives in this package; the work is done by documents/ (attention over a
sentence), vectors (loading) and views (tables, pictures and JSON). This module holds the group
and the one place that turns every failure into a line on stderr and an exit status (those
and the signals that end a run are ending.py's, below it);
options.py the shared options, inputs.py reading sentences, output.py writing results;
then one module for each family of commands.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys

import click
from attncli.cli.output import cwd_hint, fail, silence_stdout, to_terminal
from attncli.cli.sections import Command, Group, no_such_command, show_help
from attncli.errors import AttncliError, OutputError
from attncli.system.ending import RUN, SAID, ExitStatus, Terminated, ending_signals, stopping  # noqa: F401: the commands' too
from attncli.version import __version__
from attncli.views.json import utf8


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
        # escapes rather than fail; JSON is written as ASCII with \u escapes (see write_json)
        if not utf8(stream) and hasattr(stream, "reconfigure"):
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors="backslashreplace")
    return closed["stdout"]


class _Stopped(Exception):
    """Ctrl-C or a closed stdout, carried past click (which would print a blank line for the
    one and exit 0 for the other) to AttncliGroup.main."""

    def __init__(self, status: ExitStatus):
        self.status = status


@contextlib.contextmanager
def _carried():
    """Ctrl-C, SIGTERM, SIGHUP or a closed stdout, raised inside, as _Stopped."""
    try:
        yield
    except KeyboardInterrupt:
        raise _Stopped(ExitStatus.INTERRUPTED) from None
    except Terminated as e:
        raise _Stopped(e.status) from None
    except BrokenPipeError:
        raise _Stopped(ExitStatus.BROKEN_PIPE) from None


# the commands, each in the module of its family (attncli.cli.MODULE), by name; a module is
# imported only when its command is run or listed (click's documented lazy group), so that
# `attncli scores` does not pay for building the options of train, stats and the rest
LAZY = {
    "scores": "scores", "context": "sentence", "compare": "sentence", "neighbors": "sentence",
    "explain": "sentence", "heads": "sentence", "batch": "corpus", "vectors": "vectors",
    "rnn": "rnn", "qkv": "qkv", "train": "train", "stats": "stats", "faithfulness": "faithfulness",
    "explore": "explore", "contributions": "contributions", "quantization": "drift",
    "generate": "generate",
}


class AttncliGroup(Group):
    """A click group whose every failure is one line on stderr and an ExitStatus, and whose
    commands (LAZY) are imported when first asked for."""

    def list_commands(self, ctx):
        return sorted({*self.commands, *LAZY})

    def get_command(self, ctx, name):
        if name not in self.commands and name in LAZY:
            module = importlib.import_module(f"attncli.cli.{LAZY[name]}")
            self.add_command(getattr(module, name), name)
        return self.commands.get(name)

    def make_context(self, info_name, args, parent=None, **extra):
        with _carried():  # the group's own options, parsed before any command
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx):
        with _carried():
            rv = super().invoke(ctx)
            RUN.ended = True  # the command has returned: what is left of click's run is not to be interrupted
        return rv

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, held=None, **extra):
        """The run, its ending said in one line. `held`, the signal mask from before the
        command held Ctrl-C and the ending signals as it started (ending.hold), is given only
        by the command itself (attncli.__main__), whose process exits after the run."""
        stdout_closed = _standard_streams()
        with stopping(held) as take:
            status = self._run(take, stdout_closed, args, prog_name, complete_var, **extra)
        if standalone_mode:
            sys.exit(int(status))
        return int(status)

    def _run(self, take, stdout_closed: bool, args, prog_name, complete_var, **extra) -> int:
        """The command, and every way it can end as an ExitStatus, said in one line (_said).
        Once it has returned or raised, its outcome is decided: a signal that comes while it
        is said is ignored (RUN.ended, set before any call, so no handler runs in between)."""
        try:
            take()  # Ctrl-C and the ending signals end the run from here, through _said
            if stdout_closed:
                raise OutputError("standard output is closed; send it to a file or to /dev/null (> /dev/null)")
            rv = super().main(args, prog_name or "attncli", complete_var, standalone_mode=False, **extra)
        except BaseException as e:  # noqa: BLE001: _said raises again what is no way of ending (SystemExit)
            RUN.ended = True
            return self._said(e)
        RUN.ended = True
        return rv if isinstance(rv, int) else ExitStatus.OK

    def _said(self, ended: BaseException) -> int:
        """The line that says how the command ended, raising `ended`, and its status."""
        try:
            raise ended
        except click.exceptions.NoArgsIsHelpError as e:  # a bare `attncli`
            click.echo(e.ctx.get_help(), err=True)
            status = ExitStatus.USAGE
        except click.UsageError as e:
            where = f" (see '{e.ctx.command_path} --help')" if e.ctx else ""
            fail(e.format_message() + where)
            status = ExitStatus.USAGE
        except click.ClickException as e:
            fail(e.format_message())
            status = e.exit_code
        except AttncliError as e:
            if isinstance(e, OutputError):
                silence_stdout()  # what is still buffered would fail again at exit
            fail(str(e))
            status = ExitStatus.ERROR
        except MemoryError:
            fail("out of memory; give a smaller input, or free some memory (attncli scores --file streams a long text)")
            status = ExitStatus.ERROR
        except OSError as e:  # an operating system's refusal that no reader above put in words
            where = f"{e.filename}: " if e.filename else ""
            fail(f"{where}{e.strerror or e}" + cwd_hint())
            status = ExitStatus.ERROR
        except (_Stopped, click.Abort, KeyboardInterrupt, Terminated) as e:
            status = getattr(e, "status", ExitStatus.INTERRUPTED)
            if status == ExitStatus.BROKEN_PIPE:
                silence_stdout()
            else:
                # on a terminal, first end the line that holds the echoed ^C
                with contextlib.suppress(OSError, ValueError):  # a terminal gone with SIGHUP takes nothing
                    to_terminal(sys.stderr, ("\n" if sys.stderr.isatty() else "") + f"attncli: {SAID[status]}\n")
                try:  # what is buffered for stdout, now: a terminal that hung up would fail it at exit (status 120)
                    sys.stdout.flush()
                except (OSError, ValueError):
                    silence_stdout()
        except Exception as e:  # noqa: BLE001: a bug; still one line, unless ATTNCLI_DEBUG asks for the traceback
            if os.environ.get("ATTNCLI_DEBUG"):
                raise
            fail(f"internal error ({type(e).__name__}: {e}); please report it, with the command that caused it "
                  "(ATTNCLI_DEBUG=1 shows where it happened)")
            status = ExitStatus.ERROR
        return status


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


@cli.command(name="help", cls=Command, short_help="the help of attncli, or of a command")
@click.argument("command", nargs=-1, metavar="[COMMAND]...")
@click.pass_context
def help_command(ctx, command):
    """The help of COMMAND, as `attncli COMMAND --help` gives it; of a command of a group,
    with both names (`attncli help vectors info`); without COMMAND, of attncli itself.

    \b
    Examples:
      attncli help scores
      attncli help vectors info
    """
    target = ctx.parent
    for name in command:
        group = target.command
        sub = group.get_command(target, name) if isinstance(group, click.Group) else None
        if sub is None:  # as `attncli NAME` says it
            raise no_such_command(name, group, target) if isinstance(group, click.Group) else click.UsageError(
                f"No such command '{name}'.", target)
        target = click.Context(sub, info_name=name, parent=target)
    target.color = ctx.color
    show_help(target)


main = cli
