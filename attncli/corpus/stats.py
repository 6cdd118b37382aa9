"""What heads do across a corpus: running sums of each head's attention statistics, merged
in any order. Pure numpy, no I/O: survey.py feeds it sentences' weights.

For a sentence's weights alpha (L, H, T, T), each row i summing to 1 over the positions j it
may attend to (allowed, T x T), every statistic is a sum over the rows, divided at the end
by the rows counted (Clark et al. 2019, "What Does BERT Look At?", average the same way):

    entropy   -sum_j alpha_ij ln alpha_ij      (uniform attention: ln n_i, n_i allowed)
    distance  sum_j alpha_ij |i - j|
    self      alpha_ii          previous  alpha_i,i-1 (rows i > 0)   next  alpha_i,i+1 (rows i < T - 1)
    first     alpha_i,0, the first position: a decoder's attention sink (Xiao et al. 2023,
              "Efficient Streaming Language Models with Attention Sinks"), an encoder's [CLS]
    cls       alpha_i,0 on [CLS]   sep  sum over [SEP]   punct  sum over punctuation

and TransformerLens's head detector scores (its "mul" measure): sum(alpha * P) / sum(alpha)
for a detection pattern P, here over every row of the corpus: previous-token (P_i,i-1 = 1),
duplicate-token (P_ij = 1 where token j is token i and j < i) and induction (P_ij = 1 where
token j - 1 is token i and j - 1 < i); the last two over the sentences whose tokens repeat.

A long text read as one sequence (stats --document) is summed a block of query rows at a
time (observe_rows; observe is a sentence's one block), and each head gains two profiles,
each a mean over rows: the mass at each distance |i - j| in log2 buckets (bucket 0 the
distance 0, bucket k >= 1 the distances 2^(k-1) .. 2^k - 1), and, for the last TAIL rows,
the mass on each tenth of the text (Liu et al. 2023, "Lost in the Middle"). A head whose
mean share on the first position is above SINK is a sink head (Gu et al., "When Attention
Sink Emerges in Language Models", ICLR 2025).

With a model (stats --importance), each head's importance too (Michel et al. 2019, "Are
Sixteen Heads Really Better than One?"): the effect of zeroing its output on a sentence
(mixing.ablation's), summed over the sentences and divided by them; no baseline has one.
A sentence whose effect on a head is undefined (NaN: an encoder's cosine distance to a
mean last hidden state that is the zero vector) is left out of that head's sum and count,
never added as 0.

Sums are compensated (Neumaier), so partial results merged in any order agree to well
within 1e-12 of each other; only the sums are kept, whatever the corpus's size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from attncli import attention

# each statistic and the count of rows it is divided by
STATISTICS = {
    "entropy": "rows", "distance": "rows", "self": "rows", "previous": "rows_previous", "next": "rows_next",
    "first": "rows", "cls": "rows", "sep": "rows", "punct": "rows", "previous_token": "rows", "duplicate_token": "rows_repeat",
    "induction": "rows_repeat",
}
COUNTS = ("sentences", "tokens", "rows", "rows_previous", "rows_next", "rows_repeat")
# what a run may add beside STATISTICS, a head's own (no baseline has it), and its count:
# the sentences that gave the head a value, head by head (Observation.add)
ADDED = {"importance": "importance_sentences"}
# what a document's rows add (observe_rows(profiles=True)): each profile, a number a bucket
# for every head, and the count of rows it is divided by
PROFILES = {"distance_profile": "rows", "tenths_profile": "tenths_rows"}
TAIL = 64  # the last query rows of a text whose mass on each of its tenths tenths_profile holds
TENTHS = 10
SINK = 0.3  # a head whose mean share on the first position is above this is a sink head (Gu et al. 2025)


class Compensated:
    """An array's running sum with Neumaier's compensation: value = total + carry."""

    def __init__(self, shape):
        self.total = np.zeros(shape)
        self.carry = np.zeros(shape)

    def add(self, x) -> None:
        t = self.total + x
        big = np.abs(self.total) >= np.abs(x)
        self.carry += np.where(big, (self.total - t) + x, (x - t) + self.total)
        self.total = t

    def merge(self, other: Compensated) -> None:
        self.add(other.total)
        self.add(other.carry)

    @property
    def value(self) -> np.ndarray:
        return self.total + self.carry


@dataclass
class HeadSums:
    """Every statistic's sum for L x H heads, and the counts they are divided by."""

    shape: tuple[int, int]  # (L, H)
    sums: dict[str, Compensated] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        for name in STATISTICS:
            self.sums.setdefault(name, Compensated(self.shape))
        for name in COUNTS:
            self.counts.setdefault(name, 0)

    def merge(self, other: HeadSums) -> None:
        if other.shape != self.shape:
            raise ValueError(f"heads {other.shape} cannot merge into {self.shape}")
        for name, s in other.sums.items():
            self.sums.setdefault(name, Compensated(s.total.shape)).merge(s)
        for name, n in other.counts.items():
            self.counts[name] = self.counts.get(name, 0) + n

    def add(self, seen: list[Observation]) -> None:
        """Sentences' sums, added together first (numpy's pairwise sum), then to the running
        ones: one compensated addition a chunk, not a sentence. Every sum and count they
        hold: STATISTICS' and COUNTS, and those of ADDED and PROFILES they have."""
        for name in seen[0].sums:
            total = np.sum([o.sums[name] for o in seen], axis=0)  # (L, H), a profile's (L, H, K)
            self.sums.setdefault(name, Compensated(total.shape)).add(total)
        for name in seen[0].counts:
            self.counts[name] = self.counts.get(name, 0) + sum(o.counts[name] for o in seen)

    def means(self) -> dict[str, np.ndarray]:
        """Each statistic's mean (L, H), and each of ADDED's there are (over the sentences
        that gave the head one); NaN where nothing was counted (no repeated token, say)."""
        out = {}
        for name, count in STATISTICS.items():
            n = self.counts[count]
            out[name] = self.sums[name].value / n if n else np.full(self.shape, np.nan)
        for name, count in ADDED.items():
            if name in self.sums:
                n = self.sums[count].value  # (L, H)
                out[name] = np.divide(self.sums[name].value, n, out=np.full(self.shape, np.nan), where=n > 0)
        for name, count in PROFILES.items():
            if name in self.sums:
                n = self.counts[count]
                total = self.sums[name].value  # (L, H, K)
                out[name] = total / n if n else np.full(total.shape, np.nan)
        return out

    def counted(self, name: str) -> np.ndarray:
        """The sentences each head's ADDED statistic `name` was taken over (L, H)."""
        return np.rint(self.sums[ADDED[name]].value).astype(np.int64)


def patterns(ids: np.ndarray, rows: slice = slice(None)) -> dict[str, np.ndarray]:
    """TransformerLens's detection patterns (T, T) for tokens `ids` (T,): previous-token,
    duplicate-token and induction, each lower-triangular; for the query rows `rows` only,
    those rows of them (R, T), made without the whole."""
    T = len(ids)
    i, j = np.arange(T)[rows][:, None], np.arange(T)[None, :]  # (R, 1), (1, T)
    previous = (j == i - 1).astype(float)  # P_i,i-1
    duplicate = ((ids[i] == ids[j]) & (j < i)).astype(float)  # token j is token i, j < i
    induction = ((ids[i] == ids[j - 1]) & (j >= 1) & (j <= i)).astype(float)  # token j - 1 is token i, j - 1 < i
    return {"previous_token": previous, "duplicate_token": duplicate, "induction": induction}


@dataclass
class Observation:
    """One sentence's sums over its rows, (L, H) each, and its counts."""

    sums: dict[str, np.ndarray]
    counts: dict[str, int]

    @property
    def shape(self) -> tuple[int, int]:
        return self.sums["entropy"].shape

    def add(self, name: str, values: np.ndarray) -> None:
        """A head's own statistic of the sentence (L, H), one of ADDED, NaN where it is
        undefined: summed where it is not, and those heads counted."""
        known = np.isfinite(values)  # (L, H)
        self.sums[name] = np.where(known, values, 0.0)
        self.sums[ADDED[name]] = known.astype(np.float64)


def observe(alpha: np.ndarray, allowed: np.ndarray, ids: np.ndarray, punct: np.ndarray,
            cls: np.ndarray, sep: np.ndarray) -> Observation:
    """One sentence's sums: its rows as one block (observe_rows). alpha (L, H, T, T);
    allowed (T, T) where row i may attend; ids (T,) its tokens as numbers (equal tokens,
    equal numbers); punct, cls, sep (T,) flags."""
    T = alpha.shape[-1]
    seen = observe_rows(alpha, 0, allowed, ids, punct, cls, sep, repeats=len(np.unique(ids)) < T)
    seen.counts = {"sentences": 1, "tokens": T, **seen.counts}
    return seen


def observe_rows(alpha: np.ndarray, start: int, allowed: np.ndarray, ids: np.ndarray, punct: np.ndarray,
                 cls: np.ndarray, sep: np.ndarray, repeats: bool, *, profiles: bool = False) -> Observation:
    """A block of a sequence's rows, its sums: alpha (..., R, T), the weights of the rows
    start .. start + R - 1 of a sequence of T tokens (a layer's (H, R, T), or a sentence's
    every layer and row, (L, H, T, T)); allowed (R, T) where those rows may attend; ids,
    punct, cls, sep (T,) as observe's; `repeats` whether a token of the whole sequence
    repeats (the duplicate-token and induction scores are over the sequences whose tokens
    do). Each sum (...), and the rows' counts; with `profiles`, PROFILES too, (..., K) each.
    A sequence's blocks added give the sums of its rows at once. The keys after the last one
    any of the rows may attend to (a decoder's later pieces) hold weight 0 and add nothing to
    any sum: they are left out, and alpha may leave them out already (..., R, n), n <= T."""
    R, T = allowed.shape
    n = min(attention.seen(~allowed, T), alpha.shape[-1])  # the keys from the first that some row sees
    alpha, allowed = alpha[..., :n], allowed[:, :n]  # (..., R, n), (R, n)
    r = np.arange(R)  # (R,) the block's rows, from 0
    i, j = start + r, np.arange(n)  # (R,) their positions; (n,) the keys'
    own = r[i < n]  # the rows whose own key is among them (its weight 0 where it is not)
    before, after = r[(i >= 1) & (i - 1 < n)], r[(i <= T - 2) & (i + 1 < n)]  # a token before them, and after
    logs = np.zeros(alpha.shape, alpha.dtype)  # (..., R, n)
    np.log(alpha, out=logs, where=alpha > 0)  # 0 ln 0 = 0
    distance = np.abs(i[:, None] - j[None, :])  # (R, n)
    # each sum of a cell's weight times a number of the cell: the distance, a flag of the key
    # (cls, sep, punct), a detection pattern's 0 or 1; all at once, one product a row (weighted)
    cells = {"distance": distance, "cls": cls[:n], "sep": sep[:n], "punct": punct[:n]}
    if repeats:
        cells.update({name: P[:, :n] for name, P in patterns(ids, slice(start, start + R)).items()
                      if name != "previous_token"})
    by_cell = weighted(alpha, np.stack([np.broadcast_to(c, (R, n)) for c in cells.values()], axis=-1))  # (..., k)
    sums = {
        "entropy": -(np.multiply(alpha, logs, out=logs)).sum(axis=(-1, -2)),
        **{name: by_cell[..., k] for k, name in enumerate(cells)},
        "self": alpha[..., own, i[own]].sum(axis=-1),
        "previous": alpha[..., before, i[before] - 1].sum(axis=-1),
        "next": alpha[..., after, i[after] + 1].sum(axis=-1),
        "first": alpha[..., 0].sum(axis=-1),
    }
    sums["previous_token"] = sums["previous"]  # P_i,i-1 picks the same cells; only the count divided by differs
    for name in ("duplicate_token", "induction"):
        sums.setdefault(name, np.zeros(alpha.shape[:-2]))
    # the rows that may attend to the token before (after) them: none after, with a decoder's mask
    counts = {"rows": R, "rows_previous": int(allowed[before, i[before] - 1].sum()),
              "rows_next": int(allowed[after, i[after] + 1].sum()), "rows_repeat": R if repeats else 0}
    if profiles:
        bucket = np.frexp(distance)[1]  # (R, n): 0 at 0, k at 2^(k-1) .. 2^k - 1
        sums["distance_profile"] = binned(alpha, bucket, (T - 1).bit_length() + 1)  # (..., K)
        tail = r[i >= T - TAIL]  # the block's rows among the last TAIL
        tenth = np.broadcast_to(TENTHS * j // T, (len(tail), n))  # (R', n): each key's tenth of the text
        sums["tenths_profile"] = binned(alpha[..., tail, :], tenth, TENTHS)  # (..., 10)
        counts["tenths_rows"] = len(tail)
    return Observation(sums, counts)


def weighted(alpha: np.ndarray, W: np.ndarray) -> np.ndarray:
    """sum_r sum_j alpha_rj W_rjk for each k: alpha (..., R, T), W (R, T, k) in alpha's dtype,
    a product a row (R products of (N, T) by (T, k)): one pass over alpha for all k sums,
    where a product and a sum each would pass over it twice a sum, and a count of each bin
    a head (np.bincount) took twenty times as long. -> (..., k)"""
    lead, (R, T, k) = alpha.shape[:-2], W.shape
    rows = np.moveaxis(alpha.reshape(math.prod(lead), R, T), 1, 0)  # (R, N, T)
    return (rows @ W.astype(alpha.dtype)).sum(axis=0).reshape(*lead, k)  # (R, N, k) -> (..., k)


def binned(alpha: np.ndarray, bins: np.ndarray, n: int) -> np.ndarray:
    """Each of alpha's (..., R, T) sums over the cells of each bin: bins (R, T) from 0 to
    n - 1, as the weights times the bins' one-hot. -> (..., n)"""
    return weighted(alpha, bins[..., None] == np.arange(n))  # (R, T, n) -> (..., n)


def is_sink(first: float | None) -> bool:
    """Whether a head whose mean share on the first position is `first` is a sink head."""
    return first is not None and first > SINK


def uniform(allowed: np.ndarray) -> np.ndarray:
    """(1, 1, T, T): each row's weight spread evenly over the positions it may attend to."""
    return (allowed / allowed.sum(axis=-1, keepdims=True))[None, None]


@dataclass
class WordSums:
    """Per word: how often it occurs, the attention it receives (the heads' mean of its
    column's sum, sum_i alpha_ij) and what uniform attention would give it (sum_i 1/n_i)."""

    table: dict[str, list[float]] = field(default_factory=dict)  # word: [count, received, uniform]

    def observe(self, tokens: list[str], alpha: np.ndarray, allowed: np.ndarray) -> None:
        received = alpha.mean(axis=(0, 1)).sum(axis=0)  # (T,): each column's sum, the heads' mean
        even = uniform(allowed)[0, 0].sum(axis=0)  # (T,)
        for word, r, u in zip(tokens, received.tolist(), even.tolist()):
            entry = self.table.setdefault(word, [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += r
            entry[2] += u

    def merge(self, other: WordSums) -> None:
        for word, (n, r, u) in other.table.items():
            entry = self.table.setdefault(word, [0, 0.0, 0.0])
            entry[0] += n
            entry[1] += r
            entry[2] += u

    def records(self) -> list[dict]:
        """One record a word, the most attracting (against uniform) first."""
        out = [{"word": w, "count": int(n), "received": r / n, "uniform": u / n, "ratio": r / u if u else None}
               for w, (n, r, u) in self.table.items()]
        return sorted(out, key=lambda d: (-(d["ratio"] or 0.0), -d["count"], d["word"]))


@dataclass
class Partial:
    """What a chunk of the corpus adds up to: the heads' sums, each baseline's, the words'
    (with --by word), the lines skipped (with the first one's reason), and the sentences a
    float32 run computed in float64 instead."""

    heads: HeadSums | None = None
    baselines: dict[str, HeadSums] = field(default_factory=dict)
    words: WordSums | None = None
    lines: int = 0
    skipped: int = 0
    first_skip: tuple[int, str] | None = None
    redone: int = 0

    def add(self, name: str | None, seen: list[Observation]) -> None:
        """Add sentences' sums to the heads' (name None) or to a baseline's."""
        if not seen:
            return
        if name is None:
            if self.heads is None:
                self.heads = HeadSums(seen[0].shape)
            self.heads.add(seen)
        else:
            self.baselines.setdefault(name, HeadSums(seen[0].shape)).add(seen)

    def merge(self, other: Partial) -> None:
        if other.heads is not None:
            if self.heads is None:
                self.heads = HeadSums(other.heads.shape)
            self.heads.merge(other.heads)
        for name, sums in other.baselines.items():
            self.baselines.setdefault(name, HeadSums(sums.shape)).merge(sums)
        if other.words is not None:
            if self.words is None:
                self.words = WordSums()
            self.words.merge(other.words)
        self.lines += other.lines
        self.skipped += other.skipped
        self.redone += other.redone
        if other.first_skip is not None and (self.first_skip is None or other.first_skip[0] < self.first_skip[0]):
            self.first_skip = other.first_skip


def close(a: float, b: float) -> bool:
    """Whether a statistic is as good as equal to its baseline: within 0.005, or 1% of it."""
    return bool(np.isfinite(a) and np.isfinite(b) and abs(a - b) <= max(0.005, 0.01 * abs(b)))


# the statistics of a model's heads only: over word vectors the first position is the
# sentence's first word, no piece of a kind of its own
MODEL_STATISTICS = ("first",)


def head_records(partial: Partial, *, model: bool = True) -> list[dict]:
    """One record a head: its statistics (without MODEL_STATISTICS unless `model`) and those
    of ADDED the sums hold, each baseline's for the same head (uniform attention has one value for every head), and
    which statistics a baseline equals."""
    means = partial.heads.means()
    L, H = partial.heads.shape
    base = {name: sums.means() for name, sums in partial.baselines.items()}
    names = [name for name in STATISTICS if model or name not in MODEL_STATISTICS]
    out = []
    for l in range(L):
        for h in range(H):
            record = {"layer": l + 1, "head": h + 1, **partial.heads.counts}
            record.update({name: _number(means[name][l, h]) for name in names})
            for name in ADDED:
                if name in means:
                    record[name] = _number(means[name][l, h])
                    record[ADDED[name]] = int(partial.heads.counted(name)[l, h])
            record.update({name: _numbers(means[name][l, h]) for name in PROFILES if name in means})
            record["baselines"] = {
                name: {stat: _value(m[stat][min(l, m[stat].shape[0] - 1), min(h, m[stat].shape[1] - 1)])
                       for stat in [*names, *(p for p in PROFILES if p in m)]} for name, m in base.items()}
            record["like_baseline"] = {
                stat: [name for name, values in record["baselines"].items()
                       if record[stat] is not None and values[stat] is not None and close(record[stat], values[stat])]
                for stat in names}
            out.append(record)
    return out


def _number(x) -> float | None:
    """A JSON number, or null where nothing was counted."""
    x = float(x)
    return x if np.isfinite(x) else None


def _numbers(x: np.ndarray) -> list[float | None]:
    """A profile's numbers, each a JSON number or null."""
    return [_number(v) for v in x]


def _value(x):
    """A statistic's number, or a profile's list of them."""
    return _numbers(x) if np.ndim(x) else _number(x)
