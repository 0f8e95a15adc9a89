"""A budget's ledger (``sagalog.budgets.ledger``): reserve, settle, release, the windows."""

from __future__ import annotations

import random

import pytest

from sagalog.budgets.ledger import (
    DAY_MS,
    MINUTE_MS,
    UNANSWERED_MS,
    BudgetExceeded,
    BudgetLimits,
    Exhausted,
    Granted,
    Ledger,
    Measure,
    Usage,
    money_micros,
)
from sagalog.errors import ConfigurationError

T0 = 1_800_000_000_000 - 1_800_000_000_000 % DAY_MS  # a UTC midnight


def tokens(n: int) -> Usage:
    return Usage(tokens=n)


def test_calls_are_granted_until_the_minute_holds_the_limit() -> None:
    ledger = Ledger("tenant-a", BudgetLimits(tokens_per_minute=1000))
    assert isinstance(ledger.reserve("c1", tokens(600), now_ms=T0), Granted)
    assert isinstance(ledger.reserve("c2", tokens(400), now_ms=T0 + 10), Granted)
    refused = ledger.reserve("c3", tokens(1), now_ms=T0 + 20)
    # Not answered yet: c1 holds the window UNANSWERED_MS after its reservation.
    assert refused == Exhausted(
        Measure.TOKENS_PER_MINUTE, retry_at_ms=T0 + UNANSWERED_MS, spent=1000, limit=1000, asked=1
    )


def test_the_retry_time_is_when_enough_of_the_oldest_has_left_the_window() -> None:
    ledger = Ledger("b", BudgetLimits(tokens_per_minute=1000))
    for key, at, answered in (("c1", 0, 2_000), ("c2", 5_000, 6_000), ("c3", 9_000, 9_500)):
        ledger.reserve(key, tokens(300), now_ms=T0 + at)
        ledger.settle(key, tokens(300), now_ms=T0 + answered)
    refused = ledger.reserve("c4", tokens(500), now_ms=T0 + 10_000)
    assert isinstance(refused, Exhausted)
    # c1 and c2 must have left: each 60 s after its answer, not its reservation.
    assert refused.retry_at_ms == T0 + 6_000 + MINUTE_MS
    assert isinstance(ledger.reserve("c4", tokens(500), now_ms=T0 + 6_000 + MINUTE_MS), Granted)


def test_an_answer_after_the_unanswered_hold_lapsed_holds_the_window_again() -> None:
    ledger = Ledger("b", BudgetLimits(tokens_per_minute=1000))
    ledger.reserve("slow", tokens(1000), now_ms=T0)
    # Its unanswered hold has lapsed: another call fits, and the slow one drops out.
    assert isinstance(ledger.reserve("other", tokens(1), now_ms=T0 + UNANSWERED_MS), Granted)
    ledger.release("other")
    # Then the model answers it after all: its tokens hold a minute from the answer.
    ledger.settle("slow", tokens(900), now_ms=T0 + UNANSWERED_MS + 1_000)
    refused = ledger.reserve("next", tokens(200), now_ms=T0 + UNANSWERED_MS + 2_000)
    assert isinstance(refused, Exhausted)
    assert refused.retry_at_ms == T0 + UNANSWERED_MS + 1_000 + MINUTE_MS


def test_the_window_slides_so_no_minute_boundary_lets_twice_the_limit_through() -> None:
    ledger = Ledger("b", BudgetLimits(tokens_per_minute=1000))
    ledger.reserve("late", tokens(1000), now_ms=T0 + 59_000)
    assert isinstance(ledger.reserve("next", tokens(1000), now_ms=T0 + 61_000), Exhausted)


def test_any_sixty_seconds_of_arrivals_hold_at_most_the_limit_under_random_calls() -> None:
    """The provider counts a call when it arrives, some time after its reservation and
    before its answer: whatever the delays, no 60 s of arrivals exceed the limit."""
    rng = random.Random(7)
    ledger = Ledger("b", BudgetLimits(tokens_per_minute=10_000))
    arrivals: list[tuple[int, int]] = []
    answers: list[tuple[int, str, int]] = []  # (answered at, key, tokens), settled in time
    now = T0
    for n in range(3_000):
        now += rng.randint(0, 400)
        while answers and answers[0][0] <= now:
            at, key, size = answers.pop(0)
            ledger.settle(key, tokens(size), now_ms=at)
        size = rng.randint(1, 2_000)
        if isinstance(ledger.reserve(f"c{n}", tokens(size), now_ms=now), Granted):
            arrived = now + rng.randint(0, 5_000)  # queued before it reached the model
            arrivals.append((arrived, size))
            answers.append((arrived + rng.randint(100, 3_000), f"c{n}", size))
            answers.sort()
    for start, _ in arrivals:
        in_window = sum(size for at, size in arrivals if start <= at < start + MINUTE_MS)
        assert in_window <= 10_000
    assert sum(size for _, size in arrivals) > 10_000 * (now - T0) / MINUTE_MS * 0.7


def test_a_key_reserved_again_counts_once() -> None:
    ledger = Ledger("b", BudgetLimits(tokens_per_minute=1000))
    first = ledger.reserve("effect-key", tokens(800), now_ms=T0)
    again = ledger.reserve("effect-key", tokens(900), now_ms=T0 + 1_000)  # a retry's estimate
    assert isinstance(first, Granted) and not first.repeated
    assert again == Granted(first.reservation, repeated=True)
    settled, pending = ledger.spent(now_ms=T0 + 1_000)
    assert (settled, pending) == (Usage(), tokens(800))


def test_settling_replaces_the_estimate_where_it_was_counted() -> None:
    ledger = Ledger("b", BudgetLimits(tokens_per_minute=1000))
    ledger.reserve("c1", tokens(900), now_ms=T0)
    ledger.settle("c1", tokens(250), now_ms=T0 + 3_000)
    assert ledger.spent(now_ms=T0 + 3_000) == (tokens(250), Usage())
    assert isinstance(ledger.reserve("c2", tokens(700), now_ms=T0 + 3_000), Granted)
    refused = ledger.reserve("c3", tokens(100), now_ms=T0 + 4_000)
    assert isinstance(refused, Exhausted)
    assert refused.retry_at_ms == T0 + 3_000 + MINUTE_MS  # c1 leaves 60 s after its answer


def test_a_call_over_its_estimate_is_counted_in_full_and_later_calls_wait_longer() -> None:
    ledger = Ledger("b", BudgetLimits(tokens_per_minute=1000))
    ledger.reserve("c1", tokens(500), now_ms=T0)
    ledger.settle("c1", tokens(1_400), now_ms=T0 + 2_000)
    assert ledger.spent(now_ms=T0 + 2_000)[0] == tokens(1_400)
    assert isinstance(ledger.reserve("c2", tokens(1), now_ms=T0 + 2_000), Exhausted)


def test_a_settlement_without_reservation_is_counted_now() -> None:
    ledger = Ledger("b", BudgetLimits(tokens_per_minute=1000))
    ledger.settle("lost", tokens(300), now_ms=T0)
    assert ledger.spent(now_ms=T0) == (tokens(300), Usage())


def test_a_released_reservation_frees_its_share_but_a_settled_one_stays() -> None:
    ledger = Ledger("b", BudgetLimits(tokens_per_minute=1000))
    ledger.reserve("refused", tokens(1000), now_ms=T0)
    ledger.release("refused")  # the dependency refused before the call was sent
    assert isinstance(ledger.reserve("c2", tokens(1000), now_ms=T0 + 1), Granted)
    ledger.settle("c2", tokens(1000), now_ms=T0 + 2)
    ledger.release("c2")
    assert ledger.spent(now_ms=T0 + 3) == (tokens(1000), Usage())


def test_money_is_held_per_utc_day() -> None:
    ledger = Ledger("b", BudgetLimits(micros_per_day=money_micros("1.50", what="limit")))
    assert isinstance(ledger.reserve("c1", Usage(micros=1_000_000), now_ms=T0 + 1), Granted)
    refused = ledger.reserve("c2", Usage(micros=600_000), now_ms=T0 + 20 * 3_600_000)
    assert isinstance(refused, Exhausted)
    assert (refused.measure, refused.retry_at_ms) == (Measure.MONEY_PER_DAY, T0 + DAY_MS)
    assert isinstance(ledger.reserve("c2", Usage(micros=600_000), now_ms=T0 + DAY_MS), Granted)


def test_a_call_that_could_never_fit_is_an_error_naming_the_budget() -> None:
    ledger = Ledger("tenant-a", BudgetLimits(tokens_per_minute=1000))
    with pytest.raises(BudgetExceeded, match=r"tenant-a.*1200 tokens.*1000 tokens per minute"):
        ledger.reserve("big", tokens(1200), now_ms=T0)


def test_old_reservations_are_forgotten_with_their_keys() -> None:
    ledger = Ledger("b", BudgetLimits(tokens_per_minute=1000, micros_per_day=10_000_000))
    ledger.reserve("c1", Usage(tokens=10, micros=5), now_ms=T0 + 1_000)
    ledger.reserve("c2", Usage(tokens=10, micros=5), now_ms=T0 + DAY_MS + 1)
    assert [r.key for r in ledger.reservations()] == ["c2"]
    # within the day, past the token window (unanswered: UNANSWERED_MS): kept for money
    ledger.forget_before(T0 + DAY_MS + UNANSWERED_MS + 1)
    assert [r.key for r in ledger.reservations()] == ["c2"]
    assert ledger.spent(now_ms=T0 + DAY_MS + UNANSWERED_MS + 1) == (Usage(), Usage(0, 5))


def test_limits_are_shared_by_partitions_and_a_share_never_drops_to_nothing() -> None:
    limits = BudgetLimits(tokens_per_minute=10_000, micros_per_day=7)
    assert limits.share(1, 3) == BudgetLimits(3_333, 2)
    assert limits.share(0, 3) == BudgetLimits(1, 1)
    assert BudgetLimits().share(1, 3) == BudgetLimits()


@pytest.mark.parametrize(
    ("amount", "micros"), [("25", 25_000_000), ("0.0035", 3_500), (2, 2_000_000)]
)
def test_money_is_read_exactly_in_micros(amount: str | int, micros: int) -> None:
    assert money_micros(amount, what="x") == micros


@pytest.mark.parametrize("amount", ["-1", "abc", "NaN", "0.0000001", "inf"])
def test_money_that_is_not_an_amount_is_refused_with_the_setting_named(amount: str) -> None:
    with pytest.raises(ConfigurationError, match="BUDGET_TENANT_A_MONEY_PER_DAY"):
        money_micros(amount, what="BUDGET_TENANT_A_MONEY_PER_DAY")


def test_limits_and_usage_refuse_what_cannot_be() -> None:
    with pytest.raises(ConfigurationError, match="tokens_per_minute=0"):
        BudgetLimits(tokens_per_minute=0)
    with pytest.raises(ConfigurationError, match="negative"):
        Usage(tokens=-5)
