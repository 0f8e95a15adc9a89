"""RocksDB options for sagalog's local stores: memory bounded, whatever the data size.

RocksDB's defaults (64 MB memtables, two of them, and an 8 MB block cache per
database) are sized for a server with one big database. Each sagalog service keeps
small, rebuildable stores and many services share a machine, and the platform's
promise is that a service waiting on 100,000 workflows costs about what it costs
waiting on 10,000. Bounded memtables mean more, smaller flushes, which these write
rates (a few thousand small records a second) do not notice.

A process with many databases (the tracker opens one per table and partition) shares
one ``MemoryBudget``: bounds per database add up with the number of databases.
"""

from __future__ import annotations

from rocksdict import BlockBasedOptions, Cache, Options, WriteBufferManager

MB = 1024 * 1024


class MemoryBudget:
    """One block cache and one memtable limit for every database given these options.

    The write buffer manager makes RocksDB flush the largest memtable once all the
    databases' memtables together pass ``memtables_mb``; the cache holds at most
    ``cache_mb`` of blocks for all of them.
    """

    def __init__(self, *, cache_mb: int, memtables_mb: int) -> None:
        if cache_mb <= 0 or memtables_mb <= 0:
            raise ValueError(
                f"a RocksDB memory budget needs positive sizes, got cache_mb={cache_mb}, "
                f"memtables_mb={memtables_mb}"
            )
        self.cache_mb = cache_mb
        self.memtables_mb = memtables_mb
        self.cache = Cache(cache_mb * MB)
        self.write_buffers = WriteBufferManager(memtables_mb * MB, False)

    def memtables_bytes(self) -> int:
        """Memtable memory of every database under this budget, now."""
        return int(self.write_buffers.get_usage())

    def cache_bytes(self) -> int:
        """Block cache memory of every database under this budget, now."""
        return int(self.cache.get_usage())


def bounded_options(
    *,
    raw_mode: bool,
    memtable_mb: int = 4,
    cache_mb: int = 8,
    budget: MemoryBudget | None = None,
    bloom_bits: int | None = None,
) -> Options:
    """``Options`` with two memtables of ``memtable_mb`` and a ``cache_mb`` block cache,
    or, given a ``budget``, its shared cache and memtable limit on top; ``bloom_bits``
    per key of bloom filter for point lookups."""
    options = Options(raw_mode=raw_mode)
    options.create_if_missing(True)
    options.set_write_buffer_size(memtable_mb * MB)
    options.set_max_write_buffer_number(2)
    table = BlockBasedOptions()
    table.set_block_cache(budget.cache if budget is not None else Cache(cache_mb * MB))
    if bloom_bits is not None:
        table.set_bloom_filter(bloom_bits, True)
    if budget is not None:
        options.set_write_buffer_manager(budget.write_buffers)
    options.set_block_based_table_factory(table)
    return options
