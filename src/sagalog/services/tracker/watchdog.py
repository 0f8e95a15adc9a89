"""The tracker's watchdog: a tracker that silently stops is the worst failure.

Every 5 s it looks at the partitions this worker owns. One that has committed
records waiting past the group's offset, and whose offset has not moved for
``stall_timeout_s``, is stalled (``stall.judge``): first the watchdog commits again
what was decided but whose commit did not land, and waits for a batch in hand that
waits for the broker (``stall.sort_stalled``; the health says so); if records are
still not read, the process exits (70) so that a fresh worker takes the partitions
over. Around a rebalance, behind a backlog and while the broker is away it suspects
nothing. The same look marks the tracker ready once faust's running consumer has
everything the tracker needs (``faust_internals.check_instances``), and trims the heap
after a burst.

A module of its own so that the faust wiring (``app``) reads as wiring: the
decisions are the pure functions of ``stall``; this is the loop that feeds them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException
from faust.types import TP

from sagalog import open_transactions
from sagalog.disk_space import disk_problems
from sagalog.errors import ServiceUnavailableError
from sagalog.memory import release_free_memory
from sagalog.rocksdb_options import MB
from sagalog.services.tracker import faust_internals
from sagalog.services.tracker.exits import crash
from sagalog.services.tracker.stall import Suspect, judge, sort_stalled, waiting_its_turn

if TYPE_CHECKING:
    from sagalog.services.tracker.app import Tracker

log = logging.getLogger("sagalog.tracker")

BATCH = "batch"
"""The health problem of a batch in hand that waits for the broker."""

TRIM_AFTER = 10_000  # inputs decided since the last heap trim
QUIET_INPUTS = 100
"""Fewer inputs than this since the last watch (5 s) and the burst is over: a tracker
under steady load is read to its end at many a watch, and a trim there (a full
collection, ``malloc_trim``, the kept records dropped) would only pause its batches."""


class Watchdog:
    """The stall watch of one tracker process, and what it remembers between looks."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.suspects: dict[tuple[str, int], Suspect] = {}
        self.held_open: dict[tuple[str, int], open_transactions.HeldOpen] = {}
        self.watched_generation = -1
        self.inputs_at_trim = 0
        self.batches_at_watch = 0
        self.inputs_at_watch = 0
        self.last_look = time.monotonic()
        """When the watch last ran: the event loop's pulse (``probes.live``)."""

    async def watch(self) -> None:
        """Exit (70) when a partition has records waiting and nothing of it was
        committed for ``stall_timeout_s`` (see ``stall``).

        faust can come out of a rebalance with its tables ready and its partitions
        assigned, yet deliver nothing (faust issues 175 and 640 describe the like),
        and after a broker restart it once left one partition unread for minutes
        while the others flowed. A fresh process recovers; a tracker that silently
        stops is the worst failure, so this worker hands over instead.
        """
        tracker = self.tracker
        self.last_look = time.monotonic()
        if tracker.ready and not tracker.health.started:
            try:
                faust_internals.check_instances(tracker.app)
            except Exception as exc:
                crash("faust's running consumer lacks what the tracker needs", exc)
            tracker.health.ready()
        generation = tracker.app.consumer_generation_id
        batches = tracker.counts["batches"]
        progressed, self.batches_at_watch = batches != self.batches_at_watch, batches
        if progressed:
            self._batch_moved_on()
        inputs = tracker.counts["inputs"]
        quiet, self.inputs_at_watch = inputs - self.inputs_at_watch < QUIET_INPUTS, inputs
        busy = waiting_its_turn(
            queued=tracker.input.queued + faust_internals.queued(tracker.app, tracker.clock_topic),
            capacity=tracker.queue_capacity,
            progressed=progressed,
        )
        steady = (
            tracker.ready and not tracker.app.rebalancing and generation == self.watched_generation
        )
        if steady:
            await self._look_for_open_transactions()
        if not steady or busy or disk_problems(tracker.health):
            # Offsets stand still across a rebalance (commits fail while it runs),
            # records wait their turn behind a backlog, and the batch in hand waits
            # for space on a full disk (``disk_space``; a restart would not free it):
            # suspicion starts again after.
            self.suspects = {}
            self.watched_generation = generation
            return
        mine = [
            (tp.topic, tp.partition)
            for tp in tracker.app.assignor.assigned_actives()
            if tp.topic in tracker.workflow_topics or tp.topic == tracker.clock_topic
        ]
        try:
            behind = await asyncio.to_thread(tracker.backlog.behind, mine)
            self.suspects, candidates = judge(
                self.suspects,
                behind,
                now=time.monotonic(),
                after_s=tracker.settings.stall_timeout_s,
            )
            spans = {key: behind[key] for key in candidates}
            stalled = await asyncio.to_thread(tracker.backlog.readable, spans) if spans else set()
        except (ServiceUnavailableError, KafkaException) as exc:
            # The broker is away: nothing can be delivered anyway, and the watch runs
            # again in 5 s (that is its retry). Suspicion starts again once it is back,
            # or every partition would count the outage as its own stall and exit.
            self.suspects = {}
            tracker.health.degrade("kafka", str(exc))
            log.warning(
                "stall check skipped, the broker did not answer: %s",
                exc,
                extra={"sagalog": {"agent": "saga-tracker", "action": "outage"}},
            )
            return
        down_s = tracker.health.recover("kafka")
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
        if quiet and inputs - self.inputs_at_trim >= TRIM_AFTER and tracker.read_to_end():
            # Caught up after a burst (a backlog decided, a flood of starts): the heap's
            # peak is not what a waiting tracker needs, as after a restore.
            self.inputs_at_trim = tracker.counts["inputs"]
            tracker.processor.memo.release()
            release_free_memory()
            budget = tracker.rocksdb_budget
            log.info(
                "heap trimmed after %d inputs; RocksDB memtables %.1f MB of %d, cache %.1f MB "
                "of %d",
                tracker.counts["inputs"],
                budget.memtables_bytes() / MB,
                budget.memtables_mb,
                budget.cache_bytes() / MB,
                budget.cache_mb,
                extra={"sagalog": {"agent": "saga-tracker", "action": "memory"}},
            )
        if stalled:
            stalled = await self._sort_out(stalled, behind)
        if stalled:
            (topic, partition), (start, end) = max(
                ((key, behind[key]) for key in stalled), key=lambda item: item[1][1] - item[1][0]
            )
            log.error(
                "stalled partitions, as faust and aiokafka see them: %s",
                json.dumps(faust_internals.describe(tracker.app, stalled), default=str),
            )
            log.error(
                "stalled partitions, as the input reads them (next offset, high watermark; "
                "%d records queued): %s",
                tracker.input.queued,
                {f"{t}/{p}": tracker.input.position(TP(t, p)) for t, p in stalled},
            )
            log.error(
                "offsets: finished %s, committed %s, faust committed %s",
                {str(tp): o for tp, o in tracker.offsets.finished.items()},
                {str(tp): o for tp, o in tracker.offsets.committed.items()},
                {
                    str(tp): o
                    for tp, o in faust_internals.committed_offsets(tracker.app.consumer).items()
                },
            )
            crash(
                f"{topic}/{partition} has {end - start} committed record(s) past the group's "
                f"offset {start}, which has not moved for {tracker.settings.stall_timeout_s:g}s "
                f"({len(stalled)} partition(s) stalled)"
            )

    async def _look_for_open_transactions(self) -> None:
        """Close an input partition held open by a transaction whose marker was lost, and
        report one that stays held after that (``open_transactions``). Busy or not: a
        held partition delivers nothing, however full the others keep the queue."""
        tracker = self.tracker
        inputs = [
            (tp.topic, tp.partition)
            for tp in tracker.app.assignor.assigned_actives()
            if tp.topic in tracker.workflow_topics
        ]
        try:
            spans = await asyncio.to_thread(tracker.backlog.held_open, inputs)
        except (ServiceUnavailableError, KafkaException):
            return  # the stall check says so, and degrades the health
        verdict = open_transactions.judge(
            self.held_open,
            spans,
            now=time.monotonic(),
            after_s=tracker.settings.open_transaction_after_s,
        )
        self.held_open = verdict.held
        if verdict.close:
            tracker.close_held_open({key: spans[key] for key in verdict.close})
        reader = "the tracker"
        for problem in open_transactions.mark_health(tracker.health, verdict, spans, reader=reader):
            log.error(
                problem,
                extra={"sagalog": {"agent": "saga-tracker", "action": "open_transaction"}},
            )

    async def _sort_out(
        self, stalled: set[tuple[str, int]], behind: dict[tuple[str, int], tuple[int, int]]
    ) -> set[tuple[str, int]]:
        """Commit again what was decided past a group offset that stood still, wait for a
        batch in hand that waits for the broker, and return the partitions that are not
        read at all (see ``stall.sort_stalled``)."""
        tracker = self.tracker
        tps = {(tp.topic, tp.partition): tp for tp in tracker.offsets.finished}
        finished = {key: tracker.offsets.finished[tp] for key, tp in tps.items()}
        handed = {}
        for topic, partition in stalled:
            offset = tracker.input.handed(TP(topic, partition))
            if offset is not None:
                handed[(topic, partition)] = offset
        batch_age_s = tracker.turns.batch_age_s(time.monotonic())
        verdict = sort_stalled(
            sorted(stalled),
            behind,
            finished,
            handed,
            batch_age_s=batch_age_s,
            batch_bound_s=self.batch_bound_s,
        )
        if verdict.recommit:
            log.warning(
                "decided past the group's offset, but the commit did not land; committing "
                "again: %s",
                {f"{t}/{p}": (behind[(t, p)][0], o) for (t, p), o in verdict.recommit.items()},
                extra={"sagalog": {"agent": "saga-tracker", "action": "recommit"}},
            )
            offsets = {tps[key]: offset for key, offset in verdict.recommit.items()}
            if await faust_internals.commit_offsets(tracker.app.consumer, offsets):
                tracker.offsets.mark_committed(offsets)
            for key in verdict.recommit:
                self.suspects.pop(key, None)
        if verdict.in_hand:
            waiting = (
                f"the batch in hand has waited {batch_age_s or 0:.0f} s for Kafka; records of "
                f"{', '.join(f'{t}/{p}' for t, p in verdict.in_hand)} wait behind it (the "
                f"transaction timeout, {tracker.settings.transaction_timeout_s:g} s, bounds it)"
            )
            tracker.health.degrade(BATCH, waiting)
            log.warning(
                "%s; waiting for the broker rather than restarting",
                waiting,
                extra={"sagalog": {"agent": "saga-tracker", "action": "batch_waits"}},
            )
        if verdict.not_read and batch_age_s is not None and batch_age_s >= self.batch_bound_s:
            log.error(
                "the batch in hand has not finished in %.0f s, past the transaction timeout",
                batch_age_s,
            )
        return set(verdict.not_read)

    @property
    def batch_bound_s(self) -> float:
        """The longest the watch waits for a batch in hand: its transactions' timeout
        (past it the coordinator aborts them and the batch fails on its own) plus a
        stall timeout for the answer to come back."""
        settings = self.tracker.settings
        return settings.transaction_timeout_s + settings.stall_timeout_s

    def _batch_moved_on(self) -> None:
        waited_s = self.tracker.health.recover(BATCH)
        if waited_s is not None:
            log.info(
                "the batch that waited for Kafka finished; degraded for %.1f s",
                waited_s,
                extra={
                    "sagalog": {
                        "agent": "saga-tracker",
                        "action": "recovered",
                        "duration_ms": int(waited_s * 1000),
                    }
                },
            )
