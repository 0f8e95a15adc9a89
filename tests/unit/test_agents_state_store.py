"""The local store's consistency rules, on a real RocksDB in a temp dir."""

from __future__ import annotations

from pathlib import Path

from sagalog.agents.state_store import StateStore


def test_projection_is_idempotent_and_remembers_first_sighting(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    for _ in range(2):  # the same event folded twice changes nothing
        store.project(
            workflow_id="w",
            event_id="e1",
            event_type="a.v1.Started",
            source="s",
            payload=b"x1",
            position=("t", 0, 5),
        )
    store.project(
        workflow_id="w",
        event_id="e1",
        event_type="a.v1.Started",
        source="s",
        payload=b"x1",
        position=("t", 0, 9),
    )  # a duplicate at a later offset
    store.project(
        workflow_id="w",
        event_id="e2",
        event_type="a.v1.Done",
        source="s",
        payload=b"y2",
        position=("t", 0, 6),
    )
    context = store.context("w")
    context.decoder = lambda raw: {"raw": raw}  # the runtime decodes with the codec
    assert [h[0] for h in context.history] == ["e1", "e2"]
    assert context.get("a.v1.Started") == {"raw": b"x1"}
    assert context.get("a.v1.Done") == {"raw": b"y2"}
    assert store.first_seen("e1") == ("t", 0, 5)
    store.close()
    reopened = StateStore(tmp_path / "db")
    assert reopened.context("w").history == context.history


def test_checkpoints_ledger_and_parking(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    assert store.checkpoint("t", 0) == 0
    store.set_checkpoint("t", 0, 42)
    assert store.checkpoint("t", 0) == 42
    assert store.effect_result("k") is None
    store.record_effect("k", {"id": "r-1"})
    assert store.effect_result("k") == {"result": {"id": "r-1"}}
    store.park("w", "e1", 7)
    store.park("w", "e2", 8)
    assert store.parked("w") == {"e1": 7, "e2": 8}
    store.unpark("w", "e1")
    store.unpark("w", "e2")
    assert store.parked("w") == {}
