"""The commands whose whole output no other test holds, compared with a run's committed
output (tests/data/golden/) as the tool promises it (held.py: the text exactly, each number
within float64's 1e-12, or float32's for nearest words' cosines): train's summary and the
arrays of its file (its bytes depend on the processor's BLAS kernels: they are held to a
second run on the same machine instead), stats' records and table, batch's lines, and what
--model gives where a command reads the word vectors beside it. ATTNCLI_WRITE_GOLDEN=1
writes the files anew, for a change that means to change them."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import held
from clirunner import run

GOLDEN = Path(__file__).parent / "data" / "golden"
WORDS = ("the cat sat on a mat and the dog ran to the park while a bird sang in the tree "
         "she said that he was not there but they were here with us today").split()
TRAIN = ["--steps", "30", "--batch", "32", "--out-vocab", "25", "--probe", "the cat sat on a mat|the dog sat in the park",
         "--token", "sat"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """corpus.txt, 300 lines of WORDS, and corpus.jsonl, its first 20 as {"text": ...}."""
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS, size=rng.integers(5, 12))) for _ in range(300)]
    folder = tmp_path_factory.mktemp("golden")
    (folder / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "short.txt").write_text("\n".join(lines[:20] + ["", "qqqq zzzz"]) + "\n", encoding="utf-8")
    return folder


def same_as_golden(name: str, text: str, rtol: float = held.FLOAT64) -> None:
    path = GOLDEN / name
    if os.environ.get("ATTNCLI_WRITE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    held.assert_held(text, path.read_text(encoding="utf-8"), rtol)


def output(result, folder: Path) -> str:
    """A run's status, stdout and stderr as one text, the run's folder written as DIR."""
    return f"exit {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}".replace(str(folder), "DIR")


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_train_summary_and_file(folder, tmp_path, monkeypatch, fmt):
    monkeypatch.chdir(folder)  # the file records the corpus's path as given
    out = tmp_path / "proj.npz"
    result = run("train", "corpus.txt", "-o", out, *TRAIN, "--format", fmt)
    text = output(result, folder).replace(str(tmp_path), "OUT")
    same_as_golden(f"train.{fmt}.txt", text + "--- arrays\n" + held.arrays(out))
    again = tmp_path / "again.npz"
    run("train", "corpus.txt", "-o", again, *TRAIN, "--format", fmt)
    assert again.read_bytes() == out.read_bytes()  # the same bytes, on the same machine


def test_train_with_heads_and_a_smaller_d_k(folder, tmp_path, monkeypatch):
    monkeypatch.chdir(folder)
    out = tmp_path / "proj.npz"
    result = run("train", "corpus.txt", "-o", out, *TRAIN, "--heads", "2", "--d-k", "20", "--objective", "next",
                 "--json")
    text = output(result, folder).replace(str(tmp_path), "OUT")
    same_as_golden("train.heads.txt", text + "--- arrays\n" + held.arrays(out))


STATS = {
    "stats.json.txt": ("short.txt", "--json"),
    "stats.table.txt": ("short.txt", "--format", "table"),
    "stats.word.txt": ("short.txt", "--by", "word", "--json"),
    "stats.heads.txt": ("short.txt", "--heads", "2", "--random-seeds", "1", "--json"),
    "stats.probe.txt": ("--probe", "repeated", "--probe-count", "5", "--probe-length", "4", "--random-seeds", "1",
                        "--json"),
    "stats.model.txt": ("short.txt", "--model", "minilm", "--json"),
    "stats.probe-model.txt": ("--probe", "repeated", "--probe-count", "3", "--probe-length", "4", "--model", "minilm",
                              "--json"),
    "stats.empty.txt": ("empty.txt",),
}


@pytest.mark.parametrize("name", STATS)
def test_stats(folder, monkeypatch, name):
    (folder / "empty.txt").write_text("\n\n", encoding="utf-8")
    monkeypatch.chdir(folder)
    same_as_golden(name, output(run("stats", *STATS[name]), folder))


BATCH = {
    "batch.txt": ("short.txt",),
    "batch.token.txt": ("short.txt", "--token", "the", "--neighbors", "2", "--fields", "line,token,index,neighbors"),
    "batch.model.txt": ("short.txt", "--model", "minilm", "--layer", "2", "--head", "3", "--fields", "line,tokens,top"),
    "batch.jobs.txt": ("short.txt", "--jobs", "2", "--fields", "line,top"),
}


@pytest.mark.parametrize("name", BATCH)
def test_batch(folder, monkeypatch, name):
    monkeypatch.chdir(folder)
    rtol = held.FLOAT32 if name == "batch.token.txt" else held.FLOAT64  # its nearest words' cosines
    same_as_golden(name, output(run("batch", *BATCH[name]), folder), rtol)


SENTENCE = {
    "compare.model.txt": ("compare", "The earth is like an orange", "Orange is a bright color", "--token", "orange",
                          "--model", "minilm", "--json"),
    "neighbors.limit.txt": ("neighbors", "orange", "--context", "The earth is like an orange", "--limit", "5000",
                            "--json"),
    "heads.model.txt": ("heads", "the cat sat", "--model", "minilm", "--layer", "1", "--format", "table"),
    "explain.txt": ("explain", "the cat sat on the mat", "--token", "cat", "--format", "table"),
    "context.limit.txt": ("context", "the cat sat on the mat", "--token", "on", "--limit", "5000", "--json"),
    "qkv-init.txt": ("qkv", "init", "--d-k", "3", "--seed", "2", "-o", "p.npz", "--json"),
}


@pytest.mark.parametrize("name", SENTENCE)
def test_commands_beside_a_model_or_a_limit(folder, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    rtol = held.FLOAT32 if name.startswith(("neighbors", "compare", "context")) else held.FLOAT64  # nearest words
    same_as_golden(name, output(run(*SENTENCE[name]), folder).replace(str(tmp_path), "OUT"), rtol)
