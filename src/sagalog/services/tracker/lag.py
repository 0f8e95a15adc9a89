"""How long input records waited in the log before the tracker decided them.

A hand-off normally waits milliseconds. A record that waited seconds means the
tracker fell behind, or that one partition was not fetched while the others were
(the stall the watchdog exits on after ``stall_timeout_s``). Shorter stalls do
not trip the watchdog, so each is logged here when it ends: partition, offset and
the wait, at most once per partition per ``every_s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LagWatch:
    """The longest wait per partition since it was last reported."""

    threshold_s: float = 5.0
    every_s: float = 10.0
    worst: dict[tuple[str, int], tuple[float, int]] = field(default_factory=dict)
    reported_at: dict[tuple[str, int], float] = field(default_factory=dict)

    def observe(self, key: tuple[str, int], offset: int, waited_s: float) -> None:
        if waited_s >= self.threshold_s and waited_s > self.worst.get(key, (0.0, 0))[0]:
            self.worst[key] = (waited_s, offset)

    def due(self, now: float) -> list[tuple[tuple[str, int], float, int]]:
        """``(partition, waited_s, offset)`` to report, each partition at most every ``every_s``."""
        out = []
        for key, (waited, offset) in list(self.worst.items()):
            if now - self.reported_at.get(key, -self.every_s) >= self.every_s:
                out.append((key, waited, offset))
                self.reported_at[key] = now
                del self.worst[key]
        return out
