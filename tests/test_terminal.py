"""What attncli does when a person is at a terminal, checked with real processes on a
pseudo-terminal (tests/ptys.py): it asks before `vectors clear` removes anything."""

from __future__ import annotations

import json
import re

import pytest

import ptys
from clirunner import run

GOOD = "2 2\ncat 1 0\ndog 0 1\n"


@pytest.fixture()
def cache_with_an_entry(tmp_path):
    """An ATTNCLI_CACHE_DIR holding one entry; its environment."""
    (tmp_path / "good.txt").write_text(GOOD, encoding="utf-8")
    env = {"ATTNCLI_CACHE_DIR": str(tmp_path / "cache")}
    status, *_ = ptys.run(["vectors", "convert", tmp_path / "good.txt", "--json"], on_tty=(), env=env)
    assert status == 0
    assert len(entries(env)) == 1
    return env


def entries(env) -> list[dict]:
    result = run("vectors", "list", "--json", env=env)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("answer", [b"n\n", b"\n", b"no\n"])  # No is the default
def test_clear_on_a_terminal_asks_and_a_no_removes_nothing(cache_with_an_entry, answer):
    terminal = ptys.start(["vectors", "clear"], on_tty=("stdin",), env=cache_with_an_entry)
    terminal.type(answer)
    status, out, err, _ = terminal.finish(timeout=60)
    # the question on stderr (the answer echoed on the terminal ends its line there), then the error
    question, _, rest = err.decode().partition("? [y/N]: ")
    assert status == 1 and out == b""
    assert question.startswith("Remove the cache entry in ") and question.endswith("(1.5 kB)"), err
    assert rest.startswith("attncli: error: nothing removed") and rest.count("\n") == 1, err
    assert len(entries(cache_with_an_entry)) == 1


def test_clear_on_a_terminal_removes_on_yes(cache_with_an_entry):
    terminal = ptys.start(["vectors", "clear", "--json"], on_tty=("stdin",), env=cache_with_an_entry)
    terminal.type(b"y\n")
    status, out, err, _ = terminal.finish()
    assert status == 0, err
    assert json.loads(out)["removed"] == 1 and "[y/N]" in err.decode()
    assert entries(cache_with_an_entry) == []


@pytest.mark.parametrize("flag", ["--yes", "-y"])
def test_clear_with_yes_does_not_ask(cache_with_an_entry, flag):
    status, out, err, _ = ptys.run(["vectors", "clear", flag, "--json"], on_tty=("stdin",), env=cache_with_an_entry)
    assert status == 0 and err == b""
    assert json.loads(out)["removed"] == 1
    assert entries(cache_with_an_entry) == []


def test_clear_from_a_script_does_not_ask(cache_with_an_entry):
    result = run("vectors", "clear", "--json", env=cache_with_an_entry)  # standard input is no terminal
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout)["removed"] == 1


def test_clear_of_an_empty_cache_does_not_ask(tmp_path):
    env = {"ATTNCLI_CACHE_DIR": str(tmp_path / "cache")}
    status, out, err, _ = ptys.run(["vectors", "clear", "--json"], on_tty=("stdin",), env=env)
    assert status == 0 and err == b"" and json.loads(out)["removed"] == 0


# --------------------------------------------------------------------------- progress bars

CORPUS = "".join(f"the cat sat on mat number {n}\n" for n in range(40)).encode()
BAR = "━"


def test_batch_writes_no_bar_among_its_results_on_one_terminal():
    status, _, _, screen = ptys.run(["batch"], on_tty=("stdout", "stderr"), input=CORPUS)
    assert status == 0
    lines = ptys.plain(screen).splitlines()
    assert BAR not in screen and "lines" not in ptys.plain(screen).replace('"line"', "")
    assert [json.loads(line)["line"] for line in lines] == list(range(1, 41))


def test_batch_shows_its_bar_when_the_results_go_elsewhere():
    status, out, _, screen = ptys.run(["batch"], on_tty=("stderr",), input=CORPUS)
    assert status == 0 and len(out.splitlines()) == 40
    assert BAR in screen and "lines" in ptys.plain(screen)


def test_a_document_writes_no_bar_among_its_rows_on_one_terminal(tmp_path):
    (tmp_path / "doc.txt").write_bytes(CORPUS)
    status, _, _, screen = ptys.run(["scores", "--file", tmp_path / "doc.txt", "--json"], on_tty=("stdout", "stderr"))
    assert status == 0
    rows = [json.loads(line) for line in ptys.plain(screen).splitlines()]
    assert BAR not in screen and len(rows) == 40 * 7 and rows[0]["index"] == 0


# --------------------------------------------------------------------------- JSON for a person

SENTENCE = "The earth is like an orange"
HOSTILE = "the \x1b]0;owned\x07cat \x1b[2J sat \u202eon \x9b31m the\u200b mat \u2028 [bold]x[/bold]"


def piped(*args, input=None) -> list[dict]:
    result = run(*args, input=input)
    assert result.exit_code == 0, result.stderr
    assert all(line.startswith("{") for line in result.stdout.splitlines())
    return [json.loads(line) for line in result.stdout.splitlines()]


def documents(text: str) -> list[dict]:
    """Every JSON document in `text`, one after another (as jq reads them)."""
    decoder, docs, at = json.JSONDecoder(), [], 0
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)
    return docs


@pytest.mark.parametrize("args", [["scores", SENTENCE], ["context", SENTENCE, "--token", "orange"],
                                  ["explain", SENTENCE, "--token", "orange"], ["neighbors", "orange"]])
def test_json_on_a_terminal_is_laid_out_and_coloured(args):
    status, _, err, screen = ptys.run([*args, "--json"], on_tty=("stdout",))
    assert status == 0, err
    text = ptys.plain(screen)
    assert "\x1b[" in screen  # coloured
    assert text.startswith('{\n  "command": ') and text.count("\n") > 10
    assert documents(text) == piped(*args, "--json")  # the same document as piped, to the last digit


def test_json_on_a_terminal_lays_a_matrix_out_a_row_a_line():
    status, _, _, screen = ptys.run(["scores", SENTENCE, "--json"], on_tty=("stdout",))
    lines = ptys.plain(screen).splitlines()
    at = lines.index('  "weights": [')
    rows = lines[at + 1:at + 7]
    assert [json.loads(row.rstrip(",")) for row in rows] == piped("scores", SENTENCE, "--json")[0]["weights"]


@pytest.mark.parametrize("env,flag", [({"NO_COLOR": "1"}, []), ({}, ["--no-color"]), ({"TERM": "dumb"}, [])])
def test_json_on_a_terminal_without_colours_has_no_escape_sequence(env, flag):
    status, _, _, screen = ptys.run(["scores", SENTENCE, "--json", *flag], on_tty=("stdout",), env=env)
    assert status == 0 and "\x1b" not in screen
    assert documents(screen.replace("\r", "")) == piped("scores", SENTENCE, "--json")


def test_several_sentences_on_a_terminal_are_one_document_after_another():
    status, _, _, screen = ptys.run(["scores", "--json"], on_tty=("stdout",),
                                    input=b"the cat\nthe dog sat\n")
    assert status == 0
    assert documents(ptys.plain(screen)) == piped("scores", "--json", input="the cat\nthe dog sat\n")


@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1"}, {"PYTHONIOENCODING": "ascii"}])
def test_json_on_a_terminal_carries_no_character_a_terminal_acts_on(env):
    from attncli.visible import JSON_UNSAFE

    args = ["scores", HOSTILE, "--json", "--keep-punct", "--oov", "zero"]
    status, _, err, screen = ptys.run(args, on_tty=("stdout",), env=env)
    assert status == 0, err
    painted = re.sub(r"\x1b\[[0-9;]*m", "", screen)  # the colours attncli itself writes, and nothing else
    assert not [c for c in painted if (ord(c) < 32 and c not in "\r\n") or JSON_UNSAFE.match(c)], painted[:400]
    assert documents(painted.replace("\r", ""))[0]["sentence"] == HOSTILE  # exact, through the escapes
    if "PYTHONIOENCODING" in env:
        assert screen.isascii()
