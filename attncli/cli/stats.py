"""stats: what each head does across a corpus, beside honest baselines."""

from __future__ import annotations

import contextlib
import os

import click
from attncli import limits
from attncli.cli.options import (TextParam, attention_options, complete_path, model_options, output_options,
                                 output_path, scheduler_address, vectors_options)
from attncli.cli.inputs import stdin_stream
from attncli.cli.output import emit, progress, warn
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
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Worker processes on this machine (at most one a core).")
@click.option("--scheduler", metavar="ADDRESS", envvar="ATTNCLI_DASK_SCHEDULER", show_envvar=True,
              callback=scheduler_address,
              help="A Dask scheduler (tcp://host:8786) whose workers do the work; needs pip install 'attncli[dask]'.")
@vectors_options
@model_options(head=False)
@attention_options(top=False)
@option("output", "--png", type=click.Path(), callback=output_path("png", (".png",)), metavar="FILE.png",
        help="Also draw each statistic as a layers x heads grid (needs matplotlib: pip install 'attncli[plot]').")
@output_options
def stats(corpus, jsonl, field_name, by, probe, probe_count, probe_length, shuffle_seed, random_seeds,
          no_shuffled, jobs, scheduler, source, opts, out):
    """What each head does across CORPUS (or standard input), one sentence a line: for
    every head (every layer x head with --model; the --heads heads over word vectors) the
    mean entropy of its attention rows (nats), the mean distance attended, the share of
    attention on the token itself, the previous and the next token, [CLS], [SEP] and
    punctuation, and TransformerLens's previous-token, duplicate-token and induction scores
    (the last two on sentences whose tokens repeat). Beside each, the same statistic under
    baselines: uniform attention, the sentences shuffled, and random projections; a
    statistic a baseline equals (within 0.005 or 1%) is marked. Out: a record per head (JSON
    Lines when piped), with the rows and tokens counted; --by word gives a record per word.
    Only running sums are kept, whatever the corpus's size.

    \b
    Examples:
      attncli stats corpus.txt
      attncli stats corpus.txt --model minilm --png heads.png
      attncli stats --probe repeated --model minilm --json | jq -c '{layer, head, induction}'
      attncli stats corpus.txt --by word --json | head
      attncli stats corpus.txt --scheduler tcp://10.0.0.5:8786
    """
    from attncli import batch, stats as statistics, survey

    input_file = corpus
    if probe is not None and input_file is not None:
        raise click.UsageError("--probe repeated makes its own sentences; leave out CORPUS")
    if scheduler is not None and jobs > 1:
        raise click.UsageError("--jobs runs workers on this machine and --scheduler on a cluster; give one of them")
    if by == "word" and out.png:
        raise click.UsageError("--png draws each head's statistics as a grid; --by word has none (its --svg and "
                               "--html draw the words' tables)")
    vectors = source.load()
    if by == "word" and source.model:
        raise InputError("--by word counts words, and a model's tokens are word pieces; leave out --model "
                         "(word pieces are not merged here)")
    if not source.model:
        # the attention options' own errors (--heads that does not divide d_k, a --qkv file) now, not a line's
        survey.sentence_arrays(" ".join(_vocabulary(vectors, most=2)) or vectors.vocab.word(0), vectors, opts)
        if random_seeds:  # the baseline draws d x d projections of its own, whatever --d-k says
            limits.require(3 * vectors.dim ** 2 * 8, f"the random projections baseline (W_query, W_key, W_value of "
                           f"{vectors.dim:,} x {vectors.dim:,})", "leave it out with --random-seeds 0")
    job = survey.StatsJob(batch.Job.from_source(source, vectors, opts, dask=scheduler is not None), seed=shuffle_seed, shuffled=not no_shuffled,
                          random_seeds=random_seeds, by_word=by == "word")
    jobs = min(jobs, os.cpu_count() or 1)
    with contextlib.ExitStack() as stack:
        if probe is not None:
            words = source.vectors() if source.model else vectors
            items = survey.repeated(_vocabulary(words), probe_count, probe_length, shuffle_seed)
            name = "--probe repeated"
        elif input_file in (None, "-"):
            stdin = stdin_stream("give CORPUS, or --probe repeated")
            items, name = survey.read_lines(stdin, jsonl=jsonl, field_name=field_name,
                                            name="standard input", jobs=jobs), "standard input"
        else:
            stream = stack.enter_context(_open(input_file))
            items, name = survey.read_lines(stream, jsonl=jsonl, field_name=field_name, name=input_file,
                                            jobs=jobs), input_file
        total = statistics.Partial()
        chunks = batch.chunks_of(items)
        parts = (survey.run_dask(chunks, job, scheduler) if scheduler is not None
                 else survey.run(chunks, job, jobs, vectors))
        stack.callback(parts.close)  # the workers end here, whatever happens, before the run says why
        with progress("lines", streaming=False) as update:
            for part in parts:
                total.merge(part)
                update(total.lines, None, f"{total.lines - total.skipped:,} sentences")
    if total.lines == 0:
        raise InputError(f"{name} holds no sentence (it is empty or blank)")
    if total.heads is None:
        line, reason = total.first_skip
        raise InputError(f"no line of {name} could be read ({total.skipped:,} skipped; line {line:,}: {reason})")
    if total.skipped:
        line, reason = total.first_skip
        warn(f"{total.skipped:,} of {total.lines:,} lines skipped (line {line:,}: {reason})")
    records = total.words.records() if by == "word" else statistics.head_records(total)
    summary = {"command": "stats", "corpus": name, "by": by, "lines": total.lines, "skipped": total.skipped,
               "model": vectors.name if source.model else None, "vectors": None if source.model else vectors.name,
               "records": records}
    emit([summary], out, "stats_view", json_docs=records)


def _vocabulary(vectors, most: int = 10_000) -> list[str]:
    """The words --probe repeated draws from: the vectors' first `most` of letters only."""
    out = []
    for i in range(vectors.size):
        word = vectors.vocab.word(i)
        if word.isalpha():
            out.append(word)
            if len(out) == most:
                break
    return out


def _open(path: str):
    from attncli import limits

    return limits.open_regular(path, "CORPUS")
