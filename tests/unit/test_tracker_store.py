"""The tracker's tables without Kafka: the batch overlay, its write-back order, parked keys."""

from __future__ import annotations

from sagalog.services.tracker.store import (
    WRITE_ORDER,
    MemoryTables,
    Overlay,
    Table,
    parked_prefix,
    prefix_end,
)


class RecordingTables(MemoryTables):
    """``MemoryTables`` that logs every write, in order: ``(op, table, partition, key)``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Table, int, bytes]] = []

    def put(self, table: Table, partition: int, key: bytes, value: bytes) -> None:
        self.calls.append(("put", table, partition, key))
        super().put(table, partition, key, value)

    def delete(self, table: Table, partition: int, key: bytes) -> None:
        self.calls.append(("delete", table, partition, key))
        super().delete(table, partition, key)


def seeded(**rows: bytes) -> MemoryTables:
    """Base tables holding ``rows`` in TIMERS partition 0, with the write count reset."""
    base = MemoryTables()
    for key, value in rows.items():
        base.put(Table.TIMERS, 0, key.encode(), value)
    base.writes = 0
    return base


# -- reads -------------------------------------------------------------------------


def test_a_pending_write_is_read_back_before_it_reaches_the_base() -> None:
    base = seeded(a=b"old")
    overlay = Overlay(base)
    overlay.put(Table.TIMERS, 0, b"a", b"new")
    overlay.put(Table.TIMERS, 0, b"b", b"fresh")

    assert overlay.get(Table.TIMERS, 0, b"a") == b"new"
    assert overlay.get(Table.TIMERS, 0, b"b") == b"fresh"
    assert base.get(Table.TIMERS, 0, b"a") == b"old"  # the base is untouched
    assert base.get(Table.TIMERS, 0, b"b") is None
    assert base.writes == 0


def test_reads_fall_through_to_the_base_and_are_scoped_by_table_and_partition() -> None:
    base = seeded(a=b"old")
    overlay = Overlay(base)
    overlay.put(Table.TIMERS, 1, b"a", b"other partition")
    overlay.put(Table.RECORDS, 0, b"a", b"other table")

    assert overlay.get(Table.TIMERS, 0, b"a") == b"old"
    assert overlay.get(Table.TIMERS, 1, b"a") == b"other partition"
    assert overlay.get(Table.RECORDS, 0, b"a") == b"other table"
    assert overlay.get(Table.PARKED, 0, b"a") is None


def test_a_pending_delete_hides_the_base_key_and_a_later_put_revives_it() -> None:
    base = seeded(a=b"old", b=b"kept")
    overlay = Overlay(base)
    overlay.delete(Table.TIMERS, 0, b"a")

    assert overlay.get(Table.TIMERS, 0, b"a") is None
    assert overlay.scan(Table.TIMERS, 0, b"", b"\xff", 10) == [(b"b", b"kept")]
    assert base.get(Table.TIMERS, 0, b"a") == b"old"

    overlay.put(Table.TIMERS, 0, b"a", b"again")
    assert overlay.get(Table.TIMERS, 0, b"a") == b"again"


# -- scans -------------------------------------------------------------------------


def test_scan_merges_pending_writes_and_deletes_over_the_base_in_key_order() -> None:
    base = seeded(b=b"base-b", d=b"base-d", f=b"base-f")
    overlay = Overlay(base)
    overlay.put(Table.TIMERS, 0, b"e", b"new-e")
    overlay.put(Table.TIMERS, 0, b"a", b"new-a")
    overlay.put(Table.TIMERS, 0, b"d", b"new-d")  # overrides the base value
    overlay.delete(Table.TIMERS, 0, b"b")
    overlay.delete(Table.TIMERS, 0, b"zz")  # absent everywhere: harmless
    overlay.put(Table.TIMERS, 1, b"c", b"other partition")

    assert overlay.scan(Table.TIMERS, 0, b"", b"\xff", 100) == [
        (b"a", b"new-a"),
        (b"d", b"new-d"),
        (b"e", b"new-e"),
        (b"f", b"base-f"),
    ]


def test_scan_respects_its_limit_even_when_deletes_hide_the_first_base_keys() -> None:
    base = seeded(a=b"1", b=b"2", c=b"3", d=b"4", e=b"5")
    overlay = Overlay(base)
    overlay.delete(Table.TIMERS, 0, b"a")
    overlay.delete(Table.TIMERS, 0, b"b")
    overlay.put(Table.TIMERS, 0, b"bb", b"new")

    assert overlay.scan(Table.TIMERS, 0, b"", b"\xff", 2) == [(b"bb", b"new"), (b"c", b"3")]
    assert overlay.scan(Table.TIMERS, 0, b"", b"\xff", 3) == [
        (b"bb", b"new"),
        (b"c", b"3"),
        (b"d", b"4"),
    ]
    assert overlay.scan(Table.TIMERS, 0, b"", b"\xff", 1) == [(b"bb", b"new")]


def test_scan_is_the_half_open_range_lower_inclusive_upper_exclusive() -> None:
    base = seeded(a=b"1", c=b"3", e=b"5")
    overlay = Overlay(base)
    overlay.put(Table.TIMERS, 0, b"b", b"2")
    overlay.put(Table.TIMERS, 0, b"d", b"4")  # the upper bound: excluded
    overlay.put(Table.TIMERS, 0, b"\x00", b"below")

    assert overlay.scan(Table.TIMERS, 0, b"b", b"d", 100) == [(b"b", b"2"), (b"c", b"3")]
    assert overlay.scan(Table.TIMERS, 0, b"c", b"c", 100) == []
    assert [k for k, _ in overlay.scan(Table.TIMERS, 0, b"", b"c", 100)] == [b"\x00", b"a", b"b"]


# -- write-back --------------------------------------------------------------------


def test_write_back_writes_timers_parked_and_admission_first_and_records_last() -> None:
    base = RecordingTables()
    base.put(Table.PARKED, 0, b"p", b"held")
    base.calls.clear()
    overlay = Overlay(base)
    # Queued in the worst order: records first.
    overlay.put(Table.RECORDS, 0, b"wf-1", b"{}")
    overlay.put(Table.ADMISSION, 0, b"active|orders", b"1")
    overlay.delete(Table.PARKED, 0, b"p")
    overlay.put(Table.TIMERS, 2, b"t", b"")
    overlay.put(Table.RECORDS, 1, b"wf-2", b"{}")

    assert overlay.write_back() == 5
    assert base.calls == [
        ("put", Table.TIMERS, 2, b"t"),
        ("delete", Table.PARKED, 0, b"p"),
        ("put", Table.ADMISSION, 0, b"active|orders"),
        ("put", Table.RECORDS, 0, b"wf-1"),
        ("put", Table.RECORDS, 1, b"wf-2"),
    ]
    assert WRITE_ORDER[-1] is Table.RECORDS and set(WRITE_ORDER) == set(Table)
    assert base.get(Table.RECORDS, 1, b"wf-2") == b"{}"


def test_write_back_empties_the_overlay_so_a_second_one_writes_nothing() -> None:
    base = RecordingTables()
    base.put(Table.TIMERS, 0, b"stored", b"")
    base.calls.clear()
    overlay = Overlay(base)
    overlay.put(Table.TIMERS, 0, b"stored", b"x")
    overlay.delete(Table.TIMERS, 0, b"stored")  # the last write of a key wins

    assert overlay.write_back() == 1
    assert base.calls == [("delete", Table.TIMERS, 0, b"stored")]
    assert overlay.write_back() == 0


def test_a_key_put_and_deleted_within_a_batch_or_never_stored_writes_nothing() -> None:
    base = RecordingTables()
    overlay = Overlay(base)
    overlay.put(Table.TIMERS, 0, b"t", b"")  # a step timeout set...
    overlay.delete(Table.TIMERS, 0, b"t")  # ...and cancelled in the same batch
    overlay.delete(Table.TIMERS, 0, b"gone")  # a timer cancelled after it fired

    assert overlay.get(Table.TIMERS, 0, b"t") is None
    assert overlay.write_back() == 0
    assert base.calls == []
    assert all(pending == {} for pending in overlay.pending.values())


# -- keys --------------------------------------------------------------------------


def test_parked_prefixes_of_a_and_a_bar_b_share_no_prefix() -> None:
    a, ab = parked_prefix("a"), parked_prefix("a|b")
    assert a == b"000001a|"
    assert ab == b"000003a|b|"
    assert not ab.startswith(a) and not a.startswith(ab)
    # A parked key of "a|b" is outside "a"'s scan range, and vice versa.
    assert not (a <= ab + b"e1" < prefix_end(a))
    assert not (ab <= a + b"b|e1" < prefix_end(ab))


def test_a_scan_of_one_workflows_parked_prefix_finds_only_its_events() -> None:
    overlay = Overlay(MemoryTables())
    for workflow_id in ("a", "a|b", "ab", "b"):
        overlay.put(Table.PARKED, 0, parked_prefix(workflow_id) + b"e1", workflow_id.encode())
    prefix = parked_prefix("a")
    assert overlay.scan(Table.PARKED, 0, prefix, prefix_end(prefix), 100) == [(b"000001a|e1", b"a")]


def test_parked_prefix_counts_bytes_not_characters() -> None:
    assert parked_prefix("é") == b"000002\xc3\xa9|"


def test_prefix_end_is_the_prefix_with_its_last_byte_incremented() -> None:
    assert prefix_end(b"000001a|") == b"000001a}"
    assert prefix_end(b"queue|orders|") == b"queue|orders}"
    assert prefix_end(b"a\x00") == b"a\x01"
    prefix = b"000001a|"
    end = prefix_end(prefix)
    assert prefix + b"\xff\xff\xff" < end
    assert prefix < end
    assert not b"000001a}".startswith(prefix) and end <= b"000001a}"


def test_prefix_end_of_a_prefix_ending_in_0xff_is_above_every_key_with_it() -> None:
    prefix = b"a\xff"
    assert prefix + b"\xff\x01" < prefix_end(prefix)
