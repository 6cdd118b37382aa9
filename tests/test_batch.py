"""`attncli batch` (attncli/corpus/batch.py): input lines to results, in order, each a document or
its error, in one process and in several (attncli/corpus/workers.py).

Every result is held against `scores` or `context` on the same line, through the CLI or the
library, byte for byte where the workers write it; every bad line against its error, in its
place; and a run with workers against one without.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from attncli import scores_doc
from attncli.corpus import batch as batches
from attncli.system import limits
from clirunner import fails, ok, one, run
from helpers import ENTRY_POINT, bundled_words, process_env

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

SENTENCES = [
    "The earth is like an orange",
    "I ate an orange and a banana",
    "the cat sat on the mat , again",
    "Stocks rose sharply on Monday",
    "  leading and trailing spaces  ",
]


# --------------------------------------------------------------------------- helpers


def run_process(*args, stdin: bytes | None = None, **extra_env) -> subprocess.CompletedProcess:
    return subprocess.run([str(ENTRY_POINT), *map(str, args)], input=stdin, capture_output=True,
                          env=process_env(**extra_env), timeout=120)


def without_line(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "line"}


# --------------------------------------------------------------------------- input lines


def test_a_chunk_of_lines_ends_at_its_count_or_its_text(monkeypatch):
    """batch and stats send lines in chunks of CHUNK, or fewer once their text reaches
    CHUNK_TEXT characters, so that a chunk in flight holds one long line at most; and the
    longest line a run takes shrinks with its workers, so that all in flight fit."""
    monkeypatch.setattr(batches, "CHUNK_TEXT", 10)
    items = [(1, "a" * 12, None), (2, "b", None), (3, None, "not UTF-8"), (4, "c" * 9, None), (5, "d", None)]
    assert [[n for n, _, _ in chunk] for chunk in batches.chunks_of(items, 3)] == [[1], [2, 3, 4], [5]]
    assert [[n for n, _, _ in chunk] for chunk in batches.chunks_of(items[1:], 2)] == [[2, 3], [4, 5]]
    monkeypatch.setattr(limits, "available", lambda: 600 << 20)
    assert [batches.line_most(jobs) for jobs in (1, 2, 40)] == [20 << 20, 10 << 20, 1 << 20]


def test_parse_lines():
    data = b"\xef\xbb\xbfone\r\ntwo\n\n  \ncaf\xe9\nlast"
    assert batches.parse_lines(data) == [  # blank lines skipped, the others numbered by their place
        (1, "one", None), (2, "two", None), (5, None, "not UTF-8: byte 0xe9 at column 4"), (6, "last", None)]
    assert batches.parse_lines(b"a\n") == [(1, "a", None)]  # the final newline starts no line
    assert batches.parse_lines(b"") == []
    assert batches.parse_lines(b"\n \r\n\t\n\xc2\x85\n\xe3\x80\x80\n") == []  # white space, Unicode's too
    assert batches.parse_lines(b'\n\n{"text": "a"}\n  \n', jsonl=True) == [(3, "a", None)]
    items = batches.parse_lines(b'{"body": "x y"}\n{"text": "x"}\n[1]\nnope\n{"body": 2}\n{"body": " "}\n',
                                jsonl=True, field_name="body")
    assert items[0] == (1, "x y", None)
    assert [n for n, _, e in items if e] == [2, 3, 4, 5, 6]
    assert "'body'" in items[1][2] and "not JSON" in items[3][2] and "not a sentence" in items[4][2]


# --------------------------------------------------------------------------- one process


def test_batch_lines_equal_scores(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    docs = ok(run("batch", path))
    assert [d["line"] for d in docs] == list(range(1, len(SENTENCES) + 1))
    for sentence, doc in zip(SENTENCES, docs):
        assert doc["command"] == "scores" and doc["sentence"] == sentence
        assert without_line(doc) == one(run("scores", sentence, "--json"))


def test_batch_api_run_in_order(glove):
    items = batches.parse_lines("\n".join(SENTENCES).encode())
    results = list(batches.run(items, batches.Job()))
    assert [r["line"] for r in results] == [1, 2, 3, 4, 5]
    for sentence, r in zip(SENTENCES, results):
        assert without_line(r) == scores_doc(sentence, glove)


def test_batch_token_gives_context_documents(tmp_path):
    lines = ["The earth is like an orange", "Orange is a bright color", "an orange and a lemon"]
    path = tmp_path / "oranges.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    docs = ok(run("batch", path, "--token", "orange", "--neighbors", "3"))
    assert [d["line"] for d in docs] == [1, 2, 3]
    for sentence, doc in zip(lines, docs):
        assert doc["command"] == "context" and doc["token"] == "orange"
        assert without_line(doc) == one(run("context", sentence, "--token", "orange", "--neighbors", "3", "--json"))
    docs = ok(run("batch", path, "--token", "orange", "--all"))
    for sentence, doc in zip(lines, docs):
        assert without_line(doc) == one(run("context", sentence, "--token", "orange", "--all", "--json"))


def test_batch_jsonl_field_body(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": n, "body": s, "text": "ignored words"}) + "\n"
                            for n, s in enumerate(SENTENCES)), encoding="utf-8")
    docs = ok(run("batch", path, "--jsonl", "--field", "body"))
    for sentence, doc in zip(SENTENCES, docs):
        assert doc["sentence"] == sentence
        assert without_line(doc) == one(run("scores", sentence, "--json"))


def test_batch_bad_lines_jsonl(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join([
        b'{"body": "The earth is like an orange"}',
        b"",
        b'{"text": "the cat"}',
        b"this is not json",
        b'{"body": 42}',
        b'{"body": "caf\xe9"}',
        b'{"body": "zzqxv qqzvx"}',
        b'{"body": "a cat sat"}',
    ]) + b"\n")
    result = run("batch", path, "--jsonl", "--field", "body")
    assert result.exit_code == 1
    assert result.stderr == 'attncli: 5 of 7 lines failed; their objects hold "error"\n'
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["line"] for d in docs] == [1, 3, 4, 5, 6, 7, 8]  # the blank line 2 skipped, the others keep their place
    errors = {d["line"]: d["error"] for d in docs if "error" in d}
    assert all(set(d) == {"line", "error"} for d in docs if "error" in d)
    assert sorted(errors) == [3, 4, 5, 6, 7]
    assert "'body'" in errors[3] and "field" in errors[3]
    assert errors[4].startswith("not JSON")
    assert "'body'" in errors[5] and "not a sentence" in errors[5]
    assert errors[6] == "not UTF-8: byte 0xe9 at column 14"
    assert "none of the tokens" in errors[7] and "zzqxv" in errors[7]
    assert without_line(docs[0]) == one(run("scores", "The earth is like an orange", "--json"))
    assert without_line(docs[6]) == one(run("scores", "a cat sat", "--json"))


def test_batch_bad_lines_plain(tmp_path):
    data = b"the cat sat\n\ncaf\xe9 au lait\nzzqxv\n, . !\nthe dog ran\n"
    result = run("batch", input=data)
    assert result.exit_code == 1
    assert result.stderr == 'attncli: 3 of 5 lines failed; their objects hold "error"\n'
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["line"] for d in docs] == [1, 3, 4, 5, 6]
    assert ["error" in d for d in docs] == [False, True, True, True, False]
    assert docs[1]["error"] == "not UTF-8: byte 0xe9 at column 4"
    assert "punctuation" in docs[3]["error"]


def test_batch_all_good_exit_0_quiet(tmp_path):
    result = run("batch", input="\n".join(SENTENCES[:3]) + "\n")
    assert result.exit_code == 0 and result.stderr == ""
    assert len(result.stdout.splitlines()) == 3


def test_batch_stdin_equals_file(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("\r\n".join(SENTENCES) + "\r\n", encoding="utf-8")  # CRLF: no \r in a sentence
    by_file = run("batch", path)
    assert by_file.exit_code == 0
    assert [json.loads(x)["sentence"] for x in by_file.stdout.splitlines()] == SENTENCES
    for args in ((), ("-",)):
        by_stdin = run("batch", *args, input=path.read_bytes())
        assert by_stdin.exit_code == 0 and by_stdin.stderr == "" and by_stdin.stdout == by_file.stdout


def test_batch_usage_errors(tmp_path):
    fails(run("batch", "--jobs", "0", input="the cat\n"), "--jobs", code=2)
    fails(run("batch", tmp_path / "nope.txt"), "nope.txt", "no such file")


@pytest.fixture(scope="module")
def five_words_path(tmp_path_factory):
    """the, cat, dog, end and "." in two dimensions, as a word2vec text file."""
    path = tmp_path_factory.mktemp("blanks") / "tiny.txt"
    path.write_text("5 2\nthe 1 0\ncat 0 1\ndog 1 1\nend 2 0\n. 0 2\n")
    return path


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_blank_lines_are_skipped_alike_by_scores_and_batch(five_words_path, jobs):
    """One rule for input lines: a blank or white-space-only line is skipped, by `scores` on
    standard input and by `batch`, which still numbers every line by its place in the input;
    a run of only good lines and blank ones succeeds."""
    data = "the cat\n\n   \n\tthe dog\n\r\n\u3000\nthe end\n\n"
    scored = ok(run("scores", "--vectors", five_words_path, input=data))
    batched = ok(run("batch", "--vectors", five_words_path, "--jobs", jobs, input=data))
    assert [d["sentence"] for d in scored] == [d["sentence"] for d in batched] == ["the cat", "\tthe dog", "the end"]
    assert [d["line"] for d in batched] == [1, 4, 7]
    assert [without_line(d) for d in batched] == scored
    lines = ok(run("batch", "--jsonl", "--vectors", five_words_path, input='\n{"text": "the cat"}\n \n'))
    assert [d["line"] for d in lines] == [2]
    fails(run("batch", "--vectors", five_words_path, input="\n \n\t\n"), "holds no sentence")
    fails(run("scores", "--vectors", five_words_path, input="\n \n\t\n"), "holds no sentence")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_lines_end_only_at_newline_alike_in_scores_and_batch(five_words_path, jobs):
    """A form feed, U+0085 or U+2028 inside a line does not end it, in either command, so a
    line's number is the same in both (the one text editors and `wc -l` count)."""
    data = "the cat\x0cthe dog\r\nthe\u2028end\n\x85\nthe dog\x1cthe cat"
    scored = ok(run("scores", "--vectors", five_words_path, input=data))
    batched = ok(run("batch", "--vectors", five_words_path, "--jobs", jobs, input=data))
    assert [d["sentence"] for d in scored] == [d["sentence"] for d in batched] == [
        "the cat\x0cthe dog", "the\u2028end", "the dog\x1cthe cat"]
    assert [d["line"] for d in batched] == [1, 2, 4]
    failed = run("scores", "--vectors", five_words_path, "--oov", "error", input="the cat\x0cthe\nzzz\n")
    fails(failed, "line 2:")


# --------------------------------------------------------------------------- workers


def test_batch_jobs_2_byte_identical(glove, tmp_path):
    words = bundled_words(glove)
    rng = np.random.default_rng(5)
    lines = [" ".join(rng.choice(words, size=int(rng.integers(2, 12)))) for _ in range(300)]
    lines[17] = ""  # a blank line
    lines[123] = "zzqxv qqzvx"  # no vectors
    lines[250] = "the orange cat and the orange dog"
    path = tmp_path / "many.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one_job = run_process("batch", path)
    two_jobs = run_process("batch", path, "--jobs", "2")
    assert one_job.returncode == two_jobs.returncode == 1
    assert one_job.stderr == two_jobs.stderr == b'attncli: 1 of 299 lines failed; their objects hold "error"\n'
    assert two_jobs.stdout == one_job.stdout
    docs = [json.loads(x) for x in two_jobs.stdout.splitlines()]
    assert [d["line"] for d in docs] == [n for n in range(1, 301) if n != 18]  # the blank line skipped
    by_line = {d["line"]: d for d in docs}
    for n in (1, 100, 251, 300):
        assert without_line(by_line[n]) == scores_doc(lines[n - 1], glove)
    # the same from standard input, with --jobs 2
    by_stdin = run_process("batch", "--jobs", "2", stdin=path.read_bytes())
    assert by_stdin.stdout == one_job.stdout and by_stdin.returncode == 1


def test_batch_custom_vectors_jobs_2(tmp_path):
    """Workers load the cache entry the parent wrote: same words (with --limit), same numbers."""
    vectors = tmp_path / "tiny.w2v.txt"
    vectors.write_text("4 2\nfoo 1 0\nbar 0 1\nbaz 1 1\nqux 2 2\n", encoding="utf-8")
    lines = tmp_path / "lines.txt"
    lines.write_text("foo bar\nbaz foo bar\nqux\nbar\n", encoding="utf-8")
    cache = tmp_path / "cache"
    two = run_process("batch", lines, "--vectors", vectors, "--limit", "3", "--jobs", "2", ATTNCLI_CACHE_DIR=str(cache))
    assert two.returncode == 1, two.stderr
    assert two.stderr == b'attncli: 1 of 4 lines failed; their objects hold "error"\n'
    docs = [json.loads(x) for x in two.stdout.splitlines()]
    assert [d["line"] for d in docs] == [1, 2, 3, 4]
    assert "qux" in docs[2]["error"]  # beyond --limit 3: the workers kept the limit
    assert all(d["vectors"] == {"name": vectors.name, "dim": 2, "words": 3} for d in docs if "error" not in d)
    a = math.exp(1 / math.sqrt(2))  # foo (1,0), bar (0,1): scores [[1,0],[0,1]], scale 1/sqrt(2)
    np.testing.assert_allclose(docs[0]["weights"], [[a / (a + 1), 1 / (a + 1)], [1 / (a + 1), a / (a + 1)]],
                               rtol=1e-12)
    assert docs[3]["weights"] == [[1.0]] and docs[3]["top"] == [[]]
    # baz (1,1), foo, bar: row 0 = softmax([2, 1, 1] / sqrt 2)
    b = math.exp(2 / math.sqrt(2))
    np.testing.assert_allclose(docs[1]["weights"][0], [b / (b + 2 * a), a / (b + 2 * a), a / (b + 2 * a)], rtol=1e-12)
    entries = [p for p in cache.iterdir() if (p / "vectors.json").is_file()]
    assert len(entries) == 1  # one entry, the parent's, read by the workers
    one_job = run_process("batch", lines, "--vectors", vectors, "--limit", "3", ATTNCLI_CACHE_DIR=str(cache))
    assert one_job.stdout == two.stdout and one_job.returncode == 1
    assert [p for p in cache.iterdir() if (p / "vectors.json").is_file()] == entries


@pytest.mark.parametrize("options", [[], ["--heads", "2", "--qkv", "random"], ["--mask", "causal"],
                                     ["--mask", "self", "--temperature", "0.5"], ["--oov", "zero", "--keep-punct"]])
def test_batch_on_one_or_two_workers_writes_the_bytes_of_scores(tmp_path, options):
    """Workers write their own JSON: batch --jobs 1, --jobs 2 and scores on each line give
    the same bytes (batch's `line` key aside)."""
    rng = np.random.default_rng(len(options))
    words = ("the cat sat on a mat zzqx , dog ran to the park . she said that he was not there").split()
    lines = [" ".join(rng.choice(words, size=rng.integers(2, 9))) for _ in range(300)]  # three chunks of lines
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(lines) + "\n")
    one_job = run("batch", corpus, *options)
    two_jobs = run("batch", corpus, *options, "--jobs", "2")
    assert one_job.stdout == two_jobs.stdout and one_job.exit_code == two_jobs.exit_code
    for n, (line, out) in enumerate(zip(lines, one_job.stdout.splitlines()), start=1):
        single = run("scores", line, *options, "--json")
        if '"error"' in out[:40]:
            assert single.exit_code == 1
            continue
        assert out == f'{{"line":{n},' + single.stdout.rstrip("\n")[1:]


def test_batch_workers_leave_no_file_and_need_no_folder(tmp_path, monkeypatch):
    """--jobs 2's workers leave each chunk's lines in a folder of the run, which is gone at
    the end; where no folder can be made, the lines come through the pipe, the same bytes."""
    import tempfile

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"the cat sat on mat number {n}\n" for n in range(700)))
    one_job = run("batch", corpus)
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    two_jobs = run("batch", corpus, "--jobs", "2")
    assert two_jobs.exit_code == 0 and two_jobs.stdout == one_job.stdout and len(two_jobs.stdout.splitlines()) == 700
    assert list(spool.iterdir()) == []
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "not-a-folder"))
    assert run("batch", corpus, "--jobs", "2").stdout == one_job.stdout


def test_a_ctrl_c_while_the_workers_start_is_raised_not_lost(monkeypatch):
    """A SIGINT that comes while the workers start (here: as each has started) is held,
    not ignored, and raised as soon as they are all up, which ends them."""
    import multiprocessing
    import signal

    process = multiprocessing.get_context("spawn").Process
    start = process.start

    def started(self):
        start(self)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as the workers start

    monkeypatch.setattr(process, "start", started)
    items = [(n, "the cat sat", None) for n in range(1, 2001)]
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        list(batches.run(items, batches.Job(), jobs=2))
    assert multiprocessing.active_children() == []  # the workers were ended, and reaped
    assert signal.getsignal(signal.SIGINT) is before
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()  # nothing left blocked


def test_workers_that_cannot_load_the_vectors_give_each_line_the_error(tmp_path):
    """A worker that fails to load must not end: its lines, and the run, would be lost with
    it. In a child process, so that a run that never ends is killed."""
    gone = tmp_path / "gone.txt"
    script = ("import json, sys; from attncli.corpus import batch\n"
              f"items = [(n, 'the cat', None) for n in range(1, 6)]\n"
              f"print(json.dumps(list(batch.run(items, batch.Job(source={str(gone)!r}), jobs=2))))\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        raise AssertionError("the run never ended")
    assert proc.returncode == 0 and err == b"", err.decode()[-2000:]
    results = json.loads(out)
    assert [r["line"] for r in results] == [1, 2, 3, 4, 5]
    assert all(r["error"].startswith("a worker could not load the vectors: ") and "no such file" in r["error"]
               for r in results)


def test_in_order_with_workers_gives_each_answer_or_its_failure_in_order():
    """Workers of in_order answer in input order; a chunk whose answer cannot be pickled (a
    memoryview) is a failure raised in its turn, never a worker's traceback and a lost run."""
    from attncli.corpus import workers

    assert list(workers.in_order(len, [b"a", b"bb", b"ccc", b"dddd", b""], max, 0, jobs=2)) == [1, 2, 3, 4, 0]
    results = workers.in_order(memoryview, [b"ab", b"cd"], max, 0, jobs=2)
    with pytest.raises(RuntimeError, match=r"a worker's answer could not be sent back \(TypeError: .*memoryview"):
        next(results)


def test_word_vectors_lines_are_attended_one_at_a_time(glove):
    """Word vectors gain nothing by batches: a chunk's lines are attended as each document is
    written, so its T x T arrays are never held together; a model's run in batches."""
    from attncli.corpus import batch as batches

    chunk = [(1, "the earth is like an orange", None), (2, "the cat sat", None)]
    assert batches.batched(chunk, glove, batches.Job()) == {}
    assert glove.batches is False
