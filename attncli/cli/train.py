"""train: W_Q, W_K and W_V learned on a corpus by backpropagation, written to a .npz."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click
from attncli.cli import ExitStatus
from attncli.cli.inputs import decode
from attncli.system import reading
from attncli.cli.options import (FiniteFloat, TextParam, complete_path, given_options, output_options, output_path,
                                 vectors_options)
from attncli.cli.output import emit, progress, warn
from attncli.cli.sections import Command
from attncli.errors import InputError
from attncli.learning.projections import OBJECTIVES
from attncli.system.ending import ctrl_c_noted
from attncli.system.writing import write_whole

PROBES = {"hide": "The earth is like an orange|Orange is a bright color",
          "next": "The earth is like an orange|She peeled a ripe orange"}  # next: the word last, to see its past


class Fraction(click.ParamType):
    """A number strictly between 0 and 1."""

    name = "fraction"

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not 0 < x < 1:
            self.fail(f"{value!r} is not between 0 and 1", param, ctx)
        return x


@click.command(cls=Command, short_help="learn W_Q, W_K, W_V on a corpus by backpropagation")
@click.argument("corpus", metavar="CORPUS", shell_complete=complete_path)
@click.option("-o", "--output", type=click.Path(), callback=output_path("output", (".npz",)),
              required=True, metavar="FILE.npz", help="The projections to write, for --qkv FILE.npz.")
@click.option("--force", is_flag=True, help="Replace the file if it exists.")
@click.option("--objective", type=click.Choice(OBJECTIVES), default="hide", show_default=True,
              help="hide: a word's own vector asks for it among its neighbours; mask: one learned vector asks "
                   "instead (BERT's [MASK]); next: predict the next word from the --window words up to this one.")
@click.option("--d-k", "d_k", type=click.IntRange(min=1), metavar="N",
              help="Size of the queries and keys (the values keep d, in word space). Default: d.")
@click.option("--mask-self", is_flag=True,
              help="With --objective next, leave the word itself out of its keys (hide and mask always do).")
@click.option("--steps", type=click.IntRange(1, 10_000_000), default=1500, show_default=True, metavar="N",
              help="Steps of Adam, a batch each: a budget in steps, so the same seed gives the same file anywhere.")
@click.option("--epochs", type=FiniteFloat(positive=True), metavar="N", callback=lambda ctx, param, v: _epochs(v),
              help="Instead of --steps: as many steps as N passes over the examples take (at most 10,000,000).")
@click.option("--lr", type=FiniteFloat(positive=True), default=0.01, show_default=True, help="Adam's learning rate.")
@click.option("--batch", type=click.IntRange(1, 65_536), default=256, show_default=True, metavar="N",
              help="Examples a step.")
@click.option("--window", type=click.IntRange(1, 100), default=5, show_default=True, metavar="W",
              help="The visible words either side of a hidden one.")
@click.option("--out-vocab", type=click.IntRange(1, 1_000_000), default=10_000, show_default=True, metavar="N",
              help="Predict among the N most frequent words of the corpus that have vectors.")
@click.option("--negatives", type=click.IntRange(0, 1_000_000), default=2048, show_default=True, metavar="N",
              help="Output words drawn a step for a sampled softmax (by frequency); 0: all of them.")
@click.option("--heads", type=click.IntRange(1, 4096), default=1, show_default=True, metavar="H",
              help="Heads of d_k/H columns of queries and keys, d/H of values; --qkv FILE.npz shows the file with "
                   "them.")
@click.option("--holdout", type=Fraction(), default=0.1, show_default=True,
              help="The share of the corpus's lines kept out of training, to measure the loss on.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, metavar="N", help="The random seed.")
@click.option("--jsonl", is_flag=True, help="CORPUS's lines are JSON objects; the text is in their --field.")
@click.option("--field", "field_name", default="text", show_default=True, type=TextParam("--field"),
              help="The field of --jsonl lines to read.")
@click.option("--probe", metavar="SENTENCE_A|SENTENCE_B", type=TextParam("--probe"),
              help="Two sentences whose --token's context vectors are compared before and after. Default: "
                   f"\"{PROBES['hide']}\" (next: \"{PROBES['next']}\").")
@click.option("--token", default="orange", show_default=True, metavar="WORD", type=TextParam("--token"),
              help="The probe's word.")
@vectors_options
@output_options
def train(corpus, output, force, objective, d_k, mask_self, steps, epochs, lr, batch, window, out_vocab, negatives,
          heads, holdout, seed, jsonl, field_name, probe, token, source, out):
    """Learn the projections W_query, W_key (d x d_k) and W_value (d x d, so context vectors
    stay among the word vectors) on CORPUS, one sentence or paragraph a line, by
    backpropagation: each example hides a word, a query attends over the words the
    --objective keeps visible, and their context vector must predict the word among the
    --out-vocab most frequent (a softmax over their fixed vectors). Adam, from the identity
    (the untrained attention of the other commands; with a smaller --d-k, from the vectors'
    principal directions). Out: the .npz for --qkv, written whole, and a summary: the
    held-out loss before and after, and the probe word's attention and context cosine
    before and after, masked as training saw it (hide, mask: --mask self; next: --mask
    causal). Ctrl-C stops after the step under way and writes what was learned so far
    (exit 130).

    \b
    Examples:
      attncli train corpus.txt -o proj.npz
      attncli compare "The earth is like an orange" "Orange is a bright color" --token orange --qkv proj.npz --mask self
      attncli train corpus.txt -o proj.npz --steps 3000 --seed 1 --probe "I sat on the bank|The bank raised rates" --token bank
      attncli train corpus.txt -o proj.npz --objective mask --heads 2 --d-k 20 --epochs 2
    """
    from attncli.learning import train as learning  # the training code, 20 ms that listing the commands need not pay

    if epochs is not None and given_options(click.get_current_context(), ("steps",)):
        raise click.UsageError("give --steps or --epochs, not both")
    path = Path(output)
    if path.exists() and not force:
        raise click.UsageError(f"{path} exists; give --force to replace it")
    sentences = _probe_sentences(probe, objective)
    data, text = _corpus_text(corpus, jsonl, field_name)
    vectors = source.load()
    options = learning.TrainOptions(steps=steps, lr=lr, batch=batch, window=window, out_vocab=out_vocab,
                                    holdout=holdout, seed=seed, negatives=negatives, heads=heads, objective=objective,
                                    d_k=d_k, epochs=epochs, mask_self=mask_self)
    # the summary comes at the end: the bar may share the terminal with stdout
    with ctrl_c_noted() as stopped, _losses_bar() as (report, untrained):
        done = learning.run(text, vectors, options, learning.corpus_record(corpus, data), sentences, token,
                            stopped=stopped, progress=report, untrained=untrained)
    record = done.record
    if record["out_vocab"] < out_vocab and given_options(click.get_current_context(), ("out_vocab",)):
        warn(f"--out-vocab {out_vocab:,}: the corpus has {record['out_vocab']:,} words with vectors outside "
             "its held-out lines; all of them were used")
    write_whole(path, lambda f: f.write(done.npz))
    emit([_summary(path, done)], out, "train_view")
    if record["steps_done"] < record["steps"]:
        warn(f"stopped after {record['steps_done']:,} of {record['steps']:,} steps; {path} holds what was learned so far")
        return ExitStatus.INTERRUPTED


def _probe_sentences(probe: str | None, objective: str) -> list[str]:
    """--probe's two sentences, or the objective's default pair."""
    probe = PROBES["next" if objective == "next" else "hide"] if probe is None else probe
    sentences = [s for s in probe.split("|") if s.strip()]
    if len(sentences) != 2:
        raise click.UsageError("--probe takes two sentences, separated by |")
    return sentences


def _corpus_text(corpus: str, jsonl: bool, field_name: str) -> tuple[bytes, str]:
    """CORPUS's bytes (the file's record hashes them) and its text, of its --field with --jsonl."""
    data = reading.read_file(corpus, "CORPUS")
    text = _jsonl_text(data, corpus, field_name) if jsonl else decode(data, corpus)
    if not text.strip():
        raise InputError(f"{corpus} is empty")
    return data, text


@contextlib.contextmanager
def _losses_bar():
    """A bar of the steps, with the losses of bar_note: (progress, untrained) for train.run."""
    seen: dict[str, float] = {}  # the held-out losses so far

    with progress("steps", streaming=False) as update:
        def report(step: int, total: int, loss: float, held_loss: float | None) -> None:
            if held_loss is not None:
                seen["held-out"] = held_loss
            update(step, total, bar_note(loss, seen))

        yield report, lambda loss: seen.update(untrained=loss)


def _summary(path: Path, done) -> dict:
    """train's document: the file, the steps, the held-out losses, the probe and the record."""
    record, losses = done.record, done.record["held_out_loss"]
    return {"command": "train", "path": str(path), "steps": record["steps_done"], "examples": record["examples"],
            "held_out_loss": {"untrained": losses[0]["loss"], "trained": losses[-1]["loss"]}, "probe": done.probe,
            "train": record}


def bar_note(loss: float, seen: dict[str, float]) -> str:
    """The bar's losses, short enough for 80 columns beside the count and the time left: the
    step's, the last held-out one, and the untrained one it started from."""
    note = f"loss {loss:.2f}"
    if "held-out" in seen:
        note += f", held-out {seen['held-out']:.2f}"
    if "untrained" in seen:
        note += f" (untrained {seen['untrained']:.2f})"
    return note


def _epochs(value: float | None) -> float | None:
    if value is not None and value > 1e6:
        raise click.BadParameter(f"{value:g} passes over the examples is more than a run can take; "
                                 "give at most 1,000,000 (or --steps)")
    return value


def _jsonl_text(data: bytes, corpus: str, field_name: str) -> str:
    """The --field of each JSON line, a line each; the lines that have none skipped, with a note."""
    from attncli.corpus import batch  # multiprocessing, at workers' top: 20 ms that listing the commands need not pay

    items = batch.parse_lines(data, jsonl=True, field_name=field_name)
    bad = [(n, error) for n, _, error in items if error is not None]
    if bad:
        n, error = bad[0]
        warn(f"{corpus}: {len(bad):,} of {len(items):,} lines skipped (line {n:,}: {error})")
    return "\n".join(text for _, text, error in items if error is None)
