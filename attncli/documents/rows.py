"""Chosen rows of a whole text's attention through a trained model (scores --file --model
--rows): the text read as one sequence (corpus.document's Text, up to the model's
positions), its pass run a block of query rows at a time (block_rows), and of the layer
shown only the chosen rows kept, every head's (H, K, T); no layer after it is run, and
nothing T x T is ever held. The document is a sentence's scores document cut to those
rows: `rows` their positions, `tokens` all T pieces, `scores` and `weights` (K, T), `top`
a row, and the same for every head under `heads`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from attncli import attention
from attncli.corpus.document import Text, block_rows
from attncli.encoder import Options
from attncli.errors import InputError
from attncli.models.encoder import Trained
from attncli.system import limits

_LAST = re.compile(r"last(?::([0-9]+))?")
_POSITIONS = re.compile(r"[0-9]+(?:,[0-9]+)*")


@dataclass(frozen=True)
class Rows:
    """Which rows --rows asks for: the last `last` of the text, or the positions `at`
    (from 0, as given, a position given twice shown twice)."""

    last: int = 0
    at: tuple[int, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> Rows:
        """`last`, `last:K` (K >= 1) or `I,J,...`; ValueError, saying what it takes, for anything else."""
        spec = spec.strip()
        last = _LAST.fullmatch(spec)
        if last:
            k = 1 if last.group(1) is None else int(last.group(1))
            if k >= 1:
                return cls(last=k)
        elif _POSITIONS.fullmatch(spec):
            return cls(at=tuple(int(i) for i in spec.split(",")))
        raise ValueError(f"{spec!r} is not rows: give last, last:K (the last K rows, K from 1) or positions "
                         "I,J,... (from 0)")

    def positions(self, T: int) -> list[int]:
        """The positions of a text of T pieces; InputError for one past its end."""
        if self.last:
            return list(range(max(T - self.last, 0), T))
        past = [i for i in self.at if i >= T]
        if past:
            raise InputError(f"--rows {past[0]} is out of range: the document is {T:,} word pieces long "
                             f"(positions 0 to {T - 1:,})")
        return list(self.at)


class ChosenRows:
    """The consumer of the pass (models.layers.Consumer) that keeps, of layer `l` (from
    0), the scores and weights of the query rows `positions` (K,) as each block hands
    them over: (H, K, T) each. It reads no further than that layer's scores and weights."""

    def __init__(self, positions: list[int], l: int, heads: int, T: int,
                 progress: Callable[[int], None] = lambda rows: None):
        self.positions, self.through, self.progress = np.asarray(positions, dtype=np.int64), l, progress
        self.weights_only = True  # of layer l, its scores and weights alone
        self.scores = np.empty((heads, len(positions), T), attention.working())  # (H, K, T)
        self.weights = np.empty_like(self.scores)  # (H, K, T)

    @staticmethod
    def bytes(T: int, K: int, heads: int) -> int:
        """What it keeps, float64: two (H, K, T) arrays."""
        return 8 * 2 * heads * K * T

    def begin(self, X: np.ndarray) -> None:
        pass

    def rows(self, l: int, start: int, steps: dict[str, np.ndarray]) -> None:
        R = steps["weights"].shape[-2]
        if l == self.through:
            here = (self.positions >= start) & (self.positions < start + R)  # (K,)
            self.scores[:, here] = steps["scores"][:, self.positions[here] - start]  # (H, k, T)
            self.weights[:, here] = steps["weights"][:, self.positions[here] - start]
        self.progress(R)

    def layer(self, l: int, X: np.ndarray, steps: dict[str, np.ndarray]) -> None:
        pass

    def end(self, X: np.ndarray) -> None:
        pass


def _mask_keys(trained: Trained, T: int) -> dict:
    """A decoder's mask as a sentence's document says it (models.encoder.mask_keys), from
    its last row alone: causal, and within a window W where that row sees fewer than T."""
    model = trained.model
    if not model.causal:
        return {}
    seen = int((~model.family.mask(T, model.config, slice(T - 1, T))).sum())  # the last row's, (1, T)
    return {"mask": "causal"} if seen >= T else {"mask": "causal+window", "window": seen}


def _tops(tokens: list[str], weights: np.ndarray, positions: list[int], hidden: np.ndarray | None,
          opts: Options) -> list[list[dict]]:
    """Each chosen row's top attended in `weights` (K, T), as a sentence's document has
    them: its own position left out unless include_self, masked positions always."""
    tops = []
    for k, i in enumerate(positions):
        exclude = None if opts.include_self else i
        places = attention.top_attended(weights[k], opts.top_k, exclude, None if hidden is None else hidden[k])
        tops.append([{"token": tokens[j], "index": j, "weight": float(weights[k, j])} for j in places])
    return tops


def rows_doc(text: str, trained: Trained, spec: Rows, opts: Options = Options(), *, where: str = "standard input",
             progress: Callable[[int, int], None] = lambda done, total: None) -> dict:
    """The scores document of the rows `spec` of `text` read whole as one sequence through
    `trained`, at its layer and head shown, a block of query rows at a time. Refused before
    the pass where the text has more pieces than the model's positions, a position is past
    its end, or a block and what is kept cannot fit in memory. progress(rows done, rows in
    all) is told after each block of each layer the pass runs."""
    t = Text.of(text, trained)
    model, config, T = trained.model, trained.model.config, len(t.ids)
    positions = spec.positions(T)
    R = block_rows(T, trained)
    K, H, l = len(positions), config.heads, trained.layer - 1
    limits.require(ChosenRows.bytes(T, K, H) + 130 * 2 * (H + 1) * K * T,  # and each number listed, as cell_bytes
                   f"the {K:,} rows of {T:,} word pieces, every head's", "ask for fewer --rows")
    total, done = (l + 1) * T, [0]

    def told(rows: int) -> None:
        done[0] += rows
        progress(done[0], total)

    def run() -> ChosenRows:
        done[0] = 0  # a float32 pass attention.in_range runs again is counted again from the start
        kept = ChosenRows(positions, l, H, T, told)
        model.family.run(t.ids, model.weights, config, kept, rows=R)
        return kept

    kept = attention.in_range(run)[0]
    pieces = t.pieces
    tokens = list(pieces.pieces)
    hidden = None if t.hidden is None else np.stack([t.hidden(slice(i, i + 1))[0] for i in positions])  # (K, T)
    shown = None if trained.head is None else trained.head - 1
    scores = kept.scores.mean(axis=0) if shown is None and H > 1 else kept.scores[shown or 0]  # (K, T)
    weights = kept.weights.mean(axis=0) if shown is None and H > 1 else kept.weights[shown or 0]  # (K, T)
    return {
        "command": "scores",
        "document": where,
        "tokens": tokens,
        "rows": positions,
        "vectors": {"name": trained.name, "dim": trained.dim, "words": trained.size},
        "model": trained.about(),
        "precision": kept.weights.dtype.name,
        "layer": trained.layer,
        "head": trained.head,
        "mask": opts.mask,
        **_mask_keys(trained, T),
        "special": list(pieces.special),
        "offsets": [list(o) for o in pieces.offsets],
        "scale": float(attention.default_scale(config.d_head)),
        "temperature": opts.temperature,
        "include_self": opts.include_self,
        "rows_a_block": R,
        "scores": scores.tolist(),
        "weights": weights.tolist(),
        "top": _tops(tokens, weights, positions, hidden, opts),
        "heads": [{"scores": om.tolist(), "weights": al.tolist(), "top": _tops(tokens, al, positions, hidden, opts)}
                  for om, al in zip(kept.scores, kept.weights)],
    }
