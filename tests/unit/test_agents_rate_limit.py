"""Token buckets over a fake clock, and a global limit split by partition assignment."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sagalog.agents.rate_limit import DependencyLimits, TokenBucket, partition_share
from sagalog.errors import ConfigurationError

from .fakes import FakeClock


def drain(bucket: TokenBucket) -> int:
    taken = 0
    while bucket.try_acquire():
        taken += 1
    return taken


def test_bucket_starts_full_and_admits_a_burst() -> None:
    bucket = TokenBucket(2.0, 5.0, FakeClock())
    assert drain(bucket) == 5
    assert not bucket.try_acquire()


def test_bucket_refills_with_the_clock() -> None:
    clock = FakeClock()
    bucket = TokenBucket(4.0, 4.0, clock)
    drain(bucket)
    clock.advance(0.5)
    assert bucket.available() == 2.0
    assert drain(bucket) == 2
    clock.advance(0.25)
    assert bucket.try_acquire()
    assert not bucket.try_acquire()


def test_refill_is_capped_at_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, 3.0, clock)
    drain(bucket)
    clock.advance(3_600.0)
    assert bucket.available() == 3.0
    assert drain(bucket) == 3


def test_try_acquire_takes_n_or_nothing() -> None:
    bucket = TokenBucket(1.0, 3.0, FakeClock())
    assert bucket.try_acquire(2)
    assert not bucket.try_acquire(2)
    assert bucket.available() == 1.0


def test_wait_time_is_exact() -> None:
    clock = FakeClock()
    bucket = TokenBucket(4.0, 8.0, clock)
    assert bucket.wait_time() == 0.0
    assert bucket.wait_time(8) == 0.0
    drain(bucket)
    assert bucket.wait_time() == 0.25
    assert bucket.wait_time(3) == 0.75
    clock.advance(0.125)
    assert bucket.wait_time() == 0.125
    clock.advance(0.125)
    assert bucket.wait_time() == 0.0
    assert bucket.try_acquire()


@pytest.mark.parametrize("rate", [0.3, 3.0, 7.0, 1_000.0 / 3.0, 12_345.6])
@pytest.mark.parametrize("start", [0.0, 1_000.0, 3_600_000.1])
def test_waiting_exactly_wait_time_always_yields_the_token(rate: float, start: float) -> None:
    # Float rounding of clock + wait must not leave the caller a hair short.
    clock = FakeClock(start)
    bucket = TokenBucket(rate, max(1.0, rate), clock)
    drain(bucket)
    for _ in range(100):
        wait = bucket.wait_time()
        assert wait > 0
        clock.advance(wait)
        assert bucket.try_acquire()


def test_rate_zero_waits_forever() -> None:
    bucket = TokenBucket(0.0, 1.0, FakeClock())
    assert bucket.try_acquire()
    assert bucket.wait_time() == math.inf
    assert not bucket.try_acquire()


def test_set_rate_applies_from_now_not_retroactively() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1.0, 100.0, clock)
    drain(bucket)
    clock.advance(2.0)  # two tokens earned at the old rate
    bucket.set_rate(10.0)
    assert bucket.available() == 2.0  # not 20: no burst from the rate rise
    clock.advance(0.5)
    assert bucket.available() == 7.0
    assert bucket.rate_per_s == 10.0


def test_set_rate_cuts_the_tokens_to_the_new_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, 10.0, clock)
    bucket.set_rate(2.0, burst=2.0)
    assert bucket.burst == 2.0
    assert bucket.available() == 2.0
    assert drain(bucket) == 2
    assert bucket.wait_time() == 0.5


def test_set_rate_down_to_zero_stops_refills() -> None:
    clock = FakeClock()
    bucket = TokenBucket(5.0, 5.0, clock)
    drain(bucket)
    bucket.set_rate(0.0)
    clock.advance(60.0)
    assert bucket.available() == 0.0
    assert bucket.wait_time() == math.inf


def test_a_clock_stepping_back_refills_nothing() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1.0, 5.0, clock)
    drain(bucket)
    clock.advance(-10.0)
    assert bucket.available() == 0.0
    clock.advance(11.0)
    assert bucket.available() == 1.0


@pytest.mark.parametrize(
    "args",
    [(-1.0, 1.0), (math.inf, 1.0), (math.nan, 1.0), (1.0, 0.0), (1.0, math.inf)],
)
def test_bad_bucket_is_a_configuration_error(args: tuple[float, float]) -> None:
    with pytest.raises(ConfigurationError, match="token bucket"):
        TokenBucket(*args, FakeClock())


@pytest.mark.parametrize("n", [0, -1, 3.5])
def test_a_request_that_can_never_be_met_is_refused(n: float) -> None:
    bucket = TokenBucket(1.0, 3.0, FakeClock())
    with pytest.raises(ConfigurationError, match="at most the burst"):
        bucket.wait_time(n)
    with pytest.raises(ConfigurationError, match="at most the burst"):
        bucket.try_acquire(n)


def test_partition_share_of_three_instances_on_six_partitions() -> None:
    shares = [partition_share(global_rate=30.0, assigned=2, total=6) for _ in range(3)]
    assert shares == [10.0, 10.0, 10.0]
    assert math.fsum(shares) == 30.0


@pytest.mark.parametrize("split", [(3, 2, 2), (4, 3), (5, 1, 1), (1, 1, 1, 1, 1, 1, 1), (7,)])
@pytest.mark.parametrize("global_rate", [10.0, 1.0, 33.3, 0.7, 1_000.1])
def test_partition_shares_of_uneven_splits_add_up_to_the_limit(
    split: tuple[int, ...], global_rate: float
) -> None:
    assert sum(split) == 7
    shares = [partition_share(global_rate=global_rate, assigned=n, total=7) for n in split]
    assert math.fsum(shares) <= global_rate  # never above, not even by rounding
    assert math.fsum(shares) == pytest.approx(global_rate, rel=1e-12)
    assert shares == sorted(shares, reverse=True)  # more partitions, more rate


def test_partition_share_of_an_instance_without_partitions_is_zero() -> None:
    assert partition_share(global_rate=50.0, assigned=0, total=6) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"global_rate": 1.0, "assigned": 1, "total": 0}, "total=0"),
        ({"global_rate": 1.0, "assigned": 0, "total": -3}, "total=-3"),
        ({"global_rate": 1.0, "assigned": 7, "total": 6}, "assigned=7"),
        ({"global_rate": 1.0, "assigned": -1, "total": 6}, "assigned=-1"),
        ({"global_rate": -1.0, "assigned": 1, "total": 6}, "rate -1.0"),
    ],
)
def test_bad_partition_share_is_a_configuration_error(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        partition_share(**kwargs)


def test_dependency_limits_start_at_the_global_rate_with_burst_seconds() -> None:
    clock = FakeClock()
    limits = DependencyLimits({"llm": 10.0, "erp": 0.5}, clock=clock, burst_seconds=2.0)
    assert limits.rate("llm") == 10.0
    # Buckets start empty: instances joining one by one must not each spend a burst.
    assert sum(limits.try_acquire("llm") for _ in range(25)) == 0
    assert sum(limits.try_acquire("erp") for _ in range(5)) == 0
    clock.advance(2.0)
    assert sum(limits.try_acquire("llm") for _ in range(25)) == 20  # burst = 10/s * 2 s
    assert sum(limits.try_acquire("erp") for _ in range(5)) == 1  # burst floor of one call
    assert limits.wait_time("erp") == 2.0


def test_unknown_dependency_is_unlimited() -> None:
    limits = DependencyLimits({"llm": 1.0}, clock=FakeClock())
    assert all(limits.try_acquire("search") for _ in range(1_000))
    assert limits.wait_time("search") == 0.0
    assert limits.rate("search") == math.inf


def test_rebalance_sets_every_bucket_to_its_share() -> None:
    clock = FakeClock()
    limits = DependencyLimits({"llm": 30.0, "erp": 6.0}, clock=clock)
    limits.rebalance(2, 6)
    assert limits.rate("llm") == 10.0
    assert limits.rate("erp") == 2.0
    # the burst shrank with the share: 1 s of 10/s, not of 30/s
    assert sum(limits.try_acquire("llm") for _ in range(30)) == 0  # starts empty
    assert limits.wait_time("llm") == 0.1
    clock.advance(5.0)
    assert sum(limits.try_acquire("llm") for _ in range(30)) == 10
    assert limits.wait_time("llm") == 0.1
    clock.advance(1.0)
    assert sum(limits.try_acquire("llm") for _ in range(30)) == 10

    limits.rebalance(assigned=6, total=6)  # the other instances left
    assert limits.rate("llm") == 30.0
    assert sum(limits.try_acquire("llm") for _ in range(30)) == 0  # no retroactive refill
    clock.advance(1.0)
    assert sum(limits.try_acquire("llm") for _ in range(40)) == 30

    limits.rebalance(0, 6)  # every partition revoked
    assert limits.rate("llm") == 0.0
    clock.advance(60.0)
    assert sum(limits.try_acquire("llm") for _ in range(5)) <= 1
    assert limits.wait_time("llm") == math.inf


def test_tokens_earned_before_the_first_assignment_are_not_spent() -> None:
    """A member joining the group earns at the full global rate until its first
    assignment (seconds, while the group forms); spending that on joining, on top of
    the members already calling, took three instances to 30 calls/s under a 20/s limit."""
    clock = FakeClock()
    limits = DependencyLimits({"llm": 30.0}, clock=clock)
    clock.advance(5.0)  # joining the group
    limits.rebalance(2, 6)
    assert limits.rate("llm") == 10.0
    assert sum(limits.try_acquire("llm") for _ in range(30)) == 0
    clock.advance(1.0)
    assert sum(limits.try_acquire("llm") for _ in range(30)) == 10


def test_a_share_that_starts_again_after_holding_nothing_starts_empty() -> None:
    clock = FakeClock()
    limits = DependencyLimits({"llm": 30.0}, clock=clock)
    limits.rebalance(2, 6)
    clock.advance(5.0)
    limits.rebalance(0, 6)  # all revoked: the new owners spend the share meanwhile
    clock.advance(5.0)
    limits.rebalance(3, 6)
    assert sum(limits.try_acquire("llm") for _ in range(30)) == 0
    clock.advance(1.0)
    assert sum(limits.try_acquire("llm") for _ in range(30)) == 15


def test_a_share_that_changes_while_held_keeps_its_tokens_up_to_the_new_burst() -> None:
    clock = FakeClock()
    limits = DependencyLimits({"llm": 30.0}, clock=clock)
    limits.rebalance(3, 6)
    clock.advance(2.0)
    limits.rebalance(2, 6)  # one partition moved to a new member
    assert sum(limits.try_acquire("llm") for _ in range(30)) == 10


def test_tokens_owed_stay_owed_when_the_share_starts_again() -> None:
    clock = FakeClock()
    limits = DependencyLimits({"llm": 10.0}, clock=clock)
    limits.rebalance(6, 6)
    assert limits.reserve("llm") == 0.1
    assert limits.reserve("llm") == 0.2  # two calls promised, not yet made
    limits.rebalance(0, 6)
    limits.rebalance(6, 6)
    assert limits.wait_time("llm") == pytest.approx(0.3)


def test_a_bad_rebalance_changes_no_bucket() -> None:
    limits = DependencyLimits({"llm": 30.0}, clock=FakeClock())
    limits.rebalance(3, 6)
    with pytest.raises(ConfigurationError, match="assigned=7"):
        limits.rebalance(7, 6)
    assert limits.rate("llm") == 15.0


@pytest.mark.parametrize(
    ("rates", "burst_seconds", "named"),
    [
        ({"llm": -2.0}, 1.0, "'llm'"),
        ({"llm": math.inf}, 1.0, "'llm'"),
        ({"llm": 1.0}, 0.0, "burst_seconds=0.0"),
    ],
)
def test_bad_limits_are_a_configuration_error(
    rates: dict[str, float], burst_seconds: float, named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named):
        DependencyLimits(rates, clock=FakeClock(), burst_seconds=burst_seconds)


def test_calls_as_made_are_counted_at_the_share_like_their_reservations() -> None:
    """``take_made`` charges each call again as it goes: it follows every rebalance,
    so after a stall a call finds at most a burst of its share, not of the old one."""
    clock = FakeClock()
    limits = DependencyLimits({"llm": 30.0}, clock=clock)
    limits.rebalance(6, 6)
    clock.advance(5.0)
    assert [limits.take_made("llm") for _ in range(31)][-2:] == [0.0, pytest.approx(1 / 30)]
    limits.rebalance(2, 6)  # the share shrank: so does what the calls as made may spend
    clock.advance(5.0)
    made = [limits.take_made("llm") for _ in range(11)]
    assert made[:10] == [0.0] * 10
    assert made[10] == pytest.approx(0.1)
    assert limits.take_made("search") == 0.0  # unlimited
