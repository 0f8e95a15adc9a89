"""The saga tracker on the real broker, with a virtual clock: days pass in seconds."""

from __future__ import annotations

from pathlib import Path

from .tracker_harness import DAY_MS, FORWARD, TrackerLab

HOUR_MS = 3_600_000


def _run_to_gate(lab: TrackerLab, workflow_id: str) -> None:
    lab.start(workflow_id)
    for step, _ in FORWARD[:3]:
        lab.wait(
            lambda s=step: _at(lab, workflow_id, "running", s), what=f"{workflow_id} at {step}"
        )
        lab.complete(workflow_id, step)
    lab.wait_state(workflow_id, "pending_approval")


def _at(lab: TrackerLab, workflow_id: str, state: str, step: str) -> bool:
    moves = lab.transitions(workflow_id)
    return bool(moves) and moves[-1]["to_state"] == state and moves[-1]["step"] == step


def test_happy_path_runs_every_step_and_the_gate(tracker_lab: TrackerLab) -> None:
    lab = tracker_lab
    lab.tracker()
    _run_to_gate(lab, "wf-happy")
    opened = lab.events("wf-happy", "sagalog.v1.GateOpened")
    assert [g["assignee"] for g in opened] == ["managers@example.com"]
    lab.decide_gate("wf-happy", "APPROVED")
    for step, _ in FORWARD[3:]:
        lab.wait(lambda s=step: _at(lab, "wf-happy", "running", s), what=step)
        lab.complete("wf-happy", step)
    lab.wait_state("wf-happy", "completed")
    states = [(t["from_state"], t["to_state"], t["step"]) for t in lab.transitions("wf-happy")]
    assert states == [
        ("initiated", "running", "reserve_budget"),
        ("running", "running", "classify_request"),
        ("running", "running", "retrieve_policies"),
        ("running", "pending_approval", "manager_approval"),
        ("pending_approval", "approved", "manager_approval"),
        ("approved", "running", "score_risk"),
        ("running", "running", "create_purchase_order"),
        ("running", "completed", None),
    ]


def _compensations(lab: TrackerLab, workflow_id: str) -> list[str]:
    return [c["step"] for c in lab.events(workflow_id, "sagalog.v1.CompensationRequested")]


def test_a_failure_at_step_4_compensates_steps_3_2_1_once_each_in_order(
    tracker_lab: TrackerLab,
) -> None:
    lab = tracker_lab
    lab.tracker()
    _run_to_gate(lab, "wf-fail")
    lab.decide_gate("wf-fail", "APPROVED")
    lab.wait(lambda: _at(lab, "wf-fail", "running", "score_risk"), what="step 4 running")
    lab.fail("wf-fail", "score_risk", "model unavailable")
    for step in ("retrieve_policies", "classify_request", "reserve_budget"):
        lab.wait(lambda s=step: _compensations(lab, "wf-fail")[-1:] == [s], what=f"undo {step}")
        lab.advance(60_000)  # time passes; nothing else may be requested meanwhile
        assert _compensations(lab, "wf-fail").count(step) == 1
        lab.undo("wf-fail", step)
    lab.wait_state("wf-fail", "compensated")
    assert _compensations(lab, "wf-fail") == [
        "retrieve_policies",
        "classify_request",
        "reserve_budget",
    ]
    last = lab.transitions("wf-fail")[-1]
    assert (last["from_state"], last["to_state"]) == ("compensating", "compensated")


def test_the_gate_escalates_after_its_interval_and_rejects_at_its_deadline(
    tracker_lab: TrackerLab,
) -> None:
    lab = tracker_lab
    lab.tracker()
    _run_to_gate(lab, "wf-gate")
    lab.advance(23 * HOUR_MS)
    lab.advance(0)
    assert len(lab.events("wf-gate", "sagalog.v1.GateOpened")) == 1  # not yet escalated
    lab.advance(1 * HOUR_MS + 1000)
    lab.wait(lambda: len(lab.events("wf-gate", "sagalog.v1.GateOpened")) == 2, what="escalation")
    escalated = lab.events("wf-gate", "sagalog.v1.GateOpened")[-1]
    assert (escalated["assignee"], escalated["escalation_level"]) == ("director@example.com", 1)
    lab.advance(2 * DAY_MS)  # 72 h after opening: the default, reject, applies
    lab.wait(lambda: _compensations(lab, "wf-gate") == ["retrieve_policies"], what="rejection")
    decided = lab.events("wf-gate", "sagalog.v1.GateDecided")
    assert [d["decision"] for d in decided] == ["REJECTED"]
    for step in ("retrieve_policies", "classify_request", "reserve_budget"):
        lab.wait(lambda s=step: _compensations(lab, "wf-gate")[-1:] == [s], what=f"undo {step}")
        lab.undo("wf-gate", step)
    lab.wait_state("wf-gate", "compensated")


def test_a_passed_workflow_deadline_times_out_with_compensation(tracker_lab: TrackerLab) -> None:
    lab = tracker_lab
    # Slow steps (1 d timeouts) under an 80 h deadline: the deadline is what binds.
    flow = (Path(__file__).parent / "flows" / "orders.v1.yaml").read_text()
    lab.add_flow(
        "orders.v1.yaml",
        text=flow.replace("deadline: 5d", "deadline: 80h").replace("timeout: 10m", "timeout: 1d"),
    )
    lab.tracker()
    lab.start("wf-late")
    for step, _ in FORWARD[:3]:
        lab.wait(lambda s=step: _at(lab, "wf-late", "running", s), what=step)
        lab.advance(23 * HOUR_MS)
        lab.complete("wf-late", step)
    lab.wait_state("wf-late", "pending_approval")
    lab.advance(12 * HOUR_MS)  # 81 h after the start
    lab.wait(lambda: bool(_compensations(lab, "wf-late")), what="compensation")
    for step in ("retrieve_policies", "classify_request", "reserve_budget"):
        lab.wait(lambda s=step: _compensations(lab, "wf-late")[-1:] == [s], what=f"undo {step}")
        lab.undo("wf-late", step)
    lab.wait_state("wf-late", "timed_out")
    cause = next(t for t in lab.transitions("wf-late") if t["to_state"] == "compensating")
    assert (
        cause["cause_event_id"].startswith("timer:")
        and "workflow_deadline" in cause["cause_event_id"]
    )
