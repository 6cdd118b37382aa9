"""What attention runs over, and how it is asked: the options of a run (Options), one
sentence through every step (Attention), and the interface every source of attention
implements (Encoder): word vectors with their projections, a one-layer model
(words/encoder.py), and each trained model's family (models/encoder.py).

The documents (documents/, mixing/) and the corpus runs (corpus/) take an Encoder and ask
it; what differs between kinds of source lives in its implementation, never in an
isinstance here or there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Protocol

import numpy as np

from attncli.errors import AttncliError, OptionError, finite, positive, whole

if TYPE_CHECKING:
    from attncli.learning.projections import Projections

OOV_POLICIES = ("skip", "zero", "error")
MASKS = ("none", "causal", "self")


@dataclass(frozen=True)
class Options:
    """How to compute and report attention; the defaults are the CLI's.

    Checked when made: a value out of its range or of the wrong kind is an OptionError (a
    ValueError) naming the field, never a number quietly taken for another (a temperature
    below 0 would turn the weights upside down, a mask misspelt would be no mask). Numbers
    are kept as Python floats and ints."""

    scale: float | None = None  # None: 1/sqrt(d_k / heads)
    temperature: float = 1.0
    top_k: int = 3
    include_self: bool = False
    keep_punct: bool = False
    oov: str = "skip"  # skip | zero | error
    qkv: str = "identity"  # identity | random | a .npz path
    d_k: int | None = None  # None: d
    seed: int = 0
    heads: int = 1
    mask: str = "none"  # none | causal | self
    from_file: tuple[str, ...] = ()  # of "heads" and "mask": those taken from the --qkv file attncli train wrote

    def __post_init__(self):
        def keep(name: str, value) -> None:
            object.__setattr__(self, name, value)

        keep("scale", None if self.scale is None else finite("scale", self.scale))
        keep("temperature", positive("temperature", self.temperature))
        keep("top_k", whole("top_k", self.top_k, 1))
        for name in ("include_self", "keep_punct"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise OptionError(f"{name} must be True or False, got {getattr(self, name)!r}")
            keep(name, bool(getattr(self, name)))
        for name, choices in (("oov", OOV_POLICIES), ("mask", MASKS)):
            if getattr(self, name) not in choices:
                raise OptionError(f"{name} must be one of {', '.join(map(repr, choices))}, got {getattr(self, name)!r}")
        if isinstance(self.qkv, os.PathLike):
            keep("qkv", os.fspath(self.qkv))
        if not isinstance(self.qkv, str) or not self.qkv:
            raise OptionError(f"qkv must be 'identity', 'random' or the path of a .npz file, got {self.qkv!r}")
        keep("d_k", None if self.d_k is None else whole("d_k", self.d_k, 1))
        keep("seed", whole("seed", self.seed, 0))
        keep("heads", whole("heads", self.heads, 1))
        if not isinstance(self.from_file, (tuple, list)) or not set(self.from_file) <= {"heads", "mask"}:
            raise OptionError(f"from_file must name some of 'heads' and 'mask', got {self.from_file!r}")
        keep("from_file", tuple(self.from_file))


@dataclass
class Embedded:
    """A sentence's tokens that got a vector, their vectors, how each was found, and the
    tokens that had none."""

    tokens: list[str]
    X: np.ndarray  # (T, d) float32
    lookups: list[str]  # per token: "word", "subwords" (fastText n-grams) or "zero"
    oov: list[str]


@dataclass
class Attention:
    """One sentence through every step, each array as the seeds name it."""

    embedded: Embedded
    projections: Projections
    scale: float
    Q: np.ndarray  # (T, d_k) queries
    K: np.ndarray  # (T, d_k) keys
    V: np.ndarray  # (T, d_v) values (d_v = d_k, unless a file says otherwise)
    scores: np.ndarray  # (H, T, T) omega, per head
    weights: np.ndarray  # (H, T, T) alpha, per head
    context: np.ndarray  # (T, d_v) z, the heads' context vectors side by side
    mask: np.ndarray | None  # (T, T) True where masked
    shown: int | None = None  # the head the top-level matrices show (from 0); None: their mean
    layers: np.ndarray | None = None  # (L, H, T, T): every layer's weights (word vectors: their one), where kept
    hidden: np.ndarray | None = None  # (L + 1, T, D): a trained model's hidden states, every layer, where kept
    final: np.ndarray | None = None  # (T, D): a trained model's last hidden states, as shown
    pieces: object = None  # a trained model's models.files.Pieces

    @property
    def tokens(self) -> list[str]:
        return self.embedded.tokens

    @property
    def heads(self) -> int:
        return len(self.weights)

    @property
    def mean_scores(self) -> np.ndarray:
        """The scores shown: the heads' mean (the one head's own when H = 1), or the head chosen."""
        if self.shown is None and len(self.scores) > 1:
            return self.scores.mean(axis=0)  # (T, T)
        return self.scores[self.shown or 0]  # (T, T): the mean of one head is that head, to the bit

    @property
    def mean_weights(self) -> np.ndarray:
        """The weights shown, as mean_scores; each row still sums to 1."""
        if self.shown is None and len(self.weights) > 1:
            return self.weights.mean(axis=0)  # (T, T)
        return self.weights[self.shown or 0]  # (T, T)



def cell_bytes(heads: int, listed: int) -> int:
    """Memory one cell of a sentence's T x T matrices takes at a run's peak, measured with
    `scores --json` and `explain --json` (T = 1,000 to 2,000: 552 and 441 bytes a cell with
    one head): Steps I and II hold about six float64 arrays per head and two more for the
    means; every number a document lists costs about 120 bytes more, as a Python float in
    a list and then as JSON text. The estimate is kept a little above what was measured."""
    return 8 * (6 * heads + 2) + 130 * listed



class Encoder(Protocol):
    """Something attention runs over: it turns a text into pieces (tokens with vectors, or
    a model's word pieces) and runs a forward pass over them. Word vectors are a one-layer
    model whose attention is the seeds' Steps I-III over their projections.

    `opts` carries what a run asks of attention over word vectors (projections, heads,
    mask, scale, temperature) and what every document reports (top_k, include_self); a
    trained model's attention is its own, and it reads only the latter."""

    name: str  # for headers and the documents' "vectors" key
    dim: int  # d, or a model's d_model
    size: int  # the words of the vocabulary, or a model's word pieces
    cased: bool  # False: a token is lowercased to find it
    layers: int  # L: 1 over word vectors
    layer: int  # the layer shown, from 1
    # a trained model's layers: named in documents, a residual stream running on after each
    # attention, its projections its own; not word vectors' one attention over the run's --qkv
    layered: bool
    methods: tuple[str, ...]  # the measures of context mixing it can be taken apart by (mixing.documents)
    batches: bool  # whether attend_many gains by running sentences together (a model's BLAS): else one at a time

    def heads(self, opts: Options) -> int:
        """H, the heads a document lists: a model's own, else --heads."""

    def check(self, opts: Options) -> None:
        """The options' own errors, before a sentence is looked at."""

    def count(self, sentence: str, opts: Options) -> int:
        """The T of the sentence's T x T matrices, at most, before any of them is made."""

    def attend(self, sentence: str, opts: Options, *, listed: int = 0, keep: tuple[str, ...] = ()) -> Attention:
        """The sentence through every step, refused before anything T x T is made when it and
        the `listed` numbers a document writes a cell cannot fit in memory. The layer shown
        always; every layer's weights (`keep` "layers") or hidden states ("hidden") where the
        document reports them: a pass keeps only what its document needs."""

    def attend_many(self, sentences: list[str], opts: Options, *, listed: int = 0,
                    keep: tuple[str, ...] = ()) -> Iterator[tuple[int, Attention | AttncliError]]:
        """(k, sentences[k]'s Attention or the error that refuses it), for a corpus's lines,
        in whatever order the source computes them best."""

    def at(self, layer: int | None) -> Encoder:
        """The same source showing layer `layer` (from 1; None: the one it shows)."""

    def describe(self, att: Attention) -> dict:
        """The keys a document adds about the source, after those every document gives (its
        name and sizes, the projections, the mask): a model's layer, head and markers."""

    def heads_keys(self, att: Attention, layers: np.ndarray, layer: int | None, head: int | None) -> dict:
        """What `heads`' document adds of the weights `layers` (L', H', T, T) shown: a model's
        layer and head chosen, and each head's share on its markers."""

    def corpus_keys(self, precision: str) -> dict:
        """What stats' summary says of the source it ran over."""

    def markers(self, att: Attention) -> tuple[np.ndarray, np.ndarray]:
        """(cls, sep) (T,) bool: the markers an encoder puts first and after a sentence."""

    def passed_on(self, att: Attention) -> np.ndarray:
        """f^h(x_j) of every head and token (H, T, D): what each head passes on."""

    def blocks(self, att: Attention) -> list:
        """Every layer of the sentence in the parts context mixing takes apart (models.layers.Block)."""

    def predict(self, att: Attention, k: int) -> list[dict]:
        """The k likeliest next pieces after the sentence (a decoder's)."""

    def neighbors(self, v: np.ndarray, k: int, exclude: set[str]) -> list[dict]:
        """The words nearest the vector v (those of word vectors); none in a model's states."""

    def own(self, token: str) -> set[str]:
        """The words a token is, left out of its own nearest words."""


def attend(sentence: str, source: Encoder, opts: Options = Options(), *, listed: int = 0,
           keep: tuple[str, ...] = ()) -> Attention:
    """One sentence through every step: `source`'s own attend. `listed`: how many numbers per
    cell of the T x T matrices the caller will write out (a scores document: 2 + 2 H); with
    the arrays' own, that is checked against the memory available before anything T x T is
    made; `keep` as Encoder.attend's."""
    return source.attend(sentence, opts, listed=listed, keep=keep)


