"""attncli train: a corpus to projections, through the CLI: the file it writes is read by
--qkv, the same seed gives the same bytes, and every mistake is one line."""

from __future__ import annotations

import json
import time
import zipfile

import numpy as np
import pytest

from clirunner import fails, ok, one, run

WORDS = ("the cat sat on a mat and the dog ran to the park while a bird sang in the tree "
         "she said that he was not there but they were here with us today").split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS, size=rng.integers(5, 12))) for _ in range(300)]
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


ARGS = ["--steps", "40", "--batch", "32", "--out-vocab", "25", "--probe", "the cat sat on a mat|the dog sat in the park",
        "--token", "sat", "--json"]


def test_train_writes_projections_that_qkv_reads_and_a_summary(corpus, tmp_path):
    out = tmp_path / "proj.npz"
    doc = one(run("train", corpus, "-o", out, *ARGS))
    assert doc["command"] == "train" and doc["steps"] == 40 and doc["path"] == str(out)
    assert doc["held_out_loss"]["trained"] < doc["held_out_loss"]["untrained"]
    with np.load(out) as f:
        assert sorted(f.files) == ["W_key", "W_query", "W_value", "b_out", "out_words", "train"]
        W = {k: f[k] for k in ("W_query", "W_key", "W_value")}
        record = json.loads(str(f["train"][0]))
    assert all(w.shape == (50, 50) for w in W.values()) and not np.allclose(W["W_query"], np.eye(50))
    assert record["corpus"]["bytes"] == corpus.stat().st_size and record["options"]["seed"] == 0
    assert record["held_out_loss"][0]["step"] == 0 and record["held_out_loss"][-1]["step"] == 40
    # the trained projections are what --qkv FILE.npz uses
    scored = one(run("scores", "the cat sat on a mat", "--qkv", out, "--mask", "self", "--json"))
    assert scored["qkv"]["kind"] == "file"
    assert doc["probe"]["after"]["sentences"][0]["top"][0]["weight"] == pytest.approx(
        max(scored["weights"][2]), abs=1e-12)


def test_the_same_seed_gives_the_same_bytes(corpus, tmp_path):
    a, b, c = tmp_path / "a.npz", tmp_path / "b.npz", tmp_path / "c.npz"
    for path, seed in ((a, "0"), (b, "0"), (c, "1")):
        assert run("train", corpus, "-o", path, *ARGS, "--seed", seed).exit_code == 0
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    assert all(info.date_time == (1980, 1, 1, 0, 0, 0) for info in zipfile.ZipFile(a).infolist())


def test_the_same_seed_gives_the_same_bytes_on_one_blas_thread_or_two(corpus, tmp_path):
    """OpenBLAS adds a product's sums in another order on each thread count: unpinned, these
    two files differed from their 15th byte on (weights 1e-15 apart). A batch of 256 is large
    enough for it to split the work."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    paths = []
    for threads in ("1", "2"):
        env = {k: v for k, v in os.environ.items() if k not in ("ATTNCLI_VECTORS", "ATTNCLI_MODEL")}
        env.update(OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
        paths.append(tmp_path / f"threads-{threads}.npz")
        done = subprocess.run([str(Path(sys.executable).parent / "attncli"), "train", str(corpus), "-o", str(paths[-1]),
                               *ARGS, "--steps", "5", "--batch", "256"], env=env, capture_output=True, timeout=120)
        assert done.returncode == 0 and done.stderr == b"", done.stderr
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_an_existing_file_needs_force(corpus, tmp_path):
    out = tmp_path / "proj.npz"
    out.write_bytes(b"mine")
    fails(run("train", corpus, "-o", out, *ARGS), "exists; give --force", code=2)
    assert out.read_bytes() == b"mine"
    assert run("train", corpus, "-o", out, *ARGS, "--force").exit_code == 0


@pytest.mark.parametrize("args,words,code", [
    (["--steps", "0"], ["--steps"], 2),
    (["--lr", "0"], ["--lr"], 2),
    (["--lr", "nan"], ["--lr"], 2),
    (["--holdout", "1"], ["--holdout", "not between 0 and 1"], 2),
    (["--probe", "just one sentence"], ["--probe takes two sentences"], 2),
    (["--token", "zebra"], ["'zebra' is not among the tokens"], 1),
])
def test_bad_options(corpus, tmp_path, args, words, code):
    out = tmp_path / "proj.npz"
    fails(run("train", corpus, "-o", out, *ARGS, *args), *words, code=code)
    assert not out.exists()


def test_a_corpus_too_small_or_empty(tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("the cat sat\n", encoding="utf-8")
    fails(run("train", small, "-o", tmp_path / "p.npz", *ARGS), "examples to learn from", "at least 100")
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    fails(run("train", empty, "-o", tmp_path / "p.npz", *ARGS), "is empty")
    fails(run("train", tmp_path / "none.txt", "-o", tmp_path / "p.npz", *ARGS), "no such file")
    assert not (tmp_path / "p.npz").exists()


def test_a_loss_that_is_no_longer_a_number_stops_at_once(corpus, tmp_path, monkeypatch):
    from attncli.learning import learn

    real, calls = learn.forward, []

    def poisoned(*a, **k):  # the fourth step's loss overflows
        loss, kept = real(*a, **k)
        calls.append(1)
        return (float("nan") if len(calls) > 4 else loss), kept

    monkeypatch.setattr(learn, "forward", poisoned)
    out = tmp_path / "proj.npz"
    fails(run("train", corpus, "-o", out, *ARGS), "the loss is nan at step 4", "nothing was written", "smaller --lr")
    assert not out.exists()


def test_ctrl_c_stops_after_the_step_and_writes_what_was_learned(corpus, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "proj.npz"
    env = {k: v for k, v in os.environ.items() if k not in ("ATTNCLI_VECTORS", "ATTNCLI_MODEL")}
    proc = subprocess.Popen([sys.executable, "-m", "attncli", "train", str(corpus), "-o", str(out), *ARGS[:-1],
                             "--steps", "10000000", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # the Ctrl-C never arrived: the run of 10,000,000 steps is not left going
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    lines = stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: warning: stopped after "), lines
    doc = json.loads(stdout)
    assert 0 < doc["steps"] < 10_000_000
    with np.load(out) as f:
        assert json.loads(str(f["train"][0]))["steps_done"] == doc["steps"]


@pytest.mark.parametrize("gap", [0, 0.01, 0.02, 0.03, 0.05, 0.1])
def test_a_second_ctrl_c_as_train_ends_is_ignored(corpus, tmp_path, gap):
    """Ctrl-C typed twice at the terminal, `gap` seconds apart: the first stops training after
    the step under way, the second comes as train writes the file and its summary, or as its
    process exits. Exit 130, the file of what was learned, the summary and the one warning,
    twice for each gap. Train gave Ctrl-C back to the handler that raises, and the run gave it
    back to Python's before the process exited: a second Ctrl-C 10 to 30 ms after the first
    (here; 50 to 100 ms where the process took longer to end) then killed the process by the
    signal (-2), or said "interrupted" after the warning, in 12 runs of 15."""
    import os
    import signal

    import ptys

    out = tmp_path / "proj.npz"
    for _ in range(2):
        with open(tmp_path / "summary.json", "wb") as stdout:
            terminal = ptys.start(["train", corpus, "-o", out, "--force", *ARGS[:-1], "--steps", "10000000", "--json"],
                                  on_tty=("stderr",), stdout=stdout, env={"ATTNCLI_VECTORS": None})
        try:
            terminal.wait_for("steps")  # the bar: training has begun
            terminal.type(b"\x03")
            time.sleep(gap)
            terminal.type(b"\x03")
            status, _, _, _ = terminal.finish(timeout=60)
        finally:
            if terminal.proc.poll() is None:  # the Ctrl-C never arrived: the run of 10,000,000 steps is not left going
                os.killpg(terminal.proc.pid, signal.SIGKILL)
        assert status == 130, (status, terminal.shown())
        shown = [line.replace("^C", "") for line in terminal.shown() if line.strip("^C ")]  # the echoed Ctrl-Cs aside
        assert len(shown) == 1 and shown[0].startswith("attncli: warning: stopped after "), shown
        doc = json.loads((tmp_path / "summary.json").read_text())
        with np.load(out) as f:
            assert 0 < json.loads(str(f["train"][0]))["steps_done"] == doc["steps"] < 10_000_000


def test_trained_projections_give_context_vectors_nearest_words(corpus, tmp_path):
    """What train learned lives among the word vectors (d_k = d, learned to predict words),
    so compare and context list the words nearest its context vectors; other projections
    files do not."""
    from attncli.words.load import load_vectors

    out = tmp_path / "proj.npz"
    assert run("train", corpus, "-o", out, *ARGS).exit_code == 0
    doc = one(run("context", "the cat sat on a mat", "--token", "cat", "--qkv", out, "--mask", "self",
                  "--neighbors", "4", "--json"))
    assert doc["qkv"]["trained"] is True and len(doc["neighbors"]) == 4
    vectors = load_vectors()
    z = np.array(doc["context"])
    found = vectors.nearest(z, 4, exclude={"cat"})
    assert [n["word"] for n in doc["neighbors"]] == [w for w, _ in found]
    plain = tmp_path / "plain.npz"
    with np.load(out) as f:
        np.savez(plain, **{k: f[k] for k in ("W_query", "W_key", "W_value")})
    other = one(run("context", "the cat sat on a mat", "--token", "cat", "--qkv", plain, "--json"))
    assert "trained" not in other["qkv"] and other["neighbors"] == []


def test_jsonl_lines_give_the_same_corpus(corpus, tmp_path):
    lines = corpus.read_text(encoding="utf-8").splitlines()
    jsonl = tmp_path / "corpus.jsonl"
    jsonl.write_text("\n".join(json.dumps({"body": line, "id": k}) for k, line in enumerate(lines)) + "\nnot json\n",
                     encoding="utf-8")
    plain, as_json = tmp_path / "a.npz", tmp_path / "b.npz"
    assert run("train", corpus, "-o", plain, *ARGS).exit_code == 0
    result = run("train", jsonl, "--jsonl", "--field", "body", "-o", as_json, *ARGS)
    assert result.exit_code == 0
    assert result.stderr.startswith("attncli: warning: ") and "1 of 301 lines skipped (line 301: not JSON" in result.stderr
    with np.load(plain) as a, np.load(as_json) as b:
        for name in ("W_query", "W_key", "W_value", "b_out"):
            np.testing.assert_array_equal(a[name], b[name])


def test_heads_train_apart_and_the_file_shows_them_with_heads(corpus, tmp_path):
    out = tmp_path / "proj.npz"
    doc = one(run("train", corpus, "-o", out, *ARGS, "--heads", "2"))
    assert doc["train"]["options"]["heads"] == 2
    scored = one(run("scores", "the cat sat on a mat", "--qkv", out, "--heads", "2", "--mask", "self", "--json"))
    top = doc["probe"]["after"]["sentences"][0]["top"][0]
    assert top["weight"] == pytest.approx(max(scored["weights"][2]), abs=1e-12)
    assert scored["tokens"][[i for i, w in enumerate(scored["weights"][2]) if w == max(scored["weights"][2])][0]] == \
        top["token"]
    fails(run("train", corpus, "-o", tmp_path / "x.npz", *ARGS, "--heads", "3"), "--heads 3 does not divide d = 50",
          "choose one of 1, 2, 5, 10, 25, 50")


def test_sizes_are_checked_against_memory_before_training(corpus, tmp_path, monkeypatch):
    from attncli.learning import train
    from attncli.system import limits

    need = train.working_bytes(train.TrainOptions(batch=65_536, window=100), 40, 50, 10_000)
    assert need > 5e9  # (65,536 x 200 x 50) float64 arrays, several of them
    monkeypatch.setattr(limits, "available", lambda: 10**9)
    out = tmp_path / "proj.npz"
    fails(run("train", corpus, "-o", out, *ARGS, "--batch", "65536", "--window", "100"),
          "training with --batch 65,536, --window 100 and", "output words needs about", "smaller --batch")
    assert not out.exists()


def test_the_output_is_never_the_corpus(tmp_path):
    corpus = tmp_path / "corpus.npz"  # a corpus named so, that -o could otherwise replace
    corpus.write_text("the cat sat on the mat\n" * 200, encoding="utf-8")
    fails(run("train", corpus, "-o", corpus, "--force", *ARGS), "is the same file as CORPUS", code=2)
    assert corpus.read_text(encoding="utf-8").startswith("the cat sat")


def test_examples_keep_visible_what_each_objective_says():
    """hide and mask: the words within --window either side, never the word; next: the
    --window words up to the query, which is the word before the target (itself left out
    with mask_self)."""
    from attncli.learning.train import TrainOptions, examples_of

    s = [np.arange(10, 16), np.arange(20, 23)]  # two sentences: rows 10..15, 20..22
    out = np.array([*range(10, 16), *range(20, 23)])  # every word an output word, in order

    def visible(ex, n):
        return sorted(int(r) for r in ex.context[n] if r >= 0)

    hide = examples_of(s, out, TrainOptions(window=2))
    assert hide.query.tolist() == [*range(10, 16), 20, 21, 22] and hide.target.tolist() == list(range(9))
    assert visible(hide, 2) == [10, 11, 13, 14] and visible(hide, 0) == [11, 12] and visible(hide, 6) == [21, 22]
    assert hide.context.shape == (9, 4) and (hide.context[0] < 0).sum() == 2
    nxt = examples_of(s, out, TrainOptions(window=2, objective="next"))
    assert nxt.query.tolist() == [10, 11, 12, 13, 14, 20, 21] and nxt.target.tolist() == [1, 2, 3, 4, 5, 7, 8]
    assert visible(nxt, 0) == [10] and visible(nxt, 3) == [12, 13] and visible(nxt, 5) == [20]
    strict = examples_of(s, out, TrainOptions(window=2, objective="next", mask_self=True))
    assert strict.query.tolist() == [11, 12, 13, 14, 21]  # a first word has nothing before it
    assert visible(strict, 0) == [10] and visible(strict, 2) == [11, 12] and visible(strict, 4) == [20]
    few = examples_of(s, np.array([12, 21]), TrainOptions(window=1))  # only output words are hidden
    assert few.query.tolist() == [12, 21] and few.target.tolist() == [0, 1] and visible(few, 1) == [20, 22]


@pytest.mark.parametrize("objective,extra", [("mask", ["mask"]), ("next", []), ("hide", [])])
def test_each_objective_learns_and_says_how_its_probe_is_masked(corpus, tmp_path, objective, extra):
    out = tmp_path / "proj.npz"
    doc = one(run("train", corpus, "-o", out, *ARGS, "--objective", objective))
    assert doc["held_out_loss"]["trained"] < doc["held_out_loss"]["untrained"]
    assert doc["train"]["options"]["objective"] == objective
    assert doc["probe"]["after"]["mask"] == ("causal" if objective == "next" else "self")
    with np.load(out) as f:
        assert sorted(f.files) == sorted(["W_key", "W_query", "W_value", "b_out", "out_words", "train", *extra])
        if objective == "mask":
            assert f["mask"].shape == (50,)
    mask = "causal" if objective == "next" else "self"
    scored = one(run("scores", "the dog sat in the park", "--qkv", out, "--mask", mask, "--json"))
    row = scored["weights"][2]  # "sat": the probe's numbers are those of --mask causal or self
    assert sorted(row, reverse=True)[0] == pytest.approx(doc["probe"]["after"]["sentences"][1]["top"][0]["weight"],
                                                        abs=1e-12)


def test_narrow_queries_and_keys_start_at_the_principal_directions(corpus, tmp_path):
    out = tmp_path / "proj.npz"
    doc = one(run("train", corpus, "-o", out, *ARGS, "--d-k", "10", "--heads", "2"))
    assert doc["train"]["d_k"] == 10
    with np.load(out) as f:
        assert f["W_query"].shape == f["W_key"].shape == (50, 10) and f["W_value"].shape == (50, 50)
    scored = one(run("scores", "the cat sat on a mat", "--qkv", out, "--heads", "2", "--json"))
    assert scored["qkv"]["d_k"] == 10 and scored["qkv"]["d_v"] == 50 and scored["qkv"]["trained"]
    ctx = one(run("context", "the cat sat on a mat", "--token", "sat", "--qkv", out, "--heads", "2", "--json"))
    assert len(ctx["context"]) == 50 and ctx["neighbors"]  # the values, so the context vectors, keep d: words near
    # where it started: W_Q = W_K, orthonormal columns spanning the output words' top directions
    from attncli.learning.train import principal

    E = np.random.default_rng(0).normal(size=(40, 6)) * np.arange(1, 7)
    U = principal(E, 3)
    np.testing.assert_allclose(U.T @ U, np.eye(3), atol=1e-12)
    values, vectors = np.linalg.eigh(E.T @ E)
    np.testing.assert_allclose(np.abs(U.T @ vectors[:, ::-1][:, :3]), np.eye(3), atol=1e-9)
    fails(run("train", corpus, "-o", out, *ARGS, "--d-k", "60", "--force"), "--d-k 60 is not from 1 to d = 50")
    fails(run("train", corpus, "-o", out, *ARGS, "--d-k", "10", "--heads", "4", "--force"),
          "--heads 4 does not divide both --d-k 10 and d = 50", "1, 2, 5, 10")


def test_epochs_set_the_steps_and_exclude_steps(corpus, tmp_path):
    out = tmp_path / "proj.npz"
    args = ARGS[2:]  # without --steps
    doc = one(run("train", corpus, "-o", out, *args, "--epochs", "0.5"))
    assert doc["steps"] == doc["train"]["steps"] == int(np.ceil(0.5 * doc["examples"] / 32))
    fails(run("train", corpus, "-o", out, *ARGS, "--epochs", "1", "--force"), "give --steps or --epochs, not both",
          code=2)
    fails(run("train", corpus, "-o", out, *args, "--epochs", "0", "--force"), "--epochs", code=2)


def test_a_probe_word_with_nothing_before_it_under_next_and_mask_self(corpus, tmp_path):
    out = tmp_path / "proj.npz"
    fails(run("train", corpus, "-o", out, *ARGS[:-5], "--probe", "sat on a mat|the dog sat", "--token", "sat",
              "--objective", "next", "--mask-self", "--json"), "'sat' is the first word of 'sat on a mat'")
    assert not out.exists()


def test_an_out_vocab_larger_than_the_corpus_uses_what_there_is_with_a_note(corpus, tmp_path):
    out = tmp_path / "proj.npz"
    args = [*ARGS[:4], "--out-vocab", "20", *ARGS[6:]]  # --out-vocab given, smaller than the corpus's 30 words
    result = run("train", corpus, "-o", out, *ARGS[:4], "--out-vocab", "100000", *ARGS[6:])
    doc = one(result, stderr=None)
    words = len(set(WORDS))
    assert doc["train"]["out_vocab"] <= words < 100000
    assert result.stderr == (f"attncli: warning: --out-vocab 100,000: the corpus has {doc['train']['out_vocab']:,} "
                             "words with vectors outside its held-out lines; all of them were used\n")
    assert one(run("train", corpus, "-o", out, *args, "--force")) and not run(
        "train", corpus, "-o", out, *args, "--force").stderr


def test_a_run_too_long_or_diverging_is_refused_in_one_line(corpus, tmp_path):
    out = tmp_path / "p.npz"
    fails(run("train", corpus, "-o", out, *ARGS[2:], "--epochs", "1e308"), "--epochs", "at most 1,000,000", code=2)
    fails(run("train", corpus, "-o", out, *ARGS[2:], "--epochs", "999999"), "more than 10,000,000; give fewer --epochs")
    fails(run("train", corpus, "-o", out, *ARGS, "--lr", "1e300"), "overflow at step", "give a smaller --lr")
    assert not out.exists()
    fails(run("train", corpus, "-o", out, *ARGS[:6], "--probe", "cat|the cat sat", "--token", "cat", "--json"),
          "'cat' is the only word of 'cat' with a vector")
    fails(run("train", corpus, "-o", out, *ARGS[:6], "--probe", "the zzqx sat|the cat", "--token", "zzqx", "--json"),
          "give a --token the sentence has")


def test_the_commands_objectives_are_the_librarys_and_train_is_not_imported_to_start():
    import subprocess
    import sys

    from attncli.cli import train as command
    from attncli.learning import projections as library

    objective = next(param for param in command.train.params if param.name == "objective")
    assert tuple(objective.type.choices) == library.OBJECTIVES  # --objective offers the library's own
    code = "import sys, attncli.cli; print('attncli.learning.train' in sys.modules, 'attncli.learning.learn' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split() == ["False", "False"]


def test_projections_too_large_to_learn_are_refused_before_any_is_made(corpus, tmp_path, monkeypatch):
    """Vectors of d = 2,000: W_query, W_key and W_value, each with a gradient and two Adam
    moments, take 384 MB; with less memory than that the run says so before np.eye(d)."""
    from attncli.system import limits

    wide = tmp_path / "wide.txt"
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "in", "park"]
    wide.write_text(f"{len(words)} 2000\n" + "".join(f"{w} " + " ".join(["0.5"] * 2000) + "\n" for w in words),
                    encoding="utf-8")
    monkeypatch.setattr(limits, "available", lambda: 300 << 20)
    eye = np.eye
    monkeypatch.setattr(np, "eye", lambda *a, **k: pytest.fail("np.eye was called") or eye(*a, **k))
    fails(run("train", corpus, "-o", tmp_path / "w.npz", "--vectors", wide, *ARGS),
          "learning W_query, W_key (2,000 x 2,000) and W_value (2,000 x 2,000) needs about 384.0 MB",
          "smaller d, or a smaller --d-k")
    assert not (tmp_path / "w.npz").exists()


# --- a file train wrote, shown as it was trained ----------------------------------------------

SENTENCE = "the cat sat on a mat"

# every command that takes --qkv, as a sentence's (or a corpus's) JSON run; and the numbers it computed
QKV_COMMANDS = {
    "scores": (["scores", SENTENCE], lambda docs: docs[0]["weights"]),
    "context": (["context", SENTENCE, "--token", "cat"], lambda docs: docs[0]["context"]),
    "compare": (["compare", SENTENCE, "the dog sat in the park", "--token", "sat"],
                lambda docs: docs[0]["context_cosine"]),
    "neighbors": (["neighbors", "cat", "--context", SENTENCE], lambda docs: docs[0]["context"]),
    "explain": (["explain", SENTENCE], lambda docs: docs[0]["steps"]["weights"]),
    "heads": (["heads", SENTENCE], lambda docs: docs[0]["weights"]),
    "batch": (["batch", "-"], lambda docs: [doc["weights"] for doc in docs]),
    "stats": (["stats", "-", "--random-seeds", "0", "--no-shuffled"], lambda docs: docs),
}
CORPUS_LINES = "the cat sat on a mat\nthe dog sat in the park\n"


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """Files train wrote: two heads of hide, and next's one."""
    folder = tmp_path_factory.mktemp("trained")
    files = {"hide2": folder / "hide2.npz", "next": folder / "next.npz"}
    assert run("train", corpus, "-o", files["hide2"], *ARGS, "--steps", "5", "--heads", "2").exit_code == 0
    assert run("train", corpus, "-o", files["next"], *ARGS, "--steps", "5", "--objective", "next",
               "--probe", "the cat sat on a mat|the dog sat").exit_code == 0
    return files


def qkv_run(command: str, path, *extra, format_args=("--json",)):
    args, _ = QKV_COMMANDS[command]
    stdin = CORPUS_LINES if command in ("batch", "stats") else None
    fmt = () if command == "batch" else format_args
    return run(*args, "--qkv", path, *extra, *fmt, input=stdin)


def settings(command: str, docs: list[dict]):
    """(heads, mask, from_file) as a command's JSON says them: stats by its records."""
    if command == "stats":
        return len(docs), None, None
    doc = docs[0]["sentences"][0] if command == "compare" else docs[0]
    if command == "neighbors":  # its document has no qkv: what it computed is the proof
        return None, None, None
    return doc["qkv"]["heads"], doc["mask"], doc["qkv"].get("from_file")


@pytest.mark.parametrize("command", QKV_COMMANDS)
def test_a_trained_file_is_shown_with_its_heads_and_mask(trained, command):
    """Without --heads and --mask, the file's own: the same numbers as --heads 2 --mask self."""
    _, numbers = QKV_COMMANDS[command]
    taken = ok(qkv_run(command, trained["hide2"]))
    given = ok(qkv_run(command, trained["hide2"], "--heads", "2", "--mask", "self"))
    assert numbers(taken) == numbers(given)
    plain = ok(qkv_run(command, trained["hide2"], "--heads", "1", "--mask", "none"), stderr=None)
    assert numbers(plain) != numbers(taken)
    if command == "stats":
        assert settings(command, taken)[0] == 2 and [r["head"] for r in taken] == [1, 2]
    elif command != "neighbors":
        assert settings(command, taken) == (2, "self", ["heads", "mask"])
        assert settings(command, given) == (2, "self", None)
        doc = taken[0]["sentences"][0] if command == "compare" else taken[0]
        assert doc["qkv"]["train"] == {"objective": "hide", "heads": 2, "mask": "self"}
    if command == "compare":
        assert taken[0]["notes"] == [f"{trained['hide2']} is shown with --heads 2 and --mask self, as attncli train "
                                     "trained it; give --heads or --mask to show it otherwise"]
        assert given[0]["notes"] == []


def test_next_is_shown_causal_and_a_table_says_so_on_stderr(trained):
    doc = one(qkv_run("scores", trained["next"]))
    assert (doc["qkv"]["heads"], doc["mask"], doc["qkv"]["from_file"]) == (1, "causal", ["heads", "mask"])
    assert all(w == 0 for row, weights in enumerate(doc["weights"]) for w in weights[row + 1:])
    for command in ("scores", "stats"):
        table = qkv_run(command, trained["next"], format_args=("--format", "table", "--no-color"))
        assert table.exit_code == 0 and table.stdout
        assert table.stderr == (f"attncli: note: {trained['next']} is shown with --heads 1 and --mask causal, as "
                                "attncli train trained it; give --heads or --mask to show it otherwise\n")
    # only what was not given is taken, and said
    table = qkv_run("scores", trained["next"], "--heads", "1", format_args=("--format", "table", "--no-color"))
    assert table.stderr == (f"attncli: note: {trained['next']} is shown with --mask causal, as attncli train "
                            "trained it; give --mask to show it otherwise\n")


@pytest.mark.parametrize("command", QKV_COMMANDS)
def test_a_mask_it_was_not_trained_with_is_one_warning(trained, command):
    result = qkv_run(command, trained["hide2"], "--mask", "causal")
    assert result.exit_code == 0
    assert result.stderr == (f"attncli: warning: {trained['hide2']} was trained to be shown with --heads 2 --mask self "
                             "(--objective hide), not with --mask causal\n")
    docs = ok(result, stderr=None)
    if command not in ("stats", "neighbors"):
        assert settings(command, docs) == (2, "causal", ["heads"])


@pytest.mark.parametrize("command", QKV_COMMANDS)
@pytest.mark.parametrize("heads", ["3", "5", "4"])
def test_heads_that_cut_the_files_own_are_refused(trained, command, heads):
    """3 divides neither d = 50 nor 2, 5 divides d but cuts each of the two heads of 25
    columns, 4 divides neither: each is the file's heads named, exit 2."""
    fails(qkv_run(command, trained["hide2"], "--heads", heads),
          f"--heads {heads} does not fit {trained['hide2']}, which attncli train made with --heads 2",
          "leave out --heads, or give 1 or 2", code=2)


def test_heads_that_join_the_files_own_are_shown_with_a_warning(trained):
    result = qkv_run("scores", trained["hide2"], "--heads", "1")
    assert result.stderr == (f"attncli: warning: {trained['hide2']} was trained to be shown with --heads 2 --mask self "
                             "(--objective hide), not with --heads 1\n")
    doc = ok(result, stderr=None)[0]
    assert (doc["qkv"]["heads"], doc["mask"], doc["qkv"]["from_file"]) == (1, "self", ["mask"])


def test_a_mistake_after_the_settings_is_still_one_line(trained):
    """The warning waits for the command's own checks: a usage error is said alone."""
    fails(run("scores", SENTENCE, "--qkv", trained["hide2"], "--mask", "none", "--raw", "--rollout"),
          "--raw and --rollout show different matrices", code=2)
    for extra in (("--format", "table"), ("--format", "table", "--mask", "none")):  # a note, a warning: unsaid
        fails(run("scores", "zzqx qqzx", "--qkv", trained["hide2"], *extra), "none of the tokens (zzqx qqzx)")


def test_files_train_did_not_write_keep_what_is_given(trained, tmp_path):
    init = tmp_path / "init.npz"
    assert run("qkv", "init", "-o", init, "--json").exit_code == 0
    plain = tmp_path / "plain.npz"
    with np.load(trained["hide2"]) as f:
        np.savez(plain, **{k: f[k] for k in ("W_query", "W_key", "W_value")})
    for path in (init, plain):
        doc = one(run("scores", SENTENCE, "--qkv", path, "--json"))
        assert (doc["qkv"]["heads"], doc["mask"]) == (1, "none")
        assert "from_file" not in doc["qkv"] and "train" not in doc["qkv"]
        assert one(run("scores", SENTENCE, "--qkv", path, "--heads", "5", "--json"))["qkv"]["heads"] == 5


# --- the bar ----------------------------------------------------------------------------------

def bar_line(width: int, done: int, total: int | None, note: str, rate: str = "1,234 steps/s") -> str:
    """The bar's one line as a console of `width` columns draws it."""
    import io

    from rich.console import Console

    from attncli.views.progress import fitted_bar

    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=True)
    bar = fitted_bar("steps", console)
    task = bar.add_task("steps", total=None, rate="", note="")
    bar.update(task, completed=done, total=total, rate=rate, note=note)
    console.print(bar.make_tasks_table(bar.tasks))
    (line,) = console.file.getvalue().splitlines()
    return line


def test_the_bars_note_is_the_losses_in_a_few_columns():
    from attncli.cli.train import bar_note

    assert bar_note(4.1234, {"untrained": 7.4791}) == "loss 4.12 (untrained 7.48)"
    assert bar_note(4.1234, {"untrained": 7.4791, "held-out": 5.1249}) == "loss 4.12, held-out 5.12 (untrained 7.48)"


@pytest.mark.parametrize("total", [1500, 10_000_000, None])
def test_the_bar_keeps_its_count_time_and_losses_at_80_columns(total):
    note = "loss 4.12, held-out 5.12 (untrained 7.48)"
    line = bar_line(80, 407, total, note)
    count = f"407/{total}" if total else "407/?"
    assert len(line) <= 80 and line.startswith("steps ") and count in line and "…" not in line
    if total:
        assert "-:--:--" in line  # the time left, whole (unknown this early)
    assert line.rstrip().endswith(note) if total else True
    if total == 1500:  # room for a bar between the unit and the count, not for the rate
        assert "━" in line and "steps/s" not in line
    assert "1,234 steps/s" in bar_line(160, 407, total, note)  # a wide console has the rate too


@pytest.mark.parametrize("width", range(20, 161, 7))
def test_the_bar_fits_every_width_and_drops_the_least_needed_first(width):
    note = "loss 4.12, held-out 5.12 (untrained 7.48)"
    line = bar_line(width, 407, 1500, note)
    assert len(line) <= width and "407/1500" in line  # the count always whole
    assert ("-:--:--" in line) == (width >= 17)  # then the time left
    if width >= 17 + 6 + 1 + len(note):
        assert note in line  # then the unit and the whole note, before the bar and the rate
    elif "loss" in line:
        assert line.rstrip().endswith("…")  # cut short at its end
    if "steps/s" in line:
        assert note in line and "━" in line


def test_the_bar_of_a_real_run_on_an_80_column_terminal(corpus, tmp_path):
    """A pseudo-terminal of 80 columns: once the held-out loss appears, each frame holds the
    count, the time left and the losses whole."""
    import re

    import ptys

    out = tmp_path / "proj.npz"
    with open(tmp_path / "summary.json", "wb") as stdout:
        code, _, err, screen = ptys.run(["train", corpus, "-o", out, *ARGS, "--steps", "4000"], on_tty=("stderr",),
                                        cols=80, stdout=stdout)
    assert code == 0, err
    frames = [ptys.plain(f) for f in re.split(r"\r|\n|\x1b\[2K|\x1b\[1A", screen)]
    held = [f for f in frames if "held-out" in f]
    assert held, frames[-5:]
    for frame in held:
        assert len(frame) <= 80, frame
        assert re.search(r"steps .*\b\d+/4000 \d:\d\d:\d\d loss \d+\.\d\d, held-out \d+\.\d\d \(untrained \d+\.\d\d\)$",
                         frame.rstrip()), frame


def test_explore_shows_a_trained_file_as_trained_and_warns_before_the_app(trained):
    """On a real terminal: the app's line of settings says the file's mask; a --mask given
    otherwise is one warning on the main screen, said before the app took the terminal."""
    import ptys

    pytest.importorskip("textual")
    for extra, mask, shown in (((), "self", []),
                               (("--mask", "causal"), "causal",
                                [f"attncli: warning: {trained['hide2']} was trained to be shown with --heads 2 --mask "
                                 "self (--objective hide), not with --mask causal"])):
        terminal = ptys.start(["explore", SENTENCE, "--qkv", trained["hide2"], *extra], rows=30, cols=140,
                              env={"ATTNCLI_DEBUG": None})
        terminal.wait_for(f"mask {mask}")
        # the app draws before its driver has the terminal in raw mode: a key typed in between
        # is echoed by the terminal itself, onto the main screen, and this test reads that screen
        time.sleep(0.5)
        terminal.type(b"h")  # a second head to go to: the file's two
        terminal.wait_for("head 1")
        terminal.type(b"q")
        code, _, _, _ = terminal.finish(timeout=30)
        assert code == 0
        assert [line for line in terminal.shown() if line] == shown
