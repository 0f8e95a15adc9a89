"""What a tracker worker shows Prometheus, read from its own state at each scrape.

Counts come from the tracker's tally of committed batches (``tally``: transitions,
decisions by outcome, dead letters) and its transactions; the lag of each input
partition is the high watermark its consumer last saw minus the offset after the
last record the tracker finished; RocksDB sizes are what its table directories take
on disk. Read on the HTTP server's thread, so each reader copies what it iterates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sagalog import metrics
from sagalog.services.tracker.tally import Tally
from sagalog.tracker.memo import CommittedMemo

SERVICE = "saga-tracker"


def export(
    *,
    tally: Tally,
    ended: Mapping[str, int],
    finished: Mapping[Any, int],
    highwater: Callable[[Any], int | None],
    tables_dir: Path,
    memo: CommittedMemo,
    woke_early: Callable[[], int],
) -> Callable[[], None]:
    """Serve the worker's figures to Prometheus until the returned undo is called.

    Args:
        ended: transactions by outcome (``PartitionTransactions.ended``).
        finished: per input partition, the offset after the last finished record.
        highwater: an input partition's high watermark as the consumer last saw it.
        memo: the processor's memory of committed records (its hits and misses).
        woke_early: the processor's count of wake-ups that found nothing due.
    """

    def transitions() -> metrics.Samples:
        return [(key, n) for key, n in dict(tally.transitions).items()]

    def lag() -> metrics.Samples:
        out = []
        for tp, offset in dict(finished).items():
            try:
                end = highwater(tp)
            except Exception:  # revoked since: aiokafka knows no watermark for it
                continue
            if end is not None and end >= 0:
                out.append(((SERVICE, tp.topic, str(tp.partition)), max(0, end - offset)))
        return out

    undo = [
        metrics.read(metrics.TRANSITIONS, transitions),
        metrics.read(metrics.DEAD_LETTERS, lambda: [((SERVICE,), tally.dead_lettered)]),
        metrics.read(
            metrics.TRACKER_DECISIONS,
            lambda: [((str(outcome),), n) for outcome, n in dict(tally.decisions).items()],
        ),
        metrics.read(
            metrics.TRANSACTIONS,
            lambda: [((SERVICE, outcome), n) for outcome, n in dict(ended).items()],
        ),
        metrics.read(
            metrics.TRACKER_RECORD_READS,
            lambda: [(("memory",), memo.hits), (("tables",), memo.misses)],
        ),
        metrics.read(metrics.TRACKER_EARLY_WAKEUPS, lambda: [((), woke_early())]),
        metrics.read(metrics.CONSUMER_LAG, lag),
        metrics.read(metrics.ROCKSDB_SIZE, lambda: table_sizes(tables_dir)),
    ]

    def stop() -> None:
        for remove in undo:
            remove()

    return stop


def table_sizes(tables_dir: Path) -> metrics.Samples:
    """Bytes on disk per table: faust keeps each table partition in ``<table>-<p>.db``."""
    sizes: dict[str, int] = {}
    if not tables_dir.is_dir():
        return []
    for db in tables_dir.glob("*.db"):
        table = db.name[: -len(".db")].rsplit("-", 1)[0]
        total = 0
        for path in db.rglob("*"):
            try:
                total += path.stat().st_size if path.is_file() else 0
            except FileNotFoundError:  # compaction removed it while we walked
                continue
        sizes[table] = sizes.get(table, 0) + total
    return [((SERVICE, table), size) for table, size in sorted(sizes.items())]
