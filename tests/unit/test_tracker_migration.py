"""Migrating running workflows (issue 21, item 2): the rule as a plain function, and the
tracker applying ``WorkflowMigrated`` with it, through ``TrackerHarness``.

v2 of the reference procurement flow renames ``score_risk`` to ``assess_risk``, gives
``reserve_budget`` 20 minutes instead of 10 and the gate 96 hours instead of 72.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.events import GateDecision, StateTransition
from sagalog.flows.loader import load_flow_file
from sagalog.flows.model import GATE_DECIDED, WORKFLOW_MIGRATED, Flow
from sagalog.flows.registry import FlowRegistry
from sagalog.flows.states import WorkflowState
from sagalog.testing import TrackerHarness
from sagalog.topology.loader import load_topology
from sagalog.tracker import Outcome, gate_token
from sagalog.tracker.migration import Migrated, Refused, check_mapping, plan_migration
from sagalog.tracker.record import WorkflowRecord
from sagalog.tracker.timers import TimerKind

SECRET = b"migration-secret"
T0 = 1_800_000_000_000
MIN = 60_000
H = 60 * MIN
RENAME = {"score_risk": "assess_risk"}
FORWARD = [
    ("classify_request", "procurement.v1.RequestClassified"),
    ("retrieve_policies", "procurement.v1.PoliciesRetrieved"),
    ("score_risk", "procurement.v1.RiskScored"),
    ("reserve_budget", "procurement.v1.BudgetReserved"),
]


def version(repo_root: Path, catalog: SchemaCatalog, tmp: Path, number: int, **edits: str) -> Flow:
    text = (repo_root / "topology/flows/procurement.v1.yaml").read_text()
    text = text.replace("version: 1", f"version: {number}")
    for old, new in edits.items():
        assert old.replace("__", "\n") in text, old
        text = text.replace(old.replace("__", "\n"), new.replace("__", "\n"))
    path = tmp / f"procurement.v{number}.yaml"
    path.write_text(text)
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    return load_flow_file(path, catalog=catalog, topology=topology)


@pytest.fixture
def flows(repo_root: Path, catalog: SchemaCatalog, tmp_path: Path) -> tuple[Flow, Flow]:
    v1 = version(repo_root, catalog, tmp_path, 1)
    v2 = version(
        repo_root,
        catalog,
        tmp_path,
        2,
        **{
            "name: score_risk": "name: assess_risk",
            "after: score_risk": "after: assess_risk",
            "retrieve_policies, score_risk]": "retrieve_policies, assess_risk]",
            "step: score_risk": "step: assess_risk",
            "completes_on: procurement.v1.BudgetReserved__    timeout: 10m": (
                "completes_on: procurement.v1.BudgetReserved__    timeout: 20m"
            ),
            "deadline: 72h": "deadline: 96h",
        },
    )
    return v1, v2


def drive(tracker: TrackerHarness, workflow_id: str, steps: int) -> None:
    """Start ``workflow_id`` and complete its first ``steps`` steps, a second apart."""
    tracker.send("procurement.v1.RequestSubmitted", workflow_id)
    for _, event_type in FORWARD[:steps]:
        tracker.advance(1_000)
        tracker.send(event_type, workflow_id)


def approve(tracker: TrackerHarness, workflow_id: str, decision: str = "APPROVED") -> None:
    tracker.send(
        GATE_DECIDED,
        workflow_id,
        gate="manager_approval",
        token=gate_token(SECRET, workflow_id, "manager_approval", 1),
        decision=decision,
        decided_by="ann",
    )


def migrate(tracker: TrackerHarness, record: WorkflowRecord, **changes: Any) -> Any:
    payload: dict[str, Any] = {
        "flow": "procurement",
        "from_version": 1,
        "to_version": 2,
        "mapping": RENAME,
        "expected_state": record.state.value,
        "expected_current": record.current,
        "migration_id": "m-1",
        "requested_by": "ops@example.com",
        **changes,
    }
    return tracker.send(WORKFLOW_MIGRATED, record.workflow_id, **payload)


@pytest.fixture
def tracker(flows: tuple[Flow, Flow]) -> TrackerHarness:
    v1, _ = flows
    harness = TrackerHarness([v1], secret=SECRET, now_ms=T0)
    drive(harness, "queued-or-first", 0)  # running classify_request
    drive(harness, "at-risk", 2)  # running score_risk, renamed in v2
    drive(harness, "at-gate", 4)  # pending_approval
    drive(harness, "undoing", 4)
    approve(harness, "undoing", "REJECTED")  # compensating: releasing the budget
    drive(harness, "after-gate", 4)
    approve(harness, "after-gate")  # running create_purchase_order
    return harness


DECIDED = ("flow_version", "state", "current", "completed", "gate", "waiting", "keys")


def test_what_the_dry_run_plans_is_what_the_tracker_does_workflow_by_workflow(
    tracker: TrackerHarness, flows: tuple[Flow, Flow]
) -> None:
    v1, v2 = flows
    before = tracker.records
    plans = {
        wid: plan_migration(record, old=v1, new=v2, mapping=RENAME)
        for wid, record in before.items()
    }
    assert {wid for wid, p in plans.items() if isinstance(p, Refused)} == {"undoing"}
    tracker.registry = FlowRegistry([v1, v2])
    for wid, record in before.items():
        decision = migrate(tracker, record)
        plan = plans[wid]
        if isinstance(plan, Refused):
            assert decision.outcome is Outcome.REJECTED
            assert "it is compensating" in (decision.reason or "")
            assert tracker.record(wid).flow_version == 1
            continue
        assert isinstance(plan, Migrated) and decision.outcome is Outcome.APPLIED
        after = tracker.record(wid)
        for field in DECIDED:
            assert getattr(after, field) == getattr(plan.record, field), (wid, field)
        assert sorted(t.key for t in after.timers) == sorted(t.key for t in plan.timers), wid
        assert sorted(t.key for t in tracker.timers if t.workflow_id == wid) == sorted(
            t.key for t in plan.timers
        )
    assert [a.name for a in tracker.alerts] == ["migration_refused"]


def test_timers_are_counted_again_from_when_each_span_began(
    tracker: TrackerHarness, flows: tuple[Flow, Flow]
) -> None:
    v1, v2 = flows
    at_risk = tracker.record("at-risk")
    plan = plan_migration(at_risk, old=v1, new=v2, mapping=RENAME)
    assert isinstance(plan, Migrated) and plan.record.current == "assess_risk"
    due = {(t.kind, t.ref): t.due_ms for t in plan.timers}
    assert due[(TimerKind.STEP_TIMEOUT, "assess_risk")] == (
        at_risk.entered_current_state_at_ms + 10 * MIN
    )
    assert due[(TimerKind.SEGMENT_TIMEOUT, "assessment")] == at_risk.started_at_ms + 30 * MIN
    assert due[(TimerKind.WORKFLOW_DEADLINE, "workflow")] == at_risk.started_at_ms + 5 * 24 * H
    at_gate = tracker.record("at-gate")
    gate = plan_migration(at_gate, old=v1, new=v2, mapping=RENAME)
    assert isinstance(gate, Migrated) and gate.record.gate is not None
    assert at_gate.gate is not None
    assert gate.record.gate.deadline_ms == at_gate.gate.opened_at_ms + 96 * H
    assert gate.record.gate.token == at_gate.gate.token  # a person's link still works
    assert gate.compensations == ("reserve_budget",)
    assert gate.changes["timers"][0] != gate.changes["timers"][1]


def test_every_migrated_workflow_finishes_under_the_new_version(
    tracker: TrackerHarness, flows: tuple[Flow, Flow]
) -> None:
    tracker.registry = FlowRegistry(flows)
    for record in tracker.records.values():
        migrate(tracker, record)
    seen = len(tracker.published)
    remaining = {
        "queued-or-first": FORWARD,
        "at-risk": FORWARD[2:],
        "at-gate": [],
        "after-gate": [],
    }
    for wid, events in remaining.items():
        for _, event_type in events:
            tracker.send(event_type, wid)
        if tracker.state(wid) is WorkflowState.PENDING_APPROVAL:
            approve(tracker, wid)
        tracker.send("procurement.v1.PurchaseOrderCreated", wid)
        tracker.send("procurement.v1.VendorNotified", wid)
        assert tracker.state(wid) is WorkflowState.COMPLETED, wid
        assert tracker.record(wid).flow_version == 2
    moves = [p for p in tracker.published[seen:] if isinstance(p.event, StateTransition)]
    assert moves and {p.event.flow_version for p in moves} == {2}
    assert "assess_risk" in {p.event.step for p in moves}


def test_a_workflow_that_moved_on_since_the_dry_run_is_refused(
    tracker: TrackerHarness, flows: tuple[Flow, Flow]
) -> None:
    tracker.registry = FlowRegistry(flows)
    seen = tracker.record("at-risk")
    tracker.send("procurement.v1.RiskScored", "at-risk")
    decision = migrate(tracker, seen)
    assert decision.outcome is Outcome.REJECTED
    assert "it moved on since the dry run (then running at 'score_risk', now running at " in (
        decision.reason or ""
    )
    assert tracker.record("at-risk").flow_version == 1


@pytest.mark.parametrize(
    ("edits", "mapping", "workflow", "reason"),
    [
        (
            {
                "name: score_risk": "name: assess_risk",
                "after: score_risk": "after: assess_risk",
                "retrieve_policies, score_risk]": "retrieve_policies, assess_risk]",
                "step: score_risk": "step: assess_risk",
            },
            {},
            "at-risk",
            "current entry 'score_risk' has no counterpart 'score_risk' in procurement v2 "
            "(map it: --map score_risk=<entry of procurement v2>)",
        ),
        (
            {
                "    compensation:__      action: release_budget__      completes_on: "
                "procurement.v1.BudgetReleased__      timeout: 30m__": "    effect: none__"
            },
            {},
            "at-gate",
            "completed step 'reserve_budget' is undone by 'release_budget' in procurement v1, "
            "but 'reserve_budget' in procurement v2 says nothing about undoing it",
        ),
        (
            {
                "gate: manager_approval": "gate: approval",
                "after: manager_approval": ("after: approval"),
            },
            {"manager_approval": "approval"},
            "at-gate",
            "open gate 'manager_approval' would be renamed 'approval'",
        ),
    ],
)
def test_an_unsafe_migration_is_refused_naming_why(
    tracker: TrackerHarness,
    repo_root: Path,
    catalog: SchemaCatalog,
    tmp_path: Path,
    flows: tuple[Flow, Flow],
    edits: dict[str, str],
    mapping: dict[str, str],
    workflow: str,
    reason: str,
) -> None:
    v1, _ = flows
    v2 = version(repo_root, catalog, tmp_path, 3, **edits)
    plan = plan_migration(tracker.record(workflow), old=v1, new=v2, mapping=mapping)
    assert isinstance(plan, Refused)
    assert any(reason.replace("v2", "v3") in r for r in plan.reasons), plan.reasons


def test_a_step_added_before_the_current_one_is_refused(
    tracker: TrackerHarness, repo_root: Path, catalog: SchemaCatalog, tmp_path: Path
) -> None:
    v1 = version(repo_root, catalog, tmp_path, 1)
    triage = v1.entries[0].model_copy(update={"name": "triage"})
    later = v1.model_copy(update={"version": 2, "entries": (triage, *v1.entries)})
    plan = plan_migration(tracker.record("at-risk"), old=v1, new=later, mapping={})
    assert isinstance(plan, Refused)
    assert plan.reasons == (
        "procurement v2 runs 'triage' before 'score_risk', and this workflow never ran it",
    )
    assert check_mapping({"nope": "score_risk"}, old=v1, new=later) != []
    assert check_mapping({}, old=later, new=v1) == [
        "procurement v1 is not later than procurement v2"
    ]


def test_the_mapping_itself_is_checked_before_any_workflow(flows: tuple[Flow, Flow]) -> None:
    v1, v2 = flows
    assert check_mapping(RENAME, old=v1, new=v2) == []
    assert check_mapping({"scor_risk": "assess_risk", "score_risk": "asess"}, old=v1, new=v2) == [
        "--map scor_risk=assess_risk: procurement v1 has no entry 'scor_risk'",
        "--map score_risk=asess: procurement v2 has no entry 'asess'",
    ]
    assert GateDecision.APPROVED  # the enum the gate decisions above are written with
