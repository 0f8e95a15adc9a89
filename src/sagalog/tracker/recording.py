"""The tracker's sink with side effects disabled: it publishes nothing and remembers.

A replay, a what-if and a test run the tracker's processor unchanged, and the
processor hands every event it would publish and every alert it would raise to a
sink. Here nothing leaves the process: no producer is even created, so a replay
cannot ask an agent for a compensation or page anyone, whatever it decides. What
would have been published is counted (rebuild) or kept (what-if and tests read it).
"""

from __future__ import annotations

from sagalog.flows.model import Flow
from sagalog.tracker.actions import Alert, Publish


class RecordingSink:
    """Implements the processor's ``Sink``; ``keep`` keeps every action (what-if, tests)."""

    def __init__(self, *, keep: bool = False) -> None:
        self.keep = keep
        self.published = 0
        self.alerted = 0
        self.actions: list[Publish] = []
        self.alerts: list[Alert] = []

    def publish(self, action: Publish, *, partition: int) -> None:
        self.published += 1
        if self.keep:
            self.actions.append(action)

    def alert(self, alert: Alert, *, flow: Flow | None, now_ms: int, partition: int) -> None:
        self.alerted += 1
        if self.keep:
            self.alerts.append(alert)

    async def flush(self) -> None:
        """Nothing was sent, so there is nothing to wait for."""

    def clear(self) -> None:
        self.actions.clear()
        self.alerts.clear()
