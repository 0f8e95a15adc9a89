"""What a service says of itself: ``starting``, ``ok`` or ``degraded``, and why.

A broker that goes away is an outage every service rides out, not a crash: the
service keeps running, keeps serving what it can without the broker (the gateway's
reads, an agent's handlers in flight), retries the rest with backoff, and says
``degraded`` meanwhile, naming what does not answer and since when. ``starting``
is the time before the service could do its work at all (the tracker restoring its
tables, the gateway reading the tracker's state up to where it was).

``HealthBook`` is that state, kept by each service and read by its health check or
its log; it is plain data with an injected clock, so the rules are unit-tested.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum


class Health(StrEnum):
    STARTING = "starting"
    OK = "ok"
    DEGRADED = "degraded"


@dataclass(frozen=True)
class Problem:
    """One thing that does not answer: since when (monotonic seconds) and the last error."""

    since: float
    error: str


@dataclass
class HealthBook:
    """A service's health; ``on_change(before, after, why)`` hears every change."""

    clock: Callable[[], float] = time.monotonic
    on_change: Callable[[Health, Health, str], None] | None = None
    started: bool = False
    problems: dict[str, Problem] = field(default_factory=dict)

    @property
    def status(self) -> Health:
        if not self.started:
            return Health.STARTING
        return Health.DEGRADED if self.problems else Health.OK

    def ready(self) -> None:
        """The service does its work from now on (even if something is degraded)."""
        self._change(lambda: setattr(self, "started", True), "started")

    def degrade(self, what: str, error: str) -> None:
        """``what`` (a dependency, a call) failed with ``error``; the first failure dates it."""
        old = self.problems.get(what)
        since = old.since if old is not None else self.clock()
        self._change(lambda: self.problems.__setitem__(what, Problem(since, error)), error)

    def recover(self, what: str) -> float | None:
        """``what`` answers again; the seconds it did not, or None if it was not degraded."""
        old = self.problems.get(what)
        if old is None:
            return None
        self._change(lambda: self.problems.pop(what, None), f"{what} answers again")
        return self.clock() - old.since

    def describe(self) -> dict[str, object]:
        """``{"status", "problems": {what: {"for_s", "error"}}}`` for a health check."""
        now = self.clock()
        return {
            "status": str(self.status),
            "problems": {
                what: {"for_s": round(now - p.since, 1), "error": p.error}
                for what, p in sorted(self.problems.items())
            },
        }

    def _change(self, apply: Callable[[], object], why: str) -> None:
        before = self.status
        apply()
        after = self.status
        if after != before and self.on_change is not None:
            self.on_change(before, after, why)


def logged_changes(
    log: logging.Logger, *, agent: str, subject: str = "health"
) -> Callable[[Health, Health, str], None]:
    """An ``on_change`` that logs each change in the structured log's one schema.

    Degrading is a warning (an operator looks), recovering and starting are info.
    """

    def on_change(before: Health, after: Health, why: str) -> None:
        log.log(
            logging.WARNING if after is Health.DEGRADED else logging.INFO,
            "%s %s -> %s: %s",
            subject,
            before,
            after,
            why,
            extra={
                "sagalog": {
                    "agent": agent,
                    "action": "health",
                    "transition": f"{before}->{after}",
                    "outcome": str(after),
                }
            },
        )

    return on_change
