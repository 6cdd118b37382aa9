"""The scores command: a sentence's T x T attention, or a document's rows streamed.

Its own module, apart from the other commands over a sentence: the command run most, and
the one whose start-up is measured, so that it builds only its own options."""

from __future__ import annotations

import itertools
import sys

import click
from attncli.cli.inputs import compute_all, decode, note_large_json, read_sentences, read_stdin
from attncli.documents.long import document_rows, document_scale
from attncli.documents.sentence import scores_doc
from attncli.system import reading
from attncli.cli.options import (SCORES_FIELDS, attention_options, fields_option, model_options, output_options,
                                 png_option, predict_option, refuse_predict, sentence_argument, vectors_options)
from attncli.cli.output import Output, emit, make_console, progress, writing_stdout
from attncli.cli.sections import Command
from attncli.errors import AttncliError, InputError
from attncli.views.json import write_json
from attncli.visible import visible, visible_all


class RowsSpec(click.ParamType):
    """--rows: last, last:K or I,J,... (documents.rows.Rows), a usage error for anything else."""

    name = "rows"

    def convert(self, value, param, ctx):
        from attncli.documents.rows import Rows  # the model's code: only with --rows

        if not isinstance(value, str):
            return value
        try:
            return Rows.parse(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


@click.command(cls=Command, short_help="attention weights between every pair of tokens, as a heatmap")
@sentence_argument
@click.option("--raw", is_flag=True, help="Show the raw scores x_i . x_j instead of the weights.")
@click.option("--rollout", is_flag=True,
              help="Show the attention rollout (Abnar & Zuidema 2020): R_l = (0.5 A_l + 0.5 I) R_l-1 over the "
                   "layers up to --layer, A_l a layer's mean weights; over word vectors 0.5 A + 0.5 I.")
@click.option("--words", is_flag=True,
              help="With --model: attention between the sentence's words, not its word pieces (Clark et al. "
                   "2019): to a word the sum over its pieces, from a word their mean.")
@click.option("--norms", is_flag=True,
              help="Show ||a_ij f(x_j)||, how much token j sends i (Kobayashi et al. 2020): f(x_j) its value, "
                   "through W_O with --model.")
@click.option("--max-tokens", type=click.IntRange(min=1), metavar="N",
              help="Draw the table for the first N tokens only (JSON always holds them all).")
@click.option("--file", "document_file", type=click.Path(dir_okay=False), metavar="DOC.txt",
              help="Treat this whole text file as one sequence: per token, its top attended and context "
                   "vector, streamed as computed, in memory that grows with T, not T x T.")
@click.option("--document", is_flag=True, help="The same for standard input, read whole as one sequence.")
@click.option("--window", type=click.IntRange(min=1), metavar="W",
              help="With --file or --document: attend only within W tokens either side.")
@click.option("--rows", "rows_spec", type=RowsSpec(), metavar="SPEC",
              help="With --file or --document and --model (which needs it): only these rows of the document's "
                   "attention, each over all its word pieces: last, last:K (the last K rows) or positions I,J,... "
                   "(from 0, as --index counts); the model's pass runs a block of rows at a time, never T x T.")
@vectors_options
@model_options
@predict_option
@attention_options
@png_option
@fields_option(SCORES_FIELDS + ("predict",))
@output_options
def scores(sentence, raw, rollout, words, norms, max_tokens, document_file, document, window, rows_spec, predict,
           source, opts, out):
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
      attncli scores "The earth is like an orange" --model gpt2 --predict 5
    """
    refuse_predict(predict, source)
    chosen = [name for name, given in (("--raw", raw), ("--rollout", rollout), ("--norms", norms)) if given]
    if len(chosen) > 1:
        raise click.UsageError(f"{chosen[0]} and {chosen[1]} show different matrices; give one of them")
    if words and not source.model:
        raise click.UsageError("--words merges a model's word pieces into words; it needs --model NAME|DIR")
    if words and chosen:
        raise click.UsageError(f"--words merges the weights, and {chosen[0]} shows another matrix; give one of them")
    if (document_file or document) and (rollout or norms):
        raise click.UsageError(f"{chosen[0]} needs the T x T weights, which a document never holds; leave it out")
    _check_rows(rows_spec, bool(document_file or document), bool(source.model))
    if (document_file or document) and out.fields is not None:
        raise click.UsageError("--fields chooses the keys of a sentence's document; a document (--file, --document) "
                               "writes a line a token, of token, index, top and context")
    if (document_file or document) and source.model:
        return score_rows(sentence, document_file, document, window, rows_spec, raw, words, predict, max_tokens, source,
                          opts, out)
    if document_file or document:
        return score_document(sentence, document_file, document, window, raw, max_tokens, source, opts, out)
    if window:
        raise click.UsageError("--window needs a document: --file DOC.txt or --document")
    sentences = read_sentences(sentence, "give a SENTENCE argument, or a document with --file DOC.txt")
    vectors = source.load()
    H = vectors.heads(opts)
    cells = {"scores": 1, "weights": 1, "heads": 2 * H + H * norms, "rollout": rollout, "norms": norms}
    fewer = "--fields leaves keys out (--fields tokens,top writes no matrix)"
    note_large_json(sentences, vectors, opts, cells, out,
                    fewer if source.model else f"--file DOC.txt streams a long text, a line a token, and {fewer}")
    docs = compute_all(sentences, lambda text: scores_doc(text, vectors, opts, rollout=rollout, norms=norms, words=words,
                                                          predict=predict or 0))
    shown = "rollout" if rollout else "norms" if norms else None
    emit(docs, out, "scores_view", raw=raw, max_tokens=max_tokens, shown=shown)


def _check_rows(rows_spec, document: bool, model: bool) -> None:
    """--rows is for a document through a model, and such a document needs it."""
    if rows_spec is not None and not document:
        raise click.UsageError("--rows chooses rows of a document's attention; give --file DOC.txt or --document")
    if rows_spec is not None and not model:
        raise click.UsageError("--rows chooses rows of a trained model's attention; give --model NAME|DIR (over word "
                               "vectors, --file streams every row)")
    if document and model and rows_spec is None:
        raise click.UsageError("a document through --model shows chosen rows of its attention, never its T x T: give "
                               "--rows last:K or --rows I,J,...")


def _document_text(sentence, document_file, document) -> tuple[str, str]:
    """The document --file or --document gives, and where it came from; refused empty."""
    if sentence is not None:
        raise click.UsageError("give a SENTENCE or a document (--file, --document), not both")
    if document_file and document:
        raise click.UsageError("give --file or --document (standard input), not both")
    where = document_file or "standard input"
    data = (reading.read_file(document_file, "--file") if document_file
            else read_stdin("--document reads the document from standard input; give --file DOC.txt"))
    text = decode(data, where)
    if not text.strip():
        raise InputError(f"{where} is empty")
    return text, where


def score_rows(sentence, document_file, document, window, rows_spec, raw, words, predict, max_tokens, source, opts,
               out) -> None:
    """scores --file / --document --model --rows: chosen rows of a whole text's attention."""
    given = [name for name, value in (("--window", window), ("--words", words), ("--predict", predict),
                                      ("--max-tokens", max_tokens)) if value]
    if given:
        raise click.UsageError(f"{given[0]} is not for a document's rows (--rows); leave it out")
    text, where = _document_text(sentence, document_file, document)
    trained = source.load()
    from attncli.documents.rows import rows_doc  # the model's code

    with progress("rows", shown=out.fmt == "json", streaming=False) as update:
        doc = rows_doc(text, trained, rows_spec, opts, where=where, progress=update)
    emit([doc], out, "rows_view", raw=raw)


def score_document(sentence, document_file, document, window, raw, max_tokens, source, opts, out) -> None:
    """scores --file / --document: one long sequence, streamed a row at a time."""
    drawn = [name for name, given in (("--png", out.png), ("--svg", out.svg), ("--html", out.html), ("--raw", raw),
                                       ("--max-tokens", max_tokens)) if given]
    if drawn:
        raise click.UsageError(f"{drawn[0]} draws a T x T table, which a document never holds; leave it out")
    text, where = _document_text(sentence, document_file, document)
    vectors = source.load()
    # a long document's T x T work takes minutes: a progress bar, unless its rows are drawn on the terminal
    with progress("rows", shown=out.fmt == "json") as update:
        rows = document_rows(text, vectors, opts, window=window, progress=update)
        first = next(rows)  # no known word, or scores that overflow: an error here, before any output
        _write_rows(itertools.chain([first], rows), out, where, vectors.name, opts, window, vectors.dim)


def _write_rows(rows, out: Output, where: str, vectors_name: str, opts, window, dim: int) -> None:
    """A document's rows to stdout as they come: JSON Lines, or a line of text each."""
    if out.fmt == "json":
        def write(row: dict) -> None:
            write_json(row)
    else:
        from attncli.views.corpus import document_header, document_row  # rich, at the views' top: 40 ms

        screen = make_console(sys.stdout, out)
        with writing_stdout():
            screen.print(document_header(visible(where), visible(vectors_name), opts, window,
                                         scale=document_scale(opts, dim)))

        def write(row: dict) -> None:
            screen.print(document_row(visible_all(row)))
    written = 0
    try:
        with writing_stdout():
            for row in rows:
                write(row)
                written += 1
            sys.stdout.flush()
    except AttncliError as e:  # a stream can fail midway only where no check could foresee it
        raise type(e)(f"{e} (the output stopped after {written:,} rows; it is incomplete)") from None
