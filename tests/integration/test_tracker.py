"""The saga tracker on the real broker, with a virtual clock: days pass in seconds."""

from __future__ import annotations

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
