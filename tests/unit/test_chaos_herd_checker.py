"""The thundering herd's checks on hand-made call logs (tests/chaos/herd_checker.py)."""

from __future__ import annotations

import pytest

from chaos.herd_checker import Call, HerdLimits, Pass, judge_herd, most_in_window

DOWN, UP = 1_000.0, 1_060.0  # the outage, wall-clock seconds
LIMITS = HerdLimits(rate=40.0, open_for_s=5.0, instances=3)


def failed(*times: float) -> list[Call]:
    return [Call(t, "reserve", f"k-{t}", 503) for t in times]


def ok(*times: float) -> list[Call]:
    return [Call(t, "reserve", f"k-{t}", 200) for t in times]


def steady(start: float, count: int, rate: float) -> list[float]:
    return [start + i / rate for i in range(count)]


def trip_and_probe() -> list[Call]:
    """Three instances trip at once, then each probes every 5 s until the recovery."""
    trip = failed(*(DOWN + 0.5 + i * 0.01 for i in range(15)))
    probes = failed(*(DOWN + 0.5 + k * 5.2 + i * 0.3 for k in range(1, 11) for i in range(3)))
    return trip + probes


def herd(high_first: bool = True, count: int = 400, rate: float = 40.0) -> list[Pass]:
    """``count`` passes after the recovery, a tenth high, at ``rate`` per second."""
    times = steady(UP + 2.0, count, rate)
    highs = set(range(count // 10)) if high_first else set(range(0, count, 10))
    return [Pass(f"wf-{i}", i in highs, at) for i, at in enumerate(times)]


def judged(calls: list[Call], passes: list[Pass], limits: HerdLimits = LIMITS) -> list[str]:
    return judge_herd(calls, passes, outage=(DOWN, UP), limits=limits).failures


@pytest.mark.parametrize(
    ("times", "window", "expected"),
    [
        ([], 1.0, 0),
        ([1.0], 1.0, 1),
        ([1.0, 1.5, 1.99, 2.0, 2.5], 1.0, 3),  # [t, t + 1): 2.0 starts a new window
        ([0.0, 10.0, 0.5, 9.6], 1.0, 2),  # unsorted input
        ([1.0, 1.0, 1.0], 0.5, 3),
    ],
)
def test_most_in_window_slides_over_half_open_windows(
    times: list[float], window: float, expected: int
) -> None:
    assert most_in_window(times, window) == expected


def test_the_envelope_is_burst_plus_rate_times_window_plus_slack() -> None:
    assert LIMITS.burst == 40.0
    assert LIMITS.allowed(1.0) == 40 + 40 + 4
    assert LIMITS.allowed(10.0) == 40 + 400 + 4
    assert HerdLimits(rate=0.5).allowed(1.0) == 1.0 + 0.5 + 2  # a burst is at least one call


def test_a_well_behaved_herd_passes_with_its_figures() -> None:
    # The probe at +3 s succeeds; the bucket's burst, then the limited rate.
    after = ok(UP + 3.0) + ok(*steady(UP + 3.01, 40, 1000)) + ok(*steady(UP + 3.1, 400, 40))
    passes = herd(high_first=True)
    figures = judge_herd(trip_and_probe() + after, passes, outage=(DOWN, UP), limits=LIMITS)
    assert figures.failures == []
    assert figures.calls_in_outage == 45
    assert figures.trip_calls == 15
    assert figures.drain_rate == 40.0
    assert figures.most_probes_per_open_period == 3
    assert figures.first_success_after_recovery_s == 3.0
    assert figures.calls_before_first_success == 0
    assert figures.first_seconds[:5] == [0, 0, 0, 41 + 36, 40]
    assert figures.peak["1s"] <= LIMITS.allowed(1.0)
    assert figures.high == 40 and figures.high_share_first == 1.0
    assert figures.p50_high_s is not None and figures.p50_normal_s is not None
    assert figures.p50_high_s < figures.p50_normal_s
    summary = figures.summary(40.0)
    assert summary["dependency_peak_1s"] == figures.peak["1s"]
    assert summary["high_share_first"] == 1.0


def test_a_herd_released_at_once_breaks_the_limit() -> None:
    after = ok(*steady(UP + 1.0, 300, 1000))  # 300 calls in 0.3 s
    failures = judged(trip_and_probe() + after, herd())
    assert any("calls within 1s after the recovery" in f for f in failures)


def test_a_sustained_rate_above_the_limit_breaks_the_longer_windows_only() -> None:
    after = ok(*steady(UP + 1.0, 600, 60))  # 60/s: within 84 per second, not 444 per 10 s
    failures = judged(trip_and_probe() + after, herd())
    assert [f for f in failures if "after the recovery; the limit" in f] == [
        "300 calls within 5s after the recovery; the limit of 40/s with a burst of 40 allows 244",
        "600 calls within 10s after the recovery; the limit of 40/s with a burst of 40 allows 444",
    ]


def test_calls_admitted_before_the_breaker_opened_but_sent_after_are_caught() -> None:
    # 64 handlers per instance passed the closed breaker, then queued for the rate
    # limit and trickled out for seconds after it had opened.
    trickle = failed(*steady(DOWN + 0.5, 192, 40))
    failures = judged(trickle + trip_and_probe()[15:] + ok(UP + 1.0), herd())
    assert (
        "192 calls in the outage's first 5s; 3 breaker(s) opening after 5 failures and a "
        "second at the limited rate let at most 99 through"
    ) in failures


def test_instances_that_keep_calling_during_the_outage_are_caught() -> None:
    hammering = failed(*steady(DOWN + 10.0, 100, 2))  # 2 calls/s for 50 s, no breaker
    failures = judged(trip_and_probe()[:15] + hammering + ok(UP + 1.0), herd())
    assert any("within one open period" in f for f in failures)


def test_no_probe_but_the_whole_herd_at_the_recovery_is_caught() -> None:
    # Without breakers every stalled call is retried as it comes due: failures right
    # up to the recovery, then many calls before the first success.
    rush = failed(*steady(UP, 10, 1000)) + ok(UP + 0.02)
    failures = judged(trip_and_probe() + rush, herd())
    assert any("calls before the first success" in f for f in failures)


def test_a_dependency_nobody_calls_again_is_caught() -> None:
    assert judged(trip_and_probe(), []) == ["the dependency got no call after it recovered"]
    late = ok(UP + 30.0)
    assert any("half-opens after 5s" in f for f in judged(trip_and_probe() + late, herd()))


def test_first_come_first_served_is_not_high_priority_first() -> None:
    after = ok(*steady(UP + 2.0, 400, 40))
    failures = judged(trip_and_probe() + after, herd(high_first=False))
    assert any("of the first 40 passes were high-priority" in f for f in failures)
    figures = judge_herd(
        trip_and_probe() + after, herd(high_first=False), outage=(DOWN, UP), limits=LIMITS
    )
    assert figures.high_share_first == 0.1


def test_high_priority_slower_than_normal_is_caught() -> None:
    passes = [Pass(p.workflow_id, not p.high, p.at) for p in herd(high_first=False)]
    failures = judged(trip_and_probe() + ok(*steady(UP + 2.0, 400, 40)), passes)
    assert any("no sooner than normal ones" in f for f in failures)


def test_passes_before_the_recovery_are_not_part_of_the_herd() -> None:
    early = [Pass("wf-early", False, DOWN - 5.0)]
    figures = judge_herd(
        trip_and_probe() + ok(*steady(UP + 2.0, 400, 40)),
        early + herd(),
        outage=(DOWN, UP),
        limits=LIMITS,
    )
    assert figures.passes == 400
    assert figures.failures == []
