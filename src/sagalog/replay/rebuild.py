"""Rebuild the tracker's state from the log into a fresh store, then diff it with the live one.

Phases, each resumable from the store:

1. **plan**: the end offsets of the workflow topics, *then* of the transitions topic,
   are fixed and stored: every decision the tracker made about the events to replay
   is then in the journal that is read (if the tracker had caught up). A resumed run
   keeps the first run's ends: one rebuild is of one snapshot of the log.
2. **journal**: the transitions topic is folded into the store (``journal``), chunk
   by chunk, each chunk's entries committed with its offsets.
3. **replay**: the workflow topics are fed through the tracker's processor
   (``engine``), chunk by chunk; each chunk's table writes, the replay clock, the
   counters and the offsets after the chunk go into one RocksDB write batch.
4. **diff** (``read_live`` and ``mismatches``): the tracker's records changelog is
   read to its end now and compared, field by field (``diff``), with the rebuilt
   records.

Interrupted (Ctrl-C, a kill, a crash), a run loses at most the chunk in progress; the
next run with the same store continues after the last committed chunk.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer

from sagalog.blobs.store import BlobStore
from sagalog.contracts.codec import EventCodec
from sagalog.errors import TopologyError
from sagalog.events import StateTransition
from sagalog.flows.registry import FlowRegistry
from sagalog.replay.blobs import BlobReads
from sagalog.replay.chunks import ChunkReader, LogRange, next_offsets, plan_ranges
from sagalog.replay.decoding import BatchDecoder, ReplayStats
from sagalog.replay.diff import Mismatch, diff_sorted, merged_by_id
from sagalog.replay.engine import EngineStats, ReplayClock, ReplayEngine, SkippedRecord
from sagalog.replay.exceptions import ReplayError
from sagalog.replay.journal import Decided, decisions_from, fold
from sagalog.replay.processing import Processor
from sagalog.replay.reader import replay_consumer_config
from sagalog.replay.settings import ReplaySettings
from sagalog.replay.store import RebuildStore
from sagalog.settings import ClientSettings
from sagalog.tracker.recording import RecordingSink

PHASES = ("journal", "replay", "live")


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a phase is: ``done`` of ``total`` records (offsets; an upper bound)."""

    phase: str
    done: int
    total: int


@dataclass
class RebuildResult:
    """What a rebuild did; the counters cover the whole rebuild, resumed runs included."""

    resumed: bool
    records: int
    """Workflow-topic records in the snapshot (offsets: an upper bound)."""
    read_now: int
    """Workflow-topic records this run read (the rest were read by an earlier run)."""
    seconds: float
    """How long this run's replay phase took."""
    stats: EngineStats
    journal_records: int
    journal_undecodable: int
    journal_missing: str | None
    """Why no journal could be read (None when one was)."""
    outcomes: dict[str, int]
    """What became of the inputs decided in this run (applied, duplicate, ...)."""
    would_publish: int = 0
    """Events this run's decisions would have published (none was)."""
    would_alert: int = 0
    """Alerts they would have raised."""
    workflows: int = 0

    @property
    def events_per_s(self) -> float:
        return self.read_now / self.seconds if self.seconds > 0 else 0.0


def rebuild_meta(
    registry: FlowRegistry, replay: ReplaySettings, topics: list[str]
) -> dict[str, Any]:
    """What a store is a rebuild of: a store made for other inputs is refused."""
    flows = sorted(
        (flow.name, flow.version, flow.model_dump_json(exclude={"source"})) for flow in registry
    )
    return {
        "kind": "sagalog-replay-rebuild",
        "workflow_topics": topics,
        "transitions_topic": replay.transitions_topic,
        "flows": [f"{name} v{version}" for name, version, _ in flows],
        "flows_digest": _digest(json.dumps(flows)),
        "admission": replay.admission,
        "compensation_attempts": replay.compensation_attempts,
        "compensation_max_wait_s": replay.compensation_max_wait_s,
    }


class Rebuild:
    """One rebuild into ``store``; ``run`` does phases 1-3, ``read_live`` and ``mismatches`` 4."""

    def __init__(
        self,
        *,
        settings: ClientSettings,
        codec: EventCodec,
        registry: FlowRegistry,
        replay: ReplaySettings,
        store: RebuildStore,
        chunk_size: int = 2_000,
        progress: Callable[[Progress], None] | None = None,
        changelog_topic: str | None = None,
        blobs: BlobStore | None = None,
    ) -> None:
        """Args:
        blobs: the store the events' blob references are read from (``BlobReads``);
            None: they are counted, not read.
        """
        self.settings = settings
        self.codec = codec
        self.blobs = BlobReads(codec, blobs)
        self.registry = registry
        self.replay = replay
        self.store = store
        self.chunk_size = chunk_size
        self.progress = progress or (lambda _: None)
        self.topics = sorted({flow.topic for flow in registry})
        self.group_id = f"sagalog-rebuild-{uuid.uuid4().hex[:12]}"
        self.changelog_topic = changelog_topic or replay.changelog_topic

    # -- phases 1-3 ----------------------------------------------------------------

    def run(self, *, stop_after: int | None = None) -> RebuildResult:
        """Plan (or resume), read the journal, replay the workflow topics.

        ``stop_after``: stop, as Ctrl-C would, once this run has replayed that many
        records (a test of resumption).

        Raises:
            ReplayError: a workflow topic does not exist.
            TopologyError: the workflow topics differ in partition count.
            KeyboardInterrupt: interrupted; the store keeps every committed chunk.
        """
        consumer = Consumer(replay_consumer_config(self.settings, **{"group.id": self.group_id}))
        try:
            resumed = bool(self.store.offsets())
            workflow, journal, missing = self._plan(consumer)
            partitions = _partition_count(workflow)
            journal_stats = self._read_journal(consumer, journal)
            sink = RecordingSink()
            processor = Processor(
                registry=self.registry,
                secret=self.replay.secret(),
                partitions=partitions,
                sink=sink,
                admission=self.replay.admission,
                retry=self.replay.retry(),
            )
            engine = ReplayEngine(
                processor=processor,
                journal=self.store,
                clock=ReplayClock({p: self.store.clock(p) for p in range(partitions)}),
                codec=self.codec,
            )
            engine.stats = _load_stats(self.store.state("stats"))
            started = time.monotonic()
            read_now = self._replay(consumer, workflow, engine, partitions, stop_after)
            seconds = time.monotonic() - started
        finally:
            consumer.close()
        return RebuildResult(
            resumed=resumed,
            records=sum(r.size for r in workflow),
            read_now=read_now,
            seconds=seconds,
            stats=engine.stats,
            journal_records=journal_stats.read,
            journal_undecodable=journal_stats.undecodable,
            journal_missing=missing,
            outcomes={str(k): v for k, v in engine.outcomes.items()},
            would_publish=sink.published,
            would_alert=sink.alerted,
            workflows=sum(1 for p in range(partitions) for _ in self.store.records(p)),
        )

    def _plan(self, consumer: Consumer) -> tuple[list[LogRange], list[LogRange], str | None]:
        stored = self.store.state("plan")
        if stored is not None:
            plan = json.loads(stored)
        else:
            timeout = self.settings.connect_timeout_s
            workflow = plan_ranges(consumer, self.topics, timeout_s=timeout)
            missing = None
            try:  # after the workflow topics: see the module docstring
                journal = plan_ranges(consumer, [self.replay.transitions_topic], timeout_s=timeout)
            except ReplayError as exc:
                journal, missing = [], str(exc)
            plan = {
                "workflow": [asdict(r) for r in workflow],
                "journal": [asdict(r) for r in journal],
                "journal_missing": missing,
            }
            self.store.stage_state("plan", json.dumps(plan))
            self.store.commit({})
        return (
            [LogRange(**r) for r in plan["workflow"]],
            [LogRange(**r) for r in plan["journal"]],
            plan["journal_missing"],
        )

    def _read_journal(self, consumer: Consumer, ranges: list[LogRange]) -> ReplayStats:
        stats = ReplayStats(**json.loads(self.store.state("journal_stats") or "{}"))
        stats.examples = []
        if self.store.state("journal") == "done":
            return stats
        decoder = BatchDecoder(
            self.codec,
            event_types={StateTransition.event_type},
            keys=True,
            logical_types=False,
            stats=stats,
        )
        todo = _remaining(ranges, self.store.offsets())
        total, done = sum(r.size for r in ranges), sum(r.size for r in ranges) - _size(todo)
        reader = ChunkReader(consumer, todo, chunk_size=self.chunk_size * 5)
        for chunk in reader.chunks():
            stats.read += len(chunk)
            decisions: list[Decided] = []
            for batch in decoder.decode(chunk):
                found = decisions_from(batch.payloads, batch.keys)
                decisions.extend(d for d in found if (d.flow, d.flow_version) in self.registry)
            self.store.stage_journal(fold(decisions, self.store.last_of))
            self.store.stage_state("journal_stats", _counters(stats))
            self.store.commit(next_offsets(chunk))
            done += len(chunk)
            self.progress(Progress("journal", done, total))
        self.store.stage_state("journal", "done")
        self.store.commit({})
        return stats

    def _replay(
        self,
        consumer: Consumer,
        ranges: list[LogRange],
        engine: ReplayEngine,
        partitions: int,
        stop_after: int | None,
    ) -> int:
        todo = _remaining(ranges, self.store.offsets())
        total = sum(r.size for r in ranges)
        done, read_now = total - _size(todo), 0
        self.progress(Progress("replay", done, total))
        processor = engine.processor
        for chunk in ChunkReader(consumer, todo, chunk_size=self.chunk_size).chunks():
            batch = processor.begin(self.store)
            engine.feed(batch, chunk)
            self.blobs.see_all(chunk)
            batch.overlay.write_back()
            for partition, now in engine.clock.now.items():
                self.store.stage_clock(partition, now)
            self.store.stage_state("stats", _engine_counters(engine.stats))
            self.store.commit(next_offsets(chunk))
            done += len(chunk)
            read_now += len(chunk)
            self.progress(Progress("replay", done, total))
            if stop_after is not None and read_now >= stop_after:
                raise KeyboardInterrupt
        if self.store.state("replay") != "done":
            batch = processor.begin(self.store)
            engine.finish(batch, partitions)
            batch.overlay.write_back()
            self.store.stage_state("stats", _engine_counters(engine.stats))
            self.store.stage_state("replay", "done")
            self.store.commit({})
        return read_now

    # -- phase 4 ----------------------------------------------------------------------

    def read_live(self) -> int:
        """Read the tracker's records changelog to its end into the store; how many records.

        Raises:
            ReplayError: the changelog topic does not exist (a wrong ``--app-id``?).
        """
        topic = self.changelog_topic
        consumer = Consumer(replay_consumer_config(self.settings, **{"group.id": self.group_id}))
        try:
            try:
                ranges = plan_ranges(consumer, [topic], timeout_s=self.settings.connect_timeout_s)
            except ReplayError:
                raise ReplayError(
                    f"the tracker's records changelog {topic} does not exist: give the live "
                    "tracker's --app-id (SAGALOG_TRACKER_APP_ID), or --changelog"
                ) from None
            self.store.clear_live()
            total, done = sum(r.size for r in ranges), 0
            for chunk in ChunkReader(consumer, ranges, chunk_size=self.chunk_size * 5).chunks():
                for message in chunk:
                    key = message.key()
                    if key is not None:
                        self.store.stage_live(key.decode("utf-8", "replace"), message.value())
                self.store.commit({})
                done += len(chunk)
                self.progress(Progress("live", done, total))
        finally:
            consumer.close()
        return sum(1 for _ in self.store.live())

    def mismatches(self, partitions: int) -> Iterator[Mismatch]:
        """Live against rebuilt, field by field, by workflow id (see ``diff``)."""
        rebuilt = merged_by_id(self.store.records(p) for p in range(partitions))
        return diff_sorted(self.store.live(), rebuilt)

    def partitions(self) -> int:
        plan = json.loads(self.store.state("plan") or '{"workflow": []}')
        return _partition_count([LogRange(**r) for r in plan["workflow"]])


def _partition_count(ranges: list[LogRange]) -> int:
    counts: dict[str, int] = {}
    for r in ranges:
        counts[r.topic] = counts.get(r.topic, 0) + 1
    if len(set(counts.values())) > 1:
        listing = ", ".join(f"{t}: {n}" for t, n in sorted(counts.items()))
        raise TopologyError(
            f"the workflow topics differ in partition count ({listing}); the tracker "
            "refuses that too: one tracker app per partition count"
        )
    return next(iter(counts.values()), 1)


def _remaining(ranges: list[LogRange], offsets: dict[tuple[str, int], int]) -> list[LogRange]:
    """``ranges`` from the stored offsets on."""
    return [
        LogRange(r.topic, r.partition, max(r.start, offsets.get(r.position, r.start)), r.stop)
        for r in ranges
    ]


def _size(ranges: list[LogRange]) -> int:
    return sum(r.size for r in ranges)


def _counters(stats: ReplayStats) -> str:
    return json.dumps(
        {
            "read": stats.read,
            "decoded": stats.decoded,
            "skipped": stats.skipped,
            "undecodable": stats.undecodable,
        }
    )


def _engine_counters(stats: EngineStats) -> str:
    return json.dumps(asdict(stats))


def _load_stats(stored: str | None) -> EngineStats:
    if not stored:
        return EngineStats()
    data = json.loads(stored)
    examples = [SkippedRecord(**e) for e in data.pop("examples", [])]
    return EngineStats(**data, examples=examples)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
