"""Restoring tables from changelogs the tracker writes in transactions.

Two things happen here, in faust's recovery, before a worker reads any changelog of
the partitions it was given:

1. **It takes their transactional ids** (``fencing``): from then on the worker that
   had them can commit nothing more for them, and what it left open is aborted. Done
   before the changelog's end is read, so no batch of the previous holder can become
   visible after this worker's restore has passed it.
2. **It finds where each changelog really ends.**

faust takes a changelog partition as restored once it has applied the record at the
partition's end offset minus one. Written in transactions, a partition
ends with a commit marker, a control record no consumer is ever handed, so that record
never comes and the restore would never end (faust looks past markers only under its
own exactly-once mode, and then only after two idle 5 s polls, and by the fetch
position, which runs ahead of the records it has applied).

So the target is made exact instead: the offset of the last committed record of each
partition, found by reading the partition's tail with a ``read_committed`` consumer
(aborted records and markers are never returned; only the end is read, widening the
window when the tail holds nothing committed). A worker restarting with current
tables has already applied that record, and restores nothing.

3. **It restores up to there, in bulk** (``bulk_restore``): far faster than faust's
   record-at-a-time path, which then finds every partition current.

One exception: a RocksDB ahead of its changelog's committed end (``restore_target``).
The tracker stores a write only once its transaction committed, so a persisted offset
past the last committed record means the commit markers of a transaction the
coordinator decided never reached the partition. A broker restarted after a SIGKILL
can drop them (its coordinator completes the transactions it finds before it knows the
partitions' leaders: "Couldn't find leader endpoint ... likely deleted"); the
partition then holds an open transaction until its transactional id commits there
again. faust would refuse such a store for good (``ConsistencyError``, "persisted
offset higher than highwater"), and the restarted tracker, the only one to write there
again, would crash in a loop. The store is kept instead: it holds exactly what was
committed, and its next commit to the partition closes the open transaction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from faust.tables.recovery import Recovery

from sagalog.errors import ServiceUnavailableError
from sagalog.services.tracker import faust_internals
from sagalog.services.tracker.bulk_restore import ChangelogLoader, Span

Position = tuple[str, int]

#: Records read back from each partition's end before the window widens (x8 each time).
FIRST_WINDOW = 64
#: Longest a tail read may take in all.
TIMEOUT_S = 30.0


def restore_target(persisted: int | None, last_committed: int, log_end: int) -> int:
    """The offset a changelog partition is restored up to.

    Args:
        persisted: the last offset the local RocksDB holds (faust's persisted offset),
            or ``None`` for none.
        last_committed: the partition's last record a ``read_committed`` reader sees.
        log_end: the partition's end offset for any reader (open transactions included).

    Normally the last committed record. A store past it but inside the log holds
    records whose transaction committed and whose markers are missing (module
    docstring): it is kept, so its own offset is the target and nothing is read. A
    store past the log's end is not that: the changelog lost records (recreated or
    truncated), and the committed end stands, for faust's consistency check to refuse.
    """
    if persisted is None or persisted <= last_committed or persisted >= log_end:
        return last_committed
    return persisted


class TailReader:
    """Finds the last committed record of changelog partitions (blocking; run in a thread)."""

    def __init__(self, config: Mapping[str, Any], *, clock: Callable[[], float]) -> None:
        """Args:
        config: librdkafka consumer configuration (bootstrap, security, a ``group.id``
            the tracker may DESCRIBE); the group is never joined, nothing committed.
        """
        self.config = {
            **config,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
        self.clock = clock

    def last_committed(self, ends: Mapping[Position, int]) -> dict[Position, int]:
        """For each partition and its ``read_committed`` end offset, the offset of its
        last committed record below it (-1: none).

        Raises:
            ServiceUnavailableError: Kafka did not answer within ``TIMEOUT_S``.
        """
        consumer = Consumer(self.config)
        try:
            return self._read(consumer, dict(ends))
        finally:
            consumer.close()

    def log_ends(self, positions: list[Position]) -> dict[Position, int]:
        """Each partition's end offset including open transactions (the high watermark,
        which a ``read_committed`` consumer is not told).

        Raises:
            ServiceUnavailableError: Kafka did not answer within ``TIMEOUT_S``.
        """
        consumer = Consumer({**self.config, "isolation.level": "read_uncommitted"})
        try:
            return {
                key: consumer.get_watermark_offsets(TopicPartition(*key), timeout=TIMEOUT_S)[1]
                for key in positions
            }
        except KafkaException as exc:
            raise ServiceUnavailableError(
                f"the tracker's changelog ends {sorted(positions)} were not read: {exc}"
            ) from exc
        finally:
            consumer.close()

    def _read(self, consumer: Any, ends: dict[Position, int]) -> dict[Position, int]:
        found: dict[Position, int] = {}
        lows = {
            key: consumer.get_watermark_offsets(TopicPartition(*key), timeout=TIMEOUT_S)[0]
            for key, end in ends.items()
            if end > 0
        }
        pending = {key: end for key, end in ends.items() if key in lows and end > lows[key]}
        found.update({key: -1 for key in ends if key not in pending})
        window = FIRST_WINDOW
        deadline = self.clock() + TIMEOUT_S
        while pending:
            starts = {key: max(lows[key], end - window) for key, end in pending.items()}
            last = self._scan(consumer, starts, pending, deadline)
            for key in list(pending):
                if key in last or starts[key] == lows[key]:
                    found[key] = last.get(key, -1)
                    del pending[key]
            window *= 8
        return found

    def _scan(
        self,
        consumer: Any,
        starts: dict[Position, int],
        ends: dict[Position, int],
        deadline: float,
    ) -> dict[Position, int]:
        """The last record offset below each end, reading from ``starts``."""
        consumer.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in starts])
        last: dict[Position, int] = {}
        open_ = set(starts)
        while open_:
            if self.clock() > deadline:
                raise ServiceUnavailableError(
                    f"the tracker's changelog tails {sorted(open_)} were not read within "
                    f"{TIMEOUT_S:g}s; is Kafka reachable?"
                )
            message = consumer.poll(0.5)
            if message is None:
                continue
            key = (message.topic(), message.partition())
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    open_.discard(key)
                    continue
                raise ServiceUnavailableError(f"reading the changelog tail of {key}: {error}")
            if message.offset() < ends.get(key, 0):
                last[key] = max(last.get(key, -1), message.offset())
            if message.offset() + 1 >= ends.get(key, 0):
                open_.discard(key)
        consumer.unassign()
        return last


class CommittedRecovery(Recovery):
    """faust's ``Recovery``: fences the previous holders of the active partitions, then
    restores up to each changelog partition's last committed record.

    Args:
        tails: finds the last committed records.
        loader: restores changelog partitions in bulk.
        take: takes the transactional ids of the given partitions (``fencing``).
    """

    def __init__(
        self,
        *args: Any,
        tails: TailReader,
        loader: ChangelogLoader,
        take: Callable[[set[int]], Awaitable[None]],
        **kwargs: Any,
    ) -> None:
        self.tails = tails
        self.loader = loader
        self.take = take
        super().__init__(*args, **kwargs)

    async def _build_highwaters(
        self, consumer: Any, tps: Any, destination: Any, title: str
    ) -> None:
        if title == "active":
            await self.take({tp.partition for tp in tps})
        await super()._build_highwaters(consumer, tps, destination, title)
        # faust's highwater is the read_committed end minus one.
        ends = {(tp.topic, tp.partition): destination[tp] + 1 for tp in tps if tp in destination}
        last = await asyncio.to_thread(self.tails.last_committed, ends)
        persisted = self.active_offsets if title == "active" else self.standby_offsets
        ahead = [
            key
            for tp in destination
            if (key := (tp.topic, tp.partition)) in last
            and (mine := persisted.get(tp)) is not None  # faust: None for nothing persisted
            and mine > last[key]
        ]
        log_ends = await asyncio.to_thread(self.tails.log_ends, ahead) if ahead else {}
        for tp in list(destination):
            key = (tp.topic, tp.partition)
            if key not in last:
                continue
            target = last[key]
            if key in log_ends:
                target = restore_target(persisted.get(tp), last[key], log_ends[key])
                if target != last[key]:
                    self.log.warning(
                        "%s: the local store holds up to offset %d, past the last "
                        "committed record %d (log end %d): a committed transaction's "
                        "markers are missing there (a broker restart can drop them); "
                        "keeping the store, the partition's next commit closes it",
                        tp,
                        target,
                        last[key],
                        log_ends[key],
                    )
            destination[tp] = target
        if title == "active":  # standbys: faust keeps reading them record by record
            await self._load(destination, self.active_offsets)

    async def _load(self, highwaters: Any, offsets: Any) -> None:
        """Restore each active partition up to its highwater in bulk, and tell faust
        where its RocksDB is now (``offsets``: faust's persisted offsets, read at the
        assignment)."""
        spans = []
        for tp, last in highwaters.items():
            persisted = offsets.get(tp)
            table = self.tp_to_table.get(tp)
            if table is None:
                continue
            spans.append(
                Span(
                    topic=tp.topic,
                    partition=tp.partition,
                    first=0 if persisted is None else persisted + 1,
                    last=last,
                    db=faust_internals.db_for_write(table, tp.partition),
                    offset_key=faust_internals.offset_key(table),
                )
            )
        started = time.monotonic()
        applied = await asyncio.to_thread(self.loader.load, spans)
        for tp in list(highwaters):
            offset = applied.get((tp.topic, tp.partition))
            if offset is not None:
                offsets[tp] = offset
        if applied:
            records = sum(s.last - s.first + 1 for s in spans if s.position in applied)
            self.log.info(
                "restored %d changelog partitions in bulk (offsets %d wide) in %.2f s",
                len(applied),
                records,
                time.monotonic() - started,
            )

    async def on_recovery_completed(self, generation_id: int = 0) -> None:
        """Seek the stream partitions to their committed offsets, then let records flow.

        faust does it the other way round: it resumes the stream partitions, then seeks,
        while its flow is already running (the restore resumed it for the changelogs).
        Records fetched in between from the old position reach the stream and move
        faust's read offset past themselves, so the copies the seek fetches again are
        dropped as already read ("DROPPED MESSAGE ROFF"), while the tracker's offsets go
        on from the later records. A worker taking over a paused one started a
        partition 59 records past its committed offset that way, and the workflows
        whose events those were waited forever. Here the seek comes first, while the
        stream partitions are still paused, and they resume only after it.

        (faust's ``_resume_streams`` has the same order, but it runs only for an app
        without tables, which the tracker never is.)
        """
        app = self.app
        consumer = app.consumer
        self.log.info("Restore complete!")
        await app.on_rebalance_complete.send()
        self._set_recovery_ended()
        # the tables' own completion callbacks (the tracker's "tables ready")
        await asyncio.gather(
            *(
                table.on_recovery_completed(
                    self.actives_for_table[table], self.standbys_for_table[table]
                )
                for table in self.tables.values()
            )
        )
        if app.consumer_generation_id != generation_id:
            self.log.warning("Recovery rebalancing again")
            return
        streams = {tp for tp in consumer.assignment() if not self._is_changelog_tp(tp)}
        if streams:
            self.log.info("Seek stream partitions to committed offsets.")
            await self._wait(consumer.perform_seek(), timeout=app.conf.broker_request_timeout)
        if app.consumer_generation_id != generation_id:
            # A worker frozen during the seek wakes in the next rebalance: resuming now
            # would let that generation's records flow before its partitions' ids were
            # taken (its own recovery resumes them).
            self.log.warning("Recovery rebalancing again")
            return
        self.completed.set()
        app.flow_control.resume()
        consumer.resume_flow()
        consumer.resume_partitions(streams)
        await cast(Any, app)._fetcher.maybe_start()
        self.tables.on_actives_ready()
        if not app.assignor.assigned_standbys():
            self.tables.on_standbys_ready()
        app.on_rebalance_end()
        self.log.info("Worker ready")
