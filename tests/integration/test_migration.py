"""Migrating 1,000 running workflows from orders v1 to v2 on the real broker (issue 21).

v2 renames ``classify_request`` to ``categorize_request`` (``--map``), gives
``retrieve_policies`` 20 minutes and the gate 96 hours. The workflows stand in five
places: at ``reserve_budget``, at the renamed step, at the gate, past the gate at
``score_risk``, and compensating (refused: their undo plan was made under v1).

The dry run's list is compared with what the tracker did, workflow by workflow, from
its records changelog; then every migrated workflow is driven to its end under v2,
and the audit of one shows the migration.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import Result

from sagalog.replay.live import read_live_records
from sagalog.tracker import gate_token

from .tracker_harness import SECRET, TrackerLab

pytestmark = pytest.mark.integration

COUNT = 1_000
GROUPS = ("reserve_budget", "classify_request", "manager_approval", "score_risk", "undoing")
WHERE: dict[str, tuple[str, str | None]] = {  # group -> (state, step) once it settled
    "reserve_budget": ("running", "reserve_budget"),
    "classify_request": ("running", "classify_request"),
    "manager_approval": ("pending_approval", "manager_approval"),
    "score_risk": ("running", "score_risk"),
    "undoing": ("compensating", None),  # None: any step (the one being undone)
}
COMPLETES = {
    "reserve_budget": "procurement.v1.BudgetReserved",
    "classify_request": "procurement.v1.RequestClassified",
    "retrieve_policies": "procurement.v1.PoliciesRetrieved",
    "score_risk": "procurement.v1.RiskScored",
    "create_purchase_order": "procurement.v1.PurchaseOrderCreated",
}


def group_of(i: int) -> str:
    return GROUPS[i % len(GROUPS)]


def wid(i: int) -> str:
    return f"mig-{i:04d}"


def sagalog(lab: TrackerLab, *args: str) -> Result:
    return lab.project.sagalog(*args)


def settle(lab: TrackerLab, wanted: Callable[[int], tuple[str, str | None]], what: str) -> None:
    """Wait until workflow ``i``'s last transition is into ``wanted(i)`` (state, step)."""

    def done() -> bool:
        for i in range(COUNT):
            moves = lab.transitions(wid(i))
            state, step = wanted(i)
            if not moves or moves[-1]["to_state"] != state:
                return False
            if step is not None and moves[-1]["step"] != step:
                return False
        return True

    lab.wait(done, timeout=300, what=what)


def approve(lab: TrackerLab, workflow_id: str) -> None:
    lab.publish(
        "sagalog.v1.GateDecided",
        workflow_id,
        gate="manager_approval",
        token=gate_token(SECRET.encode(), workflow_id, "manager_approval", 1),
        decision="APPROVED",
        decided_by="boss@example.com",
    )


def drive_to_places(lab: TrackerLab) -> None:
    for i in range(COUNT):
        lab.start(wid(i))
    for i in range(COUNT):
        group = group_of(i)
        if group != "reserve_budget":
            lab.complete(wid(i), "reserve_budget")
        if group in ("manager_approval", "score_risk"):
            lab.complete(wid(i), "classify_request")
            lab.complete(wid(i), "retrieve_policies")
        if group == "undoing":
            lab.fail(wid(i), "classify_request")
    settle(
        lab,
        lambda i: (
            ("pending_approval", "manager_approval")
            if group_of(i) == "score_risk"
            else WHERE[group_of(i)]
        ),
        what="1,000 workflows in their places",
    )
    for i in range(COUNT):
        if group_of(i) == "score_risk":
            approve(lab, wid(i))
    settle(lab, lambda i: WHERE[group_of(i)], what="past the gate")


def test_a_thousand_workflows_move_to_v2_as_the_dry_run_says_and_finish_under_it(
    tracker_lab: TrackerLab,
) -> None:
    lab = tracker_lab
    lab.tracker()
    drive_to_places(lab)

    # v2 is deployed: the tracker restarts with both versions.
    lab.add_flow("orders.v2.yaml")
    lab.processes[0].stop()
    lab.processes.clear()
    lab.tracker()

    args = ["flows", "migrate", "--flow", "orders", "--from", "1", "--to", "2"]
    args += ["--map", "classify_request=categorize_request", "--app-id", lab.app_id]
    dry = sagalog(lab, *args, "--json")
    assert dry.exit_code == 0, dry.output
    plan: dict[str, Any] = json.loads(dry.stdout)
    planned = {m["workflow_id"]: m for m in plan["migrate"]}
    refused = {r["workflow_id"]: r["reasons"] for r in plan["refused"]}
    assert len(planned) == 800 and len(refused) == 200
    assert {group_of(int(w[4:])) for w in refused} == {"undoing"}
    assert all("it is compensating" in reasons[0] for reasons in refused.values())
    renamed = [m for m in planned.values() if m["current_before"] == "classify_request"]
    assert len(renamed) == 200 and {m["current_after"] for m in renamed} == {"categorize_request"}
    # Nothing was published by the dry run.
    assert not any(lab.events(wid(i), "sagalog.v1.WorkflowMigrated") for i in range(COUNT))

    applied = sagalog(lab, *args, "--apply", "--by", "ops@example.com")
    assert applied.exit_code == 0, applied.output
    assert "800 workflow(s) published for, 200 refused" in applied.stdout

    def migrated() -> dict[str, Any]:
        records = read_live_records(lab.project.settings, f"{lab.app_id}-records-changelog")
        return {w: r for w, r in records.items() if r.flow_version == 2}

    lab.wait(lambda: len(migrated()) == 800, timeout=120, what="800 records at v2")
    after = migrated()
    mismatches = []
    for workflow_id, expected in planned.items():
        record = after[workflow_id]
        timers = sorted((t.kind.value, t.ref, t.due_ms) for t in record.timers)
        wanted = sorted((t["kind"], t["ref"], t["due_ms"]) for t in expected["timers"])
        if (record.current, list(record.completed_names), timers) != (
            expected["current_after"],
            expected["completed"],
            wanted,
        ):
            mismatches.append(workflow_id)
    assert mismatches == []
    assert set(after) == set(planned)

    # Every migrated workflow finishes under v2.
    for workflow_id, expected in planned.items():
        at = expected["current_after"]
        if at == "reserve_budget":
            lab.complete(workflow_id, "reserve_budget")
        if at in ("reserve_budget", "categorize_request"):
            lab.complete(workflow_id, "classify_request")  # categorize completes on it too
            lab.complete(workflow_id, "retrieve_policies")
    lab.wait(
        lambda: all(
            lab.state(w) in ("pending_approval", "running")
            and lab.transitions(w)[-1]["step"] in ("manager_approval", "score_risk")
            for w in planned
        ),
        timeout=300,
        what="every migrated workflow at the gate or past it",
    )
    for workflow_id in planned:
        if lab.state(workflow_id) == "pending_approval":
            approve(lab, workflow_id)
        lab.complete(workflow_id, "score_risk")
        lab.complete(workflow_id, "create_purchase_order")
    lab.wait(
        lambda: all(lab.state(w) == "completed" for w in planned),
        timeout=300,
        what="800 migrated workflows completed",
    )
    assert {lab.transitions(w)[-1]["flow_version"] for w in planned} == {2}
    assert Counter(t["flow_version"] for t in lab.transitions(wid(0)))[2] >= 4
    for i in range(COUNT):
        if group_of(i) == "undoing":
            assert lab.state(wid(i)) == "compensating"  # refused: still under v1

    # The audit shows the migration.
    audit = sagalog(
        lab,
        "audit",
        wid(1),
        "--tracker-app-id",
        lab.app_id,
        "--transitions-topic",
        lab.transitions_topic,
        "--no-gateway",
        "--json",
    )
    assert audit.exit_code == 0, audit.output
    history = json.loads(audit.stdout)["history"]
    [moved] = [h for h in history if h.get("type") == "sagalog.v1.WorkflowMigrated"]
    assert json.dumps(moved).count("ops@example.com") >= 1
