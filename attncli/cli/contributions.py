"""The contributions command: how much each token's representation is made of each other
token's, by one of the measures of context mixing (mixing/documents.py's document, contributions.py's
math), at every layer or at one."""

from __future__ import annotations

import click
from attncli.cli.inputs import compute_all, note_large_json, read_sentences
from attncli.mixing import contributions as measures
from attncli.cli.options import (CONTRIBUTIONS_FIELDS, attention_options, fields_option, model_options, output_options,
                                 png_option, sentence_argument, vectors_options)
from attncli.cli.output import emit
from attncli.cli.sections import Command
from attncli.errors import OptionError
from attncli.words.encoder import ON_VECTORS

HEAD_HELP = ("With --model and --method raw, rollout or norm: one head's measure, from 1 (of each layer shown). "
             "Default: the layer's, over every head (raw and rollout their mean weights, norm their summed "
             "vectors).")


@click.command(cls=Command, short_help="how much each token's representation is made of each other token's")
@sentence_argument
@click.option("--method", "methods", type=click.Choice(measures.METHODS), multiple=True, default=["raw"],
              show_default=True, metavar="METHOD",
              help="The measure (given several times, a document of each, sentence by sentence, and the --html "
                   "page's choice among them): raw (the attention weights), rollout (raw rolled out), norm (the size of what j "
                   "sends i, ||a_ij f(x_j)||), norm-res (with the residual), norm-res-ln (and the first layer norm), "
                   "globenc (and the second), alti, value-zeroing, or leave-one-out (the model run again without "
                   "each token). Over word vectors: " + ", ".join(ON_VECTORS) + ".")
@click.option("--rollout/--no-rollout", "rolled", default=None,
              help="Roll each layer's matrix out over the layers before it (Abnar & Zuidema 2020), or not. "
                   "Default: as the method's paper does, rolled out for " + ", ".join(measures.ROLLED_BY_DEFAULT)
                   + ", not for the others.")
@click.option("--erasure", type=click.Choice(measures.ERASURES), default=None,
              help="With --method leave-one-out: take each token away (remove) or put the model's mask token in "
                   "its place (mask). Default: remove.")
@vectors_options
@model_options(every=True, head=HEAD_HELP)
@attention_options
@png_option
@fields_option(CONTRIBUTIONS_FIELDS)
@output_options
def contributions(sentence, methods, rolled, erasure, source, opts, out):
    """How much each token's representation is made of each other token's, in SENTENCE: a
    T x T matrix at each layer (or at the one --layer), row i the receiving token, by the
    --method chosen; under each, every token's top contributors and its context-mixing
    ratio, the share of its row that comes from the other tokens. With --model, every
    measure; over word vectors, those that need no residual stream (raw, rollout, norm,
    value-zeroing). Leave-one-out runs the whole model once without each token, and adds
    each token's effect on the sentence. SENTENCE absent or "-": one sentence per line of
    standard input.

    \b
    Examples:
      attncli contributions "The earth is like an orange" --model minilm --method alti
      attncli contributions "The earth is like an orange" --model minilm --method norm-res-ln --layer 2
      attncli contributions "The earth is like an orange" --model minilm --method globenc --no-rollout
      attncli contributions "The earth is like an orange" --model minilm --method leave-one-out --erasure mask
      attncli contributions "The earth is like an orange" --method norm --json | jq '.mixing_ratio_mean'
      attncli contributions "The earth is like an orange" --model minilm --method raw --method alti --html m.html
    """
    methods = tuple(dict.fromkeys(methods))  # each once, in the order given
    _check(methods, rolled, erasure, source)
    sentences = read_sentences(sentence)
    try:
        vectors = source.load()
    except OptionError as e:  # --layer or --head beyond the model's: the command line's mistake
        raise click.UsageError(str(e)) from None
    shown = sum(1 if source.layer or method == "leave-one-out" or not source.model else vectors.layers
                for method in methods)
    note_large_json(sentences, vectors, opts, {"contributions": shown}, out,
                    "--layer L shows one layer, and --fields leaves keys out (--fields tokens,top,mixing_ratio "
                    "writes no matrix)" if source.model else "--fields leaves keys out (--fields "
                    "tokens,top,mixing_ratio writes no matrix)")
    from attncli.mixing.documents import contributions_doc  # the model's parts: not imported for --help

    docs = compute_all(sentences, lambda text: [contributions_doc(
        text, vectors, opts, method=method, layer=source.layer, head=source.head, rolled=rolled,
        erasure=erasure or "remove") for method in methods],
        said=lambda doc: [f"{doc['method']}: {note}" if len(methods) > 1 else note for note in doc["notes"]])
    emit(docs, out, "contributions_view")


def _check(methods: tuple[str, ...], rolled: bool | None, erasure: str | None, source) -> None:
    """The options that do not go together, refused before anything is read or loaded."""
    from attncli.mixing.documents import method_problem  # the model's parts: not imported for --help

    for method in methods:
        problem = method_problem(method, measures.METHODS if source.model else ON_VECTORS, source.head)
        if problem:
            raise click.UsageError(problem)
        _check_one(method, rolled, source)
    if erasure is not None and "leave-one-out" not in methods:
        raise click.UsageError(f"--erasure chooses how leave-one-out takes a token away; it goes with --method "
                               f"leave-one-out, not {' and '.join(methods)}")


def _check_one(method: str, rolled: bool | None, source) -> None:
    if method == "leave-one-out" and source.layer is not None:
        raise click.UsageError("leave-one-out measures the whole model, not a layer: leave --layer out")
    if method == "leave-one-out" and rolled is not None:
        raise click.UsageError("leave-one-out measures the whole model at once, with no layers to roll out; leave "
                               "out --rollout and --no-rollout")
    if method == "rollout" and rolled is False:
        raise click.UsageError("--method rollout is raw attention rolled out; --no-rollout of it is --method raw")
