"""Health states and the bounded in-place retry: pure rules, a virtual clock."""

from __future__ import annotations

import pytest

from sagalog.agents.recovery import RejoinBudget
from sagalog.backoff import RetryPolicy, retry_within
from sagalog.errors import ServiceUnavailableError
from sagalog.health import Health, HealthBook


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_service_starts_then_degrades_and_recovers_with_the_outage_dated_from_its_start() -> None:
    clock = Clock()
    changes: list[tuple[Health, Health]] = []
    book = HealthBook(
        clock=clock, on_change=lambda before, after, _: changes.append((before, after))
    )
    assert book.status is Health.STARTING
    book.ready()
    book.degrade("kafka", "all brokers down")
    clock.now += 7
    book.degrade("kafka", "timed out")  # the same outage: dated from its first failure
    assert book.describe() == {
        "status": "degraded",
        "problems": {"kafka": {"for_s": 7.0, "error": "timed out"}},
    }
    assert book.recover("kafka") == 7.0
    assert book.recover("kafka") is None
    assert changes == [
        (Health.STARTING, Health.OK),
        (Health.OK, Health.DEGRADED),
        (Health.DEGRADED, Health.OK),
    ]


def test_retry_within_rides_out_failures_inside_the_bound() -> None:
    clock = Clock()
    calls = iter([ServiceUnavailableError("down"), ServiceUnavailableError("down"), "answer"])
    seen: list[int] = []

    def call() -> str:
        value = next(calls)
        if isinstance(value, Exception):
            raise value
        return value

    got = retry_within(
        call,
        policy=RetryPolicy(base_delay_s=1, max_delay_s=4),
        within_s=30,
        retry_on=(ServiceUnavailableError,),
        on_retry=lambda attempt, exc, delay: seen.append(attempt),
        sleep=clock.sleep,
        clock=clock,
        draw=lambda: 1.0,
    )
    assert got == "answer" and seen == [1, 2] and clock.now == 103.0  # waited 1 s, then 2 s


def test_retry_within_gives_the_last_error_when_the_bound_runs_out() -> None:
    clock = Clock()

    def down() -> None:
        raise ServiceUnavailableError("still down")

    with pytest.raises(ServiceUnavailableError, match="still down"):
        retry_within(
            down,
            policy=RetryPolicy(base_delay_s=1, max_delay_s=4),
            within_s=10,
            retry_on=(ServiceUnavailableError,),
            sleep=clock.sleep,
            clock=clock,
            draw=lambda: 1.0,
        )
    assert clock.now - 100 <= 10  # 1 + 2 + 4, and no wait that would end past the bound


def test_errors_not_named_are_not_retried() -> None:
    def broken() -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        retry_within(broken, policy=RetryPolicy(), within_s=10, retry_on=(ServiceUnavailableError,))


def test_rejoins_after_a_fencing_are_bounded_per_window() -> None:
    budget = RejoinBudget(limit=2, window_s=600)
    assert budget.take(0) and budget.take(10)
    assert not budget.take(20)  # a third within ten minutes: another live instance?
    assert budget.take(605)  # the first has left the window
