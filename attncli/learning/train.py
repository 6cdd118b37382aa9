"""A corpus to learned projections: examples for the objectives, the training loop, the
held-out loss and the probe the user watches. No click, no rich: the caller gives a
progress callback and a stop flag.

Each example hides one word of a sentence and keeps some words around it visible; its
query attends over them, and their context vector must predict it (learn.py). The
objectives:
- hide: the hidden word's own vector gives the query; the words within `window` either
  side are visible, never the word itself (what --mask self shows);
- mask: the same examples, the query from one learned vector for every hidden word, as
  BERT's [MASK]: it learns where to look without knowing the word, and W_Q is taught only
  through that vector's query, never a real word's (the file keeps the vector as `mask`);
- next: predict the next word from the `window` words up to and including this one, whose
  vector gives the query (what --mask causal shows); mask_self leaves the word itself out.
A step's loss is a sampled softmax over `negatives` draws of the output words (by their
frequency); the held-out loss is always the whole softmax's, the number to compare. With
d_k = d the projections start as the identity, so step 0 is attention over the raw
vectors, the tool's untrained picture; a smaller d_k starts W_Q = W_K at the output words'
d_k principal directions, whose scores are the raw ones' best rank-d_k approximation.
b_out starts at the output words' log frequencies.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass

import numpy as np

from attncli import attention
from attncli.attention import ScaleError
from attncli.documents.context import find_position
from attncli.encoder import Options
from attncli.errors import AttncliError, InputError, TokenError
from attncli.learning import learn
from attncli.learning.projections import SHOWN_WITH
from attncli.system import limits
from attncli.version import __version__
from attncli.words.tokenize import is_punctuation, iter_tokens
from attncli.words.vectors import Vectors, cosines


class TrainingError(AttncliError):
    """Training cannot go on: a loss that is no longer a number, a corpus too small."""


@dataclass(frozen=True)
class TrainOptions:
    steps: int = 2000
    lr: float = 0.01
    batch: int = 256
    window: int = 5
    out_vocab: int = 10_000
    holdout: float = 0.1
    seed: int = 0
    negatives: int = 2048  # draws of a sampled softmax a step; 0: the whole output vocabulary
    heads: int = 1
    evaluate_every: int = 200
    objective: str = "hide"  # one of projections.OBJECTIVES
    d_k: int | None = None  # None: d
    epochs: float | None = None  # given: the steps are as many as this many passes over the examples take
    mask_self: bool = False  # next: the query's own word not among its keys (hide and mask never show it)


MIN_EXAMPLES = 100  # fewer words with vectors (and neighbours) than this teach nothing


@dataclass
class Examples:
    query: np.ndarray  # (N,) the hidden word's row in the vectors
    context: np.ndarray  # (N, m) the visible words' rows, -1 for none
    target: np.ndarray  # (N,) the hidden word's place in the output vocabulary


def check_sizes(d: int, heads: int, d_k: int | None = None) -> None:
    """Heads split both d_k (of queries and keys) and d (of the values): refused where they
    cannot, and a d_k above d, which would learn nothing more."""
    d_k = d if d_k is None else d_k
    if not 1 <= d_k <= d:
        raise InputError(f"--d-k {d_k} is not from 1 to d = {d:,}, the vectors' size")
    if d % heads or d_k % heads:
        both = [str(h) for h in range(1, d_k + 1) if d % h == 0 and d_k % h == 0]
        sizes = f"d = {d:,}, the vectors' size" if d_k == d else f"both --d-k {d_k} and d = {d:,}, the vectors' size"
        raise InputError(f"--heads {heads} does not divide {sizes}; choose one of {', '.join(both)}")
    limits.require(projection_bytes(d, d_k), f"learning W_query, W_key ({d:,} x {d_k:,}) and W_value ({d:,} x {d:,})",
                   "use vectors of a smaller d, or a smaller --d-k")


def projection_bytes(d: int, d_k: int) -> int:
    """Memory the projections take while they are learned, in float64: W_query and W_key
    (d, d_k) and W_value (d, d), each with its gradient and Adam's two moments."""
    return 8 * 4 * (2 * d * d_k + d * d)


def visible(options: TrainOptions) -> int:
    """m, the words an example keeps visible at most."""
    return options.window if options.objective == "next" else 2 * options.window


def working_bytes(options: TrainOptions, V_out: int, d: int, examples: int) -> int:
    """Memory training holds beside the vectors, in float64: the projections being learned
    (projection_bytes); the output words' vectors, bias and Adam's moments of each (V_out, d); a step's visible words, their keys and values and
    their gradients (about eight (B, 2 window, d) arrays); its logits and their softmax, twice
    (B, candidates); and the examples' rows (m + 2 a example, int32, and as much again
    while they are made)."""
    B, m = options.batch, visible(options)
    candidates = V_out if options.negatives == 0 else min(options.negatives, V_out) + 1
    return (8 * (4 * V_out * (d + 1) + 8 * B * m * d + 4 * B * candidates + examples * (m + 2))
            + projection_bytes(d, options.d_k or d))


def sentences_of(text: str, vectors: Vectors) -> list[np.ndarray]:
    """Each line's tokens that have vectors, as rows of the vectors (punctuation left out)."""
    rows: dict[str, int | None] = {}
    out = []
    for line in text.split("\n"):
        found = []
        for token in iter_tokens(line, lowercase=not vectors.cased):
            if is_punctuation(token):
                continue
            if token not in rows:
                rows[token] = vectors.row(token)
            if rows[token] is not None:
                found.append(rows[token])
        if len(found) >= 2:
            out.append(np.array(found, dtype=np.int64))
    return out


def output_vocabulary(sentences: list[np.ndarray], most: int) -> np.ndarray:
    """The `most` most frequent rows of the corpus (ties by row), and their counts."""
    counts = Counter(int(r) for s in sentences for r in s)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:most]
    return np.array([[r, c] for r, c in ranked], dtype=np.int64).reshape(-1, 2)


def examples_of(sentences: list[np.ndarray], out_rows: np.ndarray, options: TrainOptions) -> Examples:
    """Every word of the output vocabulary in the sentences, hidden once each, with the
    words its objective keeps visible (hide, mask: within `window` either side; next: the
    `window` words up to the one before it, the query's own among them unless mask_self),
    -1 where there is none (attention does not care in which column). All positions at once, in int32: a 10 MB corpus has a
    million and a half examples, which lists of Python ints would hold at ten times the size."""
    m = visible(options)
    if not sentences:
        return Examples(np.zeros(0, np.int32), np.zeros((0, m), np.int32), np.zeros(0, np.int32))
    lengths = np.array([len(s) for s in sentences])
    words = np.concatenate(sentences).astype(np.int32)  # (N,) every position's row
    line = np.repeat(np.arange(len(sentences)), lengths)  # (N,) the sentence of each position
    place = np.full(max(int(words.max()), int(out_rows.max(initial=0))) + 1, -1, dtype=np.int32)
    place[out_rows] = np.arange(len(out_rows), dtype=np.int32)
    p = np.arange(len(words))  # (N,) the query's position
    w = options.window
    if options.objective == "next":  # the word at p + 1 predicted, the query at p
        last = np.minimum(p + 1, len(words) - 1)
        target = np.where((last > p) & (line[last] == line), place[words[last]], -1)
        offsets = range(-w, 0) if options.mask_self else range(1 - w, 1)
    else:
        target = place[words]
        offsets = [*range(-w, 0), *range(1, w + 1)]
    context = np.full((len(words), m), -1, dtype=np.int32)  # (N, m)
    for c, o in enumerate(offsets):
        j = np.clip(p + o, 0, len(words) - 1)
        context[:, c] = np.where((p + o == j) & (line[j] == line), words[j], -1)
    keep = (target >= 0) & (context >= 0).any(axis=1)
    return Examples(words[keep], context[keep], target[keep])


def batch_of(ex: Examples, picked: np.ndarray, matrix: np.ndarray, masked: bool = False) -> learn.Batch:
    """The picked examples' vectors from `matrix` (float64, with a last row of zeros for
    padding); masked: no query vectors, the mask objective's learned one takes their place."""
    rows = ex.context[picked]  # (B, m)
    pad = rows < 0
    C = matrix[rows]  # (B, m, d): the -1 of padding is matrix's last row, of zeros
    x = None if masked else matrix[ex.query[picked]]  # (B, d)
    return learn.Batch(x=x, C=C, pad=pad, target=ex.target[picked])


def mean_loss(params, ex: Examples, matrix, E, scale, heads: int = 1, masked: bool = False, most: int = 2000) -> float:
    """The held-out loss, over its first `most` examples, in batches."""
    n = min(len(ex.target), most)
    total = 0.0
    for start in range(0, n, 500):
        picked = np.arange(start, min(start + 500, n))
        batch = batch_of(ex, picked, matrix, masked)
        total += learn.forward(params, batch, E, scale, heads=heads)[0] * len(picked)
    return total / n


def principal(E: np.ndarray, d_k: int) -> np.ndarray:
    """(d, d_k): the top d_k eigenvectors of E^T E, each signed so its largest entry is
    positive (the same matrix on any machine's LAPACK)."""
    values, vectors = np.linalg.eigh(E.T @ E)  # ascending
    U = vectors[:, ::-1][:, :d_k]
    signs = np.sign(U[np.argmax(np.abs(U), axis=0), np.arange(d_k)])
    return U * signs


def initial(out: np.ndarray, E: np.ndarray, options: TrainOptions) -> dict[str, np.ndarray]:
    """Where training starts: the identity (d_k = d) or the principal directions for queries
    and keys, the identity for the values, b_out the log frequencies, and for the mask
    objective the mask vector at the output words' mean (by frequency)."""
    d = E.shape[1]
    d_k = options.d_k or d
    W = np.eye(d) if d_k == d else principal(E, d_k)
    freq = out[:, 1] / out[:, 1].sum()
    params = {"W_query": W.copy(), "W_key": W.copy(), "W_value": np.eye(d), "b_out": np.log(freq)}
    if options.objective == "mask":
        params["mask"] = freq @ E  # (d,)
    return params


def steps_of(options: TrainOptions, examples: int) -> int:
    """The steps to take: --steps, or as many as --epochs passes over the examples need."""
    if options.epochs is None:
        return options.steps
    steps = max(1, math.ceil(options.epochs * examples / options.batch))
    if steps > MOST_STEPS:
        raise InputError(f"--epochs {options.epochs:g} over {examples:,} examples takes {steps:,} steps of "
                         f"--batch {options.batch:,}, more than {MOST_STEPS:,}; give fewer --epochs")
    return steps


MOST_STEPS = 10_000_000  # as --steps

# OpenBLAS splits a matrix product's sums among its threads, and so rounds them differently
# for each count: the same seed gave files differing in the 15th digit with 1 thread and with
# 2. Training runs on one, whatever the machine has; it was also the faster on two shared
# cores (benchmarks/README.md).
BLAS_THREADS = 1


def one_order(f):
    """f with the BLAS held to BLAS_THREADS threads while it runs, so that its sums are
    added in one order on every thread count."""

    @functools.wraps(f)
    def pinned(*args, **kwargs):
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
            return f(*args, **kwargs)

    return pinned


@one_order
def train(text: str, vectors: Vectors, options: TrainOptions, *, progress=None, stopped=lambda: False,
          untrained=None) -> dict:
    """Learn W_query, W_key, W_value (and b_out) on `text`; the arrays and a record of the run.
    untrained(loss) is told the held-out loss before any step, progress(step, steps, loss,
    held_out) is called as it goes; stopped() ends it early, after the step under way."""
    d, H, masked = vectors.dim, options.heads, options.objective == "mask"
    check_sizes(d, H, options.d_k)
    rng = np.random.default_rng(options.seed)
    sentences = sentences_of(text, vectors)
    # the words the corpus uses, as float64 rows of their own: a step gathers from them
    used, codes = np.unique(np.concatenate(sentences), return_inverse=True) if sentences else (np.zeros(0, int), [])
    sentences = np.split(codes, np.cumsum([len(s) for s in sentences])[:-1]) if sentences else []
    order = rng.permutation(len(sentences))
    n_held = max(1, int(round(len(sentences) * options.holdout))) if len(sentences) > 1 else 0
    held, kept = [sentences[i] for i in order[:n_held]], [sentences[i] for i in order[n_held:]]
    out = output_vocabulary(kept, options.out_vocab)
    train_ex, held_ex = examples_of(kept, out[:, 0], options), examples_of(held, out[:, 0], options)
    if len(train_ex.target) < MIN_EXAMPLES or len(held_ex.target) == 0:
        raise InputError(f"the corpus gives {len(train_ex.target):,} examples to learn from and {len(held_ex.target):,} "
                         f"to check on; it needs at least {MIN_EXAMPLES} and 1: give more text, in lines of two words "
                         f"or more that have vectors, or a --holdout other than {options.holdout:g}")
    limits.require(working_bytes(options, len(out), d, len(train_ex.target) + len(held_ex.target)) + 8 * len(used) * d,
                   f"training with --batch {options.batch:,}, --window {options.window:,} and {len(out):,} output words",
                   "give a smaller --batch, --window or --out-vocab")
    matrix = np.zeros((len(used) + 1, d))  # (words used + 1, d): the last, zeros, for padding
    matrix[:-1] = vectors.matrix[used]
    E = matrix[out[:, 0]]  # (V_out, d): fixed, the output words' own vectors
    scale = attention.default_scale((options.d_k or d) // H)
    params = initial(out, E, options)
    start = {name: P.copy() for name, P in params.items()}
    adam = learn.Adam(lr=options.lr)
    q = out[:, 1] / out[:, 1].sum()  # (V_out,): the sample's proposal, the words' frequencies
    sampling = 0 < options.negatives < len(out)
    log_q = learn.inclusion_log_q(q, options.negatives) if sampling else None
    steps = steps_of(options, len(train_ex.target))
    before = mean_loss(params, held_ex, matrix, E, scale, H, masked)
    if untrained is not None:
        untrained(before)
    losses, held_losses = [], [(0, before)]
    step = 0
    for step in range(1, steps + 1):
        picked = rng.integers(0, len(train_ex.target), size=options.batch)
        batch = batch_of(train_ex, picked, matrix, masked)
        sampled = learn.sample(rng, q, options.negatives, log_q) if sampling else None
        diverged = f"at step {step}; nothing was written: give a smaller --lr"
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is said once, here
            try:
                loss, kept_ = learn.forward(params, batch, E, scale, sampled, heads=H)
            except ScaleError:
                raise TrainingError(f"the scores overflow {diverged}") from None
            if not math.isfinite(loss):
                raise TrainingError(f"the loss is {loss} {diverged}")
            adam.step(params, learn.backward(params, batch, E, scale, kept_))
        if not all(np.isfinite(P).all() for P in params.values()):
            raise TrainingError(f"the projections overflow {diverged}")
        losses.append(loss)
        held_loss = None
        if step % options.evaluate_every == 0 or step == steps:
            held_loss = mean_loss(params, held_ex, matrix, E, scale, H, masked)
            held_losses.append((step, held_loss))
        if progress is not None:
            progress(step, steps, loss, held_loss)
        if stopped():
            break
    if held_losses[-1][0] != step:
        held_losses.append((step, mean_loss(params, held_ex, matrix, E, scale, H, masked)))
    record = {"options": asdict(options), "steps": steps, "steps_done": step, "examples": int(len(train_ex.target)),
              "held_out_examples": int(len(held_ex.target)), "out_vocab": int(len(out)),
              "held_out_loss": [{"step": s, "loss": v} for s, v in held_losses],
              "train_loss_last": float(np.mean(losses[-50:])) if losses else None,
              "adam": {"beta1": adam.beta1, "beta2": adam.beta2, "eps": adam.eps},
              "vectors": vectors.name, "d": d, "d_k": options.d_k or d}
    return {"params": params, "initial": start, "out_rows": used[out[:, 0]], "record": record}


@dataclass
class Trained:
    """What run gives: the record the file keeps (and the summary shows), the .npz's bytes,
    and the probe before and after."""

    record: dict
    npz: bytes
    probe: dict  # {"before": probe(...), "after": probe(...)}


def run(text: str, vectors: Vectors, options: TrainOptions, corpus: dict, sentences: list[str], token: str, *,
        progress=None, stopped=lambda: False, untrained=None) -> Trained:
    """train on `text`, with the probe of `token` in `sentences` before and after, and the
    file's arrays: the projections, out_words and the record, which names the corpus
    (`corpus`, corpus_record's) and attncli's version. A probe that cannot run is an error
    before any step."""
    d, mask = vectors.dim, probe_mask(options)
    check_sizes(d, options.heads, options.d_k)  # before the probe, which splits by them too
    start = {"W_query": np.eye(d, options.d_k or d), "W_key": np.eye(d, options.d_k or d), "W_value": np.eye(d)}
    probe(start, vectors, sentences, token, options.heads, mask)
    result = train(text, vectors, options, progress=progress, stopped=stopped, untrained=untrained)
    record = {**result["record"], "corpus": corpus, "attncli": __version__}
    words = np.array([vectors.vocab.word(int(r)) for r in result["out_rows"]])
    arrays = {**result["params"], "out_words": words, "train": record_array(record)}
    probes = {"before": probe(result["initial"], vectors, sentences, token, options.heads, mask),
              "after": probe(result["params"], vectors, sentences, token, options.heads, mask)}
    return Trained(record, npz_bytes(arrays), probes)


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """A .npz of `arrays`, the same bytes for the same arrays: numpy.savez stamps each member
    with the time of writing, so the members are written here with a fixed one."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def corpus_record(path: str, data: bytes) -> dict:
    return {"path": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def record_array(record: dict) -> np.ndarray:
    """The run's record as a one-element unicode array: JSON a reader can load without pickle."""
    return np.array([json.dumps(record, sort_keys=True)])


def probe_mask(options: TrainOptions) -> str:
    """The mask the probe shows, as training saw the words: `--mask` of the other commands,
    except next with mask_self, which hides the future and the word itself ("causal+self")."""
    mask = SHOWN_WITH[options.objective]
    return "causal+self" if mask == "causal" and options.mask_self else mask


@one_order
def probe(params: dict[str, np.ndarray], vectors: Vectors, sentences: list[str], token: str,
          heads: int = 1, mask: str = "self") -> dict:
    """The probe word in each sentence under `params`: its top attended (the heads' mean,
    and each head's when there are several) and its context vector, and the cosine between
    its context vectors in the first two sentences; masked as training saw the words
    (probe_mask): for hide and mask, its own position, never among the keys."""
    d_k = params["W_query"].shape[1]
    scale = attention.default_scale(d_k // heads)
    shown, contexts = [], []
    for sentence in sentences:
        embedded = vectors.embed_sentence(sentence, Options())
        X = embedded.X.astype(np.float64)  # (T, d)
        T = len(X)
        try:
            i = find_position(embedded.tokens, embedded.oov, token, None, lowercase=not vectors.cased)
        except TokenError as e:  # its advice names options of other commands
            raise TokenError(f"--probe {sentence!r}: {str(e).split(';')[0]}; give a --token the sentence has, "
                             "with a vector") from None
        hidden = attention.mask(mask, T)  # (T, T)
        if hidden[i].all():
            why = ("is the first word of {s}: with --objective next and --mask-self it attends to nothing; give a "
                   "probe where it comes later") if "causal" in mask else (
                   "is the only word of {s} with a vector: its own position masked, it attends to nothing; give a "
                   "probe of two words or more")
            raise InputError(f"{token!r} " + why.format(s=repr(sentence)))
        hidden[0, 0] &= not hidden[0].all()  # the first word's row, empty under causal+self (and not the probe's)
        Q, K, V = (attention.project(X, params[w]) for w in ("W_query", "W_key", "W_value"))  # (T, d_k), twice, (T, d)
        _, alpha, Z = attention.multi_head(Q, K, V, heads, scale, 1.0, hidden)  # (H, T, T), (T, d)
        z = Z[i]  # (d,)

        def top(row: np.ndarray) -> list[dict]:  # the masked left out
            ranked = [j for j in attention.top_attended(row, T) if not hidden[i, j]][:3]
            return [{"token": embedded.tokens[j], "weight": float(row[j])} for j in ranked]

        entry = {"sentence": sentence, "top": top(alpha.mean(axis=0)[i])}
        if heads > 1:
            entry["heads"] = [top(alpha[h, i]) for h in range(heads)]
        shown.append(entry)
        contexts.append(z)
    cosine = float(cosines(np.stack(contexts))[0, 1])  # NaN where a context vector is zero: undefined
    return {"token": token, "mask": mask, "sentences": shown, "cosine": None if math.isnan(cosine) else cosine}
