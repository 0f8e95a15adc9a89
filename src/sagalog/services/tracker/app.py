"""The faust application: one agent over the workflow topics and the clock topic.

Shape (see DESIGN.md, "Tracker"):

- **One agent, ``concurrency=1``**, subscribes to every workflow topic of the loaded
  flows and the tracker's clock topic ``<app id>-clock``, all with the same partition
  count, so faust's assignor gives one worker partition *p* of all of them together
  with partition *p* of each table: a workflow's events, its record, its timers and
  the ticks that fire them are all handled by one coroutine, never concurrently.
  faust reads only the ticks: the workflow partitions are read by librdkafka
  (``log_input``), from the moment faust's recovery of their tables is complete.
- **Batches**: ``drained_batches`` hands over up to ``batch_max`` records; the processor
  decides them all; each partition's outputs and changelog records go out in that
  partition's transaction, so a worker paused through a rebalance is fenced
  (``fencing``); once they committed, the writes are stored in RocksDB (``store``).
  Only then are its offsets finished; the tracker commits them itself every
  ``commit_interval_s`` (``offsets``: faust's ack and gap tracking cost a fifth of
  the CPU on transactional input).
- **Ticks**: a wall-clock worker produces a tick every ``tick_interval_s`` to each
  clock partition it owns; a tick makes the agent fire the due timers of that
  partition (a bounded range scan). In virtual mode the ticks come from outside.
- **Tables**: ``records``, ``timers``, ``parked``, ``admission``: RocksDB through
  rocksdict, each with its changelog topic, ``partitions`` = the workflow topics',
  restored up to each changelog's last committed record, after the partitions'
  transactional ids were taken (``restore``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import faust
from faust.types import TP

from sagalog import client_config
from sagalog.cluster import profile_config
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.hash_chain import content_hash
from sagalog.errors import ServiceUnavailableError
from sagalog.events import StateTransition
from sagalog.flows.registry import FlowRegistry
from sagalog.health import HealthBook, logged_changes
from sagalog.memory import release_free_memory, tune_collector
from sagalog.metrics import TRACKER_BATCH_RECORDS, TRACKER_BATCH_SECONDS
from sagalog.rocksdb_options import MemoryBudget
from sagalog.services.tracker import exported_metrics, faust_internals
from sagalog.services.tracker.backlog import BacklogProbe
from sagalog.services.tracker.batching import drained_batches, of_generation
from sagalog.services.tracker.bulk_restore import ChangelogLoader
from sagalog.services.tracker.caught_up import unread
from sagalog.services.tracker.clock import TrackerClock
from sagalog.services.tracker.exits import crash
from sagalog.services.tracker.fencing import BatchAborted
from sagalog.services.tracker.handover import Turns
from sagalog.services.tracker.lag import LagWatch
from sagalog.services.tracker.log_input import LogInput
from sagalog.services.tracker.offsets import OffsetBook
from sagalog.services.tracker.restore import CommittedRecovery, TailReader
from sagalog.services.tracker.settings import TrackerSettings
from sagalog.services.tracker.sink import KafkaSink
from sagalog.services.tracker.store import FaustTables, Table, build_tables
from sagalog.services.tracker.tally import Tally
from sagalog.services.tracker.transport import TrackerApp
from sagalog.services.tracker.watchdog import Watchdog
from sagalog.tracker import CompensationRetry
from sagalog.tracker.decoding import Closer, OwnEcho, Unreadable, payload_types, read_event
from sagalog.tracker.processor import Processor
from sagalog.tracker.record import SealedEvent
from sagalog.tracker.sla_monitor import SlaMonitor
from sagalog.tracker.ticks import clock_topic, parse_tick
from sagalog.tracker.timers import due_range

log = logging.getLogger("sagalog.tracker")


# faust's fetch per partition (the clock's ticks, and standbys' changelogs): ~8,000
# lz4-compressed records, a few seconds of applying them.
FETCH_BYTES_PER_PARTITION = 256 * 1024

# How long faust's consumer lets the broker hold a fetch: it reads only the clock's
# ticks (a tick answers a waiting fetch at once) and standbys' changelogs, so an idle
# tracker need not ask ten times a second as when it read the workflow topics.
FAUST_FETCH_MAX_WAIT_MS = 500

# How often a batch whose transaction was aborted is decided again before the worker
# exits (70) and leaves it to the next one.
ABORTED_TRIES = 3


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
        self.needs_payload = payload_types(registry)
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
            on_transition=self._transitioned,
            records_kept=settings.records_kept,
        )
        self.tally = Tally(decided=self.processor.outcomes)
        self.counts: Counter[str] = Counter()
        self.pending_ticks: set[int] = set()
        self.to_close: dict[tuple[str, int], tuple[int, int]] = {}
        """Input partitions held open, with (stable, end): closed in the next batch
        (``sagalog.open_transactions``; the watchdog finds them)."""
        self.unknown_positions: dict[int, str] = {}  # partition -> the error last logged
        self.last_sla_ms = 0
        self.ready = False
        self.backlog = BacklogProbe(settings)
        self.health = HealthBook(on_change=logged_changes(log, agent="saga-tracker"))
        self.offsets = OffsetBook()
        self.turns = Turns()
        self.lag = LagWatch()
        self.unresumed: set[Any] = set()  # input partitions whose first batch is not logged
        self.queue_capacity = max(4096, settings.batch_max * 2)
        self.input = LogInput(
            settings,
            group=settings.app_id,
            client_id=f"{settings.app_id}-input",
            capacity=self.queue_capacity,
            fetch_max_wait_ms=settings.fetch_max_wait_ms,
        )
        self.input_generation: int | None = None  # the assignment the input may read
        self.rocksdb_budget = MemoryBudget(
            cache_mb=settings.rocksdb_cache_mb, memtables_mb=settings.rocksdb_memtables_mb
        )
        self.app = self._build_app()
        self.watchdog = Watchdog(self)

    # -- faust wiring ------------------------------------------------------------

    def _build_app(self) -> faust.App:
        settings = self.settings
        app = TrackerApp(
            settings.app_id,
            fetch_max_wait_ms=FAUST_FETCH_MAX_WAIT_MS,
            input_topics=frozenset(self.workflow_topics),
            on_ready=self._resume_input,
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
            # which, compressed, is tens of thousands of records: behind a backlog the
            # tracker would hold that many decoded records per partition, and the memory
            # stays with the process after the backlog is done
            # (docs/design/incident-history.md).
            broker_max_poll_records=settings.batch_max,
            consumer_max_fetch_size=FETCH_BYTES_PER_PARTITION,
            logging_config=None,
            before_stop=self.hand_over_before_stop,
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
        self.store = FaustTables(
            self.tables, self.sink, directory=settings.data_dir, health=self.health
        )
        # Never joined: both read by assignment, under the group the tracker's ACLs name.
        group = f"{settings.app_id}-changelog-tail"
        tails = TailReader(
            settings.kafka_config(**{"group.id": group, "client.id": group}),
            clock=time.monotonic,
        )
        loader = ChangelogLoader(
            settings.kafka_config(
                **{"group.id": group, "client.id": f"{settings.app_id}-changelog-restore"}
            ),
            clock=time.monotonic,
        )
        faust_internals.use_recovery(
            app,
            partial(
                CommittedRecovery, tails=tails, loader=loader, take=self.sink.transactions.take
            ),
        )
        started = time.monotonic()

        async def recovered() -> None:
            release_free_memory()  # the restore's peak is not what a waiting tracker needs
            tune_collector(settings.gc_young_threshold)
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
            await self.turns.release()  # faust has put the new assignment's tables in place
            self.processor.forget()  # another worker may have changed them meanwhile
            # The input reads this assignment once its tables are recovered (``_resume_input``).
            self.input_generation = app.consumer_generation_id
            assigned = args[0] if args else kwargs.get("assigned", ())
            changelogs = app.tables.changelog_topics
            self.unresumed = {
                tp for tp in assigned if tp.topic != self.clock_topic and tp.topic not in changelogs
            }
            mine = sorted(tp.partition for tp in assigned if tp.topic == self.clock_topic)
            log.info(
                "partitions assigned: %s",
                mine,
                extra={"sagalog": {"agent": "saga-tracker", "action": "assigned"}},
            )

        app.on_partitions_assigned.connect(assigned)

        async def revoked(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
            self.input_generation = None
            self.input.unassign()  # what it queued already is dropped by its generation
            await self.turns.hold()  # the batch in hand ends before faust lets its tables go
            self.processor.forget()
            await self._commit_offsets()  # the next owner starts where this one finished
            self.offsets.clear()
            # Whatever comes back is taken again, fencing whoever had it meanwhile.
            self.sink.transactions.release()

        app.on_partitions_revoked.connect(revoked)

        async def track(stream: Any) -> None:
            ticks = asyncio.create_task(self._forward_ticks(stream), name="tracker-ticks")
            batches = drained_batches(
                self.input.records(),
                settings.batch_max,
                linger_s=settings.batch_linger_s,
                interval_s=settings.batch_interval_s,
                generation=lambda: app.consumer_generation_id,
            )
            try:
                async for messages in batches:
                    async with self.turns.batch():
                        # A rebalance may have come between taking and deciding them.
                        current = of_generation(messages, app.consumer_generation_id)
                        try:
                            if current:
                                await self.decide(current)
                        except Exception as exc:
                            # Its open transactions are aborted by the next holder's init.
                            crash("a batch failed", exc)
            except Exception as exc:
                crash("the tracker's input failed", exc)
            finally:
                ticks.cancel()

        app.agent(source, name=f"{settings.app_id}.track", concurrency=1)(track)
        if not self.clock.virtual:
            app.timer(settings.tick_interval_s)(self._tick_own_partitions)
        app.timer(settings.commit_interval_s)(self._commit_offsets)
        app.timer(30.0)(self._report)
        app.timer(5.0)(self._watch)
        return app

    async def _forward_ticks(self, stream: Any) -> None:
        """The clock's ticks, read by faust, join the input's records for the batches.

        Only the clock topic reaches faust's stream: its consumer never fetches the
        workflow partitions (``transport``). Were one to come anyway, it is counted and
        left: the input reads it.
        """
        try:
            async for event in stream.events():
                message = event.message
                if message.topic == self.clock_topic:
                    self.input.add([message])
                else:
                    self.counts["input_through_faust"] += 1
        except Exception as exc:  # without ticks no timer would fire again: hand over
            crash("the clock's ticks failed", exc)

    def _resume_input(self) -> None:
        """Start reading the workflow partitions of the assignment faust just recovered,
        unless they were revoked since (a rebalance during the recovery)."""
        generation = self.app.consumer_generation_id
        if self.input_generation != generation:
            return
        mine = [
            tp for tp in self.app.assignor.assigned_actives() if tp.topic in self.workflow_topics
        ]
        self.input.assign(generation, mine)
        log.info(
            "reading %s from the committed offsets (generation %d)",
            ", ".join(f"{tp.topic}/{tp.partition}" for tp in mine) or "nothing",
            generation,
            extra={"sagalog": {"agent": "saga-tracker", "action": "input_assigned"}},
        )

    async def hand_over_before_stop(self) -> None:
        """Finish the batch in hand, commit and close the producers, before faust closes
        the tables (``handover``).

        A batch that does not finish within ``stop_timeout_s`` (Kafka unreachable, its
        acknowledgements not coming) is abandoned by exiting at once: nothing more is
        stored or committed, so the next worker decides it again.
        """
        try:
            await asyncio.wait_for(self.turns.hold(), self.settings.stop_timeout_s)
        except TimeoutError:
            timeout = self.settings.stop_timeout_s
            crash(f"the batch in hand did not finish within {timeout} s of the stop")
        await self._commit_offsets()
        self.input.stop()
        # No batch starts again: the partitions' producers go (nothing is left open),
        # and the ticks and SLA alerts still queued are delivered.
        await asyncio.to_thread(self.sink.close)

    # -- a batch -------------------------------------------------------------------

    async def decide(self, messages: list[Any]) -> None:
        """Run a batch; one whose transaction the broker aborted is decided again here.

        An abort stored nothing and published nothing visible (``fencing``), so the
        same events give the same decisions and event ids. Only a batch aborted
        ``ABORTED_TRIES`` times, or fenced (another worker holds the partition now),
        ends the process.
        """
        for attempt in range(1, ABORTED_TRIES + 1):
            try:
                await self.run_batch(messages)
                return
            except BatchAborted as exc:
                if attempt == ABORTED_TRIES:
                    raise
                log.warning(
                    "%s (attempt %d of %d)",
                    exc,
                    attempt,
                    ABORTED_TRIES,
                    extra={"sagalog": {"agent": "saga-tracker", "action": "batch_aborted"}},
                )
                await asyncio.sleep(0.5 * attempt)

    def _transitioned(self, workflow_id: str, transition: StateTransition) -> None:
        self.sla.observe(workflow_id, transition)
        self.tally.transitioned(workflow_id, transition)

    def export_metrics(self) -> Callable[[], None]:
        """Serve this worker's figures on ``/metrics`` (``exported_metrics``); the undo."""
        return exported_metrics.export(
            tally=self.tally,
            ended=self.sink.transactions.ended,
            finished=self.offsets.finished,
            highwater=lambda tp: self.input.position(tp)[1],
            tables_dir=Path(self.app.conf.tabledir),
            memo=self.processor.memo,
            woke_early=lambda: self.processor.woke_early,
        )

    async def run_batch(self, messages: list[Any]) -> None:
        started = time.perf_counter()
        self.tally.begin()
        batch = self.processor.begin(self.store)
        for message in messages:
            if message.topic == self.clock_topic:
                self.clock.observe(parse_tick(message.value) or 0)
                self.pending_ticks.add(message.partition)
                continue
            read = read_event(
                self.codec,
                message.key,
                message.value,
                message.headers,
                needs_payload=self.needs_payload,
            )
            if isinstance(read, OwnEcho):
                self.counts["own_echo"] += 1
                self.processor.seal(
                    batch, message.partition, read.workflow_id, _sealed(message, read.event_id)
                )
            elif isinstance(read, Closer):
                self.counts["closers"] += 1
            elif isinstance(read, Unreadable):
                self.tally.dead_letter()
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
            await self._fire_timers(batch, messages)
        if self.to_close:
            self._close_open_transactions()
        await self.processor.commit(batch)
        self.tally.committed()
        self.offsets.finish(messages)
        self._note_resumed(messages)
        self._observe_lag(messages)
        self.counts["batches"] += 1
        self.counts["inputs"] += batch.inputs
        TRACKER_BATCH_RECORDS.observe(len(messages))
        TRACKER_BATCH_SECONDS.observe(time.perf_counter() - started)

    def _note_resumed(self, messages: list[Any]) -> None:
        """Log, once per assignment, where each input partition's first batch began and
        what the group had committed: after a rebalance the two are equal (up to commit
        markers), and records lost to a rebalance show as the first exceeding the
        commit (they did, in faust's order of seek and resume: ``restore``, and in its
        fetches during a recovery: ``transport``). Once every input partition has been
        logged, a batch costs one check."""
        if not self.unresumed:
            return
        first: dict[Any, int] = {}
        for message in messages:
            if message.tp in self.unresumed and message.tp not in first:
                first[message.tp] = message.offset
                if len(first) == len(self.unresumed):
                    break
        if not first:
            return
        self.unresumed.difference_update(first)
        committed = faust_internals.committed_offsets(self.app.consumer)
        for tp, offset in first.items():
            log.info(
                "%s/%d resumes at offset %d (committed: %s)",
                tp.topic,
                tp.partition,
                offset,
                committed.get(tp),
                extra={"sagalog": {"agent": "saga-tracker", "action": "resumed"}},
            )

    def _observe_lag(self, messages: list[Any]) -> None:
        now = time.time()
        for message in messages:
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

    async def _fire_timers(self, batch: Any, messages: list[Any]) -> None:
        now_ms = self.clock.now_ms()
        again = set()
        due = [p for p in sorted(self.pending_ticks) if self._timer_due(p, now_ms)]
        ready = await self._caught_up(due, {m.tp: m.offset + 1 for m in messages}) if due else set()
        for partition in due:
            if partition not in ready:
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

    def close_held_open(self, spans: dict[tuple[str, int], tuple[int, int]]) -> None:
        """Have the next batch close these held-open input partitions; a tick of each
        brings that batch about, as nothing else may come (``sagalog.open_transactions``)."""
        self.to_close.update(spans)
        self._tick(sorted({partition for _, partition in spans}))

    def _close_open_transactions(self) -> None:
        """Write a closing record to each input partition held open, in the transaction of
        the partition's id, which this batch commits (``sagalog.open_transactions``). A partition
        no longer held here is left to its new holder's watchdog."""
        held = self.sink.transactions.producers
        for (topic, partition), (stable, end) in sorted(self.to_close.items()):
            if partition not in held:
                continue
            self.sink.close_open_transaction(topic, partition)
            self.counts["closing"] += 1
            log.warning(
                "%s/%d is held open at offset %d (log end %d): closing the transaction "
                "with a record of %s (a marker lost in a broker failure leaves it so)",
                topic,
                partition,
                stable,
                end,
                self.sink.transactions.id_of(partition),
                extra={"sagalog": {"agent": "saga-tracker", "action": "close_transaction"}},
            )
        self.to_close = {}

    def _timer_due(self, partition: int, now_ms: int) -> bool:
        """Whether ``partition`` has a timer due at ``now_ms``: one RocksDB seek, as the
        first key of a partition's timer table is its earliest timer."""
        lower, upper = due_range(now_ms)
        return bool(self.store.scan(Table.TIMERS, partition, lower.encode(), upper.encode(), 1))

    async def _caught_up(self, partitions: list[int], in_batch: dict[Any, int]) -> set[int]:
        """Those of ``partitions`` whose every workflow topic was read and decided to its
        end (``caught_up``): to the high watermark of the last fetch, with nothing handed
        over still queued, then to the read_committed end the broker gives now (one
        request for them all). An error asking counts as not read, and is logged: the
        timers wait for the next tick.

        Args:
            partitions: the partitions with a timer due.
            in_batch: the offset after each input partition's last record in the batch
                in hand, which counts as decided (its timers fire after its events).
        """
        read = [
            partition
            for partition in partitions
            if all(self._unread(TP(t, partition), in_batch) is None for t in self.workflow_topics)
        ]
        if not read:
            return set()
        places = [(topic, partition) for partition in read for topic in self.workflow_topics]
        try:
            stable = await asyncio.to_thread(self.backlog.stable_ends, places)
        except ServiceUnavailableError as exc:  # fail closed: the timers wait for the next tick
            self._cannot_tell(TP(*places[0]), str(exc))
            return set()
        ready = {
            partition
            for partition in read
            if all(
                (topic, partition) in stable
                and self._unread(TP(topic, partition), in_batch, stable[(topic, partition)]) is None
                for topic in self.workflow_topics
            )
        }
        for partition in ready:
            self.unknown_positions.pop(partition, None)
        return ready

    def _unread(
        self, tp: TP, in_batch: dict[Any, int] | None = None, stable: int | None = None
    ) -> str | None:
        """Why ``tp`` may hold records not decided yet (``caught_up.unread``); None: none."""
        position, high = self.input.position(tp)
        decided = max((in_batch or {}).get(tp, -1), self.offsets.finished.get(tp, -1))
        return unread(
            high,
            position,
            stable,
            handed=self.input.handed(tp),
            decided=decided if decided >= 0 else None,
        )

    def read_to_end(self) -> bool:
        """Whether every owned workflow-topic partition was read and decided to the end
        its consumer last fetched: the burst is over (the watchdog trims the heap then).

        Not "nothing past the group's committed offset": a transactional writer's last
        commit marker takes an offset no reader receives, so that stays one short for
        good, and the tracker would never trim after its first burst (idle RSS = its
        peak)."""
        inputs = [tp for tp in self.input.assigned if tp.topic in self.workflow_topics]
        return bool(inputs) and all(self._unread(tp) is None for tp in inputs)

    def _cannot_tell(self, tp: TP, error: str) -> None:
        if self.unknown_positions.get(tp.partition) == error:
            return  # said already; the next tick asks again
        self.unknown_positions[tp.partition] = error
        log.warning(
            "timers of partition %d wait: the consumer could not tell the position of %s/%d (%s)",
            tp.partition,
            tp.topic,
            tp.partition,
            error,
            extra={"sagalog": {"agent": "saga-tracker", "action": "timers_wait"}},
        )

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
        due = [
            tp.partition
            for tp in self.app.assignor.assigned_actives()
            if tp.topic == self.clock_topic and (sla_due or self._timer_due(tp.partition, now_ms))
        ]
        self._tick(due)

    async def _watch(self) -> None:
        await self.watchdog.watch()

    async def _commit_offsets(self) -> None:
        consumer = self.app.consumer
        due = self.offsets.due(consumer.assignment())
        if due and await faust_internals.commit_offsets(consumer, due):
            self.offsets.mark_committed(due)

    async def _report(self) -> None:
        outcomes = {str(k): v for k, v in self.processor.outcomes.items()}
        log.info(
            "tracker stats: %s; outcomes %s; timers fired %d (early wake-ups %d); "
            "published %d; health %s",
            {**self.counts, "dead_lettered": self.tally.dead_lettered},
            outcomes,
            self.processor.fired,
            self.processor.woke_early,
            self.sink.sent,
            self.health.describe(),
            extra={"sagalog": {"agent": "saga-tracker", "action": "stats"}},
        )


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
