"""A circuit breaker per dependency, as a pure state machine over an injected clock.

Closed: calls flow; consecutive failures are counted. Open: after
``failure_threshold`` consecutive failures no call is made until ``open_for_s`` has
passed, so a dependency in an outage is not hammered and work for it waits instead of
failing. Half-open: up to ``half_open_probes`` calls probe the dependency; a success
closes the breaker, a failure opens it again for another period.

An outcome reported while the breaker is open belongs to a call admitted before it
opened; it is ignored, so a late success cannot skip the probes and a late failure
cannot stretch the open period.

A failed probe costs its event no attempt (``HandlerContext.effect`` turns it into a
deferral): during an outage every probe fails, and if probes counted, an outage of a
few open periods would spend every waiting workflow's attempts and dead-letter them all.
That opens a door for a poison event, one whose own call fails whatever the
dependency's health: probing first each time, it would hold the breaker open, free
of charge, for good. So the probes take turns: the caller whose probe failed last
steps aside at the next probe while another caller is waiting (``key``). If the
other's probe succeeds, the breaker closes and the poison event's next failure is an
ordinary attempt, bounded by the retry policy; if it fails too, it is an outage.

One caller failing alone is the hard case: a bad request, or the first caller of an
outage with nobody else calling yet. Counting its attempts would dead-letter a workflow
in the first second of an outage, its retries spent before any other caller came (the
incident: docs/design/incident-history.md). So a lone failure counts as the caller's own
only when the dependency answered someone (a success, or a refusal of another request)
since the caller's previous failure, or for its first since it was first let through:
the dependency is up, the request is bad. Until then, for at most ``outage_doubt_s``
from its first failure, it is taken for an outage and costs no attempt, its probes
included (a failed probe is free only while its failure may be an outage's). A poison
event is dead-lettered as soon as other traffic shows the dependency answering, and in a
quiet system once the doubt ran out; meanwhile it retries at the deferral pace (a probe
per ``open_for_s`` once its failures opened the breaker, which other callers then wait
for, taking turns at the probes).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sagalog.errors import ConfigurationError


class BreakerState(enum.StrEnum):
    """Where a breaker stands; string values so they read well in logs and metrics."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerPolicy:
    """Thresholds of one dependency's breaker."""

    failure_threshold: int = 5
    open_for_s: float = 10.0
    half_open_probes: int = 1
    outage_doubt_s: float = 300.0
    """How long a caller failing alone, with no answer to anyone meanwhile, is taken for
    the victim of an outage (its attempts not spent) before its failures count anyway:
    past the outages a workflow should sit out, and a bound on how long a bad request
    in an otherwise quiet system waits before it is dead-lettered."""

    def __post_init__(self) -> None:
        # half_open_probes=0 would leave a half-open breaker refusing forever.
        if self.failure_threshold < 1 or self.half_open_probes < 1:
            raise ConfigurationError(
                f"breaker policy: failure_threshold={self.failure_threshold}, "
                f"half_open_probes={self.half_open_probes}; set both to 1 or more"
            )
        for name in ("open_for_s", "outage_doubt_s"):
            if getattr(self, name) < 0:
                raise ConfigurationError(
                    f"breaker policy: {name}={getattr(self, name)}; set it to 0 or more seconds"
                )


REMEMBERED_CALLERS = 10_000
"""Callers a breaker remembers; one forgotten starts a new window at its next failure."""


@dataclass
class CircuitBreaker:
    """The breaker of one dependency. Not thread-safe: one per worker event loop.

    The clock defaults to ``time.monotonic``: a wall clock can step backwards and
    keep a breaker open, and a constant clock would never let it half-open.
    """

    name: str
    policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    clock: Callable[[], float] = field(default=time.monotonic)
    state: BreakerState = BreakerState.CLOSED
    failures: int = 0
    opened_at: float = 0.0
    probes_in_flight: int = 0
    last_failed_probe: str | None = None
    """The key of the caller whose probe failed last: it steps aside while others wait."""
    others_waiting: bool = False
    """Whether a caller other than ``last_failed_probe`` was refused since that probe."""
    failing_keys: set[str] = field(default_factory=set)
    """The callers whose failures count towards opening (since the last success)."""
    opened_by_many: bool = False
    """Whether more than one caller's failures opened it: an outage, not one bad request."""
    answers: int = 0
    """Calls the dependency answered (successes and refusals), ever: the evidence it is up."""
    callers: dict[str, tuple[int, bool, float | None]] = field(default_factory=dict)
    """Per caller: ``answers`` when its window began (its first admission, then each
    failure), whether its last failure was its own, and when it first failed."""
    transitions: list[tuple[BreakerState, BreakerState]] = field(default_factory=list)

    def _move(self, to: BreakerState) -> None:
        if to is not self.state:
            self.transitions.append((self.state, to))
            self.state = to

    def retry_at(self) -> float:
        """When an open breaker lets the next probe through."""
        return self.opened_at + self.policy.open_for_s

    def would_allow(self, key: str | None = None) -> bool:
        """Whether ``allow`` would let a call through now; changes nothing, counts no probe.

        For a caller that must wait for something else (a rate slot) before calling:
        it asks here first, and ``allow`` only right before the call, so that a probe
        is never counted for a call that is then abandoned in its wait (a probe that
        never reports back would keep the breaker half-open and refusing for good).
        """
        if self.state is BreakerState.OPEN:
            return self.clock() >= self.retry_at() and not self.steps_aside(key)
        if self.state is BreakerState.HALF_OPEN:
            return self.probes_in_flight < self.policy.half_open_probes and not self.steps_aside(
                key
            )
        return True

    def allow(self, key: str | None = None) -> bool:
        """Whether a call may go to the dependency now (a probe counts as in flight).

        Args:
            key: who calls (the event being handled): the caller whose probe failed
                last is refused a probe while another caller is waiting for one.
        """
        if not self.would_allow(key):
            self.refused(key)
            return False
        if key is not None and key not in self.callers:
            self._remember(key, (self.answers, False, None))
        if self.state is BreakerState.OPEN:
            self._move(BreakerState.HALF_OPEN)
            self.probes_in_flight = 0
        if self.state is BreakerState.HALF_OPEN:
            self.probes_in_flight += 1
        return True

    def refused(self, key: str | None) -> None:
        """Note that ``key`` was refused a call: a caller other than the last failed
        probe's is waiting, so that one steps aside at the next probe."""
        if self.state is not BreakerState.CLOSED and key != self.last_failed_probe:
            self.others_waiting = True

    def is_probing(self) -> bool:
        """Whether a call admitted now is a probe (its failure reopens the breaker)."""
        return self.state is BreakerState.HALF_OPEN

    def steps_aside(self, key: str | None) -> bool:
        """Whether ``key``'s probe failed last and another caller waits for a probe."""
        return key is not None and key == self.last_failed_probe and self.others_waiting

    def record_success(self) -> None:
        """The admitted call succeeded: the dependency answers, so the breaker closes."""
        self.answers += 1  # late or not, the dependency answered
        if self.state is BreakerState.OPEN:
            return
        self.failures = 0
        self.probes_in_flight = 0
        self.last_failed_probe, self.others_waiting = None, False
        self.failing_keys.clear()
        self.opened_by_many = False
        self._move(BreakerState.CLOSED)

    def record_failure(self, key: str | None = None) -> None:
        """The admitted call failed: count it, or reopen at once if it was a probe.

        Args:
            key: who called; a failed probe's caller steps aside at the next probe.
        """
        if key is not None:
            self._note_failure(key)
        if self.state is BreakerState.OPEN:
            return
        if self.state is BreakerState.HALF_OPEN:
            self.last_failed_probe, self.others_waiting = key, False
            self._open()
            return
        self.failures += 1
        if key is not None:
            self.failing_keys.add(key)
        if self.failures >= self.policy.failure_threshold:
            self.opened_by_many = len(self.failing_keys) > 1
            self.failing_keys.clear()
            self._open()

    def is_outage(self, key: str | None = None) -> bool:
        """Whether ``key``'s last failure is the dependency's rather than its own: another
        caller failed too since the last success (the breaker is on its way to open),
        several callers' failures opened it, or nobody got an answer from the dependency
        since ``key`` failed before (see the module docstring). Only a caller that failed
        alone while the dependency answered others has its attempts counted."""
        if self.state is BreakerState.CLOSED and self.failing_keys - {key}:
            return True
        if self.state is not BreakerState.CLOSED and self.opened_by_many:
            return True
        return key is not None and not self.callers.get(key, (0, False, None))[1]

    def _note_failure(self, key: str) -> None:
        """Judge ``key``'s failure by the answers since its window began, or by how long
        it has been failing; start a new window."""
        now = self.clock()
        began, _, first = self.callers.pop(key, (self.answers, False, None))
        first = now if first is None else first
        own = self.answers > began or now - first >= self.policy.outage_doubt_s
        self._remember(key, (self.answers, own, first))

    def _remember(self, key: str, window: tuple[int, bool, float | None]) -> None:
        self.callers[key] = window
        while len(self.callers) > REMEMBERED_CALLERS:  # the least recent caller first
            del self.callers[next(iter(self.callers))]

    def _open(self) -> None:
        self.opened_at = self.clock()
        self.probes_in_flight = 0
        self.failures = 0
        self._move(BreakerState.OPEN)
