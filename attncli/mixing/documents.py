"""From a sentence to the documents of context mixing: `contributions` (one method's T x T
matrix at each layer), a sentence's leave-one-out effects and heads' ablation effects, and
`faithfulness`'s agreement of each method with leave-one-out, one sentence at a time (the
corpus sums are stats-like, in faithfulness.py). The math is contributions.py's; this
module runs the model and writes the documents (plain dicts, the JSON the tool prints; the
keys are documented in docs/reference/json.md).
"""

from __future__ import annotations

import numpy as np

from attncli import attention
from attncli.documents.sentence import common, json_lists
from attncli.documents.sentence import heads_doc as sentence_heads_doc
from attncli.encoder import Attention, Encoder, Options, attend
from attncli.errors import InputError, OptionError
from attncli.mixing import contributions
from attncli.mixing.contributions import ERASURES
from attncli.models.encoder import Sentence, Trained
from attncli.models.files import Pieces
from attncli.models.layers import Block
from attncli.system import limits
from attncli.visible import listed
REPLACEMENTS = ("[MASK]", "<mask>", "[UNK]", "<unk>", "<|endoftext|>")  # a piece to erase with, the first the model has


def method_problem(method: str, methods: tuple[str, ...], head: int | None) -> str | None:
    """What is wrong with asking for `method` of a source that has `methods` (Encoder.methods:
    word vectors' have no residual stream), and for one head of it, or None: the one wording
    of check_method and the command line's."""
    if method not in contributions.METHODS:
        return f"method must be one of {', '.join(contributions.METHODS)}, got {method!r}"
    if method not in methods:
        return (f"{method} takes a trained model's residual stream apart: over word vectors there is none; give "
                f"--model, or one of {', '.join(methods)}")
    if head is not None and method not in contributions.PER_HEAD:
        return f"{method} is a whole layer's measure; --head goes with {', '.join(contributions.PER_HEAD)}"
    return None


def check_method(method: str, source: Encoder, head: int | None) -> None:
    """A method the source has, and one head only where the method is one head's (OptionError)."""
    problem = method_problem(method, source.methods, head)
    if problem:
        raise OptionError(problem)


def replacement(model) -> tuple[int, str]:
    """The id and piece a token is replaced by in the second erasure: the model's mask
    token, else its unknown token."""
    for piece in REPLACEMENTS:
        i = model.tokenizer.token_to_id(piece)
        if i is not None:
            return int(i), piece
    raise OptionError(f"{model.name} has no mask or unknown token ({', '.join(REPLACEMENTS)}) to put in a token's "
                      "place; erase by removing the token (--erasure remove)")


def erase(trained: Trained, s: Sentence, erasure: str = "remove") -> dict:
    """Leave-one-out over the sentence: its (T, T) effects on each token's last hidden state
    and on the sentence's, with what the sentence's effect is (contributions.leave_one_out).
    A decoder's sentence effect is the fall in the log-probability of the piece it
    predicts next after the whole sentence, each erased input predicting it from its own
    last piece of the sentence (before a marker after it)."""
    model, config = trained.model, trained.model.config
    family, w = model.family, model.weights
    if erasure not in ERASURES:
        raise OptionError(f"erasure must be one of {', '.join(ERASURES)}, got {erasure!r}")
    if erasure == "remove" and len(s.ids) < 2:
        raise InputError("the sentence has one word piece: removing it leaves nothing to run; give a longer one")
    replace, piece = replacement(model) if erasure == "mask" else (None, None)
    T = len(s.ids)
    limits.require(8 * T * T * config.hidden, f"the last hidden states of {T:,} runs without a token each, over "
                   f"{T:,} word pieces", "give a shorter sentence")  # leave_one_out's (T, T', D)
    doc = {"erasure": erasure}
    if piece is not None:
        doc["replaced_by"] = piece
    on_sentence = None  # an encoder's: contributions.leave_one_out's own
    if model.causal:
        doc["sentence_effect_of"], on_sentence = _next_piece_fall(trained, s)
    else:
        doc["sentence_effect_of"] = "the cosine distance of the mean of the last hidden states"

    def run(ids):
        return family.run_from(family.embedded(ids, w, config), 0, w, config)

    effect, sentence_effect = contributions.leave_one_out(
        s.ids, s.final, run, replace=replace, sentence=on_sentence,
        batch_bytes=lambda B, T: B * family.pass_bytes(T, config))
    return {**doc, "matrix": effect, "sentence_effect": sentence_effect}


def _next_piece_fall(trained: Trained, s: Sentence):
    """A decoder's sentence effect: what it predicts next after the whole sentence (its
    likeliest piece and that piece's log-probability, at its last piece s.last), and the
    fall in that log-probability for each erased input j (T, T', D) -> (T,), each predicting
    from its own last piece of the sentence: one place sooner where a piece up to it was
    removed."""
    model, config = trained.model, trained.model.config
    family, w = model.family, model.weights
    z = family.logits(s.final[s.last:s.last + 1], w, config)[0]  # (V,)
    nxt = int(np.argmax(z))
    full = float(attention.log_softmax(z)[nxt])

    def fall(inputs, outs):
        removed = inputs.shape[1] < len(s.ids)
        at = [max(s.last - (removed and j <= s.last), 0) for j in range(len(outs))]
        return np.array([full - attention.log_softmax(family.logits(o[i:i + 1], w, config)[0])[nxt]
                         for o, i in zip(outs, at)])

    return {"next": model.piece(nxt), "id": nxt, "logprob": full}, fall


def matrices(method: str, source: Encoder, sentence: str, opts: Options, *, head: int | None = None,
             rolled: bool | None = None,
             erasure: str = "remove") -> tuple[Attention, np.ndarray, dict, list[tuple[int, str, np.ndarray]]]:
    """The sentence's attention (for the document's common keys), the method's matrices
    (L, T, T) (one for leave-one-out: its effects on the last layer's states), what the
    method adds to the document, and why any of their numbers is undefined (undefined's).
    `head` is from 1, as in every document (None: the layer's whole measure, or the mean
    over its heads)."""
    check_method(method, source, head)
    H = source.heads(opts)
    if head is not None and (isinstance(head, bool) or not isinstance(head, int) or not 1 <= head <= H):
        raise OptionError(f"head must be from 1 to {H}, got {head!r}")
    shown = None if head is None else head - 1  # contributions.py counts heads from 0
    att = attend(sentence, source, opts, listed=2)
    if method == "leave-one-out":  # a model's only (check_method)
        doc = erase(source, source.parts(att.pieces), erasure)
        effect, on_sentence = doc.pop("matrix"), doc.pop("sentence_effect")
        return (att, effect[None], {**doc, "sentence_effect": json_lists(on_sentence)},
                erased_undefined(effect, on_sentence))
    blocks = source.blocks(att)
    per_layer = contributions.layer_matrices(method, blocks, shown, rolled=False)  # (L, T, T)
    rolls = rolled_out(method, rolled)
    C = contributions.roll_out(method, per_layer) if rolls else per_layer  # (L, T, T)
    return att, C, {}, undefined(method, blocks, per_layer, C, rolls)


# why a number of a contributions document is undefined, beside contributions.undefined_rows'
PROPAGATED = "propagated"  # a rollout's row draws on a row an earlier layer leaves undefined
NOTHING_REACHES = "nothing reaches"  # a rollout of sizes (GlobEnc's) whose row is all 0
ZERO_ROW = "zero row"  # a matrix of sizes whose row is all 0: its mixing ratio is undefined
ZERO_STATE = "zero state"  # leave-one-out: a last hidden state, with or without a token, is the zero vector
ZERO_MEAN = "zero mean"  # leave-one-out: the sentence's mean last hidden state is, with or without a token
# each reason as a note says it, of the tokens it holds (`tokens`: "every token", "'cat' (1)")
SHARE = ", so no share of it can be computed (null in JSON, a dash in a table)"
SAID = {
    contributions.ZERO_OUTPUT: "the output of {tokens} is the zero vector" + SHARE,
    contributions.NOTHING_NEARER: "no part of the output of {tokens} is nearer it than its size (every ALTI score 0)"
                                  + SHARE,
    contributions.ZEROED_TO_ZERO: "zeroing a token's value makes the output of {tokens} the zero vector" + SHARE,
    contributions.UNCHANGED: "zeroing any token's value leaves the output of {tokens} as it was" + SHARE,
    contributions.NOTHING_GIVEN: "the row of {tokens} is all 0 (every part it receives is the zero vector)" + SHARE,
    PROPAGATED: "the rollout of {tokens} draws on a row an earlier layer leaves undefined" + SHARE,
    NOTHING_REACHES: "the rolled-out row of {tokens} is all 0 (nothing reaches it through the layers)" + SHARE,
    ZERO_ROW: "the row of {tokens} is all 0, so its mixing ratio cannot be computed (null in JSON, a dash in a "
              "table)",
    ZERO_STATE: "the last hidden state of {tokens}, with or without some token, is the zero vector, so its cosine "
                "distance is undefined (null in JSON, a dash in a table)",
    ZERO_MEAN: "the mean of the last hidden states, whole or without {tokens}, is the zero vector, so the effect on "
               "the sentence is undefined (null in JSON, a dash in a table)",
}


def undefined(method: str, blocks: list[Block], per_layer: np.ndarray, C: np.ndarray,
              rolled: bool) -> list[tuple[int, str, np.ndarray]]:
    """Why rows of each layer's matrix C[l] (per_layer's, or its rollout) are undefined, or
    (a matrix of sizes) all 0: (layer from 1, reason, rows (T,) bool), a layer's own reasons
    (contributions.undefined_rows, of the rows a method or its rollout normalises) first,
    then a rollout's rows that draw on an earlier layer's."""
    out = []
    for l, M in enumerate(C):
        lost = np.isnan(M).any(axis=-1)  # (T,)
        if lost.any():
            said = np.zeros_like(lost)
            if rolled or method in contributions.SHARES:
                for reason, rows in contributions.undefined_rows(method, blocks[l], per_layer[l]).items():
                    rows = rows & lost & ~said
                    said |= rows
                    out += [(l + 1, reason, rows)] if rows.any() else []
            if (lost & ~said).any():
                out.append((l + 1, NOTHING_REACHES if method in contributions.AS_THEY_ARE else PROPAGATED,
                            lost & ~said))
        zero = ~lost & (M == 0).all(axis=-1)  # (T,)
        if zero.any():
            out.append((l + 1, ZERO_ROW, zero))
    return out


def erased_undefined(effect: np.ndarray, on_sentence: np.ndarray) -> list[tuple[int, str, np.ndarray]]:
    """Why leave-one-out's effects are undefined, as undefined() says it (its one layer, 1):
    the rows whose state is the zero vector, those all 0 (their mixing ratio), and the
    tokens whose erasure leaves the sentence's mean so."""
    lost = np.isnan(effect).any(axis=-1)  # (T,)
    out = [(1, ZERO_STATE, lost), (1, ZERO_ROW, ~lost & (effect == 0).all(axis=-1)),
           (1, ZERO_MEAN, np.isnan(on_sentence))]
    return [(l, reason, rows) for l, reason, rows in out if rows.any()]


def notes(facts: list[tuple[int, str, np.ndarray]], tokens: list[str], shown: list[int], trained: bool) -> list[str]:
    """The facts of the layers `shown` as notes, one a reason and the rows it holds, their
    layers together: "layers 1 and 2: the output of every token is the zero vector, so
    ..."; without the layer over word vectors, which have one."""
    layers: dict[tuple[str, tuple[int, ...]], list[int]] = {}
    for l, reason, rows in facts:
        if l in shown:
            layers.setdefault((reason, tuple(np.flatnonzero(rows).tolist())), []).append(l)
    out = []
    for (reason, rows), numbers in layers.items():
        where = f"layer{'s' * (len(numbers) > 1)} {listed(list(map(str, numbers)))}: " if trained else ""
        out.append(where + SAID[reason].format(tokens=_which(rows, tokens)))
    return out


def _which(rows: tuple[int, ...], tokens: list[str], most: int = 8) -> str:
    """"every token", or the tokens at `rows` with their positions: "'cat' (1) and 'dog' (3)"."""
    if len(rows) == len(tokens) > 1:
        return "every token"
    named = [f"{tokens[i]!r} ({i})" for i in rows]
    more = len(named) - most
    return listed(named[:most] + ([f"{more:,} more"] if more > 0 else []))


def rolled_out(method: str, rolled: bool | None) -> bool:
    """Whether a method's matrices are rolled out, as `rolled` says or, left to the method, its paper."""
    if method == "leave-one-out":
        return False
    return method in contributions.ROLLED_BY_DEFAULT if rolled is None else bool(rolled)


def _tops(C: np.ndarray, tokens: list[str], opts: Options, masked) -> list[list[dict]]:
    """Each row's top contributors, an undefined value (NaN) never among them."""
    unknown = np.isnan(C)  # (T, T)
    hidden = unknown if masked is None else unknown | masked
    rows, values = attention.top_attended_rows(C, opts.top_k, opts.include_self, hidden if hidden.any() else masked)
    return [[{"token": tokens[j], "index": j, "contribution": c} for j, c in zip(row, cs)]
            for row, cs in zip(rows, values)]


def _ratios(C: np.ndarray) -> tuple[list, list]:
    """Each layer's mixing ratio per token and their mean, None where a row is all 0."""
    r = contributions.mixing_ratio(C)  # (L, T)
    per = [[None if np.isnan(x) else float(x) for x in row] for row in r]
    means = [None if np.isnan(row).all() else float(np.nanmean(row)) for row in r]
    return per, means


def contributions_doc(sentence: str, source: Encoder, opts: Options = Options(), *, method: str = "raw",
                      layer: int | None = None, head: int | None = None, rolled: bool | None = None,
                      erasure: str = "remove") -> dict:
    """The `contributions` document: the method's T x T matrix at each layer (rows the
    receiving token i), or at the one `layer` (from 1); each token's top contributors; each
    layer's context-mixing ratio per token, the share of its row from the other tokens, and
    their mean. `layer` and `head` are from 1; both are checked before any work."""
    L = source.layers
    if method == "leave-one-out" and layer is not None:
        raise OptionError("leave-one-out measures the whole model, not a layer: leave --layer out")
    if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= L):
        raise OptionError(f"layer must be from 1 to {L}, got {layer!r}")
    att, C, extra, facts = matrices(method, source, sentence, opts, head=head, rolled=rolled, erasure=erasure)
    if method == "leave-one-out":
        numbers, facts = [L], [(L, reason, rows) for _, reason, rows in facts]
    elif layer is not None:
        C, numbers = C[layer - 1:layer], [layer]
    else:
        numbers = list(range(1, L + 1))
    ratios, means = _ratios(C)
    doc = common("contributions", sentence, source, att, opts)
    if source.layered:
        doc["layer"], doc["head"] = layer, head
    doc.update(method=method, rollout=rolled_out(method, rolled), layers=numbers,
               contributions=json_lists(C), top=[_tops(M, att.tokens, opts, att.mask) for M in C],
               mixing_ratio=ratios, mixing_ratio_mean=means, include_self=opts.include_self, **extra,
               notes=notes(facts, att.tokens, numbers, source.layered))
    return doc


# Heads: each one's ablation effect


# what a head's ablation effect is, an encoder's (False) and a decoder's (True)
ABLATION_OF = {False: "the cosine distance of the mean of the last hidden states",
               True: "the rise in the mean next-piece loss (nats)"}


def ablation(trained: Trained, s: Sentence, *, layer: int | None = None,
             head: int | None = None) -> tuple[np.ndarray, str]:
    """Every head's ablation effect (L, H) on the sentence (contributions.head_ablation), or
    those of the one `layer` and/or the one `head` (from 1) only, and what the effect is
    (ABLATION_OF): an encoder's the cosine distance of its mean-pooled representation (NaN
    where that, whole or with the head zeroed, is the zero vector), a decoder's the rise in
    its mean next-piece loss over the sentence's own pieces."""
    model, config = trained.model, trained.model.config
    family, w = model.family, model.weights
    if model.causal:
        if not (~s.special[1:]).any():
            raise InputError("a decoder's loss needs a next piece to predict: the sentence has one word piece; "
                             "give a longer one")
        base = _loss(family, w, config, s.final, s.ids, s.special)

        def effect(F):
            return np.array([_loss(family, w, config, f, s.ids, s.special) - base for f in F])
    else:
        pooled = contributions.pooled(s.final)

        def effect(F):
            return contributions.cosine_distance(contributions.pooled(F), pooled[None])
    chosen = {"layers": None if layer is None else [layer - 1], "heads": None if head is None else [head - 1]}
    effects = contributions.head_ablation(s.blocks, lambda X, l: family.run_from(X, l, w, config), effect,
                                          batch_bytes=lambda B, T: B * family.pass_bytes(T, config), **chosen)
    return effects, ABLATION_OF[bool(model.causal)]


def _loss(family, w, config, final: np.ndarray, ids: np.ndarray, special: np.ndarray) -> float:
    """The mean cross-entropy of each next piece of the sentence, -log p(ids[t + 1] | ..t),
    over the pieces of the sentence: a marker its tokenizer puts after it is never one."""
    logp = attention.log_softmax(family.logits(final[:-1], w, config))  # (T - 1, V)
    return float(-logp[np.arange(len(ids) - 1), ids[1:]][~special[1:]].mean())


# Faithfulness: each method's agreement with leave-one-out on one sentence

# every method but the reference itself; rollout is raw's rolled-out column
COMPARED = tuple(m for m in contributions.METHODS if m not in ("rollout", "leave-one-out"))


def output_row(C: np.ndarray, causal: bool, last: int) -> np.ndarray:
    """A matrix's attribution of the sentence's output to each token (..., T): the mean of
    its rows (an encoder's mean-pooled output), or the row of the sentence's last piece
    `last` (a decoder's next piece)."""
    return C[..., last, :] if causal else C.mean(axis=-2)


def agreement(trained: Trained, pieces: Pieces, *, seed: int = 0, methods=COMPARED) -> dict:
    """Spearman's rho between each method's attribution of the output (each layer's, and the
    last layer's rolled out) and the leave-one-out effects on the sentence (its files.Pieces),
    and a random attribution's (uniform numbers drawn from `seed` and the sentence's ids, so
    the same sentence always draws the same)."""
    s = trained.parts(pieces)
    ids = s.ids
    loo = erase(trained, s)["sentence_effect"]  # (T,)
    causal = trained.model.causal
    out = {}
    for method in methods:
        per_layer = contributions.layer_matrices(method, s.blocks, rolled=False)  # (L, T, T)
        rolled = contributions.roll_out(method, per_layer)[-1]  # (T, T)
        out[method] = {"layers": [contributions.spearman(output_row(M, causal, s.last), loo) for M in per_layer],
                       "rolled": contributions.spearman(output_row(rolled, causal, s.last), loo)}
    rng = np.random.default_rng([seed, *map(int, ids)])
    out["random"] = {"layers": [], "rolled": contributions.spearman(rng.random(len(ids)), loo)}
    return out


def heads_doc(sentence: str, source: Encoder, opts: Options = Options(), *, layer: int | None = None,
              head: int | None = None, ablate: bool = False) -> dict:
    """documents.sentence.heads_doc, and with `ablate` each of the heads shown's ablation
    effect (Michel et al. 2019, ablation): "ablation" (L, H; null where it is undefined),
    "ablation_of", and "notes" saying why an effect is undefined."""
    if ablate and not source.layered:  # word vectors' one attention: no model runs on after it
        raise OptionError("ablation zeroes a trained model's heads in turn and runs the model on; give a model")
    doc = sentence_heads_doc(sentence, source, opts, layer=layer, head=head)
    if ablate:
        s = source.parts(source.pieces(sentence))
        effects, what = ablation(source, s, layer=layer, head=head)  # (L, H) of the heads shown
        unknown = int(np.isnan(effects).sum())
        said = [f"the mean of the last hidden states, whole or with {'a head' if unknown == 1 else f'{unknown} heads'} "
                "zeroed, is the zero vector, so the cosine distance is undefined (null in JSON, a dash in a table)"]
        doc.update(ablation=json_lists(effects), ablation_of=what, notes=said if unknown else [])
    return doc
