"""The progress bar of long replays: done of total, rate, time left; lines off a terminal."""

from __future__ import annotations

import io

from sagalog.cli.progress import ProgressBar, render

from .fakes import FakeClock


def test_a_line_shows_done_of_total_the_rate_and_the_time_left() -> None:
    line = render("replay", 2_500, 10_000, 1_250.0, width=10)
    assert line == "replay [##--------] 2,500/10,000  25%  1,250/s  ETA 0:00:06"
    assert render("live", 10, 10, 0.0, width=4) == "live [####] 10/10 100%  0/s"


def test_off_a_terminal_it_writes_a_line_every_few_seconds_and_at_the_end() -> None:
    clock, out = FakeClock(), io.StringIO()
    bar = ProgressBar("replay", 1_000, start=200, stream=out, clock=clock)
    bar.update(300)  # the first update shows at once
    clock.advance(1)
    bar.update(400)  # not yet
    clock.advance(5)
    bar.update(800)
    bar.update(1_000)  # shown by finish, once
    bar.finish()
    bar.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and "\r" not in out.getvalue()
    # A resumed run's rate counts what this run did: 600 records in 6 s, then 800.
    assert "800/1,000" in lines[1] and "100/s" in lines[1]
    assert lines[2].startswith("replay [") and "1,000/1,000" in lines[2]
