"""batch: a corpus, one sentence a line, through the same documents, in order."""

from __future__ import annotations

import contextlib
import itertools
import os
import sys

import click
from attncli.cli import ExitStatus
from attncli.cli.inputs import stdin_stream
from attncli.cli.options import (CONTEXT_FIELDS, SCORES_FIELDS, TextParam, attention_options, complete_path,
                                 fields_option, model_options, neighbors_option, scheduler_address, vectors_options)
from attncli.cli.output import progress, progress_shown, writing_stdout
from attncli.cli.sections import Command
from attncli.errors import AttncliError, InputError
from attncli.system.reading import open_regular
from attncli.views.json import utf8, write_bytes
from attncli.visible import count


@click.command(cls=Command, short_help="many sentences, one a line: one JSON result a line, in order")
@click.argument("input_file", required=False, metavar="[FILE]", shell_complete=complete_path)
@click.option("--jsonl", is_flag=True, help="Lines are JSON objects; the sentence is in their --field.")
@click.option("--field", "field_name", default="text", show_default=True, type=TextParam("--field"),
              help="The field of --jsonl lines to read.")
@click.option("--token", metavar="WORD", type=TextParam("--token"),
              help="Give each line's context document for this token instead of scores.")
@click.option("--index", type=click.IntRange(min=0), metavar="N", help="Its position, when it occurs more than once.")
@click.option("--all", "all_contexts", is_flag=True, help="With context documents: every token's context vector too.")
@neighbors_option()
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Worker processes (at most one a core); they share the memory-mapped vectors, and the output "
                   "keeps input order.")
@click.option("--scheduler", metavar="ADDRESS", envvar="ATTNCLI_DASK_SCHEDULER", show_envvar=True,
              callback=scheduler_address,
              help="A Dask scheduler (tcp://host:8786) whose workers do the work, the output still in input order; "
                   "needs pip install 'dask[distributed]'.")
@fields_option(tuple(dict.fromkeys(("line", *SCORES_FIELDS, *CONTEXT_FIELDS))))
@vectors_options
@model_options
@attention_options
def batch(input_file, jsonl, field_name, token, index, all_contexts, neighbors, jobs, scheduler, fields, source, opts):
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
    return corpus_lines(input_file, jobs, scheduler, source, opts, jsonl=jsonl, field_name=field_name, fields=fields,
                        token=token, index=index, all_contexts=all_contexts, neighbors=neighbors)


def corpus_lines(input_file: str | None, jobs: int, scheduler: str | None, source, opts, *, jsonl: bool = False,
                 field_name: str = "text", fields=None, size: int | None = None, loaded=None, **job):
    """FILE (or standard input) a line at a time through the Job the rest of `job` makes
    (batch's documents, or generate's), in one process, `jobs` or on the cluster at
    `scheduler`: JSON Lines on stdout in input order, a chunk of `size` lines a task (the
    Job's usual by default; `loaded`, the source where the command loaded it already);
    exit status 1 where a line failed."""
    from attncli.corpus import batch as batches, cluster  # multiprocessing, at workers' top: 20 ms that listing the commands need not pay

    if scheduler is not None and jobs > 1:
        raise click.UsageError("--jobs runs workers on this machine and --scheduler on a cluster; give one of them")
    where = input_file if input_file not in (None, "-") else "standard input"
    jobs = min(jobs, os.cpu_count() or 1)
    size = size or batches.CHUNK
    with contextlib.ExitStack() as stack:
        stream = (stdin_stream("give FILE") if input_file in (None, "-")
                  else stack.enter_context(open_regular(input_file, "FILE")))
        # a line at a time, a chunk of lines to a task: the corpus is never held whole
        chunks = batches.chunks_of(batches.read_items(stream, jsonl=jsonl, field_name=field_name, where=where,
                                                      most=batches.line_most(jobs)), size)
        first = next(chunks, None)
        if first is None:
            raise InputError(f"{where} holds no sentence (it is empty or blank)")
        if len(first) < size:  # the whole input: more workers than lines only cost start-up
            jobs = min(jobs, len(first))
        vectors = loaded or source.load()  # here, once: converts and caches a new source before workers start
        written = {"fields": fields, "ascii_only": not utf8(sys.stdout)}  # the workers write the JSON
        job = batches.Job.from_source(source, vectors, opts, dask=scheduler is not None, **job, **written)
        chunks = itertools.chain([first], chunks)
        results = (cluster.run_dask_in_order(chunks, job, scheduler) if scheduler is not None
                   else batches.run_chunks(chunks, job, jobs))
        stack.callback(results.close)  # the workers end here, whatever happens, before the run says why
        # a file's lines are counted first for the bar's end (a pass at 1 GB/s), only where the bar is drawn
        total = _lines_of(stream) if input_file not in (None, "-") and progress_shown() else None
        failed, done = _write(results, total, where)
    if failed:
        click.echo(f"attncli: {failed:,} of {count(done, 'line')} failed; their objects hold \"error\"", err=True)
        return ExitStatus.ERROR


def _write(results, total: int | None, where: str) -> tuple[int, int]:
    """Each chunk's lines to stdout as they come, with a bar of the lines: (lines failed, lines
    done). A failure midway says which lines the output holds."""
    failed = done = last = 0
    with progress("lines") as update, writing_stdout():
        try:
            for chunk in results:
                write_bytes(chunk.data)
                failed, done, last = failed + chunk.failed, done + chunk.lines, chunk.last
                update(chunk.last, total)
        except AttncliError as e:  # the input (a line too long) or a worker can fail midway, after lines were written
            if done:
                raise type(e)(f"{e} (the output holds the results of lines 1 to {last:,} of {where}, whole; "
                              f"those from line {last + 1:,} on are missing)") from None
            raise
    return failed, done


def _lines_of(stream) -> int:
    """The lines of a regular file, read again from its start by its own descriptor."""
    count, last, offset = 0, b"\n", 0
    while block := os.pread(stream.fileno(), 1 << 20, offset):
        count, last, offset = count + block.count(b"\n"), block[-1:], offset + len(block)
    return count + (last != b"\n")
