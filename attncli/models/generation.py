"""A decoder writing: the pieces it generates after a prompt, one at a time, each with the
attention of the step that chose it.

The prompt runs through every layer once (its keys and values cached, layers.Cache); then
each step runs the one new piece through every layer, its query against every cached key,
and the LM head over its final state gives the scores z of the piece after it:

    p = softmax(z / temperature)       the next piece's distribution (temperature 1: z's own)
    greedy: the piece of the largest z (ties: the smaller id, as torch's argmax)
    sampled: among the top_k likeliest, then the fewest likeliest whose p sum to top_p at
             least, p renormalized over them, the piece where a uniform draw u of the
             run's generator (numpy's PCG64, seeded) falls in their running sum

The step that chose piece k is the one whose query is the position before it: the prompt's
last for the first piece, piece k - 1's for the others. Its attention over every position
before piece k is what each piece records, every layer's and head's (L, H, P + k).
Generation stops at one of the model's end-of-sequence pieces (kept, as transformers keeps
it) or after the pieces asked for.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from attncli import attention, ranking
from attncli.errors import ModelError, OptionError
from attncli.models import layers
from attncli.system import limits


@dataclass(frozen=True)
class Sampling:
    """How a step picks its piece: greedy (temperature None), or sampled."""

    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0


@dataclass
class Step:
    """One generated piece: its id, its log-probability under the model (temperature 1),
    the likeliest pieces at its step (ids and log-probabilities, best first, the chosen
    among them where it is), and the chosen step's attention (L, H, P + k)."""

    id: int
    logprob: float
    likeliest: list[tuple[int, float]]
    weights: np.ndarray


@dataclass
class Generation:
    prompt: np.ndarray  # (P,) the prompt's ids, its markers with it
    steps: list[Step] = field(default_factory=list)
    stop: str = "length"  # "eos": an end-of-sequence piece was written; "length": as many as asked

    @property
    def ids(self) -> list[int]:
        return [step.id for step in self.steps]


class _LastRow:
    """The consumer a step's pass runs with (layers.Consumer): each layer's attention of its
    last row (H, T), and that row's final state (D,)."""

    def begin(self, X: np.ndarray) -> None:
        self.rows = []

    def layer(self, l: int, X: np.ndarray, steps: dict[str, np.ndarray]) -> None:
        self.rows.append(steps["weights"][..., -1, :])  # (H, T)

    def end(self, X: np.ndarray) -> None:
        self.final = X[-1]  # (D,)


def choose(z: np.ndarray, sampling: Sampling, rng: np.random.Generator | None, ranked: np.ndarray | None = None) -> int:
    """The next piece's id from the scores z (V,): the largest (greedy), or drawn as the
    module's docstring says; `ranked`, ranking.ranked(z) where the caller has it."""
    ranked = ranking.ranked(z) if ranked is None else ranked  # (V,) ids, the largest first, ties by the smaller id
    if sampling.temperature is None:
        return int(ranked[0])
    p = attention.softmax(z[ranked] / sampling.temperature)  # (V,) in ranked order
    keep = len(p) if sampling.top_k is None else min(sampling.top_k, len(p))
    if sampling.top_p is not None:
        reach = int(np.searchsorted(np.cumsum(p[:keep]), sampling.top_p, side="left")) + 1  # the fewest that reach it
        keep = min(keep, reach)
    kept = p[:keep] / p[:keep].sum()
    u = rng.random()
    return int(ranked[min(int(np.searchsorted(np.cumsum(kept), u, side="right")), keep - 1)])


def generate(model, prompt: np.ndarray, new: int, *, sampling: Sampling = Sampling(), likeliest: int = 5,
             eos: tuple[int, ...] = (), said=None) -> Generation:
    """Up to `new` pieces after the prompt's ids (P,), through `model` (files.Model, a
    decoder), each step's pass cached; said(step), where given, hears each piece as it is
    chosen (a terminal shows the text as it grows)."""
    family, weights, config = model.family, model.weights, model.config
    if not family.CAUSAL:
        raise OptionError(f"{model.name} is an encoder: it reads a sentence both ways, and writes none; give a decoder")
    most, why = config.length_limit()
    if len(prompt) + new - 1 > most:
        raise ModelError(f"the prompt is {len(prompt):,} pieces, and {new:,} more would take the model past its "
                         f"{most:,} positions{why}; ask for at most {max(most - len(prompt) + 1, 0):,} new pieces")
    limits.require(held_bytes(len(prompt), new, model), f"writing {new:,} pieces after a prompt of {len(prompt):,} "
                   f"through {model.name} (its keys and values cached, and each step's attention)",
                   "ask for fewer new pieces, or give a shorter prompt")
    holding = getattr(weights, "holding", None)  # a model's files (weights.Weights), not a dict a caller made
    with holding() if holding is not None else contextlib.nullcontext():
        return _steps(model, np.asarray(prompt), new, sampling, likeliest, eos, said)


def held_bytes(P: int, new: int, model) -> int:
    """What a generation holds beside the weights: the prompt's pass (its family's
    run_bytes), every layer's keys and values of all T = P + new pieces (layers.Cache), and
    each step's rows of every layer and head (L, H, P + k), float64."""
    config, T = model.config, P + new
    cache = 2 * config.layers * T * config.key_heads * config.d_head * attention.working().itemsize
    return model.family.run_bytes(P, config) + cache + 8 * config.layers * config.heads * new * T


def _steps(model, prompt: np.ndarray, new: int, sampling: Sampling, likeliest: int, eos: tuple[int, ...],
           said) -> Generation:
    """generate's steps: the prompt's pass, then a piece at a time."""
    family, weights, config = model.family, model.weights, model.config
    cache = layers.Cache(config.layers, capacity=len(prompt) + new)  # each layer's keys and values made once
    rng = np.random.default_rng(sampling.seed)
    out = Generation(prompt)
    row = _LastRow()
    family.run(out.prompt, weights, config, row, cache=cache)
    for k in range(new):
        z = family.logits(row.final[None], weights, config)[0]  # (V,)
        logp = attention.log_softmax(z)  # (V,)
        ranked = ranking.ranked(z)  # (V,): once a step, for the choice and the likeliest
        i = choose(z, sampling, rng, ranked)
        top = ranked[:likeliest]
        step = Step(i, float(logp[i]), [(int(j), float(logp[j])) for j in top], np.stack(row.rows))  # (L, H, P + k)
        out.steps.append(step)
        if said is not None:
            said(step)
        if i in eos:
            out.stop = "eos"
            break
        if k < new - 1:
            row = _LastRow()
            family.run(np.array([i]), weights, config, row, cache=cache)
    return out


class _Whole:
    """The consumer of a pass over a whole sequence (layers.Consumer): each layer's weights'
    mean over its heads (T, T) where `means` asks for them, up to layer `through` where it is
    given (no layer after it run), else with the final states (T, D); nothing else of the
    pass is kept."""

    def __init__(self, means: bool, through: int | None = None):
        self.means = [] if means else None
        self.through = through  # the last layer read (from 0): none after it is run; None: every layer and the states
        self.weights_only = through is not None

    def begin(self, X: np.ndarray) -> None:
        pass

    def layer(self, l: int, X: np.ndarray, steps: dict[str, np.ndarray]) -> None:
        if self.means is not None:
            self.means.append(steps["weights"].mean(axis=-3))  # (T, T)

    def end(self, X: np.ndarray) -> None:
        self.final = X  # (T, D)


def head_means(model, ids: np.ndarray, layers: int | None = None) -> np.ndarray:
    """The weights over `ids` (T,) of every layer, or of the first `layers`, the mean of its
    heads: (L, T, T); no layer after the last one asked for is run."""
    whole = _Whole(means=True, through=None if layers is None else layers - 1)
    model.family.run(np.asarray(ids), model.weights, model.config, whole)
    return np.stack(whole.means)


def forced(model, ids: np.ndarray, start: int) -> np.ndarray:
    """The log-probability of each piece of `ids` (T,) from `start` on at the position
    before it, in one pass over them as written (teacher forcing): (T - start,)."""
    ids = np.asarray(ids)
    whole = _Whole(means=False)
    model.family.run(ids, model.weights, model.config, whole)
    z = model.family.logits(whole.final[start - 1:-1], model.weights, model.config)  # (T - start, V)
    return attention.log_softmax(z)[np.arange(len(ids) - start), ids[start:]]
