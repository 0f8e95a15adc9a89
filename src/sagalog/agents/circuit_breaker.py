"""A circuit breaker per dependency, as a pure state machine over an injected clock.

Closed: calls flow; consecutive failures are counted. Open: after
``failure_threshold`` consecutive failures no call is made until ``open_for_s`` has
passed, so a dependency in an outage is not hammered and work for it waits instead of
failing. Half-open: up to ``half_open_probes`` calls probe the dependency; a success
closes the breaker, a failure opens it again for another period.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field


class BreakerState(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerPolicy:
    """Thresholds of one dependency's breaker."""

    failure_threshold: int = 5
    open_for_s: float = 10.0
    half_open_probes: int = 1


@dataclass
class CircuitBreaker:
    """The breaker of one dependency. Not thread-safe: one per worker event loop."""

    name: str
    policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    clock: Callable[[], float] = field(default=lambda: 0.0)
    state: BreakerState = BreakerState.CLOSED
    failures: int = 0
    opened_at: float = 0.0
    probes_in_flight: int = 0
    transitions: list[tuple[BreakerState, BreakerState]] = field(default_factory=list)

    def _move(self, to: BreakerState) -> None:
        if to is not self.state:
            self.transitions.append((self.state, to))
            self.state = to

    def retry_at(self) -> float:
        """When an open breaker lets the next probe through."""
        return self.opened_at + self.policy.open_for_s

    def allow(self) -> bool:
        """Whether a call may go to the dependency now (a probe counts as in flight)."""
        if self.state is BreakerState.OPEN:
            if self.clock() < self.retry_at():
                return False
            self._move(BreakerState.HALF_OPEN)
            self.probes_in_flight = 0
        if self.state is BreakerState.HALF_OPEN:
            if self.probes_in_flight >= self.policy.half_open_probes:
                return False
            self.probes_in_flight += 1
        return True

    def record_success(self) -> None:
        self.failures = 0
        self.probes_in_flight = 0
        self._move(BreakerState.CLOSED)

    def record_failure(self) -> None:
        if self.state is BreakerState.HALF_OPEN:
            self._open()
            return
        self.failures += 1
        if self.failures >= self.policy.failure_threshold:
            self._open()

    def _open(self) -> None:
        self.opened_at = self.clock()
        self.probes_in_flight = 0
        self.failures = 0
        self._move(BreakerState.OPEN)
