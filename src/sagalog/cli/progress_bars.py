"""Progress bars on stderr for long reads (``replay rebuild``, ``analytics``), drawn by rich.

A long read has phases (the journal, the replay, the live state); each gets its own bar
showing done of total, the rate and the time left. A resumed rebuild starts part way,
so a bar can start at any count, and its rate counts only what this run reads: that
rate is what a person wants to see.

On a terminal the bars redraw in place. Anywhere else (a CI log, a pipe, a test) a bar
is a plain line every few seconds and one when its phase ends, with no control codes,
so a log shows progress without thousands of carriage returns. Nothing goes to
stdout, which ``--json`` keeps for the report, and stdout is never redirected through
the bars (rich's default while it draws).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

EVERY_S = 5.0
"""How often a bar that is not on a terminal prints a line."""


class _Rate(ProgressColumn):
    """Records a second, over rich's recent samples (what this run reads now)."""

    def render(self, task: Task) -> Text:
        return Text(f"{task.speed or 0:,.0f}/s", style="progress.data.speed")


class ProgressBars:
    """One bar per phase: ``show`` where a phase is; a new label ends the last bar."""

    def __init__(
        self,
        *,
        console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = EVERY_S,
    ) -> None:
        # Bars redraw only on a real terminal: FORCE_COLOR or TTY_COMPATIBLE, which rich
        # honours, would put cursor codes into a CI log.
        self.console = (
            console
            if console is not None
            else Console(stderr=True, force_terminal=sys.stderr.isatty())
        )
        self.live = self.console.is_interactive and not self.console.is_dumb_terminal
        self.clock = clock
        self.every_s = every_s
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._label: str | None = None
        self._printed_at = -float("inf")
        self._printed: float | None = None

    def show(self, label: str, done: int, total: int) -> None:
        """Phase ``label`` has done ``done`` of ``total`` (raised to ``done`` if below)."""
        total = max(total, done)
        progress = self._progress or self._start()
        if label != self._label or self._task is None:
            self._end_phase()
            self._label = label
            self._task = progress.add_task(label, total=total, completed=done)
        else:
            progress.update(self._task, total=total, completed=done)
        if not self.live and self.clock() - self._printed_at >= self.every_s:
            self._print_line()

    def close(self) -> None:
        """End the last bar (its final line off a terminal); safe to call again.

        A ``show`` after ``close`` starts a new set of bars below the ones drawn.
        """
        self._end_phase()
        if self._progress is not None and self.live:
            self._progress.stop()
        self._progress = None
        self._task = self._label = None

    def _start(self) -> Progress:
        self._progress = Progress(
            TextColumn("{task.description}"),
            *([BarColumn()] if self.live else []),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
            TaskProgressColumn(),
            _Rate(),
            TimeRemainingColumn(elapsed_when_finished=True),
            console=self.console,
            get_time=self.clock,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        if self.live:
            self._progress.start()
        return self._progress

    def _end_phase(self) -> None:
        if self._task is not None and not self.live and self._current().completed != self._printed:
            self._print_line()
        self._printed_at = -float("inf")
        self._printed = None

    def _current(self) -> Task:
        assert self._progress is not None
        return next(task for task in self._progress.tasks if task.id == self._task)

    def _print_line(self) -> None:
        assert self._progress is not None
        task = self._current()
        self._printed_at = self.clock()
        self._printed = task.completed
        self.console.print(self._progress.make_tasks_table([task]))
