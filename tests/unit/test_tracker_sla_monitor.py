"""The SLA monitor: fed transitions, it fires each rule once, and its memory is bounded.

orders v1 (``tests/integration/flows/orders.v1.yaml``) declares one rule,
``approvals_waiting``: p50 time in pending_approval over the last hour above 4h.
"""

from __future__ import annotations

import datetime as dt

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.events import StateTransition
from sagalog.flows.registry import FlowRegistry
from sagalog.tracker.sla_monitor import SlaMonitor

from .test_tracker_processor import orders_registry

T0 = 1_700_000_000_000
MIN = 60_000
H = 60 * MIN


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, catalog: SchemaCatalog) -> FlowRegistry:
    return orders_registry(tmp_path_factory.mktemp("orders"), catalog)


def transition(
    from_state: str,
    to_state: str,
    *,
    at_ms: int,
    since_ms: int,
    step: str | None,
    from_step: str | None,
    flow: str = "orders",
) -> StateTransition:
    """A transition at ``at_ms`` out of a state entered at ``since_ms``."""
    return StateTransition(
        flow=flow,
        flow_version=1,
        from_state=from_state,
        to_state=to_state,
        step=step,
        from_step=from_step,
        cause_event_id="cause",
        time_in_previous_state_ms=at_ms - since_ms,
        at=dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC),
    )


def wait_at_gate(monitor: SlaMonitor, workflow_id: str, at_ms: int) -> None:
    """``workflow_id`` leaves retrieve_policies (entered a minute earlier) for the gate."""
    monitor.observe(
        workflow_id,
        transition(
            "running",
            "pending_approval",
            at_ms=at_ms,
            since_ms=at_ms - MIN,
            step="manager_approval",
            from_step="retrieve_policies",
        ),
    )


def approve(monitor: SlaMonitor, workflow_id: str, at_ms: int, since_ms: int) -> None:
    monitor.observe(
        workflow_id,
        transition(
            "pending_approval",
            "approved",
            at_ms=at_ms,
            since_ms=since_ms,
            step="manager_approval",
            from_step="manager_approval",
        ),
    )


def complete(monitor: SlaMonitor, workflow_id: str, at_ms: int) -> None:
    """``workflow_id`` finishes its last step (entered a minute earlier)."""
    monitor.observe(
        workflow_id,
        transition(
            "running",
            "completed",
            at_ms=at_ms,
            since_ms=at_ms - MIN,
            step=None,
            from_step="create_purchase_order",
        ),
    )


def test_the_rule_fires_once_when_open_waits_pass_the_bound_and_not_again_while_firing(
    registry: FlowRegistry,
) -> None:
    monitor = SlaMonitor(registry)
    for wf in ("wf-1", "wf-2", "wf-3"):
        wait_at_gate(monitor, wf, T0)

    assert monitor.evaluate(T0 + 4 * H) == []  # at the bound, not above it
    [alert] = monitor.evaluate(T0 + 4 * H + 1)
    assert (alert.flow, alert.flow_version, alert.name) == ("orders", 1, "approvals_waiting")
    assert (alert.value_ms, alert.samples) == (4 * H + 1, 3)
    assert monitor.evaluate(T0 + 5 * H) == []  # still firing: no second alert
    assert monitor.evaluate(T0 + 6 * H) == []
    assert monitor.firing == {(("orders", 1), "approvals_waiting")}


def test_the_rule_re_arms_after_it_stops_firing(registry: FlowRegistry) -> None:
    monitor = SlaMonitor(registry)
    for wf in ("wf-1", "wf-2", "wf-3"):
        wait_at_gate(monitor, wf, T0)
    assert [a.name for a in monitor.evaluate(T0 + 5 * H)] == ["approvals_waiting"]

    for wf in ("wf-1", "wf-2", "wf-3"):
        approve(monitor, wf, T0 + 5 * H, since_ms=T0)
    # The 5h waits ended inside the 1h window: the rule still fires, silently.
    assert monitor.evaluate(T0 + 5 * H + 30 * MIN) == []
    assert monitor.firing == {(("orders", 1), "approvals_waiting")}
    # An hour later they left the window: the rule stops firing.
    assert monitor.evaluate(T0 + 6 * H + 1) == []
    assert monitor.firing == set()
    assert len(monitor.closed[("orders", 1)]) == 0

    wait_at_gate(monitor, "wf-4", T0 + 6 * H)
    assert monitor.evaluate(T0 + 10 * H) == []
    [again] = monitor.evaluate(T0 + 10 * H + 1)
    assert (again.name, again.value_ms, again.samples) == ("approvals_waiting", 4 * H + 1, 1)


def test_short_waits_keep_the_median_below_the_bound(registry: FlowRegistry) -> None:
    monitor = SlaMonitor(registry)
    wait_at_gate(monitor, "slow", T0)
    for i in range(2):
        wait_at_gate(monitor, f"quick-{i}", T0 + 4 * H)
        approve(monitor, f"quick-{i}", T0 + 4 * H + 10 * MIN, since_ms=T0 + 4 * H)
    # slow: 5h, the quick ones 10m each: the median is 10m.
    assert monitor.evaluate(T0 + 5 * H) == []
    assert monitor.firing == set()


def test_transitions_of_a_flow_without_sla_rules_are_not_kept(registry: FlowRegistry) -> None:
    monitor = SlaMonitor(registry)
    monitor.observe(
        "wf-x",
        transition(
            "running",
            "pending_approval",
            at_ms=T0,
            since_ms=T0,
            step="g",
            from_step="s",
            flow="unknown",
        ),
    )
    assert monitor.open == {} and monitor.closed == {} and monitor.untimed == {}


def test_memory_is_bounded_open_spans_beyond_max_open_count_as_zero_length(
    registry: FlowRegistry,
) -> None:
    monitor = SlaMonitor(registry, max_closed=50, max_open=10)
    for i in range(1000):
        wait_at_gate(monitor, f"wf-{i}", T0 + i)

    assert len(monitor.open) == 10
    assert set(monitor.open) == {f"wf-{i}" for i in range(10)}  # the oldest are timed
    assert monitor.untimed == {(("orders", 1), "pending_approval"): 990}
    # 990 zero-length waits and 10 long ones: the median is 0, no false alarm.
    assert monitor.evaluate(T0 + 10 * H) == []

    for i in range(10, 110):  # untimed workflows leave the gate: their count drops
        approve(monitor, f"wf-{i}", T0 + H, since_ms=T0 + i)
    assert monitor.untimed[(("orders", 1), "pending_approval")] == 890
    assert len(monitor.open) == 10
    assert len(monitor.closed[("orders", 1)]) == 50  # max_closed


def test_a_bounded_monitor_still_fires_when_most_waits_are_timed(
    registry: FlowRegistry,
) -> None:
    monitor = SlaMonitor(registry, max_open=10)
    for i in range(12):
        wait_at_gate(monitor, f"wf-{i}", T0)
    assert len(monitor.open) == 10
    [alert] = monitor.evaluate(T0 + 5 * H)
    # 10 timed 5h waits and 2 untimed (zero): the median is still 5h.
    assert (alert.value_ms, alert.samples) == (5 * H, 12)


def test_finished_workflows_do_not_use_up_the_timed_open_spans(registry: FlowRegistry) -> None:
    monitor = SlaMonitor(registry, max_open=10)
    for i in range(10):
        complete(monitor, f"done-{i}", T0)
    wait_at_gate(monitor, "waiting", T0 + MIN)

    assert "waiting" in monitor.open
    [alert] = monitor.evaluate(T0 + 5 * H)
    assert alert.name == "approvals_waiting"


def test_spans_no_rule_measures_are_not_kept(registry: FlowRegistry) -> None:
    """The one rule measures pending_approval: the running spans before the gate, and
    a running span opened after it, are neither kept, timed nor counted."""
    monitor = SlaMonitor(registry)
    for i in range(100):
        wait_at_gate(monitor, f"wf-{i}", T0 + i)  # closes a running span
    assert monitor.closed == {}
    assert len(monitor.open) == 100

    monitor.observe(  # the gate approved: pending_approval closes, running opens
        "wf-0",
        transition(
            "pending_approval",
            "running",
            at_ms=T0 + H,
            since_ms=T0,
            step="create_purchase_order",
            from_step="manager_approval",
        ),
    )
    assert [span.state for span in monitor.closed[("orders", 1)]] == ["pending_approval"]
    assert "wf-0" not in monitor.open and monitor.untimed == {}
    complete(monitor, "wf-0", T0 + 2 * H)  # from the unmeasured running span
    assert len(monitor.closed[("orders", 1)]) == 1


def test_unmeasured_spans_leave_room_for_measured_ones(registry: FlowRegistry) -> None:
    """Spans of running steps no longer push the gate's finished waits out of the
    bounded ring of closed spans: the rule still sees them."""
    monitor = SlaMonitor(registry, max_closed=5, max_open=5)
    for i in range(5):
        wait_at_gate(monitor, f"wf-{i}", T0)
        approve(monitor, f"wf-{i}", T0 + 5 * H, since_ms=T0)
    for i in range(20):
        complete(monitor, f"done-{i}", T0 + 5 * H)
    [alert] = monitor.evaluate(T0 + 5 * H + MIN)
    assert (alert.value_ms, alert.samples) == (5 * H, 5)
