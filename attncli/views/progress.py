"""Progress bars on stderr's terminal, as rich draws them: reading a vectors file or a
model's weights (bytes read of all, rate, time left), and the count of any other work
fitted to the width. When and where a bar is drawn is the CLI's to decide (cli/output.py's
progress, cli/options.py's loading).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when a bar is drawn: a run that draws none need not pay for it
    from rich.console import Console


class LoadProgress:
    """A progress bar on `console` (what is read, then the bytes read of all, rate, time left)
    for a load that takes more than half a second: "reading vectors", "reading weights". The
    CLI uses it only when stderr is a terminal."""

    DELAY = 0.5

    def __init__(self, console: Console, what: str = "reading vectors"):
        self.console, self.what = console, what
        self.bar = None
        self.start = None

    def __enter__(self):
        self.start = time.monotonic()
        return self

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if time.monotonic() - self.start < self.DELAY:
                return
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

            self.bar = Progress(self.what, BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                                TimeRemainingColumn(), console=self.console, transient=True,
                                redirect_stdout=False, redirect_stderr=False)
            self.bar.start()
            self.task = self.bar.add_task("read", total=total)
        self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()


def fitted_bar(unit: str, console):
    """A rich Progress of one task whose line fits the console's width, whatever its count and
    note (at 80 columns a note of held-out losses left "407/… 0:00:…"). By what matters: the
    count, the time left, the unit, the note (cut short at its end), the bar (40 columns, or
    what is left of them), the rate."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Column

    def text(template: str, width: int) -> TextColumn:
        return TextColumn(template, table_column=Column(no_wrap=True, width=width, overflow="ellipsis"))

    class Fitted(Progress):
        def make_tasks_table(self, tasks):
            if tasks:  # the columns for its task's numbers now
                self.columns = fitting(self.console.width, tasks[0])
            return super().make_tasks_table(tasks)

    def fitting(width: int, task) -> list:
        count = MofNCompleteColumn().render(task).cell_len
        columns = {"count": MofNCompleteColumn(table_column=Column(no_wrap=True, width=count))}
        room = width - count
        if room >= 8:
            columns["time"], room = TimeRemainingColumn(table_column=Column(no_wrap=True, width=7)), room - 8
        if room >= len(unit) + 1:
            columns["unit"], room = text(unit, len(unit)), room - len(unit) - 1
        note = len(task.fields["note"])
        if note and room >= 1 + min(note, 8):
            columns["note"] = text("{task.fields[note]}", min(note, room - 1))
            room -= 1 + min(note, room - 1)
        if room >= 11:
            columns["bar"], room = BarColumn(bar_width=min(40, room - 1)), room - 1 - min(40, room - 1)
        rate = len(task.fields["rate"])
        if rate and room >= rate + 1:
            columns["rate"] = text("{task.fields[rate]}", rate)
        return [columns[name] for name in ("unit", "bar", "count", "rate", "time", "note") if name in columns]

    return Fitted(transient=True, console=console, redirect_stdout=False, redirect_stderr=False)
