"""Durations as flow and topology files write them: ``72h``, ``30m``, ``500ms``, ``forever``.

One parser and one formatter for every file sagalog reads, so a unit means the same
in a topic's retention and in a step's timeout, and an error message prints a
duration the way the file would write it. A leaf module: topology and flows both
read it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|w)\s*$")
_UNIT_MS = {"w": 604_800_000, "d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
"""Largest first: ``format_duration`` picks the first unit that divides exactly."""


def duration_ms(value: Any) -> int:
    """``"30d"`` -> 2592000000; ``"forever"`` -> -1 (Kafka's "keep everything"); ints are ms."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30d, 12h, 500ms or 'forever'")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if value.strip().lower() in ("forever", "infinite", "-1"):
            return -1
        match = _DURATION.match(value)
        if match:
            return int(match.group(1)) * _UNIT_MS[match.group(2)]
    raise ValueError(f"{value!r} is not a duration; use e.g. 30d, 12h, 90m, 500ms or 'forever'")


def positive_duration_ms(value: Any) -> int:
    """``"72h"`` -> 259200000; a flow's durations are finite and positive, ints are ms."""
    try:
        ms = duration_ms(value)
    except ValueError:
        ms = -1
    if ms <= 0:
        raise ValueError(f"{value!r} is not a positive duration; use e.g. 72h, 30m, 10s or 500ms")
    return ms


def is_positive_duration(value: Any) -> bool:
    """Whether ``value`` reads as a positive duration (``positive_duration_ms`` accepts it)."""
    try:
        positive_duration_ms(value)
    except ValueError:
        return False
    return True


def format_duration(ms: int) -> str:
    """The shortest exact text for a duration, in days at most (as flows are written):
    259200000 -> ``3d``, 90000 -> ``90s``."""
    for unit, size in _UNIT_MS.items():
        if unit != "w" and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


DurationMs = Annotated[int, BeforeValidator(duration_ms)]
PositiveDurationMs = Annotated[int, BeforeValidator(positive_duration_ms)]
