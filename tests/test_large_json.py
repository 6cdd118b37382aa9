"""A sentence whose JSON document will be large is said on stderr before any work, once,
with what writes less: scores --file, --fields."""

from __future__ import annotations

import json

import pytest

from attncli import load_vectors
from clirunner import fails, ok, run

WORDS = [w for w in map(load_vectors().vocab.word, range(100, 3000)) if w.isascii() and w.isalpha()]
ADVICE = ("--file DOC.txt streams a long text, a line a token, and --fields leaves keys out (--fields tokens,top "
          "writes no matrix)")


def sentence(T: int) -> str:
    return " ".join(WORDS[:T])


def note(T: int, size: str, per_cell: int, advice: str = ADVICE, line: int | None = None) -> str:
    where = f"line {line}: " if line else ""
    return (f"attncli: note: {where}the sentence has {T:,} tokens, and its JSON document will be about {size} "
            f"({per_cell} numbers for each of its {T:,} x {T:,} cells); {advice}\n")


def test_a_long_sentence_s_document_is_said_first_and_its_size_is_true():
    result = run("scores", sentence(400), "--json")
    assert result.exit_code == 0 and result.stderr == note(400, "12.8 MB", 4)
    written = len(result.stdout.encode())
    assert 0.9 < written / 12.8e6 < 1.1, written  # the size said, within a tenth


def test_a_sentence_below_the_threshold_is_not_said():
    result = run("scores", sentence(340), "--json")  # 9.2 MB of JSON
    assert result.exit_code == 0 and result.stderr == ""


@pytest.mark.parametrize("args,said", [
    (["--heads", "2", "--qkv", "random"], note(400, "19.2 MB", 6)),
    (["--fields", "tokens,weights"], note(400, "3.2 MB", 1)),  # below: nothing
    (["--fields", "tokens,top"], None),
    (["--format", "table"], None),
    (["--rollout"], note(400, "16.0 MB", 5)),
])
def test_what_is_written_decides(args, said):
    result = run("scores", sentence(400), *args, env={"COLUMNS": "80"})
    said = "" if said is None or "3.2 MB" in said else said
    assert result.exit_code == 0 and result.stderr == said


def test_several_sentences_are_said_once_by_the_largest():
    text = "\n".join([sentence(5), sentence(450), sentence(420)]) + "\n"
    result = run("scores", "-", input=text)
    assert result.exit_code == 0 and result.stderr == note(450, "16.2 MB", 4, line=2)
    assert len(ok(result, stderr=None)) == 3


def test_explain_says_it_too():
    advice = "attncli scores --file DOC.txt streams a long text, a line a token"
    assert run("explain", sentence(400), "--json").stderr == ""  # 3 numbers a cell: 9.6 MB, below
    result = run("explain", sentence(420), "--json")
    assert result.exit_code == 0 and result.stderr == note(420, "10.6 MB", 3, advice)
    assert set(json.loads(result.stdout)["steps"]) >= {"scores", "scaled", "weights"}


def test_the_note_comes_before_the_work(monkeypatch):
    """The note is made before the sentence goes through attention, not after its document."""
    from attncli.documents import sentence as sentence_docs

    seen = []
    attend = sentence_docs.attend
    monkeypatch.setattr(sentence_docs, "attend", lambda *a, **kw: seen.append("attend") or attend(*a, **kw))
    monkeypatch.setattr("attncli.cli.inputs.click.echo",
                        lambda message, err=False: seen.append("note") if message.startswith("attncli: note") else None)
    result = run("scores", sentence(400), "--json")
    assert result.exit_code == 0 and seen == ["note", "attend"]


def test_heads_says_it_too_by_the_heads_it_writes():
    result = run("heads", sentence(400), "--qkv", "random", "--heads", "5", "--json")
    advice = "attncli scores --file DOC.txt streams a long text, a line a token"
    assert result.exit_code == 0 and result.stderr == note(400, "16.0 MB", 5, advice)
    assert 0.9 < len(result.stdout.encode()) / 16.0e6 < 1.1
    assert run("heads", sentence(400), "--json").stderr == ""  # one head: 3.2 MB


@pytest.mark.parametrize("command", ["scores", "explain", "heads"])
def test_a_mistake_in_the_options_is_the_one_line_with_no_note_before_it(command):
    fails(run(command, sentence(400), "--qkv", "random", "--heads", "4", "--json"),
          "--heads 4 does not divide d_k = 50", code=1)
