"""A corpus to learned projections: examples for the hide objective, the training loop, the
held-out loss and the probe the user watches. No click, no rich: the caller gives a
progress callback and a stop flag.

Each example hides one word of a sentence and keeps the words within `window` of it
visible (learn.py: its query attends over them, and their context vector must predict
it). A step's loss is a sampled softmax over `negatives` draws of the output words (by
their frequency); the held-out loss is always the whole softmax's, the number to compare. The projections start as the identity (d_k = d), so step 0 is attention over the raw
vectors, the tool's untrained picture; b_out starts at the output words' log frequencies.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass

import numpy as np

from attncli import attention, learn, limits
from attncli.errors import AttncliError, InputError
from attncli.tokenize import is_punctuation, iter_tokens
from attncli.vectors import Vectors


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


MIN_EXAMPLES = 100  # fewer words with vectors (and neighbours) than this teach nothing


@dataclass
class Examples:
    query: np.ndarray  # (N,) the hidden word's row in the vectors
    context: np.ndarray  # (N, 2 window) the visible words' rows, -1 for none
    target: np.ndarray  # (N,) the hidden word's place in the output vocabulary


def check_heads(d: int, heads: int) -> None:
    """Heads split d, the vectors' size (W is d x d): refused where they cannot."""
    if d % heads:
        raise InputError(f"--heads {heads} does not divide d = {d}, the vectors' size; choose one of "
                         + ", ".join(str(h) for h in range(1, d + 1) if d % h == 0))


def working_bytes(options: TrainOptions, V_out: int, d: int, examples: int) -> int:
    """Memory training holds beside the vectors, in float64: the output words' vectors, bias
    and Adam's moments of each (V_out, d); a step's visible words, their keys and values and
    their gradients (about eight (B, 2 window, d) arrays); its logits and their softmax, twice
    (B, candidates); and the examples' rows (2 window + 2 a example, int64)."""
    B, m = options.batch, 2 * options.window
    candidates = V_out if options.negatives == 0 else min(options.negatives, V_out) + 1
    return 8 * (4 * V_out * (d + 1) + 8 * B * m * d + 4 * B * candidates + examples * (m + 2))


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


def examples_of(sentences: list[np.ndarray], out_rows: np.ndarray, window: int) -> Examples:
    """Every word of the output vocabulary in the sentences, hidden once each, with its
    neighbours within `window` visible."""
    place = {int(r): i for i, r in enumerate(out_rows)}
    query, context, target = [], [], []
    for s in sentences:
        T = len(s)
        for i in range(T):
            t = place.get(int(s[i]))
            if t is None:
                continue
            around = [int(s[j]) for j in range(max(0, i - window), min(T, i + window + 1)) if j != i]
            query.append(int(s[i]))
            context.append(around + [-1] * (2 * window - len(around)))
            target.append(t)
    return Examples(np.array(query, dtype=np.int64), np.array(context, dtype=np.int64).reshape(-1, 2 * window),
                    np.array(target, dtype=np.int64))


def batch_of(ex: Examples, picked: np.ndarray, matrix: np.ndarray) -> learn.Batch:
    rows = ex.context[picked]  # (B, m)
    pad = rows < 0
    C = matrix[np.where(pad, 0, rows)].astype(np.float64) * ~pad[..., None]  # (B, m, d)
    return learn.Batch(x=matrix[ex.query[picked]].astype(np.float64), C=C, pad=pad, target=ex.target[picked])


def mean_loss(params, ex: Examples, matrix, E, scale, heads: int = 1, most: int = 2000) -> float:
    """The held-out loss, over its first `most` examples, in batches."""
    n = min(len(ex.target), most)
    total = 0.0
    for start in range(0, n, 500):
        picked = np.arange(start, min(start + 500, n))
        total += learn.forward(params, batch_of(ex, picked, matrix), E, scale, heads=heads)[0] * len(picked)
    return total / n


def train(text: str, vectors: Vectors, options: TrainOptions, *, progress=None, stopped=lambda: False,
          untrained=None) -> dict:
    """Learn W_query, W_key, W_value (and b_out) on `text`; the arrays and a record of the run.
    untrained(loss) is told the held-out loss before any step, progress(step, steps, loss,
    held_out) is called as it goes; stopped() ends it early, after the step under way."""
    rng = np.random.default_rng(options.seed)
    sentences = sentences_of(text, vectors)
    order = rng.permutation(len(sentences))
    n_held = max(1, int(round(len(sentences) * options.holdout))) if len(sentences) > 1 else 0
    held, kept = [sentences[i] for i in order[:n_held]], [sentences[i] for i in order[n_held:]]
    out = output_vocabulary(kept, options.out_vocab)
    train_ex, held_ex = examples_of(kept, out[:, 0], options.window), examples_of(held, out[:, 0], options.window)
    if len(train_ex.target) < MIN_EXAMPLES or len(held_ex.target) == 0:
        raise InputError(f"the corpus gives {len(train_ex.target):,} examples to learn from and {len(held_ex.target):,} "
                         f"to check on; it needs at least {MIN_EXAMPLES} and 1: give more text, in lines of two words "
                         "or more that have vectors")
    matrix = vectors.matrix
    d, H = vectors.dim, options.heads
    check_heads(d, H)
    limits.require(working_bytes(options, len(out), d, len(train_ex.target) + len(held_ex.target)),
                   f"training with --batch {options.batch:,}, --window {options.window:,} and {len(out):,} output words",
                   "give a smaller --batch, --window or --out-vocab")
    E = matrix[out[:, 0]].astype(np.float64)  # (V_out, d): fixed, the output words' own vectors
    scale = attention.default_scale(d // H)
    params = {"W_query": np.eye(d), "W_key": np.eye(d), "W_value": np.eye(d),
              "b_out": np.log(out[:, 1] / out[:, 1].sum())}
    adam = learn.Adam(lr=options.lr)
    q = out[:, 1] / out[:, 1].sum()  # (V_out,): the sample's proposal, the words' frequencies
    sampling = 0 < options.negatives < len(out)
    before = mean_loss(params, held_ex, matrix, E, scale, H)
    if untrained is not None:
        untrained(before)
    losses, held_losses = [], [(0, before)]
    step = 0
    for step in range(1, options.steps + 1):
        picked = rng.integers(0, len(train_ex.target), size=options.batch)
        batch = batch_of(train_ex, picked, matrix)
        sampled = learn.sample(rng, q, options.negatives) if sampling else None
        loss, kept_ = learn.forward(params, batch, E, scale, sampled, heads=H)
        if not math.isfinite(loss):
            raise TrainingError(f"the loss is {loss} at step {step}; nothing was written: give a smaller --lr")
        adam.step(params, learn.backward(params, batch, E, scale, kept_))
        losses.append(loss)
        held_loss = None
        if step % options.evaluate_every == 0 or step == options.steps:
            held_loss = mean_loss(params, held_ex, matrix, E, scale, H)
            held_losses.append((step, held_loss))
        if progress is not None:
            progress(step, options.steps, loss, held_loss)
        if stopped():
            break
    if held_losses[-1][0] != step:
        held_losses.append((step, mean_loss(params, held_ex, matrix, E, scale, H)))
    record = {"options": asdict(options), "steps_done": step, "examples": int(len(train_ex.target)),
              "held_out_examples": int(len(held_ex.target)), "out_vocab": int(len(out)),
              "held_out_loss": [{"step": s, "loss": v} for s, v in held_losses],
              "train_loss_last": float(np.mean(losses[-50:])) if losses else None,
              "adam": {"beta1": adam.beta1, "beta2": adam.beta2, "eps": adam.eps},
              "vectors": vectors.name, "d": d}
    return {"params": params, "out_rows": out[:, 0], "record": record}


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


def probe(params: dict[str, np.ndarray], vectors: Vectors, sentences: list[str], token: str, heads: int = 1) -> dict:
    """The probe word in each sentence under `params`: its top attended (the mean over the
    heads) and its context vector, and the cosine between its context vectors in the first
    two sentences; its own position masked, as in training, where the hidden word is never
    among the keys (--mask self shows the same)."""
    from attncli.analyze import Options, embed_sentence, find_position

    scale = attention.default_scale(vectors.dim // heads)
    shown, contexts = [], []
    for sentence in sentences:
        embedded = embed_sentence(sentence, vectors, Options())
        X = embedded.X.astype(np.float64)  # (T, d)
        i = find_position(embedded.tokens, embedded.oov, token, None, lowercase=not vectors.cased, has_index=False)
        Qh, Kh, Vh = (attention.split_heads(attention.project(X, params[w]), heads)
                      for w in ("W_query", "W_key", "W_value"))  # (H, T, d/H) each
        alpha = attention.weights(attention.scores(Qh, Kh), scale, 1.0, attention.self_mask(len(X)))  # (H, T, T)
        z = attention.merge_heads(attention.context(alpha, Vh))[i]  # (d,)
        mean = alpha.mean(axis=0)  # (T, T)
        shown.append({"sentence": sentence, "top": [{"token": embedded.tokens[j], "weight": float(mean[i, j])}
                                                    for j in attention.top_attended(mean[i], 3)]})
        contexts.append(z)
    a, b = contexts[0], contexts[1]
    cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) if np.linalg.norm(a) * np.linalg.norm(b) else 0.0
    return {"token": token, "sentences": shown, "cosine": cosine}
