"""One memory budget for many RocksDB databases (the tracker opens one per table and
partition): the sum stays within it, whatever the number of databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from rocksdict import Rdict

from sagalog.rocksdb_options import MB, MemoryBudget, bounded_options
from sagalog.services.tracker.rocks import BudgetedRocksDBOptions

from .timing import wait_until


def fill(db: Rdict, first: int, count: int) -> None:
    for i in range(first, first + count):
        db[b"%08d" % i] = b"x" * 1024


def in_memtables(dbs: list[Rdict]) -> int:
    """Records held in memtables (not yet flushed to files)."""
    return sum(
        int(db.property_int_value(name) or 0)
        for db in dbs
        for name in ("rocksdb.num-entries-active-mem-table", "rocksdb.num-entries-imm-mem-tables")
    )


def test_databases_under_one_budget_count_their_memtables_in_one_place(tmp_path: Path) -> None:
    budget = MemoryBudget(cache_mb=4, memtables_mb=64)
    first = Rdict(str(tmp_path / "a"), bounded_options(raw_mode=True, budget=budget))
    second = Rdict(str(tmp_path / "b"), bounded_options(raw_mode=True, budget=budget))
    try:
        fill(first, 0, 600)
        alone = budget.memtables_bytes()
        assert alone >= 512 * 1024
        fill(second, 0, 600)
        assert budget.memtables_bytes() > alone
    finally:
        first.close()
        second.close()


def immutable_memtables(dbs: list[Rdict]) -> int:
    """Records in memtables switched out for a flush and not yet flushed."""
    return sum(int(db.property_int_value("rocksdb.num-entries-imm-mem-tables") or 0) for db in dbs)


@pytest.mark.parametrize("budgeted", [True, False])
def test_memtables_past_the_budget_are_flushed(tmp_path: Path, budgeted: bool) -> None:
    """Six databases, 6 MB written round robin, a 2 MB budget: RocksDB flushes although
    no database filled its own 4 MB memtable. Without a budget all 6,000 records stay
    in memtables.

    RocksDB flushes the database being written when the total is past the budget, so
    a database nobody writes keeps its memtable: the budget bounds a steady flow, the
    memtable size bounds each database. How much leaves memory is not fixed: a write
    past the budget switches the memtable at once, but the flush runs in RocksDB's
    background threads and frees memory only when done, and writes do not wait for it.
    Eight runs on a loaded two-core machine left 420 to 5,485 of the 6,000 records in
    memtables (an earlier version of this test asked for fewer than 1,000, then 3,000,
    within 5 s, then 60 s, and failed now and then). So the test asks for what is
    certain: the budget made RocksDB flush, and the flush completes.
    """
    budget = MemoryBudget(cache_mb=4, memtables_mb=2)
    dbs = [
        Rdict(
            str(tmp_path / f"db{n}"),
            bounded_options(raw_mode=True, budget=budget if budgeted else None),
        )
        for n in range(6)
    ]
    try:
        for i in range(6_000):  # round robin, as workflows spread over partitions
            dbs[i % 6][b"%08d" % i] = b"x" * 1024
        if not budgeted:
            # 1 MB per database, under its 4 MB memtable: nothing asks for a flush.
            assert in_memtables(dbs) == 6_000 and immutable_memtables(dbs) == 0
            return
        # Switched memtables are flushed in the background: wait, bounded for a
        # loaded machine, returning as soon as the last is written to a file.
        wait_until(
            lambda: immutable_memtables(dbs) == 0,
            what="the memtables the budget switched out are flushed",
        )
        assert in_memtables(dbs) < 6_000  # some records left memory, none had to
    finally:
        for db in dbs:
            db.close()


def test_the_trackers_faust_options_open_databases_under_the_budget(tmp_path: Path) -> None:
    budget = MemoryBudget(cache_mb=4, memtables_mb=8)
    options = BudgetedRocksDBOptions(
        budget, write_buffer_size=4 * MB, max_write_buffer_number=2, target_file_size_base=16 * MB
    )
    db = options.open(tmp_path / "records-0")
    try:
        for i in range(1_000):
            db[b"wf-%06d" % i] = b"r" * 500
        assert budget.memtables_bytes() > 0
        db.flush()
        db.get(b"wf-000001")
        assert budget.cache_bytes() > 0  # blocks read into the shared cache
    finally:
        db.close()


def test_a_budget_needs_positive_sizes() -> None:
    with pytest.raises(ValueError, match="cache_mb=0"):
        MemoryBudget(cache_mb=0, memtables_mb=8)
