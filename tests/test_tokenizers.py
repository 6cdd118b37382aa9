"""Every family's tokenizer through the one reader (attncli/models/tokenizer.py): the tiny
reference models' tokenizers give the ids and offsets transformers gave, and the pieces it
names; each kind's hostile variants are refused in one line before tokenizers meets them
(some would stop it in a panic that prints its backtrace, or hang it); --words gives words
for every kind.

    WordPiece  tiny-distilbert
    BPE        tiny-gpt2, tiny-roberta, tiny-qwen2 (byte-level: Ġ, a Split of Qwen2's regex),
               tiny-llama, tiny-mistral (SentencePiece's: ▁, byte fallback)
    Unigram    tiny-xlm-roberta
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
from clirunner import fails, run  # noqa: E402
from marker_variants import template  # noqa: E402

from attncli import models  # noqa: E402
from attncli.documents.merged import word_groups  # noqa: E402
from attncli.errors import ModelError  # noqa: E402
from attncli.models import files, tokenizer  # noqa: E402
from attncli.models.layers import Config  # noqa: E402
from attncli.system import limits  # noqa: E402

MODELS = Path(__file__).parent / "data" / "models"
# each reference model: its family's name, the kinds of its tokenizers, the class that reads them
FAMILIES = {
    "tiny-distilbert": ("DistilBERT", ("WordPiece",), tokenizer.Auto("BertTokenizer")),
    "tiny-roberta": ("RoBERTa", ("BPE",), tokenizer.Auto("RobertaTokenizer")),
    "tiny-xlm-roberta": ("XLM-RoBERTa", ("Unigram",), tokenizer.Auto("XLMRobertaTokenizer")),
    "tiny-gpt2": ("GPT-2", ("BPE",), tokenizer.Auto("GPT2Tokenizer")),
    "tiny-llama": ("Llama", ("BPE",), tokenizer.Auto(None)),
    "tiny-qwen2": ("Qwen2", ("BPE",), tokenizer.Auto("Qwen2Tokenizer", overrules=True)),
    "tiny-mistral": ("Mistral", ("BPE",), tokenizer.Auto("TokenizersBackend")),
}


def config(where: Path) -> Config:
    """The sizes the reader checks a tokenizer against: config.json's vocab_size."""
    raw = json.loads((where / "config.json").read_text())
    return Config(layers=1, heads=1, hidden=1, intermediate=1, max_positions=100_000, vocab_size=raw["vocab_size"],
                  norm_eps=1e-6, activation="gelu")


def read(where: Path, name: str | None = None):
    family, kinds, auto = FAMILIES[name or where.name]
    return tokenizer.read(where, config(where), family=family, kinds=kinds, auto=auto)


def encode(where: Path, text: str, name: str | None = None) -> files.Pieces:
    """`text` as Model.encode gives it with the tokenizer of `where`."""
    model = files.Model(where.name, where, None, config(where), {}, read(where, name), None)
    return model.encode(text)


def vocabulary(where: Path) -> dict[int, str]:
    """Each id's piece, from tokenizer.json itself: its vocab (a Unigram's by place) and its
    added tokens, as transformers' convert_ids_to_tokens names them."""
    raw = json.loads((where / "tokenizer.json").read_text())
    vocab = raw["model"]["vocab"]
    names = dict(enumerate(p for p, _ in vocab)) if isinstance(vocab, list) else {i: p for p, i in vocab.items()}
    return {**names, **{t["id"]: t["content"] for t in raw["added_tokens"]}}


# --- the reference models


@pytest.mark.parametrize("name", FAMILIES)
def test_the_references_ids_offsets_and_pieces(name):
    """Every sentence: the ids and offsets transformers' tokenizer gave, and each piece
    named as the tokenizer's own file names its id."""
    where = MODELS / name
    reference = np.load(MODELS / f"{name}.npz")
    named = vocabulary(where)
    for k, sentence in enumerate(reference["sentences"]):
        pieces = encode(where, str(sentence))
        assert pieces.ids.tolist() == reference[f"ids_{k}"].tolist()
        assert pieces.offsets == [tuple(o) for o in reference[f"offsets_{k}"].tolist()]
        assert pieces.pieces == [named[i] for i in reference[f"ids_{k}"].tolist()]


@pytest.mark.parametrize("name,pieces,special", [
    ("tiny-distilbert", ["[CLS]", "the", "earth", "is", "like", "an", "orange", "[SEP]"], [0, 7]),
    ("tiny-roberta", ["<s>", "The", "Ġearth", "Ġis", "Ġlike", "Ġan", "Ġorange", "</s>"], [0, 7]),
    ("tiny-xlm-roberta", ["<s>", "▁Th", "e", "▁earth", "▁", "is", "▁like", "▁an", "▁orange", "</s>"], [0, 9]),
    ("tiny-gpt2", ["The", "Ġearth", "Ġis", "Ġlike", "Ġan", "Ġorange"], []),
    ("tiny-llama", ["<s>", "▁The", "▁earth", "▁is", "▁like", "▁an", "▁orange"], [0]),
    ("tiny-qwen2", ["The", "Ġearth", "Ġis", "Ġlike", "Ġan", "Ġorange"], []),
    ("tiny-mistral", ["<s>", "▁The", "▁earth", "▁is", "▁like", "▁an", "▁orange"], [0]),
])
def test_each_familys_markers(name, pieces, special):
    """[CLS] ... [SEP], <s> ... </s>, a BOS alone, or none: the markers are the pieces
    Pieces.special says, and nothing of the sentence is."""
    got = encode(MODELS / name, "The earth is like an orange")
    assert got.pieces == pieces
    assert [i for i, s in enumerate(got.special) if s] == special


def test_a_unigram_unknown_piece_is_named_as_its_id_is():
    """tokenizers' Unigram encoding gives an unknown piece the text itself ("é\\x1bé", a
    control character from the sentence among it); attncli gives "<unk>", the id's name, as
    transformers does."""
    where = MODELS / "tiny-xlm-roberta"
    assert read(where).encode("café\x1bé").tokens[-2] == "é\x1bé"
    pieces = encode(where, "café\x1bé")
    assert pieces.pieces == ["<s>", "▁", "c", "a", "f", "<unk>", "</s>"]
    assert pieces.ids.tolist() == [0, 7, 90, 43, 52, 3, 2]


def copy(tmp_path: Path, name: str, change=None, settings=None) -> Path:
    """A reference model's tokenizer files (and config.json) in a folder of their own,
    tokenizer.json and tokenizer_config.json changed in place by `change` and `settings`."""
    where = tmp_path / name
    where.mkdir(parents=True)
    for file in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(MODELS / name / file, where / file)
    for file, edit in (("tokenizer.json", change), ("tokenizer_config.json", settings)):
        if edit is not None:
            data = json.loads((where / file).read_text())
            edit(data)
            (where / file).write_text(json.dumps(data))
    return where


def pipeline(**parts):
    return lambda t: t.update(parts)


CL100K = next(r for r, name in tokenizer.KNOWN_REGEXES.items() if name.startswith("Llama 3"))
GPT2_REGEX = next(r for r, name in tokenizer.KNOWN_REGEXES.items() if name == "GPT-2's")


def split(regex: str, byte_level: bool = True) -> dict:
    steps = [{"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}]
    if byte_level:
        steps.append({"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False})
    return {"type": "Sequence", "pretokenizers": steps}


LLAMA2 = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                               {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}


@pytest.mark.parametrize("name,change,ahead", [
    # GPT-2's own regular expression, spelt out, as converted tokenizers hold it
    ("tiny-gpt2", pipeline(pre_tokenizer=split(GPT2_REGEX)), []),
    # Llama 3's: cl100k's Split, then a BOS by a ByteLevel and a template in a Sequence
    ("tiny-qwen2", pipeline(pre_tokenizer=split(CL100K), post_processor={"type": "Sequence", "processors": [
        BYTE_LEVEL, template("<|endoftext|>", "$A", ids={"<|endoftext|>": 500})]}), [500]),
    # Llama 2's and Mistral 7B's: no pre-tokenizer, a normalizer that prepends ▁ and replaces spaces
    ("tiny-llama", pipeline(normalizer=LLAMA2, pre_tokenizer=None), []),
])
def test_the_other_ways_real_tokenizers_are_written(tmp_path, name, change, ahead):
    """The same pieces the reference gives, written as other real tokenizers write them
    (sentences without digits, where cl100k's \\p{N}{1,3} and Qwen2's \\p{N} split alike)."""
    where = copy(tmp_path, name, change)
    family = {"tiny-qwen2": "tiny-llama"}.get(name, name)  # a BOS before: read as Llama 3's
    if name == "tiny-qwen2":
        (where / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|endoftext|>"}))
    reference = np.load(MODELS / f"{name}.npz")
    for k, sentence in enumerate(reference["sentences"]):
        assert encode(where, str(sentence), family).ids.tolist() == ahead + reference[f"ids_{k}"].tolist()


# --- hostile tokenizers, each kind


def drop(*pieces):
    def change(t):
        for piece in pieces:
            del t["model"]["vocab"][piece]
    return change


def model(**fields):
    return lambda t: t["model"].update(fields)


def unigram_score(piece_at: int, score: float):
    return lambda t: t["model"]["vocab"][piece_at].__setitem__(1, score)


def unigram_pieces(n: int):
    return lambda t: t["model"]["vocab"].extend([f"zz{k}", -20.0] for k in range(n))


def no_bytes(t):
    """A SentencePiece BPE without byte fallback, and no unknown piece for what its vocab lacks."""
    t["model"].update(byte_fallback=False, unk_token=None)


READS = "attncli reads {}'s tokenizers"
KNOWN = "GPT-2's, Llama 3's (GPT-4's cl100k), Qwen2's"
REGEX = ("runs the regular expression {!r}, which is none of those attncli knows (" + KNOWN + "); a regular "
         "expression from a file can hang tokenizers, so attncli runs no other")
DROPPED = "so a character written with one would be dropped unseen; give the model's own tokenizer"

HOSTILE = {
    "split regex": ("tiny-qwen2", pipeline(pre_tokenizer=split("(a+)+b")), None,
                    "its pre_tokenizer's Split " + REGEX.format("(a+)+b")),
    "split regex spelt otherwise": ("tiny-qwen2", pipeline(pre_tokenizer=split(CL100K + " ")), None,
                                    "its pre_tokenizer's Split " + REGEX.format(CL100K[:100])),
    "regex not a string": ("tiny-qwen2", pipeline(pre_tokenizer=split(["a"])), None,  # type: ignore[arg-type]
                           "its pre_tokenizer's Split " + REGEX.format("['a']")),
    "replace regex": ("tiny-llama", pipeline(normalizer={"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}), None,
        "its normalizer's Replace " + REGEX.format(" {2,}")),
    "decoder regex": ("tiny-llama", pipeline(decoder={"type": "Replace", "pattern": {"Regex": "(x*)*y"},
                                                      "content": ""}), None,
                      "its decoder's Replace " + REGEX.format("(x*)*y")),
    "precompiled": ("tiny-xlm-roberta", pipeline(normalizer={"type": "Precompiled", "precompiled_charsmap": "AAAA"}),
                    None, "its normalizer holds 'Precompiled'; " + READS.format("XLM-RoBERTa")
                    + ", whose normalizers are among " + ", ".join(tokenizer.UNIGRAM.normalizers)),
    "neither byte-level nor SentencePiece": (
        "tiny-gpt2", pipeline(pre_tokenizer={"type": "Whitespace"}), None,
        "its BPE model is neither byte-level (a ByteLevel pre_tokenizer) nor SentencePiece's (a Metaspace "
        "pre_tokenizer, or a normalizer that prepends ▁); " + READS.format("GPT-2") + " of these two kinds"),
    "a byte-level post-processor elsewhere": (
        "tiny-llama", pipeline(post_processor=BYTE_LEVEL), None,
        "its post_processor is 'ByteLevel'; " + READS.format("Llama") + ", whose post_processor is a "
        "TemplateProcessing"),
    "another kind": ("tiny-distilbert", None, None,
                     "its model is 'WordPiece'; " + READS.format("GPT-2") + ", of type 'BPE'"),
    "merge of a piece it lacks": ("tiny-gpt2", lambda t: t["model"]["merges"].append(["Ġzz", "q"]), None,
                                  "its merge 245 ('Ġzz' + 'q') names the piece 'Ġzz', which its vocab lacks; give "
                                  "the model's own tokenizer"),
    "merge into a piece it lacks": ("tiny-gpt2", lambda t: t["model"]["merges"].append("Ġ q"), None,
                                    "its merge 245 ('Ġ' + 'q') names the piece 'Ġq', which its vocab lacks; give "
                                    "the model's own tokenizer"),
    "continuing subword prefix": ("tiny-gpt2", model(continuing_subword_prefix="########"), None,
                                  "its BPE model has the continuing_subword_prefix '########'; attncli reads BPE "
                                  "models without one (GPT-2's, Llama's), which tokenizers reads safely"),
    "dropout": ("tiny-gpt2", model(dropout=0.1), None,
                "its dropout is 0.1, which splits a word at random; give the model's own tokenizer, whose dropout is "
                "null"),
    "a byte-level piece missing": ("tiny-gpt2", drop("!"), None,
                                   f"its vocab lacks 1 of the 256 byte-level pieces (the first '!'), {DROPPED}"),
    "byte pieces missing": ("tiny-llama", drop("<0xC3>", "<0xA9>"), None,
                            "its vocab lacks 2 of the 256 byte pieces that byte_fallback writes a character in (the "
                            f"first '<0xA9>'), {DROPPED}"),
    "no byte fallback and no unknown piece": (
        "tiny-llama", no_bytes, None, "its BPE model has no unk_token and no byte_fallback, so a character outside "
        "its vocab would be dropped unseen; give the model's own tokenizer"),
    "an unknown piece it lacks": ("tiny-llama", model(byte_fallback=False, unk_token="<nope>"), None,
                                  "its unknown token '<nope>' is not in its vocabulary, so a word it cannot split "
                                  "would stop it; give the model's own tokenizer"),
    "a BPE id past the table": ("tiny-qwen2", lambda t: t["model"]["vocab"].update(zebra=512), None,
                                "gives the piece 'zebra' the id 512, and config.json's vocab_size is 512 (the "
                                "embedding table's rows); the tokenizer is not the weights' own"),
    "an added token past the table": ("tiny-gpt2", lambda t: t["added_tokens"].append({
        "id": 7000, "content": "<|zebra|>", "single_word": False, "lstrip": False, "rstrip": False,
        "normalized": False, "special": True}), None,
        "gives the piece '<|zebra|>' the id 501, and config.json's vocab_size is 501 (the embedding table's rows); "
        "the tokenizer is not the weights' own"),
    "unigram larger than the table": ("tiny-xlm-roberta", unigram_pieces(1), None,
                                      "gives the piece 'zz0' the id 168, and config.json's vocab_size is 168 (the "
                                      "embedding table's rows); the tokenizer is not the weights' own"),
    "unigram NaN": ("tiny-xlm-roberta", unigram_score(4, float("nan")), None,
                    "its Unigram piece '▁the' has the score nan, where a score is a finite log probability; the file "
                    "is damaged: give the model's own tokenizer"),
    "unigram infinite": ("tiny-xlm-roberta", unigram_score(5, float("-inf")), None,
                         "its Unigram piece 'd' has the score -inf, where a score is a finite log probability; the "
                         "file is damaged: give the model's own tokenizer"),
    "unigram without unk_id": ("tiny-xlm-roberta", model(unk_id=None), None,
                               "its unk_id is None, no piece of its vocabulary, so a word it cannot split would stop "
                               "it; give the model's own tokenizer"),
    "unigram unk_id past its pieces": ("tiny-xlm-roberta", model(unk_id=168), None,
                                       "its unk_id is 168, no piece of its vocabulary, so a word it cannot split would "
                                       "stop it; give the model's own tokenizer"),
    "unigram byte fallback without bytes": (
        "tiny-xlm-roberta", model(byte_fallback=True), None,
        f"its vocab lacks 256 of the 256 byte pieces that byte_fallback writes a character in (the first '<0x00>'), "
        f"{DROPPED}"),
    "a marker its vocabulary numbers otherwise": (
        "tiny-gpt2", pipeline(post_processor=template("<|endoftext|>", "$A", ids={"<|endoftext|>": 5})), None,
        "its post_processor puts '<|endoftext|>' (id 5) around a sentence, and its vocabulary and added tokens give it "
        "the id 500; give the model's own tokenizer"),
    "a marker its vocabulary lacks": (
        "tiny-llama", pipeline(post_processor=template("<bos>", "$A", ids={"<bos>": 1})), None,
        "its post_processor puts '<bos>' (id 1) around a sentence, and its vocabulary and added tokens do not hold "
        "it; give the model's own tokenizer"),
    "a template naming a marker it lacks": (
        "tiny-xlm-roberta", pipeline(post_processor=template("<s>", "$A", "</s>", ids={"<s>": 0})), None,
        "its post_processor's template names the marker '</s>', which its special_tokens lack; give the model's own "
        "tokenizer"),
}
CONFIG_REFUSED = {  # a tokenizer_config.json's text, and the refusal
    "a flag that is not true or false": ("tiny-llama", '{"add_bos_token": "yes"}',
                                         "its add_bos_token is 'yes'; it must be true or false"),
    "a token named by a number": ("tiny-roberta", '{"cls_token": 3}', "its cls_token is 3; a token is named by a "
                                                                       "string"),
    "a list": ("tiny-gpt2", "[1, 2]", "is not a JSON object, as a tokenizer_config.json is; give the model's own"),
    "a string": ("tiny-gpt2", '"<s>"', "is not a JSON object, as a tokenizer_config.json is; give the model's own"),
    "not JSON": ("tiny-gpt2", "{", "is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
                                  "(char 1)); it is not a tokenizer_config.json"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_tokenizer_is_refused_before_tokenizers_reads_it(tmp_path, case):
    name, change, settings, message = HOSTILE[case]
    where = copy(tmp_path, name, change, settings)
    family = "tiny-gpt2" if case == "another kind" else name
    with pytest.raises(ModelError) as refused:
        read(where, family)
    assert str(refused.value) == f"{where / 'tokenizer.json'}: {message}"


# A family of the tests' own for model_type "test-bpe": GPT-2's tokenizers, and nothing past
# them (load_model reads the tokenizer before any weight).
BPE_FAMILY = types.SimpleNamespace(
    MODEL_TYPES=("test-bpe",), CAUSAL=True, read_config=lambda raw, path: config(path.parent),
    read_tokenizer=lambda where, c: tokenizer.read(where, c, family="GPT-2", kinds=("BPE",),
                                                   auto=tokenizer.Auto("GPT2Tokenizer")))


@pytest.mark.parametrize("case", ["split regex", "merge of a piece it lacks", "dropout", "a byte-level piece missing",
                                  "a BPE id past the table", "a marker its vocabulary numbers otherwise",
                                  "a marker its vocabulary lacks"])
def test_through_the_cli_one_line(tmp_path, monkeypatch, case):
    """As a family calls it from load_model: exit 1 and the one line, nothing else."""
    name, change, settings, message = HOSTILE[case]
    where = copy(tmp_path, name, change, settings)
    raw = json.loads((where / "config.json").read_text())
    (where / "config.json").write_text(json.dumps({**raw, "model_type": "test-bpe"}))
    monkeypatch.setitem(models.FAMILIES, "test-bpe", BPE_FAMILY)
    line = fails(run("scores", "a" * 40 + "c", "--model", where))
    assert line == f"attncli: error: {where / 'tokenizer.json'}: {message}"


PANICS = {  # what tokenizers itself does with the file: a panic that prints its backtrace
    "split regex": "Onig: Regex search error: retry-limit-in-match over",
    "continuing subword prefix": "out of range for slice",
    "precompiled": "Cannot parse precompiled_charsmap",
}


def test_what_tokenizers_would_print_never_reaches_stderr(tmp_path):
    """In a process of its own, where a panic's backtrace would reach the real stderr: the
    files tokenizers panics on (PANICS, shown first with tokenizers alone on "aaa...c") are
    refused by attncli's reader, its stderr empty."""
    folders = {case: copy(tmp_path / case.replace(" ", "-"), HOSTILE[case][0], HOSTILE[case][1]) for case in PANICS}
    alone = ("import sys, tokenizers\n"
             "t = tokenizers.Tokenizer.from_file(sys.argv[1])\n"
             "t.encode('a' * 30 + 'c')\n")
    for case, where in folders.items():
        done = subprocess.run([sys.executable, "-c", alone, str(where / "tokenizer.json")], capture_output=True,
                              text=True, timeout=60)
        assert "panicked" in done.stderr and PANICS[case] in done.stderr, (case, done.stderr[-500:])
    ours = ("import sys, json\n"
            "from pathlib import Path\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "import test_tokenizers as t\n"
            "from attncli.errors import ModelError\n"
            "for where, name in json.loads(sys.argv[2]):\n"
            "    try:\n"
            "        t.read(Path(where), name).encode('a' * 30 + 'c')\n"
            "    except ModelError as e:\n"
            "        print(str(e).split(': ', 1)[1].split(';')[0])\n")
    done = subprocess.run([sys.executable, "-c", ours, str(Path(__file__).parent),
                           json.dumps([(str(w), HOSTILE[c][0]) for c, w in folders.items()])],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [HOSTILE[case][3].split(";")[0] for case in folders]


@pytest.mark.parametrize("case", CONFIG_REFUSED)
def test_a_tokenizer_config_that_is_not_one(tmp_path, case):
    name, text, message = CONFIG_REFUSED[case]
    where = copy(tmp_path, name)
    (where / "tokenizer_config.json").write_text(text)
    with pytest.raises(ModelError) as refused:
        read(where)
    assert str(refused.value) == f"{where / 'tokenizer_config.json'}: {message}"


def test_a_tokenizer_config_larger_than_its_kind(tmp_path):
    """Refused from its size alone, nothing read: a sparse file of 20 MB."""
    where = copy(tmp_path, "tiny-llama")
    os.truncate(where / "tokenizer_config.json", 20_000_000)
    with pytest.raises(ModelError) as refused:
        read(where)
    assert str(refused.value) == (f"{where / 'tokenizer_config.json'}: holds 20.0 MB, more than a model's "
                                  "tokenizer_config.json (10.0 MB at most); give the model's own file")


@pytest.mark.parametrize("name,settings", [
    ("tiny-llama", {"bos_token": {"content": "<s>", "lstrip": False, "__type": "AddedToken"}, "add_bos_token": True,
                    "add_eos_token": False}),  # as Llama 2's and older files write it
    ("tiny-gpt2", {}),
    ("tiny-qwen2", {"bos_token": None, "add_bos_token": True}),  # no BOS to add: transformers adds none
])
def test_tokenizer_configs_that_agree(tmp_path, name, settings):
    where = copy(tmp_path, name)
    (where / "tokenizer_config.json").write_text(json.dumps(settings))
    assert encode(where, "the earth").pieces[:1] == (["<s>"] if name == "tiny-llama" else ["the"])


def test_without_a_tokenizer_config_the_model_types_own_class(tmp_path):
    """The class transformers gives the model type reads the folder (as run with transformers
    5.24.0): a Llama's tokenizer.json puts its markers, none where it has no post_processor;
    BertTokenizer puts [CLS] and [SEP] whatever DistilBERT's template puts."""
    where = copy(tmp_path, "tiny-llama")
    (where / "tokenizer_config.json").unlink()
    assert encode(where, "the earth").pieces == ["<s>", "▁the", "▁earth"]
    edit = json.loads((where / "tokenizer.json").read_text())
    (where / "tokenizer.json").write_text(json.dumps({**edit, "post_processor": None}))
    assert encode(where, "the earth").pieces == ["▁the", "▁earth"]
    where = copy(tmp_path, "tiny-distilbert", pipeline(post_processor=template("$A", "[SEP]", ids={"[SEP]": 3})))
    (where / "tokenizer_config.json").unlink()
    assert encode(where, "the earth").pieces == ["[CLS]", "the", "earth", "[SEP]"]


def test_a_family_without_wordpiece_needs_tokenizer_json(tmp_path):
    where = tmp_path / "m"
    where.mkdir()
    shutil.copy(MODELS / "tiny-gpt2" / "config.json", where)
    (where / "vocab.txt").write_text("[UNK]\n")
    with pytest.raises(ModelError) as refused:
        read(where, "tiny-gpt2")
    assert str(refused.value) == f"{where}: lacks tokenizer.json, which a GPT-2 model's folder must hold"


# --- memory


def test_a_unigram_trie_is_checked_against_memory(tmp_path, monkeypatch):
    """GROWTH times the file's size, then TRIE_NODE bytes a byte of its pieces, before
    tokenizers builds the trie: 1,000 pieces of 100 letters ask 32 MB for the trie."""
    where = copy(tmp_path, "tiny-xlm-roberta", lambda t: t["model"]["vocab"].__setitem__(
        slice(len(t["model"]["vocab"]), None), [[f"{k:03d}" + "x" * 97, -20.0] for k in range(1000)]))
    edit = json.loads((where / "config.json").read_text())
    (where / "config.json").write_text(json.dumps({**edit, "vocab_size": 2000}))
    size = os.path.getsize(where / "tokenizer.json")
    pieces = [p for p, _ in json.loads((where / "tokenizer.json").read_text())["model"]["vocab"]]
    nodes = sum(len(p.encode()) for p in pieces)
    assert nodes == tokenizer.trie_nodes(pieces) >= 100_000
    asked = []
    monkeypatch.setattr(limits, "require", lambda need, what, hint: asked.append((need, what)))
    read(where)
    assert asked[-1] == (64 * size + 320 * nodes,
                         f"{where / 'tokenizer.json'} ({limits.size(size)}, 64 times that once parsed, and 320 bytes a "
                         f"node of its pieces' trie, {nodes:,} at most)")
    monkeypatch.undo()
    monkeypatch.setattr(limits, "available", lambda: 64 * size + 320 * nodes - 1)
    with pytest.raises(limits.ResourceError, match="needs about .* of memory, and .* is available; give the model's "
                                                   "own file, or free some memory"):
        read(where)


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama", "tiny-distilbert"])
def test_bpe_and_wordpiece_ask_growth_times_the_file(tmp_path, monkeypatch, name):
    """Their parse takes at most 31 bytes a byte (measured): GROWTH covers it, and only it is asked."""
    where = copy(tmp_path, name)
    asked = []
    monkeypatch.setattr(limits, "require", lambda need, what, hint: asked.append(need))
    read(where)
    sizes = [os.path.getsize(where / f) for f in ("tokenizer_config.json", "tokenizer.json")]
    assert asked == [64 * n for n in sizes]


def test_trie_nodes():
    assert tokenizer.trie_nodes(["ab", "abc", "b", ""]) == 6  # at most: a node a byte
    assert tokenizer.trie_nodes(["é", "☕"]) == 5  # UTF-8: 2 and 3 bytes


# --- words from pieces, every kind


SENTENCE = "Attention didn't tokenize  unbelievably well at the café ☕ \n"
WORDS = ["Attention", "did", "n't", "tokenize", "unbelievably", "well", "at", "the", "café", "☕"]


@pytest.mark.parametrize("name,pieces", [
    ("tiny-distilbert", [["[CLS]"], ["attention"], ["did"], ["##n", "[UNK]", "t"], ["toke", "##niz", "##e"],
                         ["u", "##nbe", "##lie", "##vab", "##ly"], ["we", "##ll"], ["at"], ["the"],
                         ["c", "##a", "##f", "##e"], ["[UNK]"], ["[SEP]"]]),
    ("tiny-roberta", [["<s>"], ["At", "tention"], ["Ġd", "id"], ["n", "'", "t"], ["Ġtoke", "niz", "e"],
                      ["Ġ", "Ġ", "un", "be", "lie", "v", "ab", "ly"], ["Ġwe", "ll"], ["Ġat"], ["Ġthe"],
                      ["Ġ", "c", "a", "f", "Ã", "©"], ["Ġ", "â", "ĺ", "ķ", "Ġ", "Ċ"], ["</s>"]]),
    ("tiny-xlm-roberta", [["<s>"], ["▁A", "t", "t", "en", "ti", "on"], ["▁d", "id"], ["n", "<unk>", "t"],
                          ["▁t", "ok", "eni", "z", "e"], ["▁", "un", "b", "e", "li", "ev", "a", "b", "l", "y"],
                          ["▁we", "ll"], ["▁at"], ["▁the"], ["▁", "c", "a", "f", "<unk>"], ["▁", "<unk>"], ["</s>"]]),
    ("tiny-gpt2", [["At", "tention"], ["Ġd", "id"], ["n", "'", "t"], ["Ġtoke", "niz", "e"],
                   ["Ġ", "Ġ", "un", "be", "lie", "vab", "ly"], ["Ġwe", "ll"], ["Ġat"], ["Ġthe"],
                   ["Ġ", "c", "a", "f", "Ã", "©"], ["Ġ", "â", "ĺ", "ķ", "Ġ", "Ċ"]]),
    ("tiny-llama", [["<s>"], ["▁A", "ttention"], ["▁d", "id"], ["n", "<0x27>", "t"], ["▁toke", "niz", "e"],
                    ["▁", "▁un", "be", "lie", "vab", "ly"], ["▁we", "ll"], ["▁at"], ["▁the"],
                    ["▁", "c", "a", "f", "<0xC3>", "<0xA9>"], ["▁", "<0xE2>", "<0x98>", "<0x95>", "▁", "\n"]]),
])
def test_words_for_every_kind(name, pieces):
    """Words as the sentence writes them, never pieces: a byte-level or SentencePiece piece's
    leading space trimmed, pieces of spaces alone ("Ġ", "▁") with the word after them (or,
    at the end, before them), the byte pieces of é and ☕ one word; the markers words of
    their own."""
    got = encode(MODELS / name, SENTENCE)
    groups, labels = word_groups(SENTENCE, got)
    assert [[got.pieces[i] for i in g] for g in groups] == pieces
    assert sum(groups, []) == list(range(len(got.pieces)))  # every piece once, in order
    markers = [p in (["[CLS]"], ["[SEP]"], ["<s>"], ["</s>"]) for p in pieces]
    assert [label for label, marker in zip(labels, markers) if not marker] == WORDS
    assert [label for label, marker in zip(labels, markers) if marker] == [p[0] for p, m in zip(pieces, markers) if m]


@pytest.mark.parametrize("args", [["scores"], ["scores", "--words"], ["heads"], ["context", "--token", "earth"],
                                  ["explain", "--token", "earth"]])
def test_a_piece_from_the_file_is_written_out_in_a_table_and_exact_in_json(tmp_path, args):
    """A vocabulary's piece is data from the file: one holding an escape sequence (an added
    token "\\x1b[31m", which colours a terminal red) is written out in every table, and kept
    exact in JSON."""
    from tinybert import write_model

    folder = write_model(tmp_path / "m")
    raw = json.loads((folder / "tokenizer.json").read_text())
    del raw["model"]["vocab"]["t"]
    raw["model"]["vocab"]["\x1b[31m"] = 19
    raw["added_tokens"].append({"id": 19, "content": "\x1b[31m", "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": False})
    (folder / "tokenizer.json").write_text(json.dumps(raw))
    sentence = "the \x1b[31m earth"
    doc = json.loads(run(args[0], sentence, "--model", folder, *args[1:], "--json").stdout)
    assert doc["tokens"][:4] == ["[CLS]", "the", "\x1b[31m", "earth"]
    table = run(args[0], sentence, "--model", folder, *args[1:], "--format", "table")
    assert table.exit_code == 0, table.stderr
    assert "\x1b" not in table.stdout and table.stdout.count("\\x1b[31m") >= 2  # the sentence's and the piece's
