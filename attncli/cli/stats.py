"""stats: what each head does across a corpus, beside honest baselines."""

from __future__ import annotations

import contextlib
import os

import click
from attncli.system import reading
from attncli.cli.options import (TextParam, attention_options, complete_path, model_options, output_options,
                                 output_path, scheduler_address, vectors_options)
from attncli.cli.inputs import decode, read_stdin, stdin_stream
from attncli.cli.output import emit, note_redone, progress, warn
from attncli.cli.sections import Command, option
from attncli.errors import InputError


@click.command(cls=Command, short_help="what each head does across a corpus, beside baselines")
@click.argument("corpus", required=False, metavar="[CORPUS]", shell_complete=complete_path)
@click.option("--jsonl", is_flag=True, help="Lines are JSON objects; the sentence is in their --field.")
@click.option("--field", "field_name", default="text", show_default=True, type=TextParam("--field"),
              help="The field of --jsonl lines to read.")
@click.option("--by", type=click.Choice(["head", "word"]), default="head", show_default=True,
              help="head: a record per head; word: per word, the attention it receives against uniform attention's.")
@click.option("--probe", type=click.Choice(["repeated"]),
              help="Instead of CORPUS: sequences of random vocabulary words, each written twice (the induction test).")
@click.option("--probe-count", type=click.IntRange(1, 100_000), default=100, show_default=True, metavar="N",
              help="How many sequences --probe repeated makes.")
@click.option("--probe-length", type=click.IntRange(2, 256), default=20, show_default=True, metavar="N",
              help="Words in each, before it is repeated.")
@click.option("--shuffle-seed", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="Seeds the shuffled baseline and --probe repeated.")
@click.option("--random-seeds", type=click.IntRange(0, 100), default=3, show_default=True, metavar="N",
              help="Seeds of the --qkv random baseline (word vectors only); 0 leaves it out.")
@click.option("--no-shuffled", is_flag=True, help="Leave out the shuffled baseline (it doubles the work).")
@click.option("--document", is_flag=True,
              help="With --model: read CORPUS (or standard input) whole as one text, one sequence up to the model's "
                   "positions, its rows a block at a time (memory that grows with T, not T x T); each head's "
                   "record gains its distance and tenths profiles, and the table marks the sink heads.")
@click.option("--importance", is_flag=True,
              help="With --model: each head's importance too, the mean over the sentences of its ablation effect "
                   "(heads --ablate's: its output zeroed, the model run on; L x H runs a sentence).")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Worker processes on this machine (at most one a core).")
@click.option("--scheduler", metavar="ADDRESS", envvar="ATTNCLI_DASK_SCHEDULER", show_envvar=True,
              callback=scheduler_address,
              help="A Dask scheduler (tcp://host:8786) whose workers do the work; needs pip install 'dask[distributed]'.")
@vectors_options
@model_options(head=False)
@attention_options(top=False)
@option("output", "--png", type=click.Path(), callback=output_path("png", (".png",)), metavar="FILE.png",
        help="Also draw each statistic as a layers x heads grid (needs matplotlib: pip install matplotlib).")
@output_options
def stats(corpus, jsonl, field_name, by, probe, probe_count, probe_length, shuffle_seed, random_seeds,
          no_shuffled, document, importance, jobs, scheduler, source, opts, out):
    """What each head does across CORPUS (or standard input), one sentence a line: for
    every head (every layer x head with --model; the --heads heads over word vectors) the
    mean entropy of its attention rows (nats), the mean distance attended, the share of
    attention on the token itself, the previous and the next token, with --model the first
    position (a decoder's attention sink), [CLS], [SEP] and punctuation, and
    TransformerLens's previous-token, duplicate-token and induction scores
    (the last two on sentences whose tokens repeat). Beside each, the same statistic under
    baselines: uniform attention, the sentences shuffled, and random projections; a
    statistic a baseline equals (within 0.005 or 1%) is marked. With --importance, each
    head's importance (Michel et al. 2019): the mean over the sentences of the effect of
    zeroing its output, on an encoder's mean-pooled last hidden states (their cosine
    distance) or a decoder's next-piece loss (its rise). Out: a record per head (JSON
    Lines when piped), with the rows and tokens counted; --by word gives a record per word.
    Only running sums are kept, whatever the corpus's size. With --document, CORPUS is one
    long text instead, read whole through the model a block of rows at a time; each record
    adds the head's attention by distance (buckets 0, 1, 2-3, 4-7, ...), the last 64 rows'
    on each tenth of the text, and whether it is a sink head (more than 0.3 of its rows'
    attention on the first position, on average).

    \b
    Examples:
      attncli stats corpus.txt
      attncli stats corpus.txt --model minilm --png heads.png
      attncli stats --probe repeated --model minilm --json | jq -c '{layer, head, induction}'
      attncli stats corpus.txt --by word --json | head
      attncli stats corpus.txt --model minilm --importance --jobs 2
      attncli stats corpus.txt --model minilm --no-shuffled --precision float32
      attncli stats corpus.txt --scheduler tcp://10.0.0.5:8786
      attncli stats chapter.txt --model gpt2 --document
    """
    from attncli.corpus import batch, cluster, survey  # multiprocessing, at workers' top: 20 ms that listing the commands need not pay

    if document:
        return _document(corpus, source, shuffle_seed, not no_shuffled, out,
                         {"--jsonl": jsonl, "--probe": probe, "--by word": by == "word", "--importance": importance,
                          "--jobs": jobs > 1, "--scheduler": scheduler})
    _refuse_together(corpus, probe, scheduler, jobs, by, out.png, importance, source.model)
    precision = source.precision
    vectors = source.load()
    if by == "word" and source.model:
        raise InputError("--by word counts words, and a model's tokens are word pieces; leave out --model "
                         "(word pieces are not merged here)")
    if not source.model:
        survey.check_attention(vectors, opts, random_seeds)
    job = survey.StatsJob(batch.Job.from_source(source, vectors, opts, dask=scheduler is not None), seed=shuffle_seed,
                          shuffled=not no_shuffled, random_seeds=random_seeds, by_word=by == "word",
                          importance=importance, precision=precision)
    jobs = min(jobs, os.cpu_count() or 1)
    with contextlib.ExitStack() as stack:
        if probe is not None:
            words = survey.vocabulary(source.vectors() if source.model else vectors)
            items, name = survey.repeated(words, probe_count, probe_length, shuffle_seed), "--probe repeated"
        else:
            items, name = _corpus_lines(stack, corpus, jsonl, field_name, jobs)
        chunks = batch.chunks_of(items)  # a chunk of lines a task
        parts = (cluster.run_dask(chunks, job, scheduler) if scheduler is not None
                 else survey.run(chunks, job, jobs, vectors))
        with progress("lines", streaming=False) as update:
            total = survey.summarise(parts, lambda t: update(t.lines, None, f"{t.lines - t.skipped:,} sentences"))
    summary = survey.summary(total, name, by, vectors, precision)
    if total.skipped:
        line, reason = total.first_skip
        warn(f"{total.skipped:,} of {total.lines:,} lines skipped (line {line:,}: {reason})")
    note_redone(total.redone, total.lines - total.skipped)
    emit([summary], out, "stats_view", json_docs=summary["records"])


def _refuse_together(corpus, probe, scheduler, jobs: int, by: str, png, importance: bool, model) -> None:
    """The options that cannot go together, refused before anything is loaded."""
    if probe is not None and corpus is not None:
        raise click.UsageError("--probe repeated makes its own sentences; leave out CORPUS")
    if scheduler is not None and jobs > 1:
        raise click.UsageError("--jobs runs workers on this machine and --scheduler on a cluster; give one of them")
    if by == "word" and png:
        raise click.UsageError("--png draws each head's statistics as a grid; --by word has none (its --svg and "
                               "--html draw the words' tables)")
    if importance and not model:
        raise click.UsageError("--importance zeroes a trained model's heads in turn and runs the model on; it needs "
                               "--model NAME|DIR")
    if importance and by == "word":
        raise click.UsageError("--importance gives each head a number, and --by word gives a record per word; "
                               "give one of them")


# what each option --document cannot take does, for the error that refuses it
NOT_WITH_DOCUMENT = {
    "--jsonl": "reads a sentence from each JSON line",
    "--probe": "makes sentences of its own",
    "--by word": "counts words, and a model's tokens are word pieces",
    "--importance": "zeroes each head in turn and runs the model on, over a sentence's whole T x T layers",
    "--jobs": "shares a corpus's lines among processes",
    "--scheduler": "shares a corpus's lines among a cluster's workers",
}


def _document(corpus, source, seed: int, shuffled: bool, out, given: dict) -> None:
    """stats --document: CORPUS (or standard input) read whole as one text, through the
    model a block of rows at a time (corpus.document)."""
    from attncli.corpus import document  # the model's code: the model extra's

    if source.model is None:
        raise click.UsageError("--document runs a trained model over the whole text as one sequence; give --model "
                               "NAME|DIR (over word vectors, scores --file DOC.txt streams a long text)")
    for option, what in NOT_WITH_DOCUMENT.items():
        if given[option]:
            raise click.UsageError(f"{option} {what}, and --document reads CORPUS whole as one sequence; leave out "
                                   f"{option}")
    where = "standard input" if corpus in (None, "-") else corpus
    data = (read_stdin("give CORPUS, or pipe the document on standard input") if corpus in (None, "-")
            else reading.read_file(corpus, "CORPUS"))
    text = decode(data, where).strip()  # the white space at its ends no piece of the text
    if not text:
        raise InputError(f"{where} is empty; give a text")
    trained = source.load()
    with progress("rows", streaming=False) as update:
        summary = document.summary(text, trained, where, shuffled=shuffled, seed=seed, precision=source.precision,
                                   progress=update)
    note_redone(summary["records"][0].get("redone_in_float64", 0), 1)
    emit([summary], out, "stats_view", json_docs=summary["records"])


def _corpus_lines(stack: contextlib.ExitStack, corpus: str | None, jsonl: bool, field_name: str, jobs: int):
    """(items, name) of CORPUS's lines, or standard input's; the file closed by `stack`."""
    from attncli.corpus import survey  # multiprocessing, at workers' top: 20 ms that listing the commands need not pay

    if corpus in (None, "-"):
        stream, name = stdin_stream("give CORPUS, or --probe repeated"), "standard input"
    else:
        stream, name = stack.enter_context(reading.open_regular(corpus, "CORPUS")), corpus
    return survey.read_lines(stream, jsonl=jsonl, field_name=field_name, name=name, jobs=jobs), name
