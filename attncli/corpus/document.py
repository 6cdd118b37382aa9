"""A whole text through a trained model as one sequence (stats --document): the text
tokenized whole, up to the model's positions, and each layer's attention computed a block
of query rows at a time (a family's run(..., rows=R)), each block folded into stats.py's
sums (observe_rows) and let go, so that nothing T x T is held: not the weights, not the
scores, not the mask. The sums are those stats gives a sentence, with each head's
positional profiles; beside them the same text under uniform attention and with its words
shuffled, as stats' baselines of a line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from attncli import attention
from attncli.corpus import stats, survey
from attncli.models.encoder import Trained
from attncli.system import limits
from attncli.visible import count

ROWS = 256  # query rows a block at most: a block's products large enough to keep the BLAS busy
SHUFFLED_LINE = 1  # the line number a document's words are shuffled as (survey.shuffle): a one-line file's own


@dataclass(frozen=True)
class Text:
    """A text's word pieces as its sums need them: its pieces as numbers (equal pieces,
    equal numbers), which are punctuation and which an encoder's markers, and the model's
    mask, a block's rows at a time."""

    ids: np.ndarray  # (T,) the model's piece ids, what the pass reads
    numbers: np.ndarray  # (T,) the pieces as numbers, as the detection patterns compare them
    punct: np.ndarray  # (T,) bool
    cls: np.ndarray  # (T,) bool
    sep: np.ndarray  # (T,) bool
    hidden: Callable[[slice], np.ndarray] | None  # rows -> (R, T), True where a row may not attend; None: nowhere
    repeats: bool  # whether a piece repeats: the duplicate-token and induction scores are over such texts
    pieces: object = None  # models.files.Pieces: the pieces' strings, markers and offsets, as a document lists them

    @classmethod
    def of(cls, text: str, trained: Trained, what: str = "document") -> Text:
        """`text`'s word pieces, refused (naming it `what`) when there are none or more than
        the model's positions hold."""
        pieces = trained.pieces(text, what)
        model, T = trained.model, len(pieces.ids)
        marks = trained.markers_of(pieces)
        hidden = (lambda rows: model.family.mask(T, model.config, rows)) if model.causal else None
        numbers = survey.numbered(pieces.pieces)
        return cls(np.asarray(pieces.ids), numbers, survey.punctuation(pieces.pieces), *marks, hidden,
                   repeats=len(np.unique(numbers)) < T, pieces=pieces)

    def allowed(self, rows: slice) -> np.ndarray:
        """Where the query rows `rows` may attend. (R, T)"""
        T = len(self.ids)
        if self.hidden is None:
            return np.ones((len(range(T)[rows]), T), dtype=bool)
        return ~self.hidden(rows)

    def observe(self, alpha: np.ndarray, start: int) -> stats.Observation:
        """The sums, profiles among them, of the rows start .. start + R - 1 of weights alpha (..., R, T)."""
        rows = slice(start, start + alpha.shape[-2])
        return stats.observe_rows(alpha, start, self.allowed(rows), self.numbers, self.punct, self.cls, self.sep,
                                  self.repeats, profiles=True)


class RowSums:
    """The consumer of a document's pass (models.layers.Consumer): each block of each
    layer's rows folded into that layer's sums as it comes (Text.observe) and let go;
    `progress(rows done)` told after each block."""

    def __init__(self, text: Text, layers: int, progress: Callable[[int], None] = lambda rows: None):
        self.text, self.progress = text, progress
        self.sums: list[dict[str, stats.Compensated]] = [{} for _ in range(layers)]  # a layer's, (H,) or (H, K)
        self.counts: dict[str, int] = {}  # the rows', counted on the first layer
        self.through = layers - 1  # every layer's attention, nothing of the last layer's output (every_layer)
        self.weights_only = True  # of the last layer, its weights alone: not its values or context vectors
        self.seen_only = True  # a block's keys that its rows see alone: the others add nothing to a sum

    @staticmethod
    def bytes(T: int, rows: int, heads: int) -> int:
        """What folding a block of `rows` rows takes beside the block, float64: four (H, R, T)
        arrays (the logarithms, and a product at a time with them, the distances or a
        pattern), and eight (R, T) ones (the distances and their buckets, the mask's rows,
        a pattern)."""
        return 8 * (4 * heads * rows * T + 8 * rows * T)

    def begin(self, X: np.ndarray) -> None:
        pass

    def rows(self, l: int, start: int, steps: dict[str, np.ndarray]) -> None:
        seen = self.text.observe(steps["weights"], start)  # (H, R, T) -> (H,) and (H, K) sums
        for name, values in seen.sums.items():
            self.sums[l].setdefault(name, stats.Compensated(values.shape)).add(values)
        if l == 0:
            for name, n in seen.counts.items():
                self.counts[name] = self.counts.get(name, 0) + n
        self.progress(steps["weights"].shape[-2])

    def layer(self, l: int, X: np.ndarray, steps: dict[str, np.ndarray]) -> None:
        pass

    def end(self, X: np.ndarray) -> None:
        pass

    def observation(self) -> stats.Observation:
        """The text's sums, every layer's: (L, H) each, a profile's (L, H, K)."""
        names = self.sums[0]
        return stats.Observation({name: np.stack([layer[name].value for layer in self.sums]) for name in names},
                                 {"sentences": 1, "tokens": len(self.text.ids), **self.counts})


class Counted:
    """The rows of every pass done, told to progress(done, total) as each block is."""

    def __init__(self, total: int, progress: Callable[[int, int], None]):
        self.total, self.progress, self.done = total, progress, 0

    def __call__(self, rows: int) -> None:
        self.done += rows
        self.progress(self.done, self.total)

    def again(self, run: Callable[[], stats.Observation]) -> Callable[[], stats.Observation]:
        """run, counting its rows from where they were each time it runs (a float32 pass
        attention.in_range runs again in float64 is counted once)."""
        start = self.done

        def counted() -> stats.Observation:
            self.done = start
            return run()

        return counted


def block_rows(T: int, trained: Trained) -> int:
    """The query rows a block of the pass holds: ROWS, or fewer where a block's pass and
    sums would take more than half the memory available; refused where a block of one row's
    cannot fit."""
    family, config = trained.model.family, trained.model.config

    def need(R: int) -> int:
        return family.run_bytes(T, config, R) + RowSums.bytes(T, R, config.heads)

    R = min(T, ROWS)
    while R > 1 and need(R) > limits.available() // 2:
        R //= 2
    limits.require(need(R), f"{trained.name}'s forward pass over a document of {T:,} word pieces, "
                            f"{count(R, 'row')} at a time", "give a shorter document")
    return R


def observed(text: Text, trained: Trained, R: int, progress: Callable[[int], None]) -> stats.Observation:
    """The text's sums through the model, a block of R rows at a time."""
    model = trained.model
    sums = RowSums(text, model.config.layers, progress)
    model.family.run(text.ids, model.weights, model.config, sums, rows=R)
    return sums.observation()


def uniform(text: Text, R: int) -> stats.Observation:
    """The text's sums under uniform attention, each row spread evenly over the positions it
    may attend to, a block of R rows at a time: one layer of one head."""
    sums, T = RowSums(text, 1), len(text.ids)
    for start in range(0, T, R):
        sums.rows(0, start, {"weights": stats.uniform(text.allowed(slice(start, start + R)))})  # (1, 1, R, T)
    seen = sums.observation()
    return stats.Observation({name: v[0] for name, v in seen.sums.items()}, seen.counts)  # (1, 1), (1, 1, K)


def summary(text: str, trained: Trained, name: str, *, shuffled: bool = True, seed: int = 0,
            precision: str = "float64", progress: Callable[[int, int], None] = lambda done, total: None) -> dict:
    """stats' document of `text` read as one sequence through `trained` (a record per head,
    with its profiles and whether it is a sink head), beside uniform attention's and, with
    `shuffled`, its words shuffled as stats shuffles a line (the same seed and line number
    as a one-line corpus's). Each text is refused before any pass where it has more pieces
    than the model's positions, or where a block of a row cannot fit in memory. In float32,
    a pass whose numbers leave its range runs again in float64 (attention.in_range), and
    the records count it. progress(rows done, rows in all) is told as the blocks go."""
    texts = {None: Text.of(text, trained)}
    if shuffled:
        texts["shuffled"] = Text.of(survey.shuffle(text, seed, SHUFFLED_LINE), trained,
                                    "document with its words shuffled (--no-shuffled leaves out that baseline)")
    blocks = {key: block_rows(len(t.ids), trained) for key, t in texts.items()}
    counted = Counted(trained.model.config.layers * sum(len(t.ids) for t in texts.values()), progress)
    seen, partial = {}, stats.Partial(lines=1)
    with attention.precision(precision):
        for key, t in texts.items():
            seen[key], again = attention.in_range(
                counted.again(lambda t=t, R=blocks[key]: observed(t, trained, R, counted)))
            partial.redone = max(partial.redone, int(again))
    seen["uniform"] = uniform(texts[None], blocks[None])
    for key in (None, "uniform", "shuffled"):  # stats' order of the baselines
        if key in seen:
            partial.add(key, [seen[key]])
    doc = survey.summary(partial, name, "head", trained, precision)
    records = [{**r, "sink": stats.is_sink(r["first"])} for r in doc["records"]]
    return {**doc, "records": records, "document": True, "rows_a_block": blocks[None], "sink_threshold": stats.SINK}
