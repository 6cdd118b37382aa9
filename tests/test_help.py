"""--help: every command's options in sections (its own, then attention, tokens, vectors,
output), each option under the section of the shared decorator that added it."""

from __future__ import annotations

import re

import click
import pytest

from attncli.cli import cli
from attncli.cli.sections import Command, Group
from clirunner import fails, run

HEADING = re.compile(r"^(\w[\w ]*):$")


def tree(command=cli, path=()):
    """(path, command) for attncli and every command and group below it."""
    yield path, command
    if isinstance(command, click.Group):  # its commands as click lists them (attncli's are loaded lazily)
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            yield from tree(command.get_command(ctx, name), path + (name,))


COMMANDS = [path for path, _ in tree()]


def sections(help_text: str) -> dict[str, list[str]]:
    """{heading: the options listed under it (their first name)}."""
    found: dict[str, list[str]] = {}
    heading = None
    for line in help_text.splitlines():
        m = HEADING.match(line)
        if m:
            heading = m.group(1)
            found[heading] = []
        elif heading and re.match(r"^  -", line):
            found[heading].append(re.split(r"[ ,]", line.strip())[0])
    return found


def test_scores_help_has_a_section_per_decorator():
    found = sections(run("scores", "--help").stdout)
    assert list(found) == ["Options", "Attention options", "Token options", "Vectors options", "Model options",
                           "Output options"]
    assert {"--raw", "--file", "--window", "-h"} <= set(found["Options"])
    assert found["Attention options"] == ["--qkv", "--d-k", "--seed", "--heads", "--mask", "--scale", "--temperature",
                                          "--top-k", "--include-self"]
    assert found["Token options"] == ["--keep-punct", "--oov"]
    assert found["Vectors options"] == ["--vectors", "--limit", "--trust-pickle"]
    assert {"--json", "--format", "--no-color", "--svg", "--html", "--png"} <= set(found["Output options"])


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "attncli" for p in COMMANDS])
def test_every_command_lists_each_option_in_its_section(path):
    command = dict(tree())[path]
    assert isinstance(command, (Command, Group))  # every command writes its help by sections
    found = sections(run(*path, "--help").stdout)
    listed = {name: heading for heading, names in found.items() for name in names}
    from attncli.cli.sections import TITLES as titles
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            first = min(param.opts, key=lambda o: len(o) - len(o.lstrip("-")))  # as --help writes them: -o, --output
            assert listed.get(first) == titles[getattr(param, "section", None)], (path, first, found)


def test_the_help_of_every_section_starts_in_one_column():
    help_text = run("scores", "--help").stdout
    columns = {len(m.group(1)) for m in re.finditer(r"^(  -\S.*?\S {2,})\S", help_text, flags=re.M)}
    assert len(columns) == 1, columns


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "attncli" for p in COMMANDS])
def test_help_command_gives_what_help_option_gives(path):
    by_option, by_command = run(*path, "--help"), run("help", *path)
    assert by_command.exit_code == by_option.exit_code == 0
    assert by_command.stdout == by_option.stdout and by_command.stderr == ""


@pytest.mark.parametrize("args,hint", [(["nosuch"], "'attncli --help'"), (["vectors", "nosuch"], "'attncli vectors --help'"),
                                       (["scores", "nosuch"], "'attncli scores --help'")])
def test_help_of_no_such_command_is_a_usage_error(args, hint):
    fails(run("help", *args), "No such command 'nosuch'", hint, code=2)


def test_every_command_has_a_whole_line_in_the_list_of_commands():
    for path, command in tree():
        if isinstance(command, click.Group):
            listed = run(*path, "--help").stdout.split("Commands:\n")[1]
            assert "..." not in listed, (path, listed)  # click cuts a long first sentence of a docstring


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "attncli" for p in COMMANDS])
def test_every_integer_option_is_shown_with_a_letter(path):
    """--top-k N, --heads H: never click's INTEGER RANGE, in every command's --help."""
    command = dict(tree())[path]
    ctx = click.Context(command, info_name=" ".join(path))
    for param in command.params:
        if isinstance(param, click.Option) and isinstance(param.type, click.types.IntParamType) and not param.hidden:
            assert re.fullmatch(r"[A-Z]", param.make_metavar(ctx)), (path, param.opts)
    assert "INTEGER" not in run(*path, "--help").stdout


def test_one_name_for_how_many_neighbours():
    takes = {" ".join(path) for path, command in tree() if any(p.name == "neighbors" for p in command.params)}
    assert takes == {"batch", "compare", "context", "neighbors"}
    for path in takes:
        assert re.search(r"^  --neighbors N ", run(*path.split(), "--help").stdout, flags=re.M), path
