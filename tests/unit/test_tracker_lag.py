"""The tracker's input-lag report, as plain functions."""

from __future__ import annotations

from sagalog.services.tracker.lag import LagWatch

A, B = ("orders", 0), ("orders", 1)


def test_only_waits_past_the_threshold_are_reported_with_the_worst_offset() -> None:
    watch = LagWatch(threshold_s=5.0, every_s=10.0)
    watch.observe(A, 10, 0.2)
    assert watch.due(now=100.0) == []
    watch.observe(A, 11, 6.0)
    watch.observe(A, 12, 9.5)
    watch.observe(A, 13, 7.0)
    watch.observe(B, 40, 5.0)
    assert sorted(watch.due(now=100.0)) == [(A, 9.5, 12), (B, 5.0, 40)]
    assert watch.due(now=100.0) == []  # reported: forgotten


def test_a_partition_is_reported_at_most_once_per_period() -> None:
    watch = LagWatch(threshold_s=1.0, every_s=10.0)
    watch.observe(A, 1, 3.0)
    assert watch.due(now=0.0) == [(A, 3.0, 1)]
    watch.observe(A, 2, 4.0)
    assert watch.due(now=5.0) == []  # kept for later
    assert watch.due(now=10.0) == [(A, 4.0, 2)]
