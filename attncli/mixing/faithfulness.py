"""How faithful each measure of context mixing is over a corpus: its agreement with
leave-one-out, sentence by sentence, and the mean of that agreement with a bootstrap
interval. A sentence's agreement is mixing.agreement's: Spearman's rho between the
method's attribution of the sentence's output to each token (its matrix's mean row, the
mean-pooled output of an encoder; its last row, the piece a decoder predicts next) and
leave-one-out's effect of each token on that output (mixing.erase: an encoder's cosine
distance of the mean-pooled last hidden states, a decoder's fall in the log-probability of
the piece it predicts next), at each layer and rolled out over the layers (for raw
attention, Abnar & Zuidema's rollout); and a random attribution's, the baseline.

The corpus runs as stats' does (survey.run in this process or N workers, cluster.run_dask
on a Dask cluster): each chunk of lines gives a Partial holding each sentence's row of
rhos by its line number (every method's L layers and its rolled-out column, and the random
one's: 50 numbers a sentence for a 6-layer model), and the partials are merged as they
come. The summary sorts the rows by line, so its numbers are the same whatever the
chunking and the order the chunks came back in: for every method and column the mean rho
over the sentences where it is defined (a constant vector has no ranks to correlate: rho
is NaN there, that sentence left out of the column and counted), and its percentile
bootstrap interval (contributions.bootstrap_mean, seeded). Nothing T x T outlives its
sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attncli import attention
from attncli.corpus import batch
from attncli.errors import AttncliError, InputError
from attncli.learning import train
from attncli.mixing import contributions, documents as mixing
from attncli.models.encoder import Trained

CHUNK = 8  # lines a task: a MiniLM sentence takes about a second, and the progress bar moves a chunk at a time
LEVEL = 0.95  # of the bootstrap interval
RESAMPLES = 1000
BASELINE = "random"  # a uniform random attribution a sentence: its rolled-out column only
METHODS = (*mixing.COMPARED, BASELINE)
REFERENCE = "leave-one-out"
EFFECTS = {  # leave-one-out's effect on the sentence's output, as mixing.erase measures it, by model.causal
    False: "the cosine distance of the mean of the last hidden states",
    True: "the fall in the log-probability of the piece predicted next",
}
OUTPUT_ROWS = {False: "mean", True: "last"}  # the method's row for the output (mixing.output_row), by model.causal


def columns(layers: int) -> list[tuple[str, int | None]]:
    """(method, layer from 1, or None: rolled out) of each number of a sentence's row: each
    method's layers and its rolled-out column, then the random attribution's one."""
    return [(m, l) for m in mixing.COMPARED for l in (*range(1, layers + 1), None)] + [(BASELINE, None)]


def row(agreed: dict, layers: int) -> np.ndarray:
    """A sentence's mixing.agreement as its row of rhos (K,), in the order of columns(layers)."""
    return np.array([agreed[m]["rolled"] if l is None else agreed[m]["layers"][l - 1] for m, l in columns(layers)])


@dataclass
class Partial:
    """What a chunk of the corpus gives: each sentence's row of rhos, by its line number
    (a chunk's rows together, one array each), the lines read and skipped (with the first
    one's reason), and the sentences a float32 run computed in float64 instead."""

    numbers: list[np.ndarray] = field(default_factory=list)  # each chunk's line numbers (n,)
    rhos: list[np.ndarray] = field(default_factory=list)  # their rows (n, K)
    lines: int = 0
    skipped: int = 0
    first_skip: tuple[int, str] | None = None
    redone: int = 0  # sentences whose numbers left float32's range (attention.in_range)

    @property
    def sentences(self) -> int:
        return sum(len(n) for n in self.numbers)

    def merge(self, other: Partial) -> None:
        self.numbers += other.numbers
        self.rhos += other.rhos
        self.lines += other.lines
        self.skipped += other.skipped
        self.redone += other.redone
        if other.first_skip is not None and (self.first_skip is None or other.first_skip[0] < self.first_skip[0]):
            self.first_skip = other.first_skip

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """The line numbers (N,) and their rows (N, K), in line order."""
        numbers = np.concatenate(self.numbers)  # (N,)
        order = np.argsort(numbers, kind="stable")
        return numbers[order], np.concatenate(self.rhos)[order]  # (N,), (N, K)


@dataclass(frozen=True)
class Job:
    """What every chunk needs: the model (batch.Job: its path, as workers load it), the
    seed of the random attribution and the precision of the forward passes."""

    load: batch.Job = field(default_factory=batch.Job)
    seed: int = 0
    precision: str = "float64"  # one of attention.PRECISIONS

    def partial(self, chunk: list[tuple], trained: Trained) -> Partial:
        with attention.precision(self.precision):
            return chunk_partial(chunk, trained, self)

    @staticmethod
    def empty() -> Partial:
        return Partial()


@train.one_order  # one BLAS thread, in every process: the same sums, so the same numbers, whatever --jobs
def chunk_partial(chunk: list[tuple], trained: Trained, job: Job) -> Partial:
    """The rows of a chunk of (line number, text, error); a line with an error, or one the
    model cannot take (too long, no word piece), is counted as skipped; in float32, one
    whose numbers leave its range is computed in float64 (attention.in_range) and counted."""
    out = Partial()
    numbers, rows = [], []
    for number, text, error in chunk:
        out.lines += 1
        try:
            if error is not None:
                raise InputError(error)
            pieces = trained.pieces(text)
            agreed, redone = attention.in_range(lambda: mixing.agreement(trained, pieces, seed=job.seed))
            out.redone += redone
        except AttncliError as e:
            out.skipped += 1
            if out.first_skip is None:
                out.first_skip = (number, str(e))
            continue
        numbers.append(number)
        rows.append(row(agreed, trained.model.config.layers))
    if rows:
        out.numbers.append(np.array(numbers, dtype=np.int64))
        out.rhos.append(np.stack(rows))
    return out


def cell(rhos: np.ndarray, resamples: int, seed: int) -> dict:
    """A column's rhos (N,) summed up: their mean over the sentences where rho is defined,
    its bootstrap interval, and the sentences counted and left out."""
    mean, low, high = contributions.bootstrap_mean(rhos, resamples=resamples, seed=seed, level=LEVEL)
    defined = int(np.isfinite(rhos).sum())
    return {"rho": _number(mean), "low": _number(low), "high": _number(high), "sentences": defined,
            "undefined": len(rhos) - defined}


def summary(total: Partial, name: str, trained: Trained, *, resamples: int = RESAMPLES, seed: int = 0,
            precision: str = "float64") -> dict:
    """faithfulness's document of the corpus `name`: what every record shares (the corpus,
    the lines read and skipped, the model and the precision it ran in, in float32 with the
    sentences computed in float64 instead, the reference and how the rows are read) and,
    under `records`, a record per method, the random attribution last. A corpus of no
    sentence, or none that could be read, is an error."""
    if total.lines == 0:
        raise InputError(f"{name} holds no sentence (it is empty or blank)")
    if not total.sentences:
        line, reason = total.first_skip
        raise InputError(f"no line of {name} could be read ({total.skipped:,} skipped; line {line:,}: {reason})")
    _, rhos = total.table()  # (N, K)
    causal = trained.model.causal
    cells = {column: cell(rhos[:, k], resamples, seed) for k, column in enumerate(columns(trained.model.config.layers))}
    shared = {"corpus": name, "lines": total.lines, "skipped": total.skipped, "sentences": len(rhos),
              "model": trained.about(), "precision": precision,
              **({"redone_in_float64": total.redone} if precision == "float32" else {}),
              "reference": REFERENCE, "effect": EFFECTS[causal],
              "output_row": OUTPUT_ROWS[causal], "resamples": resamples, "seed": seed, "level": LEVEL}
    records = [{"command": "faithfulness", "method": method, "baseline": method == BASELINE,
                "layers": [{"layer": l, **c} for (m, l), c in cells.items() if m == method and l is not None],
                "rolled": cells[(method, None)], **shared} for method in METHODS]
    return {"command": "faithfulness", **shared, "records": records}


def _number(x: float) -> float | None:
    """A JSON number, or null where no sentence gave one."""
    return float(x) if np.isfinite(x) else None
