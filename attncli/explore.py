"""explore: a sentence's attention in a terminal app, every number one keypress away.

textual (made by the people who make rich) draws the app; everything it shows comes from
the documents of documents/ (scores_doc, context_doc, explain_doc, compare_doc), computed
again for each change of state: no second copy of any computation lives here. The state
is a small frozen dataclass, so a test can hold the app's numbers against the library's
for the same state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import math
import signal
from dataclasses import dataclass, field

import numpy as np
from rich.cells import cell_len
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical, VerticalScroll
from textual.geometry import Region
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

from attncli import ranking
from attncli.documents.context import compare_doc, context_doc, explain_doc
from attncli.documents.sentence import scores_doc
from attncli.encoder import Encoder, Options
from attncli.errors import AttncliError
from attncli.views import heatmap
from attncli.views.common import cosine_text, masked_cells
from attncli.visible import visible, visible_all

MASKS = ("none", "causal", "self")
STEPS = ("x", "q", "k", "v", "scores", "scaled", "weights", "context")  # explain mode: the cursor's row, step by step
STEP_NAMES = {"x": "X: its word vector x_i", "q": "Q: its query q_i = x_i W_Q", "k": "K: its key k_i = x_i W_K",
              "v": "V: its value v_i = x_i W_V", "scores": "scores ω_ij = q_i · k_j",
              "scaled": "scaled scores ω_ij · scale / temperature", "weights": "weights α_ij = softmax_j",
              "context": "Z: its context vector z_i = Σ_j α_ij v_j"}
TEMPERATURE_STEP = 0.1
SIDE = 36  # the fewest columns the side panel takes beside the grid; fewer, and it goes below it
CHROME = 3  # columns around the grid: its padding of 1 each side, and the scrollbar's 1


@dataclass(frozen=True)
class State:
    """What the app shows: the sentence, the attention options, which layer and head (None:
    the heads' mean), raw scores or weights, the cursor, and explain mode's step."""

    sentence: str
    opts: Options = field(default_factory=Options)
    layer: int | None = None  # with a model, from 1
    head: int | None = None  # from 1; None: the mean
    raw: bool = False
    cursor: tuple[int, int] = (0, 0)
    step: int | None = None  # explain mode: an index into STEPS, None when off
    other: str | None = None  # compare: a second sentence


def source(vectors: Encoder, state: State) -> Encoder:
    """The vectors, or the model at the state's layer."""
    return vectors.at(state.layer)


def options(vectors: Encoder, state: State) -> Options:
    """The options the state's keys set (temperature, scale, mask), over word vectors; a
    model's attention is its own, and its documents are the defaults'."""
    return Options() if vectors.layered else state.opts


def document(vectors: Encoder, state: State) -> dict:
    """The scores document the state shows, as `attncli scores` computes it."""
    return scores_doc(state.sentence, source(vectors, state), options(vectors, state))


def shown(doc: dict, state: State) -> np.ndarray:
    """The T x T matrix on screen: the mean or one head's, weights or raw scores."""
    part = doc if state.head is None else doc["heads"][state.head - 1]
    return np.array(part["scores" if state.raw else "weights"])


class Help(ModalScreen):
    """The keys, on a screen of their own."""

    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "close")]

    def compose(self) -> ComposeResult:
        keys = Table.grid(padding=(0, 2))
        keys.add_column(no_wrap=True)
        keys.add_column()  # wraps in a narrow window: the dialog stays within it
        for key, what in KEYS:
            keys.add_row(key, what)
        box = VerticalScroll(Static(Group(Text("attncli explore: keys\n", style="bold"), keys,
                                          Text("\nescape, q or ? closes this", style="dim"))), id="help")
        # as wide as its widest row, with the padding, border and scrollbar: no more than the window
        box.styles.width = max(map(len, dict(KEYS))) + 2 + max(map(len, dict(KEYS).values())) + 5
        yield box

    def on_mount(self) -> None:
        self.query_one("#help").focus()  # its arrows, PgUp and PgDn scroll it in a window too short for it


KEYS = (("arrows", "move the cursor"), ("r", "raw scores / weights"), ("+ / -", "temperature up / down by 0.1"),
        ("s", "scale 1 / 1/sqrt(d_k)"), ("m", "mask none / causal / self"), ("h / H", "next / previous head"),
        ("a", "the heads' mean"), ("l / L", "next / previous layer (a model)"),
        ("x", "explain: the cursor's row through X, Q, K, V, scores, scaled, weights, Z"), ("e", "edit the sentence"),
        ("c", "compare: a second sentence, the cursor's word in both"), ("p", "save the screen (--export)"),
        ("pgup / pgdn", "scroll the panels"), ("?", "these keys"), ("q", "quit"))


class Explorer(App):
    """The title line (#title), the heatmap of #grid, the cursor's cell and row in #side, with
    explain's step (#explain) and compare's cosine (#compare) under it; all in one panel that
    scrolls (#main), the side beside the grid where both fit, else below it; a line of news in
    #status, the keys in the footer."""

    AUTO_FOCUS = None  # the keys are the app's; the input line takes them only while it is open
    CSS = """
    #title { height: 1; padding: 0 1; background: $panel; text-style: bold;
             text-wrap: nowrap; text-overflow: ellipsis; }
    #main { height: 1fr; scrollbar-size-vertical: 1; }
    #panes { layout: horizontal; height: auto; }
    #panes.below { layout: vertical; }
    #grid { width: auto; height: auto; padding: 0 1; }
    #side { width: 1fr; height: auto; padding: 0 1; border-left: solid $accent; }
    #panes.below #side { width: 100%; border-left: none; border-top: solid $accent; }
    #side Static { height: auto; }
    #explain, #compare { margin-top: 1; }
    .empty { display: none; }
    #status { height: auto; padding: 0 1; color: $text-muted; }
    #ask { display: none; }
    #ask.shown { display: block; }
    #help { padding: 0 1; background: $panel; border: solid $accent; height: auto;
            max-width: 100%; max-height: 100%; scrollbar-size-vertical: 1; }
    Help { align: center middle; }
    """
    # the footer shows these in this order, as many as the window has room for: the ways to
    # quit and to every other key first; ? lists them all
    BINDINGS = [
        Binding("q", "quit", "quit"), Binding("question_mark", "keys", "keys"), Binding("x", "explain", "explain"),
        Binding("r", "raw", "raw"), Binding("m", "mask", "mask"),
        Binding("plus,equals_sign", "temperature(1)", "T+"), Binding("minus", "temperature(-1)", "T-"),
        Binding("h", "head(1)", "head"), Binding("e", "edit", "edit"), Binding("c", "compare", "compare"),
        Binding("l", "layer(1)", "layer"),
        # in ? only: the footer has room in 80 columns for the keys above
        Binding("s", "scale", "scale", show=False), Binding("a", "mean", "mean", show=False),
        Binding("H", "head(-1)", "head-", show=False), Binding("L", "layer(-1)", "layer-", show=False),
        Binding("p", "export", "save", show=False),
        Binding("up", "move(-1, 0)", "up", show=False), Binding("down", "move(1, 0)", "down", show=False),
        Binding("left", "move(0, -1)", "left", show=False), Binding("right", "move(0, 1)", "right", show=False),
        Binding("pageup", "page(-1)", "scroll up", show=False), Binding("pagedown", "page(1)", "scroll down", show=False),
        Binding("ctrl+c", "interrupt", "interrupt", show=False, priority=True),  # raw mode: a key, not SIGINT
    ]

    def __init__(self, vectors, state: State, *, export: str | None = None, write=None,
                 ends: dict[int, int] | None = None):
        super().__init__()
        self.vectors, self.export, self.write = vectors, export, write
        self.state, self.doc = state, document(vectors, state)
        self.asking: str | None = None  # "edit" or "compare" while the input line is open
        self.news, self.text = "", {}
        self.rows_from: int | None = None  # the grid's lines above its row 0; None without a grid
        # signal -> the return code it ends the app with, once its loop runs; Ctrl-C as a key too
        self.ends = dict(ends or {})
        self.failure: Exception | None = None  # an exception of the app's own, which ended it
        self.error_console = Console(file=io.StringIO())  # not textual's traceback of it: the command's one line

    def on_load(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in self.ends:
            signal.signal(signum, lambda signum, frame: self.ending(loop, signum))

    def ending(self, loop, signum: int) -> None:
        """A signal of `ends`: the app ends, from its loop (woken at once), as on q. A hang-up
        comes with SIGCONT, on which textual would take the terminal again, from wherever
        this process is, while it ends: ignored from now on (SIGCONT comes second: signals
        are handled in the order of their numbers)."""
        if signum == signal.SIGHUP:
            signal.signal(signal.SIGCONT, signal.SIG_IGN)
        loop.call_soon_threadsafe(self.exit, None, self.ends[signum])

    def action_interrupt(self) -> None:
        self.exit(return_code=self.ends.get(signal.SIGINT, 130))

    def _handle_exception(self, error: Exception) -> None:
        self.failure = error  # textual then ends the app, giving the terminal back
        super()._handle_exception(error)

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        with VerticalScroll(id="main"), Container(id="panes"):
            yield Static(id="grid")
            with Vertical(id="side"):
                yield Static(id="cell")
                yield Static(id="explain")
                yield Static(id="compare")
        yield Input(id="ask")
        yield Static(id="status", classes="empty")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.title = "attncli explore"
        self.redraw()

    def on_resize(self) -> None:
        self.call_later(self.redraw)  # once textual's own handler, after this one, has taken the new size

    # --- the state, changed through the library -------------------------------------------

    def change(self, **changes) -> bool:
        """Move to a new state, computing its document first; an error keeps the old one
        and says why on the status line."""
        state = dataclasses.replace(self.state, **changes)
        try:
            doc = self.doc if _same_document(state, self.state) else document(self.vectors, state)
        except AttncliError as e:
            self.say(str(e))
            return False
        T = len(doc["tokens"])
        i, j = state.cursor
        self.state = dataclasses.replace(state, cursor=(min(i, T - 1), min(j, T - 1)))
        self.doc = doc
        self.redraw()
        return True

    def action_move(self, di: int, dj: int) -> None:
        T = len(self.doc["tokens"])
        i, j = self.state.cursor
        if self.change(cursor=((i + di) % T, (j + dj) % T)) and self.rows_from is not None:
            # the cursor's row stays in view, in a grid taller than the window
            row = Region(0, self.rows_from + self.state.cursor[0], 1, 1)
            self.call_after_refresh(self.query_one("#main").scroll_to_region, row, animate=False)

    def action_page(self, sign: int) -> None:
        main = self.query_one("#main", VerticalScroll)
        if sign > 0:
            main.scroll_page_down(animate=False)
        else:
            main.scroll_page_up(animate=False)

    def action_raw(self) -> None:
        self.change(raw=not self.state.raw)

    def action_temperature(self, sign: int) -> None:
        if self.model():
            return self.say("a model's attention has no temperature here: it is the model's own")
        t = round(self.state.opts.temperature + sign * TEMPERATURE_STEP, 10)
        if t <= 0:
            return self.say(f"the temperature must stay above 0; it is {self.state.opts.temperature:g}")
        self.change(opts=dataclasses.replace(self.state.opts, temperature=t))

    def action_scale(self) -> None:
        if self.model():
            return self.say("a model's scale is its own, 1/sqrt(d_head)")
        self.change(opts=dataclasses.replace(self.state.opts, scale=None if self.state.opts.scale is not None else 1.0))

    def action_mask(self) -> None:
        if self.model() and self.doc["mask"] != "none":
            return self.say(f"a decoder's mask is its own: {self.doc['mask']}, as it was trained")
        if self.model():
            return self.say("a model's attention has no mask here: an encoder attends both ways")
        opts = self.state.opts
        at, from_file = MASKS.index(opts.mask), tuple(name for name in opts.from_file if name != "mask")
        for k in range(1, len(MASKS)):  # the next mask the sentence can take (self needs two tokens)
            if self.change(opts=dataclasses.replace(opts, mask=MASKS[(at + k) % len(MASKS)], from_file=from_file)):
                return

    def action_head(self, sign: int) -> None:
        H = len(self.doc["heads"])
        if H == 1:
            return self.say("one head: give --heads H (or --model) for more")
        now = 0 if self.state.head is None else self.state.head
        self.change(head=(now - 1 + sign) % H + 1 if now else (1 if sign > 0 else H))

    def action_mean(self) -> None:
        self.change(head=None)

    def action_layer(self, sign: int) -> None:
        if not self.model():
            return self.say("one layer over word vectors; --model NAME|DIR has more")
        L = self.vectors.layers
        now = self.state.layer or self.vectors.layer
        self.change(layer=(now - 1 + sign) % L + 1)

    def action_explain(self) -> None:
        step = self.state.step
        step = 0 if step is None else (None if step + 1 == len(STEPS) else step + 1)
        if self.change(step=step) and step is not None:
            # below the grid and the row, the step may start under the window's last line
            self.call_after_refresh(self.query_one("#explain").scroll_visible, animate=False)

    def action_edit(self) -> None:
        # the line would show the sentence's characters as they are: one a terminal acts on starts it empty
        plain = visible(self.state.sentence) == self.state.sentence
        self.ask("edit", self.state.sentence if plain else "", "a new sentence, then enter (escape: keep this one)")

    def action_compare(self) -> None:
        other = self.state.other or ""
        self.ask("compare", other if visible(other) == other else "", "a second sentence with the cursor's word, then enter")

    def action_keys(self) -> None:
        self.push_screen(Help())

    def action_export(self) -> None:
        if self.export is None:
            return self.say("give --export FILE.svg when starting explore to save the screen with p")
        svg = self.export_screenshot(title="attncli explore")
        try:
            self.write(self.export, svg)
        except (AttncliError, OSError) as e:
            return self.say(f"not saved: {e}")
        self.say(f"saved {self.export}")

    def model(self) -> bool:
        return self.vectors.layered

    # --- the input line ---------------------------------------------------------------------

    def ask(self, what: str, value: str, prompt: str) -> None:
        self.asking = what
        line = self.query_one("#ask", Input)
        line.value, line.placeholder = value, prompt
        line.add_class("shown")
        line.focus()
        self.say(prompt)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        line = self.query_one("#ask", Input)
        line.remove_class("shown")
        what, self.asking = self.asking, None
        self.set_focus(None)
        if what == "edit":
            if self.change(sentence=event.value, cursor=(0, 0), step=None, other=None):
                self.say("the new sentence")
        elif what == "compare":
            self.change(other=event.value or None)

    def on_key(self, event) -> None:
        if event.key == "escape" and self.asking is not None:
            self.query_one("#ask", Input).remove_class("shown")
            self.asking = None
            self.set_focus(None)
            self.say("kept the sentence")

    def say(self, news: str) -> None:
        self.news = visible(news)
        status = self.query_one("#status", Static)
        status.set_class(not self.news, "empty")  # a line of the window only while it has something to say
        status.update(Text(self.news))

    # --- drawing ---------------------------------------------------------------------------

    def redraw(self) -> None:
        grid, below = self.grid()
        side = {"cell": self.cell(), "explain": self.explain_lines(), "compare": self.compare_lines()}
        # a new layout only for a new sentence, view or window: a key within one redraws in place
        shape = (tuple(self.doc["tokens"]), self.state.raw, self.state.step is None, self.state.other is None,
                 tuple(self.size))
        layout, self._shape = shape != getattr(self, "_shape", None), shape
        self.query_one("#panes").set_class(below, "below")
        self.query_one("#grid", Static).update(grid, layout=layout)
        for name, lines in side.items():
            part = self.query_one(f"#{name}", Static)
            part.set_class(not lines, "empty")
            part.update(Group(*lines), layout=layout)
        self.query_one("#title", Static).update(Text(self.describe(self.size.width - 2)))
        # what the panels say, for a reader or a test
        self.text = {"grid": _plain(grid.renderables), "side": _plain([line for lines in side.values()
                                                                       for line in lines])}

    def describe(self, width: int) -> str:
        """The title line: what is shown, in as few words as `width` needs; the mask always."""
        s, o = self.state, self.state.opts
        head = ("mean of heads", "mean") if s.head is None else (f"head {s.head}",) * 2
        what = ("raw scores", "raw") if s.raw else ("weights",) * 2
        if self.model():
            words = f"{visible(self.vectors.name)}, layer {s.layer or self.vectors.layer}, {head[0]}, {what[0]}"
            forms = [f"attncli explore: {words}", words]
        else:
            scale = ("1/sqrt(d_k)", "1/√d_k") if o.scale is None else (f"{o.scale:g}",) * 2
            words = f"{what[0]}; {head[0]}; temperature {o.temperature:g}; scale {scale[0]}; mask {o.mask}"
            short = f"{what[1]}; {head[1]}; T {o.temperature:g}; scale {scale[1]}"
            # the last, where nothing fits, is cut at its end: the mask first
            forms = [f"attncli explore: {words}", words, f"{short}; mask {o.mask}", f"mask {o.mask}; {short}"]
        return next((form for form in forms if cell_len(form) <= width), forms[-1])

    def grid(self) -> tuple[Group, bool]:
        """The heatmap of the state, as `attncli scores` draws it, in the columns the window
        leaves it, and whether the side panel goes below it (no room beside)."""
        tokens = visible_all(self.doc["tokens"])
        M = shown(self.doc, self.state)
        masked = masked_cells(self.doc, len(tokens)) if not self.state.raw else np.zeros(M.shape, dtype=bool)
        window = self.size.width or 80
        for room, below in ((window - CHROME - SIDE, False), (window - CHROME, True)):
            # textual brings colours down to what the terminal has: the grid is drawn in full colour
            heat = heatmap.Heatmap(tokens, [M], masked, signed=self.state.raw, width=max(room, 1),
                                   color_system="truecolor")
            if heat.fits:
                lines = self.heat_lines(heat, M, masked)
                if below or max(cell_len(line.plain) for line in lines) <= room:
                    return Group(*lines), below
        self.rows_from = None
        return self.too_narrow(tokens, M, heat.numbers.width, window), True

    def heat_lines(self, heat: heatmap.Heatmap, M: np.ndarray, masked: np.ndarray) -> list[Text]:
        """The grid with the cursor, and how to read it: its key, its cells' units, its legend."""
        header = heat.grid(M, self.state.cursor)
        self.rows_from = len(header) - len(M)  # the lines above row 0
        reading = heat.reading("ω" if self.state.raw else "α") + ("; · masked" if masked.any() else "")
        return [*header, *heat.key(), Text(reading, style="dim"),
                *heat.legend("score ω" if self.state.raw else "weight α")]

    def too_narrow(self, tokens: list[str], M: np.ndarray, number_width: int, window: int) -> Group:
        need = heatmap.by_position(len(tokens), number_width).width + CHROME
        i = self.state.cursor[0]
        ranked = ranking.ranked(M[i])[:5]
        top = ", ".join(f"{tokens[j]} {M[i, j]:.3f}" for j in ranked)
        return Group(Text(f"the grid needs {need} columns; the window has {window}. Row {tokens[i]!r}: {top}"))

    def cell(self) -> list[Text]:
        """The cursor's cell, each number with its formula; its row's weights ranked; its context."""
        doc, s = self.doc, self.state
        tokens = visible_all(doc["tokens"])
        i, j = s.cursor
        part = doc if s.head is None else doc["heads"][s.head - 1]
        omega, alpha = part["scores"][i][j], part["weights"][i][j]
        c = doc["scale"] / doc["temperature"]
        lines = [Text(f"row {i} {tokens[i]!r}, column {j} {tokens[j]!r}", style="bold"),
                 Text(f"ω = q_i · k_j = {omega:.4f}")]
        if masked_cells(doc, len(tokens))[i, j]:
            lines += [Text(f"masked: mask {doc['mask']} hides column {j} from row {i}"),
                      Text("α = 0, by the mask, not by the softmax")]
        else:
            lines += [Text(f"scaled = ω · scale / temperature\n       = {omega:.4f} · {doc['scale']:.4g} / "
                           f"{doc['temperature']:g} = {omega * c:.4f}"),
                      Text(f"α = exp(scaled) / Σ_j' exp(scaled_ij') = {alpha:.4f}")]
        lines += [Text(""), Text(f"row {tokens[i]!r}, its weights ranked:", style="bold")]
        weights = np.array(part["weights"][i])
        for jj in ranking.ranked(weights):
            w = float(weights[jj])
            lines.append(Text(f"{tokens[jj][:10]:>10} {w:.3f} " + "█" * int(round(w * 10))))
        return lines + [Text("")] + self.context_lines(i)

    def context_lines(self, i: int) -> list[Text]:
        """Its context vector: its norm, and the words nearest it where they mean something."""
        if self.model():
            return [Text("context vector: a model's, in its own space (no nearest words)", style="dim")]
        try:
            ctx = context_doc(self.state.sentence, self.vectors, self.state.opts, index=i, neighbors=5)
        except AttncliError as e:
            return [Text(visible(str(e)), style="dim")]
        norm = math.sqrt(sum(x * x for x in ctx["context"]))
        near = ", ".join(visible(n["word"]) for n in ctx["neighbors"]) or "none (projections: not in word space)"
        return [Text(f"context vector z_i: {len(ctx['context'])} numbers, |z_i| = {norm:.3f}"),
                Text(f"nearest words: {near}")]

    def explain_lines(self) -> list[Text]:
        """Explain mode's step for the cursor's row; none when the mode is off."""
        if self.state.step is None:
            return []
        i, step = self.state.cursor[0], STEPS[self.state.step]
        opts = options(self.vectors, self.state)
        try:
            doc = explain_doc(self.state.sentence, source(self.vectors, self.state), opts, index=i)
        except AttncliError as e:
            return [Text(visible(str(e)), style="dim")]
        value = np.array(doc["steps"][step.upper()][i] if step in ("k", "v") else doc["row"][step])
        if value.ndim == 2:  # per head: the one shown, or the first
            value = value[(self.state.head or 1) - 1]
        shown_values = ", ".join(f"{v:.3f}" for v in value[:8]) + (", …" if len(value) > 8 else "")
        return [Text(f"explain {self.state.step + 1}/{len(STEPS)}: {STEP_NAMES[step]}", style="bold"),
                Text(f"[{shown_values}] ({len(value)} numbers, |.| = {float(np.linalg.norm(value)):.3f})")]

    def compare_lines(self) -> list[Text]:
        """The cursor's word in the second sentence; none without one."""
        if self.state.other is None:
            return []
        i = self.state.cursor[0]
        word = self.doc["tokens"][i]
        opts = options(self.vectors, self.state)
        try:
            doc = compare_doc([self.state.sentence, self.state.other], source(self.vectors, self.state), opts,
                              token=word, neighbors=0, indices=[i, None])  # the cursor's, of a repeated word
        except AttncliError as e:
            return [Text(f"compare: {visible(str(e))}", style="dim")]
        return [Text(f"compare {visible(word)!r} with {visible(self.state.other)!r}", style="bold"),
                Text(f"cosine of its context vectors: {cosine_text(doc['context_cosine'][0][1])} "
                     f"(raw vectors: {cosine_text(doc['raw_cosine'][0][1])})"),
                *(Text(note, style="dim") for note in doc["notes"])]


def _same_document(a: State, b: State) -> bool:
    """Whether two states show the same scores document (they differ only in what is drawn of it)."""
    return (a.sentence, a.opts, a.layer) == (b.sentence, b.opts, b.layer)


def _plain(lines) -> str:
    return "\n".join(part.plain.rstrip("\n") for part in lines if isinstance(part, Text))
