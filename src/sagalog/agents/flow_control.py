"""Per-dependency admission: circuit breakers and the global rate limit, together.

A handler's call to a dependency is admitted here. When the breaker is open, or the
rate budget would make the call wait longer than a transaction should stay open,
admission raises ``DependencyUnavailable`` and the runtime defers the event through
the retry topic until the dependency can take it: work waits, paused, not failed and
not spinning. Short rate waits are slept inside the handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from sagalog.agents.circuit_breaker import BreakerPolicy, BreakerState, CircuitBreaker
from sagalog.agents.failures import DependencyUnavailable
from sagalog.agents.rate_limit import DependencyLimits


class FlowControl:
    """Breakers and rate limits of one agent instance's dependencies."""

    def __init__(
        self,
        *,
        breaker_policy: BreakerPolicy,
        rate_limits: Mapping[str, float],
        max_rate_wait_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.clock = clock
        self.breaker_policy = breaker_policy
        self.breakers: dict[str, CircuitBreaker] = {}
        self.limits = DependencyLimits(rate_limits, clock=clock)
        self.max_rate_wait_s = max_rate_wait_s
        self.on_breaker_change: Callable[[str, BreakerState, BreakerState], None] | None = None

    def breaker(self, dependency: str) -> CircuitBreaker:
        breaker = self.breakers.get(dependency)
        if breaker is None:
            breaker = self.breakers[dependency] = CircuitBreaker(
                name=dependency, policy=self.breaker_policy, clock=self.clock
            )
        return breaker

    async def admit(self, dependency: str) -> None:
        """Wait for (or refuse) one call to ``dependency``.

        Raises:
            DependencyUnavailable: with the monotonic time at which to try again.
        """
        wait = self.limits.wait_time(dependency)
        if wait > self.max_rate_wait_s:
            raise DependencyUnavailable(dependency, retry_at=self.clock() + wait)
        breaker = self.breaker(dependency)
        before = breaker.state
        if not breaker.allow():
            raise DependencyUnavailable(
                dependency, retry_at=max(breaker.retry_at(), self.clock() + 0.05)
            )
        self._notify(dependency, before, breaker.state)
        while not self.limits.try_acquire(dependency):
            await asyncio.sleep(max(self.limits.wait_time(dependency), 0.001))

    def succeeded(self, dependency: str) -> None:
        breaker = self.breaker(dependency)
        before = breaker.state
        breaker.record_success()
        self._notify(dependency, before, breaker.state)

    def failed(self, dependency: str) -> None:
        breaker = self.breaker(dependency)
        before = breaker.state
        breaker.record_failure()
        self._notify(dependency, before, breaker.state)

    def rebalance(self, *, assigned: int, total: int) -> None:
        """Resize rate shares after the consumer group rebalanced."""
        self.limits.rebalance(assigned, total)

    def _notify(self, dependency: str, before: BreakerState, after: BreakerState) -> None:
        if before is not after and self.on_breaker_change is not None:
            self.on_breaker_change(dependency, before, after)
