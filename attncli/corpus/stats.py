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

from dataclasses import dataclass, field

import numpy as np

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
            self.sums.setdefault(name, Compensated(self.shape)).merge(s)
        for name, n in other.counts.items():
            self.counts[name] += n

    def add(self, seen: list[Observation]) -> None:
        """Sentences' sums, added together first (numpy's pairwise sum), then to the running
        ones: one compensated addition a chunk, not a sentence."""
        added = [n for name, count in ADDED.items() if name in seen[0].sums for n in (name, count)]
        for name in [*STATISTICS, *added]:
            self.sums.setdefault(name, Compensated(self.shape)).add(np.sum([o.sums[name] for o in seen], axis=0))
        for name in COUNTS:
            self.counts[name] += sum(o.counts[name] for o in seen)

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
        return out

    def counted(self, name: str) -> np.ndarray:
        """The sentences each head's ADDED statistic `name` was taken over (L, H)."""
        return np.rint(self.sums[ADDED[name]].value).astype(np.int64)


def patterns(ids: np.ndarray) -> dict[str, np.ndarray]:
    """TransformerLens's detection patterns (T, T) for tokens `ids` (T,): previous-token,
    duplicate-token and induction, each lower-triangular."""
    T = len(ids)
    previous = np.eye(T, k=-1)  # P_i,i-1
    duplicate = np.tril((ids[:, None] == ids[None, :]).astype(float), k=-1)  # token j is token i, j < i
    induction = np.zeros((T, T))
    induction[:, 1:] = duplicate[:, :-1]  # token j - 1 is token i, j - 1 < i
    return {"previous_token": previous, "duplicate_token": duplicate, "induction": np.tril(induction)}


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
    """One sentence's sums. alpha (L, H, T, T); allowed (T, T) where row i may attend;
    ids (T,) its tokens as numbers (equal tokens, equal numbers); punct, cls, sep (T,) flags."""
    L, H, T, _ = alpha.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.where(alpha > 0, np.log(np.where(alpha > 0, alpha, 1.0)), 0.0)  # 0 ln 0 = 0
    where = np.arange(T)
    sums = {
        "entropy": -(alpha * logs).sum(axis=(-1, -2)),
        "distance": (alpha * np.abs(where[:, None] - where[None, :])).sum(axis=(-1, -2)),
        "self": alpha[..., where, where].sum(axis=-1),
        "previous": alpha[..., where[1:], where[:-1]].sum(axis=-1),
        "next": alpha[..., where[:-1], where[1:]].sum(axis=-1),
        "first": alpha[..., 0].sum(axis=-1),
        **{name: alpha[..., flags].sum(axis=(-1, -2)) for name, flags in (("cls", cls), ("sep", sep), ("punct", punct))},
    }
    sums["previous_token"] = sums["previous"]  # P_i,i-1 picks the same cells; only the count divided by differs
    repeats = len(np.unique(ids)) < T
    for name in ("duplicate_token", "induction"):
        sums[name] = np.zeros((L, H))
    if repeats:
        for name, P in patterns(ids).items():
            if name != "previous_token":
                sums[name] = (alpha * P).sum(axis=(-1, -2))
    # the rows that may attend to the token before (after) them: none after, with a decoder's mask
    before, after = int(allowed[where[1:], where[:-1]].sum()), int(allowed[where[:-1], where[1:]].sum())
    return Observation(sums, {"sentences": 1, "tokens": T, "rows": T, "rows_previous": before, "rows_next": after,
                              "rows_repeat": T if repeats else 0})


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
            record["baselines"] = {
                name: {stat: _number(m[stat][min(l, m[stat].shape[0] - 1), min(h, m[stat].shape[1] - 1)])
                       for stat in names} for name, m in base.items()}
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
