"""--help with the options in sections: a command's own options first, then those of each
shared decorator (attention, tokens, vectors, output), so that a long list says which
options belong together and which a command shares with the others.

An option says its section itself (SectionOption, made by `option`); a command or group
of this module's classes writes its help by them, pages it as results are paged, and says
more than click of a command line it cannot parse. Every command of attncli is one.
"""

from __future__ import annotations

import click
from attncli.cli.output import show

# the sections in the order --help shows them; None: the command's own options
TITLES = {
    None: "Options",
    "attention": "Attention options",
    "tokens": "Token options",
    "vectors": "Vectors options",
    "model": "Model options",
    "output": "Output options",
}
COL_MAX = 30  # click's widest first column; a longer option goes on its own line


class SectionOption(click.Option):
    """A click.Option that knows the section of --help it belongs to."""

    def __init__(self, *args, section: str | None = None, **kwargs):
        if section not in TITLES:
            raise ValueError(f"no help section {section!r}")
        super().__init__(*args, **kwargs)
        self.section = section


def option(section: str, *param_decls: str, **attrs):
    """click.option, for an option of `section` (a key of TITLES)."""
    return click.option(*param_decls, cls=SectionOption, section=section, **attrs)


def format_sections(command: click.Command, ctx: click.Context, formatter: click.HelpFormatter) -> None:
    """The options of `command`, a section each, their help aligned in one column across
    sections."""
    rows: dict[str | None, list[tuple[str, str]]] = {}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is not None and not isinstance(param, click.Argument):
            rows.setdefault(getattr(param, "section", None), []).append(record)
    if not rows:
        return
    width = min(max(len(term) for section in rows.values() for term, _ in section), COL_MAX)
    for section, title in TITLES.items():
        if section in rows:
            (term, text), *rest = rows[section]
            with formatter.section(title):
                # write_dl sizes its first column by the widest term: the same width for every section
                formatter.write_dl([(term.ljust(width), text), *rest], col_max=COL_MAX)


def show_help(ctx: click.Context) -> None:
    """The help of ctx's command on stdout, through the pager as results go (output.show)."""
    show(ctx.get_help() + "\n", color=ctx.color)


def _help(ctx, param, value):
    if value and not ctx.resilient_parsing:
        show_help(ctx)
        ctx.exit()


def no_such_command(name: str, group: click.Group, ctx: click.Context) -> click.UsageError:
    """'No such command', with the group's commands nearest `name`, as click suggests options."""
    import difflib  # difflib and shlex only for these messages: not every run's start-up

    near = difflib.get_close_matches(name, group.list_commands(ctx), n=3)
    hint = f" Did you mean {' or '.join(map(repr, near))}?" if near else ""
    return click.UsageError(f"No such command {name!r}.{hint}", ctx)


def _elsewhere(name: str, command: click.Command, ctx: click.Context) -> dict[str, click.Option]:
    """The other commands of the whole tree that take the option `name`: {path: that option}."""
    root = ctx.find_root()
    found = {}

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(root):
                walk(cmd.get_command(root, sub), (*path, sub))
        elif cmd is not command:
            for p in cmd.params:
                if isinstance(p, click.Option) and not p.hidden and name in p.opts + p.secondary_opts:
                    found[" ".join(path)] = p

    walk(root.command, ())
    return found


def _how_it_reads(command: click.Command, ctx: click.Context, value: str | None) -> str:
    """How `command` takes its input, from its arguments: what a user meant to give another way."""
    args = [p for p in command.params if isinstance(p, click.Argument)]
    if not args:
        return ""
    name = ctx.command_path
    said = f"; {name} reads its input as {' '.join(a.make_metavar(ctx) for a in args)}"
    if any(not a.required for a in args):  # left out or -, standard input
        said += f", or from standard input when that is left out ({name} ... < {value or 'FILE'})"
    return said


def _quote_hint(ctx: click.Context, extra: list[str]) -> str:
    """What to do with words past the arguments: most often a sentence left unquoted, whose
    first word was taken for the SENTENCE argument (or --context's value)."""
    first = ctx.params.get("sentence")
    given = next((p for p in ctx.command.params if p.name == "sentence"), None)
    if not isinstance(first, str) or given is None:
        return '; quote a sentence to give it as one argument: "The earth is like an orange"'
    import shlex

    quoted = shlex.quote(" ".join([first, *extra]))
    where = quoted if isinstance(given, click.Argument) else f"... {given.opts[0]} {quoted}"
    return f"; quote a sentence to give it as one argument: {ctx.command_path} {where}"


class _Parsing:
    """What click says of a command line it cannot parse, made more helpful: an option that
    another command takes names it; words past the arguments, a sentence left unquoted."""

    def parse_args(self, ctx, args):
        allowed, ctx.allow_extra_args = ctx.allow_extra_args, True  # extras: said below
        try:
            rest = super().parse_args(ctx, list(args))  # click's parser takes its list apart
        except click.NoSuchOption as e:
            others = _elsewhere(e.option_name, self, ctx)
            if not others:
                raise
            after = args[args.index(e.option_name) + 1:] if e.option_name in args else []
            file = any(isinstance(o.type, click.Path) for o in others.values())  # what was meant as input
            value = after[0] if file and after and not after[0].startswith("-") else None
            raise click.UsageError(f"No such option {e.option_name!r}: it is an option of "
                                   f"{', '.join(others)}, not of {ctx.info_name}"
                                   + _how_it_reads(self, ctx, value), ctx) from None
        finally:
            ctx.allow_extra_args = allowed
        if rest and not allowed and not ctx.resilient_parsing:
            many = "s" if len(rest) > 1 else ""
            ctx.fail(f"Got unexpected extra argument{many} ({' '.join(rest)})" + _quote_hint(ctx, rest))
        return rest

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        if option is not None:
            option.callback = _help
        return option


class Command(_Parsing, click.Command):
    """A command whose --help lists its options in sections, and is paged."""

    def format_options(self, ctx, formatter):
        format_sections(self, ctx, formatter)


class Group(_Parsing, click.Group):
    """A group whose --help lists its options in sections, then its commands; the commands
    it makes are Commands, its subgroups Groups; a command it lacks, with those nearest."""

    command_class = Command
    group_class = type

    def format_options(self, ctx, formatter):
        format_sections(self, ctx, formatter)
        self.format_commands(ctx, formatter)

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as e:  # click's, among the commands loaded so far
            raise no_such_command(e.command_name, self, ctx) from None
