"""Feed the tracker's rules: decide a batch of inputs, publish, then store. No faust here:
the saga tracker service runs it over faust's tables, ``sagalog replay`` over a
scratch store with a sink that publishes nothing, tests and what-if over memory
(``sagalog.testing.TrackerHarness``). It is the one driver of the rules: parking,
admission, duplicates and timers (``fire``, the one way a timer fires) are done
here and nowhere else.

``sagalog.tracker.decide`` says what an input does; this module does it, with the
one ordering that keeps the tracker correct when it is killed at any instant:

1. decide every input of the batch against the batch's view of the tables (an
   ``Overlay``: a later event of the same workflow sees the record an earlier one
   left), collecting the events to publish;
2. hand them to the sink, and write timers, parked events, admission counters and
   the records to the store (its ``sync`` makes the writes durable);
3. **commit** (``commit``): the sink's refusals surface, then the store syncs. The
   service's sink and store put a partition's events and its tables' changelog
   records in one Kafka transaction and write RocksDB only once it committed
   (``services.tracker.fencing``): all of the batch becomes visible, or none;
4. (the service) commit the consumed offsets, once all of that is done.

Killed before 3 ends, nothing of the batch is visible: it is consumed again and
decided again to the same decision, with the same event ids. Killed after 3 but
before 4, the batch is stored: its inputs come back as *duplicates*, which publish
nothing and write the same record and timers again. A sink and store without
transactions (replay, tests) keep the order: events first, then records, so a
record never runs ahead of the events it caused.

After each change of a workflow, events it parked (they came before their
predecessor) are fed again, and a slot that freed up is given to the next queued
workflow (admission control); both within the same batch.

Each event read for a tracked workflow is sealed into its record (its position and
content hash, chained: ``sagalog.tracker.seal``) whatever the rules decide, before
the decision's events are published: they carry the chain head that includes their
cause, which is the tamper evidence ``sagalog audit --verify`` checks.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sagalog.contracts.headers import trace_id_of
from sagalog.errors import FlowDefinitionError
from sagalog.events import StateTransition
from sagalog.flows.model import WORKFLOW_MIGRATED, Flow
from sagalog.flows.registry import FlowRegistry
from sagalog.tracker import admission_table
from sagalog.tracker.actions import (
    Alert,
    CancelTimer,
    Decision,
    Outcome,
    Park,
    Publish,
    ScheduleTimer,
)
from sagalog.tracker.admission import Admission
from sagalog.tracker.compensation import CompensationRetry
from sagalog.tracker.exceptions import StoredRecordError
from sagalog.tracker.inputs import Admit, TimerFired, TrackedEvent, TrackerInput
from sagalog.tracker.machine import decide, flow_for
from sagalog.tracker.memo import RECORDS_KEPT, CommittedMemo
from sagalog.tracker.outcome_log import OutcomeLog
from sagalog.tracker.record import SealedEvent, WorkflowRecord
from sagalog.tracker.seal import chain_head, seal, sealing
from sagalog.tracker.tables import (
    Overlay,
    Table,
    Tables,
    parked_prefix,
    parked_workflow,
    prefix_end,
)
from sagalog.tracker.timers import Timer, TimerKind, arm, decode_timer, due_range, wake_timer

log = logging.getLogger("sagalog.tracker")

NOTHING_DUE = "an early wake-up: no timer of the workflow was due"
"""The reason of a wake-up's decision when it fired nothing (``Processor.fire``)."""


class Sink(Protocol):
    """Where the tracker's output goes: events, alerts, and a flush that waits for acks.

    Each output names the partition whose input caused it: the service sends it in
    that partition's transaction (``services.tracker.fencing``).
    """

    def publish(self, action: Publish, *, partition: int) -> None: ...

    def alert(self, alert: Alert, *, flow: Flow | None, now_ms: int, partition: int) -> None: ...

    async def flush(self) -> None: ...


@dataclass
class Batch:
    """The state of one batch in the making: pending table writes and decoded records.

    ``stored``: the records this batch changed, by (partition, workflow id), encoded
    once at write-back however often they changed. ``unparked``: workflows whose
    parked events this batch saw gone (``CommittedMemo``).
    """

    overlay: Overlay
    records: dict[tuple[int, str], WorkflowRecord | None] = field(default_factory=dict)
    stored: dict[tuple[int, str], WorkflowRecord] = field(default_factory=dict)
    unparked: set[tuple[int, str]] = field(default_factory=set)
    inputs: int = 0
    published: int = 0


class Processor:
    """Decides inputs with the rules and performs the decisions (see the module docstring).

    Args:
        registry: every loaded flow version.
        secret: the key of gate tokens.
        partitions: partitions of the workflow topics (admission shares are per partition).
        admission: the most active workflows per flow name, across all partitions.
        retry: how stuck compensations are retried.
        sink: where published events and alerts go.
        records_kept: decoded records remembered across batches (``CommittedMemo``).
    """

    def __init__(
        self,
        *,
        registry: FlowRegistry,
        secret: bytes,
        partitions: int,
        sink: Sink,
        admission: Mapping[str, int] | None = None,
        retry: CompensationRetry | None = None,
        warn_every_s: float = 10.0,
        on_transition: Callable[[str, StateTransition], None] | None = None,
        records_kept: int = RECORDS_KEPT,
    ) -> None:
        self.registry = registry
        self.secret = secret
        self.partitions = partitions
        self.sink = sink
        self.retry = retry or CompensationRetry()
        self.shares = {
            name: Admission(limit=math.ceil(limit / partitions))
            for name, limit in (admission or {}).items()
        }
        self._log = OutcomeLog(warn_every_s=warn_every_s)
        self.outcomes: Counter[Outcome] = self._log.outcomes
        self.fired = 0
        self.woke_early = 0
        """Wake-ups that found no timer due: the price of one wake-up key per workflow
        (``timers.arm``), one per earliest timer cancelled while a later one stays."""
        self._on_transition = on_transition
        self.memo = CommittedMemo(records_kept)

    # -- a batch ---------------------------------------------------------------

    def begin(self, tables: Tables) -> Batch:
        return Batch(Overlay(tables))

    async def commit(self, batch: Batch) -> int:
        """Surface the sink's refusals, then store the batch's writes and wait until they
        are durable (with the service's store: the partitions' transactions committed);
        how many writes. Only then does the memo keep the batch's records."""
        for partition, key in batch.overlay.pending[Table.RECORDS]:
            self.memo.written((partition, key.decode()))  # written here, not by ``_store``
        kept = _written_as_stored(batch)  # before the write-back empties the overlay
        try:
            await self.sink.flush()
            written = batch.overlay.write_back()
            await batch.overlay.base.sync()
        except BaseException:
            self.memo.forget()
            raise
        self.memo.committed(kept)
        self.memo.unparked(batch.unparked)
        return written

    def forget(self) -> None:
        """The worker's partitions changed hands: what the memo holds may be stale."""
        self.memo.forget()

    # -- inputs ----------------------------------------------------------------

    def handle(
        self,
        batch: Batch,
        partition: int,
        first: TrackerInput,
        *,
        now_ms: int,
        topic: str = "",
        sealed: SealedEvent | None = None,
    ) -> Decision:
        """Apply ``first`` (read from ``topic``) and everything it unblocks; its decision.

        ``sealed``: where ``first`` lies in the log and its content hash, to seal into
        its workflow's record (None: not sealed, e.g. a test or a replay without
        positions). Events fed again from the parked table were sealed when read.
        """
        queue: deque[tuple[TrackerInput, bytes | None]] = deque([(first, None)])
        waiting: set[bytes] = set()
        decision: Decision | None = None
        position = sealed
        while queue:
            current, parked_key = queue.popleft()
            if parked_key is not None:
                waiting.discard(parked_key)
            result, before = self._handle_one(
                batch, partition, current, now_ms=now_ms, topic=topic, sealed=position
            )
            position = None
            decision = decision or result
            if parked_key is not None and result.outcome is not Outcome.PARKED:
                batch.overlay.delete(Table.PARKED, partition, parked_key)
            if result.record is None:
                continue
            for key, event in self._parked(batch, partition, result.record.workflow_id):
                if key not in waiting:
                    waiting.add(key)
                    queue.append((event, key))
            for admit in self._admissions(batch, partition, before, result.record):
                queue.append((admit, None))
        assert decision is not None
        return decision

    def fire(self, batch: Batch, partition: int, timer: Timer, *, now_ms: int) -> Decision:
        """Fire ``timer`` at ``now_ms``: decide it, then drop its key; the decision.

        The one way a timer fires, whoever chose the moment: the service's tick
        (``fire_due``), a replay at the time it fired live, a test's or a what-if's
        clock. A timer its record no longer expects decides to nothing (stale), so
        firing one twice is harmless. A workflow's wake-up key fires the timers of its
        record that are due (``_wake``).
        """
        if timer.kind is TimerKind.WAKE:
            return self._wake(batch, partition, timer, now_ms=now_ms)
        decision = self.handle(batch, partition, TimerFired(timer), now_ms=now_ms)
        batch.overlay.delete(Table.TIMERS, partition, timer.key.encode())
        self.fired += 1
        return decision

    def _wake(self, batch: Batch, partition: int, wake: Timer, *, now_ms: int) -> Decision:
        """Fire the workflow's timers due at ``now_ms``, earliest first, then arm its next
        wake-up (``timers.arm``); the last timer's decision, a stale one when none was due.

        A wake-up that is not the record's own (left by a record rewritten whole) fires
        what is due as well, and leaves the record's wake-up where it is.
        """
        batch.overlay.delete(Table.TIMERS, partition, wake.key.encode())
        decision = Decision(record=None, outcome=Outcome.STALE, reason=NOTHING_DUE)
        record = self._record(batch, partition, wake.workflow_id)
        due = [] if record is None else [t for t in record.timers if t.due_ms <= now_ms]
        if not due:
            self.woke_early += 1
        if record is None:
            return decision
        for timer in sorted(due, key=lambda t: t.key):
            decision = self.fire(batch, partition, timer, now_ms=now_ms)
        record = self._record(batch, partition, wake.workflow_id)
        if record is not None and record.wake_ms == wake.due_ms:
            self._store(batch, partition, record.model_copy(update={"wake_ms": None}))
        return decision

    def fire_due(self, batch: Batch, partition: int, *, now_ms: int, limit: int) -> int:
        """Fire the timers of ``partition`` due at ``now_ms`` (at most ``limit``); how many.

        The scan reads only due keys: the timer table is ordered by due time.
        """
        lower, upper = due_range(now_ms)
        due = batch.overlay.scan(Table.TIMERS, partition, lower.encode(), upper.encode(), limit)
        for key, _ in due:
            try:
                timer = decode_timer(key)
            except ValueError as exc:
                log.error("dropping an unreadable timer key: %s", exc)
                batch.overlay.delete(Table.TIMERS, partition, key)
                self.fired += 1
            else:
                self.fire(batch, partition, timer, now_ms=now_ms)
        return len(due)

    def next_timer(self, batch: Batch, partition: int) -> Timer | None:
        """The earliest timer pending in ``partition`` (None when none is).

        A driver with a clock of its own (a test's, a what-if's) asks this to know
        how far it may skip; the service's tick asks ``fire_due`` instead.
        """
        for key, _ in batch.overlay.scan(Table.TIMERS, partition, b"", _NO_TIMER_KEY, 10):
            try:
                return decode_timer(key)
            except ValueError:
                continue
        return None

    def seal(self, batch: Batch, partition: int, workflow_id: str, sealed: SealedEvent) -> bool:
        """Seal an event the rules need not see (the tracker's own output read back)
        into its workflow's record; whether the record changed.

        Its position and hash belong to the workflow's audit trail like any other's.
        """
        record = self._record(batch, partition, workflow_id)
        if record is None:
            return False
        after = seal(record, sealed)
        if after is None:
            return False
        self._store(batch, partition, after)
        return True

    # -- one input -------------------------------------------------------------

    def _handle_one(
        self,
        batch: Batch,
        partition: int,
        event: TrackerInput,
        *,
        now_ms: int,
        topic: str,
        sealed: SealedEvent | None = None,
    ) -> tuple[Decision, WorkflowRecord | None]:
        batch.inputs += 1
        workflow_id = event.workflow_id
        record = self._record(batch, partition, workflow_id)
        event_type = event.event_type if isinstance(event, TrackedEvent) else ""
        try:
            flow = flow_for(self.registry, record, event_type, topic=topic)
        except FlowDefinitionError as exc:
            decision = Decision(None, (), Outcome.REJECTED, str(exc))
            self._log.note(event, decision)
            if sealed is not None and record is not None:
                self.seal(batch, partition, workflow_id, sealed)
            return decision, record
        if flow is None:
            what = f"{event_type} starts no loaded flow" if event_type else "nothing to act on"
            decision = Decision(
                None, (), Outcome.IGNORED, f"no workflow {workflow_id} is tracked; {what}"
            )
            self._log.note(event, decision)
            return decision, record
        decision = decide(
            record,
            event,
            flow=flow,
            now_ms=now_ms,
            secret=self.secret,
            admit=self._admits(batch, partition, flow, record),
            retry=self.retry,
            migrate_to=self._migration_target(record, event),
        )
        self._log.note(event, decision)
        after = decision.record if decision.record is not None else record
        trace = event.traceparent if isinstance(event, TrackedEvent) else None
        changes: dict[str, object] = {}
        if decision.record is not None and trace and decision.record.traceparent != trace:
            kept = decision.record.traceparent
            if kept is None or trace_id_of(kept) == trace_id_of(trace):
                changes["traceparent"] = trace
            else:  # an event of another trace (a tool's, a caller's): the workflow keeps its own
                trace = kept
        resealed = None if sealed is None or after is None else sealing(after, sealed)
        if resealed is not None:
            changes.update(resealed)
        if changes:  # one copy for the trace and the seal
            assert after is not None
            after = after.model_copy(update=changes)
        self._perform(
            batch,
            partition,
            event,
            decision,
            flow,
            now_ms,
            chain=None if after is None else chain_head(after),
            trace=trace or (None if after is None else after.traceparent),
        )
        if decision.record is not None or resealed is not None:
            assert after is not None
            self._store(batch, partition, after)
        if decision.outcome is Outcome.DUPLICATE and record is not None:
            if resealed is None:
                self._store(batch, partition, record)  # re-assert: its changelog may be lost
            if record.wake_ms is not None:
                wake = wake_timer(record.workflow_id, record.wake_ms)
                batch.overlay.put(Table.TIMERS, partition, wake.key.encode(), b"")
        return decision, record

    def _migration_target(self, record: WorkflowRecord | None, event: TrackerInput) -> Flow | None:
        """The version a ``WorkflowMigrated`` names, when it is loaded."""
        if (
            record is None
            or not isinstance(event, TrackedEvent)
            or event.event_type != WORKFLOW_MIGRATED
        ):
            return None
        version = event.payload.get("to_version")
        if not isinstance(version, int):
            return None
        try:
            return self.registry.get(record.flow, version)
        except FlowDefinitionError:
            return None

    def _perform(
        self,
        batch: Batch,
        partition: int,
        event: TrackerInput,
        decision: Decision,
        flow: Flow,
        now_ms: int,
        *,
        chain: str | None = None,
        trace: str | None = None,
    ) -> None:
        overlay = batch.overlay
        for action in decision.actions:
            if isinstance(action, Publish):
                if chain is not None or trace is not None:
                    action = action.stamped(chain=chain, traceparent=trace)
                self.sink.publish(action, partition=partition)
                batch.published += 1
                if self._on_transition is not None and isinstance(action.event, StateTransition):
                    self._on_transition(action.workflow_id, action.event)
            elif isinstance(action, ScheduleTimer | CancelTimer):
                continue  # the record lists its timers; ``_store`` arms its wake-up
            elif isinstance(action, Alert):
                self.sink.alert(action, flow=flow, now_ms=now_ms, partition=partition)
            elif isinstance(action, Park) and isinstance(event, TrackedEvent):
                self._parked_in(batch, partition).add(event.workflow_id)  # before it commits
                batch.unparked.discard((partition, event.workflow_id))
                key = parked_prefix(event.workflow_id) + event.event_id.encode()
                # Without its trace context: a release before it read parked rows with
                # extra fields forbidden (a rollback must still unpark); the record's
                # context carries the trace on when the event is fed again.
                row = event.model_dump_json(exclude={"traceparent"})
                overlay.put(Table.PARKED, partition, key, row.encode())

    # -- records ---------------------------------------------------------------

    def record(self, batch: Batch, partition: int, workflow_id: str) -> WorkflowRecord | None:
        """The workflow's record as ``batch`` sees it; None when ``partition`` tracks none."""
        return self._record(batch, partition, workflow_id)

    def _record(self, batch: Batch, partition: int, workflow_id: str) -> WorkflowRecord | None:
        slot = (partition, workflow_id)
        cached = batch.records.get(slot, ...)
        if cached is not ...:
            return cached
        key = workflow_id.encode()
        record = None
        if not batch.overlay.has_pending(Table.RECORDS, partition, key):
            record = self.memo.record(slot)
        if record is None:
            raw = batch.overlay.get(Table.RECORDS, partition, key)
            record = None if raw is None else _load(raw, workflow_id)
        batch.records[slot] = record
        return record

    def _store(self, batch: Batch, partition: int, record: WorkflowRecord) -> None:
        armed = arm(record.wake_ms, record.timers)
        if armed != record.wake_ms:
            record = self._rearmed(batch, partition, record, armed)
        slot = (partition, record.workflow_id)
        batch.records[slot] = batch.stored[slot] = record
        self.memo.written(slot)
        batch.overlay.put_deferred(
            Table.RECORDS, partition, record.workflow_id.encode(), record.encoded
        )

    @staticmethod
    def _rearmed(
        batch: Batch, partition: int, record: WorkflowRecord, armed: int | None
    ) -> WorkflowRecord:
        """Move the workflow's wake-up key to ``armed`` (None: drop it); the record saying so."""
        if record.wake_ms is not None:
            old = wake_timer(record.workflow_id, record.wake_ms)
            batch.overlay.delete(Table.TIMERS, partition, old.key.encode())
        if armed is not None:
            new = wake_timer(record.workflow_id, armed)
            batch.overlay.put(Table.TIMERS, partition, new.key.encode(), b"")
        return record.model_copy(update={"wake_ms": armed})

    def _parked(
        self, batch: Batch, partition: int, workflow_id: str
    ) -> list[tuple[bytes, TrackedEvent]]:
        if workflow_id not in self._parked_in(batch, partition):
            return []
        prefix = parked_prefix(workflow_id)
        rows = batch.overlay.scan(Table.PARKED, partition, prefix, prefix_end(prefix), 10_000)
        if not rows:
            batch.unparked.add((partition, workflow_id))
        return [(key, TrackedEvent.model_validate_json(value)) for key, value in rows]

    def _parked_in(self, batch: Batch, partition: int) -> set[str]:
        """The workflows of ``partition`` that may have parked events (``CommittedMemo``);
        the tables are scanned for them once per partition."""
        known = self.memo.parked_in(partition)
        if known is None:
            rows = batch.overlay.base.scan(Table.PARKED, partition, b"", _NO_PARKED_KEY, 1 << 62)
            known = self.memo.know_parked(partition, (parked_workflow(key) for key, _ in rows))
        return known

    # -- admission control -------------------------------------------------------

    def _admits(
        self, batch: Batch, partition: int, flow: Flow, record: WorkflowRecord | None
    ) -> bool:
        policy = self.shares.get(flow.name)
        if record is not None or policy is None:
            return True
        return admission_table.admits_new(batch.overlay, partition, flow.name, policy)

    def _admissions(
        self, batch: Batch, partition: int, before: WorkflowRecord | None, after: WorkflowRecord
    ) -> list[Admit]:
        policy = self.shares.get(after.flow)
        if policy is None:
            return []
        return admission_table.track(batch.overlay, partition, policy, before, after)


def _written_as_stored(batch: Batch) -> list[tuple[tuple[int, str], WorkflowRecord]]:
    """The records ``_store`` left, unless something else wrote their key after it."""
    pending = batch.overlay.pending[Table.RECORDS]
    return [
        (slot, record)
        for slot, record in batch.stored.items()
        if getattr(pending.get((slot[0], slot[1].encode())), "__self__", None) is record
    ]


def _load(raw: bytes, workflow_id: str) -> WorkflowRecord:
    try:
        return WorkflowRecord.from_json(raw)
    except StoredRecordError as exc:
        raise StoredRecordError(f"workflow {workflow_id!r}: {exc}") from None


_NO_PARKED_KEY = b"\xff"
"""Above every parked key (they start with an ASCII length)."""

_NO_TIMER_KEY = b"\xff"
"""Above every timer key (they are ASCII up to the workflow id, and start with digits)."""
