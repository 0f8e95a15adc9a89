"""The tracker's clock: the machine's, or a virtual one that moves only when told.

Every decision takes ``now_ms`` from here, so time is injected, never read behind
the rules' back. With ``clock=virtual`` time is the largest tick seen on the clock
topic (``sagalog.tracker.ticks``): a test, the demo or ``sagalog clock advance``
publishes "it is now T" and the tracker fires every timer due by T, so a three-day
approval passes in seconds on the real broker. A restarted virtual tracker takes
the time of the last ticks in the topic, so its clock never goes back.
"""

from __future__ import annotations

import time
from typing import Literal


class TrackerClock:
    def __init__(self, mode: Literal["wall", "virtual"], *, start_ms: int = 0) -> None:
        self.mode = mode
        self._virtual = start_ms

    @property
    def virtual(self) -> bool:
        return self.mode == "virtual"

    def now_ms(self) -> int:
        return self._virtual if self.virtual else time.time_ns() // 1_000_000

    def observe(self, tick_ms: int) -> int:
        """A tick arrived; the time to fire timers at."""
        if self.virtual:
            self._virtual = max(self._virtual, tick_ms)
        return self.now_ms()
