"""The encoders: BERT itself (bert.py), DistilBERT (distilbert.py, bert.py's pass under its
own names), RoBERTa and XLM-RoBERTa (bert.py, positions from padding_idx + 1). Each is held against what
transformers + torch computed with its tiny model (tests/data/models/NAME.npz, made by
tests/data/make_model_references.py): every layer's attention and hidden states to 1e-5,
for every sentence, from the reference's own ids; then through the commands, end to end;
and every way their config.json and tokenizer.json can be refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attncli import models
from attncli.errors import ModelError
from attncli.models import bert, distilbert, tokenizer
from attncli.system import limits

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
from safetensors.numpy import load_file, save_file  # noqa: E402

from clirunner import fails, one, run  # noqa: E402

MODELS = Path(__file__).parent / "data" / "models"
NAMES = ["tiny-bert", "tiny-distilbert", "tiny-roberta", "tiny-xlm-roberta"]
FAMILIES = {"tiny-bert": bert, "tiny-distilbert": distilbert, "tiny-roberta": bert, "tiny-xlm-roberta": bert}


def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(MODELS / f"{name}.npz") as data:
        return {key: data[key] for key in data.files}


def sentences(ref: dict) -> list[tuple[int, str]]:
    return [(k, str(s)) for k, s in enumerate(ref["sentences"])]


def copy(name: str, where: Path) -> Path:
    """A copy of a tiny model's folder, to change."""
    return Path(shutil.copytree(MODELS / name, where / name))


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture(scope="module", params=NAMES)
def tiny(request):
    name = request.param
    return name, models.load_model(str(MODELS / name)), reference(name)


# --- the forward pass against transformers


def test_each_reads_as_its_family(tiny):
    name, model, _ = tiny
    assert model.family is FAMILIES[name]
    assert not model.causal


def test_every_layer_and_head_matches_transformers(tiny):
    name, model, ref = tiny
    for k, _ in sentences(ref):
        run_ = model.family.forward(ref[f"ids_{k}"], model.weights, model.config)
        alphas, hidden = ref[f"attentions_{k}"], ref[f"hidden_{k}"]
        assert run_.weights.shape == alphas.shape and run_.hidden.shape == hidden.shape
        assert float(np.abs(run_.weights - alphas).max()) < 1e-5, (name, k)
        assert float(np.abs(run_.hidden - hidden).max()) < 1e-5, (name, k)


def test_word_pieces_and_offsets_are_the_reference_tokenizers(tiny):
    _, model, ref = tiny
    for k, sentence in sentences(ref):
        pieces = model.encode(sentence)
        np.testing.assert_array_equal(pieces.ids, ref[f"ids_{k}"])
        np.testing.assert_array_equal(np.array(pieces.offsets), ref[f"offsets_{k}"])


def test_the_weights_are_kept_as_stored(tiny):
    """F16 (XLM-RoBERTa's) and F32 alike, kept as their files hold them, never widened whole
    to float64 (a pass widens a layer's at a time: tests/test_weights.py)."""
    name, model, _ = tiny
    stored = {np.dtype("<f2") if name == "tiny-xlm-roberta" else np.dtype("<f4")}
    assert {model.weights.stored(n).dtype for n in model.weights} == stored


def test_roberta_positions_start_after_padding_idx():
    """X_0 is LayerNorm(E_word + E_position[p] + E_type[0]) with p = 2 .. T + 1, and a padding
    piece inside the sentence (the text "<pad>") at padding_idx 1, the count going on after
    it without it: transformers' create_position_ids_from_input_ids."""
    model = models.load_model(str(MODELS / "tiny-roberta"))
    pieces = model.encode("the<pad> earth")
    assert pieces.pieces == ["<s>", "the", "<pad>", "Ġearth", "</s>"]
    assert list(bert.positions(pieces.ids, model.config)) == [2, 3, 1, 4, 5]
    w = {k: v.astype(np.float64) for k, v in model.weights.items()}
    E = (w["embeddings.word_embeddings.weight"][pieces.ids]
         + w["embeddings.position_embeddings.weight"][[2, 3, 1, 4, 5]] + w["embeddings.token_type_embeddings.weight"][0])
    mean, var = E.mean(axis=1, keepdims=True), E.var(axis=1, keepdims=True)
    X0 = (E - mean) / np.sqrt(var + 1e-5) * w["embeddings.LayerNorm.weight"] + w["embeddings.LayerNorm.bias"]
    np.testing.assert_allclose(bert.forward(pieces.ids, model.weights, model.config).hidden[0], X0, atol=1e-12)


def test_a_sentence_as_long_as_roberta_reads_and_one_piece_more():
    """max_position_embeddings 66 counts padding_idx + 1 = 2 positions no piece has: 64
    pieces run (the last at position 65, the table's last row), 65 are refused saying why."""
    model = models.load_model(str(MODELS / "tiny-roberta"))
    longest = " ".join(["the"] * 62)  # <s>, "the", 61 "Ġthe", </s>
    assert len(model.encode(longest).ids) == 64
    assert bert.forward(model.encode(longest).ids, model.weights, model.config).hidden.shape == (3, 64, 32)
    with pytest.raises(ModelError) as e:
        model.encode(longest + " the")
    assert str(e.value) == ("the sentence is 65 word pieces long, and tiny-roberta reads at most 64 (its "
                            "max_position_embeddings 66 less padding_idx + 1 = 2: its positions start at 2); give a "
                            "shorter one")
    distil = models.load_model(str(MODELS / "tiny-distilbert"))  # 64 positions from 0: 64 pieces
    assert len(distil.encode(" ".join(["the"] * 62)).ids) == 64
    with pytest.raises(ModelError, match=r"is 65 word pieces long, and tiny-distilbert reads at most 64; give"):
        distil.encode(" ".join(["the"] * 63))


def test_the_output_projection_passes_on_what_the_attention_outputs(tiny):
    """Kobayashi et al.'s identity through each family's passed_on and projections:
    sum_h sum_j alpha^h_ij f^h(x_j) + b_O is the attention's output A, and Q is X W_Q + b_Q."""
    name, model, ref = tiny
    run_ = model.family.forward(ref["ids_0"], model.weights, model.config, keep=(1,))
    steps = run_.steps[1]
    F = model.family.passed_on(steps["V"], model.weights, 1, model.config)  # (H, T, D)
    out = "transformer.layer.1.attention.out_lin.bias" if name == "tiny-distilbert" else \
        "encoder.layer.1.attention.output.dense.bias"
    np.testing.assert_allclose(np.einsum("hij,hjd->id", steps["weights"], F) + model.weights[out], steps["A"],
                               atol=1e-10)
    W, b = model.family.projections(model.weights, 1)
    np.testing.assert_allclose(run_.hidden[1] @ W["W_query"].astype(np.float64) + b["b_query"], steps["Q"],
                               atol=1e-10)


# --- the tensors' names


def _prefixed(folder: Path, prefix: str) -> None:
    path = folder / "model.safetensors"
    save_file({prefix + k: v for k, v in load_file(str(path)).items()}, str(path))


@pytest.mark.parametrize("name,prefix", [("tiny-distilbert", "distilbert."), ("tiny-roberta", "roberta."),
                                         ("tiny-xlm-roberta", "roberta.")])
def test_names_under_the_task_models_prefix(tmp_path, name, prefix):
    """DistilBertForMaskedLM saves its tensors under "distilbert.", RobertaForMaskedLM and
    XLMRobertaForMaskedLM under "roberta."."""
    folder = copy(name, tmp_path)
    _prefixed(folder, prefix)
    ref = reference(name)
    model = models.load_model(str(folder))
    run_ = model.family.forward(ref["ids_0"], model.weights, model.config)
    assert float(np.abs(run_.weights - ref["attentions_0"]).max()) < 1e-5


def test_distilbert_names_what_its_file_lacks(tmp_path):
    folder = copy("tiny-distilbert", tmp_path)
    path = folder / "model.safetensors"
    weights = load_file(str(path))
    del weights["transformer.layer.1.ffn.lin2.bias"]
    save_file(weights, str(path))
    with pytest.raises(ModelError, match=r"model.safetensors: lacks the tensor transformer\.layer\.1\.ffn\.lin2\.bias, "
                                         "which a 2-layer model needs"):
        models.load_model(str(folder))


def test_distilbert_weights_are_berts_under_other_names():
    model = models.load_model(str(MODELS / "tiny-distilbert"))
    theirs = distilbert.as_bert(model.weights)
    assert set(theirs) == set(bert.expected_shapes(model.config))
    assert theirs["encoder.layer.0.attention.output.LayerNorm.weight"] is model.weights[
        "transformer.layer.0.sa_layer_norm.weight"]
    assert "embeddings.token_type_embeddings.weight" not in theirs  # DistilBERT has no token types


# --- config.json


def _config(name: str, tmp_path: Path, **changes) -> Path:
    folder = copy(name, tmp_path)
    edit_json(folder / "config.json", lambda c: c.update(changes))
    return folder


@pytest.mark.parametrize("name,changes,message", [
    ("tiny-distilbert", {"n_layers": 0}, "n_layers is 0; it must be a whole number from 1 to 128"),
    ("tiny-distilbert", {"dim": 30}, "dim 30 is not divisible by n_heads 4"),
    ("tiny-distilbert", {"hidden_dim": None}, "hidden_dim is None; it must be a whole number from 1 to 65,536"),
    ("tiny-distilbert", {"n_heads": 2.0}, "n_heads is 2.0; it must be a whole number"),
    ("tiny-distilbert", {"activation": "relu"}, "activation is 'relu'; attncli runs gelu, gelu_new, gelu_pytorch_tanh"),
    ("tiny-distilbert", {"sinusoidal_pos_embds": "yes"}, "sinusoidal_pos_embds is 'yes'; it must be true or false"),
    ("tiny-roberta", {"pad_token_id": 65}, "pad_token_id is 65; RoBERTa's positions start at pad_token_id + 1, so it "
                                           "must be a whole number from 0 to 64 (max_position_embeddings 66 less 2)"),
    ("tiny-roberta", {"pad_token_id": -1}, "pad_token_id is -1"),
    ("tiny-roberta", {"max_position_embeddings": 1}, "max_position_embeddings is 1; RoBERTa's positions start after "
                                                     "pad_token_id's, so it must be at least 2"),
    ("tiny-xlm-roberta", {"pad_token_id": None}, "pad_token_id is None"),
    ("tiny-xlm-roberta", {"pad_token_id": True}, "pad_token_id is True"),
    ("tiny-roberta", {"is_decoder": True}, "is_decoder is True, a causal mask over an encoder"),
    ("tiny-roberta", {"type_vocab_size": 0}, "type_vocab_size is 0; it must be a whole number from 1 to 1,024"),
    ("tiny-xlm-roberta", {"position_embedding_type": "relative_key"},
     "position_embedding_type is 'relative_key'; attncli runs absolute positions"),
    ("tiny-xlm-roberta", {"num_attention_heads": 3}, "hidden_size 32 is not divisible by num_attention_heads 3"),
])
def test_bad_configs(tmp_path, name, changes, message):
    folder = _config(name, tmp_path, **changes)
    line = fails(run("scores", "the earth", "--model", folder))
    assert line.startswith(f"attncli: error: {folder / 'config.json'}: {message}"), line


def test_distilbert_sinusoidal_positions_are_read_from_its_file(tmp_path):
    """With sinusoidal_pos_embds true, transformers fills the position table with sines only
    when it makes a model; from a file it reads the table the file holds, as attncli does."""
    ref = reference("tiny-distilbert")
    model = models.load_model(str(_config("tiny-distilbert", tmp_path, sinusoidal_pos_embds=True)))
    run_ = model.family.forward(ref["ids_1"], model.weights, model.config)
    assert float(np.abs(run_.hidden - ref["hidden_1"]).max()) < 1e-5


def test_roberta_padding_idx_moves_the_positions(tmp_path):
    """pad_token_id 0 (a model that names another pad) starts them at 1: another pass."""
    ref = reference("tiny-roberta")
    model = models.load_model(str(_config("tiny-roberta", tmp_path, pad_token_id=0)))
    assert model.config.padding_idx == 0 and model.config.length_limit()[0] == 65
    run_ = model.family.forward(ref["ids_0"], model.weights, model.config)
    assert float(np.abs(run_.hidden - ref["hidden_0"]).max()) > 0.1


# --- tokenizer.json


def _tokenizer(name: str, tmp_path: Path, change) -> Path:
    folder = copy(name, tmp_path)
    edit_json(folder / "tokenizer.json", change)
    return folder


PRECOMPILED = {"type": "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap": "QUFBQQ=="},
                                                   {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}


@pytest.mark.parametrize("name,change,message", [
    ("tiny-roberta", lambda t: t.update(json.loads((MODELS / "tiny-distilbert" / "tokenizer.json").read_text())),
     "its model is 'WordPiece'; attncli reads RoBERTa's tokenizers, of type 'BPE'"),
    ("tiny-xlm-roberta", lambda t: t["model"].update(type="BPE"),
     "its model is 'BPE'; attncli reads XLM-RoBERTa's tokenizers, of type 'Unigram'"),
    ("tiny-xlm-roberta", lambda t: t.update(normalizer=PRECOMPILED),
     "its normalizer holds 'Precompiled'; attncli reads XLM-RoBERTa's tokenizers, whose normalizers are among "
     + ", ".join(tokenizer.UNIGRAM.normalizers)),
    ("tiny-xlm-roberta", lambda t: t.update(normalizer=PRECOMPILED["normalizers"][1]),
     "its normalizer's Replace runs the regular expression ' {2,}', which is none of those attncli knows"),
    ("tiny-xlm-roberta", lambda t: t.update(normalizer=PRECOMPILED["normalizers"][0]),
     "its normalizer holds 'Precompiled'"),
    ("tiny-xlm-roberta", lambda t: t["model"].update(unk_id=None),
     "its unk_id is None, no piece of its vocabulary, so a word it cannot split would stop it"),
    ("tiny-roberta", lambda t: t["model"].update(dropout=0.1),
     "its dropout is 0.1, which splits a word at random; give the model's own tokenizer, whose dropout is null"),
    ("tiny-roberta", lambda t: t["model"].update(unk_token="<nope>"),
     "its unknown token '<nope>' is not in its vocabulary"),
    ("tiny-roberta", lambda t: t["post_processor"].update(cls=["<s>", 7]),
     "its post_processor puts '<s>' (id 7) around a sentence, and its vocabulary and added tokens give it the id 0; "
     "give the model's own tokenizer"),
    ("tiny-xlm-roberta", lambda t: t["post_processor"].update(single=[{"Sequence": {"id": "A", "type_id": 0}}] * 2),
     "its post_processor's template for a sentence holds the sequences ['A', 'A'], where XLM-RoBERTa's holds ['A']"),
    ("tiny-xlm-roberta", lambda t: t["model"]["vocab"].append(["zebra", -3.0]),
     "gives the piece 'zebra' the id 168, and config.json's vocab_size is 168"),
    ("tiny-roberta", lambda t: t["model"]["vocab"].update(zebra=501),
     "gives the piece 'zebra' the id 501, and config.json's vocab_size is 501"),
])
def test_a_tokenizer_that_is_not_the_models(tmp_path, name, change, message):
    folder = _tokenizer(name, tmp_path, change)
    line = fails(run("scores", "the earth", "--model", folder))
    assert line.startswith(f"attncli: error: {folder / 'tokenizer.json'}: {message}"), line


def test_roberta_needs_its_tokenizer_json(tmp_path):
    folder = copy("tiny-roberta", tmp_path)
    (folder / "tokenizer.json").rename(folder / "vocab.txt")
    fails(run("scores", "the earth", "--model", folder),
          f"attncli: error: {folder}: lacks tokenizer.json, which a RoBERTa model's folder must hold")


def test_a_damaged_precompiled_normalizer_never_reaches_tokenizers(tmp_path):
    """A Precompiled charsmap tokenizers cannot parse stops it in a panic that writes its
    backtrace to the terminal: refused before, in a real process, one line on stderr."""
    folder = _tokenizer("tiny-xlm-roberta", tmp_path, lambda t: t.update(normalizer=PRECOMPILED["normalizers"][0]))
    proc = subprocess.run([Path(sys.executable).parent / "attncli", "scores", "the earth", "--model", folder],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"attncli: error: {folder / 'tokenizer.json'}: its normalizer holds 'Precompiled'; attncli "
                           "reads XLM-RoBERTa's tokenizers, whose normalizers are among "
                           + ", ".join(tokenizer.UNIGRAM.normalizers) + "\n")


def test_a_unigram_is_asked_the_memory_its_trie_takes(monkeypatch):
    """A Unigram's trie takes up to 358 bytes a node, a node a byte of its pieces at most:
    XLM-RoBERTa's tokenizer.json (12.7 kB, 625 bytes of pieces) is asked 64 times its size
    and 320 bytes a byte of its pieces, and refused a byte short of that."""
    path = MODELS / "tiny-xlm-roberta" / "tokenizer.json"
    pieces = [piece for piece, _ in json.loads(path.read_text())["model"]["vocab"]]
    need = 64 * path.stat().st_size + 320 * tokenizer.trie_nodes(pieces)
    monkeypatch.setattr(limits, "available", lambda: need - 1)
    with pytest.raises(limits.ResourceError, match=r"tokenizer.json \(12.7 kB, 64 times that once parsed, and 320 "
                                                   r"bytes a node of its pieces' trie, 625 at most\) needs about "
                                                   r"1.0 MB of memory"):
        models.load_model(str(MODELS / "tiny-xlm-roberta"))
    monkeypatch.setattr(limits, "available", lambda: need)
    assert models.load_model(str(MODELS / "tiny-xlm-roberta")).encode("the earth").pieces[0] == "<s>"


def test_distilberts_wordpiece_is_berts(tmp_path):
    model = models.load_model(str(MODELS / "tiny-distilbert"))
    assert model.encode("The earth").pieces == ["[CLS]", "the", "earth", "[SEP]"]
    folder = copy("tiny-distilbert", tmp_path)  # vocab.txt alone serves too, as BERT's does
    tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = sorted(tokenizer["model"]["vocab"], key=tokenizer["model"]["vocab"].get)
    (folder / "tokenizer.json").unlink()
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    assert list(models.load_model(str(folder)).encode("The earth").ids) == list(model.encode("The earth").ids)


# --- through the commands


MARKERS = {"tiny-bert": "[CLS] and [SEP]", "tiny-distilbert": "[CLS] and [SEP]", "tiny-roberta": "<s> and </s>",
           "tiny-xlm-roberta": "<s> and </s>"}


@pytest.mark.parametrize("name", NAMES)
def test_the_views_name_the_models_own_markers(name):
    scores = run("scores", "The earth is like an orange", "--model", MODELS / name, "--format", "table", "--no-color")
    assert scores.exit_code == 0, scores.stderr
    assert f"{MARKERS[name]} are the model's own markers" in " ".join(scores.stdout.split())
    heads = run("heads", "The earth is like an orange", "--model", MODELS / name, "--format", "table", "--no-color")
    assert heads.exit_code == 0, heads.stderr
    assert f"* more than half on {MARKERS[name]}" in " ".join(heads.stdout.split())


def reference_pieces(name: str, ids) -> list[str]:
    """The pieces of `ids` as the model's tokenizer.json names them (its vocabulary, then its
    added tokens): what transformers' convert_ids_to_tokens gives."""
    tokenizer = json.loads((MODELS / name / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tokenizer["model"]["vocab"]
    names = dict(enumerate(v[0] for v in vocab)) if isinstance(vocab, list) else {i: p for p, i in vocab.items()}
    names.update({t["id"]: t["content"] for t in tokenizer["added_tokens"]})
    return [names[int(i)] for i in ids]


@pytest.mark.parametrize("layer", [None, 1])
@pytest.mark.parametrize("name", NAMES)
def test_scores_end_to_end_gives_the_references_weights_and_pieces(name, layer):
    ref = reference(name)
    for k, sentence in sentences(ref):
        doc = one(run("scores", sentence, "--model", MODELS / name, "--json", *(["--layer", layer] if layer else [])))
        alphas = ref[f"attentions_{k}"][(layer or 2) - 1]  # (H, T, T)
        assert doc["tokens"] == reference_pieces(name, ref[f"ids_{k}"])
        assert doc["offsets"] == ref[f"offsets_{k}"].tolist()
        assert doc["special"] == [True] + [False] * (len(doc["tokens"]) - 2) + [True]
        assert float(np.abs(np.array(doc["weights"]) - alphas.mean(axis=0)).max()) < 1e-5
        for h, head in enumerate(doc["heads"]):
            assert float(np.abs(np.array(head["weights"]) - alphas[h]).max()) < 1e-5


WORDS = {3: ["Attention", "did", "n't", "tokenize", "unbelievably", "well"]}  # the others: the sentence's split


@pytest.mark.parametrize("name", NAMES)
def test_words_are_the_sentences_words_never_pieces(name):
    """--words over WordPiece, byte-level BPE and Unigram alike: each word's label is its text
    in the sentence, without the space before it and without Ġ or ▁, and a piece that is
    only a marker of a word's start (RoBERTa's "Ġ" before "un", XLM-R's "▁") is of that word."""
    ref = reference(name)
    for k, sentence in sentences(ref):
        doc = one(run("scores", sentence, "--model", MODELS / name, "--words", "--json"))
        start, end = MARKERS[name].split(" and ")
        assert doc["tokens"] == [start, *WORDS.get(k, sentence.split()), end], (name, k)
        assert [len(p) for p in doc["pieces"][1:-1]] and sum(map(len, doc["pieces"])) == len(ref[f"ids_{k}"])
        pieces = one(run("scores", sentence, "--model", MODELS / name, "--json"))
        M = np.array(pieces["weights"])
        bounds = np.cumsum([0, *map(len, doc["pieces"])])
        groups = [list(range(a, b)) for a, b in zip(bounds, bounds[1:])]
        expected = np.array([[M[np.ix_(a, b)].sum(axis=1).mean() for b in groups] for a in groups])
        np.testing.assert_allclose(doc["weights"], expected, atol=1e-14)


def test_words_of_pieces_whose_offsets_hold_their_space(tmp_path):
    """A byte-level BPE with trim_offsets false (RobertaTokenizer's, as tokenizer_config.json
    says) gives "Ġearth" the span " earth", and a run of spaces a "Ġ" of its own: the words
    are still the sentence's, without their spaces."""
    folder = _tokenizer("tiny-roberta", tmp_path, lambda t: (t["post_processor"].update(trim_offsets=False),
                                                             t["pre_tokenizer"].update(trim_offsets=False)))
    edit_json(folder / "tokenizer_config.json", lambda s: s.update(trim_offsets=False))
    sentence = "The earth  is like an orange"
    pieces = one(run("scores", sentence, "--model", folder, "--json"))
    assert pieces["tokens"][2:5] == ["Ġearth", "Ġ", "Ġis"]
    assert pieces["offsets"][2:5] == [[3, 9], [9, 10], [10, 13]]  # " earth", " ", " is"
    doc = one(run("scores", sentence, "--model", folder, "--words", "--json"))
    assert doc["tokens"] == ["<s>", "The", "earth", "is", "like", "an", "orange", "</s>"]
    assert doc["pieces"][2:4] == [["Ġearth"], ["Ġ", "Ġis"]]


@pytest.mark.parametrize("name,pieces", [
    ("tiny-roberta", [["Ġ", "ĠHe", "ll", "o"], ["Ġ", ","], ["Ġ", "Ġwor", "ld"], ["!"]]),
    ("tiny-xlm-roberta", [["▁", "H", "e", "ll", "o"], ["▁", ","], ["▁w", "or", "l", "d"], ["<unk>"]]),
    ("tiny-distilbert", [["he", "##ll", "##o"], [","], ["wor", "##ld"], ["[UNK]"]]),
])
def test_words_of_a_sentence_with_runs_of_spaces(name, pieces):
    """The words' labels are the text's, an unknown piece's too ("!", which neither XLM-R's
    Unigram nor DistilBERT's WordPiece holds: their <unk> and [UNK])."""
    doc = one(run("scores", "  Hello ,  world!", "--model", MODELS / name, "--words", "--json"))
    assert doc["tokens"][1:-1] == ["Hello", ",", "world", "!"]
    assert doc["pieces"][1:-1] == pieces


def _cosine(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("name", NAMES)
def test_compare_finds_a_word_by_its_text_whatever_marks_its_piece(name):
    """--token bank finds BERT's "bank", RoBERTa's "Ġbank" and XLM-R's "▁bank", as any case
    of it; the cosines of its hidden states are the reference's."""
    ref = reference(name)
    a, b = str(ref["sentences"][1]), str(ref["sentences"][2])  # by the river, at the bank
    doc = one(run("compare", a, b, "--token", "Bank", "--model", MODELS / name, "--json"))
    i, j = ([t.lstrip("Ġ▁") for t in reference_pieces(name, ref[f"ids_{k}"])].index("bank") for k in (1, 2))
    assert [d["index"] for d in doc["sentences"]] == [i, j]
    expected = [_cosine(ref["hidden_1"][l, i].astype(np.float64), ref["hidden_2"][l, j].astype(np.float64))
                for l in range(3)]
    np.testing.assert_allclose([layer[0][1] for layer in doc["hidden_cosine"]], expected, atol=1e-5)


def test_a_marker_alone_is_never_the_word_it_precedes():
    """XLM-R's "▁" before "is" spans the "i" of it, and RoBERTa's two bytes of "é" its span
    each: neither is found as a word of its own ("i", "é"); --token is finds "is", and
    --index at the "▁" says what is there."""
    folder = MODELS / "tiny-xlm-roberta"
    doc = one(run("context", "The earth is like an orange", "--token", "is", "--model", folder, "--json"))
    assert (doc["index"], doc["token"], doc["tokens"][4]) == (5, "is", "▁")
    fails(run("context", "The earth is like an orange", "--token", "is", "--index", "4", "--model", folder),
          "attncli: error: the token at --index 4 is '▁', not 'is'; 'is' is at --index 5")
    fails(run("context", "The earth is like an orange", "--token", "i", "--model", folder),
          "attncli: error: 'i' is not among the tokens: <s> ▁Th e ▁earth ▁ is ▁like ▁an ▁orange </s>")
    fails(run("context", "the café", "--token", "é", "--model", MODELS / "tiny-roberta"),
          "attncli: error: 'é' is not among the tokens: <s> the Ġ c a f Ã © </s>")


def test_stats_names_the_markers_columns_as_the_tokenizer_does(tmp_path):
    """RoBERTa's stats table heads its marker columns <s> and </s>; BERT's keep [CLS] and [SEP]
    (the records' keys stay cls and sep)."""
    from clirunner import run

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The earth is like an orange\nI sat on the bank of the river\n")
    for name, markers in (("tiny-roberta", ["<s>", "</s>"]), ("tiny-distilbert", ["[CLS]", "[SEP]"])):
        model = Path(__file__).parent / "data" / "models" / name
        done = run("stats", corpus, "--model", model, "--json")
        assert done.exit_code == 0, done.stderr
        assert {"cls", "sep"} <= set(json.loads(done.stdout.splitlines()[0]))
        table = run("stats", corpus, "--model", model, "--format", "table", env={"COLUMNS": "120"})
        heading = table.stdout.splitlines()[1].split()
        assert heading[6:8] == markers, heading


@pytest.mark.parametrize("name", ["tiny-roberta", "tiny-distilbert", "tiny-gpt2"])
@pytest.mark.parametrize("T", [16, 60])
def test_pass_bytes_bounds_what_the_pass_holds(name, T):
    """The estimate a run is checked against before its pass is above the pass's measured
    peak (tracemalloc: numpy's arrays, GELU's blocks among them), and not far above."""
    import tracemalloc

    from attncli import models

    model = models.load_model(str(Path(__file__).parent / "data" / "models" / name))
    ids = np.arange(T) % 300 + 3
    tracemalloc.start()
    try:
        model.family.forward(ids, model.weights, model.config, keep=(1,))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0.4 < peak / model.family.pass_bytes(T, model.config) <= 1
