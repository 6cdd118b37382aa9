"""The generate command: a decoder writes after a prompt, and each piece it wrote shows where
the step that chose it looked (documents/generation.py's document)."""

from __future__ import annotations

import sys

import click
from attncli.cli.inputs import compute_all, read_sentences
from attncli.cli.corpus import corpus_lines
from attncli.cli.options import (TextParam, complete_path, model_options, output_options, png_option,
                                 scheduler_address, sentence_argument)
from attncli.cli.output import emit
from attncli.cli.sections import Command
from attncli.documents.generation import METHODS, Asked, contrast_of, generate_doc, has_template
from attncli.encoder import Options
from attncli.models.generation import Sampling
from attncli.visible import visible


@click.command(cls=Command, short_help="a decoder writes after a prompt: each piece, and where it looked")
@sentence_argument
@click.option("--max-new-tokens", "new", type=click.IntRange(min=1), default=20, show_default=True, metavar="N",
              help="The most pieces to write; it stops before at the model's end-of-sequence piece.")
@click.option("--sample", is_flag=True,
              help="Draw each piece from the model's distribution (--temperature, --top-k, --top-p, --seed) instead "
                   "of taking the likeliest (greedy, the default).")
@click.option("--temperature", "heat", type=click.FloatRange(min=0, min_open=True), metavar="T",
              help="With --sample: the scores divided by T before the softmax. Default: 1.")
@click.option("--top-k", type=click.IntRange(min=1), metavar="K", help="With --sample: draw among the K likeliest.")
@click.option("--top-p", type=click.FloatRange(min=0, max=1, min_open=True), metavar="P",
              help="With --sample: draw among the fewest likeliest pieces whose probabilities sum to P.")
@click.option("--seed", "draws", type=click.IntRange(min=0), metavar="S",
              help="With --sample: the generator's seed; the same seed, the same pieces. Default: 0.")
@click.option("--method", type=click.Choice(METHODS),
              help="Also attribute each written piece to the positions before it: rollout (the attention rollout of "
                   "the heads' mean up to the layer shown), alti (ALTI rolled out up to it, as contributions "
                   "computes it), alti-logit (the logit of the piece shared out over the positions through every "
                   "layer's attention and ALTI, beside what the feed-forward layers and biases add: \"logit\" in "
                   "JSON) or leave-one-out (each prompt piece taken out, how much the written piece's "
                   "log-probability falls), under \"attribution\" in JSON.")
@click.option("--contrast", metavar="PIECE",
              help="With --method alti-logit: explain the difference of each written piece's logit and PIECE's, why "
                   "it wrote that and not PIECE (a piece as \"alternatives\" name it, \" London\" or \"ĠLondon\").")
@click.option("--chat", is_flag=True,
              help="Put PROMPT in the model's chat template (its tokenizer_config.json's chat_template, a GGUF's "
                   "tokenizer.chat_template), as the user's message, before it writes: rendered by jinja2 in its "
                   "sandbox, which runs the template and nothing else.")
@click.option("--file", "input_file", metavar="FILE", type=TextParam("--file"), shell_complete=complete_path,
              help="Prompts one a line (\"-\": standard input), as batch reads sentences: JSON Lines out, one "
                   "document a line with its \"line\", in input order.")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="With --file: worker processes (at most one a core), a prompt each at a time; the output keeps "
                   "input order, and each line's text is the same as in one process.")
@click.option("--scheduler", metavar="ADDRESS", envvar="ATTNCLI_DASK_SCHEDULER", show_envvar=True,
              callback=scheduler_address,
              help="With --file: a Dask scheduler (tcp://host:8786) whose workers write, in input order; needs pip "
                   "install 'dask[distributed]'.")
@model_options
@png_option
@output_options
def generate(sentence, new, sample, heat, top_k, top_p, draws, method, contrast, chat, input_file, jobs, scheduler,
             source, out):
    """A decoder (--model) writes after PROMPT, up to --max-new-tokens pieces, the likeliest
    each time (or drawn, --sample); on a terminal the text shows as it grows. Then, for each
    piece it wrote, the attention of the step that chose it over every position before it
    (--layer, default the last; --head, default the mean of the heads), its weight on the
    first position apart (the attention sink), the prompt's pieces it weighed most, its
    log-probability and the likeliest pieces at its step. PROMPT absent or "-": one prompt
    per line of standard input.

    \b
    Examples:
      attncli generate "The capital of France is" --model llama3.2:1b --max-new-tokens 5
      attncli generate "Once upon a time" --model gpt2 --sample --temperature 0.8 --seed 7
      attncli generate "The earth is like an orange" --model gpt2 --layer 3 --head 5 --json | jq .top
      attncli generate "The capital of France is" --model gpt2 --max-new-tokens 1 --method alti-logit --contrast " London"
      attncli generate --file prompts.txt --model gpt2 --sample --seed 7 --jobs 2 > written.jsonl
    """
    if source.model is None:
        raise click.UsageError("generate runs a decoder: give --model NAME|DIR (a GPT-2 or Llama-family model)")
    # --temperature and --seed are the sampling's, named apart from the attention's own (which a model refuses)
    given = [name for name, value in (("--temperature", heat), ("--top-k", top_k), ("--top-p", top_p),
                                      ("--seed", draws)) if value is not None]
    if given and not sample:
        raise click.UsageError(f"{given[0]} sets how a piece is drawn; add --sample (without it, the likeliest piece "
                               "is taken)")
    if contrast is not None and method != "alti-logit":
        raise click.UsageError("--contrast sets the logit --method alti-logit explains against; add --method "
                               "alti-logit")
    sampling = Sampling(heat or 1.0, top_k, top_p, draws or 0) if sample else Sampling()
    if input_file is None and click.get_current_context().get_parameter_source("scheduler").name == "ENVIRONMENT":
        scheduler = None  # ATTNCLI_DASK_SCHEDULER is for runs over a file: one prompt runs here
    _check_lines(sentence, input_file, jobs, scheduler, out)
    prompts = read_sentences(sentence, "give a PROMPT argument") if input_file is None else None
    model = source.load()
    if not model.model.causal:
        raise click.UsageError(f"{model.name} is an encoder: it reads a sentence both ways, and writes none; give a "
                               "decoder with --model (a GPT-2 or Llama-family model)")
    foil = None if contrast is None else contrast_of(model.model, contrast)
    if chat:
        has_template(model.model)  # refused once, not on every line of a file
    if input_file is not None:  # a corpus of prompts, as batch runs one: a prompt a task, each line's seed the run's
        asked = Asked(new, sampling, method, foil, chat)
        return corpus_lines(input_file, jobs, scheduler, source, Options(), size=1, loaded=model, generation=asked)
    said = Growing() if out.fmt == "table" and sys.stdout.isatty() and len(prompts) == 1 else None
    docs = compute_all(prompts, lambda text: generate_doc(text, model, new, sampling, said=said, chat=chat,
                                                               method=method, contrast=foil))
    if said is not None:
        sys.stdout.write("\n")
    if chat:  # said once every prompt is in it: a template refused says so alone
        click.echo(f"attncli: note: each prompt was put in {visible(model.name)}'s chat template first, as the "
                   "user's message (\"chat\" in JSON)", err=True)
    emit(docs, out, "generate_view")


def _check_lines(sentence, input_file, jobs: int, scheduler, out) -> None:
    """--file's options, refused where they do not go together."""
    if input_file is None:
        if jobs > 1 or scheduler is not None:
            raise click.UsageError("--jobs and --scheduler share out the prompts of --file; add --file FILE")
        return
    if sentence is not None:
        raise click.UsageError("give PROMPT or --file FILE, not both")
    asked_table = click.get_current_context().params.get("fmt") == "table"  # said, not a terminal's default
    if asked_table or out.svg or out.html or out.png:
        raise click.UsageError("--file writes JSON Lines, a document a prompt; leave out --format table, --svg, "
                               "--html and --png")


class Growing:
    """The continuation on a terminal as it grows: what each piece adds to the text shown
    (control characters made visible; where a piece changes what was shown, as a byte that
    completes a character does, the text again on a line of its own)."""

    def __init__(self):
        self.shown = ""

    def __call__(self, text: str) -> None:
        seen = visible(text)
        sys.stdout.write(seen[len(self.shown):] if seen.startswith(self.shown) else "\n" + seen)
        sys.stdout.flush()
        self.shown = seen
