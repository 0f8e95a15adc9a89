"""The rebuild store: a fresh directory only, tables and offsets committed together."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagalog.replay.journal import Decided, fold
from sagalog.replay.store import MARKER, RebuildStore, StoreError
from sagalog.tracker.tables import Table

META = {"kind": "sagalog-replay-rebuild", "workflow_topics": ["orders.events"]}


def test_it_opens_only_a_new_directory_or_its_own_store(tmp_path: Path) -> None:
    with RebuildStore.open(tmp_path / "new", meta=META):
        assert (tmp_path / "new" / MARKER).exists()
    with RebuildStore.open(tmp_path / "new", meta=META):  # resumed
        pass
    with pytest.raises(StoreError, match=r"rebuild of other inputs .*workflow_topics"):
        RebuildStore.open(tmp_path / "new", meta={**META, "workflow_topics": ["other"]})
    tracker_data = tmp_path / "tracker-data"
    (tracker_data / "v1").mkdir(parents=True)
    with pytest.raises(StoreError, match="not empty and is not a rebuild store"):
        RebuildStore.open(tracker_data, meta=META)


def test_a_store_in_use_is_refused(tmp_path: Path) -> None:
    with (
        RebuildStore.open(tmp_path / "s", meta=META),
        pytest.raises(StoreError, match=r"another .* using it"),
    ):
        RebuildStore.open(tmp_path / "s", meta=META)


def test_writes_are_staged_until_committed_with_their_offsets(tmp_path: Path) -> None:
    with RebuildStore.open(tmp_path / "s", meta=META) as store:
        store.put(Table.RECORDS, 1, b"wf-1", b"{}")
        store.put(Table.TIMERS, 1, b"0001|wf-1", b"")
        store.stage_clock(1, 42)
        assert store.get(Table.RECORDS, 1, b"wf-1") is None  # not before the commit
        store.commit({("orders.events", 1): 17})
        store.put(Table.RECORDS, 1, b"wf-2", b"{}")
        store.discard()  # an interrupted chunk
    with RebuildStore.open(tmp_path / "s", meta=META) as store:
        assert store.offsets() == {("orders.events", 1): 17}
        assert store.clock(1) == 42 and store.clock(0) == 0
        assert store.get(Table.RECORDS, 1, b"wf-1") == b"{}"
        assert store.get(Table.RECORDS, 1, b"wf-2") is None
        assert store.get(Table.RECORDS, 0, b"wf-1") is None  # partitions apart
        assert list(store.records(1)) == [("wf-1", b"{}")]


def test_scans_are_ranges_of_one_table_and_partition(tmp_path: Path) -> None:
    with RebuildStore.open(tmp_path / "s", meta=META) as store:
        for key in (b"a", b"b", b"c", b"d"):
            store.put(Table.TIMERS, 0, key, b"")
        store.put(Table.TIMERS, 1, b"b", b"")
        store.put(Table.PARKED, 0, b"b", b"x")
        store.delete(Table.TIMERS, 0, b"c")
        store.commit({})
        assert store.scan(Table.TIMERS, 0, b"b", b"z", 10) == [(b"b", b""), (b"d", b"")]
        assert store.scan(Table.TIMERS, 0, b"", b"z", 1) == [(b"a", b"")]


def test_the_journal_and_the_live_records_are_kept_for_the_next_run(tmp_path: Path) -> None:
    timer = "000000000000900|wf-1|step_timeout|a"
    with RebuildStore.open(tmp_path / "s", meta=META) as store:
        first = fold(
            [Decided("wf-1", "ev-1", 10), Decided("wf-1", f"timer:{timer}", 900)], store.last_of
        )
        store.stage_journal(first)
        store.commit({("transitions", 0): 2})
        store.stage_journal(fold([Decided("wf-1", "ev-2", 950)], store.last_of))
        store.stage_live("wf-b", b"B")
        store.stage_live("wf-a", b"A")
        store.mark_fired(timer)
        store.commit({})
    with RebuildStore.open(tmp_path / "s", meta=META) as store:
        recorded = store.recorded("ev-2")
        assert recorded is not None and (recorded.seq, recorded.at_ms) == (2, 950)
        assert [(f.timer_key, f.seq) for f in store.firings_of("wf-1")] == [(timer, 1)]
        assert [f.timer_key for f in store.all_firings()] == [timer]
        assert store.is_fired(timer)
        assert list(store.live()) == [("wf-a", b"A"), ("wf-b", b"B")]
        store.clear_live()
        assert list(store.live()) == []
