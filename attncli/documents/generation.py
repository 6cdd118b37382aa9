"""The `generate` document: what a decoder wrote after a prompt (models/generation.py), and
for each generated piece the attention of the step that chose it, over every position
before it, of the layer and head shown (the last layer's, the mean of its heads, unless
--layer and --head choose).

A decoder's attention sink (Xiao et al. 2023, "Efficient Streaming Language Models with
Attention Sinks"): most heads put much of every row on the first position, whatever it
holds, and a row's other weights are then small beside it. So each row's weight on the
first position is given apart, under `sink`, and `top` lists the prompt's pieces after the
first that the row weighs most; the table shades the rest of the row on a scale of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attncli import attention, ranking
from attncli.errors import InputError, OptionError, TokenError
from attncli.documents.sentence import json_lists
from attncli.models import generation
from attncli.system import limits
from attncli.visible import visible

TOP = 3  # the prompt's pieces each generated piece's row lists, most attended first


@dataclass(frozen=True)
class Asked:
    """What a run asks of every prompt (generate_doc's arguments but the prompt and the
    model), as a corpus's workers take it: each line written after as the run says, with
    the same seed, so that a line's text is the same in one process, N or on a cluster."""

    new: int
    sampling: generation.Sampling = generation.Sampling()
    method: str | None = None
    contrast: int | None = None
    chat: bool = False

    def doc(self, prompt: str, source) -> dict:
        return generate_doc(prompt, source, self.new, self.sampling, chat=self.chat, method=self.method,
                            contrast=self.contrast)


METHODS = ("rollout", "alti", "alti-logit", "leave-one-out")  # --method: what each written piece is attributed to


def generate_doc(prompt: str, source, new: int, sampling: generation.Sampling = generation.Sampling(), *,
                 likeliest: int = 5, said=None, chat: bool = False, method: str | None = None,
                 contrast: int | None = None) -> dict:
    """The document of `new` pieces after `prompt` through the trained model `source`
    (models.encoder.Trained: its layer and head the ones shown); said(piece text so far)
    hears the continuation as it grows. `chat`: the prompt put in the model's chat template
    first (models/chat.py), whose text writes its own markers. `method`: each written piece
    attributed to the positions before it (attributed, explained); `contrast`, with
    "alti-logit", the id of the piece (contrast_of) each written piece's logit is set
    against."""
    model = source.model
    if not prompt.strip():
        raise InputError("the prompt is empty; give some words")
    text = templated(model, prompt) if chat else prompt
    pieces = model.encode(text, "prompt", markers=not chat)
    P = len(pieces.ids)
    limits.require(document_bytes(P, new, model.config.heads), f"the document of {new:,} pieces written after "
                   f"{P:,} (each one's row of every head, as lists and as JSON)", "ask for fewer new pieces (or "
                   "give --head: one head's rows)")
    chosen, before = [int(i) for i in pieces.ids], _decoded(model, pieces.ids)

    def heard(step: generation.Step) -> None:  # the continuation so far, decoded whole: a piece may be half a character
        chosen.append(step.id)
        said(_decoded(model, chosen)[len(before):])

    out = generation.generate(model, pieces.ids, new, sampling=sampling, likeliest=likeliest, eos=model.eos,
                              said=heard if said is not None else None)
    l = (source.layer or model.config.layers) - 1
    rows = [step.weights[l] for step in out.steps]  # (H, P + k) each
    shown = [r[source.head - 1] if source.head else r.mean(axis=0) for r in rows]  # (P + k,) each
    names = [model.piece(i) for i in out.ids]
    doc = {
        "command": "generate",
        "prompt": prompt,
        **({"chat": text} if chat else {}),
        "tokens": pieces.pieces + names,
        "ids": [int(i) for i in pieces.ids] + out.ids,
        "prompt_length": P,
        "generated": names,
        "text": _decoded(model, [*pieces.ids, *out.ids])[len(before):],
        "stop": out.stop,
        "sampling": ({"greedy": True} if sampling.temperature is None else
                     {"greedy": False, "temperature": sampling.temperature, "top_k": sampling.top_k,
                      "top_p": sampling.top_p, "seed": sampling.seed}),
        "model": source.about(),
        "precision": attention.working().name,
        "layer": l + 1,
        "head": source.head,
        "special": list(pieces.special) + [i in model.eos for i in out.ids],
        "logprobs": [step.logprob for step in out.steps],
        "alternatives": [[{"token": model.piece(j), "id": j, "logprob": lp} for j, lp in step.likeliest]
                         for step in out.steps],
        "weights": [row.tolist() for row in shown],
        "sink": [float(row[0]) for row in shown],
        "top": [_top(row, pieces.pieces, P) for row in shown],
    }
    if source.head is None:
        doc["heads"] = [r.tolist() for r in rows]  # each piece's (H, P + k)
    if method == "alti-logit" and out.ids:
        rows, parts = explained(model, np.array(doc["ids"]), P, contrast)
        doc.update(method=method, attribution=rows, logit=parts)
        if contrast is not None:
            doc["contrast"] = {"token": model.piece(contrast), "id": contrast}
    elif method is not None and out.ids:
        doc.update(method=method, attribution=attributed(model, np.array(doc["ids"]), P, method, source.layer,
                                                         np.array(doc["logprobs"])))
    return doc


def document_bytes(P: int, new: int, heads: int) -> int:
    """What the document of `new` pieces after P holds at most beside the generation: each
    written piece's row of every head, the rows shown and an attribution (H + 3 rows of at
    most P + new numbers a piece), each number a Python float in a list (32 bytes) and its
    JSON (about 20; JSON_NUMBER)."""
    return 52 * (heads + 3) * new * (P + new)


def explained(model, ids: np.ndarray, P: int, contrast: int | None = None) -> tuple[list, list[dict]]:
    """ALTI-Logit (mixing/contributions.py's alti_logit, Ferrando et al. 2023) of each written
    piece k (ids[P + k]): the logit its step gave it, read at position P + k - 1 after the
    model's every layer, shared out over the positions 0 .. P + k - 1 (a row each, in the
    logit's units, null where ALTI's rollout is undefined), and the terms the attention does
    not carry ("logit": the logit itself, "positions" their sum, "embedding" the position's
    own, "attention_bias", "feed_forward", "norm_bias", and each layer's attention update
    summed over the positions, "layers"), which add up to it ("positions" null where a
    share is). With `contrast`, the id of another piece: the difference of the two logits,
    why this piece and not that one."""
    from attncli.mixing import contributions  # the measures of context mixing: only --method alti-logit needs them

    N, before = len(ids) - P, ids[:-1]
    rows = np.arange(P - 1, len(before))  # (N,): the position each written piece's step read its logit at
    blocks = _blocks(model, before)
    final = blocks[-1].output[rows]  # (N, D): the last hidden states, before the final norm
    u, c = model.family.readout(final, ids[P:], model.weights, model.config)  # (N, D), (N,)
    if contrast is not None:
        v, d = model.family.readout(final, np.full(N, contrast), model.weights, model.config)
        u, c = u - v, c - d
    shares, terms = contributions.alti_logit(blocks, u, c, rows)  # (N, T), terms
    parts = [{"logit": float((final[k] * u[k]).sum() + c[k]), "positions": json_lists(shares[k, :P + k].sum()),
              **{name: float(terms[name][k]) for name in ("embedding", "attention_bias", "feed_forward", "norm_bias")},
              "layers": terms["layers"][k].tolist()} for k in range(N)]
    return [json_lists(shares[k, :P + k]) for k in range(N)], parts


def contrast_of(model, text: str) -> int:
    """The id of --contrast's piece: a piece of the vocabulary as the tokenizer spells it
    ("ĠLondon", "▁London"), or a text the tokenizer makes one piece of (" London")."""
    i = model.tokenizer.token_to_id(text)
    if i is not None and i < model.config.vocab_size:
        return int(i)
    pieces = model.encode(text, "--contrast piece", markers=False) if text else None
    if pieces is not None and len(pieces.ids) == 1:
        return int(pieces.ids[0])
    parts = " ".join(visible(p) for p in pieces.pieces) if pieces is not None else "none"
    the = model.encode(" the", "--contrast piece", markers=False)
    example = f" (\" the\", or its spelling {visible(repr(the.pieces[0]))})" if len(the.ids) == 1 else ""
    raise TokenError(f"--contrast {visible(repr(text))} is no piece of {visible(model.name)}'s vocabulary, and the "
                     f"tokenizer makes {len(pieces.ids) if pieces else 0} pieces of it ({parts}); give one piece, as "
                     f"\"alternatives\" in --json name them{example}")


def _blocks(model, ids: np.ndarray) -> list:
    """Every layer of the pass over `ids` in the parts contributions.py takes apart (a
    family's blocks), refused before it starts where memory cannot hold them: each layer's
    (H, T, D) values passed on, its weights and four (T, D) states."""
    T, config = len(ids), model.config
    L, H, D = config.layers, config.heads, config.hidden
    limits.require(model.family.pass_bytes(T, config) + 8 * L * (H * T * D + H * T * T + 4 * T * D),
                   f"the parts of {model.name}'s layers over {T:,} word pieces",
                   "write fewer pieces (--max-new-tokens)")
    return model.family.blocks(ids, model.weights, config)


def attributed(model, ids: np.ndarray, P: int, method: str, layer: int | None,
               logprobs: np.ndarray) -> list[list[float]]:
    """What each written piece k (ids[P + k], of log-probability logprobs[k] as it was
    written) is attributed to, by `method`:

    rollout        the attention rollout (attention.rollout, Abnar & Zuidema 2020) of the
                   heads' mean weights up to the layer shown, over the prompt and what was
                   written before the last piece: piece k's row is position P + k - 1's,
                   over positions 0 .. P + k - 1
    alti           ALTI (Ferrando et al. 2022, as `contributions --method alti` computes it:
                   mixing/contributions.py) rolled out up to the layer shown, of the same
                   pass: piece k's row is position P + k - 1's (null where it is undefined)
    leave-one-out  for each prompt position j, how much the piece's log-probability falls
                   with piece j taken out of the prompt (the written pieces after it as
                   written): log p(w_k | all) - log p(w_k | all but j); a row over the
                   prompt's P positions"""
    N, shown = len(ids) - P, layer or model.config.layers
    before = ids[:-1]  # every position some written piece's step attends from: the last piece's is none
    if method == "alti":
        from attncli.mixing import contributions  # the measures of context mixing: only --method alti needs them

        R = contributions.layer_matrices("alti", _blocks(model, before)[:shown])[-1]  # (T, T), rolled out
        return [json_lists(R[P + k - 1, :P + k]) for k in range(N)]
    if method == "rollout":
        R = attention.rollout(generation.head_means(model, before, shown))[-1]  # (T, T)
        return [R[P + k - 1, :P + k].tolist() for k in range(N)]
    effects = np.empty((N, P))
    for j in range(P):
        effects[:, j] = logprobs - generation.forced(model, np.delete(ids, j), P - 1)  # (N,)
    return effects.tolist()


def templated(model, prompt: str) -> str:
    """`prompt` as the user's message in the model's chat template (models/chat.py), its
    markers named as the tokenizer names its BOS and first end-of-sequence piece."""
    from attncli.models import chat  # jinja2's, only with --chat

    has_template(model)
    empty = model.encode("", "prompt")  # the markers the tokenizer puts before any text: a BOS, where it has one
    bos = empty.pieces[0] if empty.special and empty.special[0] else None
    eos = model.piece(model.eos[0]) if model.eos else None
    return chat.render(model.chat_template, prompt, bos=bos, eos=eos, where=model.name)


def has_template(model) -> None:
    """Refused where the model has no chat template to put a prompt in."""
    if model.chat_template is None:
        raise OptionError(f"{model.name} has no chat template (tokenizer_config.json's chat_template, a GGUF's "
                          "tokenizer.chat_template); leave out --chat")


def _decoded(model, ids) -> str:
    """The text of `ids` as the tokenizer decodes it, markers and all: the continuation is
    what decoding the prompt and it adds to the prompt's own (its first piece's space kept)."""
    return model.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)


def _top(row: np.ndarray, tokens: list[str], P: int) -> list[dict]:
    """The prompt's pieces after the first (the sink, given apart) that `row` weighs most."""
    ranked = [int(j) + 1 for j in ranking.ranked(row[1:P])][:TOP]
    return [{"token": tokens[j], "index": j, "weight": float(row[j])} for j in ranked]
