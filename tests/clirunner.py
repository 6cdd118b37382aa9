"""What the CLI tests share: running attncli in-process and checking its output and errors."""

from __future__ import annotations

import json

from click.testing import CliRunner

from attncli.cli import cli

# The environment every run starts from: nothing that changes colour, width or vectors.
CLEAN_ENV = {
    "NO_COLOR": None,
    "FORCE_COLOR": None,
    "TTY_COMPATIBLE": None,
    "TTY_INTERACTIVE": None,
    "CLICOLOR_FORCE": None,
    "ATTNCLI_VECTORS": None,
    "ATTNCLI_MODEL": None,
    "COLUMNS": "200",
    "ATTNCLI_DEBUG": "1",  # a bug is a traceback here, so a test fails on it
}


def run(*args, input=None, env=None):
    """Invoke the CLI in-process; never a traceback, never an exception other than SystemExit."""
    result = CliRunner().invoke(cli, [str(a) for a in args], input=input, env={**CLEAN_ENV, **(env or {})},
                                prog_name="attncli")
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return result


def ok(result, *, stderr="") -> list[dict]:
    """A successful JSON run: exit 0, the expected stderr (None: any), one JSON document a line."""
    assert result.exit_code == 0, result.stderr
    if stderr is not None:
        assert result.stderr == stderr
    assert result.stdout == "" or result.stdout.endswith("\n")
    return [json.loads(line) for line in result.stdout.splitlines()]


def one(result, **kw) -> dict:
    docs = ok(result, **kw)
    assert len(docs) == 1
    return docs[0]


def _one_line(stderr: str, prefix: str, words) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and stderr == lines[0] + "\n", stderr
    assert lines[0].startswith(prefix), lines[0]
    for word in words:
        assert word.lower() in lines[0].lower(), (word, lines[0])
    return lines[0]


def fails(result, *words: str, code: int = 1) -> str:
    """An error: exit `code`, nothing on stdout, exactly one 'attncli: error: ' line on stderr
    holding every one of `words` (case-insensitive)."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    return _one_line(result.stderr, "attncli: error: ", words)


def one_warning(stderr: str, *words: str) -> str:
    """Exactly one 'attncli: warning: ' line holding every one of `words`."""
    return _one_line(stderr, "attncli: warning: ", words)


def words_of(vectors) -> list[str]:
    return [vectors.vocab.word(i) for i in range(vectors.size)]
