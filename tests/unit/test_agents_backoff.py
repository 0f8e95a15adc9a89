"""Retry delays grow, stop growing at the cap, stay inside the full-jitter bounds."""

from __future__ import annotations

from typing import Any

import pytest

from sagalog.backoff import RetryPolicy
from sagalog.errors import ConfigurationError


def test_cap_grows_by_the_multiplier_from_the_base() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=60.0, multiplier=2.0)
    assert [policy.cap(attempt) for attempt in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 8.0]


def test_cap_stops_at_max_delay() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=10.0, multiplier=3.0)
    assert policy.cap(3) == 9.0
    assert policy.cap(4) == 10.0
    assert policy.cap(50) == 10.0


def test_cap_of_a_very_late_attempt_is_max_delay_not_an_overflow() -> None:
    # 2.0 ** 2000 does not fit in a float; a long outage must not crash the retry path.
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=60.0, multiplier=2.0)
    assert policy.cap(2_000) == 60.0
    assert RetryPolicy(base_delay_s=0.0, max_delay_s=0.0).cap(2_000) == 0.0


def test_full_jitter_draws_between_zero_and_the_cap() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=60.0, multiplier=2.0)
    assert policy.delay(3, draw=lambda: 0.0) == 0.0
    assert policy.delay(3, draw=lambda: 0.25) == 0.5
    assert policy.delay(3, draw=lambda: 0.999) == pytest.approx(1.998)
    assert policy.delay(30, draw=lambda: 0.5) == 30.0  # jitter applies to the capped value


def test_default_draw_stays_within_the_bounds() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    for attempt in range(1, 10):
        for _ in range(50):
            assert 0.0 <= policy.delay(attempt) <= policy.cap(attempt)


def test_exhausted_after_max_attempts_failures() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert not policy.exhausted(0)
    assert not policy.exhausted(2)
    assert policy.exhausted(3)
    assert policy.exhausted(4)
    assert RetryPolicy(max_attempts=1).exhausted(1)  # one attempt in all: no retry


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_attempts": 0}, "max_attempts=0"),
        ({"base_delay_s": -1.0}, "base_delay_s=-1.0"),
        ({"base_delay_s": 5.0, "max_delay_s": 1.0}, "max_delay_s=1.0"),
        ({"multiplier": 0.5}, "multiplier=0.5"),
    ],
)
def test_bad_policy_is_a_configuration_error_naming_the_input(
    kwargs: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named):
        RetryPolicy(**kwargs)
