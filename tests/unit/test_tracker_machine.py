"""The tracker's rules on the reference flow (procurement v1), in virtual time.

procurement v1: classify_request, retrieve_policies, score_risk (all ``effect: none``),
reserve_budget (undone by release_budget), the gate manager_approval (escalates to
the director after 24h, rejects by default at 72h), create_purchase_order (undone by
cancel_po) and notify_vendor (irreversible: followed up by send_correction_notice);
the workflow deadline is 5d. ``TrackerHarness`` drives ``decide`` with the faust
service's own ``Processor``, with a clock that skips to each timer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.events import CompensationRequested, GateDecided, GateOpened, StateTransition
from sagalog.flows.model import Flow, Gate
from sagalog.flows.states import WorkflowState
from sagalog.testing import TrackerHarness
from sagalog.topology.loader import load_topology
from sagalog.tracker import (
    Alert,
    Decision,
    Outcome,
    Publish,
    TrackerError,
    decide,
    gate_token,
    verify_gate_token,
)
from sagalog.tracker.actions import Park
from sagalog.tracker.inputs import Admit, TimerFired
from sagalog.tracker.record import CompensationCause
from sagalog.tracker.timers import TimerKind

SECRET = b"unit-test-gate-secret-32-bytes!!"
T0 = 1_700_000_000_000
MIN = 60_000
H = 60 * MIN

SUBMITTED = "procurement.v1.RequestSubmitted"
CLASSIFIED = "procurement.v1.RequestClassified"
RETRIEVED = "procurement.v1.PoliciesRetrieved"
SCORED = "procurement.v1.RiskScored"
RESERVED = "procurement.v1.BudgetReserved"
RELEASED = "procurement.v1.BudgetReleased"
PO_CREATED = "procurement.v1.PurchaseOrderCreated"
PO_CANCELLED = "procurement.v1.PurchaseOrderCancelled"
NOTIFIED = "procurement.v1.VendorNotified"
CORRECTED = "procurement.v1.CorrectionNoticeSent"
STEP_FAILED = "sagalog.v1.StepFailed"
GATE_DECIDED = "sagalog.v1.GateDecided"
COMPENSATION_COMPLETED = "sagalog.v1.CompensationCompleted"
BEFORE_GATE = (SUBMITTED, CLASSIFIED, RETRIEVED, SCORED, RESERVED)


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    from sagalog.flows.loader import load_flow_file

    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    return load_flow_file(
        repo_root / "topology/flows/procurement.v1.yaml", catalog=catalog, topology=topology
    )


@pytest.fixture
def tracker(flow: Flow) -> TrackerHarness:
    return TrackerHarness([flow], secret=SECRET, now_ms=T0)


def variant(flow: Flow, **changes: object) -> Flow:
    """procurement v1 with some fields changed; ``gate_*`` keys change the gate."""
    gate_changes = {k.removeprefix("gate_"): v for k, v in changes.items() if k.startswith("gate_")}
    entries = tuple(
        e.model_copy(update=gate_changes) if isinstance(e, Gate) else e for e in flow.entries
    )
    rest = {k: v for k, v in changes.items() if not k.startswith("gate_")}
    return flow.model_copy(update={"entries": entries, **rest})


def run(tracker: TrackerHarness, wf: str, *event_types: str, every_ms: int = MIN) -> None:
    """Publish ``event_types`` for ``wf`` as the agents would, ``every_ms`` apart."""
    for event_type in event_types:
        decision = tracker.send(event_type, wf)
        assert decision.outcome is Outcome.APPLIED, (event_type, decision.reason)
        tracker.advance(every_ms)


def decide_gate(
    tracker: TrackerHarness, wf: str, decision: str, *, token: str | None = None, by: str = "ann"
) -> Decision:
    opened = tracker.events_of(GateOpened.event_type, workflow_id=wf)[-1]
    return tracker.send(
        GATE_DECIDED,
        wf,
        gate="manager_approval",
        token=token or opened.token,
        decision=decision,
        decided_by=by,
    )


def requested(tracker: TrackerHarness, wf: str) -> list[tuple[str, str, int]]:
    events = tracker.events_of(CompensationRequested.event_type, workflow_id=wf)
    return [(e.step, e.compensation, e.attempt) for e in events]


# -- the forward path ------------------------------------------------------------------


def test_the_happy_path_runs_every_entry_through_the_gate_to_completed(
    tracker: TrackerHarness,
) -> None:
    run(tracker, "wf-1", *BEFORE_GATE)
    assert tracker.state("wf-1") is WorkflowState.PENDING_APPROVAL

    [opened] = tracker.events_of(GateOpened.event_type)
    assert (opened.gate, opened.assignee, opened.attempt, opened.escalation_level) == (
        "manager_approval",
        "managers@procurement.example",
        1,
        0,
    )
    assert verify_gate_token(
        SECRET, opened.token, workflow_id="wf-1", gate="manager_approval", attempt=1
    )
    gate_opened_at = tracker.record("wf-1").entered_current_state_at_ms
    assert opened.deadline.timestamp() * 1000 == gate_opened_at + 72 * H

    tracker.advance(3 * H)  # the manager takes three hours
    assert decide_gate(tracker, "wf-1", "APPROVED").outcome is Outcome.APPLIED
    run(tracker, "wf-1", PO_CREATED, NOTIFIED)

    record = tracker.record("wf-1")
    assert record.state is WorkflowState.COMPLETED
    assert record.completed_names == (
        "classify_request",
        "retrieve_policies",
        "score_risk",
        "reserve_budget",
        "manager_approval",
        "create_purchase_order",
        "notify_vendor",
    )
    assert record.timers == () and len(tracker.timers) == 0  # every timer cancelled
    assert tracker.transitions("wf-1") == [
        ("initiated", "running", "classify_request"),
        ("running", "running", "retrieve_policies"),
        ("running", "running", "score_risk"),
        ("running", "running", "reserve_budget"),
        ("running", "pending_approval", "manager_approval"),
        ("pending_approval", "approved", "manager_approval"),
        ("approved", "running", "create_purchase_order"),
        ("running", "running", "notify_vendor"),
        ("running", "completed", None),
    ]
    # Its own GateOpened, read back from the workflow topic, is not decided again.
    assert tracker.outcomes == {Outcome.APPLIED: 8}


def test_every_transition_names_its_cause_and_the_time_spent_before_it(
    tracker: TrackerHarness,
) -> None:
    run(tracker, "wf-1", *BEFORE_GATE)
    tracker.advance(5 * H)
    decision = decide_gate(tracker, "wf-1", "APPROVED")
    assert decision.record is not None
    gate_id = decision.record.completed[-1].event_id
    left_gate, entered_step = [e for e in decision.published() if isinstance(e, StateTransition)]
    assert (left_gate.from_state, left_gate.to_state) == ("pending_approval", "approved")
    assert left_gate.time_in_previous_state_ms == 5 * H + MIN  # the wait, to the ms
    assert entered_step.time_in_previous_state_ms == 0  # approved is a moment
    assert left_gate.cause_event_id == entered_step.cause_event_id == gate_id


def test_starting_a_step_schedules_its_timeout_and_its_segment_leaving_cancels_them(
    tracker: TrackerHarness,
) -> None:
    tracker.send(SUBMITTED, "wf-1")
    timers = {(t.kind, t.ref): t.due_ms for t in tracker.record("wf-1").timers}
    assert timers == {
        (TimerKind.WORKFLOW_DEADLINE, "workflow"): T0 + 5 * 24 * H,
        (TimerKind.SEGMENT_TIMEOUT, "assessment"): T0 + 30 * MIN,
        (TimerKind.STEP_TIMEOUT, "classify_request"): T0 + 5 * MIN,
    }
    run(tracker, "wf-1", CLASSIFIED, RETRIEVED, SCORED)  # the assessment segment ends
    kinds = {(t.kind, t.ref) for t in tracker.record("wf-1").timers}
    assert kinds == {
        (TimerKind.WORKFLOW_DEADLINE, "workflow"),
        (TimerKind.STEP_TIMEOUT, "reserve_budget"),
    }
    assert len(tracker.timers) == 2  # the table holds exactly what the record expects


# -- idempotency and order ---------------------------------------------------------------


def test_duplicates_and_stale_events_leave_the_record_unchanged(tracker: TrackerHarness) -> None:
    sent = [tracker.event(t, "wf-1") for t in (SUBMITTED, CLASSIFIED, RETRIEVED)]
    for event in sent:
        tracker.feed(event)
    before = tracker.record("wf-1")
    for event in sent:  # redelivered after a crash: the same ids again
        redelivered = tracker.feed(event)
        assert redelivered.outcome is Outcome.DUPLICATE and not redelivered.changed
    stale = tracker.send(CLASSIFIED, "wf-1")  # the same fact under a new id: step complete
    assert stale.outcome is Outcome.STALE
    assert stale.reason == "step 'classify_request' is already complete"
    failed_late = tracker.send(STEP_FAILED, "wf-1", step="classify_request", reason="x")
    assert failed_late.outcome is Outcome.STALE
    restarted = tracker.send(SUBMITTED, "wf-1")
    assert restarted.outcome is Outcome.REJECTED
    assert tracker.record("wf-1") == before


def test_an_event_before_its_predecessor_is_parked_and_applied_after_it(
    tracker: TrackerHarness,
) -> None:
    run(tracker, "wf-1", SUBMITTED, CLASSIFIED)  # retrieve_policies runs
    early = tracker.send(SCORED, "wf-1")  # score_risk's completion overtook it
    assert early.outcome is Outcome.PARKED and not early.changed
    assert isinstance(early.actions[0], Park)
    assert "while 'retrieve_policies' is still running" in (early.reason or "")
    assert tracker.record("wf-1").current == "retrieve_policies"

    tracker.send(RETRIEVED, "wf-1")  # the predecessor: then the parked one applies
    assert tracker.record("wf-1").current == "reserve_budget"
    assert tracker.record("wf-1").completed_names[-1] == "score_risk"


def test_unknown_workflows_unknown_types_and_terminal_workflows_are_ignored(
    flow: Flow, tracker: TrackerHarness
) -> None:
    stray = tracker.event(SCORED, "nobody")
    decision = decide(None, stray, flow=flow, now_ms=T0, secret=SECRET)
    assert (decision.outcome, decision.changed) == (Outcome.IGNORED, False)
    assert decision.reason == (
        "no workflow nobody is tracked and procurement.v1.RiskScored does not start "
        "procurement v1 (it starts on procurement.v1.RequestSubmitted)"
    )
    run(tracker, "wf-1", SUBMITTED)
    assert tracker.send("sagalog.v1.EffectRecorded", "wf-1").outcome is Outcome.IGNORED
    unknown_step = tracker.send(STEP_FAILED, "wf-1", step="teleport", reason="?")
    assert unknown_step.outcome is Outcome.REJECTED
    assert tracker.send(COMPENSATION_COMPLETED, "wf-1", step="x").outcome is Outcome.REJECTED
    assert tracker.send(RELEASED, "wf-1").outcome is Outcome.REJECTED  # nothing requested

    tracker.send(STEP_FAILED, "wf-1", step="classify_request", reason="unreadable")
    assert tracker.state("wf-1") is WorkflowState.FAILED
    after = tracker.send(CLASSIFIED, "wf-1")
    assert after.outcome is Outcome.IGNORED and after.actions == ()
    assert after.reason == "workflow wf-1 is failed: inputs after its end are ignored"


# -- failures and compensation -------------------------------------------------------------


def test_a_failure_at_step_4_of_the_reference_flow_has_nothing_to_undo(
    tracker: TrackerHarness,
) -> None:
    """Steps 1-3 of procurement v1 are ``effect: none``: failing reserve_budget just fails."""
    run(tracker, "wf-1", SUBMITTED, CLASSIFIED, RETRIEVED, SCORED)
    tracker.send(STEP_FAILED, "wf-1", step="reserve_budget", reason="ledger down", attempts=5)
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.FAILED
    assert record.terminal_reason == "step 'reserve_budget' failed: ledger down; nothing to undo"
    assert requested(tracker, "wf-1") == []
    assert record.timers == () and len(tracker.timers) == 0


def with_undoable_assessment(flow: Flow) -> Flow:
    """procurement v1 where steps 1-3 have effects, undone by CompensationCompleted."""
    from sagalog.flows.model import Compensation, Step

    entries = []
    for entry in flow.entries:
        if isinstance(entry, Step) and entry.effect == "none":
            undo = Compensation(action=f"undo_{entry.name}", timeout=10 * MIN)
            entry = entry.model_copy(update={"effect": "external", "compensation": undo})
        entries.append(entry)
    return flow.model_copy(update={"entries": tuple(entries)})


def test_a_failure_at_step_4_undoes_steps_3_2_1_in_reverse_one_at_a_time_each_once(
    flow: Flow,
) -> None:
    tracker = TrackerHarness([with_undoable_assessment(flow)], secret=SECRET, now_ms=T0)
    run(tracker, "wf-1", SUBMITTED, CLASSIFIED, RETRIEVED, SCORED)
    tracker.send(STEP_FAILED, "wf-1", step="reserve_budget", reason="ledger down")
    assert tracker.state("wf-1") is WorkflowState.COMPENSATING

    for step in ("score_risk", "retrieve_policies", "classify_request"):
        # exactly one request in flight: the next one waits for this one's completion
        assert requested(tracker, "wf-1")[-1] == (step, f"undo_{step}", 1)
        progress = tracker.record("wf-1").compensation
        assert progress is not None and progress.in_flight == step
        done = tracker.send(COMPENSATION_COMPLETED, "wf-1", step=step, compensation=f"undo_{step}")
        assert done.outcome is Outcome.APPLIED
        again = tracker.send(COMPENSATION_COMPLETED, "wf-1", step=step, compensation="x")
        assert not again.changed  # a second completion changes nothing (stale, or ended)

    assert requested(tracker, "wf-1") == [
        ("score_risk", "undo_score_risk", 1),
        ("retrieve_policies", "undo_retrieve_policies", 1),
        ("classify_request", "undo_classify_request", 1),
    ]
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.COMPENSATED
    assert record.compensation is not None
    assert record.compensation.undone == ("score_risk", "retrieve_policies", "classify_request")
    assert [t[1:] for t in tracker.transitions("wf-1")[-4:]] == [
        ("compensating", "score_risk"),
        ("compensating", "retrieve_policies"),
        ("compensating", "classify_request"),
        ("compensated", None),
    ]


def test_a_failure_after_the_gate_undoes_what_had_effects_skipping_effect_none_steps(
    tracker: TrackerHarness,
) -> None:
    run(tracker, "wf-1", *BEFORE_GATE)
    decide_gate(tracker, "wf-1", "APPROVED")
    run(tracker, "wf-1", PO_CREATED)
    tracker.send(STEP_FAILED, "wf-1", step="notify_vendor", reason="SMTP 550", attempts=3)
    assert requested(tracker, "wf-1") == [("create_purchase_order", "cancel_po", 1)]

    early = tracker.send(RELEASED, "wf-1")  # release_budget was not requested yet
    assert early.outcome is Outcome.REJECTED
    assert tracker.send(PO_CANCELLED, "wf-1", event_id="c1").outcome is Outcome.APPLIED
    assert tracker.send(PO_CANCELLED, "wf-1", event_id="c1").outcome is Outcome.DUPLICATE
    assert tracker.send(PO_CANCELLED, "wf-1").outcome is Outcome.STALE
    assert tracker.send(RELEASED, "wf-1").outcome is Outcome.APPLIED

    assert requested(tracker, "wf-1") == [
        ("create_purchase_order", "cancel_po", 1),
        ("reserve_budget", "release_budget", 1),
    ]
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.COMPENSATED
    assert record.terminal_reason == (
        "step 'notify_vendor' failed: SMTP 550; undone: create_purchase_order, reserve_budget"
    )
    assert len(tracker.timers) == 0


def test_a_step_timeout_also_undoes_the_step_that_was_running(tracker: TrackerHarness) -> None:
    """It may have taken effect without saying so; irreversible steps get their follow-up."""
    run(tracker, "wf-1", *BEFORE_GATE)
    decide_gate(tracker, "wf-1", "APPROVED")
    run(tracker, "wf-1", PO_CREATED)
    tracker.advance(15 * MIN)  # notify_vendor's timeout
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.COMPENSATING
    assert record.compensation is not None
    assert record.compensation.cause is CompensationCause.TIMEOUT
    assert record.compensation.reason == "step 'notify_vendor' did not complete within 15m"
    assert requested(tracker, "wf-1") == [("notify_vendor", "send_correction_notice", 1)]

    late = tracker.send(NOTIFIED, "wf-1")  # it did send the mail after all
    assert late.outcome is Outcome.STALE  # already being followed up
    run(tracker, "wf-1", CORRECTED, PO_CANCELLED, RELEASED)
    assert [r[1] for r in requested(tracker, "wf-1")] == [
        "send_correction_notice",
        "cancel_po",
        "release_budget",
    ]
    assert tracker.state("wf-1") is WorkflowState.COMPENSATED


def test_a_segment_timeout_fails_the_entry_it_stopped_at(flow: Flow) -> None:
    quick = flow.model_copy(
        update={"segments": (flow.segments[0].model_copy(update={"timeout": 12 * MIN}),)}
    )
    tracker = TrackerHarness([quick], secret=SECRET, now_ms=T0)
    run(tracker, "wf-1", SUBMITTED, CLASSIFIED, RETRIEVED, every_ms=4 * MIN)
    tracker.advance(4 * MIN)  # 12 minutes into assessment; score_risk (10m) is still in time
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.FAILED  # nothing in assessment has an effect
    assert record.terminal_reason == (
        "segment 'assessment' did not complete within 12m at 'score_risk'; nothing to undo"
    )


def test_a_late_completion_while_compensating_is_undone_too(tracker: TrackerHarness) -> None:
    run(tracker, "wf-1", *BEFORE_GATE)
    decide_gate(tracker, "wf-1", "APPROVED")
    tracker.advance(15 * MIN)  # create_purchase_order times out: cancel_po in flight
    assert requested(tracker, "wf-1") == [("create_purchase_order", "cancel_po", 1)]
    tracker.send(PO_CREATED, "wf-1")  # stale: the plan already cancels it
    ran_ahead = tracker.send(NOTIFIED, "wf-1")  # notify_vendor's agent ran ahead
    assert ran_ahead.outcome is Outcome.APPLIED
    assert [a.name for a in tracker.alerts] == ["late_completion"]
    run(tracker, "wf-1", PO_CANCELLED, CORRECTED, RELEASED)
    assert [r[1] for r in requested(tracker, "wf-1")] == [
        "cancel_po",
        "send_correction_notice",
        "release_budget",
    ]
    assert tracker.state("wf-1") is WorkflowState.COMPENSATED


def test_a_stuck_compensation_is_retried_with_backoff_then_given_up_with_alerts(
    tracker: TrackerHarness,
) -> None:
    run(tracker, "wf-1", *BEFORE_GATE)
    tracker.send(STEP_FAILED, "wf-1", step="reserve_budget", reason="x")  # stale: complete
    decide_gate(tracker, "wf-1", "REJECTED", by="bob")
    assert requested(tracker, "wf-1") == [("reserve_budget", "release_budget", 1)]

    waits = []
    for _ in range(5):
        due = min(t.due_ms for t in tracker.record("wf-1").timers)
        waits.append(due - tracker.now_ms)
        tracker.advance(due - tracker.now_ms)
    assert waits == [30 * MIN, 60 * MIN, 120 * MIN, 240 * MIN, 480 * MIN]  # doubling
    assert [r[2] for r in requested(tracker, "wf-1")] == [1, 2, 3, 4, 5]
    assert [a.name for a in tracker.alerts] == ["compensation_stuck"] * 5 + [
        "compensation_abandoned"
    ]
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.FAILED
    assert record.terminal_reason is not None
    assert "still to undo by hand: reserve_budget" in record.terminal_reason

    nothing = tracker.send(RELEASED, "wf-1")  # too late: the workflow has ended
    assert nothing.outcome is Outcome.IGNORED


def test_an_effect_after_the_end_raises_an_alert_without_changing_anything(
    tracker: TrackerHarness,
) -> None:
    run(tracker, "wf-1", *BEFORE_GATE)
    decide_gate(tracker, "wf-1", "REJECTED")
    run(tracker, "wf-1", RELEASED)
    assert tracker.state("wf-1") is WorkflowState.COMPENSATED
    before = tracker.record("wf-1")
    leaked = tracker.send(PO_CREATED, "wf-1")
    assert leaked.outcome is Outcome.IGNORED and not leaked.changed
    assert [a.name for a in leaked.actions if isinstance(a, Alert)] == ["effect_after_end"]
    assert tracker.record("wf-1") == before


# -- gates -------------------------------------------------------------------------------------


def test_the_gate_escalates_after_its_interval_with_the_same_attempt_and_token(
    tracker: TrackerHarness,
) -> None:
    run(tracker, "wf-1", *BEFORE_GATE)
    tracker.advance(24 * H - 2 * MIN)
    assert len(tracker.events_of(GateOpened.event_type)) == 1  # not yet
    tracker.advance(MIN)
    first, second = tracker.events_of(GateOpened.event_type)
    assert (second.assignee, second.escalation_level) == ("director@procurement.example", 1)
    assert (second.token, second.attempt, second.deadline) == (
        first.token,
        first.attempt,
        first.deadline,
    )
    assert tracker.state("wf-1") is WorkflowState.PENDING_APPROVAL  # no transition
    gate = tracker.record("wf-1").gate
    assert gate is not None and gate.assignee == "director@procurement.example"
    # The manager may still decide with the token first given.
    assert decide_gate(tracker, "wf-1", "APPROVED", token=first.token).outcome is Outcome.APPLIED


def test_the_gate_takes_its_default_reject_at_its_deadline(tracker: TrackerHarness) -> None:
    run(tracker, "wf-1", *BEFORE_GATE)
    opened_at = tracker.now_ms - MIN
    fired = tracker.advance(72 * H)
    assert [d.outcome for d in fired] == [Outcome.APPLIED, Outcome.APPLIED]  # escalation, deadline
    [decided] = tracker.events_of(GateDecided.event_type)
    assert (decided.decision, decided.decided_by) == (
        "REJECTED",
        "sagalog/saga-tracker (gate deadline)",
    )
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.COMPENSATING
    assert record.compensation is not None
    assert (
        record.compensation.reason
        == "gate 'manager_approval' was not decided within 3d: default reject"
    )
    assert record.entered_current_state_at_ms == opened_at + 72 * H
    # The tracker read its own GateDecided back: a duplicate, not a second decision.
    assert Outcome.DUPLICATE in tracker.outcomes
    run(tracker, "wf-1", RELEASED)
    assert tracker.state("wf-1") is WorkflowState.COMPENSATED


@pytest.mark.parametrize(
    ("default", "state", "cause"),
    [
        ("approve", WorkflowState.RUNNING, None),
        ("fail", WorkflowState.COMPENSATING, CompensationCause.FAILURE),
    ],
)
def test_the_other_gate_defaults(
    flow: Flow, default: str, state: WorkflowState, cause: CompensationCause | None
) -> None:
    tracker = TrackerHarness([variant(flow, gate_default=default)], secret=SECRET, now_ms=T0)
    run(tracker, "wf-1", *BEFORE_GATE)
    tracker.advance(72 * H)
    record = tracker.record("wf-1")
    assert record.state is state
    if default == "approve":
        [decided] = tracker.events_of(GateDecided.event_type)  # the next agent starts on it
        assert decided.decision == "APPROVED" and record.current == "create_purchase_order"
    else:
        assert tracker.events_of(GateDecided.event_type) == []  # fail is not a decision
        assert record.compensation is not None and record.compensation.cause is cause


def test_a_forged_or_expired_token_is_ignored(flow: Flow, tracker: TrackerHarness) -> None:
    run(tracker, "wf-1", *BEFORE_GATE)
    run(tracker, "wf-2", *BEFORE_GATE)
    before = tracker.record("wf-1")
    cases = {
        "g1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA": "forged token",
        gate_token(b"another-secret-of-32-bytes-long!", "wf-1", "manager_approval", 1): "forged",
        gate_token(SECRET, "wf-2", "manager_approval", 1): "forged",  # another workflow's
        gate_token(SECRET, "wf-1", "manager_approval", 2): "forged",  # an attempt never opened
        "é": "forged",
    }
    for token, reason in cases.items():
        decision = decide_gate(tracker, "wf-1", "APPROVED", token=token)
        assert decision.outcome is Outcome.REJECTED and not decision.changed
        assert reason in (decision.reason or "")
    assert tracker.record("wf-1") == before

    decide_gate(tracker, "wf-1", "APPROVED")
    replayed = decide_gate(tracker, "wf-1", "REJECTED")  # a valid token, but the gate closed
    assert replayed.outcome is Outcome.REJECTED
    assert (
        replayed.reason
        == "expired token: gate 'manager_approval' is not open (workflow is running)"
    )
    wrong_gate = tracker.send(
        GATE_DECIDED, "wf-2", gate="ceo_approval", token="t", decision="APPROVED"
    )
    assert wrong_gate.outcome is Outcome.REJECTED


# -- timers --------------------------------------------------------------------------------------


def test_a_timer_that_fired_or_was_cancelled_is_a_no_op(
    flow: Flow, tracker: TrackerHarness
) -> None:
    tracker.send(SUBMITTED, "wf-1")
    [step_timeout] = [t for t in tracker.record("wf-1").timers if t.ref == "classify_request"]
    run(tracker, "wf-1", CLASSIFIED, RETRIEVED, SCORED, RESERVED)
    record = tracker.record("wf-1")
    [escalation] = [t for t in record.timers if t.kind is TimerKind.GATE_ESCALATION]
    now = escalation.due_ms
    cancelled = decide(record, TimerFired(step_timeout), flow=flow, now_ms=now, secret=SECRET)
    assert cancelled.outcome is Outcome.STALE and not cancelled.changed

    once = decide(record, TimerFired(escalation), flow=flow, now_ms=now, secret=SECRET)
    assert once.record is not None and once.outcome is Outcome.APPLIED
    twice = decide(once.record, TimerFired(escalation), flow=flow, now_ms=now, secret=SECRET)
    assert twice.outcome is Outcome.STALE  # exactly once in effect
    early = decide(record, TimerFired(escalation), flow=flow, now_ms=now - 2 * H, secret=SECRET)
    assert early.outcome is Outcome.REJECTED  # a tick never fires a timer before it is due


def test_a_passed_workflow_deadline_ends_timed_out_with_compensation(flow: Flow) -> None:
    """procurement v1's 5d cannot pass first (its entries' bounds add up to less), so 36h here."""
    tracker = TrackerHarness([variant(flow, deadline=36 * H)], secret=SECRET, now_ms=T0)
    run(tracker, "wf-1", *BEFORE_GATE)
    tracker.advance(36 * H)  # the escalation at 24h, then the workflow deadline
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.COMPENSATING
    assert record.compensation is not None
    assert record.compensation.cause is CompensationCause.DEADLINE
    assert record.compensation.reason == "the workflow deadline (36h) passed at 'manager_approval'"
    assert requested(tracker, "wf-1") == [("reserve_budget", "release_budget", 1)]
    stale = decide_gate(tracker, "wf-1", "APPROVED")
    assert stale.outcome is Outcome.REJECTED  # the gate closed with the deadline
    run(tracker, "wf-1", RELEASED)
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.TIMED_OUT
    assert record.terminal_reason == (
        "the workflow deadline (36h) passed at 'manager_approval'; undone: reserve_budget"
    )
    assert tracker.transitions("wf-1")[-1] == ("compensating", "timed_out", None)


# -- versions, admission, determinism --------------------------------------------------------------


def test_a_v2_flow_loaded_beside_v1_does_not_change_an_in_flight_v1_workflow(flow: Flow) -> None:
    v2 = variant(flow, version=2, gate_deadline=48 * H, gate_default="approve")
    tracker = TrackerHarness([flow], secret=SECRET, now_ms=T0)
    run(tracker, "old", *BEFORE_GATE)  # at the v1 gate
    tracker.registry = type(tracker.registry)([flow, v2])  # v2 deployed mid-run
    run(tracker, "new", *BEFORE_GATE)
    assert tracker.record("old").flow_version == 1
    assert tracker.record("new").flow_version == 2

    tracker.advance(48 * H)
    assert tracker.state("new") is WorkflowState.RUNNING  # v2: approve after 48h
    assert tracker.state("old") is WorkflowState.PENDING_APPROVAL  # v1 still waits
    tracker.advance(24 * H)
    assert tracker.state("old") is WorkflowState.COMPENSATING  # v1: reject after 72h

    with pytest.raises(TrackerError, match="runs under flow 'procurement' v1, not procurement v2"):
        decide(
            tracker.record("old"), tracker.event(RELEASED, "old"), flow=v2, now_ms=0, secret=SECRET
        )


def test_beyond_the_admission_limit_workflows_queue_and_the_most_urgent_goes_first(
    flow: Flow,
) -> None:
    from sagalog.priority import Priority

    tracker = TrackerHarness([flow], secret=SECRET, now_ms=T0, admission={"procurement": 1})
    tracker.send(SUBMITTED, "first")
    tracker.advance(MIN)
    tracker.feed(tracker.event(SUBMITTED, "normal"))
    tracker.advance(MIN)
    tracker.feed(tracker.event(SUBMITTED, "urgent", priority=Priority.URGENT))
    assert [tracker.state(w) for w in ("first", "normal", "urgent")] == [
        WorkflowState.RUNNING,
        WorkflowState.QUEUED,
        WorkflowState.QUEUED,
    ]
    parked = tracker.send(CLASSIFIED, "normal")  # its agent did not wait: held until it runs
    assert parked.outcome is Outcome.PARKED

    tracker.send(STEP_FAILED, "first", step="classify_request", reason="x")  # frees the slot
    assert tracker.state("urgent") is WorkflowState.RUNNING  # priority beats age
    assert tracker.state("normal") is WorkflowState.QUEUED
    tracker.send(STEP_FAILED, "urgent", step="classify_request", reason="x")
    assert tracker.record("normal").current == "retrieve_policies"  # the parked event applied
    assert tracker.transitions("normal")[:2] == [
        ("initiated", "queued", None),
        ("queued", "running", "classify_request"),
    ]


def test_the_deadline_runs_while_queued(flow: Flow) -> None:
    submitted = TrackerHarness([flow], secret=SECRET).event(SUBMITTED, "q")
    record = decide(None, submitted, flow=flow, now_ms=T0, secret=SECRET, admit=False).record
    assert record is not None and record.state is WorkflowState.QUEUED
    [deadline] = record.timers
    ended = decide(record, TimerFired(deadline), flow=flow, now_ms=deadline.due_ms, secret=SECRET)
    assert ended.record is not None and ended.record.state is WorkflowState.TIMED_OUT
    assert decide(ended.record, Admit("q"), flow=flow, now_ms=T0, secret=SECRET).outcome is (
        Outcome.STALE
    )


def test_decide_is_deterministic_down_to_the_published_event_ids(
    flow: Flow, tracker: TrackerHarness
) -> None:
    """Reprocessing an input after a crash publishes the same ids, so consumers deduplicate."""
    run(tracker, "wf-1", *BEFORE_GATE)
    record = tracker.record("wf-1")
    assert record.gate is not None
    event = tracker.event(
        GATE_DECIDED,
        "wf-1",
        gate="manager_approval",
        token=record.gate.token,
        decision="REJECTED",
        decided_by="b",
    )
    first = decide(record, event, flow=flow, now_ms=T0 + H, secret=SECRET)
    again = decide(record, event, flow=flow, now_ms=T0 + H, secret=SECRET)
    assert first == again
    ids = [p.event_id for p in first.actions if isinstance(p, Publish)]
    assert len(ids) == len(set(ids)) == 2  # the transition and CompensationRequested


def test_the_recent_event_ids_are_bounded(tracker: TrackerHarness) -> None:
    from sagalog.tracker.record import RECENT_EVENT_IDS

    run(tracker, "wf-1", *BEFORE_GATE)
    full = tuple(f"old-{i}" for i in range(RECENT_EVENT_IDS))
    tracker.store(tracker.record("wf-1").model_copy(update={"recent_event_ids": full}))
    decide_gate(tracker, "wf-1", "APPROVED")
    recent = tracker.record("wf-1").recent_event_ids
    assert len(recent) == RECENT_EVENT_IDS
    assert recent[0] == "old-1" and recent[-1] == tracker.record("wf-1").completed[-1].event_id


@pytest.mark.parametrize(
    ("event_type", "payload", "reason"),
    [
        (STEP_FAILED, {"step": "teleport"}, "names step 'teleport', which procurement v1 lacks"),
        (STEP_FAILED, {"step": "manager_approval"}, "a gate that does not fail on it"),
        (COMPENSATION_COMPLETED, {"step": "score_risk"}, "a step with nothing to undo"),
        (
            COMPENSATION_COMPLETED,
            {"step": "reserve_budget"},
            "whose undo completes on procurement.v1.BudgetReleased instead",
        ),
        (GATE_DECIDED, {"gate": "manager_approval"}, "GateDecided without its payload"),
    ],
)
def test_a_misaddressed_platform_event_is_rejected_saying_why(
    tracker: TrackerHarness, event_type: str, payload: dict[str, str], reason: str
) -> None:
    run(tracker, "wf-1", *BEFORE_GATE)
    before = tracker.record("wf-1")
    decision = tracker.send(event_type, "wf-1", **payload)
    assert decision.outcome is Outcome.REJECTED and reason in (decision.reason or "")
    assert tracker.record("wf-1") == before


def test_published_event_ids_are_uuid5_of_workflow_cause_and_position() -> None:
    """The fast id must be exactly ``uuid5``: a batch decided again after an upgrade
    publishes the same ids, which is what lets consumers drop the duplicates."""
    import uuid

    from sagalog.tracker._change import _EVENT_IDS, event_id_for

    for name in ["wf-1\x1fevt-1\x1f1", "ü\x1f" * 50, "", "wf\x1ftimer:000\x1f12"]:
        assert event_id_for(name) == str(uuid.uuid5(_EVENT_IDS, name))
