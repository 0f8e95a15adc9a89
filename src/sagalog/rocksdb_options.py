"""RocksDB options for sagalog's local stores: memory bounded, whatever the data size.

RocksDB's defaults (64 MB memtables, two of them, and an 8 MB block cache per
database) are sized for a server with one big database. Each sagalog service keeps
small, rebuildable stores and many services share a machine, and the platform's
promise is that a service waiting on 100,000 workflows costs about what it costs
waiting on 10,000. Bounded memtables mean more, smaller flushes, which these write
rates (a few thousand small records a second) do not notice.
"""

from __future__ import annotations

from rocksdict import BlockBasedOptions, Cache, Options

MB = 1024 * 1024


def bounded_options(*, raw_mode: bool, memtable_mb: int = 4, cache_mb: int = 8) -> Options:
    """``Options`` with two memtables of ``memtable_mb`` and a ``cache_mb`` block cache."""
    options = Options(raw_mode=raw_mode)
    options.create_if_missing(True)
    options.set_write_buffer_size(memtable_mb * MB)
    options.set_max_write_buffer_number(2)
    table = BlockBasedOptions()
    table.set_block_cache(Cache(cache_mb * MB))
    options.set_block_based_table_factory(table)
    return options
