"""A corpus's sentences through attention, into stats.py's sums, and stats' summary of
them: in this process, or in N worker processes (as batch); on a Dask cluster, cluster.py
runs the same chunk_partial in each task. Each chunk of lines gives a Partial, and the
partials are merged as they come: the order does not matter (stats.py). The running of
chunks (run, summarise, cluster.run_dask) serves any job with a partial(chunk, vectors)
and an empty() partial, whose partials merge(): faithfulness.py's too.

Baselines, computed beside the heads on the same sentences (Wiegreffe & Pinter 2019 ask
for them before reading meaning into attention):
- uniform: each row's weight spread evenly over the positions it may attend to;
- shuffled: the same sentence with its words in a random order (seeded by the seed and
  the line's number, so any chunking gives the same order);
- random: with word vectors, --qkv random for seeds 0 .. k-1 (their sums together).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field

import numpy as np

from attncli import attention
from attncli.corpus import batch, stats, workers
from attncli.encoder import Encoder, Options, attend
from attncli.errors import AttncliError, InputError
from attncli.mixing import documents as mixing
from attncli.models.encoder import Trained
from attncli.system import limits
from attncli.words.tokenize import is_punctuation


@dataclass(frozen=True)
class StatsJob:
    """What every chunk needs: where the vectors or the model are (batch.Job), and the
    baselines and word table asked for."""

    load: batch.Job = field(default_factory=batch.Job)
    seed: int = 0
    shuffled: bool = True
    random_seeds: int = 3
    by_word: bool = False
    importance: bool = False  # each head's ablation effect too (a model's): mixing.ablation
    precision: str = "float64"  # a model's forward passes: one of attention.PRECISIONS

    def partial(self, chunk: list[tuple], vectors) -> stats.Partial:
        """A chunk's partial: what run and cluster.run_dask call for any job of a survey."""
        with attention.precision(self.precision):
            return chunk_partial(chunk, vectors, self)

    @staticmethod
    def empty() -> stats.Partial:
        """The partial of no line, which summarise merges the others into."""
        return stats.Partial()


def sentence_arrays(text: str, source: Encoder, opts: Options, att=None):
    """(alpha (L, H, T, T), allowed (T, T), tokens, punct, cls, sep) of one sentence, from
    its Attention `att` where it was made already (Encoder.attend_many's): every layer's
    weights, and an encoder's markers, [CLS] first and [SEP] after, where put."""
    att = attend(text, source, opts, keep=("layers",)) if att is None else att
    cls, sep = source.markers(att)  # (T,) each
    allowed = np.ones((len(cls), len(cls)), dtype=bool) if att.mask is None else ~att.mask  # a decoder's mask, or --mask
    return att.layers, allowed, list(att.tokens), punctuation(att.tokens), cls, sep


def numbered(tokens: list[str]) -> np.ndarray:
    """Tokens as numbers, equal tokens equal numbers, as the detection patterns compare them. (T,)"""
    numbers = {t: n for n, t in enumerate(dict.fromkeys(tokens))}
    return np.array([numbers[t] for t in tokens], dtype=np.int64)


def punctuation(tokens: list[str]) -> np.ndarray:
    """Which tokens are punctuation. (T,) bool"""
    return np.array([is_punctuation(t) for t in tokens], dtype=bool)


def _sums(arrays) -> stats.Observation:
    alpha, allowed, tokens, punct, cls, sep = arrays
    return stats.observe(alpha, allowed, numbered(tokens), punct, cls, sep)


def shuffle(text: str, seed: int, line: int) -> str:
    """The line's words (as split on white space) in a random order of its own."""
    words = text.split()
    order = np.random.default_rng([seed, line]).permutation(len(words))
    return " ".join(words[i] for i in order)


def _observed(arrays) -> tuple[stats.Observation, stats.Observation]:
    """A sentence's observation, and the same sentence's under uniform attention."""
    return _sums(arrays), _sums((stats.uniform(arrays[1]), *arrays[1:]))


def sums(chunk: list[tuple], source: Encoder, job: StatsJob,
         words: stats.WordSums | None = None) -> tuple[dict, set[int]]:
    """The observations of each line of the chunk (_observed's) and of its words shuffled, or
    the error that refuses the line, by (line number, shuffled), each line told to the word
    table `words` as it comes: the source run over them as it runs best
    (Encoder.attend_many: a model in batches of similar lengths), each line's arrays let go
    once summed; and the lines a float32 run computed in float64 instead (a pass whose
    weights are float64 where the run's are float32: layers.forward_many's)."""
    lines = [(number, text) for number, text, error in chunk if error is None]
    keys, texts = [(number, False) for number, _ in lines], [text for _, text in lines]
    if job.shuffled:
        keys += [(number, True) for number, _ in lines]
        texts += [shuffle(text, job.seed, number) for number, text in lines]
    out, redone = {}, set()
    for k, att in source.attend_many(texts, job.load.opts, keep=("layers",)):
        if isinstance(att, AttncliError):
            out[keys[k]] = att
            continue
        if att.layers.dtype != attention.working():
            redone.add(keys[k][0])
        arrays = sentence_arrays(texts[k], source, job.load.opts, att)
        out[keys[k]] = _observed(arrays)
        if words is not None and not keys[k][1]:  # a line's words, not its shuffled ones
            words.observe(arrays[2], arrays[0], arrays[1])
    return out, redone


def chunk_partial(chunk: list[tuple], source: Encoder, job: StatsJob) -> stats.Partial:
    """The sums of a chunk of (line number, text, error), with the baselines'; a line with an
    error, or one attention cannot take (no word with a vector, say), is counted as skipped.
    The lines run first (sums), a model's in batches; in float32, a line whose numbers leave
    its range is computed in float64 and counted. The random projections' baseline is word
    vectors' only: a model's projections are its own."""
    opts = job.load.opts
    out = stats.Partial(words=stats.WordSums() if job.by_word else None)
    seen: dict[str | None, list[stats.Observation]] = {None: [], "uniform": [], "shuffled": [], "random": []}
    summed, redone = sums(chunk, source, job, out.words)  # the word table (word vectors': no --importance) as lines come
    for number, text, error in chunk:
        out.lines += 1
        try:
            if error is not None:
                raise InputError(error)
            found = summed[(number, False)]
            if isinstance(found, AttncliError):
                raise found
            observed = found
            effects = None
            if job.importance:
                effects, again = attention.in_range(lambda: importance(source, text))
                redone |= {number} if again else set()
        except AttncliError as e:
            out.skipped += 1
            if out.first_skip is None:
                out.first_skip = (number, str(e))
            continue
        out.redone += number in redone
        seen[None].append(observed[0])
        if effects is not None:
            seen[None][-1].add("importance", effects)
        seen["uniform"].append(observed[1])
        if job.shuffled:  # the same words or pieces, so the same errors if any: none here
            seen["shuffled"].append(summed[(number, True)][0])
        for seed in range(0 if source.layered else job.random_seeds):  # a model's projections are its own
            random = dataclasses.replace(opts, qkv="random", seed=seed, d_k=None)
            seen["random"].append(_sums(sentence_arrays(text, source, random)))
    for name, observed in seen.items():
        out.add(name, observed)
    return out


def importance(trained: Trained, text: str) -> np.ndarray:
    """Every head's ablation effect (L, H) on the sentence (mixing.ablation's)."""
    return mixing.ablation(trained, trained.parts(trained.pieces(text)))[0]


def read_lines(stream, *, jsonl: bool = False, field_name: str = "text", name: str = "CORPUS", jobs: int = 1):
    """(line number, text or None, error or None) of each line that holds something, read a
    line at a time as batch reads them (the corpus is never held whole, nor a line past
    batch.line_most); a line that is not UTF-8 ends the run."""
    for item in batch.read_items(stream, jsonl=jsonl, field_name=field_name, where=name, most=batch.line_most(jobs)):
        if item[2] is not None and item[2].startswith("not UTF-8"):
            raise InputError(f"{name}: line {item[0]} is {item[2]}; give UTF-8 text")
        yield item


def repeated(vocabulary: list[str], count: int, length: int, seed: int):
    """The standard induction test: `count` sequences of `length` words drawn at random
    (seeded) from the vocabulary, each written twice in a row; made as they are read."""
    if not vocabulary:
        raise InputError("--probe repeated draws words from the vectors' vocabulary, and it has no word of "
                         "letters; use other --vectors")
    rng = np.random.default_rng(seed)

    def sequences():
        for n in range(count):
            words = [vocabulary[i] for i in rng.integers(0, len(vocabulary), size=length)]
            yield n + 1, " ".join(words + words), None

    return sequences()


# --- one process, or N of them, as batch runs them ------------------------------------------

def _chunk(chunk: list[tuple]):
    """In a worker that batch._start set up: the chunk's partial, or the reason it could not load."""
    if batch._failed is not None:
        raise InputError(batch._failed)
    return _job.partial(chunk, batch._vectors)


_job = None  # in a worker: the job it serves (a StatsJob, a faithfulness.Job)


def _start(job, worker: bool = False) -> None:
    global _job
    _job = job
    batch._start(job.load, worker)


def run(chunks, job: StatsJob, jobs: int = 1, vectors=None):
    """Each chunk's partial (job.partial), as it is done; with jobs > 1, at most 2 jobs
    chunks at a time are read ahead, so the corpus is never held whole."""
    if jobs == 1:
        for chunk in chunks:
            yield job.partial(chunk, vectors)
        return
    yield from workers.in_order(_chunk, chunks, _start, job, jobs)


# --- the corpus's summary -------------------------------------------------------------------

def check_attention(vectors, opts: Options, random_seeds: int) -> None:
    """Over word vectors: the attention options' own errors (a --heads that does not divide
    d_k, a --qkv file) now, on the vocabulary's first words, not a line's; and the memory the
    random baseline's d x d projections take, whatever --d-k says."""
    sentence_arrays(" ".join(vocabulary(vectors, most=2)) or vectors.vocab.word(0), vectors, opts)
    if random_seeds:
        limits.require(3 * vectors.dim ** 2 * 8, f"the random projections baseline (W_query, W_key, W_value of "
                       f"{vectors.dim:,} x {vectors.dim:,})", "leave it out with --random-seeds 0")


def vocabulary(vectors, most: int = 10_000) -> list[str]:
    """The words --probe repeated draws from: the vectors' first `most` of letters only."""
    out = []
    for i in range(vectors.size):
        word = vectors.vocab.word(i)
        if word.isalpha():
            out.append(word)
            if len(out) == most:
                break
    return out


def summarise(parts, progress=lambda total: None, total=None):
    """The sums of a corpus from its chunks' partials `parts` (run's, in this process or in
    workers, or cluster.run_dask's), each merged as it comes into `total` (by default
    stats' empty Partial; a job's empty()), and progress(total) told. The workers end
    before this returns or raises."""
    total = stats.Partial() if total is None else total
    with contextlib.closing(parts):
        for part in parts:
            total.merge(part)
            progress(total)
    return total


def summary(total: stats.Partial, name: str, by: str, source: Encoder, precision: str = "float64") -> dict:
    """stats' document of the corpus `name`: a record per head (or per word, `by` "word"),
    with the lines read and skipped (and a model's precision; in float32, each record with
    the sentences computed in float64 instead). A corpus of no sentence, or none that
    could be read, is an error."""
    if total.lines == 0:
        raise InputError(f"{name} holds no sentence (it is empty or blank)")
    if total.heads is None:
        line, reason = total.first_skip
        raise InputError(f"no line of {name} could be read ({total.skipped:,} skipped; line {line:,}: {reason})")
    records = total.words.records() if by == "word" else stats.head_records(total, model=source.layered)
    if precision == "float32":  # a model's passes only
        records = [{**r, "redone_in_float64": total.redone} for r in records]
    ablated = "importance" in total.heads.sums  # what it is, for the table (a record holds the number only)
    return {"command": "stats", "corpus": name, "by": by, "lines": total.lines, "skipped": total.skipped,
            **source.corpus_keys(precision),
            **({"importance_of": mixing.ABLATION_OF[bool(source.model.causal)]} if ablated else {}),
            "records": records}
