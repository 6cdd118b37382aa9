"""attncli explore: the app driven headless by textual's Pilot, its numbers read back and
held against the library's documents for the same state; and its refusals."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import select
import signal
import sys
import time

import numpy as np
import pytest

pytest.importorskip("textual", reason="the explore extra: pip install 'attncli[explore]'")
from attncli.analyze import Options, scores_doc  # noqa: E402
from attncli.load import load_vectors  # noqa: E402
import ptys  # noqa: E402
from clirunner import fails, run  # noqa: E402

SENTENCE = "The earth is like an orange"


def drive(keys, sentence=SENTENCE, size=(120, 40), **state):
    """Start the app, press the keys, and return (app, its state, its document)."""
    from attncli import explore

    vectors = load_vectors()
    app = explore.Explorer(vectors, explore.State(sentence, **state))

    async def go():
        async with app.run_test(size=size) as pilot:
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            return app.state, app.doc, app.text["grid"], app.text["side"]

    return asyncio.run(go())


def test_after_plus_twice_the_weights_are_those_of_temperature_1_2():
    state, doc, _, _ = drive(["plus", "plus"])
    assert state.opts.temperature == pytest.approx(1.2)
    expected = scores_doc(SENTENCE, load_vectors(), Options(temperature=1.2))
    np.testing.assert_array_equal(np.array(doc["weights"]), np.array(expected["weights"]))


@pytest.mark.parametrize("keys,changes", [
    (["m"], {"mask": "causal"}),
    (["m", "m"], {"mask": "self"}),
    (["s"], {"scale": 1.0}),
    (["minus"], {"temperature": 0.9}),
])
def test_each_key_recomputes_through_the_library(keys, changes):
    state, doc, _, _ = drive(keys)
    opts = dataclasses.replace(Options(), **changes)
    assert state.opts == opts
    expected = scores_doc(SENTENCE, load_vectors(), opts)
    np.testing.assert_array_equal(np.array(doc["weights"]), np.array(expected["weights"]))


def test_the_cursor_moves_and_stays_where_it_was_when_the_numbers_change():
    state, doc, grid, side = drive(["down", "down", "right", "m"])
    assert state.cursor == (2, 1)
    expected = scores_doc(SENTENCE, load_vectors(), Options(mask="causal"))
    w = expected["weights"][2][1]
    assert f"α = exp(scaled) / Σ_j' exp(scaled_ij') = {w:.4f}" in side
    assert f"ω = q_i · k_j = {expected['scores'][2][1]:.4f}" in side
    assert "row 2 'is', column 1 'earth'" in side


def test_heads_and_the_raw_scores():
    state, doc, _, side = drive(["h", "h", "r"], opts=Options(heads=2, qkv="random"))
    assert state.head == 2 and state.raw
    expected = scores_doc(SENTENCE, load_vectors(), Options(heads=2, qkv="random"))
    np.testing.assert_array_equal(np.array(doc["heads"][1]["scores"]), np.array(expected["heads"][1]["scores"]))
    state, _, _, _ = drive(["h", "a"], opts=Options(heads=2))
    assert state.head is None


def test_an_edited_sentence_replaces_the_old_and_a_bad_one_keeps_it():
    state, doc, grid, _ = drive(["e", *"orange juice".split()[0], "space", *"juice", "enter"])
    assert state.sentence.endswith("orange juice") and doc["tokens"][-2:] == ["orange", "juice"]
    from attncli import explore

    app = explore.Explorer(load_vectors(), explore.State(SENTENCE))

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("e")
            app.query_one("#ask").value = "zzqx qqzz"
            await pilot.press("enter")
            await pilot.pause()
            return app.state.sentence, app.news

    sentence, status = asyncio.run(go())
    assert sentence == SENTENCE and "vector" in status, status


def test_explain_steps_through_the_cursors_row():
    from attncli.analyze import explain_doc

    state, _, _, side = drive(["down", "x", "x"])
    assert state.step == 1 and "explain 2/8: Q: its query" in side
    state, _, _, side = drive(["down", "x", "x", "x", "x"], opts=Options(qkv="random"))
    v = np.array(explain_doc(SENTENCE, load_vectors(), Options(qkv="random"), index=1)["steps"]["V"][1])
    assert "explain 4/8: V: its value" in side and f"|.| = {np.linalg.norm(v):.3f}" in side
    state, _, _, _ = drive(["x"] * 9)
    assert state.step is None  # past the last step, explain mode ends


def test_a_terminal_too_narrow_for_the_grid_shows_the_row_and_what_it_needs():
    long = " ".join(["orange"] * 40)
    _, _, grid, _ = drive([], sentence=long, size=(60, 30))
    assert "the grid needs" in grid and "columns" in grid


def test_explore_needs_a_terminal_and_a_good_sentence():
    fails(run("explore", SENTENCE), "explore needs a terminal", "attncli scores")
    fails(run("explore", "..."), "only punctuation")


def test_in_a_real_terminal_under_tmux(tmp_path):
    """The installed command in a real terminal (tmux): the screen holds the sentence's
    tokens, a key changes it, q ends it."""
    import shutil
    import subprocess
    import sys
    import time
    from pathlib import Path

    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("no tmux")
    attncli = str(Path(sys.executable).with_name("attncli"))
    session = f"attncli-explore-{tmp_path.name}"
    socket = ["-S", str(tmp_path / "tmux.sock")]
    subprocess.run([tmux, *socket, "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
                    f"{attncli} explore '{SENTENCE}'; sleep 5"], check=True)

    def screen() -> str:
        return subprocess.run([tmux, *socket, "capture-pane", "-p", "-t", session], capture_output=True,
                              text=True).stdout

    try:
        deadline = time.monotonic() + 30
        while "orange" not in screen() and time.monotonic() < deadline:
            time.sleep(0.2)
        first = screen()
        assert all(t in first for t in ("earth", "like", "orange")), first
        assert "temperature 1" in first
        subprocess.run([tmux, *socket, "send-keys", "-t", session, "+"], check=True)
        deadline = time.monotonic() + 10
        while "temperature 1.1" not in screen() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "temperature 1.1" in screen()
        subprocess.run([tmux, *socket, "send-keys", "-t", session, "q"], check=True)
        deadline = time.monotonic() + 10
        while "earth" in screen() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "earth" not in screen()  # the app ended and gave the screen back
    finally:
        subprocess.run([tmux, *socket, "kill-server"], capture_output=True)


@pytest.mark.parametrize("keys", [[], ["down", "down", "right", "r"], ["question_mark"]],
                         ids=["start", "raw-scores-at-a-cell", "keys"])
def test_screens_look_as_they_did(snap_compare, keys):
    """Snapshots (pytest-textual-snapshot): a change of layout shows as a diff of the SVGs
    kept in tests/__snapshots__; `pytest --snapshot-update` accepts a change."""
    from attncli import explore

    app = explore.Explorer(load_vectors(), explore.State(SENTENCE))
    assert snap_compare(app, press=keys, terminal_size=(110, 32))


def run_app(app, keys, then=None, size=(120, 40)):
    async def go():
        async with app.run_test(size=size) as pilot:
            for key in keys:
                await pilot.press(key)
            if then is not None:
                then(app)
                await pilot.press("enter")
            await pilot.pause()

    asyncio.run(go())
    return app


def test_compare_gives_the_cosine_compare_computes():
    from attncli import explore
    from attncli.analyze import compare_doc

    def other(app):
        app.query_one("#ask").value = "Orange is a bright color"

    app = run_app(explore.Explorer(load_vectors(), explore.State(SENTENCE, cursor=(5, 0))), ["c"], then=other)
    expected = compare_doc([SENTENCE, "Orange is a bright color"], load_vectors(), Options(), token="orange")
    assert f"cosine of its context vectors: {expected['context_cosine'][0][1]:.3f}" in app.text["side"]


def test_p_saves_the_screen_to_the_export_file(tmp_path):
    from attncli import explore

    saved = {}
    app = explore.Explorer(load_vectors(), explore.State(SENTENCE), export=str(tmp_path / "screen.svg"),
                           write=lambda path, svg: saved.update({path: svg}))
    run_app(app, ["p"])
    svg = saved[str(tmp_path / "screen.svg")]
    assert svg.startswith("<svg") and "orange" in svg and app.news == f"saved {tmp_path / 'screen.svg'}"
    app = run_app(explore.Explorer(load_vectors(), explore.State(SENTENCE)), ["p"])
    assert "give --export FILE.svg" in app.news


def test_a_models_layers_and_heads(tmp_path):
    pytest.importorskip("safetensors")
    from attncli import explore, models
    from attncli.analyze import Trained
    from tinybert import write_model

    model = Trained(models.load_model(str(write_model(tmp_path / "tiny"))), 2)
    app = run_app(explore.Explorer(model, explore.State("the earth is like an orange", layer=2)), ["l", "h"])
    assert app.state.layer == 1 and app.state.head == 1
    expected = scores_doc("the earth is like an orange", Trained(model.model, 1), Options())
    np.testing.assert_array_equal(np.array(app.doc["heads"][0]["weights"]), np.array(expected["heads"][0]["weights"]))
    app = run_app(explore.Explorer(model, explore.State("the earth is like an orange", layer=2)), ["plus"])
    assert "no temperature" in app.news and app.state.opts.temperature == 1.0


def test_without_textual_explore_says_what_to_install(monkeypatch):
    import sys

    import attncli

    monkeypatch.setitem(sys.modules, "attncli.explore", None)  # as if textual were not installed
    monkeypatch.delattr(attncli, "explore", raising=False)
    fails(run("explore", SENTENCE), "explore needs textual: pip install 'attncli[explore]'")


def test_the_mask_key_skips_what_a_one_token_sentence_cannot_take():
    state, _, _, _ = drive(["m", "m"], sentence="orange")
    assert state.opts.mask == "none"  # causal, then not self (one token attends to nothing), so none again


def test_the_edit_line_never_holds_a_character_the_terminal_would_act_on():
    from attncli import explore

    app = explore.Explorer(load_vectors(), explore.State("the \x1b[31mcat sat"))

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("e")
            await pilot.pause()
            return app.query_one("#ask").value

    assert asyncio.run(go()) == ""


# An action of the app that fails, as a bug would: the installed CLI's own main, in a real
# process on a terminal, with the r key's action broken
BROKEN = ("import sys\nfrom attncli import explore\n\n"
          "def broken(self):\n    raise RuntimeError('r is broken')\n\n"
          "explore.Explorer.action_raw = broken\nfrom attncli.cli import main\nmain(sys.argv[1:])\n")
WAYS_OUT = {  # how, (the status, what the main screen shows after)
    "q": (b"q", 0, []),
    "ctrl-q": (b"\x11", 0, []),
    "ctrl-c": (b"\x03", 130, ["attncli: interrupted"]),  # raw mode: a key, not SIGINT
    "sigint": (signal.SIGINT, 130, ["attncli: interrupted"]),
    "sigterm": (signal.SIGTERM, 143, ["attncli: terminated"]),
    "sighup": (signal.SIGHUP, 129, ["attncli: hung up"]),
    "a bug": (b"r", 1, ["attncli: error: internal error (RuntimeError: r is broken); please report it, with the "
                        "command that caused it (ATTNCLI_DEBUG=1 shows where it happened)"]),
}


@pytest.mark.parametrize("way", WAYS_OUT, ids=WAYS_OUT)
def test_every_way_out_gives_the_terminal_back(way):
    """On a real terminal: its settings as before (what `stty -g` reads), the alternate screen
    left, mouse tracking and the other modes the app set off again, the cursor shown, the
    main screen as it was but for the line that says why the app ended."""
    how, status, shown = WAYS_OUT[way]
    program = (sys.executable, "-c", BROKEN) if way == "a bug" else (ptys.ATTNCLI,)
    terminal = ptys.start(["explore", SENTENCE], program=program, rows=30, cols=110, env={"ATTNCLI_DEBUG": None})
    terminal.wait_for("temperature 1")  # the app is up
    time.sleep(0.5)
    assert terminal.modes_left()["1049"] and terminal.modes_left()["1003"]  # the alternate screen, the mouse
    if isinstance(how, bytes):
        terminal.type(how)
    else:
        terminal.proc.send_signal(how)
    begun = time.monotonic()
    returned, _, _, _ = terminal.finish(timeout=30)
    assert returned == status and time.monotonic() - begun < 10
    assert terminal.after == terminal.before
    assert terminal.modes_left() == {}
    assert [line for line in terminal.shown() if line] == shown


def test_a_terminal_that_hangs_up_ends_the_app_with_129():
    """The terminal itself gone (its window closed): SIGHUP, and an end within seconds, with
    nothing left running."""
    # read here, not by a thread: one blocked in read() would keep the terminal's other end open
    terminal = ptys.start(["explore", SENTENCE], rows=30, cols=110, reading=False)
    deadline = time.monotonic() + 60
    while "temperature 1" not in ptys.plain(terminal.screen.decode("utf-8", "replace")):
        assert time.monotonic() < deadline, bytes(terminal.screen)
        if select.select([terminal.master], [], [], 0.2)[0]:
            terminal.screen += os.read(terminal.master, 1 << 16)
    os.close(terminal.master)  # the hang-up: the terminal's other end closed
    assert terminal.proc.wait(timeout=30) == 129
    assert ptys.none_left(terminal.proc.pid) == []
