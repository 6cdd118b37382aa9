"""What attncli does when a person is at a terminal, checked with real processes on a
pseudo-terminal (tests/ptys.py): it asks before `vectors clear` removes anything."""

from __future__ import annotations

import json

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
