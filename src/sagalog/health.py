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
from collections.abc import Callable, Sequence
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


@dataclass(frozen=True)
class Verdict:
    """One probe's answer: ``ok`` is the HTTP 200/503, ``body`` says why to a person."""

    ok: bool
    body: dict[str, object]


def liveness(
    *, last_progress: float, now: float, bound_s: float, riding_out: Sequence[str] = ()
) -> Verdict:
    """Live while the service's own loop went round within ``bound_s``, or while it
    is riding out an outage it names (``riding_out``: its loop is inside a bounded
    reconnect, which ends in an exit of its own past ``outage_limit_s``).

    A broker outage leaves a service live: a restart would not bring the broker
    back, and would throw away the consumer's assignment and the tracker's warm
    tables. Only a loop that stopped going round for no reason it knows (a deadlock,
    a blocked event loop) fails the probe, for the orchestrator to restart it.
    """
    age = now - last_progress
    ok = age <= bound_s or bool(riding_out)
    body: dict[str, object] = {
        "status": "live" if ok else "stuck",
        "loop_seen_s_ago": round(age, 1),
        "bound_s": bound_s,
    }
    if riding_out:
        body["riding_out"] = list(riding_out)
    return Verdict(ok, body)


def readiness(book: HealthBook, *, waiting_for: list[str]) -> Verdict:
    """Ready once the service started and nothing it needs is outstanding.

    ``waiting_for`` names what a service still lacks (no assignment yet, partitions
    being hydrated or restored, a rebalance in progress, a read model behind); a
    rolling restart moves to the next instance only once this says ready, so that
    at most one instance's work is in motion at a time. ``degraded`` is still ready:
    the service does what it can and says what it cannot.
    """
    waiting = list(waiting_for)
    if not book.started:
        waiting.insert(0, "starting")
    return Verdict(not waiting, {**book.describe(), "waiting_for": waiting})
