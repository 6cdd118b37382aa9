"""GGUF files and ollama's store: the tiny models written as llama.cpp's converter writes
them (tinygguf.py), read by attncli and held against what transformers' own GGUF loader
computed from the same files (tests/data/gguf.npz, made by make_gguf_references.py), and
against the safetensors models they were made from; hostile files and stores refused in one
line."""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gguf", reason="the gguf extra: pip install '.[gguf]'")
pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
import tinygguf  # noqa: E402
from clirunner import fails, one, run  # noqa: E402

from attncli.models import gguf_file, load_model, ollama  # noqa: E402

HERE = Path(__file__).parent
MODELS = HERE / "data" / "models"
REFERENCE = np.load(HERE / "data" / "gguf.npz")
SENTENCES = [str(s) for s in REFERENCE["sentences"]]
TEXTS = [str(s) for s in REFERENCE["texts"]]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    return tinygguf.write_files(MODELS, tmp_path_factory.mktemp("gguf"))


def key(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")


@pytest.mark.parametrize("name", [name for name, _, _ in tinygguf.FILES])
def test_every_layer_and_head_is_transformers_reading_of_the_same_file(made, name):
    model = load_model(str(made[name]))
    for k, text in enumerate(SENTENCES):
        ref = {part: REFERENCE[f"{key(name)}__{part}_{k}"] for part in ("ids", "attentions", "hidden")}
        ids = model.encode(text).ids
        assert ids.tolist() == ref["ids"].tolist()
        result = model.family.forward(ids, model.weights, model.config)
        np.testing.assert_allclose(np.asarray(result.weights), ref["attentions"], atol=1e-5, rtol=0)
        hidden = np.asarray(result.hidden)
        np.testing.assert_allclose(hidden, ref["hidden"], atol=1e-4 * np.abs(ref["hidden"]).max(), rtol=0)
        if k == 0:
            logits = model.family.logits(hidden[-1], model.weights, model.config)
            expected = REFERENCE[f"{key(name)}__logits_0"]
            np.testing.assert_allclose(logits, expected, atol=1e-4 * np.abs(expected).max(), rtol=0)


@pytest.mark.parametrize("which, name", [("tiny_llama", "tiny-llama-F32.gguf"), ("tiny_qwen2", "tiny-qwen2-F32.gguf"),
                                         ("tiny_gpt2", "tiny-gpt2-F32.gguf")])
def test_the_tokenizer_from_the_metadata_gives_transformers_pieces(made, which, name):
    tokenizer = load_model(str(made[name])).tokenizer
    for k, text in enumerate(TEXTS):
        encoding = tokenizer.encode(text)
        assert encoding.ids == REFERENCE[f"{which}__ids_{k}"].tolist(), text
        assert [list(o) for o in encoding.offsets] == REFERENCE[f"{which}__offsets_{k}"].tolist(), text


@pytest.mark.parametrize("source", ["tiny-llama", "tiny-qwen2", "tiny-mistral"])
def test_an_f32_file_runs_as_the_safetensors_model_it_was_made_from(tmp_path, source):
    """tiny-llama's llama3 RoPE as the rope_freqs tensor llama.cpp's converter writes (float32
    factors: 1e-6 apart), its query and key rows permuted and put back; Mistral's window,
    which llama.cpp's "llama" architecture does not run, left out of both."""
    folder = MODELS / source
    path = tinygguf.write_gguf(folder, tmp_path / "m.gguf")
    gguf, safetensors = load_model(str(path)), load_model(str(folder))
    config = dataclasses.replace(safetensors.config, window=0, model_type=gguf.config.model_type,
                                 norm_eps=gguf.config.norm_eps, rope=gguf.config.rope)
    if source == "tiny-llama":
        assert gguf.config.rope.factors and safetensors.config.rope.kind == "llama3"
        from attncli.models import llama

        np.testing.assert_allclose(llama.frequencies(gguf.config), llama.frequencies(safetensors.config), rtol=1e-6)
    assert config == gguf.config
    ids = safetensors.encode("I sat on the bank of the river, didn't I?").ids
    assert gguf.encode("I sat on the bank of the river, didn't I?").ids.tolist() == ids.tolist()
    a = gguf.family.forward(ids, gguf.weights, gguf.config)
    b = safetensors.family.forward(ids, safetensors.weights, config)
    np.testing.assert_allclose(np.asarray(a.weights), np.asarray(b.weights), atol=1e-9, rtol=0)
    if source == "tiny-llama":  # the file's frequencies against the config's own
        c = safetensors.family.forward(ids, safetensors.weights, safetensors.config)
        np.testing.assert_allclose(np.asarray(a.weights), np.asarray(c.weights), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["tiny-gpt2-F32.gguf", "tiny-gpt2-Q8_0.gguf"])
def test_a_gpt2_file_runs_as_its_tensors_dequantized_and_turned_back_say(made, name):
    """GPT-2's Conv1D weights, which llama.cpp's converter writes transposed: each tensor
    read by gguf-py's own reader and dequantizer, turned back to (in, out) as transformers'
    GPT2TensorProcessor does, and run through the folder's model; the F32 file's numbers are
    the folder's."""
    import gguf

    from attncli.models import gpt2

    model, folder = load_model(str(made[name])), load_model(str(MODELS / "tiny-gpt2"))
    reader = gguf.GGUFReader(made[name])
    tensors = {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in reader.tensors}
    named = {n: tensors[gguf_file.tensor_name(gpt2, n)] for n in folder.weights}
    weights = {n: (w.T if gpt2.gguf_transposed(n) else w).astype(np.float64) for n, w in named.items()}
    ids = folder.encode(SENTENCES[1]).ids
    assert model.encode(SENTENCES[1]).ids.tolist() == ids.tolist()
    ours = np.asarray(model.family.forward(ids, model.weights, model.config).weights)
    np.testing.assert_allclose(ours, np.asarray(gpt2.forward(ids, weights, model.config).weights), atol=1e-12, rtol=0)
    if name.endswith("F32.gguf"):
        np.testing.assert_allclose(ours, np.asarray(folder.family.forward(ids, folder.weights, folder.config).weights),
                                   atol=1e-9, rtol=0)


def test_the_permutation_is_undone_row_for_row():
    for heads, d in ((1, 2), (4, 16), (2, 8)):
        W = np.arange(heads * d * 3, dtype=float).reshape(heads * d, 3)
        assert (tinygguf.permute(W, heads)[gguf_file.unpermuted(heads * d, heads)] == W).all()


def test_a_llama_file_read_without_the_permutation_undone_attends_otherwise(made, monkeypatch):
    """Undoing llama.cpp's permutation matters: left in place, the RoPE pairs the wrong features."""
    name = "tiny-llama-F32.gguf"
    ids = REFERENCE[f"{key(name)}__ids_0"]
    monkeypatch.setattr(gguf_file, "unpermuted", lambda rows, heads: np.arange(rows))
    model = load_model(str(made[name]))
    far = np.abs(np.asarray(model.family.forward(ids, model.weights, model.config).weights)
                 - REFERENCE[f"{key(name)}__attentions_0"]).max()
    assert far > 0.05


def test_json_and_the_table_name_the_quantization(made):
    path = made["wide-llama-Q4_K.gguf"]
    doc = one(run("scores", SENTENCES[0], "--model", path, "--json"))
    assert doc["model"]["quantization"] == {"type": "Q4_K", "tensors": {"F32": 5, "Q4_K": 16}, "file_type": "Q4_K_M"}
    assert doc["model"]["name"] == "wide-llama-Q4_K.gguf"
    table = run("scores", SENTENCES[0], "--model", path, "--format", "table")
    assert table.exit_code == 0, table.stderr
    assert "Q4_K_M (Q4_K 16, F32 5 tensors)" in " ".join(table.stdout.split())


def test_a_quantized_layer_is_dequantized_when_it_runs_and_let_go_after(made):
    """Loading dequantizes nothing; a pass holds one layer's tensors at a time, or, for a
    model this small (layers.HOLD), every layer's: never the embedding table whole."""
    model = load_model(str(made["wide-llama-Q4_K.gguf"]))
    assert model.weights.held.arrays == {}
    model.family.forward(model.encode(SENTENCES[0]).ids, model.weights, model.config)
    held = {s.key for s in model.weights.held.arrays}
    assert "token_embd.weight" not in held and held <= {s.key for s in model.weights.tensors.values()}


# --- hostile files


def tensor_info(data: bytes, name: str) -> int:
    """Where the tensor info of `name` begins its dimensions' count, in a file's bytes."""
    encoded = name.encode()
    at = data.index(struct.pack("<Q", len(encoded)) + encoded)
    return at + 8 + len(encoded)


def patched(tmp_path, made, change, name="tiny-qwen2-F32.gguf") -> Path:
    data = bytearray(made[name].read_bytes())
    change(data)
    path = tmp_path / "hostile.gguf"
    path.write_bytes(bytes(data))
    return path


def refused(path, *words, code=1) -> str:
    return fails(run("scores", SENTENCES[0], "--model", path, "--json"), *words, code=code)


@pytest.mark.parametrize("cut", [30, 200, 3_000, 20_000, -10])
def test_a_file_cut_short_is_refused_in_one_line(tmp_path, made, cut):
    data = made["tiny-qwen2-F32.gguf"].read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:cut])
    refused(path, "cut short")


@pytest.mark.parametrize("change, words", [
    (lambda d: d.__setitem__(slice(4, 8), struct.pack("<I", 9)), ("version 9",)),
    (lambda d: d.__setitem__(slice(8, 16), struct.pack("<Q", 1 << 40)), ("tensors", "more than")),
    (lambda d: d.__setitem__(slice(16, 24), struct.pack("<Q", 1 << 62)), ("keys", "more than")),
    (lambda d: d.__setitem__(slice(24, 32), struct.pack("<Q", 1 << 60)), ("a key", "more than")),
])
def test_a_header_that_declares_more_than_it_holds_is_refused(tmp_path, made, change, words):
    refused(patched(tmp_path, made, change), *words)


def test_a_tensor_past_the_end_or_over_another_is_refused(tmp_path, made):
    def far(d):
        at = tensor_info(d, "blk.0.attn_q.weight")
        n_dims = struct.unpack_from("<I", d, at)[0]
        d[at + 4 + 8 * n_dims + 4:at + 4 + 8 * n_dims + 12] = struct.pack("<Q", 1 << 30)

    def over(d):
        at = tensor_info(d, "blk.0.attn_q.weight")
        n_dims = struct.unpack_from("<I", d, at)[0]
        d[at + 4 + 8 * n_dims + 4:at + 4 + 8 * n_dims + 12] = struct.pack("<Q", 0)

    refused(patched(tmp_path, made, far), "ends inside the tensor blk.0.attn_q.weight")
    refused(patched(tmp_path, made, over), "overlaps")


def test_an_unknown_type_or_architecture_is_refused_by_name(tmp_path, made):
    def kind(d):
        at = tensor_info(d, "blk.0.attn_q.weight")
        n_dims = struct.unpack_from("<I", d, at)[0]
        d[at + 4 + 8 * n_dims:at + 4 + 8 * n_dims + 4] = struct.pack("<I", 9_999)

    refused(patched(tmp_path, made, kind), "ggml type 9999")
    arch = b"qwen2"

    def other(d):
        at = d.index(b"general.architecture") + len(b"general.architecture") + 4
        d[at + 8:at + 8 + len(arch)] = b"bloom"

    refused(patched(tmp_path, made, other), "architecture 'bloom'", "llama, qwen2")


def test_a_tensor_of_a_type_gguf_py_cannot_dequantize_is_refused_by_name(tmp_path, made):
    def integers(d):  # I32 numbers take the bytes F32 numbers do
        at = tensor_info(d, "blk.0.attn_q.weight")
        n_dims = struct.unpack_from("<I", d, at)[0]
        d[at + 4 + 8 * n_dims:at + 4 + 8 * n_dims + 4] = struct.pack("<I", 26)

    refused(patched(tmp_path, made, integers), "blk.0.attn_q.weight is of type I32", "cannot dequantize")


def test_a_non_finite_number_is_refused_as_the_file_loads_or_as_its_layer_is_dequantized(tmp_path, made):
    def nan(d):
        at = d.rindex(struct.pack("<f", 1.0)[:2])  # somewhere in the last tensor's numbers
        d[at - at % 4:at - at % 4 + 4] = struct.pack("<f", float("nan"))

    refused(patched(tmp_path, made, nan), "NaN or infinite")
    scales = np.full((64, 34), 0, dtype=np.uint8)
    scales[:, :2] = np.frombuffer(np.float16(np.inf).tobytes(), dtype=np.uint8)  # each block's scale
    data = bytearray(made["tiny-qwen2-Q8_0.gguf"].read_bytes())
    header = gguf_file.read_header(made["tiny-qwen2-Q8_0.gguf"])
    t = header.tensors["blk.0.attn_q.weight"]
    data[t.offset:t.offset + t.nbytes] = scales[:t.nbytes // 34].tobytes()[:t.nbytes]
    path = tmp_path / "scale.gguf"
    path.write_bytes(bytes(data))
    refused(path, "blk.0.attn_q.weight", "once dequantized")


def test_a_tokenizer_the_metadata_garbles_is_refused(tmp_path):
    def write(**metadata):
        return tinygguf.write_gguf(MODELS / "tiny-qwen2", tmp_path / "t.gguf", metadata=metadata)

    refused(write(**{"tokenizer.ggml.pre": "falcon"}), "tokenizer.ggml.pre is 'falcon'")
    refused(write(**{"tokenizer.ggml.model": "bert"}), "tokenizer.ggml.model is 'bert'")
    refused(write(**{"tokenizer.ggml.eos_token_id": 70_000}), "eos_token_id is 70000")


def test_a_sentencepiece_vocabulary_of_a_huge_piece_or_a_nan_score_is_refused(tmp_path):
    """A piece of 100,000 characters would cost generate_merges 10^10 steps; a NaN orders nothing."""
    vocab = load_model(str(MODELS / "tiny-llama")).tokenizer.get_vocab(with_added_tokens=True)
    tokens = sorted(vocab, key=vocab.get)

    def write(**metadata):
        return tinygguf.write_gguf(MODELS / "tiny-llama", tmp_path / "t.gguf", metadata=metadata)

    refused(write(**{"tokenizer.ggml.tokens": [*tokens[:-1], "a" * 100_000]}), "a piece of 100,000 characters")
    scores = [0.0] * len(tokens)
    scores[5] = float("nan")
    refused(write(**{"tokenizer.ggml.scores": scores}), "not a number")


def test_a_size_the_metadata_lacks_is_named_in_gguf_s_words(tmp_path, made):
    def renamed(d):  # the key's name changed in place: the file holds no qwen2.block_count
        at = d.index(b"qwen2.block_count")
        d[at:at + len(b"qwen2.block_count")] = b"qwen2.block_cXunt"

    refused(patched(tmp_path, made, renamed), "lacks qwen2.block_count, which a qwen2 model's GGUF declares")


def test_a_file_that_is_not_gguf_is_not_taken_for_one(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGML" + bytes(100))
    refused(path, "is not a folder")


# --- ollama's store


def store(root: Path, made, name="tiny", tag="latest", namespace=("registry.ollama.ai", "library"),
          blob: Path | None = None, manifest: object = None) -> Path:
    """An ollama store in `root` holding tiny-qwen2's Q8_0 file as NAME:TAG."""
    source = made["tiny-qwen2-Q8_0.gguf"]
    digest = "ab" * 32
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    target = root / "blobs" / f"sha256-{digest}"
    if blob is None:
        target.write_bytes(source.read_bytes())
    folder = root / "manifests" / namespace[0] / namespace[1] / name
    folder.mkdir(parents=True, exist_ok=True)
    document = manifest if manifest is not None else {
        "schemaVersion": 2, "layers": [{"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "0" * 64},
                                       {"mediaType": ollama.MODEL_LAYER, "digest": f"sha256:{digest}"}]}
    (folder / tag).write_text(document if isinstance(document, str) else json.dumps(document))
    return target


@pytest.mark.parametrize("spec, tag, namespace", [
    ("tiny:1b", "1b", ("registry.ollama.ai", "library")),
    ("ollama:tiny", "latest", ("registry.ollama.ai", "library")),
    ("someone/tiny:q8", "q8", ("registry.ollama.ai", "someone")),
    ("hf.co/org/tiny:Q8_0", "Q8_0", ("hf.co", "org")),
])
def test_a_model_of_the_store_is_read_by_its_name(tmp_path, made, spec, tag, namespace):
    store(tmp_path, made, tag=tag, namespace=namespace)
    doc = one(run("scores", SENTENCES[0], "--model", spec, "--json", env={"OLLAMA_MODELS": str(tmp_path)}))
    assert doc["model"]["name"] == spec
    expected = one(run("scores", SENTENCES[0], "--model", made["tiny-qwen2-Q8_0.gguf"], "--json"))
    assert doc["weights"] == expected["weights"]


def test_a_store_without_the_model_says_how_to_pull_it(tmp_path, made):
    store(tmp_path, made)
    line = fails(run("scores", SENTENCES[0], "--model", "llama3.2:1b", env={"OLLAMA_MODELS": str(tmp_path)}))
    assert line.endswith("fetch it with: ollama pull llama3.2:1b")


@pytest.mark.parametrize("manifest, words", [
    ("{not json", ("is not JSON",)),
    ({"layers": "none"}, ("no list of layers",)),
    ({"layers": [{"mediaType": ollama.MODEL_LAYER, "digest": "sha256:../../etc/passwd"}]}, ("not sha256",)),
    ({"layers": [{"mediaType": ollama.MODEL_LAYER, "digest": "sha256:" + "c" * 64}]}, ("which the store lacks",)),
    ({"layers": []}, ("lists 0 layers",)),
])
def test_a_hostile_manifest_is_refused_in_one_line(tmp_path, made, manifest, words):
    store(tmp_path, made, manifest=manifest)
    fails(run("scores", SENTENCES[0], "--model", "tiny:latest", env={"OLLAMA_MODELS": str(tmp_path)}),
          *words, "ollama pull tiny:latest")


def test_a_blob_that_is_a_fifo_or_leads_out_of_the_store_is_refused(tmp_path, made):
    root = tmp_path / "store"
    blob = store(root, made, blob=Path("fifo"))
    os.mkfifo(blob)
    fails(run("scores", SENTENCES[0], "--model", "tiny:latest", env={"OLLAMA_MODELS": str(root)}), "not a regular file")
    blob.unlink()
    blob.mkdir()  # a folder where the blob is: never read as a model's folder
    (blob / "config.json").write_text("{}")
    fails(run("scores", SENTENCES[0], "--model", "tiny:latest", env={"OLLAMA_MODELS": str(root)}), "not a regular file")
    (blob / "config.json").unlink()
    blob.rmdir()
    outside = tmp_path / "elsewhere.gguf"
    outside.write_bytes(made["tiny-qwen2-Q8_0.gguf"].read_bytes())
    blob.symlink_to(outside)
    fails(run("scores", SENTENCES[0], "--model", "tiny:latest", env={"OLLAMA_MODELS": str(root)}),
          "leads out of ollama's store")
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest"
    moved = tmp_path / "manifest"
    manifest.rename(moved)
    manifest.symlink_to(moved)
    fails(run("scores", SENTENCES[0], "--model", "tiny:latest", env={"OLLAMA_MODELS": str(root)}),
          "the manifest leads out")


def test_revision_is_refused_for_a_gguf_or_a_store_model(tmp_path, made):
    store(tmp_path, made)
    fails(run("scores", SENTENCES[0], "--model", "tiny:latest", "--revision", "main",
              env={"OLLAMA_MODELS": str(tmp_path)}), "ollama's store", code=2)
    fails(run("scores", SENTENCES[0], "--model", made["tiny-qwen2-F32.gguf"], "--revision", "main"), "GGUF file",
          code=2)


def test_heads_of_a_store_model_as_an_installed_process(tmp_path, made):
    store(tmp_path, made, tag="1b")
    env = {**os.environ, "OLLAMA_MODELS": str(tmp_path), "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "attncli", "heads", "The earth is like an orange", "--model", "tiny:1b",
                           "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["model"]["quantization"]["type"] == "Q8_0"
    weights = np.array(doc["weights"])  # (L, H, T, T)
    assert weights.shape == (2, 4, 6, 6)
    ref = REFERENCE["tiny_qwen2_Q8_0_gguf__attentions_0"]
    np.testing.assert_allclose(weights, ref, atol=1e-5, rtol=0)


def numbers_alike(a, b, path="") -> None:
    """Two JSON documents alike but for their model's name and file: every number within
    1e-9, every other value equal."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            if k not in ("name", "path", "quantization", "corpus", "model"):
                numbers_alike(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            numbers_alike(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert abs(a - b) <= 1e-9 * max(1, abs(a)), (path, a, b)
    else:
        assert a == b, path


@pytest.mark.parametrize("args", [
    ("scores", SENTENCES[0], "--predict", "3"), ("context", SENTENCES[0], "--token", "orange"),
    ("compare", "I sat on the bank of the river", "The bank raised interest rates", "--token", "bank"),
    ("heads", SENTENCES[0]), ("contributions", SENTENCES[0], "--method", "alti"),
    ("explain", SENTENCES[0], "--token", "orange"),
])
def test_every_command_reads_a_gguf_as_the_folder_it_was_made_from(tmp_path, args):
    """tiny-qwen2 in F32 runs as its folder does (no permutation, no rope_freqs: the same
    numbers but for the metadata's float32 epsilon, 1e-13 apart), in every command."""
    path = tinygguf.write_gguf(MODELS / "tiny-qwen2", tmp_path / "q.gguf")
    from_file = one(run(*args, "--model", path, "--json"))
    from_folder = one(run(*args, "--model", MODELS / "tiny-qwen2", "--json"))
    model = from_file.get("model") or from_file["sentences"][0]["model"]  # compare's: each sentence's
    assert model["name"] == "q.gguf" and model["quantization"]["type"] == "F32"
    numbers_alike(from_file, from_folder)


@pytest.mark.parametrize("command", ["stats", "batch", "faithfulness"])
def test_the_corpus_commands_read_a_gguf_as_its_folder(tmp_path, command):
    path = tinygguf.write_gguf(MODELS / "tiny-qwen2", tmp_path / "q.gguf")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The earth is like an orange\nI sat on the bank of the river\nThe bank raised interest rates\n")
    extra = {"stats": ("--no-shuffled", "--json"), "batch": (), "faithfulness": ("--json",)}[command]
    from_file = run(command, corpus, "--model", path, *extra)
    from_folder = run(command, corpus, "--model", MODELS / "tiny-qwen2", *extra)
    assert from_file.exit_code == 0 and from_folder.exit_code == 0, (from_file.stderr, from_folder.stderr)
    docs = [json.loads(line) for line in from_file.stdout.splitlines()]
    expected = [json.loads(line) for line in from_folder.stdout.splitlines()]
    assert len(docs) == len(expected) > 0
    for a, b in zip(docs, expected):
        numbers_alike(a, b)


# --- quantization: one model under two copies of its weights


def js_loops(p, q) -> float:
    """Jensen-Shannon divergence of two rows, in nats, a term at a time."""
    import math

    total = []
    for a, b in zip(p, q):
        m = (a + b) / 2
        if a > 0:
            total.append(a * math.log(a / m) / 2)
        if b > 0:
            total.append(b * math.log(b / m) / 2)
    return math.fsum(total)


@pytest.mark.parametrize("model, against", [("wide-llama-Q4_K.gguf", "wide-llama-Q5_1.gguf"),
                                            ("tiny-qwen2-Q4_0.gguf", "tiny-qwen2-F32.gguf")])
def test_quantization_measures_each_head_as_the_formulas_give(made, model, against):
    doc = one(run("quantization", SENTENCES[1], "--model", made[model], "--against", made[against], "--json"))
    a, b = load_model(str(made[model])), load_model(str(made[against]))
    ids = a.encode(SENTENCES[1]).ids
    P = np.asarray(a.family.forward(ids, a.weights, a.config).weights)  # (L, H, T, T)
    Q = np.asarray(b.family.forward(ids, b.weights, b.config).weights)
    L, H, T, _ = P.shape
    assert doc["tokens"] == [a.piece(int(i)) for i in ids] and doc["against"]["name"] == against
    for l in range(L):
        for h in range(H):
            cells = [abs(P[l, h, i, j] - Q[l, h, i, j]) for i in range(T) for j in range(i + 1)]  # a decoder's
            assert doc["max_abs"][l][h] == pytest.approx(max(cells), abs=1e-12)
            assert doc["mean_abs"][l][h] == pytest.approx(sum(cells) / len(cells), abs=1e-12)
            js = [js_loops(P[l, h, i], Q[l, h, i]) for i in range(T)]
            assert doc["js_mean"][l][h] == pytest.approx(sum(js) / T, abs=1e-12)
            assert doc["js_max"][l][h] == pytest.approx(max(js), abs=1e-12)
            assert 0 <= min(js) and max(js) <= np.log(2)
    big = doc["largest"]
    assert doc["overall"]["max_abs"] == max(max(r) for r in doc["max_abs"])
    assert abs(big["weight"] - big["against"]) == doc["overall"]["max_abs"]
    assert P[big["layer"] - 1, big["head"] - 1, big["row"], big["column"]] == pytest.approx(big["weight"], abs=1e-15)


def test_a_model_against_itself_moves_nothing(made):
    path = made["tiny-llama-Q8_0.gguf"]
    doc = one(run("quantization", SENTENCES[0], "--model", path, "--against", path, "--json"))
    assert doc["overall"] == {"max_abs": 0.0, "mean_abs": 0.0, "js_mean": 0.0}


def test_quantization_refuses_two_models_that_are_not_copies_of_one(made):
    fails(run("quantization", SENTENCES[0], "--model", made["tiny-llama-F32.gguf"], "--against",
              made["tiny-qwen2-F32.gguf"], "--json"), "split the sentence into different pieces")
    fails(run("quantization", SENTENCES[0], "--model", made["tiny-llama-F32.gguf"], "--against",
              made["wide-llama-Q4_K.gguf"], "--json"), "not copies of one model")
    fails(run("quantization", SENTENCES[0], "--against", made["tiny-llama-F32.gguf"]), "give --model", code=2)
    fails(run("quantization", SENTENCES[0], "--model", made["tiny-llama-F32.gguf"]), "--against", code=2)


def test_quantization_draws_a_table_and_a_picture_with_the_text_as_it_is(tmp_path, made):
    pytest.importorskip("matplotlib")
    sentence = "[bold]The[/bold] earth \x1b[31mis\x1b[0m like an orange"
    png = tmp_path / "drift.png"
    result = run("quantization", sentence, "--model", made["tiny-qwen2-Q4_0.gguf"], "--against",
                 made["tiny-qwen2-F32.gguf"], "--format", "table", "--png", png)
    assert result.exit_code == 0, result.stderr
    assert "[bold]The[/bold]" in result.stdout and "\x1b" not in result.stdout
    assert "Q4_0 (Q4_0 15, F32 11 tensors)" in result.stdout and "mean JS divergence of a row" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_notebook_shows_a_gguf_model(made):
    from attncli import notebook

    page = notebook.show(SENTENCES[0], model=str(made["tiny-qwen2-Q8_0.gguf"]))
    html = page._repr_html_()
    assert "tiny-qwen2-Q8_0.gguf" in html and "Q8_0" in html


def test_the_direct_dequantizer_is_gguf_py_s_public_one_for_every_type():
    """dequantizer(kind) calls each type's dequantize_rows on many rows at once; gguf-py's
    public dequantize goes 16 rows at a time: the same numbers, for every type it reads (the
    IQ types' grids too), on random bytes."""
    import gguf
    import gguf.quants

    rng = np.random.default_rng(0)
    kinds = [t for t in gguf.GGMLQuantizationType if gguf_file.dequantizer(t.name) is not None]
    assert {"Q4_0", "Q8_0", "Q2_K", "Q4_K", "Q6_K", "IQ2_XXS", "IQ4_XS"} <= {t.name for t in kinds}
    for kind in kinds:
        block, size = gguf.GGML_QUANT_SIZES[kind]
        raw = rng.integers(0, 256, size=(40, 3 * size), dtype=np.uint8)
        with np.errstate(all="ignore"):  # random scales: some NaN
            np.testing.assert_array_equal(gguf_file.dequantizer(kind.name)(raw), gguf.quants.dequantize(raw, kind),
                                          err_msg=kind.name)


def test_workers_name_a_store_model_as_the_run_does(tmp_path, made):
    """batch --jobs 2: each worker loads the model by its blob's path, and names it as the
    run does (tiny:1b), not by the blob's file name."""
    store(tmp_path, made, tag="1b")
    corpus = tmp_path / "lines.txt"
    corpus.write_text("The earth is like an orange\nI sat on the bank of the river\n" * 3)
    env = {"OLLAMA_MODELS": str(tmp_path)}
    two = run("batch", corpus, "--model", "tiny:1b", "--jobs", "2", env=env)
    one_job = run("batch", corpus, "--model", "tiny:1b", env=env)
    assert two.exit_code == 0 and one_job.exit_code == 0, (two.stderr, one_job.stderr)
    docs = [json.loads(line) for line in two.stdout.splitlines()]
    assert {doc["model"]["name"] for doc in docs} == {"tiny:1b"}
    assert two.stdout == one_job.stdout
