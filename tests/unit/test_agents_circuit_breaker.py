"""The circuit breaker's state machine, driven by a fake clock."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sagalog.agents.circuit_breaker import BreakerPolicy, BreakerState, CircuitBreaker
from sagalog.errors import ConfigurationError

from .fakes import FakeClock

CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN


def make_breaker(
    clock: FakeClock, *, threshold: int = 3, open_for_s: float = 10.0, probes: int = 1
) -> CircuitBreaker:
    policy = BreakerPolicy(
        failure_threshold=threshold, open_for_s=open_for_s, half_open_probes=probes
    )
    return CircuitBreaker("llm", policy=policy, clock=clock)


def fail(breaker: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        assert breaker.allow()
        breaker.record_failure()


def test_opens_after_threshold_consecutive_failures() -> None:
    breaker = make_breaker(FakeClock(), threshold=3)
    fail(breaker, 2)
    assert breaker.state is CLOSED
    fail(breaker, 1)
    assert breaker.state is OPEN
    assert not breaker.allow()


def test_success_resets_the_consecutive_count() -> None:
    breaker = make_breaker(FakeClock(), threshold=3)
    fail(breaker, 2)
    assert breaker.allow()
    breaker.record_success()
    assert breaker.failures == 0
    fail(breaker, 2)
    assert breaker.state is CLOSED
    fail(breaker, 1)
    assert breaker.state is OPEN


def test_open_refuses_until_open_for_s_has_passed() -> None:
    clock = FakeClock()
    breaker = make_breaker(clock, threshold=1, open_for_s=10.0)
    fail(breaker, 1)
    assert breaker.retry_at() == clock.now + 10.0
    clock.advance(9.999)
    assert not breaker.allow()
    assert breaker.state is OPEN
    clock.advance(0.001)
    assert breaker.allow()
    assert breaker.state is HALF_OPEN


@pytest.mark.parametrize("probes", [1, 3])
def test_half_open_allows_exactly_half_open_probes(probes: int) -> None:
    clock = FakeClock()
    breaker = make_breaker(clock, threshold=1, open_for_s=5.0, probes=probes)
    fail(breaker, 1)
    clock.advance(5.0)
    assert [breaker.allow() for _ in range(probes + 2)] == [True] * probes + [False, False]
    assert breaker.state is HALF_OPEN


def test_probe_success_closes() -> None:
    clock = FakeClock()
    breaker = make_breaker(clock, threshold=2, open_for_s=5.0, probes=2)
    fail(breaker, 2)
    clock.advance(5.0)
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state is CLOSED
    assert breaker.failures == 0
    assert all(breaker.allow() for _ in range(10))


def test_probe_failure_reopens_for_a_new_period() -> None:
    clock = FakeClock()
    breaker = make_breaker(clock, threshold=1, open_for_s=5.0)
    fail(breaker, 1)
    clock.advance(7.0)
    assert breaker.allow()
    clock.advance(1.0)  # the probe took a second to fail
    breaker.record_failure()
    assert breaker.state is OPEN
    assert breaker.retry_at() == clock.now + 5.0
    clock.advance(4.9)
    assert not breaker.allow()
    clock.advance(0.1)
    assert breaker.allow()


def test_transitions_are_recorded_in_order() -> None:
    clock = FakeClock()
    breaker = make_breaker(clock, threshold=1, open_for_s=5.0)
    fail(breaker, 1)
    clock.advance(5.0)
    fail(breaker, 1)  # the probe fails
    clock.advance(5.0)
    assert breaker.allow()
    breaker.record_success()
    assert breaker.transitions == [
        (CLOSED, OPEN),
        (OPEN, HALF_OPEN),
        (HALF_OPEN, OPEN),
        (OPEN, HALF_OPEN),
        (HALF_OPEN, CLOSED),
    ]


def test_outcomes_of_calls_admitted_before_opening_are_ignored_while_open() -> None:
    clock = FakeClock()
    breaker = make_breaker(clock, threshold=1, open_for_s=5.0)
    assert breaker.allow()  # a slow call, admitted while closed
    fail(breaker, 1)  # another call fails and opens the breaker
    opened_until = breaker.retry_at()
    clock.advance(2.0)
    breaker.record_success()  # the slow call answers late: no skipping the probes
    assert breaker.state is OPEN
    breaker.record_failure()  # nor does a late failure stretch the open period
    assert breaker.retry_at() == opened_until


def test_default_clock_is_the_monotonic_clock() -> None:
    # A constant default clock would keep an opened breaker open forever.
    breaker = CircuitBreaker("llm", policy=BreakerPolicy(failure_threshold=1))
    before = time.monotonic()
    breaker.record_failure()
    assert before <= breaker.opened_at <= time.monotonic()


@pytest.mark.parametrize(
    "kwargs",
    [{"failure_threshold": 0}, {"half_open_probes": 0}, {"open_for_s": -1.0}],
)
def test_bad_policy_is_a_configuration_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="breaker policy"):
        BreakerPolicy(**kwargs)


def test_probes_take_turns_while_another_caller_waits() -> None:
    clock = FakeClock()
    breaker = make_breaker(clock, threshold=1, open_for_s=10.0)
    assert breaker.allow("a")
    breaker.record_failure("a")
    clock.advance(10.0)
    assert breaker.allow("a")  # nobody else waits: "a" probes again
    breaker.record_failure("a")
    assert not breaker.allow("b")  # "b" is refused while open, and noted as waiting
    clock.advance(10.0)
    assert breaker.steps_aside("a")
    assert not breaker.allow("a")  # "a" failed the last probe: "b" goes first
    assert breaker.allow("b")
    breaker.record_failure("b")  # fails too: an outage, and now "b" steps aside
    assert not breaker.allow("a")  # refused while open: "a" waits
    clock.advance(10.0)
    assert not breaker.allow("b") and breaker.allow("a")
    breaker.record_success()
    assert breaker.state is CLOSED and not breaker.steps_aside("a")


def test_an_outage_is_several_callers_failing_and_one_bad_request_is_not() -> None:
    """The failures of several events open it as an outage: the runtime then spends no
    attempt on the calls that met it. One event failing alone (a request the dependency
    cannot serve) opens it too, but its attempts still count, so it is dead-lettered."""
    outage = make_breaker(FakeClock(), threshold=3)
    assert outage.allow("e1")
    outage.record_failure("e1")
    assert not outage.is_outage("e1")  # alone so far: its own failure
    assert outage.allow("e2")
    outage.record_failure("e2")
    assert outage.state is CLOSED and outage.is_outage("e1") and outage.is_outage("e2")
    assert outage.allow("e1")
    outage.record_failure("e1")
    assert outage.state is OPEN and outage.is_outage("e1")
    alone = make_breaker(FakeClock(), threshold=3)
    for _ in range(3):
        assert alone.allow("poison")
        alone.record_failure("poison")
    assert alone.state is OPEN and not alone.is_outage("poison")
    clock = FakeClock()
    recovered = make_breaker(clock, threshold=2, open_for_s=1.0)
    for key in ("e1", "e2"):
        recovered.allow(key)
        recovered.record_failure(key)
    clock.advance(1.0)
    assert recovered.allow("e3")
    recovered.record_success()
    assert recovered.state is CLOSED and not recovered.is_outage("e1")
