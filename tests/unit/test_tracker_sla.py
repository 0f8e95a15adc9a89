"""SLA rules of the reference flow, evaluated over the spans its transitions describe.

procurement v1 declares ``approvals_waiting`` (p50 time in pending_approval over the
last hour above 4h) and ``slow_risk_scoring`` (p95 duration of score_risk over the
last hour above 2m).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.events import StateTransition
from sagalog.flows.model import Flow
from sagalog.testing import TrackerHarness
from sagalog.topology.loader import load_topology
from sagalog.tracker.sla import Span, evaluate, percentile
from sagalog.tracker.sla_monitor import SlaMonitor

MIN = 60_000
H = 60 * MIN
NOW = 100 * H


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    from sagalog.flows.loader import load_flow_file

    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    return load_flow_file(
        repo_root / "topology/flows/procurement.v1.yaml", catalog=catalog, topology=topology
    )


def waited(hours: float, *, ended_ago_ms: int | None = 10 * MIN) -> Span:
    """A stay in pending_approval of ``hours``, ended ``ended_ago_ms`` before NOW (None: open)."""
    left = None if ended_ago_ms is None else NOW - ended_ago_ms
    entered = (left if left is not None else NOW) - int(hours * H)
    return Span("pending_approval", "manager_approval", entered, left)


def test_the_median_wait_above_its_bound_fires_with_a_readable_message(flow: Flow) -> None:
    [alert] = evaluate(flow, [waited(5), waited(6), waited(1)], now_ms=NOW)
    assert alert.name == "approvals_waiting" and alert.value_ms == 5 * H and alert.samples == 3
    assert alert.message == (
        "procurement v1: approvals_waiting: p50 time in pending_approval over the last 1h is "
        "5h, above 4h (3 samples). Managers are slow to decide; check the escalation chain."
    )


def test_a_median_within_bounds_does_not_fire(flow: Flow) -> None:
    assert evaluate(flow, [waited(5), waited(1), waited(2)], now_ms=NOW) == []


def test_stays_that_ended_before_the_window_do_not_count(flow: Flow) -> None:
    assert evaluate(flow, [waited(9, ended_ago_ms=2 * H)], now_ms=NOW) == []


def test_workflows_still_waiting_count_so_nobody_deciding_is_noticed(flow: Flow) -> None:
    [alert] = evaluate(flow, [waited(30, ended_ago_ms=None)], now_ms=NOW)
    assert alert.value_ms == 30 * H


def test_step_duration_measures_the_step_while_it_runs(flow: Flow) -> None:
    slow = [Span("running", "score_risk", NOW - 30 * MIN, NOW - 27 * MIN) for _ in range(20)]
    fast = [Span("running", "score_risk", NOW - 10 * MIN, NOW - 9 * MIN) for _ in range(80)]
    compensating = Span("compensating", "score_risk", NOW - 50 * MIN, NOW - 5 * MIN)
    [alert] = evaluate(flow, [*slow, *fast, compensating], now_ms=NOW)
    assert (alert.name, alert.value_ms, alert.samples) == ("slow_risk_scoring", 3 * MIN, 100)
    assert evaluate(flow, fast, now_ms=NOW) == []


def test_min_samples_keeps_a_single_outlier_quiet(flow: Flow) -> None:
    assert evaluate(flow, [waited(9)], now_ms=NOW, min_samples=5) == []


def test_nearest_rank_percentiles_report_observed_values() -> None:
    values = list(range(1, 101))
    assert [percentile(values, s) for s in ("p50", "p95", "p99", "max")] == [50, 95, 99, 100]
    assert percentile([7], "p95") == 7
    with pytest.raises(ValueError, match="no values"):
        percentile([], "p50")


def test_the_transitions_the_tracker_publishes_feed_the_monitor(flow: Flow) -> None:
    tracker = TrackerHarness([flow], secret=b"unit-test-gate-secret-32-bytes!!", now_ms=0)
    monitor = SlaMonitor(tracker.registry)
    for event_type in (
        "procurement.v1.RequestSubmitted",
        "procurement.v1.RequestClassified",
        "procurement.v1.PoliciesRetrieved",
        "procurement.v1.RiskScored",
        "procurement.v1.BudgetReserved",
    ):
        tracker.send(event_type, "wf-1")
        tracker.advance(MIN)
    tracker.advance(5 * H)  # the gate escalates at 24h: not yet
    for publish in tracker.published:
        if isinstance(publish.event, StateTransition):
            monitor.observe(publish.workflow_id, publish.event)
    [(_, span)] = monitor.open.values()  # the only span a rule measures: the gate's
    assert (span.state, span.step, span.left_ms) == ("pending_approval", "manager_approval", None)
    [alert] = monitor.evaluate(tracker.now_ms)
    assert alert.name == "approvals_waiting" and alert.value_ms == 5 * H + MIN


@pytest.mark.parametrize("statistic", ["p50", "p95", "p99", "max"])
@pytest.mark.parametrize(
    ("values", "zeros"), [([5, 1, 9], 0), ([5, 1, 9], 2), ([7], 50), ([], 3), ([4, 4, 8, 2], 5)]
)
def test_a_percentile_with_unlisted_zeros_equals_it_over_the_listed_zeros(
    statistic: str, values: list[int], zeros: int
) -> None:
    assert percentile(values, statistic, zeros=zeros) == percentile(
        [*values, *[0] * zeros], statistic
    )


@pytest.mark.parametrize("untimed", [1, 2, 3, 10])
def test_untimed_open_stays_count_as_zero_length_samples(flow: Flow, untimed: int) -> None:
    """A tracker remembers a bounded number of open spans and only counts the rest; the
    counted ones enter the rules as zero-length stays, as if listed."""
    timed = [waited(5), waited(6), waited(7)]
    listed = [*timed, *[Span("pending_approval", None, NOW) for _ in range(untimed)]]
    counted = evaluate(flow, timed, now_ms=NOW, untimed={"pending_approval": untimed})
    assert counted == evaluate(flow, listed, now_ms=NOW)
    assert evaluate(flow, timed, now_ms=NOW, untimed={"validated": 10}) == evaluate(
        flow, timed, now_ms=NOW
    )
