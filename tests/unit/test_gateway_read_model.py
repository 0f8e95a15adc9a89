"""The gateway's read model on a real RocksDB: indexes follow the records, positions persist."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.model import Flow
from sagalog.flows.states import WorkflowState
from sagalog.services.gateway.follower import lag_of
from sagalog.services.gateway.read_model import ReadModel, TransitionEntry
from sagalog.tracker import StoredRecordError
from sagalog.tracker.record import WorkflowRecord

from .gateway_fixtures import BEFORE_GATE, at_gate, reference_flow, tracked


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    return reference_flow(repo_root, catalog)


@pytest.fixture
def model(tmp_path: Path) -> Iterator[ReadModel]:
    model = ReadModel(tmp_path / "rm")
    yield model
    model.close()


def stored(record: WorkflowRecord) -> bytes:
    return json.dumps(record.to_stored()).encode()


def put(model: ReadModel, *records: WorkflowRecord) -> None:
    batch = model.batch()
    for record in records:
        batch.put_record(record.workflow_id, stored(record))
    batch.commit()


def entry(n: int, to_state: str = "running") -> TransitionEntry:
    return TransitionEntry(
        event_id=f"t-{n}",
        flow="procurement",
        flow_version=1,
        from_state="initiated",
        to_state=to_state,
        cause_event_id=f"c-{n}",
        time_in_previous_state_ms=n,
        at_ms=1_000 * n,
    )


def test_a_record_at_a_gate_is_listed_as_an_open_gate_until_it_moves_on(
    model: ReadModel, flow: Flow
) -> None:
    waiting = at_gate(flow, "wf-1")
    put(model, waiting, tracked(flow, "wf-2", *BEFORE_GATE[:2]).record("wf-2"))
    assert [r.workflow_id for r in model.open_gates()] == ["wf-1"]
    assert [r.workflow_id for r in model.open_gates(assignee="nobody@example.com")] == []
    assert [r.workflow_id for r in model.workflows(state=WorkflowState.RUNNING)] == ["wf-2"]

    decided = waiting.model_copy(update={"state": WorkflowState.RUNNING})
    put(model, decided)
    assert model.open_gates() == []
    assert model.workflows(state=WorkflowState.PENDING_APPROVAL) == []
    assert {r.workflow_id for r in model.workflows(state=WorkflowState.RUNNING)} == {"wf-1", "wf-2"}


def test_two_updates_of_one_workflow_in_one_batch_leave_one_state_entry(
    model: ReadModel, flow: Flow
) -> None:
    waiting = at_gate(flow, "wf-1")
    put(model, waiting.model_copy(update={"state": WorkflowState.RUNNING}), waiting)
    assert model.counts()["running"] == 0
    assert model.counts()["pending_approval"] == 1


def test_a_deleted_record_takes_its_indexes_and_history_with_it(
    model: ReadModel, flow: Flow
) -> None:
    put(model, at_gate(flow, "wf-1"), at_gate(flow, "wf-10"))
    batch = model.batch()
    batch.add_transition("wf-1", entry(1), partition=0, offset=5)
    batch.add_transition("wf-10", entry(2), partition=0, offset=6)
    batch.put_record("wf-1", None)
    batch.commit()
    assert model.record("wf-1") is None
    assert [r.workflow_id for r in model.open_gates()] == ["wf-10"]
    assert model.history("wf-1") == []
    assert [h.event_id for h in model.history("wf-10")] == ["t-2"]


def test_history_is_in_log_order_and_reading_it_twice_changes_nothing(model: ReadModel) -> None:
    for _ in range(2):
        batch = model.batch()
        for offset in (12, 3, 7):
            batch.add_transition("wf-1", entry(offset), partition=1, offset=offset)
        batch.commit()
    assert [h.event_id for h in model.history("wf-1")] == ["t-3", "t-7", "t-12"]


def test_one_workflow_never_sees_the_history_of_another_with_a_longer_id(
    model: ReadModel,
) -> None:
    batch = model.batch()
    batch.add_transition("a", entry(1), partition=0, offset=1)
    batch.add_transition("a1", entry(2), partition=0, offset=2)
    batch.commit()
    assert [h.event_id for h in model.history("a")] == ["t-1"]


def test_listing_pages_by_workflow_id(model: ReadModel, flow: Flow) -> None:
    put(model, *(at_gate(flow, f"wf-{i}") for i in range(5)))
    first = model.workflows(limit=2)
    assert [r.workflow_id for r in first] == ["wf-0", "wf-1"]
    rest = model.workflows(after="wf-1", limit=10)
    assert [r.workflow_id for r in rest] == ["wf-2", "wf-3", "wf-4"]
    gated = model.workflows(state=WorkflowState.PENDING_APPROVAL, after="wf-3")
    assert [r.workflow_id for r in gated] == ["wf-4"]
    assert model.workflows(flow="other") == []


def test_positions_survive_a_restart_with_the_data_they_cover(tmp_path: Path, flow: Flow) -> None:
    model = ReadModel(tmp_path / "rm")
    batch = model.batch()
    batch.put_record("wf-1", stored(at_gate(flow, "wf-1")))
    batch.advance("saga-tracker-records-changelog", 2, 41)
    batch.advance("sagalog.transitions", 0, 7)
    batch.commit()
    model.close()

    again = ReadModel(tmp_path / "rm")
    try:
        assert again.positions() == {
            ("saga-tracker-records-changelog", 2): 41,
            ("sagalog.transitions", 0): 7,
        }
        assert again.record("wf-1") is not None
    finally:
        again.close()


def test_an_unreadable_record_is_refused_and_nothing_is_written(model: ReadModel) -> None:
    batch = model.batch()
    with pytest.raises(StoredRecordError, match="not JSON"):
        batch.put_record("wf-1", b"{not json")
    with pytest.raises(StoredRecordError, match="newer than this tracker"):
        batch.put_record("wf-1", json.dumps({"schema_version": 99}).encode())
    batch.commit()
    assert model.record("wf-1") is None


def test_the_request_ledger_remembers_by_event_id_and_token(model: ReadModel) -> None:
    model.remember("e-1", {"workflow_id": "wf-1", "decision": "approve"}, token="g1.t")
    assert model.accepted("e-1") == {"workflow_id": "wf-1", "decision": "approve"}
    assert model.token_decision("g1.t") == {"workflow_id": "wf-1", "decision": "approve"}
    assert model.accepted("e-2") is None


def test_state_counts_are_counted_once_then_moved_by_each_batch(flow: Flow, tmp_path: Path) -> None:
    model = ReadModel(tmp_path / "counts")
    try:
        put(model, tracked(flow, "wf-1", *BEFORE_GATE[:2]).record("wf-1"))
        before = model.state_counts()  # the first read scans
        assert before == {k: v for k, v in model.counts().items() if v}
        batch = model.batch()
        batch.put_record("wf-1", stored(at_gate(flow, "wf-1")))  # wf-1 moves to the gate
        batch.put_record("wf-2", stored(at_gate(flow, "wf-2")))
        assert model.state_counts() == before  # nothing moves before the commit
        batch.commit()
        after = model.state_counts()
        assert after == {k: v for k, v in model.counts().items() if v}
        assert after == {"pending_approval": 2}
        gone = model.batch()
        gone.put_record("wf-2", None)
        gone.commit()
        assert model.state_counts() == {"pending_approval": 1}
    finally:
        model.close()
    reopened = ReadModel(tmp_path / "counts")  # a restart counts afresh from the index
    try:
        assert reopened.state_counts() == {"pending_approval": 1}
    finally:
        reopened.close()


def test_the_exported_gauge_names_every_state_with_zeros(flow: Flow, tmp_path: Path) -> None:
    """With every workflow ended, "in flight" must read 0, not vanish from the dashboard."""
    from sagalog import metrics
    from sagalog.services.gateway.exported_metrics import export_workflows

    model = ReadModel(tmp_path / "gauge")
    undo = export_workflows(model)
    try:
        put(model, at_gate(flow, "wf-1"))
        text = metrics.render()[0].decode()
        assert 'sagalog_workflows{state="pending_approval"} 1.0' in text
        assert 'sagalog_workflows{state="running"} 0.0' in text
        assert len(
            [line for line in text.splitlines() if line.startswith("sagalog_workflows{")]
        ) == len(WorkflowState)
    finally:
        undo()
        model.close()


def test_lag_counts_a_commit_marker_as_read_once_the_consumer_reported_the_end() -> None:
    """The tracker's last commit marker takes an offset no reader receives: without the
    end the consumer reported, the lag stayed 1 and the heap was never trimmed."""
    assert lag_of(high=101, low=0, applied=100, end_seen=None) == 1
    assert lag_of(high=101, low=0, applied=100, end_seen=101) == 0
    # Records written since that end count again, the marker with them.
    assert lag_of(high=150, low=0, applied=100, end_seen=101) == 49
    # Compacted or deleted below the log start is not lag; nothing applied yet is all lag.
    assert lag_of(high=150, low=120, applied=100, end_seen=None) == 30
    assert lag_of(high=150, low=0, applied=None, end_seen=None) == 150
