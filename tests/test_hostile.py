"""attncli under attack, class by class: nothing lost, nothing injected, bounded memory,
signals and closed or full streams, a hostile environment.

Each class is held for every command or path it concerns, not only for the example that
found it. Where the environment matters (descriptors, signals, locale, limits) attncli runs
as the installed program in a subprocess; elsewhere through CliRunner.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from clirunner import CLEAN_ENV, fails, one, ok, run
from ptys import in_session, none_left, stat_fields

pytestmark = pytest.mark.usefixtures("cache")

ENTRY_POINT = Path(sys.executable).parent / "attncli"
SENTENCE = "The earth is like an orange"

# What must never reach a terminal, an SVG or an HTML page raw: ESC (CSI, OSC, reset), BEL,
# NUL, the 8-bit CSI, a bidi override, a line separator.
RAW = ["\x1b", "\x07", "\x00", "\x9b", "\u202e", "\u2028"]
HOSTILE = [
    "the \x1b]0;pwned\x07 cat",  # OSC: retitles the terminal
    "the \x1b[2J cat \x1bc",  # clear screen, reset
    "the \x9b31m cat",  # 8-bit CSI
    "the \x1b]8;;http://evil\x1b\\cat\x1b]8;;\x1b\\ dog",  # an OSC 8 hyperlink
    "the \u202ecat dog",  # bidi override
    "the cat\x00 dog",
]
MARKUP = ["the [/x] cat", "the [bold]cat[/bold] dog", "the [link=javascript:alert(3)]cat[/link] dog",
          '[link=x"/onmouseover="alert(1)]cat dog']


def process(*args, env=None, input=None, timeout=60, **kw) -> subprocess.CompletedProcess:
    """The installed attncli as a real process, with a clean environment."""
    base = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    base["PYTHONUTF8"] = "1"
    return subprocess.run([str(ENTRY_POINT), *map(str, args)], capture_output=True, env={**base, **(env or {})},
                          input=input, timeout=timeout, **kw)


def one_error_line(stderr: bytes | str) -> str:
    text = stderr.decode() if isinstance(stderr, bytes) else stderr
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: error: "), text
    assert "Traceback" not in text
    return lines[0]


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def no_links_or_handlers(svg: str, page: str) -> None:
    """The pictures parse (SVG as XML, HTML as HTML) and hold no link, script or event
    handler: what came from user text is only ever text in them."""
    root = ElementTree.fromstring(svg)
    for element in root.iter():
        assert not element.tag.endswith(("}a", "}script")), element.tag
        for name in element.attrib:
            assert not name.lower().startswith("on") and "href" not in name.lower(), name
    parser = _Tags()
    parser.feed(page)
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]  # the page's own two: its data, its code
    assert scripts == [[("type", "application/json"), ("id", "attncli-data")], []], scripts
    for tag, attrs in parser.tags:
        assert tag not in ("a", "iframe", "img", "object", "embed", "link"), tag
        for name, _ in attrs:
            assert not name.lower().startswith("on") and name.lower() not in ("href", "src"), name


def no_raw_control(*texts: str) -> None:
    for text in texts:
        for c in RAW:
            assert c not in text, (c, text[:300])


@pytest.fixture(scope="module")
def hostile_vectors(tmp_path_factory) -> Path:
    """A GloVe file whose words are attacks on a terminal, rich markup and an HTML page."""
    folder = tmp_path_factory.mktemp("hostile")
    words = ["the", "cat", "dog", "[/x]", "[reverse]", "[link=javascript:alert(3)]", '[link=x"/onmouseover="alert(1)]',
             "\x1b]0;owned\x07", "\x9b2J", "\u202eevil", ":smile:"]
    rng = np.random.default_rng(0)
    lines = [f"{w} " + " ".join(f"{x:.4f}" for x in rng.normal(size=4)) for w in words]
    path = folder / "[bold]vectors\x1b[31m.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- 1. nothing lost


@pytest.mark.parametrize("option,name", [("--html", "v.html"), ("--svg", "v.svg"), ("--png", "v.png")])
def test_a_picture_onto_the_vectors_file_is_refused_and_the_file_kept(tmp_path, option, name):
    vectors = tmp_path / name
    vectors.write_text("cat 1 0\ndog 0 1\n")
    before = vectors.read_bytes()
    fails(run("scores", "cat dog", "--vectors", vectors, option, vectors), "same file", "--vectors", code=2)
    assert vectors.read_bytes() == before


def test_every_output_onto_every_input_is_refused(tmp_path):
    vectors = tmp_path / "v.npz"
    vectors.write_text("\n".join(f"w{i} " + " ".join(["0.1"] * 50) for i in range(3)) + "\n")
    fails(run("qkv", "init", "-o", vectors, "--force", "--vectors", vectors), "same file", "--vectors", code=2)
    proj = tmp_path / "p.svg"  # projections under any name
    with open(proj, "wb") as f:
        np.savez(f, W_query=np.ones((50, 4)), W_key=np.ones((50, 4)), W_value=np.ones((50, 4)))
    weights = tmp_path / "w.html"
    with open(weights, "wb") as f:
        np.savez(f, W_hx=np.ones((2, 50)), W_hh=np.ones((2, 2)), b_h=np.ones(2))
    before = proj.read_bytes(), weights.read_bytes(), vectors.read_bytes()
    fails(run("scores", "the cat", "--qkv", proj, "--svg", proj), "same file", "--qkv", code=2)
    fails(run("rnn", "the cat", "--weights", weights, "--html", weights), "same file", "--weights", code=2)
    fails(run("qkv", "init", "-o", tmp_path / "x.svg", "--svg", tmp_path / "x.svg"), "same file", code=2)
    assert (proj.read_bytes(), weights.read_bytes(), vectors.read_bytes()) == before


def test_an_output_that_is_standard_input_or_output_is_refused(tmp_path):
    target = tmp_path / "out.svg"
    target.write_text("keep")
    with open(target, "rb") as stdin:
        proc = process("scores", "-", "--svg", target, stdin=stdin)
    assert proc.returncode == 2 and "standard input" in one_error_line(proc.stderr)
    with open(target, "ab") as stdout:
        proc = subprocess.run([str(ENTRY_POINT), "scores", SENTENCE, "--svg", str(target)], stdout=stdout,
                              stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode == 2 and "standard output" in one_error_line(proc.stderr)
    assert target.read_text() == "keep"


@pytest.mark.parametrize("kind", ["fifo", "dir", "device"])
def test_what_is_not_a_regular_file_is_never_replaced(tmp_path, kind):
    if kind == "fifo":
        target = tmp_path / "t.svg"
        os.mkfifo(target)
    elif kind == "dir":
        target = tmp_path / "t.svg"
        target.mkdir()
    else:
        target = Path("/dev/null")
    for args in (["qkv", "init", "-o", target, "--force"], ["scores", SENTENCE, "--svg", target]):
        if kind == "device" and args[0] == "scores":
            continue  # /dev/null does not end in .svg
        fails(run(*args), str(target), "give another path", code=1)  # a place that cannot be written: an error
    mode = os.stat(target).st_mode
    assert {"fifo": stat.S_ISFIFO, "dir": stat.S_ISDIR, "device": stat.S_ISCHR}[kind](mode)


def test_a_symlinked_output_replaces_its_target_and_keeps_the_link(tmp_path):
    real = tmp_path / "real.svg"
    real.write_text("old")
    link = tmp_path / "link.svg"
    link.symlink_to(real)
    ok(run("scores", SENTENCE, "--svg", link, "--json"))
    assert link.is_symlink() and "<svg" in real.read_text()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".attncli-")]


# --------------------------------------------------------------------------- 2. nothing injected


@pytest.mark.parametrize("sentence", HOSTILE + MARKUP)
@pytest.mark.parametrize("command", ["scores", "context", "explain", "compare", "neighbors", "rnn", "contributions"])
def test_text_from_outside_reaches_no_terminal_svg_or_html_raw(tmp_path, command, sentence):
    text = f"{sentence} orange"  # a word every command can follow
    args = {
        "scores": ["scores", text], "context": ["context", text, "--token", "orange"],
        "explain": ["explain", text, "--token", "orange"],
        "compare": ["compare", text, f"an orange and {sentence}", "--token", "orange"],
        "neighbors": ["neighbors", "orange", "--context", text], "rnn": ["rnn", text],
        "contributions": ["contributions", text, "--method", "norm"],
    }[command]
    pictures = ["--svg", tmp_path / "p.svg", "--html", tmp_path / "p.html"]
    result = run(*args, "--format", "table", *pictures, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.stderr
    no_raw_control(result.stdout, result.stderr)
    svg, page = (tmp_path / "p.svg").read_text(), (tmp_path / "p.html").read_text()
    no_raw_control(svg, page)
    no_links_or_handlers(svg, page)
    if sentence in MARKUP and command != "neighbors":  # markup is shown as it was written
        assert sentence.split()[1 if sentence.startswith("the") else 0] in result.stdout


@pytest.mark.parametrize("sentence", HOSTILE + MARKUP)
def test_json_keeps_the_text_exact_and_sends_no_control_raw(sentence):
    result = run("scores", sentence)
    doc = one(result, stderr=None)
    assert doc["sentence"] == sentence
    no_raw_control(result.stdout)  # JSON escapes C0 itself; the C1 controls and bidi overrides too, here


def test_hostile_words_and_file_names_are_shown_as_written(tmp_path, hostile_vectors):
    for args in (["neighbors", "cat", "--k", "20"], ["scores", "the cat [/x] [reverse] :smile:"],
                 ["vectors", "info"], ["context", "the cat dog", "--token", "cat", "--neighbors", "20"]):
        result = run(*args, "--vectors", hostile_vectors, "--format", "table", "--html", tmp_path / "v.html",
                     "--svg", tmp_path / "v.svg")
        assert result.exit_code == 0, result.stderr
        no_raw_control(result.stdout, result.stderr)
        page, svg = (tmp_path / "v.html").read_text(), (tmp_path / "v.svg").read_text()
        no_raw_control(svg, page)
        no_links_or_handlers(svg, page)
        if args[0] in ("neighbors", "context"):
            assert "[link=javascript:alert(3)]" in result.stdout and "[/x]" in result.stdout
        if args[0] == "vectors":
            assert "[bold]vectors\\x1b[31m.txt" in result.stdout  # the file name, escaped, not restyled
    # an error naming the file: one line, escaped
    line = fails(run("scores", "zzqx", "--vectors", hostile_vectors))
    no_raw_control(line)


def test_errors_warnings_and_notes_escape_what_they_quote(tmp_path):
    path = tmp_path / "no\x1b]0;x\x07such.txt"
    line = fails(run("scores", "cat", "--vectors", path))
    no_raw_control(line)
    assert "\\x1b" in line
    result = run("scores", "the \x1b[2Jzzqq cat")
    assert result.exit_code == 0
    no_raw_control(result.stderr)
    assert result.stderr.startswith("attncli: note: ") and len(result.stderr.splitlines()) == 1


def test_a_png_draws_dollar_signs_literally(tmp_path):
    pytest.importorskip("matplotlib")
    for sentence in ["the $\\foo$ cat", "the $x^{$ dog", "a $$ \x1b[2J cat"]:
        result = run("scores", sentence, "--png", tmp_path / "m.png", "--json")
        assert result.exit_code == 0, result.stderr
        assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- 3. bounded memory and time


def limited(gigabytes: float):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (int(gigabytes * 2**30), int(gigabytes * 2**30)))
    return apply


def test_a_sentence_too_long_for_memory_is_refused_before_the_work(tmp_path):
    words = ("the earth is like an orange and the river bank " * 600).strip()  # 6,000 tokens
    for source in ("argument", "stdin"):
        args = ["scores", words] if source == "argument" else ["scores", "-"]
        proc = process(*args, input=None if source == "argument" else words.encode(), preexec_fn=limited(3))
        line = one_error_line(proc.stderr)
        assert proc.returncode == 1 and proc.stdout == b""
        assert "--file" in line and "memory" in line and "available" in line
    # the same text as a document streams, within the same limit
    (tmp_path / "doc.txt").write_text(words)
    proc = process("scores", "--file", tmp_path / "doc.txt", preexec_fn=limited(3))
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 6000


def test_endless_inputs_are_refused_at_once():
    for args in (["scores", "--file", "/dev/zero"], ["batch", "/dev/zero"]):
        fails(run(*args), "not a regular file")
    proc = process("scores", "-", stdin=open("/dev/zero", "rb"), preexec_fn=limited(4))
    assert proc.returncode == 1 and "standard input holds more than" in one_error_line(proc.stderr)
    for command in ("batch", "stats"):  # a line at a time
        proc = process(command, stdin=open("/dev/zero", "rb"), preexec_fn=limited(4))
        assert proc.returncode == 1 and "standard input: line 1 holds more than" in one_error_line(proc.stderr)
        assert not proc.stdout


def test_huge_counts_are_capped_at_the_vocabulary(tmp_path):
    vectors = tmp_path / "v.txt"
    vectors.write_text("\n".join(f"w{i} {i % 7 + 1} {i % 3 + 1}" for i in range(1500)) + "\n")
    doc = one(run("neighbors", "w1", "--k", "10000000", "--vectors", vectors))
    assert len(doc["neighbors"]) == 1499  # every word but itself
    start = time.monotonic()
    table = run("neighbors", "w1", "--k", "10000000", "--vectors", vectors, "--format", "table")
    assert table.exit_code == 0
    assert "first 1,000 of 1,499 words" in table.stdout
    assert table.stdout.count("\n") < 1100
    lines = ok(run("batch", "--vectors", vectors, "--token", "w1", "--neighbors", "10000000",
                   input="w1 w2\nw3 w1\n"))
    assert [len(d["neighbors"]) for d in lines] == [1499, 1499]
    assert time.monotonic() - start < 120  # loose: a bound, not a benchmark


def test_a_long_path_is_one_line():
    for args in (["scores", "cat", "--vectors", "a" * 5000], ["scores", "--file", "b" * 5000],
                 ["scores", "the cat", "--qkv", "c" * 5000 + ".npz"], ["batch", "d" * 5000]):
        line = fails(run(*args))
        assert len(line) < 1400


# --------------------------------------------------------------------------- 4. signals and streams


@pytest.mark.parametrize("sig,status,said", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated"),
                                            (signal.SIGHUP, 129, "hung up")])
def test_ctrl_c_or_sigterm_during_batch_with_two_jobs_ends_everything(tmp_path, sig, status, said):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the earth is like an orange\n" * 100_000)
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as stdout:
        proc = subprocess.Popen([str(ENTRY_POINT), "batch", str(corpus), "--jobs", "2"], stdout=stdout,
                                stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 60
        while out.stat().st_size < 100_000 and time.monotonic() < deadline:  # the workers are writing
            time.sleep(0.05)
        os.killpg(proc.pid, sig)  # as Ctrl-C (or a kill of the job): the whole process group
        start = time.monotonic()
        returned = proc.wait(timeout=20)
        took = time.monotonic() - start
    stderr = proc.stderr.read().decode()
    assert returned == status and stderr == f"attncli: {said}\n", stderr
    assert took < 5
    lines = out.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line)["line"] == n for n, line in enumerate(lines[:-1], start=1))
    deadline, alive = time.monotonic() + 3, ["?"]
    while alive and time.monotonic() < deadline:  # multiprocessing's resource tracker ends once its pipe closes
        # by session: the workers leave the process group (see batch._start), never the session
        alive = subprocess.run(["ps", "-o", "pid=,args=", "-s", str(proc.pid)], capture_output=True,
                               text=True).stdout.splitlines()
        alive = [line for line in alive if "<defunct>" not in line]  # ended, waiting to be reaped by init
        time.sleep(0.1)
    assert alive == []  # no worker left


def _children(pid: int) -> dict[int, tuple[str, bytes]]:
    """The processes whose parent is `pid`, each with its start time (to tell it from a later
    process given the same number) and its command line, from the process table."""
    found = {}
    for entry in os.listdir("/proc"):
        fields = stat_fields(int(entry)) if entry.isdigit() else None
        if fields and int(fields[1]) == pid:
            with contextlib.suppress(OSError):
                found[int(entry)] = (fields[19], Path(f"/proc/{entry}/cmdline").read_bytes())
    return found


def _still_running(pid: int, started: str) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[19] == started and fields[0] not in ("Z", "X")


@pytest.mark.parametrize("moment", ["as the workers start", "after the first line"])
def test_ctrl_c_to_batch_jobs_2_at_any_moment_is_one_line_and_leaves_no_child(tmp_path, moment):
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it: exit 130, the one
    line, every line written whole, and no child of the run left once it has ended. As the
    workers start: a Ctrl-C then must neither be lost (the run going on to its end) nor
    interrupt a worker (its traceback on stderr)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the earth is like an orange\n" * 100_000)
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as stdout:
        proc = subprocess.Popen([str(ENTRY_POINT), "batch", str(corpus), "--jobs", "2"], stdout=stdout,
                                stderr=subprocess.PIPE, start_new_session=True)
        seen: dict[int, tuple[str, bytes]] = {}
        first_child = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if moment == "as the workers start":
                with contextlib.suppress(OSError):
                    if first_child.read_text().split():  # the pool has begun to start its processes
                        break
            else:
                seen.update(_children(proc.pid))
                if b"\n" in out.read_bytes()[:1 << 16]:
                    break
                time.sleep(0.01)
        seen.update(_children(proc.pid))
        os.killpg(proc.pid, signal.SIGINT)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:  # the workers it may still start
            seen.update(_children(proc.pid))
            time.sleep(0.01)
        try:
            returned = proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:  # the Ctrl-C was lost: end the run, and fail
            os.killpg(proc.pid, signal.SIGKILL)
            for pid in seen:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            proc.wait()
            raise AssertionError("the run went on after Ctrl-C")
    stderr = proc.stderr.read().decode()
    workers = [pid for pid, (started, command) in seen.items() if b"spawn_main" in command]
    assert returned == 130 and stderr == "attncli: interrupted\n", stderr
    lines = out.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line)["line"] == n for n, line in enumerate(lines[:-1], start=1))
    assert seen  # its children were there
    # no worker outlives the run: it has ended and reaped them before it exits
    assert [pid for pid in workers if _still_running(pid, seen[pid][0])] == []
    # nor anything else it started; multiprocessing's resource tracker ends by itself once
    # its pipe from the run has closed, a moment after
    deadline, left = time.monotonic() + 3, ["?"]
    while left and time.monotonic() < deadline:
        left = [pid for pid, (started, _) in seen.items() if _still_running(pid, started)] + in_session(proc.pid)
        time.sleep(0.02)
    assert left == []


def _blocked(pid: int) -> set[int]:
    """The signals the main thread of process `pid` blocks (/proc's SigBlk mask)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            mask = int(line.split()[1], 16)
            return {n for n in range(1, 65) if mask >> (n - 1) & 1}
    return set()


def test_ctrl_c_as_the_command_starts_is_one_line(tmp_path):
    """SIGINT to the group (a terminal's Ctrl-C) at a moment of the first 0.2 s after the
    command's first act, which holds Ctrl-C and the ending signals (SIGINT blocked): while
    it imports numpy and the rest, before any handler of its own was there, Python raised
    KeyboardInterrupt from the midst of an import, a traceback and exit -2 (or numpy's
    ImportError and exit 1), in 7 runs of 12 from 0.1 s to 0.4 s. Eight times, each exit
    130 and the one line. (What comes before that first act, as the interpreter itself
    starts, is Python's.)"""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the earth is like an orange\n" * 5_000)  # a run that lasts beyond the 0.2 s
    for k in range(8):
        proc = subprocess.Popen([str(ENTRY_POINT), "batch", corpus, "--fields", "line"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 30
        while signal.SIGINT not in _blocked(proc.pid):
            assert time.monotonic() < deadline and proc.poll() is None, "the command never held Ctrl-C"
            time.sleep(0.001)
        time.sleep(0.2 * k / 8)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert (proc.returncode, err) == (130, b"attncli: interrupted\n"), (k, proc.returncode, err)


@pytest.mark.parametrize("command", [["scores", "The earth is like an orange", "--json"],
                                     ["vectors", "info", "--json"]])
def test_ctrl_c_as_the_run_ends_never_kills_it_by_the_signal(command):
    """SIGINT to the group every 2 ms from the moment the result is written until the
    process has ended: it ends as the run ended (0, the result whole) or, for a Ctrl-C
    that came before the outcome was decided, with 130 and the one line; never by the
    signal itself. Once the run gave Python back its own handler, a Ctrl-C as the process
    exited killed it (-2), in 2 runs of 10. Ten times each."""
    for _ in range(10):
        proc = subprocess.Popen([str(ENTRY_POINT), *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        first = proc.stdout.readline()  # the result, written
        while proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.002)
        out, err = proc.communicate()
        assert proc.returncode in (0, 130), (proc.returncode, err)
        if proc.returncode == 0:
            assert err == b"" and (first + out).endswith(b"\n")
        else:
            assert err == b"attncli: interrupted\n", err


def test_a_signal_ignored_as_it_comes_writes_nothing():
    """A Ctrl-C that another thread takes just as the run's handler becomes SIG_IGN is marked
    for the main thread, which finds no handler: Python writes "Signal 2 ignored due to race
    condition" with a traceback (once in the suite's 20 runs above, under load). The
    command's hook drops that one note, and only it."""
    from types import SimpleNamespace

    from attncli.system import ending

    seen = []
    hook = ending.quiet_races(seen.append)
    for error in (OSError("Signal 2 ignored due to race condition"), OSError("Signal 15 ignored due to race condition"),
                  OSError("a full disk"), ValueError("ignored due to race condition")):
        hook(SimpleNamespace(exc_value=error))
    assert [str(args.exc_value) for args in seen] == ["a full disk", "ignored due to race condition"]


def test_sighup_stays_ignored_under_nohup(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the earth is like an orange\n" * 20_000)
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as stdout:
        proc = subprocess.Popen([str(ENTRY_POINT), "batch", str(corpus), "--jobs", "2", "--fields", "line"],
                                stdout=stdout, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))  # as nohup starts it
        deadline = time.monotonic() + 60
        while out.stat().st_size == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=60) == 0
    assert proc.stderr.read() == b"" and len(out.read_bytes().splitlines()) == 20_000


def _workers_of(pid: int) -> list[int]:
    """The worker processes (multiprocessing's spawned ones) whose parent is `pid`."""
    return [child for child, (_, command) in _children(pid).items() if b"spawn_main" in command]


def _killing_a_worker(args, *, stdout, written=lambda: True, env=None) -> tuple[int, str, float]:
    """`attncli args` with one of its two workers killed by SIGKILL, as the out-of-memory
    killer kills, once both are there and written() holds: (exit status, stderr, seconds
    from the kill to the end). Afterwards no process of its session is left."""
    proc = subprocess.Popen([str(ENTRY_POINT), *map(str, args)], stdout=stdout, stderr=subprocess.PIPE,
                            start_new_session=True, env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + 60
        while not (len(workers := _workers_of(proc.pid)) == 2 and written()) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.01)
        os.kill(workers[0], signal.SIGKILL)
        killed = time.monotonic()
        status = proc.wait(timeout=30)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:  # it never ended: end it, and fail
            os.killpg(proc.pid, signal.SIGKILL)
            for pid in in_session(proc.pid):
                os.kill(pid, signal.SIGKILL)
            proc.wait()
    assert none_left(proc.pid) == []
    return status, proc.stderr.read().decode(), took


KILLED = ("attncli: error: a worker process was killed by SIGKILL before it finished its share of the work; if "
          "memory ran short (the out-of-memory killer sends SIGKILL), free some and run again")


def test_a_worker_killed_mid_batch_ends_it_with_whole_lines_and_says_which_are_missing(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the earth is like an orange\n" * 200_000)
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as stdout:
        status, stderr, took = _killing_a_worker(["batch", corpus, "--jobs", "2"], stdout=stdout,
                                                 written=lambda: out.stat().st_size > 100_000)
    data = out.read_bytes()
    numbers = [json.loads(line)["line"] for line in data.splitlines()]
    last = len(numbers)
    assert status == 1 and took < 15
    assert data.endswith(b"\n") and numbers == list(range(1, last + 1)) and 0 < last < 200_000
    assert stderr == (f"{KILLED} (the output holds the results of lines 1 to {last:,} of {corpus}, whole; those "
                      f"from line {last + 1:,} on are missing)\n")


def test_a_batch_killed_leaves_its_folder_to_the_next_run_which_removes_only_that(tmp_path):
    """batch --jobs 2 SIGKILLed (as the out-of-memory killer kills) leaves its folder of
    chunks, which nothing of the dead run can remove; the next run on two workers removes
    it, and leaves a folder a live run holds (stopped, not ended) and a user's look-alike."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the earth is like an orange\n" * 200_000)

    def started(stopped: bool) -> Path:
        """A run's folder, once its workers have left chunks in it; the run SIGSTOPped, or SIGKILLed."""
        proc = subprocess.Popen([str(ENTRY_POINT), "batch", corpus, "--jobs", "2"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True, env={**os.environ, **env})
        deadline = time.monotonic() + 60
        while not (folders := [f for f in tmp.glob("attncli-batch-*") if f not in seen and any(f.glob("chunk-*"))]):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGSTOP if stopped else signal.SIGKILL)
        if not stopped:
            proc.wait()
        procs.append(proc)
        seen.extend(folders)
        return folders[0]

    seen, procs = [], []
    try:
        live = started(stopped=True)
        left = started(stopped=False)  # after the live one: a run's start removes the folders left before it
        mine = tmp / "attncli-batch-mine"
        mine.mkdir()
        (mine / "chunk-notes.txt").write_text("mine")
        (mine / "other.txt").write_text("mine too")
        assert (left / ".attncli-batch").is_file() and any(left.glob("chunk-*"))
        done = process("batch", "--jobs", "2", input=b"the cat\nthe dog\n" * 200, env=env)
        assert done.returncode == 0 and done.stderr == b""
        assert not left.exists()
        assert live.exists() and any(live.glob("chunk-*"))  # its run goes on once continued
        assert sorted(p.name for p in mine.iterdir()) == ["chunk-notes.txt", "other.txt"]
        assert set(tmp.glob("attncli-batch-*")) == {live, mine}
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_worker_killed_mid_stats_is_an_error_and_no_statistics(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the earth is like an orange\n" * 200_000)
    status, stderr, took = _killing_a_worker(["stats", corpus, "--jobs", "2", "--json"], stdout=subprocess.PIPE)
    assert status == 1 and took < 15 and stderr == KILLED + "\n"


def test_a_worker_killed_while_it_parses_a_vectors_file_loads_nothing(tmp_path):
    """A plain text file of 64 MB or more has its numbers parsed by workers (plaintext.PARALLEL)."""
    numbers = " ".join(["0.1234"] * 50)
    vectors = tmp_path / "big.txt"
    vectors.write_text("200000 50\n" + "".join(f"w{i} {numbers}\n" for i in range(200_000)))
    assert vectors.stat().st_size > 64 << 20
    env = {"ATTNCLI_CACHE_DIR": str(tmp_path / "cache")}
    status, stderr, took = _killing_a_worker(["vectors", "convert", vectors, "--json"], stdout=subprocess.PIPE, env=env)
    assert status == 1 and took < 15
    assert stderr == f"attncli: error: {vectors}: its numbers were not all parsed, so nothing was loaded: {KILLED.removeprefix('attncli: error: ')}\n"
    assert run("vectors", "list", "--json", env=env).stdout == ""  # no cache entry made


@pytest.mark.parametrize("args", [["scores", SENTENCE, "--json"], ["scores", SENTENCE, "--format", "table"],
                                  ["batch", "-"], ["batch", "-", "--jobs", "2"], ["scores", "--document"],
                                  ["vectors", "info"]])
def test_a_full_stdout_is_one_line_and_exit_1(args):
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([str(ENTRY_POINT), *args], stdout=full, stderr=subprocess.PIPE,
                              input=(SENTENCE + "\n").encode(), timeout=60)
    assert proc.returncode == 1
    assert "No space left on device" in one_error_line(proc.stderr)


def test_closed_standard_streams(tmp_path):
    # stdout closed: an error before any work, and nothing written to whatever takes descriptor 1
    proc = subprocess.run(["bash", "-c", '"$0" "$@" >&-', str(ENTRY_POINT), "qkv", "init", "-o",
                           str(tmp_path / "p.npz")], stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode == 1 and "standard output is closed" in one_error_line(proc.stderr)
    assert not (tmp_path / "p.npz").exists()
    # stderr closed: a run with nothing to report still succeeds
    proc = subprocess.run(["bash", "-c", '"$0" "$@" 2>&-', str(ENTRY_POINT), "scores", SENTENCE],
                          stdout=subprocess.PIPE, timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["tokens"][1] == "earth"
    proc = subprocess.run(["bash", "-c", '"$0" "$@" 2>&-', str(ENTRY_POINT), "scores", ""],
                          stdout=subprocess.PIPE, timeout=60)
    assert proc.returncode == 1 and proc.stdout == b""
    # stdin closed: the usual "no input"
    for args in (["scores"], ["scores", "-"], ["batch"]):
        proc = subprocess.run(["bash", "-c", '"$0" "$@" <&-', str(ENTRY_POINT), *args], capture_output=True,
                              timeout=60)
        assert proc.returncode == 1 and proc.stdout == b""
        assert "standard input holds no" in one_error_line(proc.stderr)


def test_a_picture_that_cannot_be_written_leaves_stdout_empty(tmp_path):
    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))  # an SVG is larger: EFBIG

    proc = process("scores", SENTENCE, "--json", "--svg", tmp_path / "p.svg", preexec_fn=small_files)
    assert proc.returncode == 1 and proc.stdout == b""
    assert "p.svg" in one_error_line(proc.stderr)
    assert os.listdir(tmp_path) == []  # no temporary file left


def test_a_document_that_overflows_writes_nothing():
    result = run("scores", "--document", "--scale", "1e308", input="the earth is like an orange\n" * 300)
    fails(result, "overflow")


# --------------------------------------------------------------------------- 5. a hostile environment


@pytest.mark.parametrize("env", [{"LC_ALL": "C", "PYTHONUTF8": "0", "LANG": "C"}, {"PYTHONIOENCODING": "ascii"},
                                 {"PYTHONIOENCODING": "latin-1"}])
def test_a_locale_that_is_not_utf8(env):
    env = {**env, "PYTHONUTF8": env.get("PYTHONUTF8", "0")}
    sentence = "Orange is a bright color, café α"
    proc = process("scores", sentence, "--format", "table", env=env)
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    proc = process("scores", sentence, "--json", env=env)
    assert proc.returncode == 0
    proc.stdout.decode("ascii")  # ASCII with \u escapes: valid under any of these encodings
    assert json.loads(proc.stdout)["sentence"] == sentence
    proc = process("context", sentence, "--token", "orange", "--format", "table", env=env)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr
    proc = process("neighbors", "café", env=env)
    assert proc.returncode == 0 and json.loads(proc.stdout)["word"] == "café"


@pytest.mark.parametrize("args", [
    [b"scores", b"caf\xe9 orange"], [b"compare", b"caf\xe9 orange", b"an orange", b"--token", b"orange"],
    [b"neighbors", b"orange", b"--context", b"caf\xe9 orange"], [b"neighbors", b"caf\xe9"],
    [b"context", b"the orange", b"--token", b"caf\xe9"], [b"explain", b"caf\xe9 orange"],
    [b"batch", b"-", b"--jsonl", b"--field", b"t\xe9xt"],
])
def test_an_argument_that_is_not_utf8_is_one_line(args):
    proc = subprocess.run([os.fsencode(ENTRY_POINT), *args], capture_output=True, input=b'{"text": "a"}\n', timeout=60,
                          env={**os.environ, "PYTHONUTF8": "1"})
    assert proc.returncode == 1 and proc.stdout == b""
    assert "not valid UTF-8" in one_error_line(proc.stderr)


def test_a_long_document_shows_its_progress_on_a_terminal(tmp_path):
    import pty

    doc = tmp_path / "doc.txt"
    doc.write_text("the earth is like an orange and the river bank " * 100)  # 1,000 tokens
    primary, secondary = pty.openpty()
    with open(tmp_path / "out.jsonl", "wb") as stdout:
        proc = subprocess.Popen([str(ENTRY_POINT), "scores", "--file", str(doc)], stdout=stdout, stderr=secondary)
    os.close(secondary)
    shown = b""
    while True:
        try:
            data = os.read(primary, 4096)
        except OSError:
            break
        if not data:
            break
        shown += data
    assert proc.wait(timeout=60) == 0
    assert b"rows" in shown and b"1000/1000" in shown.replace(b"\x1b[32m", b"").replace(b"\x1b[0m", b"")
    assert len((tmp_path / "out.jsonl").read_bytes().splitlines()) == 1000


# --------------------------------------------------------------------------- found by a second attack


def test_outputs_onto_files_read_beside_the_named_input_are_refused(tmp_path, monkeypatch):
    from attncli.words import entry

    data = tmp_path / "gensim-data"
    (data / "fakemodel").mkdir(parents=True)
    model = data / "fakemodel" / "fakemodel.gz"
    model.write_bytes(b"not read")
    monkeypatch.setenv("GENSIM_DATA_DIR", str(data))
    fails(run("qkv", "init", "-o", model, "--force", "--vectors", "fakemodel"), "same file", "--vectors", code=2)
    side = tmp_path / "model.kv.vectors.npy"  # gensim keeps a model's large arrays beside it
    side.write_bytes(b"side")
    (tmp_path / "model.kv").write_bytes(b"\x80\x04pickle")
    fails(run("qkv", "init", "-o", side, "--force", "--vectors", tmp_path / "model.kv"), "among the files", code=2)
    bundled = Path(f"{entry.bundled_prefix()}.words.txt")
    fails(run("qkv", "init", "-o", bundled, "--force"), "among the files of the bundled vectors", code=2)
    cache_folder = tmp_path / "cache"
    cache_folder.mkdir()
    fails(run("qkv", "init", "-o", cache_folder / "x.npz", env={"ATTNCLI_CACHE_DIR": str(cache_folder)}),
          "cache folder", code=2)
    assert model.read_bytes() == b"not read" and side.read_bytes() == b"side"
    assert not (cache_folder / "x.npz").exists()


def test_an_output_that_is_standard_error_is_refused(tmp_path):
    target = tmp_path / "out.svg"
    target.write_text("keep")
    with open(target, "ab") as stderr:
        proc = subprocess.run([str(ENTRY_POINT), "scores", SENTENCE, "--svg", str(target)], stdout=subprocess.PIPE,
                              stderr=stderr, timeout=60)
    assert proc.returncode == 2 and proc.stdout == b""
    assert target.read_text().startswith("keep") and "standard error" in target.read_text()


def test_a_lone_surrogate_in_a_jsonl_field_is_that_lines_error():
    result = run("batch", "--jsonl", input='{"text": "the cat"}\n{"text": "the \\ud800 cat"}\n{"text": "a dog"}\n')
    assert result.exit_code == 1 and result.stderr == 'attncli: 1 of 3 lines failed; their objects hold "error"\n'
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["line"] for d in lines] == [1, 2, 3]
    assert "error" in lines[1] and "surrogate" in lines[1]["error"] and lines[2]["tokens"] == ["a", "dog"]


def test_json_naming_a_file_that_is_not_utf8_stays_valid_utf8(tmp_path):
    name = os.fsencode(tmp_path) + b"/v\xe9.txt"
    with open(name, "w") as f:
        f.write("the 1 0\ncat 0 1\n")
    for args in ([b"scores", b"the cat", b"--vectors", name], [b"qkv", b"init", b"-o", name[:-4] + b".npz", b"--force"]):
        for env in ({"PYTHONUTF8": "1"}, {"PYTHONUTF8": "0", "LC_ALL": "C"}):
            proc = subprocess.run([os.fsencode(ENTRY_POINT), *args, b"--json"], capture_output=True, timeout=60,
                                  env={**os.environ, **env, "ATTNCLI_CACHE_DIR": str(tmp_path / "cache")})
            assert proc.returncode == 0, proc.stderr
            doc = json.loads(proc.stdout.decode("utf-8"))  # strict UTF-8
            named = doc.get("path") or doc["vectors"]["name"]
            assert os.fsencode(named).endswith((b"v\xe9.txt", b"v\xe9.npz"))  # the bytes, back from \udce9


def test_heads_beyond_d_k_is_the_divisor_error():
    fails(run("scores", "the cat", "--heads", "4294967296"), "does not divide d_k = 50")


def test_a_table_into_a_closed_pipe_is_the_quiet_141(tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text("the earth is like an orange " * 4000)
    for args in (["scores", "--file", doc, "--format", "table"], ["neighbors", "the", "--k", "1000", "--format", "table"]):
        proc = subprocess.Popen([str(ENTRY_POINT), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.readline()
        proc.stdout.close()  # as `| head -1`
        assert proc.wait(timeout=60) == 141
        assert proc.stderr.read() == b""


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_a_file_size_limit_on_stdout_is_an_error_not_a_cut_file(tmp_path, unbuffered):
    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    env = {"PYTHONUNBUFFERED": unbuffered} if unbuffered else {}
    for args in (["scores", "the cat sat on the mat", "--json"], ["batch", "-"]):
        with open(tmp_path / "out.json", "wb") as stdout:
            proc = subprocess.run([str(ENTRY_POINT), *args], stdout=stdout, stderr=subprocess.PIPE, input=b"the cat\n" * 50,
                                  preexec_fn=small_files, timeout=60, env={**os.environ, **env})
        assert proc.returncode == 1 and "File too large" in one_error_line(proc.stderr)


@pytest.mark.parametrize("columns", ["99999999999999999999", "100000000", "0", "5"])
def test_any_columns_setting_draws_a_table(columns):
    for args in (["explain", "the cat", "--format", "table"], ["scores", SENTENCE, "--format", "table"]):
        result = run(*args, env={"COLUMNS": columns})
        assert result.exit_code == 0, result.stderr
        assert max(len(line) for line in result.stdout.splitlines()) <= 1000


def test_an_output_in_a_deleted_folder_is_named(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.run(["bash", "-c", f'cd "{gone}" && rmdir "{gone}" && "$0" scores "the cat" --svg x.svg',
                           str(ENTRY_POINT)], capture_output=True, timeout=60)
    assert proc.returncode == 1 and "x.svg" in one_error_line(proc.stderr)
    assert "no longer exists" in proc.stderr.decode()


# --------------------------------------------------------------------------- found by a third attack


def test_numbers_beyond_float64_or_float32_are_one_line_not_warnings(tmp_path):
    big = np.finfo(np.longdouble).max / 2
    if not np.isinf(np.float64(big)):
        pytest.skip("this platform's longdouble is float64")
    with open(tmp_path / "ld.npz", "wb") as f:
        np.savez(f, **{n: np.full((50, 4), big, dtype=np.longdouble) for n in ("W_query", "W_key", "W_value")})
    fails(run("scores", "the cat", "--qkv", tmp_path / "ld.npz"), "beyond float64")
    (tmp_path / "v.txt").write_text("cat 3e39 1 1\ndog 1 1 1\n")
    fails(run("scores", "cat dog", "--vectors", tmp_path / "v.txt"), "'cat' holds NaN or infinity")


@pytest.mark.parametrize("temperature", ["5e-324", "1e-320"])
def test_a_tiny_temperature_on_a_document_is_one_line(temperature):
    fails(run("scores", "--document", "--temperature", temperature, input="the earth is like an orange\n"), "overflow")


def test_an_empty_home_is_no_home(tmp_path):
    env = {"HOME": "", "GENSIM_DATA_DIR": None, "ATTNCLI_CACHE_DIR": None, "XDG_CACHE_HOME": None}
    fails(run("scores", "cat", "--vectors", "~/v.txt", env=env), "~ cannot be expanded", "HOME is empty")
    fails(run("scores", "cat", "--vectors", "glove-fake-42", env=env), "GENSIM_DATA_DIR")
    fails(run("vectors", "list", env={**env, "ATTNCLI_CACHE_DIR": "~/cache"}), "there is no cache directory")


# --------------------------------------------------------------------------- found by a fourth attack


def test_json_escapes_what_a_terminal_would_act_on_and_reads_back_exact():
    from attncli.views.json import to_json

    doc = {"t": "a\u202eb\x9bc\u2066d\u200be\ufefff\U000e0041g é 😀 \udce9"}
    line = to_json(doc)
    assert json.loads(line) == doc
    assert all(c not in line for c in "\u202e\x9b\u2066\u200b\ufeff\U000e0041\udce9")
    assert "é 😀" in line  # ordinary text stays as it is
    line.encode("utf-8")  # strict: a lone surrogate is an escape, not a byte


def test_a_long_sentence_takes_the_mean_of_its_heads_once(monkeypatch):
    from attncli import encoder

    calls = []
    mean = encoder.Attention.mean_weights

    def counted(self):
        calls.append(1)
        return mean.fget(self)

    monkeypatch.setattr(encoder.Attention, "mean_weights", property(counted))
    doc = one(run("scores", " ".join(["the cat sat on a mat"] * 20)))
    assert len(doc["top"]) == 120 and len(calls) == 1  # not once a row: O(T^3) for a long sentence


# --------------------------------------------------------------------------- a write that fails


TRAIN = ["--steps", "2", "--batch", "8", "--out-vocab", "10", "--probe", "the cat sat|the dog sat", "--token", "sat",
         "--force"]
# each command that writes a file: its arguments and environment, given `at(name)`, the path it is to write
WRITERS = {
    "qkv init -o": lambda at, files: (["qkv", "init", "--force", "-o", at("p.npz")], {}),
    "train -o": lambda at, files: (["train", files / "corpus.txt", "-o", at("p.npz"), *TRAIN], {}),
    "scores --svg": lambda at, files: (["scores", SENTENCE, "--svg", at("p.svg")], {}),
    "scores --html": lambda at, files: (["scores", SENTENCE, "--html", at("p.html")], {}),
    "scores --png": lambda at, files: (["scores", SENTENCE, "--png", at("p.png")], {}),
    "stats --png": lambda at, files: (["stats", files / "corpus.txt", "--png", at("s.png")], {}),
    "explore --export": lambda at, files: (["explore", SENTENCE, "--export", at("p.svg")], {}),
    "vectors convert": lambda at, files: (["vectors", "convert", files / "v.txt"], {"ATTNCLI_CACHE_DIR": str(at("cache"))}),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(0)
    words = "the cat sat on a mat and the dog ran to the park while a bird sang in the tree".split()
    (folder / "corpus.txt").write_text("\n".join(" ".join(rng.choice(words, size=8)) for _ in range(100)) + "\n")
    (folder / "v.txt").write_text("2 2\ncat 1 0\ndog 0 1\n")
    return folder


@contextlib.contextmanager
def not_writable(folder: Path):
    """`folder`, made a folder no file can be created in, even by root (chattr +i), for the
    time of the block; yields what the system says to a file made in it."""
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield os.strerror(errno.EACCES)
        folder.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("root may write anywhere, and chattr +i is not available here")
    try:
        yield os.strerror(errno.EPERM)
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def _at(place: str, folder: Path):
    """How a place names the path to write: a link to /dev/full, a folder, a path in a
    folder that does not exist, a path in `folder`."""
    def at(name: str) -> Path:
        path = (folder / "no" / name) if place == "missing folder" else folder / name
        if place == "/dev/full":
            path.symlink_to("/dev/full")
        elif place == "directory":
            path.mkdir()
        at.made = str(path)
        return path
    return at


PLACES = {"/dev/full": "is not a regular file", "directory": "is a directory", "missing folder": "does not exist",
          "not writable": "permission denied"}


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_place_that_cannot_be_written_is_an_error_before_any_work(tmp_path, inputs, writer, place):
    if writer == "vectors convert" and place in ("directory", "missing folder"):
        pytest.skip("a cache directory is a folder, made when missing")
    folder = tmp_path / "out"
    refused = None  # what the system says to mkdir in a place not writable
    with contextlib.ExitStack() as stack:
        if place == "not writable":
            refused = stack.enter_context(not_writable(folder))
        else:
            folder.mkdir()
        at = _at(place, folder)
        args, env = WRITERS[writer](at, inputs)
        before = sorted(os.listdir(folder))
        result = run(*args, env={"ATTNCLI_CACHE_DIR": str(tmp_path / "cache"), **env})
        reason = PLACES[place]  # checked before any work
        if writer == "vectors convert":  # the cache directory's own refusal, once the source is read
            reason = {"/dev/full": "it is not a folder", "not writable": refused}[place]
        fails(result, at.made, reason, code=1)
        assert sorted(os.listdir(folder)) == before  # nothing written, not even a temporary file


def _file_limit():
    limit = 1024  # bytes: less than any of the files, more than a run needs before it writes them
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("stream", ["file size limit", "stdout closed"])
@pytest.mark.parametrize("writer", [w for w in WRITERS if w != "explore --export"])  # explore needs a terminal
def test_a_write_that_fails_midway_is_one_line_and_leaves_nothing(tmp_path, inputs, writer, stream):
    folder = tmp_path / "out"
    folder.mkdir()
    at = _at("folder", folder)
    args, env = WRITERS[writer](at, inputs)
    env = {"ATTNCLI_CACHE_DIR": str(tmp_path / "cache"), **env}
    if stream == "file size limit":  # the kernel refuses the write past the limit: EFBIG
        proc = process(*args, env=env, preexec_fn=_file_limit, stdin=subprocess.DEVNULL)
        words = [at.made, "File too large"]
    else:
        proc = subprocess.run(["bash", "-c", '"$0" "$@" >&-', str(ENTRY_POINT), *map(str, args)], capture_output=True,
                              env={**os.environ, **env}, timeout=60, stdin=subprocess.DEVNULL)
        words = ["standard output is closed"]
    assert proc.returncode == 1 and proc.stdout == b""
    line = one_error_line(proc.stderr)
    assert all(word in line for word in words), line
    if writer == "vectors convert" and stream == "file size limit":  # the cache directory made, and nothing in it
        assert os.listdir(folder) == ["cache"] and os.listdir(folder / "cache") == []
    else:
        assert os.listdir(folder) == []  # no file, no temporary file: nothing half-written
