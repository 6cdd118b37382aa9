"""--help with the options in sections: a command's own options first, then those of each
shared decorator (attention, tokens, vectors, output), so that a long list says which
options belong together and which a command shares with the others.

An option says its section itself (SectionOption, made by `option`); a command or group
of this module's classes writes its help by them. Every command of attncli is one.
"""

from __future__ import annotations

import click

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


class Command(click.Command):
    """A command whose --help lists its options in sections."""

    def format_options(self, ctx, formatter):
        format_sections(self, ctx, formatter)


class Group(click.Group):
    """A group whose --help lists its options in sections, then its commands; the commands
    it makes are Commands, its subgroups Groups."""

    command_class = Command
    group_class = type

    def format_options(self, ctx, formatter):
        format_sections(self, ctx, formatter)
        self.format_commands(ctx, formatter)
