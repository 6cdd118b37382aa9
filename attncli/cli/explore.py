"""explore: a sentence's attention in an interactive terminal app (textual)."""

from __future__ import annotations

import signal
import sys

import click
from attncli.cli import ExitStatus, Terminated, ending_signals
from attncli.cli.options import (TextParam, attention_options, model_options, output_path, refuse_overwriting_inputs,
                                 vectors_options)
from attncli.cli.output import say_now
from attncli.cli.sections import Command
from attncli.errors import InputError
from attncli.system.writing import write_whole


@click.command(cls=Command, short_help="move through a sentence's attention with the keyboard")
@click.argument("sentence", type=TextParam("the sentence"))
@click.option("--export", type=click.Path(), callback=output_path("svg", (".svg",)),
              metavar="FILE.svg", help="Where the p key saves the screen, as an SVG picture.")
@vectors_options
@model_options(head=False)
@attention_options(top=False)
def explore(sentence, export, source, opts):
    """An interactive view of SENTENCE's attention in the terminal: the weights as the
    heatmap scores draws, with a cursor (arrow keys), and beside it (below it in a narrow
    window) the cursor's cell (its raw score, scaled score and weight, each with its
    formula), its row's weights ranked, and its context vector. Keys change what is
    computed: r raw scores, + and - the temperature, s the scale, m the mask, h and H the
    head, a the heads' mean, l and L the layer (with --model), x explain (the row through
    X, Q, scores, weights, Z), e edit the sentence, c compare with another, p save the
    screen (--export), PgUp and PgDn scroll, ? the keys, q quit. Every number is computed
    by the same functions as scores, context, explain and compare. Needs a terminal, and
    textual: pip install textual.

    \b
    Examples:
      attncli explore "The earth is like an orange"
      attncli explore "I sat on the bank of the river" --model minilm
      attncli explore "The earth is like an orange" --qkv proj.npz --mask self --export screen.svg
    """
    try:
        from attncli import explore as app  # textual, the explore extra's, at explore's top
    except ImportError:
        raise InputError("explore needs textual: pip install textual") from None
    refuse_overwriting_inputs({"--export": export})
    vectors = source.load()
    state = app.State(sentence, opts=opts, layer=vectors.layer if source.model else None)
    # every way out of the app goes through textual's own exit, which gives the terminal back:
    # its settings, the main screen, the mouse; a signal ends it with the status it ends a run with
    ends = {signal.SIGINT: ExitStatus.INTERRUPTED, **ending_signals()}
    explorer = app.Explorer(vectors, state, export=export,  # the sentence's errors come here, before the app
                            write=lambda path, svg: write_whole(path, lambda f: f.write(svg.encode("utf-8"))),
                            ends=ends)
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        raise InputError("explore needs a terminal, on stdin and stdout; for a pipe or a file, use "
                         "attncli scores (or --json)")
    say_now()  # a --qkv file's settings: before the app takes the screen
    previous = {signum: signal.getsignal(signum) for signum in (*ends, signal.SIGCONT)}  # as textual found them
    try:
        explorer.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if explorer.failure is not None:
        raise explorer.failure  # a bug of the app's: one line, as any command's bug
    if explorer.return_code == ExitStatus.INTERRUPTED:
        raise KeyboardInterrupt  # said and ended as every command's Ctrl-C (exit 130)
    if explorer.return_code in ends.values():
        raise Terminated(ExitStatus(explorer.return_code))
