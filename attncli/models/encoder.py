"""A trained model as a source of attention (encoder.Encoder): its tokenizer's word pieces,
with the markers it adds, and its family's forward pass (models/), whose attention is
attention.py's steps at every layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attncli import attention, ranking, rotary
from attncli.encoder import Attention, Embedded, Options, cell_bytes
from attncli.errors import AttncliError, InputError, ModelError, OptionError
from attncli.learning.projections import Projections
from attncli.mixing import contributions
from attncli.models.files import Pieces
from attncli.models.layers import Block
from attncli.system import limits

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


class Shown:
    """The consumer of the forward pass a sentence's document runs (models.layers.Consumer):
    what the document reports and no more. The steps of layer `l` (from 0) and its input
    X_l, always; every layer's weights (L, H, T, T) where `keep` holds "layers" (heads, a
    rollout, stats), every layer's hidden states (L + 1, T, D) where it holds "hidden"
    (compare), the last hidden states as shown where it holds "final" (a decoder's next
    piece comes from them). A document of one layer holds its (H, T, T) steps, not L of
    them, and the pass runs no further than what it reads (`through`): layer l's
    attention, or every layer's (of a last layer after l, its weights alone), and no
    layer's output that nothing reads."""

    KEEPS = ("layers", "hidden", "final")

    def __init__(self, config, l: int, keep: tuple[str, ...] = ()):
        if not set(keep) <= set(self.KEEPS):
            raise ValueError(f"keep names some of {self.KEEPS}, got {keep!r}")
        self.config, self.l, self.keep = config, l, keep
        self.weights = self.hidden = self.final = None
        outputs = "hidden" in keep or "final" in keep
        self.through = None if outputs else config.layers - 1 if "layers" in keep else l
        self.weights_only = self.through not in (None, l)  # of a later layer than l, its weights alone

    @staticmethod
    def bytes(T: int, config, keep: tuple[str, ...] = ()) -> int:
        """What it keeps for T pieces, float64, beside the steps of the one layer (within the
        family's run_bytes): the layer's input and the last states, and what `keep` asks."""
        L, H, D = config.layers, config.heads, config.hidden
        return 8 * (T * D + ("final" in keep) * T * D + ("layers" in keep) * L * H * T * T
                    + ("hidden" in keep) * (L + 1) * T * D)

    def begin(self, X: np.ndarray) -> None:
        L, H, (T, D) = self.config.layers, self.config.heads, X.shape
        dtype = attention.working()
        if "layers" in self.keep:
            self.weights = np.empty((L, H, T, T), dtype)
        if "hidden" in self.keep:
            self.hidden = np.empty((L + 1, T, D), dtype)
            self.hidden[0] = X
        self.coming = X  # the next layer's input

    def layer(self, l: int, X: np.ndarray, steps: dict[str, np.ndarray]) -> None:
        if l == self.l:
            self.steps, self.input = steps, self.coming
        self.coming = X
        if self.weights is not None:
            self.weights[l] = steps["weights"]
        if self.hidden is not None:
            self.hidden[l + 1] = X

    def end(self, X: np.ndarray) -> None:
        self.final = X
        if self.hidden is not None:
            self.hidden[-1] = X


@dataclass
class Sentence:
    """A sentence through a trained model, in the parts the measures take apart."""

    ids: np.ndarray  # (T,)
    special: np.ndarray  # (T,): True at the markers its tokenizer put around it
    last: int  # its last piece, before the markers after it (files.Pieces.last): where a decoder predicts the next
    blocks: list[Block]  # one a layer
    final: np.ndarray  # (T, D): the last hidden states, as shown (a decoder's after its final norm)


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

    # what every document says of the vectors: the model's word-piece embeddings stand for them
    name = property(lambda self: self.model.name)
    dim = property(lambda self: self.model.config.hidden)
    size = property(lambda self: self.model.config.vocab_size)
    cased = False
    layers = property(lambda self: self.model.config.layers)
    layered = True
    methods = contributions.METHODS
    batches = True

    @classmethod
    def of(cls, model, layer: int | None = None, head: int | None = None) -> Trained:
        """The model (models.files.Model) showing `layer` (None: the last) and `head`."""
        return cls(model, model.config.layers if layer is None else layer, head)

    def heads(self, opts: Options) -> int:
        return self.model.config.heads

    def check(self, opts: Options) -> None:
        """Nothing: the attention is the model's own, and its layer and head were checked when made."""

    def count(self, sentence: str, opts: Options) -> int:
        """The sentence's word pieces, with the markers."""
        return len(self.model.encode(sentence).ids)

    def at(self, layer: int | None) -> Trained:
        return Trained(self.model, layer or self.layer, None)

    def run(self, sentence: str, *, keep: tuple[str, ...] = (), listed: int = 0) -> tuple[Pieces, Shown]:
        """The sentence's word pieces and the model's forward pass over them, read by Shown
        (what a document of layer `layer` reports, and `keep`), refused before it starts when
        the pass, what it keeps and the T x T numbers a document lists (`listed` a cell)
        cannot fit in memory."""
        pieces = self.pieces(sentence)
        config, T = self.model.config, len(pieces.ids)
        family = self.model.family
        limits.require(family.run_bytes(T, config) + Shown.bytes(T, config, keep)
                       + T * T * cell_bytes(config.heads, listed),
                       f"{self.model.name}'s forward pass over {T:,} word pieces", "give a shorter sentence")

        def run() -> Shown:
            shown = Shown(config, self.layer - 1, keep)
            family.run(pieces.ids, self.model.weights, config, shown)
            return shown

        return pieces, attention.in_range(run)[0]  # in float32, a sentence it cannot hold in float64

    def pieces(self, sentence: str, what: str = "sentence"):
        """The sentence's word pieces (models.files.Pieces), refused when there are none or
        more than the model reads, the refusal naming the text `what` it is (a sentence, a
        document)."""
        if not sentence.strip():
            raise InputError(f"the {what} is empty; give some words")
        pieces = self.model.encode(sentence, what)
        if len(pieces.ids) == 0:  # a tokenizer whose normalizer leaves nothing of the text, and that adds no marker
            raise InputError(f"the {what} gives {self.model.name} no word piece; give some words")
        return pieces

    def attend(self, sentence: str, opts: Options = Options(), *, listed: int = 0,
               keep: tuple[str, ...] = ()) -> Attention:
        """The sentence through the model, and layer `layer`'s attention as an Attention;
        with it every layer's weights (`keep` "layers") or hidden states ("hidden")."""
        pieces, s = self.run(sentence, keep=keep, listed=listed)
        return self._attention(pieces, s.steps, s.input, s.final, s.weights, s.hidden)

    def attend_many(self, sentences: list[str], opts: Options = Options(), *, listed: int = 0,
                    keep: tuple[str, ...] = ()):
        """(k, sentences[k] as attend() gives it, or the AttncliError that refuses it) for
        each sentence, the refused first, then the others a batch at a time as the model
        runs over them (layers.forward_many): a corpus's lines, whose passes one at a time
        would leave a short sentence's products too small to keep the BLAS busy. Only a
        batch's passes are held while the caller reads them, each kept whole (Kept: every
        layer), whatever `keep` asks but for a keep of "layers" alone (stats: every
        layer's weights and no output, no last hidden states, layers.Kept). `listed`: as
        attend()'s, the numbers a document lists a cell, checked against memory for each
        sentence."""
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
        outputs = tuple(keep) != ("layers",)
        for b, run in layers.forward_many(self.model.family, [pieces.ids for _, pieces in found],
                                          self.model.weights, config, pad=pad, keep=(self.layer - 1,),
                                          outputs=outputs):
            k, pieces = found[b]
            if isinstance(run, AttncliError):
                yield k, run
            else:
                l = self.layer - 1
                yield k, self._attention(pieces, run.steps[l], run.hidden[l], run.hidden[-1] if outputs else None,
                                         run.weights, run.hidden if outputs else None)

    def _attention(self, pieces: Pieces, steps: dict, X: np.ndarray, final: np.ndarray, layers: np.ndarray | None,
                   hidden: np.ndarray | None) -> Attention:
        """Layer `layer`'s attention, its `steps` over its input X (T, D), as an Attention,
        with the last hidden states `final` (T, D) and where kept every layer's weights
        (L, H, T, T) and hidden states (L + 1, T, D)."""
        config, l = self.model.config, self.layer - 1
        proj = Projections(kind="model", path=self.model.name, **self.projections(l))
        embedded = Embedded(tokens=list(pieces.pieces), X=X,  # the layer's input X_{l-1}
                            lookups=["special" if s else "piece" for s in pieces.special], oov=[])
        shown = None if self.head is None else self.head - 1
        Z = steps["context"] if shown is None else steps["Z"][shown]  # (T, D), or the head's own (T, d_head)
        masked = self.model.family.mask(len(pieces.ids), config) if self.model.causal else None  # (T, T)
        return Attention(embedded, proj, float(attention.default_scale(config.d_head)), steps["Q"], steps["K"],
                         steps["V"], steps["scores"], steps["weights"], Z, masked,
                         shown=shown, layers=layers, hidden=hidden, final=final, pieces=pieces)

    def projections(self, l: int) -> dict[str, dict[str, np.ndarray]]:
        """Layer l's W and b (Projections' fields), the keys' and values' as the query heads
        use them: with grouped-query attention each key/value head's columns written out
        for every query head it serves (rotary.share_heads, as the steps' K and V are),
        so that d_k is every head's queries' and keys' width, and the values' too."""
        H, KV = self.model.config.heads, self.model.config.key_heads
        W, b = self.model.family.projections(self.model.weights, l)
        if KV != H:  # (D, KV d_head) -> (D, H d_head), and the biases (KV d_head,) -> (H d_head,)
            W = {**W, **{n: rotary.share_heads(W[n], KV, H) for n in ("W_key", "W_value")}}
            b = {**b, **{n: rotary.share_heads(b[n][None], KV, H)[0] for n in ("b_key", "b_value") if n in b}}
        return {"W": W, "b": b}

    def describe(self, att: Attention) -> dict:
        """What a model adds to a document's keys: the model (about), the precision its pass
        ran in, the layer and head shown, its markers and offsets, and a decoder's mask in
        place of --mask's."""
        doc = {"model": self.about(), "precision": att.weights.dtype.name,  # float64 where float32 could not hold it
               "layer": self.layer, "head": self.head, "special": list(att.pieces.special),
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
        if self.model.quantization is not None:  # a GGUF's: its main ggml type, and its tensors' types
            model["quantization"] = self.model.quantization
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
        z = family.logits(att.final[last:last + 1], self.model.weights, config)[0]  # (V,)
        p, logp = attention.softmax(z), attention.log_softmax(z)  # (V,) each
        top = ranking.ranked(z)[:k]  # ties: the smaller id first
        return [{"token": self.model.piece(int(i)), "id": int(i), "probability": float(p[i]),
                 "logprob": float(logp[i])} for i in top]

    def heads_keys(self, att: Attention, layers: np.ndarray, layer: int | None, head: int | None) -> dict:
        """The layer and head chosen (None: every one), what share of each head's attention
        goes to its markers ([CLS] and [SEP]), where an encoder's head with nothing to do puts
        it, and with a decoder the share on its first piece, the attention sink of Xiao et al.
        (2023), where a decoder's does: (L', H') each."""
        special = np.array(att.pieces.special)  # (T,)
        keys = {"layer": layer, "head": head, "special_share": layers[..., special].sum(axis=-1).mean(axis=-1).tolist()}
        if self.model.causal:
            keys["first_share"] = layers[..., 0].mean(axis=-1).tolist()  # (L', H')
        return keys

    def corpus_keys(self, precision: str) -> dict:
        return {"model": self.name, "vectors": None, "markers": self.marker_names(), "precision": precision}

    def marker_names(self) -> dict[str, str | None]:
        """The markers an encoder's `cls` and `sep` columns sum over (markers), as its
        tokenizer names them: the one first, and the last one after the sentence, or None
        where it puts none there ({"cls": "[CLS]", "sep": "[SEP]"} for BERT's, <s> and </s>
        for RoBERTa's); a decoder's are none (its first position is under first)."""
        pieces = self.model.encode("a")
        if self.model.causal:
            return {"cls": None, "sep": None}
        special, names = pieces.special, pieces.pieces
        return {"cls": names[0] if special[0] else None,
                "sep": names[-1] if special[-1] and len(special) > 1 else None}

    def markers(self, att: Attention) -> tuple[np.ndarray, np.ndarray]:
        """An encoder's markers, [CLS] first and [SEP] after, where put; a decoder's marker
        (Llama's <s>) is no [CLS]: its share is the first position's."""
        return self.markers_of(att.pieces)

    def markers_of(self, pieces: Pieces) -> tuple[np.ndarray, np.ndarray]:
        """markers() of a text's word pieces (files.Pieces), (T,) each."""
        T = len(pieces.ids)
        if self.model.causal:
            none = np.zeros(T, dtype=bool)
            return none, none
        special = np.array(pieces.special, dtype=bool)  # (T,)
        return special & (np.arange(T) == 0), special & (np.arange(T) > 0)

    def passed_on(self, att: Attention) -> np.ndarray:
        """The layer's values through its output projection (H, T, D)."""
        return self.model.family.passed_on(att.V, self.model.weights, self.layer - 1, self.model.config)

    def parts(self, pieces: Pieces) -> Sentence:
        """The word pieces of a sentence (files.Pieces) through every layer, each kept in its
        parts (refused before it starts when they cannot fit in memory: a layer's parts hold its
        (H, T, D) values passed on)."""
        model, config = self.model, self.model.config
        ids = np.asarray(pieces.ids)
        T, L, H, D = len(ids), config.layers, config.heads, config.hidden
        limits.require(model.family.pass_bytes(T, config) + 8 * L * (H * T * D + H * T * T + 4 * T * D),
                       f"the parts of {model.name}'s layers over {T:,} word pieces", "give a shorter sentence")
        blocks = model.family.blocks(ids, model.weights, config)
        return Sentence(ids, np.array(pieces.special, dtype=bool), pieces.last, blocks,
                        blocks[-1].rest(blocks[-1].total))

    def blocks(self, att: Attention) -> list[Block]:
        return self.parts(att.pieces).blocks

    def neighbors(self, v: np.ndarray, k: int, exclude: set[str]) -> list[dict]:
        return []  # its vectors are a layer's hidden states: no words lie near them

    def own(self, token: str) -> set[str]:
        return set()


def load(spec: str, revision: str | None = None, layer: int | None = None, head: int | None = None,
         check=None) -> Trained:
    """The model `spec` (models.load_model's: a name, a folder, or the Hugging Face cache's)
    as a source showing `layer` (from 1; None: the last) and `head` (None: their mean)."""
    from attncli.models import load_model  # the package, which imports this module

    return Trained.of(load_model(spec, revision, check=check), layer, head)
