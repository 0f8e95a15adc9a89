"""The stored workflow record evolves safely: a new release reads what an older one wrote.

``fixtures/tracker_record_v1.json`` is a record as the first release stored it (schema
version 1): a procurement workflow escalated to the director at its gate. Never
regenerate it; when the layout changes meaning, add a new fixture beside it and an
upgrade in ``sagalog.tracker.record._UPGRADES``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.model import Flow
from sagalog.flows.states import WorkflowState
from sagalog.priority import Priority
from sagalog.testing import TrackerHarness
from sagalog.topology.loader import load_topology
from sagalog.tracker import Outcome, StoredRecordError, WorkflowRecord, decide
from sagalog.tracker.inputs import TimerFired
from sagalog.tracker.record import STORED_SCHEMA_VERSION
from sagalog.tracker.timers import TimerKind

FIXTURE = Path(__file__).parent / "fixtures" / "tracker_record_v1.json"
SECRET = b"unit-test-gate-secret-32-bytes!!"  # the secret the fixture's token was signed with


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    from sagalog.flows.loader import load_flow_file

    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    return load_flow_file(
        repo_root / "topology/flows/procurement.v1.yaml", catalog=catalog, topology=topology
    )


@pytest.fixture
def stored() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def test_a_record_written_in_the_old_format_loads(stored: dict[str, Any]) -> None:
    record = WorkflowRecord.from_stored(stored)
    assert record.schema_version == STORED_SCHEMA_VERSION
    assert (record.workflow_id, record.flow, record.flow_version) == (
        "po-2023-0042",
        "procurement",
        1,
    )
    assert record.state is WorkflowState.PENDING_APPROVAL
    assert record.completed_names[-1] == "reserve_budget"
    assert record.gate is not None and record.gate.escalation_level == 1
    assert {t.kind for t in record.timers} == {
        TimerKind.WORKFLOW_DEADLINE,
        TimerKind.GATE_DEADLINE,
    }
    assert record.priority is Priority.NORMAL


def test_nothing_stored_in_the_old_format_is_lost_on_rewrite(stored: dict[str, Any]) -> None:
    rewritten = WorkflowRecord.from_stored(stored).to_stored()
    assert {k: rewritten[k] for k in stored} == stored


def test_a_workflow_stored_by_the_old_release_finishes_under_the_new_one(
    stored: dict[str, Any], flow: Flow
) -> None:
    tracker = TrackerHarness([flow], secret=SECRET, now_ms=1_700_100_000_000)
    record = WorkflowRecord.from_stored(stored)
    tracker.store(record)
    assert record.gate is not None
    tracker.send(
        "sagalog.v1.GateDecided",
        record.workflow_id,
        gate="manager_approval",
        token=record.gate.token,
        decision="APPROVED",
        decided_by="director",
    )
    tracker.send("procurement.v1.PurchaseOrderCreated", record.workflow_id)
    tracker.send("procurement.v1.VendorNotified", record.workflow_id)
    assert tracker.state(record.workflow_id) is WorkflowState.COMPLETED
    replayed = tracker.send(
        "procurement.v1.BudgetReserved", record.workflow_id, event_id="evt-BudgetReserved"
    )
    assert replayed.outcome is Outcome.DUPLICATE  # its dedup memory came along


def test_unknown_fields_are_ignored_and_new_fields_take_their_defaults(
    stored: dict[str, Any],
) -> None:
    from_newer_release = {
        **stored,
        "sla_breaches": ["approvals_waiting"],  # a field a later release added
        "gate": {**stored["gate"], "delegated_to": "cfo@procurement.example"},
        "timers": [{**t, "jitter_ms": 12} for t in stored["timers"]],
    }
    assert WorkflowRecord.from_stored(from_newer_release) == WorkflowRecord.from_stored(stored)

    minimal = {
        k: stored[k]
        for k in (
            "workflow_id",
            "flow",
            "flow_version",
            "state",
            "started_at_ms",
            "entered_current_state_at_ms",
        )
    }
    record = WorkflowRecord.from_stored(minimal)  # written before any optional field existed
    assert record.schema_version == 1 and record.timers == () and record.recent_event_ids == ()
    assert record.priority is Priority.NORMAL and record.compensation is None


def test_enums_are_stored_by_name(stored: dict[str, Any]) -> None:
    record = WorkflowRecord.from_stored({**stored, "priority": "urgent"})
    assert record.priority is Priority.URGENT
    assert record.to_stored()["priority"] == "urgent"
    assert record.to_stored()["state"] == "pending_approval"
    assert record.to_stored()["timers"][0]["kind"] == "workflow_deadline"


def test_the_stored_form_is_plain_json(stored: dict[str, Any]) -> None:
    text = json.dumps(WorkflowRecord.from_stored(stored).to_stored())
    assert WorkflowRecord.from_stored(json.loads(text)) == WorkflowRecord.from_stored(stored)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema_version": STORED_SCHEMA_VERSION + 1}, "newer than this tracker's"),
        ({"schema_version": "one"}, "expected an integer"),
        ({"state": "teleported"}, "is not readable as a workflow record"),
        ({"workflow_id": None}, "is not readable as a workflow record"),
    ],
)
def test_a_record_this_release_cannot_read_is_refused_with_the_reason(
    stored: dict[str, Any], change: dict[str, Any], message: str
) -> None:
    with pytest.raises(StoredRecordError, match=message):
        WorkflowRecord.from_stored({**stored, **change})


def test_a_restored_record_keeps_its_timers_exact(stored: dict[str, Any], flow: Flow) -> None:
    """The record's timer list is how a fired timer is recognized after a restore."""
    record = WorkflowRecord.from_stored(stored)
    deadline = next(t for t in record.timers if t.kind is TimerKind.GATE_DEADLINE)
    fired = decide(record, TimerFired(deadline), flow=flow, now_ms=deadline.due_ms, secret=SECRET)
    assert fired.outcome is Outcome.APPLIED
    assert fired.record is not None and fired.record.state is WorkflowState.COMPENSATING


@pytest.mark.parametrize(
    "change",
    [{}, {"priority": "urgent"}, {"sla_breaches": ["approvals_waiting"]}],
    ids=["as stored", "an enum by name", "a field from a newer release"],
)
def test_from_json_reads_what_from_stored_reads(
    stored: dict[str, Any], change: dict[str, Any]
) -> None:
    expected = WorkflowRecord.from_stored({**stored, **change})
    as_written = expected.model_dump_json().encode()  # the tracker's writes: the fast path
    assert as_written.startswith(b'{"schema_version":')
    assert WorkflowRecord.from_json(as_written) == expected
    other_order = json.dumps({**stored, **change}, sort_keys=True).encode()  # the slow path
    assert WorkflowRecord.from_json(other_order) == expected


def test_from_json_refuses_what_it_cannot_read(stored: dict[str, Any]) -> None:
    with pytest.raises(StoredRecordError, match="not JSON"):
        WorkflowRecord.from_json(b"{not json")
    with pytest.raises(StoredRecordError, match="not a JSON object"):
        WorkflowRecord.from_json(b"[1, 2]")
    broken = json.dumps({"schema_version": 1, **stored, "state": "levitating"}).encode()
    with pytest.raises(StoredRecordError, match="not readable as a workflow record"):
        WorkflowRecord.from_json(broken.replace(b'{"schema_version": 1', b'{"schema_version":1'))
    newer = json.dumps({**stored, "schema_version": STORED_SCHEMA_VERSION + 1}).encode()
    with pytest.raises(StoredRecordError, match="newer than this tracker"):
        WorkflowRecord.from_json(newer)


@pytest.mark.parametrize(
    "update",
    [
        None,
        {},
        {"wake_ms": 1_800_000_000_000},
        {"state": WorkflowState.FAILED, "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"},
    ],
)
def test_a_shallow_copy_is_the_one_pydantic_makes(
    stored: dict[str, Any], update: dict[str, Any] | None
) -> None:
    record = WorkflowRecord.from_stored(stored)
    ours = record.model_copy(update=update)
    theirs = BaseModel.model_copy(record, update=update)
    assert ours == theirs
    assert ours.model_fields_set == theirs.model_fields_set
    assert ours.model_dump_json() == theirs.model_dump_json()
    assert ours.__pydantic_extra__ == theirs.__pydantic_extra__
    assert ours.__pydantic_private__ == theirs.__pydantic_private__
    assert record.model_copy(update=update, deep=True) == theirs
