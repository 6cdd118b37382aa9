"""Reading the input: sentences from an argument or standard input, UTF-8 checked, and each
turned into its document before anything is written."""

from __future__ import annotations

import sys

import click
from attncli import limits
from attncli.cli.output import one_line
from attncli.errors import AttncliError, InputError


def stdin_stream(other: str):
    """Standard input's binary stream; a terminal is no input, and the usage error says
    `other`, the command's other way to take it ("give FILE")."""
    stdin = sys.stdin.buffer
    if stdin.isatty():
        raise click.UsageError(f"no input: {other}, or pipe it on standard input")
    return stdin


def read_stdin(other: str) -> bytes:
    """All of standard input, within what memory can take (an endless /dev/zero is refused)."""
    return limits.read_stream(stdin_stream(other), "standard input")


def decode(data: bytes, where: str) -> str:
    """UTF-8 text, or an error naming the line of the first byte that is not."""
    try:
        return data.decode("utf-8-sig")  # a byte order mark, as some editors write, is not a word
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(f"{where} is not UTF-8: byte 0x{data[e.start]:02x} on line {line:,} cannot be decoded") from None


def read_sentences(sentence: str | None, other: str = "give a SENTENCE argument") -> list[tuple[int | None, str]]:
    """The sentences to run, each with its stdin line number (None for an argument).

    SENTENCE absent or "-": standard input, one sentence per non-blank line (on a terminal,
    a usage error that says `other`, as stdin_stream). Lines end at a newline only (as
    batch.parse_lines splits them), not at the form feeds and Unicode separators
    str.splitlines also breaks at, so a line's number is the same in both.
    """
    if sentence is not None and sentence != "-":
        if not sentence.strip():
            raise InputError("the sentence is empty; give some words, for example: attncli scores \"The earth is like an orange\"")
        return [(None, sentence)]
    text = decode(read_stdin(other), "standard input")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line does not start another
    lines = [(n, line.rstrip("\r")) for n, line in enumerate(lines, start=1) if line.strip()]
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
            raise type(e)(f"line {line:,}: {e}" if line else str(e)) from None
        missing = list(dict.fromkeys(doc["oov"]))
        if missing:  # one line a sentence, however many words it lacks
            where = f"line {line:,}: " if line else ""
            done = "given a zero vector" if missing[0] in doc["tokens"] else "left out"
            named = ", ".join(map(repr, missing[:10])) + (f" and {len(missing) - 10:,} more" if len(missing) > 10 else "")
            note = f"{where}no vector for {named} in {doc['vectors']['name']}; {done}"
            click.echo(f"attncli: note: {one_line(note)}", err=True)
        docs.append(doc)
    return docs
