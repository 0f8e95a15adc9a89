"""What-if simulation without Kafka: a history as cues, a flow, a clock that skips ahead."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.headers import EventHeaders
from sagalog.flows.model import Flow
from sagalog.replay.assumptions import Answer, Assumption
from sagalog.replay.simulation import Cue, Ending, Simulator, trigger_of
from sagalog.tracker import CompensationRetry, TrackedEvent, gate_token

from .test_tracker_processor import SECRET, orders_registry

T0 = 1_800_000_000_000
MIN = 60_000
H = 60 * MIN


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory, catalog: SchemaCatalog) -> Flow:
    return orders_registry(Path(tmp_path_factory.mktemp("orders")), catalog).latest("orders")


def event(event_type: str, event_id: str, **payload: Any) -> TrackedEvent:
    headers = EventHeaders(
        id=event_id,
        type=event_type,
        source="test",
        workflow_id="wf-1",
        time=dt.datetime.fromtimestamp(T0 / 1000, dt.UTC),
    )
    return TrackedEvent.from_headers(headers, payload)


def approve() -> TrackedEvent:
    token = gate_token(SECRET, "wf-1", "manager_approval", 1)
    return event(
        "sagalog.v1.GateDecided",
        "ev-gate",
        gate="manager_approval",
        token=token,
        decision="APPROVED",
        decided_by="boss",
    )


def history() -> list[TrackedEvent]:
    return [
        event("procurement.v1.RequestSubmitted", "ev-0"),
        event("procurement.v1.BudgetReserved", "ev-1"),
        event("procurement.v1.RequestClassified", "ev-2"),
        event("procurement.v1.PoliciesRetrieved", "ev-3"),
        approve(),
        event("procurement.v1.RiskScored", "ev-5"),
        event("procurement.v1.PurchaseOrderCreated", "ev-6"),
    ]


def simulator(flow: Flow, horizon_ms: int = T0 + 10 * 24 * H) -> Simulator:
    return Simulator(flow, secret=SECRET, retry=CompensationRetry(), horizon_ms=horizon_ms)


def test_each_input_is_tied_to_the_entry_it_answers(flow: Flow) -> None:
    events = history()
    assert [trigger_of(flow, e) for e in events] == [
        None,
        ("step", "reserve_budget"),
        ("step", "classify_request"),
        ("step", "retrieve_policies"),
        ("gate", "manager_approval"),
        ("step", "score_risk"),
        ("step", "create_purchase_order"),
    ]
    failed = event("sagalog.v1.StepFailed", "f", step="score_risk", reason="x")
    assert trigger_of(flow, failed) == ("step", "score_risk")
    assert trigger_of(flow, event("procurement.v1.BudgetReleased", "u")) == (
        "undo",
        "reserve_budget",
    )


def test_recorded_times_reproduce_the_recording_and_measure_when_entries_started(
    flow: Flow,
) -> None:
    times = [T0, T0 + MIN, T0 + 2 * MIN, T0 + 3 * MIN, T0 + 5 * H, T0 + 5 * H, T0 + 5 * H]
    run = simulator(flow).run(
        "wf-1", [Cue(e, None, t) for e, t in zip(history(), times, strict=True)]
    )
    assert run.ending == Ending("completed", sla=("approvals_waiting",))
    assert run.starts[("gate", "manager_approval")] == T0 + 3 * MIN
    assert run.starts[("step", "score_risk")] == T0 + 5 * H


def test_a_gate_still_waiting_at_the_horizon_breaches_the_sla_by_the_trackers_own_monitor(
    flow: Flow,
) -> None:
    """No decision was recorded: at the horizon (5 h on) the gate has waited past the
    rule's 4 h; the open span counts, as the service's monitor counts it."""
    times = [T0, T0 + MIN, T0 + 2 * MIN, T0 + 3 * MIN]
    cues = [Cue(e, None, t) for e, t in zip(history()[:4], times, strict=True)]
    run = simulator(flow, horizon_ms=T0 + 3 * MIN + 5 * H).run("wf-1", cues)
    assert run.ending == Ending(
        "pending_approval", step="manager_approval", sla=("approvals_waiting",)
    )
    short = simulator(flow, horizon_ms=T0 + 3 * MIN + 3 * H).run("wf-1", cues)
    assert short.ending.sla == ()  # 3 h at the gate: within the rule


def test_an_answer_comes_as_long_after_its_entry_starts_as_it_did(flow: Flow) -> None:
    """The gate opens 5 min late; the decision, 4 h after the opening, follows it."""
    events = history()
    cues = [Cue(events[0], None, T0)] + [
        Cue(e, trigger_of(flow, e), 0) for e in events[1:] if trigger_of(flow, e)
    ]
    cues[3] = Cue(events[3], ("step", "retrieve_policies"), 5 * MIN)
    cues[4] = Cue(events[4], ("gate", "manager_approval"), 4 * H - MIN)
    run = simulator(flow).run("wf-1", cues)
    assert run.starts[("gate", "manager_approval")] == T0 + 5 * MIN
    assert run.starts[("step", "score_risk")] == T0 + 5 * MIN + 4 * H - MIN
    assert run.ending.state == "completed" and run.ending.sla == ()


def test_a_timer_due_before_the_next_answer_fires_first(flow: Flow) -> None:
    """reserve_budget answers after 11 min; its 10 min timeout comes first."""
    events = history()
    cues = [Cue(events[0], None, T0), Cue(events[1], ("step", "reserve_budget"), 11 * MIN)]
    run = simulator(flow, horizon_ms=T0 + 20 * MIN).run("wf-1", cues)
    assert run.ending == Ending("compensating", "reserve_budget", ("reserve_budget",))


def test_without_answers_left_time_stops_at_the_horizon(flow: Flow) -> None:
    events = history()
    cues = [Cue(e, None, T0) for e in events[:4]]
    waiting = simulator(flow, horizon_ms=T0 + 2 * H).run("wf-1", cues)
    assert waiting.ending.state == "pending_approval"  # its 72 h default is past the horizon
    expired = simulator(flow, horizon_ms=T0 + 73 * H).run("wf-1", cues)
    # Its default rejected it at 72 h; the undo, never answered, was asked again at 72.5 h.
    assert expired.ending == Ending(
        "compensating",
        "manager_approval",
        ("retrieve_policies",),
        ("compensation_stuck",),
        ("approvals_waiting",),
    )


def test_assumed_answers_for_entries_the_recording_never_reached(flow: Flow) -> None:
    sim = simulator(flow)
    trigger = ("step", "score_risk")
    [(at, done)] = sim.answer("wf-1", trigger, T0, Assumption(Answer.COMPLETE, 2 * H))
    assert (at, done.event_type) == (T0 + 2 * H, "procurement.v1.RiskScored")
    [(_, failed)] = sim.answer("wf-1", trigger, T0, Assumption(Answer.FAIL))
    assert (failed.event_type, failed.step) == ("sagalog.v1.StepFailed", "score_risk")
    [(_, gate)] = sim.answer("wf-1", ("gate", "manager_approval"), T0, Assumption(Answer.REJECT))
    assert gate.gate is not None and gate.gate.decision.value == "REJECTED"
    [(_, undo)] = sim.answer("wf-1", ("undo", "reserve_budget"), T0, Assumption(Answer.COMPLETE))
    assert undo.event_type == "procurement.v1.BudgetReleased"
    assert sim.answer("wf-1", trigger, T0, Assumption(Answer.NEVER)) == []

    events = history()
    cues = [Cue(e, None, T0) for e in events[:4]]

    def respond(trigger: tuple[str, str], at_ms: int) -> list[tuple[int, TrackedEvent]]:
        answer = {"gate": Assumption(Answer.APPROVE, H), "step": Assumption(Answer.COMPLETE)}
        return sim.answer("wf-1", trigger, at_ms, answer[trigger[0]])

    run = sim.run("wf-1", cues, respond)
    assert run.ending == Ending("completed")
    assert run.starts[("step", "score_risk")] == T0 + H
