"""The quantization command: one model's attention under two copies of its weights (a
quantized GGUF against its original), layer by layer and head by head
(documents/drift.py's document)."""

from __future__ import annotations

import dataclasses

import click
from attncli.cli.inputs import compute_all, read_sentences
from attncli.cli.options import TextParam, model_options, output_options, png_option, sentence_argument
from attncli.cli.output import emit
from attncli.cli.sections import Command
from attncli.documents.drift import drift_doc


@click.command(cls=Command, short_help="how far quantization moves a model's attention, head by head")
@sentence_argument
@click.option("--against", metavar="NAME|DIR", required=True, type=TextParam("--against"),
              help="The model to hold --model's attention against, as --model names one: the same model in another "
                   "precision or quantization (its F16 or F32 GGUF file, its safetensors folder, another tag of "
                   "ollama's store). Both must split the sentence into the same pieces.")
@model_options(layer=False, head=False)
@png_option
@output_options
def quantization(sentence, against, source, out):
    """How far --model's attention over SENTENCE moves from --against's, the same model
    under other weights: for every layer and head the largest and the mean change of a
    weight |alpha - beta| (over the cells a row may attend) and the Jensen-Shannon
    divergence of each row (in nats, 0 to ln 2; its mean and largest), and the one weight
    that moved most. SENTENCE absent or "-": one sentence per line of standard input.

    \b
    Examples:
      attncli quantization "The earth is like an orange" --model llama3.2:1b --against llama3.2:1b-instruct-fp16
      attncli quantization "The earth is like an orange" --model model-Q4_K_M.gguf --against model-F16.gguf
      attncli quantization "The bank raised interest rates" --model q8.gguf --against ./folder --json | jq .overall
      attncli quantization "The earth is like an orange" --model q4.gguf --against f16.gguf --png drift.png
    """
    if source.model is None:
        raise click.UsageError("quantization holds one model's attention against another copy of it: give --model "
                               "NAME|DIR and --against NAME|DIR")
    sentences = read_sentences(sentence)
    model = source.load()
    other = dataclasses.replace(source, model=against, revision=None).load()
    docs = compute_all(sentences, lambda text: drift_doc(text, model, other))
    emit(docs, out, "quantization_view")
