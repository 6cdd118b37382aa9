"""The markers around a sentence are those transformers puts for the same folder, whatever
the family usually puts: every family's reference model with a tokenizer that adds a marker
the family usually lacks or leaves out one it usually puts (tests/marker_variants.py), held
to the ids, offsets and markers transformers 5.24.0 gave (tests/data/markers.json) and, for
a few decoders, to its forward pass over a sentence (tests/data/markers.npz); what the
files contradict themselves on, refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
from clirunner import fails, ok, one, run  # noqa: E402
from marker_variants import BACKEND, FORWARD, VARIANTS, make, template  # noqa: E402

from attncli import attention, models  # noqa: E402

DATA = Path(__file__).parent / "data"
RECORDED = json.loads((DATA / "markers.json").read_text(encoding="utf-8"))
SENTENCES = RECORDED["sentences"]
with np.load(DATA / "markers.npz") as _data:
    FORWARDS = {key: _data[key] for key in _data.files}


def test_the_recorded_variants_are_the_variants():
    """markers.json was made from these very changes, and holds every variant's numbers."""
    assert {name: entry["changes"] for name, entry in RECORDED["variants"].items()} == VARIANTS
    assert "transformers=5.24.0" in RECORDED["versions"]
    assert {key.rsplit("_", 1)[0] for key in FORWARDS} == set(FORWARD)


def test_each_family_both_adds_and_leaves_out():
    """For every family a tokenizer that puts a marker where its usual one puts none (or
    another in its place), and one that leaves out a marker its usual one puts."""
    usual = {"tiny-bert": ([2], [3]), "tiny-distilbert": ([2], [3]), "tiny-roberta": ([0], [2]),
             "tiny-xlm-roberta": ([0], [2]), "tiny-gpt2": ([], []), "tiny-llama": ([1], []), "tiny-mistral": ([1], []),
             "tiny-qwen2": ([], [])}
    adds, leaves = set(), set()
    for entry in RECORDED["variants"].values():
        ids, special = entry["ids"][0], entry["special"][0]
        n = special.index(0)
        before, after = ids[:n], ids[len(ids) - special[::-1].index(0):]
        first, last = usual[entry["changes"]["model"]]
        if len(before) > len(first) or len(after) > len(last) or before[:1] != first[:1]:
            adds.add(entry["changes"]["model"])
        if len(before) < len(first) or len(after) < len(last):
            leaves.add(entry["changes"]["model"])
    assert adds == set(usual) and leaves == set(usual) - {"tiny-gpt2", "tiny-qwen2"}  # they put none to leave out


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Each variant's folder, made once."""
    root = tmp_path_factory.mktemp("markers")
    return {name: make(name, root / name) for name in VARIANTS}


@pytest.mark.parametrize("name", VARIANTS)
def test_the_ids_offsets_and_markers_are_transformers(folders, name):
    model = models.load_model(str(folders[name]))
    expected = RECORDED["variants"][name]
    for k, text in enumerate(SENTENCES):
        pieces = model.encode(text)
        assert pieces.ids.tolist() == expected["ids"][k], (name, text)
        assert [list(span) for span in pieces.offsets] == expected["offsets"][k], (name, text)
        assert pieces.special == [bool(s) for s in expected["special"][k]], (name, text)


@pytest.mark.parametrize("name", FORWARD)
def test_the_forward_pass_over_the_markers_is_transformers(folders, name):
    """The pass over the pieces with the tokenizer's own markers: attention weights within
    1e-5, hidden states within 1e-5 of each state's scale (test_llama.py says why)."""
    model = models.load_model(str(folders[name]))
    ids = model.encode(SENTENCES[0]).ids
    np.testing.assert_array_equal(ids, FORWARDS[f"{name}_ids"])
    run_ = model.family.forward(ids, model.weights, model.config)
    np.testing.assert_allclose(run_.weights, FORWARDS[f"{name}_attentions"], rtol=0, atol=1e-5)
    for state, expected in zip(run_.hidden, FORWARDS[f"{name}_hidden"], strict=True):
        assert np.abs(state - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())


def test_a_bos_the_family_lacks_is_the_first_position(folders):
    """Qwen2 with DeepSeek's BOS: the heads view's first share is the BOS's, and the marker is
    named as the tokenizer names it."""
    doc = one(run("heads", SENTENCES[0], "--model", folders["qwen2-bos"], "--json"))
    assert doc["tokens"][0] == "<｜begin▁of▁sentence｜>" and doc["special"] == [True] + [False] * 6
    alphas = FORWARDS["qwen2-bos_attentions"]  # (L, H, T, T)
    np.testing.assert_allclose(doc["first_share"], alphas[..., 0].mean(axis=-1), atol=1e-5)
    np.testing.assert_allclose(doc["special_share"], alphas[..., 0].mean(axis=-1), atol=1e-5)


def test_predict_reads_the_last_piece_before_a_marker_after(folders):
    """Llama with </s> after the sentence: the next pieces are those after the sentence's last
    piece (its logits, transformers'), not after </s>."""
    logits = FORWARDS["llama-eos_logits"]  # (T, V)
    assert FORWARDS["llama-eos_ids"][-1] == 2  # </s>
    z = logits[-2].astype(np.float64)
    doc = one(run("scores", SENTENCES[0], "--model", folders["llama-eos"], "--predict", "3", "--json"))
    expected = np.argsort(-z, kind="stable")[:3]
    assert [e["id"] for e in doc["predict"]] == expected.tolist()
    np.testing.assert_allclose([e["logprob"] for e in doc["predict"]], attention.log_softmax(z)[expected], atol=1e-4)
    assert expected.tolist() != np.argsort(-logits[-1], kind="stable")[:3].tolist()  # after </s>, others


# --- what the files contradict themselves on


def refused(folder: Path) -> str:
    line = fails(run("scores", "the earth", "--model", folder))
    assert line.startswith(f"attncli: error: {folder}"), line
    return line.removeprefix(f"attncli: error: {folder}/")


def variant(tmp_path: Path, model: str, **changes) -> Path:
    return make("", tmp_path / "m", {"model": model, **changes})


@pytest.mark.parametrize("model,post,message", [
    ("tiny-gpt2", template("<bos>", "$A", ids={"<bos>": 5}),
     "tokenizer.json: its post_processor puts '<bos>' (id 5) around a sentence, and its vocabulary and added tokens "
     "do not hold it; give the model's own tokenizer"),
    ("tiny-qwen2", template("<|endoftext|>", "$A", ids={"<|endoftext|>": 5}),
     "tokenizer.json: its post_processor puts '<|endoftext|>' (id 5) around a sentence, and its vocabulary and added "
     "tokens give it the id 500; give the model's own tokenizer"),
    ("tiny-llama", template("<s>", "$A", ids={"<s>": 9_000}),
     "tokenizer.json: gives the piece '<s>' the id 9,000, and config.json's vocab_size is 560"),
    ("tiny-llama", template("<s>", "$A", ids={}),
     "tokenizer.json: its post_processor's template names the marker '<s>', which its special_tokens lack"),
])
def test_a_template_at_odds_with_its_vocabulary(tmp_path, model, post, message):
    assert refused(variant(tmp_path, model, post_processor=post)).startswith(message)


@pytest.mark.parametrize("model,settings,message", [
    ("tiny-bert", {"cls_token": "<cls>"},
     "tokenizer_config.json: its cls_token '<cls>' is not in the tokenizer's vocabulary or among its added tokens, and "
     "transformers' BertTokenizer puts it around every sentence; give the model's own tokenizer_config.json"),
    ("tiny-xlm-roberta", {"bos_token": "<bos>", "tokenizer_class": "XLMRobertaTokenizerFast"},
     "tokenizer_config.json: its bos_token '<bos>' is not in the tokenizer's vocabulary or among its added tokens, "
     "and transformers' XLMRobertaTokenizer puts it"),
    ("tiny-llama", {"add_bos_token": "yes"}, "tokenizer_config.json: its add_bos_token is 'yes'; it must be true or "
                                             "false"),
    ("tiny-qwen2", {"add_eos_token": None}, "tokenizer_config.json: its add_eos_token is None; it must be true or false"),
    ("tiny-roberta", {"trim_offsets": None}, "tokenizer_config.json: its trim_offsets is None; it must be true or false"),
    ("tiny-gpt2", {"bos_token": ["<|endoftext|>"]}, "tokenizer_config.json: its bos_token is ['<|endoftext|>']; a token "
                                                    "is named by a string"),
    ("tiny-bert", {"tokenizer_class": 3}, "tokenizer_config.json: its tokenizer_class is 3; a class is named by a "
                                          "string"),
])
def test_a_tokenizer_config_at_odds_with_itself(tmp_path, model, settings, message):
    assert refused(variant(tmp_path, model, tokenizer_config=settings)).startswith(message)


def test_a_named_marker_a_template_cannot_hold(tmp_path):
    """":" is a piece of BERT's vocabulary, but a template would read it as a type id."""
    folder = variant(tmp_path, "tiny-bert", tokenizer_config={"sep_token": ":"})
    assert refused(folder).startswith("tokenizer_config.json: its sep_token ':' holds a ':' or begins with a '$'")


def test_the_file_is_read_where_another_class_reads_it(tmp_path):
    """A BERT read by TokenizersBackend (tokenizer_config.json's PreTrainedTokenizerFast) puts
    what its template puts, and a named cls_token it does not put is never looked up."""
    folder = variant(tmp_path, "tiny-bert", tokenizer_config={**BACKEND, "cls_token": "<cls>"},
                     post_processor=template("$A", "[SEP]", ids={"[SEP]": 3}))
    doc = one(run("scores", "the earth", "--model", folder, "--json"))
    assert doc["tokens"] == ["the", "earth", "[SEP]"] and doc["special"] == [False, False, True]


# --- what follows the markers placed


def test_a_marker_after_changes_nothing_a_decoder_predicts_from_the_sentence(folders):
    """A decoder reads no later piece: with </s> after the sentence, leave-one-out's next
    piece (transformers' likeliest at the sentence's last piece), its falls and every head's
    ablation effect (the loss over the sentence's own pieces) are those of the sentence
    without it; erasing </s> moves nothing."""
    from attncli.mixing import documents as mixing
    from attncli.models.encoder import Trained

    plain, ended = (Trained(models.load_model(str(f)), 2) for f in (DATA / "models" / "tiny-llama", folders["llama-eos"]))
    a, b = (t.parts(t.model.encode(SENTENCES[0])) for t in (plain, ended))
    assert b.ids.tolist() == [*a.ids.tolist(), 2] and b.last == a.last == len(a.ids) - 1
    z = FORWARDS["llama-eos_logits"][b.last].astype(np.float64)  # transformers', at "▁orange"
    erased = [mixing.erase(t, s) for t, s in ((plain, a), (ended, b))]
    assert erased[1]["sentence_effect_of"]["id"] == erased[0]["sentence_effect_of"]["id"] == int(np.argmax(z))
    assert abs(erased[1]["sentence_effect_of"]["logprob"] - attention.log_softmax(z).max()) < 1e-4
    np.testing.assert_allclose(erased[1]["sentence_effect"][:-1], erased[0]["sentence_effect"], rtol=0, atol=1e-12)
    assert abs(erased[1]["sentence_effect"][-1]) < 1e-12
    np.testing.assert_allclose(mixing.ablation(ended, b)[0], mixing.ablation(plain, a)[0], rtol=0, atol=1e-12)


def test_an_encoder_without_markers_marks_no_head(folders):
    heads = run("heads", SENTENCES[0], "--model", folders["bert-backend-without-markers"], "--format", "table",
                "--no-color")
    assert heads.exit_code == 0, heads.stderr
    assert "more than half on" not in heads.stdout and "own marker" not in heads.stdout


def test_stats_heads_a_lone_marker_as_the_tokenizer_names_it(folders, tmp_path):
    """RoBERTa's template without </s>: the marker first is <s>, summed under cls and headed
    <s>; there is no sep column, no marker being after the sentence."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The earth is like an orange\nI sat on the bank of the river\n")
    folder = folders["roberta-backend-without-eos"]
    records = ok(run("stats", corpus, "--model", folder, "--json"))
    assert all(r["cls"] > 0 and r["sep"] == 0 for r in records)
    table = run("stats", corpus, "--model", folder, "--format", "table", env={"COLUMNS": "120"})
    heading = next(line.split() for line in table.stdout.splitlines() if line.startswith("head "))
    assert "<s>" in heading and "[CLS]" not in heading and "[SEP]" not in heading and "</s>" not in heading
