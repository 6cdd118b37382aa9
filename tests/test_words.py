"""The README, the pages of docs/, the man pages and the help speak of the tool's own ideas:
nothing in them refers to texts a reader has not seen ("the seed's RNN"), which would
collide with --seed."""

import re
from pathlib import Path

import click
import pytest

import manual
from attncli.cli import cli

ROOT = Path(__file__).resolve().parent.parent
FOREIGN = re.compile(r"\bseed['’]s\b|\bseeds['’]|\bthe seeds\b", re.I)


def helps(command=cli, path=("attncli",)):
    ctx = click.Context(command, info_name=" ".join(path))
    yield " ".join(path), command.get_help(ctx)
    for name, sub in getattr(command, "commands", {}).items():
        yield from helps(sub, path + (name,))


@pytest.mark.parametrize("path", [*manual.pages(), *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "man").glob("*.1"))])
def test_documents_name_no_source_text(path):
    text = (ROOT / path).read_text(encoding="utf-8")
    assert not FOREIGN.findall(text), path


def test_help_names_no_source_text():
    for path, text in helps():
        assert not FOREIGN.findall(text), path
