"""The local store's consistency rules, on a real RocksDB in a temp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagalog.agents.state_store import StateStore
from sagalog.errors import ConfigurationError
from sagalog.position import RecordPosition


def test_projection_is_idempotent_and_remembers_first_sighting(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    for _ in range(2):  # the same event folded twice changes nothing
        store.project(
            workflow_id="w",
            event_id="e1",
            event_type="a.v1.Started",
            source="s",
            payload=b"x1",
            position=RecordPosition("t", 0, 5),
        )
    store.project(
        workflow_id="w",
        event_id="e1",
        event_type="a.v1.Started",
        source="s",
        payload=b"x1",
        position=RecordPosition("t", 0, 9),
    )  # a duplicate at a later offset
    store.project(
        workflow_id="w",
        event_id="e2",
        event_type="a.v1.Done",
        source="s",
        payload=b"y2",
        position=RecordPosition("t", 0, 6),
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


def _fold(
    store: StateStore, event_id: str, offset: int, *, workflow: str = "w", kind: str = "a.v1.A"
) -> tuple[str, int, int]:
    _, first = store.fold(
        workflow_id=workflow,
        event_id=event_id,
        event_type=kind,
        source="s",
        payload=event_id.encode(),
        position=RecordPosition("t", 0, offset),
    )
    return first


def test_fold_tells_a_duplicate_from_a_replay_by_the_first_offset(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    assert _fold(store, "e1", 5) == ("t", 0, 5)  # new: its own position
    assert _fold(store, "e1", 5) == ("t", 0, 5)  # replayed after an abort: handle again
    assert _fold(store, "e1", 9) == ("t", 0, 5)  # a duplicate published later
    store.close()
    cold = StateStore(tmp_path / "db")  # nothing cached: read back from RocksDB
    assert _fold(cold, "e1", 9) == ("t", 0, 5)
    assert _fold(cold, "e2", 10) == ("t", 0, 10)
    assert [h[0] for h in cold.context("w").history] == ["e1", "e2"]


def test_writes_wait_for_flush_and_go_together(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db", cache_size=1)
    _fold(store, "e1", 5, workflow="w1")
    _fold(store, "e2", 6, workflow="w2")  # evicts w1 from the cache, still unwritten
    store.set_checkpoint("t", 0, 7)
    assert store.db.get("p:w1") is None and store.db.get("o:t:0") is None
    # Reads see the buffered state: the evicted context, the sighting, the checkpoint.
    assert [h[0] for h in store.context("w1").history] == ["e1"]
    assert store.first_seen("e1") == ("t", 0, 5)
    assert store.checkpoint("t", 0) == 7
    store.flush()
    assert store.db.get("o:t:0") == 7
    assert store.db.get("s:e2") == ["t", 0, 6]
    stored = store.db.get("p:w1")
    assert stored is not None
    latest, history = stored
    assert latest == {"a.v1.A": b"e1"} and [h[0] for h in history] == ["e1"]


def test_a_store_keeping_some_types_skips_the_others(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db", folded_types=frozenset({"a.v1.A"}))
    assert store.keeps("a.v1.A") and not store.keeps("b.v1.B")
    _fold(store, "e1", 1, kind="a.v1.A")
    _fold(store, "e2", 2, kind="b.v1.B")
    context = store.context("w").snapshot()
    context.decoder = lambda raw: {"raw": raw}
    assert [h[1] for h in context.history] == ["a.v1.A"]
    assert context.get("a.v1.A") == {"raw": b"e1"}
    with pytest.raises(
        ConfigurationError, match=r"reads b\.v1\.B from ctx\.workflow, which no flow"
    ):
        context.get("b.v1.B")
    assert store.first_seen("e2") is None


def test_keeping_a_type_the_projection_skipped_rebuilds_it_from_the_log(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db", folded_types=frozenset({"a.v1.A"}))
    _fold(store, "e1", 1)
    store.set_checkpoint("t", 0, 2)
    store.record_effect("k", "done")
    store.close()
    narrower = StateStore(tmp_path / "db", folded_types=frozenset())  # a subset: kept as is
    assert narrower.checkpoint("t", 0) == 2
    narrower.close()
    wider = StateStore(tmp_path / "db", folded_types=frozenset({"a.v1.A", "b.v1.B"}))
    # The projection and checkpoints are gone (hydration refolds from offset 0); the
    # effect ledger is not rebuildable and stays.
    assert wider.checkpoint("t", 0) == 0
    assert wider.context("w").history == [] and wider.first_seen("e1") is None
    assert wider.effect_result("k") == {"result": "done"}
    wider.close()
    everything = StateStore(tmp_path / "db")  # back to the default: rebuilt again
    assert everything.checkpoint("t", 0) == 0


def test_a_store_from_before_the_declaration_counts_as_keeping_everything(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "db")
    _fold(store, "e1", 1)
    store.set_checkpoint("t", 0, 2)
    store.close()
    declared = StateStore(tmp_path / "db", folded_types=frozenset({"a.v1.A"}))
    assert declared.checkpoint("t", 0) == 2
    assert [h[0] for h in declared.context("w").history] == ["e1"]


def test_the_context_cache_drops_the_least_recently_used_workflow(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db", cache_size=2)
    _fold(store, "a1", 1, workflow="a")
    _fold(store, "b1", 2, workflow="b")
    _fold(store, "a2", 3, workflow="a")  # a again: used last, and the cache stays full
    _fold(store, "c1", 4, workflow="c")  # evicts b, not a
    assert list(store._contexts) == ["a", "c"]
