"""Recorded workflow events through the tracker's own processor, at the live tracker's times.

The engine is the tracker minus Kafka and faust: each record of a workflow topic is
read as the tracker reads it (``read_event``), decided by the tracker's
``Processor`` into whatever ``Tables`` the caller gives (a fresh RocksDB for a
rebuild); the processor's sink is the caller's (a ``RecordingSink``: nothing is
published).

**Time.** Each input is decided at the live tracker's clock when it decided it, as
the journal recorded it; an input not on record (it changed nothing live: a
duplicate, a stale or ignored event) is decided at the partition's replay clock,
the latest recorded time seen there, which it cannot show in any state. Without a
journal at all, an event is decided at its ``ce_time``.

**Timers fire where they fired live**, never by the replay clock (``journal`` says
why). Before an input of workflow W is decided, the engine fires W's recorded
firings (the journal's) that came before it:

- an input on record: the firings before it in W's decision order (``seq``);
- the tracker's own output read back, caused by a timer (a gate's escalation
  ``GateOpened``, a repeated ``CompensationRequested``, a gate default's
  ``GateDecided``): the recorded firings up to that timer, by ``seq`` when it is on
  record, else by time and key (a tick fires in key order); then that timer
  itself, at the output's ``ce_time``;
- an input not on record: the firings no later than the partition's clock. It
  changed nothing live, which is what it does after a timeout has made it late;
  decided before that timeout, a completion would have moved the workflow.

After the last record, the recorded firings still unfired are fired (they came
after their workflow's last event). Every recorded firing moved its workflow live,
so in the replay it must apply; one that does not (stale: the replay diverged) is
listed in ``EngineStats.not_reproduced``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import (
    H_CAUSATION_ID,
    H_SOURCE,
    H_TIME,
    H_WORKFLOW_ID,
    header_dict,
)
from sagalog.replay.journal import TIMER_CAUSE, Journal, Recorded, RecordedFiring
from sagalog.replay.processing import (
    Batch,
    Closer,
    OwnEcho,
    Processor,
    Unreadable,
    payload_types,
    read_event,
)
from sagalog.tracker.actions import TRACKER_SOURCE, Outcome
from sagalog.tracker.tables import Table
from sagalog.tracker.timers import decode_timer

MAX_EXAMPLES = 20
"""Unreadable records listed (with why) in a report; all of them are counted."""

_LAST = "\U0010ffff"
"""Sorts after every timer key: ``(t, _LAST)`` is "at or before t", whatever the key."""
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS = dt.timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """A record the tracker cannot read (it would dead-letter it), and why."""

    topic: str
    partition: int
    offset: int
    reason: str


@dataclass
class EngineStats:
    """What the engine read and did."""

    records: int = 0
    """Records read from the workflow topics."""
    tracked: int = 0
    """Records the tracker decides (events of workflow topics, its own echoes excluded)."""
    echoes: int = 0
    """The tracker's own ``GateOpened``/``CompensationRequested`` read back."""
    unreadable: int = 0
    """Records the tracker would dead-letter (no headers, undecodable payload, ...)."""
    examples: list[SkippedRecord] = field(default_factory=list)
    fired_recorded: int = 0
    """Timers fired as the journal recorded them."""
    fired_at_output: int = 0
    """Timers fired where their output was read back (escalations, repeated requests)."""
    not_reproduced: list[str] = field(default_factory=list)
    """Recorded firings that did not apply in the replay (the first ``MAX_EXAMPLES``)."""


class ReplayClock:
    """The live tracker's clock per partition, as the journal recorded it."""

    def __init__(self, start: dict[int, int] | None = None) -> None:
        self.now: dict[int, int] = dict(start or {})

    def at(self, partition: int, recorded: Recorded | None, fallback_ms: int) -> int:
        """When the live tracker decided an input (see the module docstring)."""
        if recorded is not None:
            self.saw(partition, recorded.at_ms)
            return recorded.at_ms
        return self.now.get(partition) or fallback_ms

    def saw(self, partition: int, now_ms: int) -> None:
        self.now[partition] = max(self.now.get(partition, 0), now_ms)


class ReplayEngine:
    """Feeds workflow-topic records to the tracker's processor; see the module docstring."""

    def __init__(
        self,
        *,
        processor: Processor,
        journal: Journal,
        clock: ReplayClock,
        codec: EventCodec,
    ) -> None:
        self.processor = processor
        self.journal = journal
        self.clock = clock
        self.codec = codec
        self._needs_payload = payload_types(processor.registry)
        self.stats = EngineStats()
        self._fired: set[str] = set()

    def feed(self, batch: Batch, messages: Sequence[Message]) -> None:
        """Decide ``messages`` (log order within each partition) into ``batch``."""
        for message in messages:
            self.stats.records += 1
            topic, partition = message.topic() or "", message.partition() or 0
            read = read_event(
                self.codec,
                message.key(),
                message.value(),
                message.headers(),
                needs_payload=self._needs_payload,
            )
            if isinstance(read, Unreadable):
                self._unreadable(message, read.reason)
                continue
            if isinstance(read, OwnEcho):
                self.stats.echoes += 1
                self._fire_at_output(batch, partition, message)
                continue
            if isinstance(read, Closer):
                continue  # ended an open transaction; no workflow's (``sagalog.open_transactions``)
            self.stats.tracked += 1
            cause = read.causation_id or ""
            if cause.startswith(TIMER_CAUSE) and _source(message) == TRACKER_SOURCE:
                self._fire_at_output(batch, partition, message)  # a gate default's GateDecided
            recorded = self.journal.recorded(read.event_id)
            if recorded is not None:
                self._fire_recorded(batch, partition, read.workflow_id, seq=recorded.seq)
            else:
                clock = self.clock.now.get(partition, 0)
                self._fire_recorded(batch, partition, read.workflow_id, order=(clock, _LAST))
            now = self.clock.at(partition, recorded, read.time_ms)
            self.processor.handle(batch, partition, read, now_ms=now, topic=topic)

    def finish(self, batch: Batch, partitions: int) -> None:
        """Fire the recorded firings still unfired: they came after their workflow's last input."""
        for firing in self.journal.all_firings():
            if self._was_fired(firing.timer_key):
                continue
            partition = self._expecting(batch, partitions, firing.timer_key)
            if partition is not None:
                self._fire(batch, partition, firing)
            elif self._replayed(batch, partitions, firing.timer_key):
                self._not_reproduced(firing.timer_key)  # the replay diverged before it
            # else: a workflow outside the snapshot (it started after the plan was made)

    # -- timers ---------------------------------------------------------------------

    def _fire_recorded(
        self,
        batch: Batch,
        partition: int,
        workflow_id: str,
        *,
        seq: int | None = None,
        order: tuple[int, str] | None = None,
    ) -> None:
        """Fire the workflow's unfired recorded timers before ``seq`` or ``order`` (time, key)."""
        for firing in self.journal.firings_of(workflow_id):
            if self._was_fired(firing.timer_key):
                continue
            if (seq is not None and firing.seq >= seq) or (
                order is not None and firing.order >= order
            ):
                continue
            self._fire(batch, partition, firing)

    def _fire_at_output(self, batch: Batch, partition: int, message: Message) -> None:
        headers = header_dict(message.headers())
        cause = headers.get(H_CAUSATION_ID, "")
        if not cause.startswith(TIMER_CAUSE) or not headers.get(H_TIME):
            return
        try:
            at = _epoch_ms(dt.datetime.fromisoformat(headers[H_TIME].replace("Z", "+00:00")))
        except ValueError:
            return
        key = cause[len(TIMER_CAUSE) :]
        workflow_id = headers.get(H_WORKFLOW_ID, "")
        recorded = self.journal.recorded(cause)
        if recorded is not None:  # its firing is on record: fire up to it, by seq
            self._fire_recorded(batch, partition, workflow_id, seq=recorded.seq + 1)
            return
        firing = RecordedFiring(key, at)
        self._fire_recorded(batch, partition, workflow_id, order=firing.order)
        if not self._was_fired(key):
            self.stats.fired_at_output += 1
            self._fire(batch, partition, firing)

    def _fire(self, batch: Batch, partition: int, firing: RecordedFiring) -> None:
        """Fire one recorded timer at the time it fired live (``Processor.fire``)."""
        self._fired.add(firing.timer_key)
        self.journal.mark_fired(firing.timer_key)
        try:
            timer = decode_timer(firing.timer_key)
        except ValueError:
            return
        self.clock.saw(partition, firing.at_ms)
        decision = self.processor.fire(batch, partition, timer, now_ms=firing.at_ms)
        if firing.seq >= 0:
            self.stats.fired_recorded += 1
            if decision.outcome is not Outcome.APPLIED:
                self._not_reproduced(firing.timer_key)

    def _expecting(self, batch: Batch, partitions: int, timer_key: str) -> int | None:
        """The partition whose replayed record still expects the timer; None: none does.

        The record, not the timer table, says so: the table holds one wake-up key per
        workflow (``sagalog.tracker.timers``).
        """
        try:
            timer = decode_timer(timer_key)
        except ValueError:
            return None
        for partition in range(partitions):
            record = self.processor.record(batch, partition, timer.workflow_id)
            if record is not None and timer in record.timers:
                return partition
        return None

    def _replayed(self, batch: Batch, partitions: int, timer_key: str) -> bool:
        """Whether the timer's workflow was replayed (has a record in some partition)."""
        try:
            workflow = decode_timer(timer_key).workflow_id.encode()
        except ValueError:
            return False
        return any(
            batch.overlay.get(Table.RECORDS, p, workflow) is not None for p in range(partitions)
        )

    def _was_fired(self, timer_key: str) -> bool:
        return timer_key in self._fired or self.journal.is_fired(timer_key)

    def _not_reproduced(self, timer_key: str) -> None:
        if len(self.stats.not_reproduced) < MAX_EXAMPLES:
            self.stats.not_reproduced.append(timer_key)

    def _unreadable(self, message: Message, reason: str) -> None:
        self.stats.unreadable += 1
        if len(self.stats.examples) < MAX_EXAMPLES:
            self.stats.examples.append(
                SkippedRecord(
                    message.topic() or "", message.partition() or 0, message.offset() or 0, reason
                )
            )

    @property
    def outcomes(self) -> Counter[Any]:
        """The processor's count of what became of the inputs (applied, duplicate, ...)."""
        return self.processor.outcomes


def _source(message: Message) -> str | None:
    return header_dict(message.headers()).get(H_SOURCE)


def _epoch_ms(when: dt.datetime) -> int:
    """Exact epoch milliseconds (``timestamp() * 1000`` can round a millisecond away)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when - _EPOCH) // _MS
