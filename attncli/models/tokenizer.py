"""A model's tokenizer, whatever its family: tokenizer.json (or BERT's vocab.txt) and
tokenizer_config.json, checked before the tokenizers library reads them, then read by it.

A family says what is its own (read's arguments): the kinds of model its tokenizers are,
and the transformers class that reads them where tokenizer_config.json names none. The
kinds:

    WordPiece  BERT, DistilBERT: "##" before a piece that goes on a word, [UNK] for a word
               it cannot split; tokenizer.json, or vocab.txt read as a lower-casing BERT's
    BPE        byte-level (GPT-2, RoBERTa, Qwen2, Llama 3): a ByteLevel pre-tokenizer maps
               every byte to a printable character (a space to Ġ, a newline to Ċ), and its
               vocab holds all 256 of them; or SentencePiece's (Llama 2, Mistral): a space
               is ▁ (a Metaspace pre-tokenizer, or a normalizer that prepends ▁ and replaces
               spaces), and a character its vocab lacks is written in byte pieces
               <0x00> .. <0xFF> (byte_fallback)
    Unigram    XLM-RoBERTa: SentencePiece's pieces with their scores, ▁ for a space

What each check keeps out, as tokenizers meets it (measured with tokenizers 0.23):

    - a regular expression from the file (a Split or a Replace): Oniguruma backtracks, so
      (a+)+b takes 5 ms a character of "aaa...c" (25 s for 4,600 characters, and a linear
      hour for 700 kB), and on a run of 24 a's passes its retry limit: a panic that prints
      its backtrace. Only the exact patterns of real tokenizers are run (KNOWN_REGEXES).
    - parts of a file no tokenizer of its kind holds: each part's types are among its
      kind's (Pipeline); a Precompiled normalizer, a trie of offsets read unchecked, panics
      on a file of garbage and on a short one (an index out of bounds)
    - a template naming a marker it lacks, or a second text: a panic
    - a BPE merge naming a piece its vocab lacks (refused by tokenizers in its own words),
      a continuing_subword_prefix or end_of_word_suffix (a panic slicing a merge's pieces),
      a dropout (a word split another way at each reading)
    - a character its vocab cannot write: BPE drops it unseen, Unigram without an unk_id
      stops at it, WordPiece without its unknown token too
    - a Unigram score that is not a number, ids past the embedding table, and a parse
      larger than memory (Unigram's trie: TRIE_NODE bytes a node)

and the markers its post-processor puts around a sentence are each a token of its
vocabulary or added tokens, under that token's id.

The markers a sentence gets are those transformers 5.24.0's AutoTokenizer gives it for the
same folder (markers says how it decides them): tokenizer.json's post_processor as it is,
none where it has none, except that a BERT's, a RoBERTa's and an XLM-RoBERTa's class puts
its own two, named by tokenizer_config.json (cls_token and sep_token, or bos_token and
eos_token), over the file's. A family's usual markers are no rule: a Qwen2 whose
tokenizer.json puts a BOS first is read with it, a Llama whose tokenizer.json puts none
without one. What the files contradict themselves on is refused: a marker the vocabulary
lacks or numbers otherwise, a template naming a marker it does not define, an
add_bos_token or add_eos_token that is not true or false, a marker tokenizer_config.json
names that the tokenizer does not hold.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from attncli.errors import ModelError
from attncli.models import files
from attncli.models.layers import Config
from attncli.system import limits

CONFIG_MOST = 10_000_000  # bytes of a tokenizer_config.json: Llama 3.1's, the largest met, is 55 kB
# The regular expressions of real tokenizers' Split pre-tokenizers, as their tokenizer.json
# spells them; none backtracks far (Qwen2's over 160,000 spaces, letters or é: 0.2 to 0.3 s)
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                r"|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
               r"|\s+(?!\S)|\s+")
KNOWN_REGEXES = {GPT2_SPLIT: "GPT-2's", LLAMA3_SPLIT: "Llama 3's (GPT-4's cl100k)", QWEN2_SPLIT: "Qwen2's"}
# Memory tokenizers takes for a Unigram model beyond files.GROWTH bytes a byte of its file:
# a trie node for each distinct prefix of its pieces (in UTF-8), at most a node a byte of
# them. Measured at the peak, for 100,000 to 1 million pieces of 16 to 40 random characters
# (a node a character): 244 to 266 bytes a node beyond 64 a byte of the file, 355 to 358 in
# all; for a million pieces of 3 characters, sharing most of their prefixes, 546 MB in all
# (31 bytes a byte of the file) where 3 million bytes of pieces bound it at 2.1 GB.
TRIE_NODE = 320
BYTES = [f"<0x{b:02X}>" for b in range(256)]  # byte_fallback's pieces


@dataclass(frozen=True)
class Pipeline:
    """What each part of a tokenizer.json of one kind may hold: the types of its steps."""

    normalizers: tuple[str, ...]
    pre_tokenizers: tuple[str, ...]
    post_processors: tuple[str, ...]
    decoders: tuple[str, ...]


_UNICODE = ("NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Strip", "StripAccents", "Sequence")
_SPACES = ("Metaspace", "Replace", "ByteFallback", "Fuse", "Strip", "Sequence")  # SentencePiece's decoders
# each kind's steps: normalizers, pre-tokenizers, post-processors, decoders
WORDPIECE = Pipeline(("BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents", "Strip", "Sequence"),
                     ("BertPreTokenizer", "Whitespace", "WhitespaceSplit", "Punctuation", "Digits", "Sequence"),
                     ("TemplateProcessing", "BertProcessing"), ("WordPiece",))
BYTE_LEVEL = Pipeline(_UNICODE, ("ByteLevel", "Split", "Digits", "Sequence"),
                      ("ByteLevel", "TemplateProcessing", "RobertaProcessing", "Sequence"), ("ByteLevel",))
SENTENCEPIECE = Pipeline(("Prepend", "Replace", *_UNICODE), ("Metaspace", "WhitespaceSplit", "Sequence"),
                         ("TemplateProcessing", "Sequence"), _SPACES)
UNIGRAM = Pipeline(("Prepend", "Replace", *_UNICODE), ("Metaspace", "WhitespaceSplit", "Whitespace", "Sequence"),
                   ("TemplateProcessing", "Sequence"), _SPACES)
# a part of tokenizer.json, and the key of a Sequence's list of steps in it
PARTS = {"normalizer": "normalizers", "pre_tokenizer": "pretokenizers", "post_processor": "processors",
         "decoder": "decoders"}


@dataclass(frozen=True)
class Auto:
    """The transformers tokenizer class that AutoTokenizer reads a model type's folder with
    where its tokenizer_config.json names none (TOKENIZER_MAPPING_NAMES; None: it maps the
    type to none, and reads the folder with TokenizersBackend), and whether it takes that
    class over the one tokenizer_config.json names (MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS)."""

    registered: str | None
    overrules: bool = False


@dataclass(frozen=True)
class Own:
    """The markers a transformers tokenizer class puts around every sentence itself, over
    whatever tokenizer.json's post_processor says: tokenizer_config.json's keys that name the
    marker before the sentence and the one after it, each with the class's default name."""

    before: tuple[str, str]
    after: tuple[str, str]
    roberta: bool = False  # a RobertaProcessing, as tokenizer_config.json's trim_offsets and add_prefix_space say


_BERT = Own(("cls_token", "[CLS]"), ("sep_token", "[SEP]"))
_ROBERTA = Own(("cls_token", "<s>"), ("sep_token", "</s>"), roberta=True)
# The classes that put their own markers, by the names tokenizer_config.json gives them
# (transformers 5.24.0 resolves Electra's, MobileBERT's and LXMERT's to BertTokenizer, BART's,
# LED's and MVP's to RobertaTokenizer); every other class (GPT2Tokenizer, Qwen2Tokenizer,
# LlamaTokenizer, TokenizersBackend and PreTrainedTokenizerFast among them) takes
# tokenizer.json's post_processor as it is, and a sentence alone where it has none.
OWN = {**dict.fromkeys(("BertTokenizer", "DistilBertTokenizer", "ElectraTokenizer", "MobileBertTokenizer",
                        "LxmertTokenizer"), _BERT),
       **dict.fromkeys(("RobertaTokenizer", "BartTokenizer", "LEDTokenizer", "MvpTokenizer"), _ROBERTA),
       "XLMRobertaTokenizer": Own(("bos_token", "<s>"), ("eos_token", "</s>"))}
FLAGS = ("add_bos_token", "add_eos_token")
# tokenizer_config.json's keys that name a special token (transformers' SPECIAL_TOKENS_ATTRIBUTES)
TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def read(where: Path, config: Config, *, family: str, kinds: tuple[str, ...], auto: Auto):
    """The tokenizer of the model in `where`, a tokenizers.Tokenizer, padding and truncation
    off: a sentence is read whole, or refused when too long. `family` names the family in
    messages ("BERT"), `kinds` are the models its tokenizers are ("WordPiece", "BPE",
    "Unigram"), `auto` the transformers class that reads them where tokenizer_config.json
    names none; the markers it puts around a sentence are those transformers puts (markers).

    Every id it can give has a row of the embedding table: its vocabulary's, checked in
    the file before tokenizers reads it, then its added tokens' and its markers'."""
    tokenizers = files.need_module("tokenizers")
    if "WordPiece" not in kinds and not os.path.lexists(where / "tokenizer.json"):  # vocab.txt is WordPiece's
        raise ModelError(f"{where}: lacks tokenizer.json, which a {family} model's folder must hold")
    path = files.tokenizer_file(where)
    settings = read_settings(where)
    data = files.read(path, files.TOKENIZER_MOST)
    if path.name == "tokenizer.json":
        check(files.parse_json(data, path, "", "a tokenizer"), path, config, family=family, kinds=kinds,
              size=len(data))
    else:
        _check_lines(data, path, config)
        data = None  # tokenizers reads vocab.txt itself: its bytes need not be held beside its pieces
    tokenizer = _loaded(tokenizers, data, path, config)
    markers(tokenizer, settings, auto, where)
    return tokenizer


def from_json(raw: dict, path: Path, config: Config, *, family: str):
    """The tokenizer of the tokenizer.json object `raw` made from another file (a GGUF's
    metadata, at `path`), checked as a tokenizer.json of a BPE model is; its markers are
    its post_processor's."""
    import orjson

    tokenizers = files.need_module("tokenizers")
    data = orjson.dumps(raw)
    check(raw, path, config, family=family, kinds=("BPE",), size=len(data))
    return _loaded(tokenizers, data, path, config)


def _loaded(tokenizers, data: bytes | None, path: Path, config: Config):
    """tokenizers' Tokenizer of the checked file, each id it can give within the embedding
    table and each marker its post-processor places its vocabulary's."""
    tokenizer, probe = _load(tokenizers, data, path)
    added = [(token.content, i) for i, token in tokenizer.get_added_tokens_decoder().items()]
    files.within(path, added, config)
    _check_placed(tokenizer, probe, path, config)
    return tokenizer


def _load(tokenizers, data: bytes | None, path: Path):
    """tokenizers' Tokenizer of the checked file, and its encoding of a probe ("a"), whose
    pieces without a sequence are the markers its post-processor adds."""
    try:
        if data is not None:
            tokenizer = tokenizers.Tokenizer.from_buffer(data)
        else:
            from tokenizers.implementations import BertWordPieceTokenizer

            tokenizer = BertWordPieceTokenizer(str(path), lowercase=True)
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return tokenizer, tokenizer.encode("a")
    except Exception as e:  # noqa: BLE001: tokenizers raises plain Exceptions for a bad file
        raise ModelError(f"{path}: not a tokenizer ({' '.join(str(e).split())[:200]})") from None


def _placed(probe) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The markers (piece, id) a post-processor put before the probe's pieces and after them."""
    marks = [s is None for s in probe.sequence_ids]
    first = marks.index(False) if False in marks else len(marks)
    last = len(marks) - marks[::-1].index(False) if False in marks else len(marks)
    pairs = list(zip(probe.tokens, probe.ids))
    return pairs[:first], pairs[last:]


def read_settings(where: Path) -> dict:
    """tokenizer_config.json, a JSON object, or {} where the folder has none."""
    path = where / "tokenizer_config.json"
    if not os.path.lexists(path):
        return {}
    raw = files.parse_json(files.read(path, CONFIG_MOST), path, "", "a tokenizer_config.json")
    if not isinstance(raw, dict):
        raise ModelError(f"{path}: is not a JSON object, as a tokenizer_config.json is; give the model's own")
    return raw


# --- the markers


def markers(tokenizer, settings: dict, auto: Auto, where: Path) -> None:
    """Put on `tokenizer` the markers transformers 5.24.0's AutoTokenizer puts around a
    sentence for the folder `where`, whose tokenizer_config.json is `settings`.

    What transformers does (read in its source and run on every family's tiny model): it
    reads the folder with one class (tokenizer_class), which takes tokenizer.json's
    post_processor as it is, a sentence alone where it is null or absent; BertTokenizer,
    RobertaTokenizer and XLMRobertaTokenizer then put their own markers, whatever the file's
    (OWN). tokenizer_config.json's add_bos_token and add_eos_token change nothing: where the
    folder has a tokenizer.json they are dropped before the class sees them, and where it
    has a vocab.txt, BertTokenizer's own markers replace the template they make. So a Qwen2
    whose tokenizer.json puts a BOS first has one (DeepSeek-R1-Distill-Qwen's), a Llama
    whose tokenizer.json puts none has none, and a BERT's template is BertTokenizer's."""
    path = where / "tokenizer_config.json"
    for flag in FLAGS:  # read by no class, yet a file's own: a flag is true or false
        if flag in settings:
            _flag(settings, flag, False, path)
    for key in TOKEN_KEYS:
        _named(settings, key, None, path)
    name = tokenizer_class(settings, auto, path)
    own = OWN.get(name)
    if own is None:
        return
    before, after = (_marker(tokenizer, settings, key, default, path, name) for key, default in (own.before,
                                                                                                 own.after))
    from tokenizers import processors  # the model extra's, which read has found

    if own.roberta:
        trim, prefix = (_flag(settings, key, default, path) for key, default in (("trim_offsets", True),
                                                                                 ("add_prefix_space", False)))
        tokenizer.post_processor = processors.RobertaProcessing(after, before, trim_offsets=trim,
                                                                add_prefix_space=prefix)
    else:
        tokenizer.post_processor = processors.TemplateProcessing(single=[before[0], "$A", after[0]],
                                                                 special_tokens=[before, after])


def tokenizer_class(settings: dict, auto: Auto, path: Path) -> str:
    """The transformers class AutoTokenizer reads the folder with, its name without "Fast"
    (BertTokenizerFast is BertTokenizer): the one tokenizer_config.json names, unless the
    model type's own overrules it (Qwen2's), or the type's own is TokenizersBackend
    (Mistral's, where mistral_common is not installed), which reads any folder. A Llama's
    LlamaTokenizer read over a byte-level tokenizer.json is TokenizersBackend to transformers:
    the same markers, the file's."""
    declared = settings.get("tokenizer_class")
    if declared is not None and not isinstance(declared, str):
        raise ModelError(f"{path}: its tokenizer_class is {declared!r}; a class is named by a string")
    declared = declared.removesuffix("Fast") if declared else None
    if declared is None or declared == auto.registered or auto.overrules:
        return auto.registered or "TokenizersBackend"
    return "TokenizersBackend" if auto.registered == "TokenizersBackend" else declared


def _marker(tokenizer, settings: dict, key: str, default: str, path: Path, name: str) -> tuple[str, int]:
    """(piece, id) of the marker tokenizer_config.json's `key` names (else `default`), which
    the class `name` puts around every sentence."""
    piece = _named(settings, key, default, path)
    i = tokenizer.token_to_id(piece)
    if i is None:  # transformers would add it as a new piece: an id whose row the model never learned as it
        raise ModelError(f"{path}: its {key} {piece!r} is not in the tokenizer's vocabulary or among its added "
                         f"tokens, and transformers' {name} puts it around every sentence; give the model's own "
                         "tokenizer_config.json")
    if ":" in piece or piece.startswith("$"):  # a template reads "a:1" as a piece of type 1, "$B" as a sentence
        raise ModelError(f"{path}: its {key} {piece!r} holds a ':' or begins with a '$', as no marker of a template "
                         "may; give the model's own tokenizer_config.json")
    return piece, i


def _named(settings: dict, key: str, default: str | None, path: Path) -> str | None:
    """The token tokenizer_config.json's `key` names (an AddedToken's content, in older
    files), or `default` where it names none."""
    name = settings.get(key)
    name = name.get("content") if isinstance(name, dict) else name
    if name is not None and not isinstance(name, str):
        raise ModelError(f"{path}: its {key} is {settings[key]!r}; a token is named by a string")
    return default if name is None else name


def _flag(settings: dict, key: str, default: bool, path: Path) -> bool:
    on = settings.get(key, default)
    if not isinstance(on, bool):  # transformers stops at it too (RobertaProcessing takes a bool)
        raise ModelError(f"{path}: its {key} is {on!r}; it must be true or false")
    return on


def _check_placed(tokenizer, probe, path: Path, config: Config) -> None:
    """The markers tokenizer.json's post_processor places: each within the embedding table,
    and a token of the tokenizer under that id (a marker the vocabulary gives another id,
    or does not hold, is a file at odds with itself)."""
    before, after = _placed(probe)
    files.within(path, before + after, config)
    for piece, i in before + after:
        held = tokenizer.token_to_id(piece)
        if held != i:
            holds = "do not hold it" if held is None else f"give it the id {held:,}"
            raise ModelError(f"{path}: its post_processor puts {piece!r} (id {i:,}) around a sentence, and its "
                             f"vocabulary and added tokens {holds}; give the model's own tokenizer")


# --- tokenizer.json


def check(raw: object, path: Path, config: Config, *, family: str, kinds: tuple[str, ...], size: int) -> None:
    """A tokenizer.json (parsed, `size` bytes), before tokenizers reads it: a model of one of
    `kinds`, its own checks passed, each part's steps of its kind."""
    model = raw.get("model") if isinstance(raw, dict) else None
    kind = model.get("type") if isinstance(model, dict) else None
    if kind not in kinds:
        raise ModelError(f"{path}: its model is {kind!r}; attncli reads {family}'s tokenizers, of type "
                         f"{' or '.join(map(repr, kinds))}")
    steps = {part: _steps(raw.get(part), part, path) for part in PARTS}
    pipeline = {"WordPiece": WORDPIECE, "Unigram": UNIGRAM}.get(kind) or _flavour(steps, path, family)
    MODELS[kind](model, path, config, pipeline, size)
    for part, found in steps.items():
        allowed = getattr(pipeline, f"{part}s")
        for step in found:
            _check_step(step, part, allowed, path, family)


def _steps(step: object, part: str, path: Path) -> list:
    """The steps of a part of tokenizer.json (a normalizer ...), its Sequences opened, in order."""
    found, todo = [], [step]
    while todo:
        step = todo.pop(0)
        if step is None:
            continue
        if isinstance(step, dict) and step.get("type") == "Sequence":
            inner = step.get(PARTS[part])
            if not isinstance(inner, list):
                raise ModelError(f"{path}: its {part} is a Sequence without a list of {PARTS[part]}; it is not a "
                                 "tokenizer")
            todo[:0] = inner
        found.append(step)
    return found


def _types(steps: list) -> set:
    return {step.get("type") for step in steps if isinstance(step, dict)}


def _flavour(steps: dict, path: Path, family: str) -> Pipeline:
    """A BPE tokenizer's kind: byte-level, or SentencePiece's."""
    if "ByteLevel" in _types(steps["pre_tokenizer"]):
        return BYTE_LEVEL
    if "Metaspace" in _types(steps["pre_tokenizer"]) or "Prepend" in _types(steps["normalizer"]):
        return SENTENCEPIECE
    raise ModelError(f"{path}: its BPE model is neither byte-level (a ByteLevel pre_tokenizer) nor SentencePiece's "
                     f"(a Metaspace pre_tokenizer, or a normalizer that prepends ▁); attncli reads {family}'s "
                     "tokenizers of these two kinds")


def _check_step(step: object, part: str, allowed: tuple[str, ...], path: Path, family: str) -> None:
    """One step of a part: of a type its kind's tokenizers hold, running no regular expression
    but a known one, and, for a template, one that tokenizers runs."""
    kind = step.get("type") if isinstance(step, dict) else None
    if kind not in allowed:
        if part == "post_processor":
            raise ModelError(f"{path}: its post_processor is {kind!r}; attncli reads {family}'s tokenizers, whose "
                             f"post_processor is {_either(allowed)}")
        raise ModelError(f"{path}: its {part} holds {kind!r}; attncli reads {family}'s tokenizers, whose {part}s are "
                         f"among {', '.join(allowed)}")
    pattern = step.get("pattern")
    regex = pattern.get("Regex") if isinstance(pattern, dict) else None
    if regex is not None and not (isinstance(regex, str) and regex in KNOWN_REGEXES):
        raise ModelError(f"{path}: its {part}'s {kind} runs the regular expression {str(regex)[:100]!r}, which is none "
                         f"of those attncli knows ({', '.join(KNOWN_REGEXES.values())}); a regular expression from a "
                         "file can hang tokenizers, so attncli runs no other")
    if kind == "TemplateProcessing":
        _check_template(step, path, family)


def _either(types: tuple[str, ...]) -> str:
    """("A", "B", "C", "Sequence") as "a A, a B or a C"."""
    named = [f"a {t}" for t in types if t != "Sequence"]
    return " or ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)


def _check_template(post: dict, path: Path, family: str) -> None:
    """A template that holds the sentence once and only markers it defines, each with as many
    ids as pieces (at a marker it lacks, or a second text, tokenizers stops in a panic)."""
    markers, single = post.get("special_tokens"), post.get("single")
    if not isinstance(markers, dict) or not isinstance(single, list):
        return  # tokenizers refuses it
    pieces = [next(iter(item.items())) for item in single if isinstance(item, dict) and len(item) == 1]
    named = [(kind, value.get("id") if isinstance(value, dict) else None) for kind, value in pieces]
    texts = [name for kind, name in named if kind == "Sequence"]
    if texts != ["A"]:
        raise ModelError(f"{path}: its post_processor's template for a sentence holds the sequences {texts}, where "
                         f"{family}'s holds ['A'], the sentence once; give the model's own tokenizer")
    for kind, name in named:
        if kind == "SpecialToken" and not (isinstance(name, str) and name in markers):
            raise ModelError(f"{path}: its post_processor's template names the marker {name!r}, which its "
                             "special_tokens lack; give the model's own tokenizer")
    for name, marker in markers.items():
        ids, tokens = (marker.get("ids"), marker.get("tokens")) if isinstance(marker, dict) else (None, None)
        if not (isinstance(ids, list) and isinstance(tokens, list) and len(ids) == len(tokens)):
            raise ModelError(f"{path}: its post_processor's marker {name!r} does not hold a list of ids and as many "
                             "tokens; give the model's own tokenizer")


# --- each kind's model


def _pieces(model: dict) -> dict | None:
    """A WordPiece or BPE vocab, piece -> id, or None where it is not one (tokenizers refuses it)."""
    vocab = model.get("vocab")
    return vocab if isinstance(vocab, dict) else None


def _check_unknown(model: dict, vocab: dict, path: Path, default: str | None) -> None:
    unknown = model.get("unk_token", default)
    if isinstance(unknown, str) and unknown not in vocab:  # looked up in its own vocabulary
        raise ModelError(f"{path}: its unknown token {unknown!r} is not in its vocabulary, so a word it cannot split "
                         "would stop it; give the model's own tokenizer")


def _check_wordpiece(model: dict, path: Path, config: Config, pipeline: Pipeline, size: int) -> None:
    vocab = _pieces(model)
    if vocab is not None:
        files.within(path, [(piece, i) for piece, i in vocab.items() if isinstance(i, int)], config)
        _check_unknown(model, vocab, path, "[UNK]")


def _check_bpe(model: dict, path: Path, config: Config, pipeline: Pipeline, size: int) -> None:
    """Its vocab's ids within the table, its merges of pieces it holds, one way of splitting a
    word, and every character of a sentence written by some piece."""
    vocab = _pieces(model)
    if vocab is None:
        return
    files.within(path, [(piece, i) for piece, i in vocab.items() if isinstance(i, int)], config)
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key) not in (None, ""):
            raise ModelError(f"{path}: its BPE model has the {key} {model[key]!r}; attncli reads BPE models without "
                             "one (GPT-2's, Llama's), which tokenizers reads safely")
    dropout = model.get("dropout")
    if isinstance(dropout, (int, float)) and dropout > 0:
        raise ModelError(f"{path}: its dropout is {dropout!r}, which splits a word at random; give the model's own "
                         "tokenizer, whose dropout is null")
    merges = model.get("merges")
    for n, merge in enumerate(merges if isinstance(merges, list) else []):
        pair = merge.split(" ") if isinstance(merge, str) else merge
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
            missing = next((p for p in (*pair, "".join(pair)) if p not in vocab), None)
            if missing is not None:
                raise ModelError(f"{path}: its merge {n + 1:,} ({' + '.join(map(repr, pair))}) names the piece "
                                 f"{missing!r}, which its vocab lacks; give the model's own tokenizer")
    if not _bytes_covered(model, vocab, path, pipeline) and model.get("unk_token") is None:
        raise ModelError(f"{path}: its BPE model has no unk_token and no byte_fallback, so a character outside its "
                         "vocab would be dropped unseen; give the model's own tokenizer")
    _check_unknown(model, vocab, path, None)


def _bytes_covered(model: dict, vocab, path: Path, pipeline: Pipeline) -> bool:
    """Whether every byte of a sentence has a piece, as a byte-level vocab holds all 256
    bytes' pieces and byte_fallback's <0x00> .. <0xFF>: refused where some lack."""
    if pipeline is BYTE_LEVEL:
        from tokenizers.pre_tokenizers import ByteLevel  # the model extra's, which read has found

        needed, what = ByteLevel.alphabet(), "byte-level pieces"
    elif model.get("byte_fallback") is True:
        needed, what = BYTES, "byte pieces that byte_fallback writes a character in"
    else:
        return False
    missing = sorted(piece for piece in needed if piece not in vocab)
    if missing:
        raise ModelError(f"{path}: its vocab lacks {len(missing)} of the 256 {what} (the first {missing[0]!r}), so a "
                         "character written with one would be dropped unseen; give the model's own tokenizer")
    return True


def _check_unigram(model: dict, path: Path, config: Config, pipeline: Pipeline, size: int) -> None:
    """Its pieces (ids their places, from 0) within the table, each score a finite number, its
    unknown piece one of them, and its trie within memory."""
    vocab = model.get("vocab")
    if not (isinstance(vocab, list) and all(isinstance(e, list) and len(e) == 2 for e in vocab)):
        return  # tokenizers refuses it
    files.within(path, [(entry[0], i) for i, entry in enumerate(vocab)], config)  # an id is a piece's place
    for piece, score in vocab:
        if isinstance(score, float) and not math.isfinite(score):
            raise ModelError(f"{path}: its Unigram piece {piece!r} has the score {score!r}, where a score is a finite "
                             "log probability; the file is damaged: give the model's own tokenizer")
    unknown = model.get("unk_id")
    if not (isinstance(unknown, int) and not isinstance(unknown, bool) and 0 <= unknown < len(vocab)):
        raise ModelError(f"{path}: its unk_id is {unknown!r}, no piece of its vocabulary, so a word it cannot split "
                         "would stop it; give the model's own tokenizer")
    pieces = {piece for piece, _ in vocab if isinstance(piece, str)}
    _bytes_covered(model, pieces, path, pipeline)
    nodes = trie_nodes(pieces)
    limits.require(size * files.GROWTH + nodes * TRIE_NODE,
                   f"{path} ({limits.size(size)}, {files.GROWTH} times that once parsed, and {TRIE_NODE} bytes a node "
                   f"of its pieces' trie, {nodes:,} at most)", "give the model's own file, or free some memory")


def trie_nodes(pieces) -> int:
    """The most nodes a trie of `pieces` can have: a node a byte (fewer where pieces share
    their first bytes)."""
    return sum(len(piece.encode("utf-8", "surrogatepass")) for piece in pieces)


MODELS = {"WordPiece": _check_wordpiece, "BPE": _check_bpe, "Unigram": _check_unigram}


def _check_lines(data: bytes, path: Path, config: Config) -> None:
    """vocab.txt holds a piece a line, its id the line's number from 0: at most vocab_size
    lines, [UNK] among them."""
    lines = data.count(b"\n") + (not data.endswith(b"\n") and len(data) > 0)
    if lines > config.vocab_size:
        raise ModelError(f"{path}: holds {lines:,} pieces (a line each, ids from 0), and config.json's vocab_size is "
                         f"{config.vocab_size:,} (the embedding table's rows); the vocabulary is not the weights' own")
    if b"[UNK]" not in (line.rstrip() for line in data.split(b"\n")):
        raise ModelError(f"{path}: its unknown token '[UNK]' is not in its vocabulary, so a word it cannot split "
                         "would stop it; give the model's own tokenizer")
