"""batch: a corpus, one sentence a line, through the same documents, in order."""

from __future__ import annotations

import os
import sys

import click
from attncli.cli import ExitStatus
from attncli.cli.inputs import read_input
from attncli.cli.options import (CONTEXT_FIELDS, SCORES_FIELDS, TextParam, attention_options, complete_path,
                                 fields_option, model_options, neighbors_option, scheduler_address, vectors_options)
from attncli.cli.output import progress, utf8, writing_stdout
from attncli.cli.sections import Command
from attncli.errors import InputError


@click.command(cls=Command, short_help="many sentences, one a line: one JSON result a line, in order")
@click.argument("input_file", required=False, metavar="[FILE]", shell_complete=complete_path)
@click.option("--jsonl", is_flag=True, help="Lines are JSON objects; the sentence is in their --field.")
@click.option("--field", "field_name", default="text", show_default=True, type=TextParam("--field"),
              help="The field of --jsonl lines to read.")
@click.option("--token", metavar="WORD", type=TextParam("--token"),
              help="Give each line's context document for this token instead of scores.")
@click.option("--index", type=click.IntRange(min=0), metavar="N", help="Its position, when it occurs more than once.")
@click.option("--all", "all_contexts", is_flag=True, help="With context documents: every token's context vector too.")
@neighbors_option
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes (at most one a core); they share the memory-mapped vectors, and the output "
                   "keeps input order.")
@click.option("--scheduler", metavar="ADDRESS", envvar="ATTNCLI_DASK_SCHEDULER", show_envvar=True,
              callback=scheduler_address,
              help="A Dask scheduler (tcp://host:8786) whose workers do the work, the output still in input order; "
                   "needs pip install 'attncli[dask]'.")
@fields_option(tuple(dict.fromkeys(("line", *SCORES_FIELDS, *CONTEXT_FIELDS))))
@vectors_options
@model_options
@attention_options
def batch(input_file, jsonl, field_name, token, index, all_contexts, neighbors, jobs, scheduler, fields, load, opts):
    """A corpus in one run: FILE (or standard input), one sentence a line, or with --jsonl one
    JSON object a line. Out: JSON Lines, one object per input line in input order, the
    `scores` document (or, with --token, the `context` one) plus `line`, the input line
    number from 1. A blank line is skipped (as by scores), the others keep their numbers.
    A bad line gives {"line", "error"} and the run goes on; at the end, a count of them on
    stderr, and exit status 1 if there was any.

    \b
    Examples:
      attncli batch corpus.txt > results.jsonl
      attncli batch corpus.jsonl --jsonl --field body --token orange --jobs 2
      cat corpus.txt | attncli batch --scale 1 | jq -c '.top[0]'
      attncli batch corpus.txt --scheduler tcp://10.0.0.5:8786 > results.jsonl
      attncli batch corpus.txt --fields tokens,weights | jq -c '.weights[0]'
    """
    from attncli import batch as batches

    if scheduler is not None and jobs > 1:
        raise click.UsageError("--jobs runs workers on this machine and --scheduler on a cluster; give one of them")
    data = read_input(input_file)
    items = batches.parse_lines(data, jsonl=jsonl, field_name=field_name)
    if not items:
        raise InputError(f"{input_file or 'standard input'} holds no sentence (it is empty or blank)")
    jobs = min(jobs, len(items), os.cpu_count() or 1)  # more workers than lines or cores only cost start-up
    vectors = load()  # here, once: converts and caches a new source before workers start
    written = {"fields": fields, "ascii_only": not utf8(sys.stdout)}  # the workers write the JSON
    if load.model:  # each worker reads the model's files again, from the folder found here
        job = batches.Job(model=str(vectors.model.path), layer=vectors.layer, head=vectors.head, opts=opts,
                          token=token, index=index, all_contexts=all_contexts, neighbors=neighbors, **written)
    else:
        job = batches.Job(source=vectors.source if vectors.source != "bundled" else None, limit=load.limit,
                          trust_pickle=load.trust_pickle, opts=opts, token=token, index=index,
                          all_contexts=all_contexts, neighbors=neighbors, **written)
    if scheduler is not None:
        from attncli import survey

        results = survey.run_dask_in_order(survey.chunks_of(items), job, scheduler)
    else:
        results = batches.run_encoded(items, job, jobs)
    failed = 0
    with progress("lines") as update, writing_stdout():
        for done, (error, line) in enumerate(results, start=1):
            failed += error
            sys.stdout.write(line + "\n")
            update(done, len(items))
        sys.stdout.flush()
    if failed:
        click.echo(f"attncli: {failed} of {len(items)} lines failed; their objects hold \"error\"", err=True)
        return ExitStatus.ERROR
