"""libfaketime as the clock round uses it (``wall_clock.py``), on this machine, no stack.

A probe process's wall clock must follow the offset file while it runs, both ways,
while its monotonic clock, its sleeps and librdkafka's waits go on as before; and
a machine without libfaketime says what to install.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .wall_clock import WallClockShift, WallClockUnavailable


@pytest.mark.tool("faketime")
def test_a_running_process_sees_only_its_wall_clock_jump(tmp_path: Path) -> None:
    shift = WallClockShift(tmp_path)
    shift.check()  # raises, saying what moved, unless only the wall clock did
    shift.shift(-600)
    assert shift.offset_file.read_text() == "-600\n"
    assert shift.environment()["DONT_FAKE_MONOTONIC"] == "1"


def test_without_libfaketime_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("chaos.wall_clock.LIBRARY_GLOBS", ())
    with pytest.raises(WallClockUnavailable, match="apt-get install -y faketime"):
        WallClockShift(tmp_path)
