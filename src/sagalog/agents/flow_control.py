"""Per-dependency admission: circuit breakers and the global rate limit, together.

A handler's call to a dependency is admitted here. When the breaker is open, or the
rate budget would make the call wait longer than a transaction should stay open,
admission raises ``DependencyUnavailable`` and the runtime defers the event through
the retry topic until the dependency can take it: work waits, paused, not failed and
not spinning. Short rate waits are slept inside the handler; a call's rate slot is
reserved before it waits, so a batch of handlers queues for the rate, and those whose
turn is more than ``max_rate_wait_s`` away are deferred instead of all waiting in the
open transaction (the batch's handlers start highest priority first, so the calls
that go now are the most urgent ones).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
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
        self.rate_waits: Counter[str] = Counter()
        """Per dependency: calls that waited for a rate-limit slot (``metrics``)."""
        self.rate_waited_s: dict[str, float] = {}
        """Per dependency: the seconds those calls waited."""

    def breaker(self, dependency: str) -> CircuitBreaker:
        breaker = self.breakers.get(dependency)
        if breaker is None:
            breaker = self.breakers[dependency] = CircuitBreaker(
                name=dependency, policy=self.breaker_policy, clock=self.clock
            )
        return breaker

    async def admit(self, dependency: str, key: str | None = None) -> bool:
        """Wait for (or refuse) one call to ``dependency``; whether the call is a probe.

        The breaker is asked first without counting a probe, then the rate slot is
        reserved and waited for, then the breaker is asked again, counting the probe,
        right before the call: a probe is never abandoned in a rate wait. A slot whose
        call the breaker then refuses (it opened meanwhile) is lost: the safe side.

        Args:
            dependency: the dependency's name.
            key: who calls (the event being handled), so that probes take turns.

        Raises:
            DependencyUnavailable: with the monotonic time at which to try again.
        """
        breaker = self.breaker(dependency)
        if not breaker.would_allow(key):
            breaker.refused(key)
            raise self._refused(breaker, key)
        await self.pace(dependency)
        before = breaker.state
        if not breaker.allow(key):
            raise self._refused(breaker, key)
        self._notify(dependency, before, breaker.state)
        return breaker.is_probing()

    async def pace(self, dependency: str) -> None:
        """Wait for the rate slot of one more call within an admitted one.

        An effect whose earlier attempt left an intent asks the dependency twice: a
        lookup, then (nothing found) the call. Both reach the dependency, so each takes
        a slot of its rate limit; the breaker admitted the attempt once. Riding on the
        lookup's slot, the calls after an outage that left many intents would reach up
        to twice the limit.

        A slot names a time. Woken past it (the loop was busy: a GC pass, a synced write,
        other handlers' work), a call would go at once with every other call planned
        meanwhile: a stall of a second or two sends them all in one second, beyond the
        limit (docs/design/incident-history.md). So each call is also counted as it goes
        (``DependencyLimits.take_made``), and waits there if the bucket has no token.

        Raises:
            DependencyUnavailable: the slot is further off than ``max_rate_wait_s``
                (the attempt is deferred; the intent stays for the next one).
        """
        wait = self.limits.reserve(dependency, max_wait_s=self.max_rate_wait_s)
        if wait is None:
            raise DependencyUnavailable(
                dependency, retry_at=self.clock() + self.limits.wait_time(dependency)
            )
        if wait > 0:
            self.rate_waits[dependency] += 1
            self.rate_waited_s[dependency] = self.rate_waited_s.get(dependency, 0.0) + wait
            await asyncio.sleep(wait)
        while (short := self.limits.take_made(dependency)) > 0:
            if math.isinf(short):  # every partition went while it waited: no share left
                raise DependencyUnavailable(
                    dependency, retry_at=self.clock() + self.breaker_policy.open_for_s
                )
            await asyncio.sleep(short)

    def _refused(self, breaker: CircuitBreaker, key: str | None) -> DependencyUnavailable:
        if breaker.steps_aside(key):  # another caller probes first: come back next period
            return DependencyUnavailable(
                breaker.name, retry_at=self.clock() + self.breaker_policy.open_for_s
            )
        return DependencyUnavailable(
            breaker.name, retry_at=max(breaker.retry_at(), self.clock() + 0.05)
        )

    def succeeded(self, dependency: str) -> None:
        breaker = self.breaker(dependency)
        before = breaker.state
        breaker.record_success()
        self._notify(dependency, before, breaker.state)

    def failed(self, dependency: str, key: str | None = None) -> None:
        breaker = self.breaker(dependency)
        before = breaker.state
        breaker.record_failure(key)
        self._notify(dependency, before, breaker.state)

    def rebalance(self, *, assigned: int, total: int) -> None:
        """Resize rate shares after the consumer group rebalanced."""
        self.limits.rebalance(assigned, total)

    def _notify(self, dependency: str, before: BreakerState, after: BreakerState) -> None:
        if before is not after and self.on_breaker_change is not None:
            self.on_breaker_change(dependency, before, after)
