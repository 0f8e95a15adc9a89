"""Progress bars of long reads: done of total, rate, time left; plain lines off a terminal."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console

from sagalog.cli.progress_bars import ProgressBars

from .fakes import FakeClock


def test_off_a_terminal_a_bar_is_a_line_every_few_seconds_and_one_at_its_end() -> None:
    clock, out = FakeClock(), io.StringIO()
    bars = ProgressBars(console=Console(file=out), clock=clock)
    bars.show("replay", 300, 1_000)  # a resumed run: the first show prints at once
    clock.advance(1)
    bars.show("replay", 400, 1_000)  # not yet
    clock.advance(5)
    bars.show("replay", 800, 1_000)
    bars.show("replay", 1_000, 1_000)  # printed when the phase ends, once
    bars.show("live", 5, 10)
    bars.close()
    bars.close()
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert [line.split()[0] for line in lines] == ["replay", "replay", "replay", "live"]
    assert "300/1,000" in lines[0] and "30%" in lines[0]
    # The rate counts what this run read (400 records in the 5 s between samples).
    assert "800/1,000" in lines[1] and "80/s" in lines[1]
    assert "1,000/1,000" in lines[2] and "100%" in lines[2]
    assert "5/10" in lines[3]


def test_on_a_terminal_the_bars_redraw_on_stderr_and_never_touch_stdout() -> None:
    out = io.StringIO()
    bars = ProgressBars(console=Console(file=out, force_terminal=True, width=80))
    assert bars.live
    stdout = sys.stdout
    bars.show("journal", 10, 10)
    bars.show("replay", 5, 10)
    assert sys.stdout is stdout  # not redirected through the bars: --json stays whole
    bars.close()
    text = out.getvalue()
    assert "\x1b[" in text and "journal" in text and "5/10" in text
    assert ProgressBars().console.stderr


def test_forced_colour_does_not_animate_a_pipe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich would take the pipe for a terminal
    bars = ProgressBars()
    assert not bars.live
    bars.show("replay", 5, 10)
    bars.close()
    err = capsys.readouterr().err
    assert "5/10" in err and "\x1b" not in err and "\r" not in err
