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
    [
        {"failure_threshold": 0},
        {"half_open_probes": 0},
        {"open_for_s": -1.0},
        {"outage_doubt_s": -1.0},
    ],
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
    cannot serve) opens it too; its attempts count once the dependency answered another
    caller since its last failure, so it is dead-lettered."""
    outage = make_breaker(FakeClock(), threshold=3)
    assert outage.allow("e1")
    outage.record_failure("e1")
    assert outage.is_outage("e1")  # alone so far, and nobody answered: an outage maybe
    assert outage.allow("e2")
    outage.record_failure("e2")
    assert outage.state is CLOSED and outage.is_outage("e1") and outage.is_outage("e2")
    assert outage.allow("e1")
    outage.record_failure("e1")
    assert outage.state is OPEN and outage.is_outage("e1")
    clock = FakeClock()
    alone = make_breaker(clock, threshold=3, open_for_s=1.0)
    for _ in range(3):
        assert alone.allow("poison")
        alone.record_failure("poison")
        assert alone.is_outage("poison")  # nobody else to tell: it waits, spending nothing
    assert alone.state is OPEN
    clock.advance(1.0)
    alone.refused("poison")  # its probe failed last? not yet; another caller comes
    assert alone.allow("e9")
    alone.record_success()  # the dependency answers e9: it is up
    assert alone.allow("poison")
    alone.record_failure("poison")
    assert alone.state is CLOSED and not alone.is_outage("poison")  # its own: counted


def test_the_first_caller_of_an_outage_spends_no_attempt_before_anyone_else_calls() -> None:
    """The chaos round's case: one workflow met a 60 s ledger outage alone and failed
    three times in a second; it must wait for the dependency, not be dead-lettered."""
    clock = FakeClock()
    breaker = make_breaker(clock, threshold=5, open_for_s=10.0)
    for _ in range(3):
        assert breaker.allow("first")
        breaker.record_failure("first")
        assert breaker.is_outage("first")
        clock.advance(0.4)
    assert breaker.allow("other")
    breaker.record_success()  # the outage ends
    assert breaker.allow("first")
    breaker.record_success()


def test_in_a_quiet_system_a_lone_failure_counts_once_the_doubt_ran_out() -> None:
    """A bad request with no other traffic to tell it from an outage waits at most
    ``outage_doubt_s`` (from its first failure) before its attempts count."""
    clock = FakeClock()
    policy = BreakerPolicy(failure_threshold=10**6, open_for_s=10.0, outage_doubt_s=60.0)
    breaker = CircuitBreaker("ledger", policy=policy, clock=clock)
    for _ in range(6):
        assert breaker.allow("alone")
        breaker.record_failure("alone")
        assert breaker.is_outage("alone")
        clock.advance(9.0)  # 54 s in all
    clock.advance(6.0)
    breaker.record_failure("alone")
    assert not breaker.is_outage("alone")  # 60 s failing with no answer: its own
    breaker.record_failure("alone")
    assert not breaker.is_outage("alone")  # and stays so: the doubt is not restarted


def test_a_refusal_of_another_request_is_an_answer_too() -> None:
    breaker = make_breaker(FakeClock(), threshold=5)
    breaker.record_failure("bad")
    breaker.record_success()  # the runtime reports a 4xx refusal as a success
    breaker.record_failure("bad")
    assert not breaker.is_outage("bad")


def test_answers_while_a_first_call_was_in_flight_make_its_failure_its_own() -> None:
    """A poison event among healthy ones in one batch: the others' answers came while
    its call was out, so even its first failure counts as an attempt."""
    breaker = make_breaker(FakeClock(), threshold=5)
    assert breaker.allow("poison") and breaker.allow("healthy")
    breaker.record_success()  # healthy's answer
    breaker.record_failure("poison")
    assert not breaker.is_outage("poison")


def test_a_breaker_remembers_a_bounded_number_of_callers() -> None:
    from sagalog.agents.circuit_breaker import REMEMBERED_CALLERS

    breaker = make_breaker(FakeClock(), threshold=10**9)
    for n in range(REMEMBERED_CALLERS + 5):
        breaker.record_failure(f"e{n}")
    assert len(breaker.callers) == REMEMBERED_CALLERS
    assert "e0" not in breaker.callers and f"e{REMEMBERED_CALLERS + 4}" in breaker.callers


def test_after_an_outage_a_caller_failing_alone_again_fails_on_its_own() -> None:
    clock = FakeClock()
    recovered = make_breaker(clock, threshold=2, open_for_s=1.0)
    for key in ("e1", "e2"):
        recovered.allow(key)
        recovered.record_failure(key)
    clock.advance(1.0)
    assert recovered.allow("e3")
    recovered.record_success()
    recovered.record_failure("e1")  # the dependency answered e3 since e1 failed
    assert recovered.state is CLOSED and not recovered.is_outage("e1")


def test_a_lone_bad_request_that_opened_the_breaker_counts_its_probes_after_the_doubt() -> None:
    """Its failures opened the breaker, so every call it makes next is a probe: those are
    free only while the doubt lasts, or it would wait for good with no other traffic."""
    clock = FakeClock()
    policy = BreakerPolicy(failure_threshold=3, open_for_s=10.0, outage_doubt_s=60.0)
    breaker = CircuitBreaker("ledger", policy=policy, clock=clock)
    start, judged = clock.now, []
    for _ in range(10):
        if breaker.allow("poison"):
            breaker.record_failure("poison")
            judged.append((clock.now - start, breaker.state, breaker.is_outage("poison")))
        clock.advance(10.0)
    assert any(state is OPEN for _, state, _ in judged)  # it opened the breaker itself
    assert all(outage for at, _, outage in judged if at < 60.0)
    assert [outage for at, _, outage in judged if at >= 60.0] and not any(
        outage for at, _, outage in judged if at >= 60.0
    )
