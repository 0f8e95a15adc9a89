"""The saga tracker in memory with a time-skipping clock: the production driver, no Kafka.

``TrackerHarness`` is the tracker's own ``Processor`` (the code the faust service
runs) over ``MemoryTables``, with a ``RecordingSink`` and a manual clock. Unit
tests, the what-if simulator and the chaos checker drive the rules through it, so
what they see is what the service does: parking and re-feeding, admission slots
and queues, duplicates re-asserted, timers in the timer table. There is no second
implementation of any of it here, only the parts the service gets from Kafka:

- **a batch per input**: ``feed`` decides one input (and what it unblocks) in a
  batch of its own and commits it, as a batch of one record;
- **its own output read back**: with ``echo`` (the default) the events it publishes
  to a workflow topic are read back and decided as the service reads its topic,
  the requests it only seals (``decoding.is_own_echo``) excepted;
- **a clock**: ``advance`` moves it forward through every timer due on the way,
  each fired (``Processor.fire``) at its own due time, earliest first, so three
  days of waiting pass in microseconds.

Everything is on partition 0 of a one-partition topic, so an admission limit is
the flow's whole limit.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Mapping
from pathlib import Path
from typing import Any

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.headers import EventHeaders
from sagalog.events import StateTransition
from sagalog.flows.loader import load_flows
from sagalog.flows.model import Flow
from sagalog.flows.registry import FlowRegistry
from sagalog.flows.states import WorkflowState
from sagalog.priority import Priority
from sagalog.topology.loader import load_topology
from sagalog.tracker.actions import TRANSITIONS_TOPIC, Alert, Decision, Outcome, Publish
from sagalog.tracker.compensation import CompensationRetry
from sagalog.tracker.decoding import is_own_echo
from sagalog.tracker.inputs import TrackedEvent, TrackerInput
from sagalog.tracker.processor import NOTHING_DUE, Batch, Processor
from sagalog.tracker.record import WorkflowRecord
from sagalog.tracker.recording import RecordingSink
from sagalog.tracker.tables import MemoryTables, Table
from sagalog.tracker.timers import Timer, TimerKind, decode_timer

PARTITION = 0
"""The one partition everything lives on."""


class TrackerHarness:
    """The tracker's ``Processor`` over memory and a manual clock (see the module docstring).

    Args:
        flows: the loaded flow versions.
        secret: the key of gate tokens.
        now_ms: the clock's start (ms since the epoch).
        echo: read the published workflow-topic events back, as the service does.
        admission: the most active workflows per flow name.
        retry: how stuck compensations are retried.
    """

    def __init__(
        self,
        flows: FlowRegistry | Iterable[Flow],
        *,
        secret: bytes,
        now_ms: int = 0,
        echo: bool = True,
        admission: Mapping[str, int] | None = None,
        retry: CompensationRetry | None = None,
    ) -> None:
        registry = flows if isinstance(flows, FlowRegistry) else FlowRegistry(flows)
        self.now_ms = now_ms
        self.echo = echo
        self.tables = MemoryTables()
        self.sink = RecordingSink(keep=True)
        self.processor = Processor(
            registry=registry,
            secret=secret,
            partitions=1,
            sink=self.sink,
            admission=admission,
            retry=retry,
        )
        self._ids = itertools.count(1)

    @classmethod
    def for_project(
        cls, project_dir: Path | str, *, secret: bytes, **options: Any
    ) -> TrackerHarness:
        """The harness over a project's flows (``topology/flows``), loaded and checked as
        the tracker loads them; ``options`` as for the constructor."""
        root = Path(project_dir)
        catalog = SchemaCatalog.load(root / "schemas")
        topology = load_topology(root / "topology", known_schemas=catalog)
        flows = load_flows(root / "topology" / "flows", catalog=catalog, topology=topology)
        return cls(flows, secret=secret, **options)

    @property
    def registry(self) -> FlowRegistry:
        return self.processor.registry

    @registry.setter
    def registry(self, registry: FlowRegistry) -> None:
        """Deploy other flow versions mid-run (in-flight workflows keep their own)."""
        self.processor.registry = registry

    # -- inputs ----------------------------------------------------------------------

    def event(
        self,
        event_type: str,
        workflow_id: str,
        *,
        event_id: str | None = None,
        priority: Priority | None = None,
        **payload: Any,
    ) -> TrackedEvent:
        """An event as an agent or the gateway would publish it now (a fresh id unless given)."""
        headers = EventHeaders(
            id=event_id or f"e{next(self._ids)}",
            type=event_type,
            source="test",
            workflow_id=workflow_id,
            time=dt.datetime.fromtimestamp(self.now_ms / 1000, dt.UTC),
            priority=priority.name if priority is not None else None,
        )
        return TrackedEvent.from_headers(headers, payload)

    def send(
        self, event_type: str, workflow_id: str, *, event_id: str | None = None, **payload: Any
    ) -> Decision:
        """Build an event with ``event`` and feed it."""
        return self.feed(self.event(event_type, workflow_id, event_id=event_id, **payload))

    def feed(self, event: TrackerInput, *, topic: str | None = None) -> Decision:
        """Decide ``event`` (read from ``topic``; by default its flow's) now, in a batch of
        its own, then read back what it published; the decision of ``event`` itself."""
        if topic is None:
            topic = self._topic_of(event)
        return self._run(
            lambda batch: self.processor.handle(
                batch, PARTITION, event, now_ms=self.now_ms, topic=topic
            ),
        )

    def store(self, record: WorkflowRecord) -> None:
        """Put ``record`` and the timers it expects into the tables, as a restored or
        older release's state would be found there."""
        batch = self.processor.begin(self.tables)
        batch.overlay.put(
            Table.RECORDS, PARTITION, record.workflow_id.encode(), record.model_dump_json().encode()
        )
        for timer in record.timers:
            batch.overlay.put(Table.TIMERS, PARTITION, timer.key.encode(), b"")
        _now(self.processor.commit(batch))

    # -- the clock ---------------------------------------------------------------------

    def next_due_ms(self) -> int | None:
        """When the earliest pending timer is due (None when none is); its wake-up key
        may be due earlier (``sagalog.tracker.timers``)."""
        timers = self.timers
        return timers[0].due_ms if timers else None

    def next_key_ms(self) -> int | None:
        """When the timer table's earliest key is due, a wake-up key included: the
        next moment ``advance_to`` may decide something (or find nothing due there
        yet); None when the table is empty."""
        timer = self.processor.next_timer(self.processor.begin(self.tables), PARTITION)
        return None if timer is None else timer.due_ms

    def fire_next(self) -> Decision | None:
        """Fire the earliest pending timer at its due time (the clock moves there if it
        was earlier); its decision, None when no timer is pending."""
        while (decision := self._fire_key(None)) is not None:
            if decision.reason != NOTHING_DUE:  # an early wake-up: on to the next key
                return decision
        return None

    def _fire_key(self, until_ms: int | None) -> Decision | None:
        """Fire the earliest key of the timer table (a wake-up or an older release's
        single timer) at its due time, if it is due by ``until_ms``; None when none is."""
        timer = self.processor.next_timer(self.processor.begin(self.tables), PARTITION)
        if timer is None or (until_ms is not None and timer.due_ms > until_ms):
            return None
        self.now_ms = max(self.now_ms, timer.due_ms)
        return self._run(
            lambda batch: self.processor.fire(batch, PARTITION, timer, now_ms=self.now_ms)
        )

    def advance(self, ms: int) -> list[Decision]:
        """Move the clock ``ms`` forward, firing every timer on the way at its due time."""
        return self.advance_to(self.now_ms + ms)

    def advance_to(self, target_ms: int) -> list[Decision]:
        """Move the clock to ``target_ms``, firing every timer due by then, earliest first."""
        decisions = []
        while (decision := self._fire_key(target_ms)) is not None:
            if decision.reason != NOTHING_DUE:
                decisions.append(decision)
        self.now_ms = max(self.now_ms, target_ms)
        return decisions

    # -- reading -------------------------------------------------------------------------

    def get(self, workflow_id: str) -> WorkflowRecord | None:
        """The stored record of ``workflow_id``; None when it is not tracked."""
        raw = self.tables.get(Table.RECORDS, PARTITION, workflow_id.encode())
        return None if raw is None else WorkflowRecord.from_json(raw)

    def record(self, workflow_id: str) -> WorkflowRecord:
        record = self.get(workflow_id)
        if record is None:
            raise KeyError(f"no workflow {workflow_id!r} is tracked")
        return record

    def state(self, workflow_id: str) -> WorkflowState:
        return self.record(workflow_id).state

    @property
    def records(self) -> dict[str, WorkflowRecord]:
        """Every stored record, by workflow id."""
        rows = self.tables.scan(Table.RECORDS, PARTITION, b"", b"\xff", 1 << 62)
        return {key.decode(): WorkflowRecord.from_json(value) for key, value in rows}

    @property
    def timers(self) -> list[Timer]:
        """The timers pending, earliest first: those the records expect, and the single
        timers an older release left in the table (``store``)."""
        rows = self.tables.scan(Table.TIMERS, PARTITION, b"", b"\xff", 1 << 62)
        pending = {timer for record in self.records.values() for timer in record.timers}
        pending.update(decode_timer(key) for key, _ in rows)
        return sorted((t for t in pending if t.kind is not TimerKind.WAKE), key=lambda t: t.key)

    @property
    def published(self) -> list[Publish]:
        return self.sink.actions

    @property
    def alerts(self) -> list[Alert]:
        return self.sink.alerts

    @property
    def outcomes(self) -> Counter[Outcome]:
        return self.processor.outcomes

    def events_of(self, event_type: str, *, workflow_id: str | None = None) -> list[Any]:
        """The payloads published of one type (optionally for one workflow), in order."""
        return [
            p.event
            for p in self.published
            if p.event.event_type == event_type
            and (workflow_id is None or p.workflow_id == workflow_id)
        ]

    def transitions(self, workflow_id: str) -> list[tuple[str, str, str | None]]:
        """``(from, to, step)`` of every transition published for ``workflow_id``."""
        return [
            (p.event.from_state, p.event.to_state, p.event.step)
            for p in self.published
            if isinstance(p.event, StateTransition) and p.workflow_id == workflow_id
        ]

    # -- the service's part ------------------------------------------------------------

    def _run(self, step: Callable[[Batch], Decision]) -> Decision:
        """One batch: ``step`` decides into it, then it is committed and its output read back."""
        seen = len(self.sink.actions)
        batch = self.processor.begin(self.tables)
        decision = step(batch)
        _now(self.processor.commit(batch))
        if self.echo:
            for publish in self.sink.actions[seen:]:
                headers = publish.headers()
                if publish.topic == TRANSITIONS_TOPIC or is_own_echo(headers):
                    continue
                echoed = TrackedEvent.from_headers(headers, publish.event.to_avro())
                self.feed(echoed, topic=publish.topic)
        return decision

    def _topic_of(self, event: TrackerInput) -> str:
        """The topic ``event`` would be read from: its workflow's, or the topic of the
        flow its type starts."""
        record = self.get(event.workflow_id)
        if record is not None:
            return self.registry.get(record.flow, record.flow_version).topic
        if isinstance(event, TrackedEvent):
            for name in self.registry.names():
                latest = self.registry.latest(name)
                if latest.starts_on == event.event_type:
                    return latest.topic
        return ""


def _now(work: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never waits (the recording sink's flush, memory's sync)."""
    try:
        work.send(None)
    except StopIteration as done:
        return done.value
    work.close()
    raise RuntimeError("an in-memory commit waited on something: the harness cannot run it")
