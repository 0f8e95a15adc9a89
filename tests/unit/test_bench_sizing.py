"""The sizing model's arithmetic (``tests/bench/sizing.py``), on figures given here."""

from __future__ import annotations

from typing import Any

from .bench_modules import load_bench_module

sizing: Any = load_bench_module("sizing")


def figures(**values: float) -> dict[str, Any]:
    known = {name: figure.value for name, figure in sizing.MEASURED.items()}
    return {name: sizing.Figure(v, "test") for name, v in {**known, **values}.items()}


def test_twice_the_workflows_need_about_twice_the_cores_and_bytes() -> None:
    one = sizing.plan(workflows_per_day=50_000_000, waiting=1_000_000, figures=figures())
    two = sizing.plan(workflows_per_day=100_000_000, waiting=1_000_000, figures=figures())
    assert two.peak_sagas_per_s == 2 * one.peak_sagas_per_s
    assert two.broker_cores == 2 * one.broker_cores
    assert two.storage_tb_per_day == 2 * one.storage_tb_per_day
    assert one.tracker_workers < two.tracker_workers <= 2 * one.tracker_workers + 1


def test_the_plan_follows_the_measured_costs() -> None:
    day = 100_000_000 / 86_400 * 3  # the peak: three times the day's average
    plan = sizing.plan(
        workflows_per_day=100_000_000,
        waiting=10_000_000,
        figures=figures(tracker_us_per_saga=6_000, tracker_events_per_s=1_000_000),
    )
    assert plan.peak_sagas_per_s == day
    assert plan.tracker_workers == -(-day * 6_000 // (1e6 * 0.6))  # ceil, at 60% of a core
    assert plan.partitions % 6 == 0 and plan.partitions >= 4 * plan.tracker_workers
    assert plan.brokers >= 3  # never fewer than the replicas


def test_a_results_file_replaces_the_built_in_figures() -> None:
    results = {
        "sagas_measured_at": "today",
        "sagas_run": {
            "cpu_us_per_saga": {"tracker": 1_000, "agent1": 100, "agent2": 150, "kafka": 2_000},
            "broker": {"requests_per_saga": 7.0, "bytes_in_per_saga": 5_000},
        },
        "restore_records_per_s": 60_000,
        "measured_at": "today",
    }
    found = sizing.figures_from(results)
    assert found["tracker_us_per_saga"].value == 1_000
    assert found["agents_us_per_saga"].value == 250  # the agent processes, summed
    assert found["broker_us_per_saga"].value == 2_000
    assert found["requests_per_saga"].value == 7.0
    assert found["restore_records_per_s"].value == 60_000
    assert found["tracker_events_per_s"] == sizing.MEASURED["tracker_events_per_s"]
