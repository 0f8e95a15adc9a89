"""The analytics figures on transitions small enough to check by hand."""

from __future__ import annotations

from sagalog.analytics import Transition, analyse
from sagalog.analytics.statistics import (
    dwell_by_state,
    dwell_by_step,
    exits,
    in_flight,
    slowest,
    terminal_states,
    throughput_by_hour,
)

S = 1000
MIN = 60 * S
H = 60 * MIN
T0 = 1_780_000_000_000 - 1_780_000_000_000 % H  # on the hour


def history(
    workflow: str, moves: list[tuple[str, str | None, int]], *, start: int = T0, version: int = 1
) -> list[Transition]:
    """Transitions of one workflow: ``moves`` are (state entered, its step, time spent before)."""
    out, state, step, now = [], "initiated", None, start
    for to_state, to_step, spent in moves:
        now += spent
        out.append(
            Transition(workflow, "procurement", version, state, to_state, to_step, step, spent, now)
        )
        state, step = to_state, to_step
    return out


def approved(workflow: str, *, wait: int, start: int = T0, version: int = 1) -> list[Transition]:
    return history(
        workflow,
        [
            ("running", "score_risk", 0),
            ("pending_approval", "manager_approval", 30 * S),
            ("approved", "manager_approval", wait),
            ("running", "create_purchase_order", 0),
            ("completed", None, 2 * MIN),
        ],
        start=start,
        version=version,
    )


def rejected(workflow: str, *, wait: int, start: int = T0) -> list[Transition]:
    return history(
        workflow,
        [
            ("running", "reserve_budget", 0),
            ("pending_approval", "manager_approval", 10 * S),
            ("compensating", "reserve_budget", wait),
            ("compensated", None, 5 * S),
        ],
        start=start,
    )


def waiting(workflow: str, *, start: int = T0) -> list[Transition]:
    return history(
        workflow,
        [("running", "score_risk", 0), ("pending_approval", "manager_approval", 20 * S)],
        start=start,
    )


# Ten approvals waiting 1h..10h, two rejections, one still waiting.
WAITS = [h * H for h in range(1, 11)]
TRANSITIONS = [
    *[t for i, w in enumerate(WAITS) for t in approved(f"a{i}", wait=w, start=T0 + i * MIN)],
    *rejected("r1", wait=30 * MIN, start=T0 + H),
    *rejected("r2", wait=90 * MIN, start=T0 + H),
    *waiting("w1", start=T0 + 2 * H),
]


def test_dwell_in_pending_approval_is_nearest_rank_over_every_wait() -> None:
    pending = next(d for d in dwell_by_state(TRANSITIONS) if d.state == "pending_approval")
    # 10 approvals (1h..10h) + 2 rejections (30m, 90m): 12 values; the open wait of w1 is not one.
    assert pending.count == 12
    values = sorted([*WAITS, 30 * MIN, 90 * MIN])
    assert pending.p50_ms == values[5] == 4 * H  # the 6th of 12: 30m 1h 90m 2h 3h 4h
    assert pending.p95_ms == values[11] == 10 * H  # ceil(11.4) = 12th
    assert pending.p99_ms == pending.max_ms == 10 * H


def test_states_come_in_lifecycle_order_and_initiated_is_left_out() -> None:
    states = [d.state for d in dwell_by_state(TRANSITIONS)]
    assert states == ["running", "pending_approval", "approved", "compensating"]


def test_running_dwell_per_step() -> None:
    running = next(d for d in dwell_by_state(TRANSITIONS) if d.state == "running")
    # score_risk 30s (10 approved + w1's 20s), reserve_budget 10s (x2), create_purchase_order 2m.
    assert running.count == 10 + 1 + 2 + 10
    steps = {(d.step, d.state): d for d in dwell_by_step(TRANSITIONS)}
    assert steps[("score_risk", "running")].count == 11
    assert steps[("score_risk", "running")].p50_ms == 30 * S
    assert steps[("score_risk", "running")].p95_ms == 30 * S
    assert steps[("create_purchase_order", "running")].p50_ms == 2 * MIN
    assert steps[("manager_approval", "pending_approval")].count == 12
    assert steps[("reserve_budget", "compensating")].p50_ms == 5 * S


def test_steps_in_the_order_workflows_reach_them_undoing_last() -> None:
    order = [(d.step, d.state) for d in dwell_by_step(TRANSITIONS)]
    assert order.index(("score_risk", "running")) < order.index(
        ("manager_approval", "pending_approval")
    )
    assert order.index(("manager_approval", "pending_approval")) < order.index(
        ("create_purchase_order", "running")
    )
    assert order[-1] == ("reserve_budget", "compensating")
    assert ("manager_approval", "approved") not in order  # zero-length, not worked on


def test_slowest_are_the_longest_stays_longest_first() -> None:
    top = slowest(TRANSITIONS, top=3)
    assert [(s.workflow_id, s.state, s.duration_ms) for s in top] == [
        ("a9", "pending_approval", 10 * H),
        ("a8", "pending_approval", 9 * H),
        ("a7", "pending_approval", 8 * H),
    ]
    assert top[0].step == "manager_approval" and top[0].to_state == "approved"


def test_terminal_states_by_frequency_with_shares() -> None:
    rows = terminal_states(TRANSITIONS)
    assert [(r.state, r.count, r.error) for r in rows] == [
        ("completed", 10, False),
        ("compensated", 2, True),
    ]
    assert rows[0].share == 10 / 12


def test_exits_name_where_workflows_left_the_forward_path() -> None:
    more = history(
        "f1",
        [
            ("running", "score_risk", 0),
            ("failed", None, 4 * MIN),
        ],
    ) + history(
        "f2",
        [
            ("running", "reserve_budget", 0),
            ("compensating", "reserve_budget", MIN),
            ("failed", None, 3 * H),  # the undo was given up on
        ],
    )
    rows = [(e.state, e.step, e.to_state, e.count) for e in exits([*TRANSITIONS, *more])]
    assert rows == [
        ("pending_approval", "manager_approval", "compensating", 2),
        ("running", "reserve_budget", "compensating", 1),
        ("compensating", "reserve_budget", "failed", 1),
        ("running", "score_risk", "failed", 1),
    ]


def test_throughput_counts_starts_and_ends_in_their_hour() -> None:
    rows = {r.hour_ms: r for r in throughput_by_hour(TRANSITIONS)}
    assert rows[T0].started == 10
    assert rows[T0 + H].started == 2  # the rejections
    assert rows[T0 + 2 * H].started == 1  # w1
    assert sum(r.ended for r in rows.values()) == 12
    assert sum(r.completed for r in rows.values()) == 10
    # a9 waited 10h after starting at T0 + 9m: ended in hour 10.
    assert rows[T0 + 10 * H].completed == 1
    # Quiet hours have no row.
    assert all(r.started or r.ended for r in rows.values())


def test_in_flight_by_current_state_aged_to_now() -> None:
    now = T0 + 5 * H
    rows = in_flight(sorted(TRANSITIONS, key=lambda t: t.at_ms), now_ms=now)
    assert [(r.state, r.step, r.count, r.oldest_workflow) for r in rows] == [
        ("pending_approval", "manager_approval", 1, "w1"),
    ]
    assert rows[0].oldest_ms == now - (T0 + 2 * H + 20 * S)


def test_versions_are_reported_apart() -> None:
    v2 = approved("b1", wait=H, version=2)
    report = analyse([*TRANSITIONS, *v2], now_ms=T0 + 20 * H)
    assert [
        (s.flow_version, s.workflows, s.started, s.ended, s.completed) for s in report.summaries
    ] == [
        (1, 13, 13, 12, 10),
        (2, 1, 1, 1, 1),
    ]
    pending_v2 = [d for d in report.states if d.flow_version == 2 and d.state == "pending_approval"]
    assert pending_v2[0].count == 1 and pending_v2[0].p50_ms == H
    assert report.summaries[0].completion_rate == 10 / 12
    assert report.summaries[0].in_flight == 1


def test_nothing_in_nothing_out() -> None:
    report = analyse([], now_ms=T0)
    assert report.empty
    assert report.states == report.hours == report.in_flight == ()


def test_order_of_the_input_does_not_matter() -> None:
    forward = analyse(TRANSITIONS, now_ms=T0 + 20 * H)
    backward = analyse(list(reversed(TRANSITIONS)), now_ms=T0 + 20 * H)
    assert forward.states == backward.states
    assert forward.in_flight == backward.in_flight
    assert forward.summaries == backward.summaries
