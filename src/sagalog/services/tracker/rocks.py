"""faust's RocksDB options for the tracker's tables, all under one ``MemoryBudget``.

faust opens one RocksDB per table and partition (four tables: 24 databases on six
partitions, 48 on twelve) and gives each its own block cache and memtables, so the
bound on the tracker's RocksDB memory multiplied with the partitions (4 MB of cache
and 2 x 4 MB of memtables each: up to 288 MB on six). Here every database shares one
block cache and one memtable limit (``TrackerSettings.rocksdb_cache_mb``,
``rocksdb_memtables_mb``), whatever the partition count. (What the budget holds with
many workflows waiting, against per-database bounds:
docs/design/tuning-measurements.md.)
"""

from __future__ import annotations

from typing import Any

from faust.stores.rocksdb import RocksDBOptions
from rocksdict import Options

from sagalog.rocksdb_options import MB, MemoryBudget, bounded_options

ROCKSDB_OPTIONS: dict[str, Any] = {
    # faust's defaults (64 MB x 3 memtables and a 2 GB block cache per partition and
    # table) let RSS grow with the data written; memtables of 4 MB at most, and the
    # cache and the memtables' total under one budget.
    "write_buffer_size": 4 * 1024 * 1024,
    "max_write_buffer_number": 2,
    "target_file_size_base": 16 * 1024 * 1024,
}


class BudgetedRocksDBOptions(RocksDBOptions):
    """faust's options (memtable size, file sizes, bloom filter) with the shared budget
    in place of a cache and memtables per database."""

    def __init__(self, budget: MemoryBudget, **options: Any) -> None:
        super().__init__(use_rocksdict=True, **options)
        self.budget = budget

    def as_options(self) -> Options:
        options = bounded_options(
            raw_mode=True,
            memtable_mb=max(1, self.write_buffer_size // MB),
            budget=self.budget,
            bloom_bits=self.bloom_filter_size,
        )
        options.set_max_write_buffer_number(self.max_write_buffer_number)
        if self.max_open_files is not None:
            options.set_max_open_files(self.max_open_files)
        options.set_target_file_size_base(self.target_file_size_base)
        return options
