"""What attncli does when a person is at a terminal, checked with real processes on a
pseudo-terminal (tests/ptys.py): it asks before `vectors clear` removes anything, draws no
progress bar among its results, lays JSON out for reading, and pages what does not fit."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

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
    assert question.startswith("Remove the cache entry in ") and question.endswith("(1.9 kB)"), err
    assert rest.startswith("attncli: error: nothing removed") and rest.count("\n") == 1, err
    assert len(entries(cache_with_an_entry)) == 1


def test_clear_at_the_end_of_the_input_is_a_no(cache_with_an_entry):
    terminal = ptys.start(["vectors", "clear"], on_tty=("stdin",), env=cache_with_an_entry)
    terminal.type(b"\x04")  # Ctrl-D: no answer at all
    status, out, err, _ = terminal.finish(timeout=60)
    lines = err.decode().splitlines()
    assert status == 1 and out == b"", err
    assert lines[-1].startswith("attncli: error: nothing removed") and "interrupted" not in err.decode()
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
    from attncli.views.json import JSON_UNSAFE

    args = ["scores", HOSTILE, "--json", "--keep-punct", "--oov", "zero"]
    status, _, err, screen = ptys.run(args, on_tty=("stdout",), env=env)
    assert status == 0, err
    painted = re.sub(r"\x1b\[[0-9;]*m", "", screen)  # the colours attncli itself writes, and nothing else
    assert not [c for c in painted if (ord(c) < 32 and c not in "\r\n") or JSON_UNSAFE.match(c)], painted[:400]
    assert documents(painted.replace("\r", ""))[0]["sentence"] == HOSTILE  # exact, through the escapes
    if "PYTHONIOENCODING" in env:
        assert screen.isascii()


# --------------------------------------------------------------------------- the pager

TALL = ["explain", SENTENCE, "--token", "orange"]  # 90-odd lines
SHORT = ["scores", "the cat"]

RECORDER = """
import json, os, sys
data = sys.stdin.buffer.read()
with open(sys.argv[1], "wb") as f:
    f.write(data)
with open(sys.argv[1] + ".json", "w") as f:
    json.dump({"LESS": os.environ.get("LESS"), "svg": os.path.exists(sys.argv[2]) if sys.argv[2:] else None,
               "tty": os.isatty(1)}, f)
"""


@pytest.fixture()
def recorder(tmp_path):
    """A pager that keeps what it is given: (its command line, a function giving what it
    got or None when it never ran, and what it saw of its environment)."""
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER, encoding="utf-8")
    out = tmp_path / "paged.txt"

    def got():
        if not out.exists():
            return None, None
        return out.read_bytes().decode(), json.loads(out.with_name("paged.txt.json").read_text())

    return shlex.join([sys.executable, str(script), str(out)]), got


def test_output_taller_than_the_terminal_goes_through_the_pager(recorder):
    line, got = recorder
    status, _, err, screen = ptys.run(TALL, on_tty=("stdout",), env={"ATTNCLI_PAGER": line}, rows=24)
    paged, seen = got()
    assert status == 0 and err == b""
    assert paged is not None and "\x1b[" in paged  # with its colours
    assert ptys.plain(paged).count("\n") > 24 and "the tokens' word vectors X" in ptys.plain(paged)
    assert seen == {"LESS": "FRX", "svg": None, "tty": True}  # less's options, when LESS is unset
    assert ptys.plain(screen).strip() == ""  # nothing written beside the pager


def test_output_that_fits_is_written_directly(recorder):
    line, got = recorder
    status, _, _, screen = ptys.run(SHORT, on_tty=("stdout",), env={"ATTNCLI_PAGER": line}, rows=40)
    assert status == 0 and got() == (None, None)
    assert "the" in ptys.plain(screen) and "cat" in ptys.plain(screen)


def test_json_taller_than_the_terminal_goes_through_the_pager(recorder):
    line, got = recorder
    status, _, _, _ = ptys.run(["scores", SENTENCE, "--json"], on_tty=("stdout",), env={"ATTNCLI_PAGER": line})
    paged, _ = got()
    assert status == 0 and documents(ptys.plain(paged)) == piped("scores", SENTENCE, "--json")


def test_lines_sets_the_height(recorder):
    line, got = recorder
    status, *_ = ptys.run(TALL, on_tty=("stdout",), env={"ATTNCLI_PAGER": line, "LINES": "500"}, rows=24)
    assert status == 0 and got() == (None, None)


@pytest.mark.parametrize("env", [
    {"ATTNCLI_PAGER": None, "PAGER": "{line}"},  # PAGER when ATTNCLI_PAGER is unset
    {"ATTNCLI_PAGER": "{line}", "PAGER": "cat"},  # ATTNCLI_PAGER first
    {"ATTNCLI_PAGER": "{line}", "LESS": "S"},  # a LESS of one's own is kept
])
def test_the_pager_comes_from_the_environment(recorder, env):
    line, got = recorder
    status, *_ = ptys.run(TALL, on_tty=("stdout",), env={k: v.format(line=line) for k, v in env.items()
                                                         if v is not None} | {k: None for k, v in env.items() if v is None})
    paged, seen = got()
    assert status == 0 and paged is not None
    assert seen["LESS"] == env.get("LESS", "FRX")


@pytest.mark.parametrize("env,flag", [
    ({"ATTNCLI_PAGER": "", "PAGER": "{line}"}, []),  # an empty ATTNCLI_PAGER: none
    ({"ATTNCLI_PAGER": None, "PAGER": "cat"}, []),  # PAGER=cat: none
    ({"ATTNCLI_PAGER": None, "PAGER": ""}, []),
    ({"ATTNCLI_PAGER": "{line}"}, ["--no-pager"]),
])
def test_no_pager(recorder, env, flag):
    line, got = recorder
    env = {k: None if v is None else v.format(line=line) for k, v in env.items()}
    status, _, _, screen = ptys.run([*TALL, *flag], on_tty=("stdout",), env=env)
    assert status == 0 and got() == (None, None)
    assert ptys.plain(screen).count("\n") > 24  # all of it, on the terminal


def test_never_a_pager_when_stdout_is_not_a_terminal(recorder):
    line, got = recorder
    status, out, _, _ = ptys.run([*TALL, "--format", "table"], on_tty=("stdin", "stderr"), env={"ATTNCLI_PAGER": line})
    assert status == 0 and got() == (None, None) and out.decode().count("\n") > 24


def test_pictures_are_written_before_the_pager_runs(recorder, tmp_path):
    line, got = recorder
    svg = tmp_path / "x.svg"
    status, *_ = ptys.run([*TALL, "--svg", svg], on_tty=("stdout",), env={"ATTNCLI_PAGER": f"{line} {shlex.quote(str(svg))}"})
    paged, seen = got()
    assert status == 0 and seen["svg"] is True and svg.read_text().startswith("<svg")


@pytest.mark.parametrize("pager", ["no-such-pager-anywhere", "'unbalanced", "/"])
def test_a_pager_that_cannot_run_is_a_warning_and_the_text_is_written(pager):
    status, _, err, screen = ptys.run(TALL, on_tty=("stdout",), env={"ATTNCLI_PAGER": pager})
    lines = err.decode().splitlines()
    assert status == 0
    assert len(lines) == 1 and lines[0].startswith("attncli: warning: cannot run the pager"), lines
    assert ptys.plain(screen).count("\n") > 24 and "Traceback" not in screen


def test_a_pager_quit_early_is_no_error(tmp_path):
    quits = shlex.join([sys.executable, "-c", "import sys; sys.stdin.buffer.read(10)"])
    status, _, err, screen = ptys.run(["explain", SENTENCE, "--json"], on_tty=("stdout",),
                                      env={"ATTNCLI_PAGER": quits})
    assert status == 0 and err == b"" and "Broken" not in screen and "Traceback" not in screen


@pytest.mark.skipif(shutil.which("less") is None, reason="no less")
def test_less_by_default_and_q_quits_it():
    terminal = ptys.start(TALL, on_tty=("stdin", "stdout", "stderr"), env={"ATTNCLI_PAGER": None, "PAGER": None},
                          rows=24)
    terminal.wait_for("the tokens' word vectors X")  # less shows the first screen, and waits
    assert terminal.proc.poll() is None
    terminal.type(b"\x03")  # Ctrl-C is less's while it runs: attncli goes on waiting
    time.sleep(0.5)
    assert terminal.proc.poll() is None
    terminal.type(b"q")
    status, _, _, screen = terminal.finish(timeout=60)
    assert status == 0
    assert "Traceback" not in screen and "Broken pipe" not in screen and "error" not in ptys.plain(screen)


def test_a_pager_that_fails_is_an_error_not_a_silent_success():
    status, _, err, _ = ptys.run(TALL, on_tty=("stdout",), env={"ATTNCLI_PAGER": "false"})
    lines = err.decode().splitlines()
    assert status == 1
    assert len(lines) == 1 and lines[0].startswith("attncli: error: the pager 'false' ended with status 1"), lines
    assert "--no-pager" in lines[0]


def test_a_pager_ended_by_ctrl_c_ends_the_run_as_ctrl_c_does(tmp_path):
    dies = shlex.join([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGINT)"])
    status, _, err, _ = ptys.run(TALL, on_tty=("stdout",), env={"ATTNCLI_PAGER": dies})
    assert status == 130 and err.decode().strip().endswith("attncli: interrupted"), err


def test_no_pager_on_a_dumb_terminal(recorder):
    line, got = recorder
    status, _, _, screen = ptys.run(TALL, on_tty=("stdout",), env={"ATTNCLI_PAGER": line, "TERM": "dumb"})
    assert status == 0 and got() == (None, None)
    assert ptys.plain(screen).count("\n") > 24


def test_batch_counts_a_files_lines_for_its_bar(tmp_path):
    """Read a line at a time, batch knows a file's end only by counting its lines first,
    which it does only where the bar is drawn: there it shows how many of them."""
    (tmp_path / "corpus.txt").write_bytes(CORPUS * 5)
    status, out, _, screen = ptys.run(["batch", tmp_path / "corpus.txt"], on_tty=("stderr",))
    assert status == 0 and len(out.splitlines()) == 200
    assert BAR in screen and "/200" in ptys.plain(screen).replace(",", "")


def ctrl_c(terminal) -> tuple[int, float]:
    """Ctrl-C typed at the terminal: the run's status and the seconds it took to end (within
    30, else it and its session are killed, and the test fails on its status)."""
    terminal.type(b"\x03")
    typed = time.monotonic()
    try:
        status = terminal.proc.wait(timeout=30)
    finally:
        took = time.monotonic() - typed
        if terminal.proc.poll() is None:  # it went on: end it, and fail
            for pid in [terminal.proc.pid, *ptys.in_session(terminal.proc.pid)]:
                os.kill(pid, signal.SIGKILL)
    return status, took


@pytest.mark.parametrize("command", ["batch", "stats"])
def test_ctrl_c_typed_at_a_run_on_two_workers_gives_the_terminal_back(tmp_path, command):
    """A user's Ctrl-C (the terminal's line discipline sends SIGINT to its foreground group)
    while the bar is drawn on stderr's terminal and the results go to a file: exit 130 at
    once, the bar gone, the cursor shown again, the settings as they were, no process left."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"the earth is like an orange\n" * 200_000)
    with open(tmp_path / "out", "wb") as stdout:
        terminal = ptys.start([command, corpus, "--jobs", "2"], on_tty=("stderr",), stdout=stdout)
        terminal.wait_for("lines/s")  # the bar, as the workers send their results
        time.sleep(0.5)
        status, took = ctrl_c(terminal)
    terminal.finish()
    assert status == 130 and took < 3
    assert terminal.after == terminal.before and terminal.modes_left() == {}
    shown = [line for line in terminal.shown() if line]
    assert shown == ["attncli: interrupted"], shown  # the bar erased, the echoed ^C with it
    assert ptys.none_left(terminal.proc.pid) == []


@pytest.mark.parametrize("command", ["batch", "stats"])
def test_ctrl_c_typed_again_while_the_run_ends_is_ignored(tmp_path, command):
    """Ctrl-C three times, 50 ms apart: the first ends the run, the others come while its
    workers are stopped and its last line written, and are ignored (they once turned the end
    into a traceback, one run in four). Tried five times: exit 130 and one line each time."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"the earth is like an orange\n" * 200_000)
    for _ in range(5):
        with open(tmp_path / "out", "wb") as stdout:
            terminal = ptys.start([command, corpus, "--jobs", "2"], on_tty=("stderr",), stdout=stdout)
            terminal.wait_for("lines")
            for _ in range(2):
                terminal.type(b"\x03")
                time.sleep(0.05)
            status, took = ctrl_c(terminal)
        _, _, err, _ = terminal.finish()
        assert status == 130 and took < 5, (status, terminal.screen)
        assert "Traceback" not in terminal.screen.decode("utf-8", "replace") and err == b""
        # the terminal echoes a ^C typed after the last line: attncli says one line
        assert [line for line in terminal.shown() if line.strip("^C")] == ["attncli: interrupted"], terminal.shown()
        assert ptys.none_left(terminal.proc.pid) == []


@contextlib.contextmanager
def batch_on_two_workers(tmp_path, source: str):
    """`batch --jobs 2`, its bar on the terminal, its results in a file, reading a corpus
    file (once its bar is drawn), or a pipe that has given some lines and then nothing more
    (a producer that has paused: once the results stop coming, the main thread waits in its
    read of the next line). The test ends it (or, when it has not ended, it and its
    session are killed, and the test fails on its status)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"the earth is like an orange\n" * 200_000)
    read, write = os.pipe()
    with open(tmp_path / "out", "wb") as stdout:
        args = ["batch", corpus, "--jobs", "2"] if source == "a file" else ["batch", "--jobs", "2"]
        terminal = ptys.start(args, on_tty=("stderr",), stdout=stdout, stdin=read)
    os.close(read)
    try:
        if source == "a file":
            terminal.wait_for("lines/s")
        else:
            os.write(write, b"the earth is like an orange\n" * 2_000)
            deadline, written = time.monotonic() + 60, [-1]
            while written[-5:] != [written[-1]] * 5 or written[-1] <= 0:  # the same size for half a second
                assert time.monotonic() < deadline and terminal.proc.poll() is None, terminal.screen
                time.sleep(0.1)
                written.append((tmp_path / "out").stat().st_size)
        time.sleep(0.2)
        yield terminal
    finally:
        if terminal.proc.poll() is None:
            for pid in [terminal.proc.pid, *ptys.in_session(terminal.proc.pid)]:
                os.kill(pid, signal.SIGKILL)
        os.close(write)
        terminal.finish()


def ended_by_ctrl_c(terminal, took: float) -> None:
    """Exit 130 within 10 s, the one line, the terminal as it was, no process left."""
    assert terminal.proc.returncode == 130 and took < 10, (terminal.proc.returncode, took)
    assert terminal.after == terminal.before and terminal.modes_left() == {}
    assert [line for line in terminal.shown() if line] == ["attncli: interrupted"], terminal.shown()
    assert ptys.none_left(terminal.proc.pid) == []


def waited(proc, seconds: float) -> float:
    """The seconds `proc` took to end, within `seconds` (else `seconds`)."""
    begun = time.monotonic()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=seconds)
    return time.monotonic() - begun


@pytest.mark.parametrize("source,times", [("a file", 1), ("an idle pipe", 3)])
def test_ctrl_c_to_a_run_stopped_then_continued_ends_it(tmp_path, source, times):
    """A Ctrl-C that reaches the run while it is stopped, its workers going on (SIGSTOP to it,
    SIGINT to its whole group, SIGCONT half a second later: an order a terminal's Ctrl-C may
    take): the signal then goes to whichever thread of the run is scheduled first, numpy's
    or rich's as well as the main one. Reading a pipe that gives nothing more, the main
    thread waited in its read for ever when another thread took the signal: 4 runs in 8
    before that was mended (ending._relayed), so this tries it three times, about 2 s a run;
    test_ctrl_c_that_another_thread_takes_ends_the_run gives the signal to each other thread."""
    for _ in range(times):
        with batch_on_two_workers(tmp_path, source) as terminal:
            os.kill(terminal.proc.pid, signal.SIGSTOP)
            os.killpg(terminal.proc.pid, signal.SIGINT)
            time.sleep(0.5)
            os.kill(terminal.proc.pid, signal.SIGCONT)
            took = waited(terminal.proc, 10)
        ended_by_ctrl_c(terminal, took)


TGKILL = {"x86_64": 234, "aarch64": 131}  # the system call that sends a signal to one thread of another process


@pytest.mark.skipif(os.uname().machine not in TGKILL, reason="tgkill's number is known here for x86_64 and aarch64")
def test_ctrl_c_that_another_thread_takes_ends_the_run(tmp_path):
    """SIGINT given to each thread of the run but the main one that can take it (numpy's
    BLAS thread, rich's bar), as the kernel gives a process's signal to any of its threads
    that does not block it, while the main thread waits in a read from an idle pipe: Python
    runs a handler only in the main thread, which the read kept from it for ever (the run
    went on until killed, each time, before ending._relayed sent the signal on)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    tried = 0
    while True:
        with batch_on_two_workers(tmp_path, "an idle pipe") as terminal:
            pid = terminal.proc.pid
            takers = sorted(tid for tid in map(int, os.listdir(f"/proc/{pid}/task"))
                            if tid != pid and not _blocks(pid, tid, signal.SIGINT))
            assert len(takers) > tried, takers  # numpy's BLAS and rich's threads at least
            assert libc.syscall(TGKILL[os.uname().machine], pid, takers[tried], signal.SIGINT) == 0
            took = waited(terminal.proc, 10)
        ended_by_ctrl_c(terminal, took)
        tried += 1
        if tried == len(takers):
            break


def _blocks(pid: int, tid: int, signum: int) -> bool:
    """Whether thread `tid` of process `pid` blocks `signum` (/proc's SigBlk mask)."""
    for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def test_a_terminal_that_takes_nothing_does_not_hold_a_ctrl_c(tmp_path):
    """The bar is redrawn from a thread of rich's, which a write to a terminal that takes
    nothing (its reader stalled) would hold for ever, holding the lock its stop waits for:
    the bar drops what the terminal cannot take, and the end waits half a second at most."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"the earth is like an orange\n" * 200_000)
    out = tmp_path / "out"
    with open(out, "wb") as stdout:
        terminal = ptys.start(["batch", corpus, "--jobs", "2", "--fields", "line"], on_tty=("stderr",), stdout=stdout,
                              reading=False)
        deadline = time.monotonic() + 60
        while out.stat().st_size < 10_000 and time.monotonic() < deadline:  # the bar is drawn meanwhile
            time.sleep(0.05)
        terminal.stall()
        time.sleep(1)  # the bar's next frames meet a full terminal
        status, took = ctrl_c(terminal)
    terminal.read()
    terminal.finish()
    assert status == 130 and took < 3
    assert ptys.none_left(terminal.proc.pid) == []


# --------------------------------------------------------------------------- any width

LONG = " ".join(["the", "earth", "is", "like", "an", "orange", "and", "the", "moon"] * 4)  # 36 tokens
TWENTY_FOUR = ("the cat sat on a mat while dog was sleeping under old wooden table near warm quiet fire burning "
               "bright in house of my")  # a grid by position, with its key, at 80 columns
TEN = ["I ate an orange", "an orange car", SENTENCE, "orange juice is sweet", "orange is a colour", "the orange sky",
       "a big orange", "orange peel", "paint it orange", "one orange"]
# long words, MiniLM's pieces of them longer than a label of the heads' pictures holds
LONG_WORDS = "the telecommunications responsibilities of international representatives and their characteristics"
PROBE = ["--steps", "40", "--batch", "32", "--out-vocab", "25", "--probe", "the cat sat on a mat|the dog sat in the park",
         "--token", "sat"]
GPT2 = Path(__file__).parent / "data" / "models" / "tiny-gpt2"
DISTILBERT = Path(__file__).parent / "data" / "models" / "tiny-distilbert"
VIEWS = {  # name: the command whose views are drawn (--format table), {tmp} a folder of the test's
    "scores": ["scores", SENTENCE], "scores --raw": ["scores", SENTENCE, "--raw"],
    "scores --rollout": ["scores", SENTENCE, "--rollout"], "scores --norms": ["scores", SENTENCE, "--norms"],
    "scores of heads, masked": ["scores", SENTENCE, "--raw", "--heads", "2", "--qkv", "random", "--mask", "causal"],
    "scores of a long sentence": ["scores", LONG], "scores --model": ["scores", SENTENCE, "--model", "minilm"],
    "scores --words": ["scores", SENTENCE, "--model", "minilm", "--words"],
    "context": ["context", SENTENCE, "--token", "orange"], "context --all": ["context", SENTENCE, "--all"],
    "compare": ["compare", SENTENCE, "Orange is a bright color", "--token", "orange"],
    "compare --model": ["compare", SENTENCE, "Orange is a bright color", "--token", "orange", "--model", "minilm"],
    "neighbors": ["neighbors", "orange"], "neighbors --context": ["neighbors", "orange", "--context", SENTENCE],
    "explain": ["explain", SENTENCE, "--token", "orange"], "heads": ["heads", SENTENCE, "--model", "minilm"],
    "scores of a decoder": ["scores", SENTENCE, "--model", "{gpt2}", "--predict", "5"],
    "context of a decoder": ["context", SENTENCE, "--token", "orange", "--model", "{gpt2}", "--predict", "3"],
    "heads of a decoder": ["heads", SENTENCE, "--model", "{gpt2}"],
    "explain of a decoder": ["explain", SENTENCE, "--model", "{gpt2}", "--token", "orange"],
    "stats of a decoder": ["stats", "{tmp}/corpus.txt", "--model", "{gpt2}"],
    "faithfulness of a decoder": ["faithfulness", "{tmp}/corpus.txt", "--model", "{gpt2}"],
    "rnn": ["rnn", SENTENCE], "stats": ["stats", "{tmp}/corpus.txt"], "stats --by word": ["stats", "{tmp}/corpus.txt", "--by", "word"],
    "train": ["train", "{tmp}/corpus.txt", "-o", "{tmp}/p.npz", *PROBE], "qkv init": ["qkv", "init", "-o", "{tmp}/q.npz"],
    "vectors info": ["vectors", "info"], "vectors list": ["vectors", "list"], "vectors clear": ["vectors", "clear", "--yes"],
    "explain --model --head": ["explain", SENTENCE, "--model", "minilm", "--layer", "1", "--head", "3", "--token", "orange"],
    "explain --model": ["explain", SENTENCE, "--model", "minilm", "--token", "orange"],
    "explain of a long sentence": ["explain", TWENTY_FOUR, "--token", "fire"],
    "stats of an encoder": ["stats", "{tmp}/marked.txt", "--model", "{distilbert}", "--importance"],
    "stats --document of a decoder": ["stats", "{tmp}/document.txt", "--model", "{gpt2}", "--document"],
    "stats --document of an encoder": ["stats", "{tmp}/document.txt", "--model", "{distilbert}", "--document"],
    "compare of ten sentences": ["compare", *TEN, "--token", "orange"],
    "contributions": ["contributions", SENTENCE, "--model", "minilm"],
    "heads of long words": ["heads", LONG_WORDS, "--model", "minilm", "--layer", "1"],
    "scores of long words": ["scores", LONG_WORDS, "--top-k", "5"],
    "context of long words": ["context", LONG_WORDS, "--token", "international"],
}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """name: (documents, view, its arguments) of each of VIEWS, as the command hands them to emit."""
    from attncli.cli import output

    tmp = tmp_path_factory.mktemp("views")
    words = "the cat sat on a mat and the dog ran to the park while a bird sang in the tree".split()
    (tmp / "corpus.txt").write_text("".join(" ".join(words[k:] + words[:k]) + "\n" for k in range(len(words))) * 8)
    (tmp / "marked.txt").write_text("The earth is like an orange, and the moon is grey.\nA cat sat on the mat; the cat "
                                    "sat!\nWhy is the sky blue? The sky is blue.\n")
    (tmp / "document.txt").write_text("The earth is like an orange, and the moon is grey.\nA cat sat on the mat.\n")
    caught = {}
    with pytest.MonkeyPatch.context() as patch:
        for name, args in VIEWS.items():
            patch.setattr(output, "_draw", lambda docs, out, view, view_args, name=name:
                          caught.setdefault(name, (docs, view, view_args)))
            result = run(*(a.format(tmp=tmp, gpt2=GPT2, distilbert=DISTILBERT) for a in args), "--format", "table",
                         env={"ATTNCLI_CACHE_DIR": str(tmp / "cache")})
            assert result.exit_code == 0 and name in caught, (name, result.stderr)
    return caught


@contextlib.contextmanager
def within(seconds: float, what: str):
    """A block that fails, rather than hangs, past `seconds`."""
    def late(signum, frame):
        raise AssertionError(f"{what}: still drawing after {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("name", VIEWS)
def test_every_view_draws_within_any_width_in_bounded_time(drawn, name):
    """Each view of each command at every width from 0 to 40 columns, without colour and in
    full colour (its legends): drawn within 10 s, no line wider than the width, and from
    the narrowest a command draws at (MIN_WIDTH) on, something drawn."""
    from rich.cells import cell_len
    from rich.console import Console

    from attncli import views
    from attncli.cli import output
    from attncli.visible import visible_all

    docs, view, args = drawn[name]
    for colours in (None, "truecolor"):
        for width in range(0, 41):
            screen = Console(file=io.StringIO(), width=width, color_system=colours, force_terminal=colours is not None,
                             markup=False, emoji=False, highlight=False)
            with within(10, f"{name} at {width} columns"):
                for doc in visible_all(docs):
                    screen.print(views.view(view)(doc, width=screen.width, color_system=colours, **args))
            lines = ptys.plain(screen.file.getvalue()).split("\n")
            assert max(map(cell_len, lines)) <= width, (name, width)
            assert width < output.MIN_WIDTH or "".join(lines).strip(), (name, width)  # the narrowest drawn


def tokens_of(doc: dict) -> list[str]:
    """The tokens a document's view lists, each of them: a sentence's (compare's gives its
    sentences whole and each one's top attended, not every token)."""
    return doc["tokens"] if isinstance(doc.get("tokens"), list) and doc.get("command") != "compare" else []


@pytest.mark.parametrize("width", [80, 100, 120, 200])
@pytest.mark.parametrize("name", VIEWS)
def test_every_view_keeps_every_number_and_token_whole_from_80_columns(drawn, name, width):
    """From 80 columns on, nothing is cut to "…": a "…" stands alone where columns or values
    are left out (an abridged vector, a token written downwards too long, whose row carries it),
    or ends a token's label whose whole token the view gives too (the heads' pictures); never
    after a number. Every token the document holds is shown whole."""
    from rich.console import Console

    from attncli import views
    from attncli.visible import visible_all

    docs, view, args = drawn[name]
    screen = Console(file=io.StringIO(), width=width, color_system=None, markup=False, emoji=False, highlight=False)
    for doc in visible_all(docs):
        screen.print(views.view(view)(doc, width=width, color_system=None, **args))
    text = screen.file.getvalue()
    assert max(map(len, text.splitlines())) <= width, name
    tokens = [t for doc in visible_all(docs) for t in tokens_of(doc)]
    shown = " ".join(text.split())
    for doc in visible_all(docs):  # a token is not shown by the sentence it is a word of
        if isinstance(doc.get("sentence"), str):
            shown = shown.replace(" ".join(doc["sentence"].split()), "", 1)

    def whole(token: str) -> bool:
        return re.search(rf"(?<!\S){re.escape(token)}(?!\S)", shown) is not None or token in shown

    for cut in re.finditer(r"(\S+)…", text):
        shortened = cut.group(1)
        assert not re.search(r"\d$", shortened), (name, width, cut.group(0))  # never a number
        assert any(t.startswith(shortened) and t != shortened and whole(t) for t in tokens), (name, cut.group(0))
    assert all(whole(t) for t in tokens), (name, width, [t for t in tokens if not whole(t)])


@pytest.mark.parametrize("columns,lines,size", [
    ("0", "0", (132, 43)), ("-5", "", (132, 43)), ("wide", "tall", (132, 43)), ("", None, (132, 43)),
    (None, None, (132, 43)), ("٣", "٣", (132, 43)),  # an Arabic-Indic 3: a digit to Python, no number to a shell
    ("1", "2", (1, 2)), ("40", "10", (40, 10)), ("99999999999999999999", "7", (99999999999999999999, 7)),
])
def test_the_terminal_size_takes_whole_numbers_above_0_else_the_terminals(monkeypatch, columns, lines, size):
    from attncli.cli import output

    monkeypatch.setattr(output.os, "get_terminal_size", lambda fd: os.terminal_size((132, 43)))
    for name, value in (("COLUMNS", columns), ("LINES", lines)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert output.terminal_size(io.StringIO()) == size
    assert output.make_console(io.StringIO()).width == output.drawn_width(size[0]) == min(max(size[0], 20), 1000)


def test_a_terminal_that_knows_no_size_is_80_by_25(monkeypatch):
    from attncli.cli import output

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    monkeypatch.setattr(output.os, "get_terminal_size", lambda fd: os.terminal_size((0, 0)))  # a new pty says 0 x 0
    assert output.terminal_size(io.StringIO()) == (80, 25)


@pytest.mark.parametrize("columns", ["0", "-1", "wide"])
def test_columns_that_is_no_width_draws_at_the_terminals_own(columns):
    """COLUMNS=0 (or -1, or a word) on a terminal of 100 x 60: the views are drawn at its
    100 columns (rich took 0, and the floor made it 20: a picture five times as tall, paged)."""
    status, _, _, screen = ptys.run(["context", SENTENCE, "--token", "orange"], rows=60, cols=100,
                                    env={"COLUMNS": columns, "ATTNCLI_PAGER": None, "PAGER": None})
    widths = [len(line) for line in ptys.plain(screen).split("\n")]
    assert status == 0 and 60 < max(widths) <= 100, max(widths)


@pytest.mark.parametrize("args", [["scores", SENTENCE], TALL, ["scores", SENTENCE, "--json"]])
def test_a_terminal_of_one_column_is_written_to_not_paged(args):
    """A terminal 1 column wide (`stty cols 1`): the views are drawn at 20 columns, which it
    wraps, and never paged (less would show a character a line, and wait for a key)."""
    status, _, err, screen = ptys.run(args, rows=24, cols=1, env={"ATTNCLI_PAGER": None, "PAGER": None})
    assert status == 0 and err == b"" and "orange" in ptys.plain(screen).replace("\n", "")


@pytest.mark.parametrize("columns", ["0", "1"])
@pytest.mark.parametrize("path", ["help", "a progress bar"])
def test_columns_0_or_1_on_a_terminal_ends_within_its_width(tmp_path, columns, path):
    """COLUMNS=0 or 1 on a terminal of 100 x 24, less as the pager, through the ways a width
    is taken besides a view's (test_columns_that_is_no_width_draws_at_the_terminals_own): the
    help, and a progress bar on the terminal while the results go to a file. It ends in 30 s,
    exit 0, nothing wider than the terminal; COLUMNS=0 is the terminal's own width (the
    help, taller than the terminal, is paged, and q ends the pager), COLUMNS=1 is narrower
    than anything is drawn at (the help is written, the bar fitted to 20 columns)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"the earth is like an orange\n" * 3_000)
    env = {"COLUMNS": columns, "ATTNCLI_PAGER": None, "PAGER": None}
    with open(tmp_path / "out", "wb") as stdout:
        terminal = (ptys.start(["context", "--help"], env=env) if path == "help"
                    else ptys.start(["batch", corpus], on_tty=("stderr",), stdout=stdout, env=env))
    if path == "help" and columns == "0":
        terminal.wait_for("Usage: attncli context")
        terminal.type(b"q")
    status, _, _, screen = terminal.finish(timeout=30)
    frames = re.split(r"[\r\n]", ptys.ANSI.sub("", screen))  # each line, and each frame of the bar
    drawn = 100 if columns == "0" or path == "help" else 20  # the terminal's width, or the narrowest drawn
    assert status == 0 and max(map(len, frames)) <= drawn, (status, max(map(len, frames)))
    if path == "a progress bar":
        assert any("3000/3000" in frame for frame in frames)
        assert len((tmp_path / "out").read_bytes().splitlines()) == 3_000
        assert (BAR in screen) == (columns == "0")  # 20 columns leave no room for the bar itself



def help_on_a_terminal(*args) -> str:
    """The help as the terminal of ptys.run shows it when it fits (100 columns)."""
    status, _, _, screen = ptys.run(args, on_tty=("stdout",), env={"ATTNCLI_PAGER": ""}, rows=500)
    assert status == 0
    return ptys.plain(screen)


@pytest.mark.parametrize("args", [["scores", "--help"], ["help", "scores"], ["scores", "-h"], ["vectors", "--help"]])
def test_help_taller_than_the_terminal_goes_through_the_pager(recorder, args):
    line, got = recorder
    status, _, err, screen = ptys.run(args, on_tty=("stdout",), env={"ATTNCLI_PAGER": line}, rows=10)
    paged, seen = got()
    assert status == 0 and err == b""
    assert paged == help_on_a_terminal(*args)  # the very help a terminal that fits it gets
    assert paged.startswith(f"Usage: attncli {args[-1] if args[0] == 'help' else args[0]} ") and paged.count("\n") > 10
    assert seen["LESS"] == "FRX" and seen["tty"] is True
    assert ptys.plain(screen).strip() == ""  # nothing written beside the pager


def test_help_that_fits_is_written_directly(recorder):
    line, got = recorder
    status, _, _, screen = ptys.run(["vectors", "--help"], on_tty=("stdout",), env={"ATTNCLI_PAGER": line}, rows=200)
    assert status == 0 and got() == (None, None)
    assert ptys.plain(screen) == help_on_a_terminal("vectors", "--help")


@pytest.mark.parametrize("env", [{"ATTNCLI_PAGER": ""}, {"ATTNCLI_PAGER": None, "PAGER": "cat"}])
def test_help_is_not_paged_when_paging_is_off(recorder, env):
    line, got = recorder
    status, _, _, screen = ptys.run(["scores", "--help"], on_tty=("stdout",), env={"PAGER": line, **env}, rows=10)
    assert status == 0 and got() == (None, None)
    assert ptys.plain(screen) == help_on_a_terminal("scores", "--help")


def test_help_piped_is_never_paged(recorder):
    line, got = recorder
    status, out, _, _ = ptys.run(["scores", "--help"], on_tty=("stdin", "stderr"), env={"ATTNCLI_PAGER": line}, rows=10)
    assert status == 0 and got() == (None, None)
    assert out.decode() == help_on_a_terminal("scores", "--help")
