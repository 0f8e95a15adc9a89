"""The time range of a report, from what a person types: ``7d``, ``2026-05-01``, ``now``."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from sagalog.errors import ConfigurationError

_RELATIVE = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|w)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


@dataclass(frozen=True, slots=True)
class TimeRange:
    """From ``since_ms`` (included) to ``until_ms`` (excluded), epoch milliseconds."""

    since_ms: int
    until_ms: int

    @property
    def length_ms(self) -> int:
        return self.until_ms - self.since_ms


def parse_moment(text: str, *, now_ms: int, option: str) -> int:
    """``now``, a duration before now (``7d``, ``12h``, ``30m``) or an ISO-8601 time.

    An ISO time without a zone is UTC; a date alone is its midnight (UTC).

    Raises:
        ConfigurationError: ``text`` is none of these, naming ``option``.
    """
    value = text.strip()
    if value.lower() == "now":
        return now_ms
    relative = _RELATIVE.match(value)
    if relative:
        return now_ms - int(relative.group(1)) * _UNIT_MS[relative.group(2)]
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ConfigurationError(
            f"{option} {text!r} is not a time: use a duration before now (7d, 12h, 30m), "
            "an ISO-8601 time (2026-05-01, 2026-05-01T09:00:00Z) or 'now'"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return (moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)


def parse_time_range(since: str, until: str, *, now_ms: int) -> TimeRange:
    """The range ``--since`` to ``--until``.

    Raises:
        ConfigurationError: either is not a time, or the range is empty or reversed.
    """
    since_ms = parse_moment(since, now_ms=now_ms, option="--since")
    until_ms = parse_moment(until, now_ms=now_ms, option="--until")
    if since_ms >= until_ms:
        raise ConfigurationError(
            f"--since {since} ({iso(since_ms)}) is not before --until {until} "
            f"({iso(until_ms)}); swap them or widen the range"
        )
    return TimeRange(since_ms, until_ms)


def iso(ms: int) -> str:
    """Epoch ms as an ISO-8601 UTC time to the second: ``2026-05-01T09:00:00Z``."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
