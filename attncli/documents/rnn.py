"""From a sentence to the `rnn` document: the seed's recurrent fold over its word vectors,
beside the last token's attention over the same inputs.
"""

from __future__ import annotations

import numpy as np

from attncli import attention, rnn
from attncli.encoder import Options, cell_bytes
from attncli.errors import InputError
from attncli.words.vectors import Vectors


# A computation expected to take longer than this is announced on stderr before it starts.
LONG_SECONDS = 10


def rnn_doc(sentence: str, vectors: Vectors, opts: Options = Options(), *, weights: dict[str, np.ndarray],
            origin: dict, warn=None) -> dict:
    """The `rnn` document: the seed's fold over the sentence (each state, and how strongly each
    input still moves the last one), beside the last token's attention over the same inputs.
    `origin` says where the weights came from: {"seed": S} or {"path": P}; warn(message) is
    told when the derivatives will take long."""
    embedded = vectors.embed_fitting(sentence, opts, cell_bytes(1, 0))
    X = embedded.X  # (T, d)
    (T, d), N = X.shape, len(weights["b_h"])
    seconds = rnn.influence_seconds(T, N, d)
    if warn is not None and seconds > LONG_SECONDS:
        warn(f"the exact derivatives of an RNN of hidden size {N:,} over {T:,} tokens take about "
             f"{seconds:,.0f} s here (Ctrl-C stops the run)")
    H = rnn.states(X, weights["W_hx"], weights["W_hh"], weights["b_h"])  # (T, N)
    with np.errstate(over="ignore", invalid="ignore"):
        influence = rnn.influence(H, weights["W_hx"], weights["W_hh"])  # (T,)
    if not (np.all(np.isfinite(H)) and np.all(np.isfinite(influence))):
        raise InputError("the RNN's weights are too large for these vectors: its states or their derivatives overflow")
    omega = attention.scores(X)  # (T, T), identity projections
    last = attention.weights(omega, attention.default_scale(vectors.dim), opts.temperature)[-1]  # (T,)
    return {
        "command": "rnn",
        "sentence": sentence,
        "tokens": embedded.tokens,
        "lookups": embedded.lookups,
        "oov": embedded.oov,
        "vectors": {"name": vectors.name, "dim": vectors.dim, "words": vectors.size},
        "rnn": {"hidden": int(H.shape[1]), **origin},
        "states": H.tolist(),
        "state_norms": np.linalg.norm(H, axis=1).tolist(),
        "influence": influence.tolist(),
        "attention": last.tolist(),
    }
