"""Reading the input: sentences from an argument or standard input, UTF-8 checked, and each
turned into its document before anything is written."""

from __future__ import annotations

import sys

import click
from attncli.cli.output import one_line
from attncli.encoder import cell_bytes
from attncli.errors import AttncliError, InputError
from attncli.system import limits, reading


def stdin_stream(other: str):
    """Standard input's binary stream; a terminal is no input, and the usage error says
    `other`, the command's other way to take it ("give FILE")."""
    stdin = sys.stdin.buffer
    if stdin.isatty():
        raise click.UsageError(f"no input: {other}, or pipe it on standard input")
    return stdin


def read_stdin(other: str) -> bytes:
    """All of standard input, within what memory can take (an endless /dev/zero is refused)."""
    return reading.read_stream(stdin_stream(other), "standard input")


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


JSON_NUMBER = 20  # bytes a float64 of a document takes as JSON, its comma included (measured: 20.2)
LARGE_JSON = 10_000_000  # bytes of one document worth a note: 350 tokens of one head's scores


def note_large_json(sentences: list[tuple[int | None, str]], vectors, opts, cells: dict[str, int], out,
                    advice: str) -> None:
    """Before any sentence is computed, once: a note on stderr when the largest one's JSON
    document will pass LARGE_JSON, with `advice`, what writes less; none for one that memory
    cannot take (attend refuses it, in the one line of an error). `cells`: the numbers a
    cell of the T x T matrices takes under each key (those --fields keeps count)."""

    per_cell = sum(n for key, n in cells.items() if out.fields is None or key in out.fields)
    if out.fmt != "json" or not per_cell:
        return
    vectors.check(opts)  # a mistake is the run's one line, with no note before it
    line, T = max(((line, vectors.count(text, opts)) for line, text in sentences), key=lambda lt: lt[1])
    size = T * T * per_cell * JSON_NUMBER
    if size >= LARGE_JSON and T * T * cell_bytes(vectors.heads(opts), per_cell) <= limits.available():
        where = f"line {line}: " if line else ""
        click.echo(f"attncli: note: {where}the sentence has {T:,} tokens, and its JSON document will be about "
                   f"{limits.size(size)} ({per_cell} number{'s' * (per_cell > 1)} for each of its {T:,} x {T:,} "
                   f"cells); {advice}", err=True)


def compute_all(sentences: list[tuple[int | None, str]], make_doc, said=None) -> list[dict]:
    """Every document before any output, so a bad sentence leaves stdout untouched;
    make_doc(text) gives a sentence's document, or a list of its documents (each of
    contributions' methods), one note a sentence for the words it lacks; and, where stderr
    is a terminal, said(doc)'s notes of each (why a number is undefined: the document holds
    them for JSON and the table, and a person watching the run sees them too)."""
    docs = []
    for line, text in sentences:
        try:
            made = make_doc(text)
        except AttncliError as e:
            raise type(e)(f"line {line:,}: {e}" if line else str(e)) from None
        made = made if isinstance(made, list) else [made]
        doc = made[0]
        where = f"line {line:,}: " if line else ""
        missing = list(dict.fromkeys(doc.get("oov", ())))  # a generated text has no word vectors to lack
        if missing:  # one line a sentence, however many words it lacks
            done = "given a zero vector" if missing[0] in doc["tokens"] else "left out"
            named = ", ".join(map(repr, missing[:10])) + (f" and {len(missing) - 10:,} more" if len(missing) > 10 else "")
            note = f"{where}no vector for {named} in {doc['vectors']['name']}; {done}"
            click.echo(f"attncli: note: {one_line(note)}", err=True)
        if said is not None and sys.stderr.isatty():
            for note in (note for d in made for note in said(d)):
                click.echo(f"attncli: note: {one_line(where + note)}", err=True)
        docs.extend(made)
    return docs
