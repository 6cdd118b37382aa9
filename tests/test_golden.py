"""Every view's output as a real run writes it, held as the tool promises it: each
command's table (at 100 columns, without colour), its JSON Lines, the SVG and HTML pictures
in full colour, the PNG figures (by their SHA-256) and the pretty JSON a terminal is shown.
The text exactly, and each number within the precision the docs promise for it (held.py:
float64's 1e-12, float32's where a document's rows or nearest words' cosines are float32),
so that another processor's BLAS, summing in another order, passes as this one does. A
change to how anything is drawn or written shows here as a difference against
tests/golden/.

`python tests/test_golden.py` writes the files again, after a change meant to alter them."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

import held
from clirunner import run

GOLDEN = Path(__file__).resolve().parent / "golden"
SENTENCE = "The earth is like an orange"
LONG = " ".join(["the", "earth", "is", "like", "an", "orange", "and", "the", "moon"] * 4)  # 36 tokens
PROBE = ["--steps", "40", "--batch", "32", "--out-vocab", "25", "--probe", "the cat sat on a mat|the dog sat in the park",
         "--token", "sat"]
CASES = {  # name: the command line, run in a folder of its own
    "scores": ["scores", SENTENCE], "scores-raw": ["scores", SENTENCE, "--raw"],
    "scores-rollout": ["scores", SENTENCE, "--rollout"], "scores-norms": ["scores", SENTENCE, "--norms"],
    "scores-heads-masked": ["scores", SENTENCE, "--raw", "--heads", "2", "--qkv", "random", "--mask", "causal"],
    "scores-long": ["scores", LONG], "scores-max-tokens": ["scores", LONG, "--max-tokens", "5"],
    "scores-model": ["scores", SENTENCE, "--model", "minilm"],
    "scores-words": ["scores", SENTENCE, "--model", "minilm", "--words"],
    "scores-file": ["scores", "--file", "doc.txt"],
    "context": ["context", SENTENCE, "--token", "orange"], "context-all": ["context", SENTENCE, "--all"],
    "context-model": ["context", SENTENCE, "--token", "orange", "--model", "minilm"],
    "compare": ["compare", SENTENCE, "Orange is a bright color", "--token", "orange"],
    "compare-qkv": ["compare", SENTENCE, "Orange is a bright color", "--token", "orange", "--qkv", "random"],
    "compare-model": ["compare", SENTENCE, "Orange is a bright color", "--token", "orange", "--model", "minilm"],
    "neighbors": ["neighbors", "orange"], "neighbors-context": ["neighbors", "orange", "--context", SENTENCE],
    "explain": ["explain", SENTENCE, "--token", "orange"],
    "explain-heads": ["explain", SENTENCE, "--heads", "2", "--qkv", "random", "--mask", "causal"],
    "heads": ["heads", SENTENCE, "--model", "minilm"], "heads-layer": ["heads", SENTENCE, "--model", "minilm",
                                                                       "--layer", "2"],
    "rnn": ["rnn", SENTENCE], "stats": ["stats", "corpus.txt"],
    "stats-words": ["stats", "corpus.txt", "--by", "word"],
    "batch": ["batch", "two.txt"],
    "train": ["train", "corpus.txt", "-o", "p.npz", *PROBE], "qkv-init": ["qkv", "init", "-o", "q.npz"],
    "vectors-info": ["vectors", "info"], "vectors-info-file": ["vectors", "info", "--vectors", "small.txt"], "vectors-list": ["vectors", "list"], "vectors-verify": ["vectors", "verify"],
    "vectors-clear": ["vectors", "clear", "--yes"],
}
TABLES = [name for name in CASES if name != "batch"]  # batch writes JSON only
PICTURES = ["scores", "scores-heads-masked", "context", "compare", "explain", "heads-layer", "stats", "rnn"]
PNGS = ["scores", "context-all", "explain-heads", "heads", "stats"]


WIDE = 150  # characters of the folder a run is in: the same in every run, so that tables are as wide


def folder(tmp: Path) -> Path:
    """A folder below `tmp` whose path is WIDE characters long, holding the runs' files."""
    here = tmp / ("f" * (WIDE - len(str(tmp)) - 1))
    here.mkdir()
    words = "the cat sat on a mat and the dog ran to the park while a bird sang in the tree".split()
    (here / "corpus.txt").write_text("".join(" ".join(words[k:] + words[:k]) + "\n" for k in range(len(words))) * 8)
    (here / "two.txt").write_text("the cat sat on a mat\nthe dog ran to the park\n")
    (here / "doc.txt").write_text("The earth is like an orange. The moon is not.\n")
    (here / "small.txt").write_text("3 4\nthe 0.1 0.2 0.3 0.4\ncat 0.5 -0.1 0.2 0.0\nsat 0.3 0.3 -0.2 0.1\n")
    return here


ROOT = str(Path(__file__).resolve().parent.parent)
# a load's time, an entry's date, its name's hash of the source's path, and its size in
# bytes (its metadata holds the writer's process id, of 4 to 7 digits)
VARYING = re.compile(r'("load_seconds":|load seconds +)[0-9.e-]+|("created":)"[^"]*"|(small\.txt-)[0-9a-f]{20}'
                     r'|("bytes":)[0-9]+')


def output(name: str, fmt: str, tmp: Path, *extra: str) -> str:
    """What `name`'s command writes on stdout as `fmt`, run in a folder of its own; that
    folder, the clone's and the times written as placeholders (the only parts of it that
    differ between runs), each line's trailing spaces left out."""
    here = folder(tmp)
    env = {"ATTNCLI_CACHE_DIR": "cache", "COLUMNS": "250" if name.startswith("vectors") else "100"}
    with contextlib.chdir(here):
        if name.startswith("vectors-"):
            run("vectors", "convert", "small.txt", env=env)  # an entry to list, verify and clear
        formats = [] if name == "batch" else ["--format", fmt]  # batch writes JSON Lines only
        result = run(*CASES[name], *formats, *extra, env=env)
    assert result.exit_code == 0, (name, result.stderr)
    text = VARYING.sub(lambda m: f"{next(g for g in m.groups() if g)}{{varies}}", result.stdout)
    text = text.replace(':{varies}', ':"{varies}"')  # a JSON key's number or date: still JSON
    text = text.replace(str(here), "{tmp}").replace(ROOT, "{root}")
    return "".join(line.rstrip() + "\n" for line in text.splitlines())


def picture(name: str, suffix: str, tmp: Path) -> str:
    output(name, "table", tmp, f"--{suffix}", f"p.{suffix}")
    data = (tmp / ("f" * (WIDE - len(str(tmp)) - 1)) / f"p.{suffix}").read_bytes()
    if suffix == "png":
        return hashlib.sha256(data).hexdigest() + "\n"
    return data.decode("utf-8")


def pretty(tmp: Path) -> str:
    from attncli.views.json import pretty_json

    lines = output("scores-heads-masked", "json", tmp).splitlines()
    return pretty_json(json.loads(lines[0])) + "\n"


def produced() -> dict[str, callable]:
    """file name in tests/golden: what makes it, given a fresh folder."""
    made = {}
    for name in TABLES:
        made[f"{name}.txt"] = lambda tmp, name=name: output(name, "table", tmp)
    for name in CASES:
        made[f"{name}.jsonl"] = lambda tmp, name=name: output(name, "json", tmp)
    for name in PICTURES:
        for suffix in ("svg", "html"):
            made[f"{name}.{suffix}"] = lambda tmp, name=name, suffix=suffix: picture(name, suffix, tmp)
    for name in PNGS:
        made[f"{name}.png.sha256"] = lambda tmp, name=name: picture(name, "png", tmp)
    made["pretty.json"] = pretty
    return made


FLOAT32 = ("scores-file",)  # a document's rows: float32 numbers, written out in full


def assert_as_held(file: str, got: str, kept: str) -> None:
    """`got` against `kept`, the held text of `file`, as held.py compares: JSON document by
    document, tables and pictures as text with their numbers parsed, a PNG's digest exactly
    (its pixels are drawn from numbers rounded far above a float's last bits)."""
    rtol = held.FLOAT32 if file.split(".")[0] in FLOAT32 else held.FLOAT64
    if file.endswith((".jsonl", ".json")):
        held.assert_held_json_lines(got, kept, rtol)
    elif file.endswith(".png.sha256"):
        assert got == kept
    else:
        held.assert_held(got, kept, rtol)


@pytest.mark.parametrize("file", sorted(produced()))
def test_the_output_is_as_held(file, tmp_path, cache):
    if file.endswith(".png.sha256"):
        pytest.importorskip("matplotlib")
    assert_as_held(file, produced()[file](tmp_path), (GOLDEN / file).read_text(encoding="utf-8"))


if __name__ == "__main__":
    import tempfile

    GOLDEN.mkdir(exist_ok=True)
    for file, make in produced().items():
        with tempfile.TemporaryDirectory() as tmp:
            (GOLDEN / file).write_text(make(Path(tmp)), encoding="utf-8")
            print(file, file=sys.stderr)
