"""rnn: the recurrent network that attention replaced, beside attention."""

from __future__ import annotations

import click
from attncli import rnn as recurrent  # `rnn` is the command below
from attncli.cli.inputs import compute_all, read_sentences
from attncli.cli.options import keep_punct_option, oov_option, output_options, sentence_argument, vectors_options
from attncli.cli.output import emit, warn
from attncli.cli.sections import Command
from attncli.documents.rnn import rnn_doc
from attncli.encoder import Options
from attncli.learning import projections

MOST_HIDDEN = recurrent.MOST_HIDDEN


@click.command(cls=Command, short_help="the recurrent network attention replaced, beside attention")
@sentence_argument
@click.option("--hidden", type=click.IntRange(min=1, max=MOST_HIDDEN), metavar="N",
              help=f"Size N of the hidden state, at most {MOST_HIDDEN:,}. Default: 32, or what --weights holds.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="Seed of the RNN's random weights (uniform on ±1/sqrt(N), as PyTorch's nn.RNN).")
@click.option("--weights", "weights_file", type=click.Path(dir_okay=True), metavar="FILE.npz",
              help="Read W_hx (N x d), W_hh (N x N) and b_h (N) from a .npz instead.")
@vectors_options
@keep_punct_option
@oov_option
@output_options
def rnn(sentence, hidden, seed, weights_file, source, keep_punct, oov, out):
    """An Elman RNN, h_t = tanh(W_hx x_t + W_hh h_(t-1) + b_h), folded over SENTENCE from
    h0 = 0 as reduce(lambda h, x: tanh(W_hx @ x + W_hh @ h + b_h), inputs, h0): each
    state's norm, and how strongly each input still moves the final state (the Frobenius
    norm of d h_T / d x_i, exact, by the chain rule), beside the last token's attention
    over the same inputs. The RNN's influence fades with distance, step by step; attention
    reaches every position in one step.

    \b
    Examples:
      attncli rnn "The books that the professor recommended during the lecture are expensive"
      attncli rnn "The earth is like an orange" --hidden 8 --seed 1 --json | jq '.influence'
    """
    sentences = read_sentences(sentence)
    vectors = source.load()
    if weights_file:
        weights = projections.load_rnn_weights(weights_file, vectors.dim)
        if hidden is not None and hidden != len(weights["b_h"]):
            raise click.UsageError(f"--hidden {hidden} does not match {weights_file}, whose N is {len(weights['b_h'])}")
    else:
        weights = recurrent.init_weights(vectors.dim, hidden or 32, seed)
    opts = Options(keep_punct=keep_punct, oov=oov)
    origin = {"path": weights_file} if weights_file else {"seed": seed}
    docs = compute_all(sentences, lambda text: rnn_doc(text, vectors, opts, weights=weights, origin=origin, warn=warn))
    emit(docs, out, "rnn_view")
