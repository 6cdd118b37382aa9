"""faithfulness: how well each measure of context mixing agrees with leave-one-out, over a corpus."""

from __future__ import annotations

import contextlib
import os

import click
from attncli.cli.inputs import stdin_stream
from attncli.system import reading
from attncli.cli.options import (TextParam, complete_path, model_options, output_options, output_path,
                                 scheduler_address)
from attncli.cli.output import emit, note_redone, progress, warn
from attncli.cli.sections import Command, option


@click.command(cls=Command, short_help="how well each measure of context mixing agrees with leave-one-out")
@click.argument("corpus", required=False, metavar="[CORPUS]", shell_complete=complete_path)
@click.option("--jsonl", is_flag=True, help="Lines are JSON objects; the sentence is in their --field.")
@click.option("--field", "field_name", default="text", show_default=True, type=TextParam("--field"),
              help="The field of --jsonl lines to read.")
@click.option("--resamples", type=click.IntRange(100, 100_000), default=1000, show_default=True, metavar="N",
              help="Resamples of the bootstrap that gives each mean its 95% interval.")
@click.option("--seed", "seed_number", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="Seeds the random attribution and the bootstrap: the same seed, the same numbers.")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Worker processes on this machine (at most one a core).")
@click.option("--scheduler", metavar="ADDRESS", envvar="ATTNCLI_DASK_SCHEDULER", show_envvar=True,
              callback=scheduler_address,
              help="A Dask scheduler (tcp://host:8786) whose workers do the work; needs pip install 'dask[distributed]'.")
@model_options(head=False, layer=False)
@option("output", "--png", type=click.Path(), callback=output_path("png", (".png",)), metavar="FILE.png",
        help="Also draw the table as a picture: mean rho per method and column, the intervals written in "
             "(needs matplotlib: pip install matplotlib).")
@output_options
def faithfulness(corpus, jsonl, field_name, resamples, seed_number, jobs, scheduler, source, out):
    """How faithful each measure of context mixing is to the model: over CORPUS (or standard
    input), one sentence a line, each method's agreement with leave-one-out, Spearman's rho
    per sentence between the method's attribution of the sentence's output (the mean of its
    rows over the tokens; a decoder's last row, the piece it predicts next) and the effect
    of leaving each token out (an encoder's cosine distance of its mean-pooled last hidden
    states; a decoder's fall in the log-probability of the piece it predicts next). The
    methods: raw, norm, norm-res, norm-res-ln, globenc, alti, value-zeroing, at each layer
    and rolled out over the layers (raw's is Abnar & Zuidema's rollout), and a random
    attribution, drawn anew for each sentence, as a baseline (rolled-out column only). Out:
    the mean rho over the sentences with its 95% percentile bootstrap interval, a table
    with a row a method, the best of each column marked (JSON Lines when piped: a record a
    method). A line the model cannot take (too long, no word piece) is skipped and counted.
    Needs --model: leave-one-out runs it again without each token, so each sentence of T
    pieces costs about 2T forward passes.

    \b
    Examples:
      attncli faithfulness corpus.txt --model minilm
      attncli faithfulness corpus.txt --model minilm --jobs 2 --png faithfulness.png
      attncli faithfulness corpus.txt --model minilm --jobs 2 --precision float32
      attncli faithfulness corpus.txt --model gpt2 --json | jq -c '{method, rolled}'
      attncli faithfulness corpus.txt --model minilm --scheduler tcp://10.0.0.5:8786
    """
    from attncli.corpus import batch, cluster, survey  # multiprocessing: not at listing's cost
    from attncli.encoder import Options  # with the modules above: this command's own
    from attncli.mixing import faithfulness as faith  # multiprocessing: not at listing's cost

    if not source.model:
        raise click.UsageError("faithfulness needs a model's forward pass (leave-one-out runs it again without "
                               "each token); give --model NAME|DIR")
    if scheduler is not None and jobs > 1:
        raise click.UsageError("--jobs runs workers on this machine and --scheduler on a cluster; give one of them")
    trained = source.load()
    job = faith.Job(batch.Job.from_source(source, trained, Options(), dask=scheduler is not None),
                    seed=seed_number, precision=source.precision)
    jobs = min(jobs, os.cpu_count() or 1)
    with contextlib.ExitStack() as stack:
        if corpus in (None, "-"):
            stream, name = stdin_stream("give CORPUS"), "standard input"
        else:
            stream, name = stack.enter_context(reading.open_regular(corpus, "CORPUS")), corpus
        items = survey.read_lines(stream, jsonl=jsonl, field_name=field_name, name=name, jobs=jobs)
        chunks = batch.chunks_of(items, faith.CHUNK)
        parts = (cluster.run_dask(chunks, job, scheduler) if scheduler is not None
                 else survey.run(chunks, job, jobs, trained))
        with progress("lines", streaming=False) as update:
            total = survey.summarise(parts, lambda t: update(t.lines, None, f"{t.sentences:,} sentences"),
                                     job.empty())
    summary = faith.summary(total, name, trained, resamples=resamples, seed=seed_number, precision=source.precision)
    if total.skipped:
        line, reason = total.first_skip
        warn(f"{total.skipped:,} of {total.lines:,} lines skipped (line {line:,}: {reason})")
    note_redone(total.redone, total.sentences)
    emit([summary], out, "faithfulness_view", json_docs=summary["records"])
