"""stats: what each head does across a corpus, beside honest baselines."""

from __future__ import annotations

import contextlib
import os

import click
from attncli.system import reading
from attncli.cli.options import (TextParam, attention_options, complete_path, model_options, output_options,
                                 output_path, scheduler_address, vectors_options)
from attncli.cli.inputs import stdin_stream
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
          no_shuffled, importance, jobs, scheduler, source, opts, out):
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
    Only running sums are kept, whatever the corpus's size.

    \b
    Examples:
      attncli stats corpus.txt
      attncli stats corpus.txt --model minilm --png heads.png
      attncli stats --probe repeated --model minilm --json | jq -c '{layer, head, induction}'
      attncli stats corpus.txt --by word --json | head
      attncli stats corpus.txt --model minilm --importance --jobs 2
      attncli stats corpus.txt --model minilm --no-shuffled --precision float32
      attncli stats corpus.txt --scheduler tcp://10.0.0.5:8786
    """
    from attncli.corpus import batch, cluster, survey  # multiprocessing, at workers' top: 20 ms that listing the commands need not pay

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


def _corpus_lines(stack: contextlib.ExitStack, corpus: str | None, jsonl: bool, field_name: str, jobs: int):
    """(items, name) of CORPUS's lines, or standard input's; the file closed by `stack`."""
    from attncli.corpus import survey  # multiprocessing, at workers' top: 20 ms that listing the commands need not pay

    if corpus in (None, "-"):
        stream, name = stdin_stream("give CORPUS, or --probe repeated"), "standard input"
    else:
        stream, name = stack.enter_context(reading.open_regular(corpus, "CORPUS")), corpus
    return survey.read_lines(stream, jsonl=jsonl, field_name=field_name, name=name, jobs=jobs), name
