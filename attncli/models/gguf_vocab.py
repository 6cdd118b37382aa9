"""A GGUF file's tokenizer, made from its metadata as transformers 5.24's GGUF loader makes
it (integrations/gguf/gguf_tokenizer_mapping.py), written as the tokenizer.json it would
save, then checked as any tokenizer.json is (tokenizer.from_json) and read by tokenizers.

The metadata (llama.cpp's keys):

    tokenizer.ggml.model        "llama": SentencePiece's BPE, a space written ▁, a character
                                the vocabulary lacks written in byte pieces <0x00> .. <0xFF>;
                                "gpt2": a byte-level BPE (GPT-2's, Llama 3's, Qwen2's)
    tokenizer.ggml.pre          a byte-level BPE's pre-tokenizer, by name (PRE)
    tokenizer.ggml.tokens       the pieces, by id
    tokenizer.ggml.scores       "llama": each piece's score, which orders its merges
    tokenizer.ggml.token_type   1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
    tokenizer.ggml.merges       "gpt2": its merges, "a b", best first
    tokenizer.ggml.bos_token_id, .eos_token_id, .unknown_token_id, .padding_token_id
    tokenizer.ggml.add_bos_token, .add_eos_token   whether a sentence gets them
    tokenizer.ggml.add_space_prefix                "llama": whether ▁ goes before a sentence

What transformers makes of them: the vocabulary as the file spells it (a byte-level one
respelled in GPT-2's byte alphabet where a piece is not), the merges the file gives or, for
"llama", those its scores imply (generate_merges), no normalizer, SentencePiece's Metaspace
or the byte-level pre-tokenizer its `pre` names, the control pieces (and the named bos, eos,
unk, pad) as special added tokens, the user-defined ones as added tokens, and the BOS (EOS)
put before (after) a sentence where add_bos_token (add_eos_token) says so, add_bos_token
true by default for "llama".
"""

from __future__ import annotations

from pathlib import Path

from attncli.errors import ModelError
from attncli.models import tokenizer
from attncli.models.layers import Config

KINDS = ("llama", "gpt2")
# tokenizer.ggml.pre -> the Split its byte-level BPE runs (transformers' GGUF_PRE_TOKENIZER_SPLITS,
# those of the patterns tokenizer.py runs); None: GPT-2's own ByteLevel regex
PRE = {**dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "smaug-bpe", "dbrx", "falcon3"), tokenizer.LLAMA3_SPLIT),
       **dict.fromkeys(("qwen2", "deepseek-r1-qwen"), tokenizer.QWEN2_SPLIT),
       **dict.fromkeys(("default", "gpt-2"), None)}
CONTROL, USER_DEFINED = 3, 4
# characters of a SentencePiece piece, at most: its merges are found by splitting every piece
# at every place (generate_merges), which costs the square of a piece's length; SentencePiece's
# own pieces are 16 characters at most by default, and Gemma's longest (runs of spaces) 31
PIECE_MOST = 1_024
NAMED = ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id")


def byte_alphabet() -> dict[int, str]:
    """GPT-2's printable character for each byte (bytes_to_unicode in its encoder.py): the
    printable Latin-1 bytes as themselves, every other byte as the next character from 256."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    spelled, n = {b: chr(b) for b in kept}, 0
    for b in range(256):
        if b not in spelled:
            spelled[b], n = chr(256 + n), n + 1
    return spelled


def generate_merges(vocab: dict[str, int], scores: dict[str, float]) -> list[tuple[str, str]]:
    """The merges a SentencePiece BPE vocabulary implies (transformers' generate_merges with
    scores): every split of a piece into two pieces of the vocabulary, those of a piece by
    their pieces' ids, all of them by the piece's score, best first, then the longer left
    and right piece first."""
    merges = []
    for piece, score in scores.items():
        local = [(piece[:i], piece[i:], score) for i in range(1, len(piece)) if piece[:i] in vocab and piece[i:] in vocab]
        merges.extend(sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]])))
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in merges]


def _strings(header, key: str, required: bool = True) -> list[str] | None:
    value = header.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ModelError(f"{header.path}: {key} is {'missing' if value is None else 'not a list of strings'}; a model's "
                         "GGUF holds its tokenizer's pieces there")
    return value


def _numbers(header, key: str, n: int) -> list | None:
    value = header.get(key)
    if value is None:
        return None
    if getattr(value, "ndim", None) != 1 or len(value) != n:
        raise ModelError(f"{header.path}: {key} must be an array of a number for each of the {n:,} pieces")
    return value.tolist()


def _flag(header, key: str, default: bool) -> bool:
    value = header.get(key, default)
    if not isinstance(value, bool):
        raise ModelError(f"{header.path}: {key} is {value!r}; it must be true or false")
    return value


def read_tokenizer(header, config: Config):
    """The tokenizer the GGUF file (gguf_file.Header) describes, a tokenizers.Tokenizer,
    checked: its pieces' ids within the embedding table, its merges of pieces it holds, its
    markers its own; a tokenizer model or pre-tokenizer attncli does not know refused by name."""
    path = header.path
    kind = header.get("tokenizer.ggml.model")
    if kind not in KINDS:
        raise ModelError(f"{path}: tokenizer.ggml.model is {kind!r}; attncli reads GGUF tokenizers of model "
                         f"{' or '.join(map(repr, KINDS))} (SentencePiece's BPE, a byte-level BPE)")
    tokens = _strings(header, "tokenizer.ggml.tokens")
    types = _numbers(header, "tokenizer.ggml.token_type", len(tokens)) or [1] * len(tokens)
    named = {}
    for key in NAMED:
        i = header.get(f"tokenizer.ggml.{key}")
        if i is not None:
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(tokens):
                raise ModelError(f"{path}: tokenizer.ggml.{key} is {i!r}, no piece of its {len(tokens):,}")
            named[key] = i
    llama = kind == "llama"
    if llama:
        vocab, model, pre, decoder = _sentencepiece(header, tokens)
    else:
        vocab, model, pre, decoder = _byte_level(header, tokens)
    alphabet = None if llama else set(byte_alphabet().values())
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True}
             for i, t in enumerate(tokens)
             if (types[i] == CONTROL and (alphabet is None or set(t) <= alphabet)) or i in named.values()]
    added += [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
               "special": False} for i, t in enumerate(tokens) if types[i] == USER_DEFINED and t in vocab]
    added.sort(key=lambda a: a["id"])
    bos = named.get("bos_token_id") if _flag(header, "tokenizer.ggml.add_bos_token", llama) else None
    eos = named.get("eos_token_id") if _flag(header, "tokenizer.ggml.add_eos_token", False) else None
    if _flag(header, "tokenizer.ggml.add_bos_token", llama) and bos is None:
        raise ModelError(f"{path}: tokenizer.ggml.add_bos_token is true, and it names no bos_token_id")
    raw = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": pre, "post_processor": _template(tokens, bos, eos), "decoder": decoder,
           "model": {**model, "vocab": vocab}}
    return tokenizer.from_json(raw, Path(f"{path} (its tokenizer)"), config, family="GGUF")


def _sentencepiece(header, tokens: list[str]):
    """"llama": the vocabulary as it is, the merges its scores imply, Metaspace."""
    scores = _numbers(header, "tokenizer.ggml.scores", len(tokens))
    if scores is None:
        raise ModelError(f"{header.path}: lacks tokenizer.ggml.scores, which a SentencePiece vocabulary ('llama') "
                         "orders its merges by")
    longest = max(tokens, key=len, default="")
    if len(longest) > PIECE_MOST:
        raise ModelError(f"{header.path}: its vocabulary holds a piece of {len(longest):,} characters, and a "
                         f"SentencePiece vocabulary's are {PIECE_MOST:,} at most; it is not a model's own")
    if not all(isinstance(x, (int, float)) and x == x for x in scores):  # NaN is not equal to itself
        raise ModelError(f"{header.path}: tokenizer.ggml.scores holds a score that is not a number, and the scores "
                         "order the vocabulary's merges")
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = [list(m) for m in generate_merges(vocab, dict(zip(tokens, scores)))]
    prefix = _flag(header, "tokenizer.ggml.add_space_prefix", True)
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
             "merges": merges}
    pre = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first" if prefix else "never", "split": False}
    decoder = {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                {"type": "ByteFallback"}, {"type": "Fuse"},
                                                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    return vocab, model, pre, decoder


def _byte_level(header, tokens: list[str]):
    """"gpt2": the vocabulary in GPT-2's byte alphabet, the file's merges, the split its
    `pre` names."""
    name = header.get("tokenizer.ggml.pre", "default")
    if name not in PRE:
        raise ModelError(f"{header.path}: tokenizer.ggml.pre is {name!r}; attncli splits text as the byte-level BPEs "
                         f"{', '.join(PRE)} do, and runs no other's pattern")
    spelling = byte_alphabet()
    alphabet = set(spelling.values())
    vocab = {t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8")): i
             for i, t in enumerate(tokens)}
    merges = [m.split(" ") for m in _strings(header, "tokenizer.ggml.merges")]
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
             "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
             "merges": merges}
    level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": PRE[name] is None}
    pre = level if PRE[name] is None else {
        "type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": PRE[name]},
                                               "behavior": "Isolated", "invert": False}, level]}
    return vocab, model, pre, {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}


def _template(tokens: list[str], bos: int | None, eos: int | None) -> dict:
    """The TemplateProcessing that puts the BOS before a sentence and the EOS after it, where given."""
    def marks(type_id: int, sequence: str):
        return ([{"SpecialToken": {"id": tokens[bos], "type_id": type_id}}] if bos is not None else []) + \
            [{"Sequence": {"id": sequence, "type_id": type_id}}] + \
            ([{"SpecialToken": {"id": tokens[eos], "type_id": type_id}}] if eos is not None else [])

    special = {tokens[i]: {"id": tokens[i], "ids": [i], "tokens": [tokens[i]]} for i in (bos, eos) if i is not None}
    return {"type": "TemplateProcessing", "single": marks(0, "A"), "pair": marks(0, "A") + marks(1, "B"),
            "special_tokens": special}
