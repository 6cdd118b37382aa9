"""What several test files share besides running the CLI (clirunner.py): independent
computations to hold attncli's numbers against, small vectors files written by hand, and
the environment of a real attncli process."""

from __future__ import annotations

import math
import os
import sys
import unicodedata
from pathlib import Path

import numpy as np

from clirunner import CLEAN_ENV

ENTRY_POINT = Path(sys.executable).parent / "attncli"  # the installed entry point of this environment

SENTENCE = "The earth is like an orange"
SENTENCE_TOKENS = ["the", "earth", "is", "like", "an", "orange"]

# "orange" the fruit, the colour, and a lunch: compare's sentences
FRUIT = SENTENCE
COLOUR = "Orange is a bright color"
LUNCH = "I ate an orange for lunch"

# 20 tokens, the longest 11 letters
TWENTY = ("The books that the professor recommended during the lecture on medieval history are very expensive "
          "for most of the students")
# 40 distinct words of the bundled GloVe, no punctuation
FORTY = ("the earth is like an orange and a bright color while cats sit on mats near old houses where children "
         "play games under tall green trees during warm summer days with friends from school after lunch every "
         "morning in spring")

# The words of a small vectors file: prefixes of one another ("or", "orange"), accented, and
# not Latin at all.
NINE_WORDS = ["the", "earth", "is", "like", "an", "orange", "or", "café", "東京"]


# --------------------------------------------------------------------------- independent computations


def vector_of(vectors, token: str) -> np.ndarray:
    """The float64 vector of a token, or zeros for one without a vector (--oov zero)."""
    key = vectors.key(token)
    return np.zeros(vectors.dim) if key is None else np.asarray(vectors.vector(key), dtype=np.float64)


def matrix_of(vectors, tokens) -> np.ndarray:
    return np.array([vector_of(vectors, t) for t in tokens])  # (T, d)


def fsum_dot(x, y) -> float:
    return math.fsum(float(a) * float(b) for a, b in zip(x, y))


def to_lists(M) -> list[list[float]]:
    return [[float(v) for v in row] for row in np.asarray(M)]


def loop_softmax(logits: list[float], allowed: list[bool]) -> list[float]:
    """A softmax over the allowed places of a row, 0 at the others, in Python floats."""
    top = max(v for v, ok in zip(logits, allowed) if ok)
    e = [math.exp(v - top) if ok else 0.0 for v, ok in zip(logits, allowed)]
    s = math.fsum(e)
    return [v / s for v in e]


def close(got, want, rtol=1e-12, atol=1e-14):
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=rtol, atol=atol)


def by_rule(row) -> list[int]:
    """A row's positions ranked as the tool ranks weights, by a loop independent of
    ranking.ranked: largest first, and values within ranking.TIE of their neighbour in
    that order (relative) a tie, taken in position order."""
    from attncli.ranking import TIE

    row = [float(v) for v in row]
    order = sorted(range(len(row)), key=lambda j: (-row[j], j))
    group, groups = 0, {}
    for before, j in zip([None, *order], order):
        if before is not None and row[before] - row[j] > TIE * max(abs(row[before]), abs(row[j])):
            group += 1
        groups[j] = group
    return sorted(order, key=lambda j: (groups[j], j))


def assert_ranked_within_float32(got: list[int], want: list[int], row, slack: float = 2e-6) -> None:
    """A float32 path's top list `got` against `want`, the float64 one of the same weights
    `row`: the same, but for the order among weights whose ties float32 cannot settle. Each
    position is put in a group of its neighbours by weight (in float64's order) no more than
    TIE + `slack` apart (relative; float32's weights are good to about 1e-6, and a gap of
    two of them to twice that): the two lists must give the same groups in the same order,
    any order within a group, so that a pair on either side of TIE, which float32 may see on
    the other, is free, and every other is held."""
    from attncli.ranking import TIE

    row = [float(v) for v in row]
    order = sorted(set(got) | set(want), key=lambda j: (-row[j], j))
    group, groups = 0, {}
    for before, j in zip([None, *order], order):
        if before is not None and row[before] - row[j] > (TIE + slack) * max(abs(row[before]), abs(row[j])):
            group += 1
        groups[j] = group
    assert len(set(got)) == len(got) and [groups[j] for j in got] == [groups[j] for j in want], (got, want)


def expected_top(weights_row, i: int, k: int, masked_row=None, include_self: bool = False) -> list[int]:
    """Largest first, ties (within ranking.TIE) to the earlier position; own position and
    masked ones left out."""
    order = by_rule(weights_row)
    keep = [j for j in order if (include_self or j != i) and (masked_row is None or not masked_row[j])]
    return keep[:k]


def bundled_words(vectors, first: int = 200, last: int = 6000) -> list[str]:
    """Plain lowercase words of the bundled GloVe that the tokenizer keeps whole."""
    words = [vectors.vocab.word(r) for r in range(first, last)]
    return [w for w in words if w.isascii() and w.isalpha() and len(w) > 1]


def punctuation(word: str) -> bool:
    return all(unicodedata.category(c)[0] == "P" for c in word)


def brute_nearest(rows: dict[str, np.ndarray], v, k: int, own: set[str]) -> list[tuple[str, float]]:
    """A loop over every row: cosine with v, the word itself, punctuation and zero rows left out."""
    v = np.asarray(v, dtype=np.float64)
    found = []
    for word, x in rows.items():
        x = np.asarray(x, dtype=np.float64)
        if word in own or punctuation(word) or not np.any(x):
            continue
        found.append((word, math.fsum(x * v) / (math.sqrt(math.fsum(x * x)) * math.sqrt(math.fsum(v * v)))))
    found.sort(key=lambda wc: -wc[1])
    return found[:k]


def random_X(T: int, d: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((T, d)).astype(np.float32)  # (T, d)


def collect(gen):
    """stream's blocks, concatenated: starts, top (T, k'), weights (T, k'), Z (T, d)."""
    blocks = list(gen)
    return ([b[0] for b in blocks], np.concatenate([b[1] for b in blocks]), np.concatenate([b[2] for b in blocks]),
            np.concatenate([b[3] for b in blocks]))


def flat(text: str) -> str:
    """Whitespace (line wraps included) collapsed to single spaces."""
    return " ".join(text.split())


# --------------------------------------------------------------------------- vectors files by hand


def matrix(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Values k/64: exact in float32 and in their shortest decimal form."""
    return (np.random.default_rng(seed).integers(-256, 256, size=(n, d)) / 64).astype(np.float32)  # (n, d)


def write_text(path: Path, words, M) -> Path:
    """A word2vec text file: its header, then each word and its row."""
    n, d = M.shape
    lines = [f"{n} {d}"] + [w + " " + " ".join(repr(float(x)) for x in row) for w, row in zip(words, M)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def save_npz(path: Path, **arrays) -> Path:
    np.savez(path, **arrays)
    return path


SAFETENSORS_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2"}


def edited_model(source: Path, folder: Path, change) -> Path:
    """A copy of the model folder `source` in `folder`, each tensor of its model.safetensors
    (an 8-byte little-endian header length, a JSON header, the data) replaced by
    change(name, array) where that gives an array (of the same shape; written in the
    tensor's own dtype), else kept as it was; a tensor of another dtype than
    SAFETENSORS_DTYPES' (I64 position ids, BF16) is kept as it is."""
    import json
    import shutil
    import struct

    shutil.copytree(source, folder)
    path = folder / "model.safetensors"
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header, data = json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] not in SAFETENSORS_DTYPES:
            continue
        start, end = info["data_offsets"]
        dtype = SAFETENSORS_DTYPES[info["dtype"]]
        new = change(name, np.frombuffer(bytes(data[start:end]), dtype=dtype).reshape(info["shape"]).copy())
        if new is not None:
            data[start:end] = np.asarray(new, dtype=dtype).reshape(info["shape"]).tobytes()
    path.write_bytes(raw[:8 + n] + bytes(data))
    return folder


def temporaries(folder: Path) -> list[Path]:
    """The temporary folders attncli is writing (or left) in a cache dir."""
    return sorted(folder.glob(".tmp-*")) if folder.exists() else []


# --------------------------------------------------------------------------- real processes


def process_env(**extra) -> dict:
    """This environment for a real attncli, without what changes colour, width or vectors
    (it keeps ATTNCLI_CACHE_DIR, conftest.py's), in UTF-8, with `extra` on top."""
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    env["PYTHONUTF8"] = "1"
    env.update(extra)
    return env
