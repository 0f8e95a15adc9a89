"""The faust application: one agent over the workflow topics and the clock topic.

Shape (see DESIGN.md, "Tracker"):

- **One agent, ``concurrency=1``**, reads every workflow topic of the loaded flows
  and the tracker's clock topic ``<app id>-clock``, all with the same partition
  count, so faust's assignor gives one worker partition *p* of all of them together
  with partition *p* of each table: a workflow's events, its record, its timers and
  the ticks that fire them are all handled by one coroutine, never concurrently.
- **Batches**: ``take_events`` hands over up to ``batch_max`` records; the processor
  decides them all, publishes, waits for the acks once, then stores (see
  ``processor``). Only then are its offsets finished; the tracker commits them
  itself every ``commit_interval_s`` (``offsets``: faust's ack and gap tracking
  cost a fifth of the CPU on transactional input).
- **Ticks**: a wall-clock worker produces a tick every ``tick_interval_s`` to each
  clock partition it owns; a tick makes the agent fire the due timers of that
  partition (a bounded range scan). In virtual mode the ticks come from outside.
- **Tables**: ``records``, ``timers``, ``parked``, ``admission``: RocksDB through
  rocksdict, each with its changelog topic, ``partitions`` = the workflow topics'.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections import Counter
from typing import Any, NoReturn

import faust
from confluent_kafka import KafkaException
from faust.types import TP

from saga_tracker import faust_internals
from saga_tracker.backlog import BacklogProbe
from saga_tracker.batching import drained_batches
from saga_tracker.clock import TrackerClock
from saga_tracker.exits import exit_for
from saga_tracker.lag import LagWatch
from saga_tracker.offsets import OffsetBook
from saga_tracker.settings import TrackerSettings
from saga_tracker.sink import KafkaSink
from saga_tracker.stall import Suspect, judge, unread, waiting_its_turn
from saga_tracker.store import FaustTables, Table, build_tables
from saga_tracker.transport import TrackerApp
from sagalog import client_config
from sagalog.cluster import profile_config
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.hash_chain import content_hash
from sagalog.errors import ServiceUnavailableError
from sagalog.flows.registry import FlowRegistry
from sagalog.health import HealthBook, logged_changes
from sagalog.memory import release_free_memory
from sagalog.rocksdb_options import MB, MemoryBudget
from sagalog.tracker import CompensationRetry
from sagalog.tracker.decoding import OwnEcho, Unreadable, read_event
from sagalog.tracker.processor import Processor
from sagalog.tracker.record import SealedEvent
from sagalog.tracker.sla_monitor import SlaMonitor
from sagalog.tracker.ticks import clock_topic, parse_tick
from sagalog.tracker.timers import due_range

log = logging.getLogger("sagalog.tracker")


TRIM_AFTER = 10_000  # inputs decided since the last heap trim
# A fetch per partition: ~8,000 of the workflow topic's lz4-compressed records, a few
# seconds of deciding, so the next fetch is always back before the queue runs dry.
FETCH_BYTES_PER_PARTITION = 256 * 1024


class Tracker:
    """The running tracker: faust app, tables, processor, clock and counters."""

    def __init__(
        self,
        settings: TrackerSettings,
        *,
        registry: FlowRegistry,
        codec: EventCodec,
        partitions: int,
        clock: TrackerClock,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.codec = codec
        self.partitions = partitions
        self.clock = clock
        self.clock_topic = clock_topic(settings.app_id)
        self.workflow_topics = sorted({flow.topic for flow in registry})
        self.sink = KafkaSink(settings, codec=codec)
        self.sla = SlaMonitor(registry)
        self.processor = Processor(
            registry=registry,
            secret=settings.gate_secret.get_secret_value().encode(),
            partitions=partitions,
            sink=self.sink,
            admission=settings.admission,
            retry=CompensationRetry(
                max_attempts=settings.compensation_attempts,
                max_wait_ms=int(settings.compensation_max_wait_s * 1000),
            ),
            on_transition=self.sla.observe,
        )
        self.counts: Counter[str] = Counter()
        self.pending_ticks: set[int] = set()
        self.last_sla_ms = 0
        self.ready = False
        self.backlog = BacklogProbe(settings)
        self.health = HealthBook(on_change=logged_changes(log, agent="saga-tracker"))
        self.suspects: dict[tuple[str, int], Suspect] = {}
        self.watched_generation = -1
        self.inputs_at_trim = 0
        self.batches_at_watch = 0
        self.offsets = OffsetBook()
        self.lag = LagWatch()
        self.queue_capacity = max(4096, settings.batch_max * 2)
        self.rocksdb_budget = MemoryBudget(
            cache_mb=settings.rocksdb_cache_mb, memtables_mb=settings.rocksdb_memtables_mb
        )
        self.app = self._build_app()

    # -- faust wiring ------------------------------------------------------------

    def _build_app(self) -> faust.App:
        settings = self.settings
        app = TrackerApp(
            settings.app_id,
            fetch_max_wait_ms=settings.fetch_max_wait_ms,
            broker=client_config.faust_broker(settings),
            broker_credentials=client_config.faust_credentials(settings),
            # faust creates its changelogs and assignor topic itself, with its default
            # of one replica whatever the cluster: a lost disk would lose tracker state.
            topic_replication_factor=settings.replication_factor,
            store="rocksdb://",
            datadir=str(settings.data_dir),
            web_enabled=False,
            topic_partitions=self.partitions,
            table_standby_replicas=settings.standby_replicas,
            broker_commit_interval=settings.commit_interval_s,
            broker_commit_every=10_000,
            broker_session_timeout=settings.session_timeout_s,
            broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 3),
            consumer_auto_offset_reset="earliest",
            producer_acks=-1,
            producer_compression_type="lz4",
            stream_buffer_maxsize=self.queue_capacity,
            # What the consumer holds ahead of the stream. faust's defaults take every
            # record of a fetch at once (no poll limit) and fetch 1 MiB per partition,
            # which, compressed, is ~33,000 records: behind a backlog the tracker held
            # 98,000 decoded records (140 MB) on three partitions, and the memory
            # stayed with the process after the backlog was done.
            broker_max_poll_records=settings.batch_max,
            consumer_max_fetch_size=FETCH_BYTES_PER_PARTITION,
            logging_config=None,
        )
        raw: dict[str, Any] = {
            "key_type": bytes,
            "value_type": bytes,
            "key_serializer": "raw",
            "value_serializer": "raw",
        }
        # acks off: the tracker commits the offsets it finished itself (see offsets.py).
        source = app.topic(*self.workflow_topics, self.clock_topic, acks=False, **raw)
        self.tables = build_tables(
            app,
            partitions=self.partitions,
            budget=self.rocksdb_budget,
            topic_configs=profile_config(settings),
        )
        self.store = FaustTables(self.tables, self.sink)
        started = time.monotonic()

        async def recovered() -> None:
            release_free_memory()  # the restore's peak is not what a waiting tracker needs
            self.ready = True
            log.info(
                "tables ready after %.2f s (restore from the changelogs included)",
                time.monotonic() - started,
                extra={
                    "sagalog": {
                        "agent": "saga-tracker",
                        "action": "tables_ready",
                        "duration_ms": int((time.monotonic() - started) * 1000),
                    }
                },
            )

        self.tables[Table.RECORDS].on_recover(recovered)

        async def assigned(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
            assigned = args[0] if args else kwargs.get("assigned", ())
            mine = sorted(tp.partition for tp in assigned if tp.topic == self.clock_topic)
            log.info(
                "partitions assigned: %s",
                mine,
                extra={"sagalog": {"agent": "saga-tracker", "action": "assigned"}},
            )

        app.on_partitions_assigned.connect(assigned)

        async def revoked(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
            await self._commit_offsets()  # the next owner starts where this one finished

        app.on_partitions_revoked.connect(revoked)

        async def track(stream: Any) -> None:
            batches = drained_batches(
                stream.events(), settings.batch_max, generation=lambda: app.consumer_generation_id
            )
            async for events in batches:
                try:
                    await self.run_batch(events)
                except Exception as exc:
                    crash("a batch failed", exc)

        app.agent(source, name=f"{settings.app_id}.track", concurrency=1)(track)
        if not self.clock.virtual:
            app.timer(settings.tick_interval_s)(self._tick_own_partitions)
        app.timer(settings.commit_interval_s)(self._commit_offsets)
        app.timer(30.0)(self._report)
        app.timer(5.0)(self._watch)
        return app

    # -- a batch -------------------------------------------------------------------

    async def run_batch(self, events: Any) -> None:
        batch = self.processor.begin(self.store)
        for event in events:
            message = event.message
            if message.topic == self.clock_topic:
                self.clock.observe(parse_tick(message.value) or 0)
                self.pending_ticks.add(message.partition)
                continue
            read = read_event(self.codec, message.key, message.value, message.headers)
            if isinstance(read, OwnEcho):
                self.counts["own_echo"] += 1
                self.processor.seal(
                    batch, message.partition, read.workflow_id, _sealed(message, read.event_id)
                )
            elif isinstance(read, Unreadable):
                self.counts["dead_lettered"] += 1
                self.sink.dead_letter(
                    topic=message.topic,
                    partition=message.partition,
                    offset=message.offset,
                    key=message.key,
                    value=message.value,
                    headers=list(_header_pairs(message.headers)),
                    reason=read.reason,
                    error_class=read.error_class,
                    now_ms=self.clock.now_ms(),
                )
            else:
                self.processor.handle(
                    batch,
                    message.partition,
                    read,
                    now_ms=self.clock.now_ms(),
                    topic=message.topic,
                    sealed=_sealed(message, read.event_id),
                )
        if self.pending_ticks:
            await self._fire_timers(batch)
        await self.processor.commit(batch)
        self.offsets.finish(event.message for event in events)
        self._observe_lag(events)
        self.counts["batches"] += 1
        self.counts["inputs"] += batch.inputs

    def _observe_lag(self, events: Any) -> None:
        now = time.time()
        for event in events:
            message = event.message
            if message.topic != self.clock_topic:
                self.lag.observe(
                    (message.topic, message.partition), message.offset, now - message.timestamp
                )
        for (topic, partition), waited, offset in self.lag.due(time.monotonic()):
            log.warning(
                "%s/%d: a record (offset %d) waited %.1f s in the log before it was decided",
                topic,
                partition,
                offset,
                waited,
                extra={"sagalog": {"agent": "saga-tracker", "action": "input_lag"}},
            )

    async def _fire_timers(self, batch: Any) -> None:
        now_ms = self.clock.now_ms()
        again = set()
        for partition in sorted(self.pending_ticks):
            if not await self._caught_up(partition):
                again.add(partition)  # its events come first; the next batch retries
                continue
            fired = self.processor.fire_due(
                batch, partition, now_ms=now_ms, limit=self.settings.timers_per_tick
            )
            if fired >= self.settings.timers_per_tick:
                again.add(partition)
        self.pending_ticks = set()
        if now_ms - self.last_sla_ms >= self.settings.sla_interval_s * 1000:
            self.last_sla_ms = now_ms
            for alert in self.sla.evaluate(now_ms):
                self.sink.sla_alert(alert, now_ms=now_ms)
        if again:
            # Nothing else may arrive to retry them (an idle virtual clock): tick again.
            asyncio.get_running_loop().call_later(0.2, self._tick, sorted(again))

    async def _caught_up(self, partition: int) -> bool:
        """Whether every workflow topic's ``partition`` was fetched up to its high watermark.

        Timers fire only then: after a restart with a backlog, a step's completion
        still waiting in the log must not lose the race against its own timeout.
        """
        consumer = self.app.consumer
        for topic in self.workflow_topics:
            tp = TP(topic, partition)
            try:
                high = consumer.highwater(tp)
                position = await consumer.position(tp)
            except Exception:
                continue
            if high is not None and position is not None and position < high:
                return False
        return True

    def _tick(self, partitions: list[int]) -> None:
        for partition in partitions:
            self.sink.tick(self.clock_topic, partition, self.clock.now_ms())

    async def _tick_own_partitions(self) -> None:
        """Tick the owned partitions that have a timer due, and all of them when SLA
        rules are due for evaluation: an idle tracker sends nothing.

        The first key of a partition's timer table is its earliest timer (keys start
        with the due time), so "is anything due?" is one RocksDB seek, not a Kafka
        round trip.
        """
        now_ms = self.clock.now_ms()
        sla_due = now_ms - self.last_sla_ms >= self.settings.sla_interval_s * 1000
        lower, upper = due_range(now_ms)
        due = [
            tp.partition
            for tp in self.app.assignor.assigned_actives()
            if tp.topic == self.clock_topic
            and (
                sla_due
                or self.store.scan(Table.TIMERS, tp.partition, lower.encode(), upper.encode(), 1)
            )
        ]
        self._tick(due)

    async def _watch(self) -> None:
        """Exit (70) when a partition has records waiting and nothing of it was
        committed for ``stall_timeout_s`` (see ``stall``).

        faust can come out of a rebalance with its tables ready and its partitions
        assigned, yet deliver nothing (faust issues 175 and 640 describe the like),
        and after a broker restart it once left one partition unread for minutes
        while the others flowed. A fresh process recovers; a tracker that silently
        stops is the worst failure, so this worker hands over instead.
        """
        if self.ready and not self.health.started:
            try:
                faust_internals.check_instances(self.app)
            except Exception as exc:
                crash("faust's running consumer lacks what the tracker needs", exc)
            self.health.ready()
        generation = self.app.consumer_generation_id
        batches = self.counts["batches"]
        progressed, self.batches_at_watch = batches != self.batches_at_watch, batches
        busy = waiting_its_turn(
            queued=faust_internals.queued(self.app, self.clock_topic),
            capacity=self.queue_capacity,
            progressed=progressed,
        )
        if not self.ready or self.app.rebalancing or generation != self.watched_generation or busy:
            # Offsets stand still across a rebalance (commits fail while it runs), and
            # records wait their turn behind a backlog: suspicion starts again after.
            self.suspects = {}
            self.watched_generation = generation
            return
        mine = [
            (tp.topic, tp.partition)
            for tp in self.app.assignor.assigned_actives()
            if tp.topic in self.workflow_topics or tp.topic == self.clock_topic
        ]
        try:
            behind = await asyncio.to_thread(self.backlog.behind, mine)
            self.suspects, candidates = judge(
                self.suspects,
                behind,
                now=time.monotonic(),
                after_s=self.settings.stall_timeout_s,
            )
            spans = {key: behind[key] for key in candidates}
            stalled = await asyncio.to_thread(self.backlog.readable, spans) if spans else set()
        except (ServiceUnavailableError, KafkaException) as exc:
            # The broker is away: nothing can be delivered anyway, and the watch runs
            # again in 5 s (that is its retry). Suspicion starts again once it is back,
            # or every partition would count the outage as its own stall and exit.
            self.suspects = {}
            self.health.degrade("kafka", str(exc))
            log.warning(
                "stall check skipped, the broker did not answer: %s",
                exc,
                extra={"sagalog": {"agent": "saga-tracker", "action": "outage"}},
            )
            return
        down_s = self.health.recover("kafka")
        if down_s is not None:
            log.info(
                "the broker answers again after %.1f s; the stall check resumes",
                down_s,
                extra={
                    "sagalog": {
                        "agent": "saga-tracker",
                        "action": "recovered",
                        "duration_ms": int(down_s * 1000),
                    }
                },
            )
        if not behind and self.counts["inputs"] - self.inputs_at_trim >= TRIM_AFTER:
            # Caught up after a burst (a backlog decided, a flood of starts): the heap's
            # peak is not what a waiting tracker needs, as after a restore.
            self.inputs_at_trim = self.counts["inputs"]
            release_free_memory()
            budget = self.rocksdb_budget
            log.info(
                "heap trimmed after %d inputs; RocksDB memtables %.1f MB of %d, cache %.1f MB "
                "of %d",
                self.counts["inputs"],
                budget.memtables_bytes() / MB,
                budget.memtables_mb,
                budget.cache_bytes() / MB,
                budget.cache_mb,
                extra={"sagalog": {"agent": "saga-tracker", "action": "memory"}},
            )
        if stalled:
            stalled = await self._commit_again(stalled, behind)
        if stalled:
            (topic, partition), (start, end) = max(
                ((key, behind[key]) for key in stalled), key=lambda item: item[1][1] - item[1][0]
            )
            log.error(
                "stalled partitions, as faust and aiokafka see them: %s",
                json.dumps(faust_internals.describe(self.app, stalled), default=str),
            )
            log.error(
                "offsets: finished %s, committed %s, faust committed %s",
                {str(tp): o for tp, o in self.offsets.finished.items()},
                {str(tp): o for tp, o in self.offsets.committed.items()},
                {
                    str(tp): o
                    for tp, o in faust_internals.committed_offsets(self.app.consumer).items()
                },
            )
            crash(
                f"{topic}/{partition} has {end - start} committed record(s) past the group's "
                f"offset {start}, which has not moved for {self.settings.stall_timeout_s:g}s "
                f"({len(stalled)} partition(s) stalled)"
            )

    async def _commit_again(
        self, stalled: set[tuple[str, int]], behind: dict[tuple[str, int], tuple[int, int]]
    ) -> set[tuple[str, int]]:
        """Commit again what was decided past a group offset that stood still; return
        the partitions that are not read at all (see ``stall.unread``)."""
        tps = {(tp.topic, tp.partition): tp for tp in self.offsets.finished}
        finished = {key: self.offsets.finished[tp] for key, tp in tps.items()}
        not_read, recommit = unread(sorted(stalled), behind, finished)
        if recommit:
            log.warning(
                "decided past the group's offset, but the commit did not land; committing "
                "again: %s",
                {f"{t}/{p}": (behind[(t, p)][0], offset) for (t, p), offset in recommit.items()},
                extra={"sagalog": {"agent": "saga-tracker", "action": "recommit"}},
            )
            offsets = {tps[key]: offset for key, offset in recommit.items()}
            if await faust_internals.commit_offsets(self.app.consumer, offsets):
                self.offsets.mark_committed(offsets)
            for key in recommit:
                self.suspects.pop(key, None)
        return set(not_read)

    async def _commit_offsets(self) -> None:
        consumer = self.app.consumer
        due = self.offsets.due(consumer.assignment())
        if due and await faust_internals.commit_offsets(consumer, due):
            self.offsets.mark_committed(due)

    async def _report(self) -> None:
        outcomes = {str(k): v for k, v in self.processor.outcomes.items()}
        log.info(
            "tracker stats: %s; outcomes %s; timers fired %d; published %d; health %s",
            dict(self.counts),
            outcomes,
            self.processor.fired,
            self.sink.sent,
            self.health.describe(),
            extra={"sagalog": {"agent": "saga-tracker", "action": "stats"}},
        )


def crash(why: str, error: BaseException | None = None) -> NoReturn:
    """Exit at once, storing and committing nothing more: the batch will be consumed again.

    faust would restart a crashed agent inside the process, past the records it had
    taken, so they would wait for the next rebalance. Exiting (code 70) hands them
    to a restarted or surviving worker now; the order of writes makes that safe. A
    right the cluster denies exits 6 instead, since no restart gets past it
    (``exits.exit_for`` decides).
    """
    decision = exit_for(why, error)
    log.critical(
        "%s",
        decision.message,
        exc_info=True,
        extra={
            "sagalog": {
                "agent": "saga-tracker",
                "action": "exit",
                "outcome": f"exit {decision.code}",
            }
        },
    )
    logging.shutdown()
    os._exit(decision.code)


def _sealed(message: Any, event_id: str) -> SealedEvent:
    """Where a consumed record lies and the hash of its content, to seal into its record.

    Built without validation (once per event on the hot path): the fields come
    typed from the consumer and the hash function.
    """
    return SealedEvent.model_construct(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        event_id=event_id,
        hash=content_hash(message.key, message.value, message.headers),
    )


def _header_pairs(headers: Any) -> Any:
    if not headers:
        return []
    return headers.items() if isinstance(headers, dict) else headers
