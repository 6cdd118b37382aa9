"""From a sentence and word vectors to the documents the tool prints.

Each document is a plain dict of lists and floats: exactly the JSON the tool writes, and
what the tables are drawn from, so the two views can never disagree. The keys are a public
contract, documented in docs/reference/json.md.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass

import numpy as np

from attncli import attention, limits, projections, ranking, rnn
from attncli.errors import AttncliError, InputError, ModelError, OptionError, TokenError, finite, positive, whole
from attncli.tokenize import is_punctuation, iter_tokens, token_spans, tokenize, trimmed
from attncli.projections import Projections
from attncli.vectors import Embedded, TooManyTokens, Vectors, cosines, embed, unit_rows


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
    hidden: np.ndarray | None = None  # (L + 1, T, D): a trained model's hidden states, every layer
    pieces: object = None  # a trained model's models.files.Pieces
    layers: np.ndarray | None = None  # (L, H, T, T): a trained model's weights, every layer and head

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


@dataclass(frozen=True)
class Trained:
    """A trained model in place of word vectors (--model), and which of its attentions to
    show: layer `layer` (from 1), head `head` (from 1; None, their mean, as with --heads).
    Its tokens are the model's word pieces, with the markers its tokenizer adds (an
    encoder's [CLS] and [SEP], a decoder's <s> or none, as its files say); Steps I-III
    are the layer's own, computed by attention.py inside its family's forward pass
    (models/). A decoder's attention is masked as its family's mask(T, config) says
    (causal, and within a window where the model has one), and its logits give the next
    piece (predict)."""

    model: object  # models.files.Model
    layer: int
    head: int | None = None

    def __post_init__(self):
        config = self.model.config
        if not isinstance(self.layer, int) or not 1 <= self.layer <= config.layers:
            raise OptionError(f"layer must be from 1 to {config.layers} ({self.model.name} has {config.layers} "
                              f"layers), got {self.layer!r}")
        if self.head is not None and (not isinstance(self.head, int) or not 1 <= self.head <= config.heads):
            raise OptionError(f"head must be from 1 to {config.heads} ({self.model.name} has {config.heads} "
                              f"heads a layer), got {self.head!r}")

    # what _common says of the vectors: the model's word-piece embeddings stand for them
    name = property(lambda self: self.model.name)
    dim = property(lambda self: self.model.config.hidden)
    size = property(lambda self: self.model.config.vocab_size)
    cased = False

    def run(self, sentence: str, *, keep: tuple[int, ...] = (), listed: int = 0):
        """The sentence's word pieces and the model's forward pass over them, refused before
        it starts when the pass and the T x T numbers a document lists (`listed` a cell)
        cannot fit in memory."""
        pieces = self.pieces(sentence)
        config, T = self.model.config, len(pieces.ids)
        family = self.model.family
        limits.require(family.pass_bytes(T, config) + T * T * cell_bytes(config.heads, listed),
                       f"{self.model.name}'s forward pass over {T:,} word pieces", "give a shorter sentence")
        return pieces, family.forward(pieces.ids, self.model.weights, config, keep=keep)

    def pieces(self, sentence: str):
        """The sentence's word pieces (models.files.Pieces), refused when there are none or
        more than the model reads."""
        if not sentence.strip():
            raise InputError("the sentence is empty; give some words")
        pieces = self.model.encode(sentence)
        if len(pieces.ids) == 0:  # a tokenizer whose normalizer leaves nothing of the text, and that adds no marker
            raise InputError(f"the sentence gives {self.model.name} no word piece; give some words")
        return pieces

    def attend(self, sentence: str, *, listed: int = 0) -> Attention:
        """The sentence through the model, and layer `layer`'s attention as an Attention."""
        pieces, run = self.run(sentence, keep=(self.layer - 1,), listed=listed)
        return self._attention(pieces, run)

    def attend_many(self, sentences: list[str], *, listed: int = 0):
        """(k, sentences[k] as attend() gives it, or the AttncliError that refuses it) for
        each sentence, the refused first, then the others a batch at a time as the model
        runs over them (layers.forward_many): a corpus's lines, whose passes one at a time
        would leave a short sentence's products too small to keep the BLAS busy. Only a
        batch's passes are held while the caller reads them. `listed`: as attend()'s, the
        numbers a document lists a cell, checked against memory for each sentence."""
        from attncli.models import layers  # here: the model path is imported only with --model

        found = []
        for k, sentence in enumerate(sentences):
            try:
                pieces = self.pieces(sentence)
                T = len(pieces.ids)
                if listed:
                    limits.require(T * T * cell_bytes(self.model.config.heads, listed),
                                   f"the document of {T:,} word pieces", "give a shorter sentence")
                found.append((k, pieces))
            except AttncliError as e:
                yield k, e
        config = self.model.config
        pad = getattr(config, "padding_idx", None) or 0  # RoBERTa's padding piece, its positions' own; else any
        for b, run in layers.forward_many(self.model.family, [pieces.ids for _, pieces in found],
                                          self.model.weights, config, pad=pad, keep=(self.layer - 1,)):
            k, pieces = found[b]
            yield k, run if isinstance(run, AttncliError) else self._attention(pieces, run)

    def _attention(self, pieces, run) -> Attention:
        """Layer `layer`'s attention in the forward pass `run` over `pieces`, as an Attention."""
        config, l = self.model.config, self.layer - 1
        steps = run.steps[l]
        proj = Projections(kind="model", path=self.model.name, **self.projections(l))
        embedded = Embedded(tokens=list(pieces.pieces), X=run.hidden[l],  # the layer's input X_{l-1}
                            lookups=["special" if s else "piece" for s in pieces.special], oov=[])
        shown = None if self.head is None else self.head - 1
        Z = steps["context"] if shown is None else steps["Z"][shown]  # (T, D), or the head's own (T, d_head)
        masked = self.model.family.mask(len(pieces.ids), config) if self.model.causal else None  # (T, T)
        return Attention(embedded, proj, float(attention.default_scale(config.d_head)), steps["Q"], steps["K"],
                         steps["V"], steps["scores"], steps["weights"], Z, masked,
                         shown=shown, hidden=run.hidden, pieces=pieces, layers=run.weights)

    def projections(self, l: int) -> dict[str, dict[str, np.ndarray]]:
        """Layer l's W and b (Projections' fields), the keys' and values' as the query heads
        use them: with grouped-query attention each key/value head's columns written out
        for every query head it serves (attention.share_heads, as the steps' K and V are),
        so that d_k is every head's queries' and keys' width, and the values' too."""
        H, KV = self.model.config.heads, self.model.config.key_heads
        W, b = self.model.family.projections(self.model.weights, l)
        if KV != H:  # (D, KV d_head) -> (D, H d_head), and the biases (KV d_head,) -> (H d_head,)
            W = {**W, **{n: attention.share_heads(W[n], KV, H) for n in ("W_key", "W_value")}}
            b = {**b, **{n: attention.share_heads(b[n][None], KV, H)[0] for n in ("b_key", "b_value") if n in b}}
        return {"W": W, "b": b}

    def describe(self, att: Attention) -> dict:
        """What a model adds to a document's keys; its key/value heads where its query heads
        share them, d_head where it is not d_model / heads, and a decoder's mask in
        place of --mask's."""
        doc = {"model": self.about(), "layer": self.layer, "head": self.head, "special": list(att.pieces.special),
               "offsets": [list(o) for o in att.pieces.offsets]}
        return doc if att.mask is None else {**mask_keys(att.mask), **doc}

    def about(self) -> dict:
        """The document's `model`: its name, layers, heads and size; the commit of a model from
        the Hugging Face cache; its key/value heads where its query heads share them, and
        d_head where it is not d_model / heads."""
        c = self.model.config
        model = {"name": self.model.name, "layers": c.layers, "heads": c.heads, "d_model": c.hidden}
        if self.model.revision is not None:  # the cache's snapshot that ran: what --revision pins
            model["revision"] = self.model.revision
        if c.key_heads != c.heads:
            model["kv_heads"] = c.key_heads
        if c.d_head * c.heads != c.hidden:
            model["d_head"] = c.d_head
        return model

    def predict(self, att: Attention, k: int) -> list[dict]:
        """A decoder's k likeliest next pieces after the sentence, likeliest first: the softmax
        of the logits at its last piece (before a marker its tokenizer puts after it), from
        that piece's final (normed) hidden state."""
        if not self.model.causal:
            raise OptionError(f"{self.model.name} is an encoder: it predicts no next piece")
        family, config = self.model.family, self.model.config
        last = att.pieces.last
        z = family.logits(att.hidden[-1][last:last + 1], self.model.weights, config)[0]  # (V,)
        p, logp = attention.softmax(z), attention.log_softmax(z)  # (V,) each
        top = ranking.ranked(z)[:k]  # ties: the smaller id first
        return [{"token": self.model.piece(int(i)), "id": int(i), "probability": float(p[i]),
                 "logprob": float(logp[i])} for i in top]


def mask_keys(mask: np.ndarray) -> dict:
    """What a document says of a model's mask (T, T), True where piece i may not attend to
    piece j: {"mask": "causal"}, or, where a row sees at most W pieces (itself and the W - 1
    before it) and W < T, {"mask": "causal+window", "window": W}: the views draw the masked
    cells from these keys alone. A mask of another shape is refused: nothing could show it."""
    T = len(mask)
    window = int((~mask).sum(axis=1).max())  # the most pieces a row attends to
    if not np.array_equal(mask, attention.causal_mask(T) | attention.window_mask(T, window - 1)):
        raise ModelError("the model's attention mask is neither causal nor causal within a window, the masks "
                         "attncli shows")
    return {"mask": "causal"} if window >= T else {"mask": "causal+window", "window": window}


def embed_sentence(sentence: str, vectors: Vectors, opts: Options, *, most: int | None = None,
                   list_missing: bool = True) -> Embedded:
    """The sentence's tokens, split as the vectors were made, and their vectors X (T, d);
    TooManyTokens past `most` tokens with vectors; `list_missing` as embed's."""
    if not sentence.strip():
        raise InputError("the sentence is empty; give some words")
    tokens = (t for t in iter_tokens(sentence, lowercase=not vectors.cased) if opts.keep_punct or not is_punctuation(t))
    first = next(tokens, None)
    if first is None:
        raise InputError("the sentence holds only punctuation, which is left out; --keep-punct keeps it")
    return embed(itertools.chain([first], tokens), vectors, oov=opts.oov, most=most, list_missing=list_missing)


def count_tokens(sentence: str, vectors: Vectors | Trained, opts: Options) -> int:
    """The T of the sentence's T x T matrices, at most (a token without a vector counted too),
    known before any of them is made: its word pieces with a model, else its tokens."""
    if isinstance(vectors, Trained):
        return len(vectors.model.encode(sentence).ids)
    tokens = iter_tokens(sentence, lowercase=not vectors.cased)
    return sum(1 for t in tokens if opts.keep_punct or not is_punctuation(t))


def check_options(vectors: Vectors | Trained, opts: Options) -> None:
    """The attention options' own errors (a --heads that does not divide d_k, a --qkv file
    that does not fit the vectors) now, before a sentence is looked at; the projections are
    kept for the sentences (projections.resolve is cached)."""
    if not isinstance(vectors, Trained):
        projections.resolve(opts.qkv, vectors.dim, opts.d_k, opts.seed, opts.heads)


def heads_shown(vectors: Vectors | Trained, opts: Options) -> int:
    """How many heads a document lists: a model's own, else --heads."""
    return vectors.model.config.heads if isinstance(vectors, Trained) else opts.heads


def cell_bytes(heads: int, listed: int) -> int:
    """Memory one cell of a sentence's T x T matrices takes at a run's peak, measured with
    `scores --json` and `explain --json` (T = 1,000 to 2,000: 552 and 441 bytes a cell with
    one head): Steps I and II hold about six float64 arrays per head and two more for the
    means; every number a document lists costs about 120 bytes more, as a Python float in
    a list and then as JSON text. The estimate is kept a little above what was measured."""
    return 8 * (6 * heads + 2) + 130 * listed


UNASKED = 1 << 20  # bytes a sentence's T x T matrices may take before the system is asked for room


def embed_fitting(sentence: str, vectors: Vectors, opts: Options, per_cell: int) -> Embedded:
    """embed_sentence, refusing a sentence whose T x T matrices, at `per_cell` bytes a cell,
    cannot fit in the memory available: the count stops at the most that fit.

    A short sentence's matrices (a megabyte at most, as Python's own objects take) are made
    without asking: the question, /proc/meminfo read again, cost batch a tenth of its time."""
    try:
        return embed_sentence(sentence, vectors, opts, most=math.isqrt(UNASKED // per_cell))
    except TooManyTokens:
        pass
    most = math.isqrt(limits.available() // per_cell)
    try:
        return embed_sentence(sentence, vectors, opts, most=most)
    except TooManyTokens:
        raise limits.ResourceError(
            f"the sentence holds more than {most:,} tokens with vectors: its T x T matrices would need more than "
            f"{limits.size(per_cell * (most + 1) ** 2)} of memory, and {limits.size(limits.available())} is "
            "available; give a shorter sentence (attncli scores --file DOC.txt streams a long text a block of "
            "rows at a time)") from None


def attend(sentence: str, vectors: Vectors | Trained, opts: Options, *, listed: int = 0) -> Attention:
    """One sentence through every step. `listed`: how many numbers per cell of the T x T
    matrices the caller will write out (a scores document: 2 + 2 H); with the arrays'
    own, that is checked against the memory available before anything T x T is made."""
    if isinstance(vectors, Trained):
        return vectors.attend(sentence, listed=listed)
    proj = projections.resolve(opts.qkv, vectors.dim, opts.d_k, opts.seed, opts.heads)
    d_k, H = proj.describe(vectors.dim)["d_k"], opts.heads
    embedded = embed_fitting(sentence, vectors, opts, cell_bytes(H, listed))
    Q, K, V = proj.apply(embedded.X)  # (T, d_k), (T, d_k), (T, d_v)
    T = len(Q)
    scale = attention.default_scale(d_k // H) if opts.scale is None else opts.scale
    mask = None if opts.mask == "none" else attention.mask(opts.mask, T)  # (T, T)
    if opts.mask == "self" and T < 2:
        raise InputError(_ALONE.format(what="the sentence"))
    omega, alpha, Z = attention.multi_head(Q, K, V, H, scale, opts.temperature, mask,
                                           check=lambda omega: proj.check_finite("the scores Q K^T", omega))
    proj.check_finite("the context vectors A V", Z)
    return Attention(embedded, proj, float(scale), Q, K, V, omega, alpha, Z, mask)


_ALONE = ("with --mask self a token attends only to the others, and {what} has one token with a vector; "
          "give a longer one, or another --mask")


def _common(command: str, sentence: str, vectors: Vectors | Trained, att: Attention, opts: Options) -> dict:
    if isinstance(vectors, Trained):
        return {**_static_common(command, sentence, vectors, att, opts), **vectors.describe(att)}
    return _static_common(command, sentence, vectors, att, opts)


def _static_common(command: str, sentence: str, vectors, att: Attention, opts: Options) -> dict:
    return {
        "command": command,
        "sentence": sentence,
        "tokens": att.tokens,
        "lookups": att.embedded.lookups,
        "oov": att.embedded.oov,
        "vectors": {"name": vectors.name, "dim": vectors.dim, "words": vectors.size},
        "qkv": {**att.projections.describe(vectors.dim), "heads": att.heads,
                **({"from_file": list(opts.from_file)} if opts.from_file else {})},
        "mask": opts.mask,
        "scale": att.scale,
        "temperature": opts.temperature,
    }


def _top(att: Attention, weights: np.ndarray, i: int, opts: Options) -> list[dict]:
    """Row i's top attended in `weights` (T, T): its own position and masked ones left out."""
    exclude = None if opts.include_self else i
    masked = None if att.mask is None else att.mask[i]
    return [
        {"token": att.tokens[j], "index": j, "weight": float(weights[i, j])}
        for j in attention.top_attended(weights[i], opts.top_k, exclude, masked)
    ]


def _tops(att: Attention, weights: np.ndarray, opts: Options) -> list[list[dict]]:
    """Every row's top attended in `weights` (T, T), as _top gives them one row at a time."""
    rows, values = attention.top_attended_rows(weights, opts.top_k, opts.include_self, att.mask)
    tokens = att.tokens
    return [[{"token": tokens[j], "index": j, "weight": w} for j, w in zip(row, ws)] for row, ws in zip(rows, values)]


def scores_listed(opts: Options, more: bool = False) -> int:
    """The numbers a scores document lists a cell of its T x T matrices (the memory check's)."""
    return 2 + 2 * opts.heads + (2 if more else 0)


def scores_doc(sentence: str, vectors: Vectors | Trained, opts: Options = Options(), *, rollout: bool = False,
               norms: bool = False, words: bool = False, predict: int = 0, att: Attention | None = None) -> dict:
    """The `scores` document: the whole T x T scores and weights and each token's top
    attended, for every head under `heads` and, at the top, their mean (with one head, its own).
    `rollout` adds the attention rollout up to the layer shown; `norms` what each token
    sends each other, ||alpha_ij f(x_j)|| (attention.rollout, attention.weighted_norms);
    `predict`, a decoder's likeliest next pieces, that many (_predicted). `att`: the
    sentence's Attention where it was computed already (Trained.attend_many's, a batch's)."""
    if att is None:
        att = attend(sentence, vectors, opts, listed=scores_listed(opts, rollout or norms))
    mean = att.mean_weights  # (T, T), once: a mean per row would make a long sentence O(T^3)
    shown = {"scores": att.mean_scores.tolist(), "weights": mean.tolist(), "top": _tops(att, mean, opts)}
    if att.heads == 1 and att.shown is None:  # the mean of one head is that head, to the bit: its lists serve twice
        heads = [dict(shown)]
    else:
        heads = [{"scores": om.tolist(), "weights": al.tolist(), "top": _tops(att, al, opts)}
                 for om, al in zip(att.scores, att.weights)]
    doc = {
        **_common("scores", sentence, vectors, att, opts),
        **shown,
        "include_self": opts.include_self,  # whether a `top` may hold the token's own position
        "heads": heads,
    }
    if rollout:
        # a model's layers up to the one shown; over word vectors, the one layer there is
        layers = att.weights[None] if att.layers is None else att.layers[:vectors.layer]  # (l, H, T, T)
        doc["rollout"] = attention.rollout(layers.mean(axis=1))[-1].tolist()  # (T, T)
    if norms:
        F = _passed_on(att, vectors)  # (H, T, D)
        per_head = attention.weighted_norms(att.weights, F)  # (H, T, T)
        doc["norms"] = (per_head[att.shown] if att.shown is not None else attention.summed_norms(att.weights, F)).tolist()
        for head, M in zip(doc["heads"], per_head):
            head["norms"] = M.tolist()
    doc.update(_predicted(att, vectors, predict))
    return words_doc(doc, sentence, att, opts) if words else doc


def _predicted(att: Attention, vectors, k: int) -> dict:
    """{"predict": the k likeliest next pieces} of a decoder (Trained.predict), or nothing for k = 0."""
    if not k:
        return {}
    if not isinstance(vectors, Trained):
        raise OptionError("predict gives the next pieces a decoder model predicts; word vectors predict none")
    return {"predict": vectors.predict(att, k)}


def _passed_on(att: Attention, vectors) -> np.ndarray:
    """f^h(x_j) of every head and token (H, T, D): a model's values through its output
    projection; over word vectors, the values themselves."""
    if isinstance(vectors, Trained):
        return vectors.model.family.passed_on(att.V, vectors.model.weights, vectors.layer - 1, vectors.model.config)
    return attention.in_own_columns(att.V, att.heads)  # (H, T, d_v)


def word_groups(sentence: str, pieces) -> tuple[list[list[int]], list[str]]:
    """The word pieces of each word, in order, and each word's text: a word is where the
    model's pieces and attncli's own tokens overlap, merged until no piece or token
    straddles two words, so that WordPiece's "didn ' t" and the Penn Treebank's "did n't"
    meet in "didn't". A piece's span is read without the white space at its ends (a
    byte-level BPE's "Ġearth" holds the space before it where its offsets are not trimmed),
    and a piece that spans nothing else (RoBERTa's "Ġ" alone) goes with the word after it.
    The model's markers ([CLS], [SEP]; <s>, </s>) are words of their own, named as pieces."""
    spans = [trimmed(sentence, *o) for o in pieces.offsets]
    words = [s for s, special in zip(spans, pieces.special) if not special and s[0] < s[1]]
    words += [s for s in token_spans(sentence, tokenize(sentence, lowercase=False)) if s is not None]
    merged: list[list[int]] = []
    for start, end in sorted(words):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    merged = merged or [list(trimmed(sentence, 0, len(sentence)))]  # no piece spans a character: one word
    groups: dict[int, list[int]] = {}  # a word's place in merged (a marker's: -1 - its own) -> its pieces
    for i, (span, special) in enumerate(zip(spans, pieces.special)):
        groups.setdefault(-1 - i if special else _word_of(span, merged), []).append(i)
    labels = [pieces.pieces[i[0]] if key < 0 else sentence[merged[key][0]:merged[key][1]] for key, i in groups.items()]
    return list(groups.values()), labels


def _word_of(span: tuple[int, int], merged: list[list[int]]) -> int:
    """Which of the words (merged, in order) the piece at `span` is of: the one that holds it
    or, for a piece that spans nothing, the first that ends after it (else the last)."""
    start, end = span
    if start == end:
        return next((k for k, (_, b) in enumerate(merged) if start < b), len(merged) - 1)
    return next(k for k, (a, b) in enumerate(merged) if a <= start and end <= b)


def merge_words(M: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """Attention between words from attention between pieces, as Clark et al. ("What Does
    BERT Look At?", 2019, 4.1) merge it: attention to a word is the sum over its pieces,
    attention from a word the mean over its pieces; rows still sum to 1.
    M (..., T, T) -> (..., U, U) for U words."""
    T = M.shape[-1]
    G = np.zeros((len(groups), T))  # (U, T): 1 where piece t is of word u
    for u, group in enumerate(groups):
        G[u, group] = 1.0
    to_words = M @ G.T  # (..., T, U)
    return (G / G.sum(axis=1, keepdims=True)) @ to_words  # (..., U, U)


def words_doc(doc: dict, sentence: str, att: Attention, opts: Options) -> dict:
    """A scores document over words instead of word pieces (--words): its weights merged by
    merge_words, each row's share on the markers under `special_share`; the scores,
    which no rule merges, left out."""
    groups, labels = word_groups(sentence, att.pieces)
    special = [all(att.pieces.special[i] for i in g) for g in groups]
    weights = merge_words(att.weights, groups)  # (H, U, U)
    mean = weights.mean(axis=0) if att.shown is None else weights[att.shown]  # (U, U)
    # a decoder's: no word attends to a later one (a sliding window over pieces is no band of words)
    masked = None if att.mask is None else attention.causal_mask(len(groups))  # (U, U)
    words = Attention(Embedded(labels, np.zeros((len(labels), 0)), ["word"] * len(labels), []), att.projections,
                      att.scale, att.Q, att.K, att.V, weights, weights, att.context, masked, shown=att.shown)
    out = {k: v for k, v in doc.items() if k not in ("scores", "heads", "top", "weights", "offsets", "lookups",
                                                     "window")}
    if masked is not None:
        out["mask"] = "causal"
    out.update(tokens=labels, special=special, pieces=[[att.tokens[i] for i in g] for g in groups],
               weights=mean.tolist(), top=_tops(words, mean, opts),
               special_share=mean[:, special].sum(axis=1).tolist(),
               heads=[{"weights": w.tolist(), "top": _tops(words, w, opts)} for w in weights])
    return out


def heads_doc(sentence: str, vectors: Vectors | Trained, opts: Options = Options(), *,
              layer: int | None = None, head: int | None = None) -> dict:
    """The `heads` document: the weights (L, H, T, T) of every layer's every head at a glance
    (one layer over word vectors, its --heads heads), or of the one `layer` and/or the one
    `head` (from 1) a model's --layer and --head choose, which "layer" and "head" say (null:
    every one); with a model, what share of each head's attention goes to its markers ([CLS]
    and [SEP]), where an encoder's head with nothing to do puts it, and with a decoder the
    share on its first piece, the attention sink of Xiao et al. (2023), where a decoder's does.
    (mixing.heads_doc adds each head's ablation effect.)"""
    H = vectors.model.config.heads if isinstance(vectors, Trained) else opts.heads
    L = vectors.model.config.layers if isinstance(vectors, Trained) else 1
    att = attend(sentence, vectors, opts, listed=(1 if layer else L) * (1 if head else H))
    layers = att.weights[None] if att.layers is None else att.layers  # (L, H, T, T)
    layers = layers[slice(layer - 1, layer) if layer else slice(None), slice(head - 1, head) if head else slice(None)]
    doc = {**_common("heads", sentence, vectors, att, opts), "weights": layers.tolist()}
    if isinstance(vectors, Trained):
        doc["layer"], doc["head"] = layer, head
    else:  # one layer, every head of it
        for key in ("layer", "head"):
            doc.pop(key, None)
    if att.pieces is not None:
        special = np.array(att.pieces.special)  # (T,)
        doc["special_share"] = layers[..., special].sum(axis=-1).mean(axis=-1).tolist()  # (L, H)
        if vectors.model.causal:
            doc["first_share"] = layers[..., 0].mean(axis=-1).tolist()  # (L, H)
    return doc


def find_position(tokens: list[str], oov: list[str], token: str | None, index: int | None, *, lowercase: bool,
                  names: list[str | None] | None = None) -> int:
    """The position of --token (and/or --index) among the tokens that got a vector, each
    found by its name in `names` where given (a model's word piece by the text it stands
    for, Pieces.texts: RoBERTa's "Ġbank" by "bank"; None, found by none), else by itself."""
    if index is not None and index >= len(tokens):
        raise TokenError(f"--index {index} is out of range: the sentence has {len(tokens):,} tokens with vectors (0 to {len(tokens) - 1:,})")
    if token is None:
        return index
    parts = tokenize(token, lowercase=lowercase)
    if len(parts) != 1:
        raise TokenError(f"--token takes one token, and {token!r} splits into {len(parts)}: {' '.join(parts) or '(nothing)'}")
    word = parts[0]
    keys = tokens if names is None else [n.lower() if lowercase and n else n for n in names]
    positions = [i for i, t in enumerate(keys) if t == word]
    if index is not None:
        if keys[index] != word:
            raise TokenError(f"the token at --index {index} is {tokens[index]!r}, not {word!r}" + _positions_hint(word, positions))
        return index
    if not positions:
        if word in oov:
            raise TokenError(f"{word!r} has no vector, so it has no attention; try another token or --oov zero")
        shown = " ".join(tokens[:20]) + (f" … ({len(tokens):,} in all)" if len(tokens) > 20 else "")
        raise TokenError(f"{word!r} is not among the tokens: {shown}")
    if len(positions) > 1:
        raise TokenError(f"{word!r} occurs more than once" + _positions_hint(word, positions))
    return positions[0]


def token_position(att: Attention, vectors: Vectors | Trained, token: str | None, index: int | None) -> int:
    """find_position in a sentence's attention: a model's pieces found by their text."""
    return find_position(att.tokens, att.embedded.oov, token, index, lowercase=not vectors.cased,
                         names=None if att.pieces is None else att.pieces.texts)


def _positions_hint(word: str, positions: list[int]) -> str:
    if not positions:
        return ""
    return f"; {word!r} is at " + ", ".join(f"--index {i}" for i in positions)


def context_doc(
    sentence: str,
    vectors: Vectors,
    opts: Options = Options(),
    *,
    token: str | None = None,
    index: int | None = None,
    all_contexts: bool = False,
    neighbors: int = 5,
    predict: int = 0,
) -> dict:
    """The `context` document: one token's weights, top attended, context vector and the words
    nearest to it; with `all_contexts`, every token's context vector as well (and then the
    token may be left out); `predict` as scores_doc's."""
    att = attend(sentence, vectors, opts)
    doc = _common("context", sentence, vectors, att, opts)
    if token is not None or index is not None:
        i = token_position(att, vectors, token, index)
        doc.update(_token_fields(att, vectors, opts, i, neighbors))
    if all_contexts:
        doc["contexts"] = att.context.tolist()
    doc.update(_predicted(att, vectors, predict))
    return doc


def _token_fields(att: Attention, vectors: Vectors, opts: Options, i: int, neighbors: int) -> dict:
    """What `context` says of token i: its weights, top attended, context vector, neighbours."""
    if isinstance(vectors, Trained):  # its vectors are a layer's hidden states: no words lie near them
        in_word_space, own = False, set()
    else:
        own = {vectors.key(att.tokens[i]) or att.tokens[i]}
        # a context vector is a sum of value vectors: in word space only when V = X
        in_word_space = att.projections.word_space
    return {
        "token": att.tokens[i],
        "index": i,
        "weights": att.mean_weights[i].tolist(),
        "top": _top(att, att.mean_weights, i, opts),
        "include_self": opts.include_self,
        "heads": [{"weights": al[i].tolist(), "top": _top(att, al, i, opts)} for al in att.weights],
        "context": att.context[i].tolist(),
        "neighbors": _neighbors(vectors, att.context[i], neighbors, own) if in_word_space else [],
        "token_neighbors": [] if isinstance(vectors, Trained) else _neighbors(vectors, att.embedded.X[i], neighbors, own),
    }


def json_lists(M: np.ndarray) -> list:
    """M as (nested) lists of floats, None (JSON's null) where a number is undefined (NaN)."""
    M = np.asarray(M, dtype=np.float64)
    nan = np.isnan(M)
    return M.tolist() if not nan.any() else np.where(nan, None, M.astype(object)).tolist()


def _cosine_lists(M: np.ndarray) -> list[list[float | None]]:
    """vectors.cosines of M's rows as lists, None (JSON's null) where a cosine is undefined."""
    return json_lists(cosines(M))


def _undefined(noun: str, token: str, M: np.ndarray, after: str = "") -> list[str]:
    """The note that says which sentences' `noun` (a row of M) of `token` has no direction, if any."""
    zero = [str(n + 1) for n, row in enumerate(unit_rows(M)) if not np.isfinite(row).all()]
    if not zero:
        return []
    many = len(zero) > 1
    which = f"sentences {', '.join(zero[:-1])} and {zero[-1]}" if many else f"sentence {zero[0]}"
    return [f"the {noun}{'s' if many else ''} of {token!r}{after} in {which} {'are' if many else 'is'} zero: "
            f"{'their' if many else 'its'} cosines are undefined (null in JSON, a dash in a table)"]


def settled_note(opts: Options) -> str:
    """What a run took from the --qkv file attncli train wrote: the heads and the mask it was
    trained with, as opts.from_file names them."""
    taken = " and ".join(f"--{name} {getattr(opts, name)}" for name in opts.from_file)
    others = " or ".join(f"--{name}" for name in opts.from_file)
    return f"{opts.qkv} is shown with {taken}, as attncli train trained it; give {others} to show it otherwise"


def compare_doc(sentences: list[str], vectors: Vectors, opts: Options = Options(), *, token: str,
                neighbors: int = 5, indices: list[int | None] | None = None) -> dict:
    """The `compare` document: one token in several sentences, one `context` document each, and
    the cosines between its context vectors beside those between its raw vectors; `indices`,
    the token's position in each sentence (--index; None: where it occurs once)."""
    k = len(sentences)
    if indices is not None and len(indices) != k:
        raise OptionError(f"indices must give a position for each of the {k} sentences, got {len(indices)}")
    limits.require(k * k * 2 * 110, f"comparing {k:,} sentences (two {k:,} x {k:,} tables of cosines)",
                   "compare fewer sentences at a time")
    docs, raw, ctx, hidden = [], [], [], []
    for n, sentence in enumerate(sentences, start=1):
        try:
            att = attend(sentence, vectors, opts)
            i = token_position(att, vectors, token, indices[n - 1] if indices else None)
        except AttncliError as e:
            raise type(e)(f"sentence {n} ({sentence!r}): {e}") from None
        docs.append({**_common("context", sentence, vectors, att, opts), **_token_fields(att, vectors, opts, i, neighbors)})
        raw.append(att.embedded.X[i])
        ctx.append(att.context[i])
        if att.hidden is not None:
            hidden.append(att.hidden[:, i])  # (L + 1, D)
    word = docs[0]["token"]
    ctx, raw = np.array(ctx, dtype=np.float64), np.array(raw, dtype=np.float64)  # (k, d_v), (k, d)
    doc = {
        "command": "compare",
        "token": word,
        "sentences": docs,
        "context_cosine": _cosine_lists(ctx),
        "raw_cosine": _cosine_lists(raw),
        "notes": ([settled_note(opts)] if opts.from_file else []) + _undefined("context vector", word, ctx)
        + _undefined("raw vector", word, raw),
    }
    if hidden:  # the word's hidden state after the embeddings (0) and after each layer (1 .. L)
        states = np.stack(hidden, axis=1)  # (L + 1, k, D)
        doc["hidden_cosine"] = [_cosine_lists(layer) for layer in states]
        doc["notes"] += [note for l, layer in enumerate(states)
                         for note in _undefined("hidden state", word, layer,
                                                f" after layer {l}" if l else " after the embeddings")]
    return doc


def neighbors_doc(word: str, vectors: Vectors, opts: Options = Options(), *, k: int = 10,
                  sentence: str | None = None, index: int | None = None) -> dict:
    """The `neighbors` document: the vocabulary words nearest (cosine) a word's vector or, with
    a sentence, that word's context vector in it (at `index`, where it occurs more than once)."""
    doc = {"command": "neighbors", "vectors": {"name": vectors.name, "dim": vectors.dim, "words": vectors.size}}
    if sentence is None:
        parts = tokenize(word, lowercase=not vectors.cased)
        key = vectors.key(parts[0]) if len(parts) == 1 else None
        if key is None:
            limited = (vectors.meta or {}).get("limit")
            where = f"the first {limited:,} words of {vectors.name} (--limit {limited})" if limited else vectors.name
            raise TokenError(f"{word!r} is not a word of {where}; try another word or --vectors")
        return {**doc, "word": key, "neighbors": _neighbors(vectors, vectors.vector(key), k, {key})}
    att = attend(sentence, vectors, opts)
    i = token_position(att, vectors, word, index)
    if not att.projections.word_space:
        raise TokenError("nearest words of a context vector need identity projections, or ones attncli train "
                         "learned: with other --qkv it is a sum of value vectors, not a word vector")
    own = {vectors.key(att.tokens[i]) or att.tokens[i]}
    return {**doc, "word": att.tokens[i], "sentence": sentence, "index": i,
            "context": att.context[i].tolist(), "neighbors": _neighbors(vectors, att.context[i], k, own)}


def explain_doc(sentence: str, vectors: Vectors, opts: Options = Options(), *, token: str | None = None,
                index: int | None = None) -> dict:
    """The `explain` document: every intermediate matrix under `steps` (those of the heads with
    a leading H axis); with a token, its row of each under `row`, and under `row.shown` its
    scores, scaled scores and weights in the head shown (a model's --head), else their mean
    over the heads: what the table follows the token through."""
    att = attend(sentence, vectors, opts, listed=3 * opts.heads + 1)  # and the scaled scores' own array
    with np.errstate(over="ignore"):
        scaled = att.scores * att.scale / opts.temperature  # (H, T, T), before the mask
    steps = {
        "X": att.embedded.X.astype(np.float64),  # (T, d)
        "Q": att.Q, "K": att.K, "V": att.V,  # (T, d_k) each
        "scores": att.scores,  # (H, T, T)
        "scaled": scaled,  # (H, T, T)
        "weights": att.weights,  # (H, T, T)
        "context": att.context,  # (T, d_k)
    }
    doc = {**_common("explain", sentence, vectors, att, opts), "steps": {k: v.tolist() for k, v in steps.items()}}
    if token is not None or index is not None:
        i = token_position(att, vectors, token, index)
        def shown(M: np.ndarray) -> np.ndarray:  # (H, T) -> (T,): the head shown, or the heads' mean
            return M[att.shown] if att.shown is not None else M.mean(axis=0)

        doc.update(token=att.tokens[i], index=i, row={
            "x": steps["X"][i].tolist(), "q": att.Q[i].tolist(),
            "scores": att.scores[:, i].tolist(), "scaled": scaled[:, i].tolist(),  # (H, T)
            "weights": att.weights[:, i].tolist(), "context": att.context[i].tolist(),
            "shown": {key: shown(steps[key][:, i]).tolist() for key in ("scores", "scaled", "weights")},
        })
    return doc


def rnn_doc(sentence: str, vectors: Vectors, opts: Options = Options(), *, weights: dict[str, np.ndarray],
            origin: dict, warn=None) -> dict:
    """The `rnn` document: the seed's fold over the sentence (each state, and how strongly each
    input still moves the last one), beside the last token's attention over the same inputs.
    `origin` says where the weights came from: {"seed": S} or {"path": P}; warn(message) is
    told when the derivatives will take long."""
    embedded = embed_fitting(sentence, vectors, opts, cell_bytes(1, 0))
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


# A computation expected to take longer than this is announced on stderr before it starts.
LONG_SECONDS = 10

# The longest document scored without --window. Its T x T scores, T^2 = 1.6e11 cells, take
# half an hour to hours: the stream computes 2e7 to 8e7 cells a second on the 2 cores it was
# measured on (d = 50; the fewer, the more else runs there), so 33 minutes to 2.2 hours,
# while 200,000 tokens, a quarter of the cells, run to the end in 8 to 35 minutes with a
# progress bar. A run of --window W is bounded by the same cells, T (256 + 2W) of them:
# never reached by a window of a sensible size, only by one so wide that the run is the
# T x T one again.
LONGEST_WITHOUT_WINDOW = 400_000


def document_token_bytes(d: int, *, subwords: bool = False) -> int:
    """Memory a token of a document takes at its run's peak: its vector in X, float32 (4 d),
    the stream's scaled copy of it (4 d) and that copy's finite check (d); its places in
    `tokens` and `lookups` and its row code while X is gathered (24); its string, unless an
    earlier token of the same word shares it (at most 64 for a word); with fastText, a
    subword mean of its own (4 d). For d = 50 that is 538; measured (tracemalloc, to the
    first block) on 1,000,000 tokens of bundled words: 468 bytes a token drawn from 15,000
    words, 483 from 88,000, whose strings the lookup cache cannot all share."""
    return 9 * d + 24 + 64 + (4 * d if subwords else 0)


def document_most_tokens(window: int | None, block: int = 256) -> int:
    """The longest document whose scores take at most LONGEST_WITHOUT_WINDOW^2 cells: a
    block of rows computes T columns each without a window, and the block + 2W of its band
    with one (T x T again when that is T or more)."""
    cells = LONGEST_WITHOUT_WINDOW ** 2
    if window is None or block + 2 * window >= LONGEST_WITHOUT_WINDOW:
        return LONGEST_WITHOUT_WINDOW
    return cells // (block + 2 * window)


def document_scale(opts: Options, dim: int) -> float:
    """The scale a document's rows are computed with: --scale, else 1/sqrt(d) (no projections)."""
    return attention.default_scale(dim) if opts.scale is None else opts.scale


def document_rows(text: str, vectors: Vectors, opts: Options = Options(), *, window: int | None = None,
                  block: int = 256, progress=None):
    """A whole document as one sequence: per token, in order, {"token", "index", "top",
    "context"}, computed a block of rows at a time (attention.stream), so memory stays
    O(T (d + k)) and rows come out as they are computed. Raw vectors only (identity
    projections, one head): the point is the long sequence. progress(rows done, T) is
    called after each block.

    Before the first row, while its tokens are counted, a document is refused once its
    O(T d) arrays cannot fit in the memory available (document_token_bytes a token), or
    once its scores would take hours (document_most_tokens): the count stops there, so
    nothing of an enormous text is looked up beyond it."""
    if opts.qkv != "identity" or opts.heads != 1:
        raise InputError("a document (--file, --document) takes the raw vectors only: no --qkv or --heads")
    room = limits.available()
    per_token = document_token_bytes(vectors.dim, subwords=vectors.subwords is not None)
    by_memory, by_time = room // per_token, document_most_tokens(window, block)
    try:
        embedded = embed_sentence(text, vectors, opts, most=min(by_memory, by_time), list_missing=False)
    except TooManyTokens as e:
        if e.most == by_time and by_time <= by_memory:
            raise _too_long(by_time, window, block) from None
        raise limits.ResourceError(
            f"the document holds more than {e.most:,} tokens with vectors, and at {per_token:,} bytes a token (its "
            f"vectors, their copies for the stream, its tokens) they need more than the {limits.size(room)} of "
            "memory available; split it into shorter documents") from None
    tokens, X = embedded.tokens, embedded.X  # X: (T, d) float32
    if opts.mask == "self" and len(tokens) < 2:
        raise InputError(_ALONE.format(what="the document"))
    scale = document_scale(opts, vectors.dim)
    for start, top, weights, Z in attention.stream(X, scale, opts.temperature, opts.top_k, block=block,
                                                   causal=opts.mask == "causal", window=window,
                                                   include_self=opts.include_self,
                                                   exclude_self=opts.mask == "self"):
        # the block's numbers as Python ints and floats at once (a float32 is a double exactly):
        # numpy's scalars, one at a time, cost a row four times as much
        for r, (places, ws, z) in enumerate(zip(top.tolist(), weights.tolist(), Z.tolist())):
            yield {
                "token": tokens[start + r],
                "index": start + r,
                "top": [{"token": tokens[j], "index": j, "weight": w} for j, w in zip(places, ws) if w >= 0],
                "context": z,
            }
        if progress is not None:
            progress(start + len(Z), len(tokens))


def _too_long(most: int, window: int | None, block: int) -> limits.ResourceError:
    if window is None:
        return limits.ResourceError(
            f"a document of more than {most:,} tokens without --window: its T x T scores would take half an hour "
            f"to hours (more than {most * most:.2g} cells); give --window W, or split it")
    band = min(block + 2 * window, most)
    return limits.ResourceError(
        f"a document of more than {most:,} tokens with --window {window:,}: its scores would take half an hour "
        f"to hours (more than {most * band:.2g} cells, {band:,} a token); give a smaller --window, or split it")


def _neighbors(vectors: Vectors, v: np.ndarray, k: int, exclude: set[str]) -> list[dict]:
    """The k nearest words by cosine, without `exclude` and without punctuation; k is at most
    the vocabulary's size, whatever is asked."""
    k = min(k, vectors.size)
    return [{"word": w, "cosine": c} for w, c in vectors.nearest(v, k, exclude, keep=lambda w: not is_punctuation(w))]
