"""attncli explore: the app driven headless by textual's Pilot, its numbers read back and
held against the library's documents for the same state; and its refusals."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("textual", reason="the explore extra: pip install '.[explore]'")
from attncli.documents.sentence import scores_doc  # noqa: E402
from attncli.encoder import Options  # noqa: E402
from attncli.words.load import load_vectors  # noqa: E402
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
    from attncli.documents.context import explain_doc

    state, _, _, side = drive(["down", "x", "x"])
    assert state.step == 1 and "explain 2/8: Q: its query" in side
    state, _, _, side = drive(["down", "x", "x", "x", "x"], opts=Options(qkv="random"))
    v = np.array(explain_doc(SENTENCE, load_vectors(), Options(qkv="random"), index=1)["steps"]["V"][1])
    assert "explain 4/8: V: its value" in side and f"|.| = {np.linalg.norm(v):.3f}" in side
    state, _, _, _ = drive(["x"] * 9)
    assert state.step is None  # past the last step, explain mode ends


def test_a_terminal_too_narrow_for_the_grid_shows_the_row_and_the_columns_it_needs():
    long = " ".join(["orange"] * 40)
    _, _, grid, _ = drive([], sentence=long, size=(124, 30))
    # by position: 2 for the row numbers, 40 columns of 3, and 3 of the window's own
    assert grid.startswith("the grid needs 125 columns; the window has 124. Row 'orange': orange 0.025"), grid
    _, _, grid, _ = drive([], sentence=long, size=(125, 30))
    assert "needs" not in grid and len(grid.splitlines()[1].split()) == 41  # row 0: its number and 40 cells


# 20 tokens, the longest of 6 letters: drawn downwards above their columns, 6 lines
TWENTY = "The earth is like an orange and the moon is like a small grey stone in the dark night sky"


def screen(app) -> list[str]:
    """The lines of the app's screen as a terminal would show them (textual's compositor
    draws the same lines for the terminal)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def at(size, keys, sentence=TWENTY, look=lambda app: None, **state):
    """The app at `size` after `keys`: (app, the screens seen, one at the start and one after
    each key, and what `look` finds in the app at the end, while it runs)."""
    from attncli import explore

    app = explore.Explorer(load_vectors(), explore.State(sentence, **state))
    screens = []

    async def go():
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            screens.append(screen(app))
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
                screens.append(screen(app))
            return look(app)

    looked = asyncio.run(go())
    return app, screens, looked


def test_at_80x24_the_footer_shows_the_keys_and_every_row_of_20_tokens_comes_into_view():
    tokens = TWENTY.lower().split()
    app, screens, _ = at((80, 24), ["down"] * 19 + ["up"], opts=Options(mask="causal"))
    first = screens[0]
    assert len(first) == 24 and all(len(line) == 80 for line in first)
    assert first[-1].split() == ["q", "quit", "?", "keys", "x", "explain", "r", "raw", "m", "mask", "+", "T+",
                                 "-", "T-", "h", "head", "e", "edit", "c", "compare", "l", "layer"]
    assert first[0].strip() == "weights; mean of heads; temperature 1; scale 1/sqrt(d_k); mask causal"
    # the column labels, written downwards: column j's letters read top to bottom are token j
    header = first[1:7]
    columns = ["".join(line[x] for line in header).strip() for x in range(len(header[0]))]
    assert [c for c in columns if c] == tokens
    # the cursor's row, wherever it is, on the screen whole: its label and its 20 cells, α x 100
    # (1. for 1), the columns after it masked
    weights = np.array(app.doc["weights"])

    def row(i: int) -> list[str]:
        cells = [f"{round(w * 100):02d}" if round(w * 100) < 100 else "1." for w in weights[i, :i + 1]]
        return [tokens[i], *cells, *["·"] * (19 - i)]

    def rows(lines: list[str]) -> list[list[str]]:
        return [line[:-1].split() for line in lines]  # the last column is the scrollbar's

    for i, shown_now in enumerate(screens[:20]):
        assert row(i) in rows(shown_now), (i, "\n".join(shown_now))
    assert row(19) not in rows(first)  # below the fold at first
    assert app.state.cursor == (18, 0)


@pytest.mark.parametrize("rows", [24, 16])
def test_the_keys_dialog_fits_in_80_columns_and_scrolls_through_every_key(rows):
    """Each screen of the dialog (one at the top, then after each PgDn), its box whole
    within the window; every key in one of them, the last line at the end."""
    from attncli.explore import KEYS

    _, screens, dialog = at((80, rows), ["question_mark", "pagedown", "pagedown"],
                            look=lambda app: app.screen.query_one("#help").region)
    assert dialog.x >= 0 and dialog.right <= 80 and dialog.y >= 0 and dialog.bottom <= rows
    seen = []
    for shown_now in screens[1:]:
        box = shown_now[dialog.y:dialog.bottom]
        assert box[0][dialog.x] == "┌" and box[0][dialog.right - 1] == "┐" and box[-1][dialog.right - 1] == "┘"
        seen.append(" ".join(" ".join(line[dialog.x + 1:dialog.right - 2] for line in box[1:-1]).split()))
    assert (seen[0] == seen[-1]) == (rows == 24)  # scrolled only where it does not fit
    for key, what in KEYS:
        assert any(f"{key} {what}" in inside for inside in seen), (key, seen)
    assert seen[-1].endswith("escape, q or ? closes this")


@pytest.mark.parametrize("presses", [1, 3, 8])
def test_at_80x24_explains_step_is_scrolled_into_view(presses):
    from attncli.explore import STEP_NAMES, STEPS

    app, screens, _ = at((80, 24), ["down"] * 5 + ["x"] * presses)
    step = STEPS[presses - 1]
    assert app.state.step == presses - 1
    heading = f"explain {presses}/8: {STEP_NAMES[step]}"
    assert heading in app.text["side"] and heading not in "\n".join(screens[0])
    assert any(line.strip() == heading for line in screens[-1]), "\n".join(screens[-1])


@pytest.mark.parametrize("mask,cursor,beside", [("causal", (0, 1), (1, 0)), ("causal", (3, 5), (5, 3)),
                                                ("self", (2, 2), (2, 1))])
def test_a_masked_cell_says_masked_not_a_softmax_of_0(mask, cursor, beside):
    app, screens, _ = at((80, 24), [], sentence=SENTENCE, opts=Options(mask=mask), cursor=cursor)
    i, j = cursor
    shown_now = [line.strip() for line in screens[0]]
    assert f"masked: mask {mask} hides column {j} from row {i}" in shown_now
    assert "α = 0, by the mask, not by the softmax" in shown_now
    assert not any("exp(scaled)" in line for line in shown_now)
    # a cell the mask leaves: its weight, from the softmax
    _, screens, _ = at((80, 24), [], sentence=SENTENCE, opts=Options(mask=mask), cursor=beside)
    weights = scores_doc(SENTENCE, load_vectors(), Options(mask=mask))["weights"]
    shown_now = [line.strip() for line in screens[0]]
    assert f"α = exp(scaled) / Σ_j' exp(scaled_ij') = {weights[beside[0]][beside[1]]:.4f}" in shown_now
    assert not any(line.startswith("masked") for line in shown_now)


def test_a_window_made_narrower_puts_the_panel_below_the_grid_and_wider_beside_it_again():
    from attncli import explore

    app = explore.Explorer(load_vectors(), explore.State(SENTENCE))

    async def go():
        async with app.run_test(size=(120, 30)) as pilot:
            seen = []
            for size in ((120, 30), (80, 24), (120, 30)):
                await pilot.resize_terminal(*size)
                await pilot.pause()
                grid, side = app.query_one("#grid").region, app.query_one("#side").region
                seen.append("beside" if (side.x, side.y) == (grid.right, grid.y) else
                            "below" if (side.x, side.y) == (0, grid.bottom) else (grid, side))
            return seen

    assert asyncio.run(go()) == ["beside", "below", "beside"]


@pytest.mark.parametrize("width,title", [
    (120, "attncli explore: raw scores; head 2; temperature 1.1; scale 1/sqrt(d_k); mask causal"),
    (80, "raw scores; head 2; temperature 1.1; scale 1/sqrt(d_k); mask causal"),
    (60, "raw; head 2; T 1.1; scale 1/√d_k; mask causal"),
    (48, "raw; head 2; T 1.1; scale 1/√d_k; mask causal"),
    (30, "mask causal; raw; head 2; T…"),  # nothing fits: cut at its end, after the mask
])
def test_the_title_shortens_its_words_and_keeps_the_mask(width, title):
    app, screens, _ = at((width, 24), ["h", "h", "r", "plus"], sentence=SENTENCE,
                      opts=Options(mask="causal", heads=2, qkv="random"))
    assert app.state.head == 2  # counted from 1, as --head counts
    assert screens[-1][0].strip() == title


def test_a_long_sentence_in_a_wide_window_has_the_grid_and_the_side_beside_it():
    words = ("the quick brown fox jumps over the lazy dog while the small cat sat on a warm mat near the old "
             "house by the river and the children played in the garden under the tall trees all through the "
             "long summer day as the sun went down").split()
    assert len(words) == 47

    def regions(app):
        return app.query_one("#grid").region, app.query_one("#side").region

    app, screens, (grid, side) = at((200, 50), [], sentence=" ".join(words), look=regions)
    # as scores draws it at 200 columns: its row of "quick" as wide, 8 for "children" and 47 cells of 3
    drawn = run("scores", " ".join(words), "--format", "table").stdout.splitlines()
    quick = next(line for line in drawn if line.split()[:1] == ["quick"])
    assert len(quick) == 8 + 47 * 3 == grid.width - 2
    assert side.x == grid.right and side.y == grid.y  # beside it
    row = next(line for line in screens[0] if line.split()[:1] == ["quick"])
    assert row[1:grid.right - 1].rstrip() == quick and "row 0 'the', column 0 'the'" in "\n".join(screens[0])
    app, _, (grid, side) = at((80, 24), [], sentence=" ".join(words[:24]), look=regions)
    assert side.x == 0 and side.y == grid.bottom and "needs" not in app.text["grid"]  # below it, in 80 columns


def test_explore_needs_a_terminal_and_a_good_sentence():
    fails(run("explore", SENTENCE), "explore needs a terminal", "attncli scores")
    fails(run("explore", "..."), "only punctuation")


@contextlib.contextmanager
def tmux(tmp_path, sentence: str, cols: int, rows: int):
    """The installed command in a real terminal (tmux) of cols x rows: yields (the screen's
    text now, a function that sends keys, a function that waits for a condition on the screen)."""
    program = shutil.which("tmux")
    if program is None:
        pytest.skip("no tmux")
    attncli = str(Path(sys.executable).with_name("attncli"))
    session = f"attncli-explore-{tmp_path.name}"
    socket = ["-S", str(tmp_path / "tmux.sock")]
    subprocess.run([program, *socket, "new-session", "-d", "-s", session, "-x", str(cols), "-y", str(rows),
                    f"{attncli} explore '{sentence}'; sleep 5"], check=True)

    def screen() -> str:
        return subprocess.run([program, *socket, "capture-pane", "-p", "-t", session], capture_output=True,
                              text=True).stdout

    def send(*keys: str) -> None:
        subprocess.run([program, *socket, "send-keys", "-t", session, *keys], check=True)

    def until(ok, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while not ok(screen()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return screen()

    try:
        yield screen, send, until
    finally:
        subprocess.run([program, *socket, "kill-server"], capture_output=True)


def test_in_a_real_terminal_under_tmux(tmp_path):
    """The screen holds the sentence's tokens, a key changes it, q ends it."""
    with tmux(tmp_path, SENTENCE, 120, 40) as (screen, send, until):
        first = until(lambda now: "orange" in now, timeout=30)
        assert all(t in first for t in ("earth", "like", "orange")), first
        assert "temperature 1" in first
        send("+")
        assert "temperature 1.1" in until(lambda now: "temperature 1.1" in now)
        send("q")
        assert "earth" not in until(lambda now: "earth" not in now)  # the app ended and gave the screen back


def test_in_a_real_80x24_terminal_the_footer_the_keys_and_explain_are_all_shown(tmp_path):
    with tmux(tmp_path, TWENTY, 80, 24) as (screen, send, until):
        lines = until(lambda now: "q quit" in now, timeout=30).splitlines()
        assert lines[-1].split()[:6] == ["q", "quit", "?", "keys", "x", "explain"], lines
        assert lines[0].strip().endswith("mask none")
        send("?")
        lines = until(lambda now: "closes this" in now).splitlines()
        box = [line for line in lines if "│" in line]
        assert any(line.rstrip().endswith("┐") for line in lines) and all(line.rstrip().endswith("│") for line in box)
        send("Escape")
        until(lambda now: "closes this" not in now)
        send("x")
        assert "explain 1/8: X: its word vector x_i" in until(lambda now: "explain 1/8" in now)
        send("q")
        until(lambda now: "q quit" not in now)


def test_on_a_pseudo_terminal_of_80x24_the_footer_shows_q_quit():
    """The same without tmux: what the app writes to a terminal of 80 x 24 holds the footer."""
    terminal = ptys.start(["explore", TWENTY], rows=24, cols=80)
    terminal.wait_for("q quit ? keys x explain")
    terminal.wait_for("mask none")
    terminal.type(b"q")
    returned, _, _, _ = terminal.finish(timeout=30)
    assert returned == 0


@pytest.mark.parametrize("keys,size,sentence", [
    ([], (110, 32), SENTENCE), (["down", "down", "right", "r"], (110, 32), SENTENCE),
    (["question_mark"], (110, 32), SENTENCE), (["down", "x"], (80, 24), TWENTY), (["question_mark"], (80, 24), TWENTY),
], ids=["start", "raw-scores-at-a-cell", "keys", "explain-80x24", "keys-80x24"])
def test_screens_look_as_they_did(snap_compare, keys, size, sentence):
    """Snapshots (pytest-textual-snapshot): a change of layout shows as a diff of the SVGs
    kept in tests/__snapshots__; `pytest --snapshot-update` accepts a change."""
    from attncli import explore

    app = explore.Explorer(load_vectors(), explore.State(sentence))
    assert snap_compare(app, press=keys, terminal_size=size)


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
    from attncli.documents.context import compare_doc

    def other(app):
        app.query_one("#ask").value = "Orange is a bright color"

    app = run_app(explore.Explorer(load_vectors(), explore.State(SENTENCE, cursor=(5, 0))), ["c"], then=other)
    expected = compare_doc([SENTENCE, "Orange is a bright color"], load_vectors(), Options(), token="orange")
    assert f"cosine of its context vectors: {expected['context_cosine'][0][1]:.3f}" in app.text["side"]


@pytest.mark.parametrize("row", [0, 3])
def test_compare_of_a_repeated_word_is_of_the_one_under_the_cursor(row):
    from attncli import explore
    from attncli.documents.context import compare_doc

    def other(app):
        app.query_one("#ask").value = "a dog saw the cat"

    repeats = "the cat saw the dog"
    state = explore.State(repeats, opts=Options(mask="causal"), cursor=(row, 0))
    app = run_app(explore.Explorer(load_vectors(), state), ["c"], then=other)
    expected = compare_doc([repeats, "a dog saw the cat"], load_vectors(), Options(mask="causal"), token="the",
                           indices=[row, 3])
    assert f"cosine of its context vectors: {expected['context_cosine'][0][1]:.3f}" in app.text["side"]
    assert "more than once" not in app.text["side"]


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
    from attncli.models.encoder import Trained
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
    fails(run("explore", SENTENCE), "explore needs textual: pip install textual")


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


def test_a_quantized_gguf_model_s_heads(tmp_path):
    """The explorer over a Q8_0 GGUF file: its heads are the scores document's of the file."""
    pytest.importorskip("gguf")
    from pathlib import Path

    import tinygguf

    from attncli import explore, models
    from attncli.models.encoder import Trained

    path = tinygguf.write_gguf(Path(__file__).parent / "data" / "models" / "tiny-qwen2", tmp_path / "q.gguf", "Q8_0")
    model = Trained(models.load_model(str(path)), 2)
    app = run_app(explore.Explorer(model, explore.State("the earth is like an orange", layer=2)), ["l", "h"])
    assert app.state.layer == 1 and app.state.head == 1
    expected = scores_doc("the earth is like an orange", Trained(model.model, 1), Options())
    np.testing.assert_array_equal(np.array(app.doc["heads"][0]["weights"]), np.array(expected["heads"][0]["weights"]))
    assert app.doc["model"]["quantization"]["type"] == "Q8_0"
