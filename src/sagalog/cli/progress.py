"""A progress bar on stderr for long reads: done of total, rate, time left.

``click.progressbar`` draws no rate and assumes it starts at zero; a resumed rebuild
starts part way, and its rate is what a person wants to see. On a terminal the bar
redraws one line; anywhere else (a CI log, a pipe) it writes a line every few
seconds and one at the end, so a log shows progress without thousands of carriage
returns. Nothing goes to stdout, which ``--json`` keeps for the report.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


def render(label: str, done: int, total: int, rate: float, *, width: int = 30) -> str:
    """One line: ``label [#####-----] 1,234/5,000  25%  1,050/s  ETA 0:04``."""
    total = max(total, done)
    fraction = done / total if total else 1.0
    filled = int(width * fraction)
    bar = "#" * filled + "-" * (width - filled)
    eta = ""
    if rate > 0 and done < total:
        left = int((total - done) / rate)
        eta = f"  ETA {left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}"
    return f"{label} [{bar}] {done:,}/{total:,} {fraction:4.0%}  {rate:,.0f}/s{eta}"


class ProgressBar:
    """Shows ``update(done)`` calls against ``total``; ``finish`` ends the line."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        start: int = 0,
        stream: TextIO | None = None,
        every_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = every_s if every_s is not None else (0.1 if self.tty else 5.0)
        self.clock = clock
        self.started = clock()
        self.start = start
        self.done = start
        self._shown = -float("inf")
        self._shown_done: int | None = None

    @property
    def rate(self) -> float:
        elapsed = self.clock() - self.started
        return (self.done - self.start) / elapsed if elapsed > 0 else 0.0

    def update(self, done: int, total: int | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        now = self.clock()
        if now - self._shown >= self.every_s:
            self._shown = now
            self._show()

    def finish(self) -> None:
        if self.done != self._shown_done:
            self._show()
        if self.tty:
            self.stream.write("\n")
        self.stream.flush()

    def _show(self) -> None:
        self._shown_done = self.done
        line = render(self.label, self.done, self.total, self.rate)
        self.stream.write(f"\r{line}\x1b[K" if self.tty else f"{line}\n")
        self.stream.flush()
