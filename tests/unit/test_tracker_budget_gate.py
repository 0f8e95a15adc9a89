"""A step's budget gate (``on_budget_exhausted: gate``), in the tracker's rules.

The drafting step fails for want of budget (a ``StepFailed`` whose ``error_class`` is
``BudgetRefused``); the flow opens the step's gate instead of compensating. Approved,
the step runs again over its budget (``StepRetryRequested``) and the workflow goes
on; rejected or left to its default, it compensates like any rejection.
"""

from __future__ import annotations

import pytest

from sagalog.events import GateOpened, StepRetryRequested
from sagalog.flows.model import BUDGET_REFUSED, Flow
from sagalog.flows.states import WorkflowState
from sagalog.testing import TrackerHarness
from sagalog.tracker import Outcome, verify_gate_token
from sagalog.tracker.timers import TimerKind

SECRET = b"unit-test-gate-secret-32-bytes!!"
T0 = 1_700_000_000_000
MIN = 60_000
H = 60 * MIN

OPENED = "filings.v1.FilingOpened"
RETRIEVED = "filings.v1.DocumentsRetrieved"
DRAFTED = "filings.v1.FilingDrafted"
RELEASED = "filings.v1.DocumentsReleased"
STEP_FAILED = "sagalog.v1.StepFailed"
GATE_DECIDED = "sagalog.v1.GateDecided"
GATE = "draft_filing_budget"


def drafting_flow(default: str = "reject") -> Flow:
    return Flow.model_validate(
        {
            "flow": "drafting",
            "version": 1,
            "topic": "filings.events",
            "starts_on": OPENED,
            "deadline": "10d",
            "steps": [
                {
                    "name": "retrieve",
                    "agent": "records-agent",
                    "starts_on": OPENED,
                    "completes_on": RETRIEVED,
                    "timeout": "5m",
                    "compensation": {"action": "release", "completes_on": RELEASED},
                },
                {
                    "name": "draft_filing",
                    "agent": "drafting-agent",
                    "starts_on": RETRIEVED,
                    "after": "retrieve",
                    "completes_on": DRAFTED,
                    "timeout": "10m",
                    "effect": "none",
                    "on_budget_exhausted": "gate",
                    "budget_gate": {
                        "assignee": "finance@filings.example",
                        "escalation": [{"after": "4h", "to": "cfo@filings.example"}],
                        "deadline": "24h",
                        "default": default,
                    },
                },
            ],
        }
    )


@pytest.fixture
def tracker() -> TrackerHarness:
    return TrackerHarness([drafting_flow()], secret=SECRET, now_ms=T0)


def out_of_budget(tracker: TrackerHarness, wf: str = "wf-1") -> None:
    for event_type in (OPENED, RETRIEVED):
        assert tracker.send(event_type, wf).outcome is Outcome.APPLIED
        tracker.advance(MIN)
    decision = tracker.send(
        STEP_FAILED,
        wf,
        step="draft_filing",
        reason="budget 'model' is exhausted",
        error_class=BUDGET_REFUSED,
        attempts=1,
    )
    assert decision.outcome is Outcome.APPLIED, decision.reason


def decide(tracker: TrackerHarness, decision: str, *, token: str | None = None) -> Outcome:
    opened = tracker.events_of(GateOpened.event_type, workflow_id="wf-1")[-1]
    return tracker.send(
        GATE_DECIDED,
        "wf-1",
        gate=GATE,
        token=token or opened.token,
        decision=decision,
        decided_by="fran",
    ).outcome


def test_a_budget_refusal_opens_the_steps_gate_and_stops_the_steps_timeout(
    tracker: TrackerHarness,
) -> None:
    out_of_budget(tracker)
    record = tracker.record("wf-1")
    assert (record.state, record.current) == (WorkflowState.PENDING_APPROVAL, GATE)
    [opened] = tracker.events_of(GateOpened.event_type)
    assert (opened.gate, opened.assignee, opened.attempt) == (GATE, "finance@filings.example", 1)
    assert verify_gate_token(SECRET, opened.token, workflow_id="wf-1", gate=GATE, attempt=1)
    kinds = {t.kind for t in record.timers}
    assert TimerKind.STEP_TIMEOUT not in kinds
    assert {TimerKind.GATE_ESCALATION, TimerKind.GATE_DEADLINE} <= kinds
    # Past the step's own timeout: nothing compensates while the person decides.
    tracker.advance(H)
    assert tracker.state("wf-1") is WorkflowState.PENDING_APPROVAL


def test_approval_runs_the_step_again_over_its_budget_and_the_workflow_completes(
    tracker: TrackerHarness,
) -> None:
    out_of_budget(tracker)
    assert decide(tracker, "APPROVED") is Outcome.APPLIED
    record = tracker.record("wf-1")
    assert (record.state, record.current) == (WorkflowState.RUNNING, "draft_filing")
    assert any(t.kind is TimerKind.STEP_TIMEOUT for t in record.timers)
    [retry] = tracker.events_of(StepRetryRequested.event_type, workflow_id="wf-1")
    assert (retry.step, retry.gate, retry.decided_by, retry.over_budget, retry.attempt) == (
        "draft_filing",
        GATE,
        "fran",
        True,
        1,
    )
    assert tracker.send(DRAFTED, "wf-1").outcome is Outcome.APPLIED
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.COMPLETED
    assert record.completed_names == ("retrieve", GATE, "draft_filing")


def test_a_second_refusal_opens_the_gate_again_and_the_first_token_no_longer_decides(
    tracker: TrackerHarness,
) -> None:
    out_of_budget(tracker)
    first = tracker.events_of(GateOpened.event_type)[-1].token
    decide(tracker, "APPROVED")
    tracker.send(
        STEP_FAILED, "wf-1", step="draft_filing", reason="again", error_class=BUDGET_REFUSED
    )
    assert tracker.events_of(GateOpened.event_type)[-1].attempt == 2
    assert decide(tracker, "APPROVED", token=first) is Outcome.REJECTED  # expired
    assert decide(tracker, "APPROVED") is Outcome.APPLIED
    assert tracker.events_of(StepRetryRequested.event_type)[-1].attempt == 2


def test_rejection_compensates_the_steps_before_it(tracker: TrackerHarness) -> None:
    out_of_budget(tracker)
    assert decide(tracker, "REJECTED") is Outcome.APPLIED
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.COMPENSATING
    assert record.compensation is not None and record.compensation.in_flight == "retrieve"
    assert f"gate '{GATE}' rejected by fran" in record.compensation.reason
    assert tracker.events_of(StepRetryRequested.event_type) == []


@pytest.mark.parametrize(
    ("default", "state"),
    [("reject", WorkflowState.COMPENSATING), ("approve", WorkflowState.RUNNING)],
)
def test_the_gates_default_applies_at_its_deadline(default: str, state: WorkflowState) -> None:
    tracker = TrackerHarness([drafting_flow(default)], secret=SECRET, now_ms=T0)
    out_of_budget(tracker)
    tracker.advance(24 * H)
    assert tracker.state("wf-1") is state
    retries = tracker.events_of(StepRetryRequested.event_type)
    assert len(retries) == (default == "approve")


def test_any_other_failure_of_the_step_compensates_at_once(tracker: TrackerHarness) -> None:
    for event_type in (OPENED, RETRIEVED):
        tracker.send(event_type, "wf-1")
    tracker.send(
        STEP_FAILED, "wf-1", step="draft_filing", reason="bad answer", error_class="ToolLoopError"
    )
    assert tracker.state("wf-1") is WorkflowState.COMPENSATING
    assert tracker.events_of(GateOpened.event_type) == []


def test_the_budget_gate_is_declared_with_its_policy_and_named_for_the_step() -> None:
    step = drafting_flow().steps[1]
    assert step.budget_gate is not None and step.budget_gate.name == GATE
    assert drafting_flow().entry(GATE) == step.budget_gate
    assert drafting_flow().index(GATE) == 1
    spec = drafting_flow().model_dump(by_alias=True)["steps"][1]
    with pytest.raises(ValueError, match="go together"):
        Flow.model_validate(
            {**drafting_flow().model_dump(by_alias=True), "steps": [{**spec, "budget_gate": None}]}
        )
    with pytest.raises(ValueError, match="takes assignee, deadline"):
        Flow.model_validate(
            {
                **drafting_flow().model_dump(by_alias=True),
                "steps": [
                    {
                        **spec,
                        "budget_gate": {
                            "gate": "x",
                            "assignee": "a",
                            "deadline": "1h",
                            "default": "reject",
                        },
                    }
                ],
            }
        )


def test_a_dumped_flow_with_a_budget_gate_loads_again() -> None:
    flow = drafting_flow()
    assert Flow.model_validate(flow.model_dump(by_alias=True)) == flow
