"""``FaustTables`` over RocksDB opened as faust opens it (raw mode): scans stop at the bound."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import rocksdict

from saga_tracker.store import FaustTables, Table


class _Changelog:
    def __init__(self, db: Any) -> None:
        self.data = SimpleNamespace(_dbs={0: db}, _db_for_partition=lambda p: db)
        self.sent: list[tuple[int, bytes, bytes | None]] = []

    def send_changelog(self, partition: int, key: bytes, value: bytes | None, *_: Any) -> None:
        self.sent.append((partition, key, value))


def test_a_scan_reads_only_keys_below_the_upper_bound_and_writes_go_to_the_changelog(
    tmp_path: Path,
) -> None:
    db = rocksdict.Rdict(str(tmp_path / "t"), options=rocksdict.Options(raw_mode=True))
    table = _Changelog(db)
    tables = FaustTables({Table.TIMERS: table})
    for i in range(1000):
        tables.put(Table.TIMERS, 0, b"%015d|wf-%d" % (i, i), b"")
    tables.delete(Table.TIMERS, 0, b"%015d|wf-%d" % (3, 3))

    due = tables.scan(Table.TIMERS, 0, b"", b"%015d" % 10, limit=100)

    assert [k for k, _ in due] == [b"%015d|wf-%d" % (i, i) for i in (0, 1, 2, 4, 5, 6, 7, 8, 9)]
    assert tables.scan(Table.TIMERS, 0, b"", b"%015d" % 1000, limit=5)[-1][0].startswith(b"0" * 14)
    assert len(table.sent) == 1001 and table.sent[-1][2] is None
    assert tables.get(Table.TIMERS, 1, b"x") is None  # a partition this worker does not hold
    db.close()
