"""A whole flow in memory: the tracker's rules and the agents' handlers together, no
broker, on a clock the test moves (as Temporal's time-skipping test environment).

A test starts a workflow with its first event and lets it run:

    env = FlowTestEnvironment.for_project(ROOT, agents=[orders.agent])
    env.stub_effect("payments.charge", returns="pay-1")
    env.start(OrderPlaced(order_id="o-1", ...), workflow_id="o-1")
    env.run_until_quiet()
    assert env.state("o-1") == "completed"

Nothing here decides anything of its own. The tracker is ``TrackerHarness`` (the
service's ``Processor`` over memory); each agent is a ``Lane``, the worker's own
part per agent: its triage, projection and effect ledger (RocksDB, in a temporary
folder), handler runs, retries, dead letters and ``StepFailed``. What Kafka does
between them is done by ``MemoryLog``: records are encoded with the production
codec, consumed in order, the retry topic held until its records are due.

Time moves only when the test says so (``advance``), or when nothing is left to do
but an agent's retry that is not due yet: ``run_until_quiet`` then skips to it, as
a worker would wait for it, firing the tracker's timers due on the way. A flow
waiting for a person or a timer is quiet; ``advance(days=1)`` fires its timers in
order, each at its own due time, and lets the agents act on what they publish.
"""

from __future__ import annotations

import datetime as dt
import itertools
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from sagalog.agents.declaration import Agent
from sagalog.agents.settings import AgentSettings
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.models import Event
from sagalog.errors import ConfigurationError
from sagalog.events import EffectRecorded, GateDecided, StateTransition
from sagalog.flows.loader import load_flows
from sagalog.flows.model import Flow
from sagalog.flows.registry import FlowRegistry
from sagalog.flows.states import WorkflowState
from sagalog.priority import Priority
from sagalog.services.gateway.decisions import (
    SOURCE as GATEWAY_SOURCE,
)
from sagalog.services.gateway.decisions import (
    Decision,
    check_decision,
    decision_event_id,
)
from sagalog.testing.effects import EffectCall, EffectStub, EffectStubs
from sagalog.testing.exceptions import FlowNotQuiet
from sagalog.testing.memory_agents import MemoryAgents
from sagalog.testing.memory_log import (
    CatalogRegistry,
    DeadLetter,
    LoggedEvent,
    LogRecord,
    MemoryLog,
)
from sagalog.testing.tracker_harness import TrackerHarness
from sagalog.topology.loader import load_topology
from sagalog.tracker.actions import TRANSITIONS_TOPIC
from sagalog.tracker.decoding import payload_types, read_event
from sagalog.tracker.gates import gate_token
from sagalog.tracker.inputs import TrackedEvent
from sagalog.tracker.record import WorkflowRecord

E = TypeVar("E", bound=Event)

TEST_SECRET = b"sagalog test environment gate secret"
"""The gate secret unless one is given: tests only (an agent that verifies approvals
must be given the same, e.g. through its settings' environment variable)."""
START = dt.datetime(2030, 1, 7, 9, tzinfo=dt.UTC)
"""Where the clock starts unless told: a fixed Monday morning, so runs repeat."""
TRACKER = "saga tracker"
"""The tracker's name among the log's readers: an agent's name cannot hold a space."""
MAX_BATCHES = 10_000
"""Batches ``run_until_quiet`` runs before it calls the flow a loop (``FlowNotQuiet``)."""


class FlowTestEnvironment:
    """Flows and their agents in one process, in memory, on a manual clock.

    Args:
        flows: the loaded flow versions (``for_project`` loads a project's).
        agents: the agents, as their services declare them; each is checked against
            the flows and the catalog as it is when its service starts.
        catalog: the event schemas (the codec encodes every record with them).
        secret: the gate secret of the tracker (and of ``decide_gate``).
        start: where the clock starts.
        settings: the agents' runtime settings (retries, breakers, timeouts); by
            default ``AgentSettings`` with tracing off.
        strict_effects: an effect without a stub fails its handler instead of
            calling the real function (the failure is raised by ``run_until_quiet``).
        data_dir: where the agents' RocksDB state lives; a temporary folder by
            default, removed by ``close``.
    """

    def __init__(
        self,
        flows: FlowRegistry | Iterable[Flow],
        agents: Sequence[Agent],
        *,
        catalog: SchemaCatalog,
        secret: bytes = TEST_SECRET,
        start: dt.datetime = START,
        settings: AgentSettings | None = None,
        strict_effects: bool = False,
        data_dir: Path | None = None,
    ) -> None:
        registry = flows if isinstance(flows, FlowRegistry) else FlowRegistry(flows)
        self.secret = secret
        self.tracker = TrackerHarness(
            registry, secret=secret, now_ms=int(start.timestamp() * 1000), echo=False
        )
        self.catalog = catalog
        self.codec = EventCodec(catalog=catalog, registry=CatalogRegistry(catalog))
        self.log = MemoryLog()
        self.effects = EffectStubs(strict=strict_effects)
        self._folder = (
            None if data_dir is not None else tempfile.TemporaryDirectory(prefix="sagalog-flow-")
        )
        self._ids = itertools.count(1)
        self._published = 0  # the tracker's actions already put in the log
        self._needs_payload = payload_types(registry)
        self.agents = MemoryAgents(
            agents,
            flows=registry,
            catalog=catalog,
            codec=self.codec,
            log=self.log,
            settings=settings or AgentSettings(tracing=False, log_level="WARNING"),
            perform=self.effects.perform,
            clock_ms=lambda: self.now_ms,
            data_dir=data_dir or Path(self._folder.name),  # type: ignore[union-attr]
        )

    @classmethod
    def for_project(
        cls, project_dir: Path | str, agents: Sequence[Agent], **options: Any
    ) -> FlowTestEnvironment:
        """The environment of a project's flows (``topology/flows``) and schemas,
        loaded and checked as the tracker loads them; ``options`` as for the
        constructor."""
        root = Path(project_dir)
        catalog = SchemaCatalog.load(root / "schemas")
        topology = load_topology(root / "topology", known_schemas=catalog)
        flows = load_flows(root / "topology" / "flows", catalog=catalog, topology=topology)
        return cls(flows, agents, catalog=catalog, **options)

    def close(self) -> None:
        """Close the agents' stores and remove their folder."""
        self.agents.close()
        if self._folder is not None:
            self._folder.cleanup()

    def __enter__(self) -> FlowTestEnvironment:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    # -- the clock ---------------------------------------------------------------------

    @property
    def now_ms(self) -> int:
        return self.tracker.now_ms

    @property
    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.now_ms / 1000, dt.UTC)

    def advance(
        self,
        *,
        days: float = 0,
        hours: float = 0,
        minutes: float = 0,
        seconds: float = 0,
        ms: int = 0,
    ) -> None:
        """Move the clock forward, the tracker's timers firing each at its own due
        time and the agents handling what they publish before the next one fires."""
        span = dt.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
        self.advance_to(self.now_ms + int(span.total_seconds() * 1000) + ms)

    def advance_to(self, target_ms: int) -> None:
        """Move the clock to ``target_ms`` (see ``advance``)."""
        self.run_until_quiet(until_ms=target_ms)
        while (due := self._next_due_ms()) is not None and due <= target_ms:
            self.tracker.advance_to(due)
            self.run_until_quiet(until_ms=target_ms)
        self.tracker.advance_to(max(target_ms, self.now_ms))

    def _next_due_ms(self) -> int | None:
        """The next moment anything is due: a tracker's timer or an agent's retry."""
        known = [d for d in (self.tracker.next_key_ms(), self.agents.next_retry_ms()) if d]
        return min(known) if known else None

    # -- inputs ----------------------------------------------------------------------------

    def start(
        self,
        event: Event,
        *,
        workflow_id: str,
        event_id: str | None = None,
        priority: Priority | None = None,
    ) -> str:
        """Publish the event that starts a workflow, as the system that starts it does;
        its event id. Nothing runs until ``run_until_quiet`` or ``advance``."""
        return self.publish(event, workflow_id=workflow_id, event_id=event_id, priority=priority)

    def publish(
        self,
        event: Event,
        *,
        workflow_id: str,
        topic: str | None = None,
        event_id: str | None = None,
        source: str = "test",
        priority: Priority | None = None,
    ) -> str:
        """Publish any event on a workflow's topic (by default the topic of its flow),
        as an outside system or a person would; its event id."""
        record = self.tracker.get(workflow_id)
        return self._publish(
            event,
            workflow_id=workflow_id,
            topic=topic or self._topic_for(event.event_type, record),
            event_id=event_id,
            source=source,
            priority=priority.name if priority is not None else None,
            flow_version=None if record is None else record.flow_version,
        )

    def decide_gate(
        self,
        workflow_id: str,
        *,
        approve: bool,
        by: str,
        comment: str | None = None,
    ) -> str:
        """Decide the workflow's open gate as the gateway publishes a person's decision:
        the same checks (``check_decision``), token, event id and ``GateDecided``;
        the decision's event id.

        Raises:
            GatewayError: the workflow is unknown or waits for no decision, as the
                gateway would refuse it.
        """
        record = self.tracker.get(workflow_id)
        gate = None if record is None else record.gate
        token = (
            "" if gate is None else gate_token(self.secret, workflow_id, gate.gate, gate.attempt)
        )
        flow = (
            None if record is None else self.tracker.registry.get(record.flow, record.flow_version)
        )
        opened = check_decision(
            record, workflow_id=workflow_id, token=token, secret=self.secret, flow=flow
        )
        assert record is not None and flow is not None
        decision = Decision.APPROVE if approve else Decision.REJECT
        event = GateDecided(
            gate=opened.gate,
            token=token,
            decision=decision.gate_decision,
            decided_by=by,
            comment=comment,
        )
        return self._publish(
            event,
            workflow_id=workflow_id,
            topic=flow.topic,
            event_id=decision_event_id(token, decision),
            source=GATEWAY_SOURCE,
            priority=record.priority.name,
            flow_version=record.flow_version,
        )

    def stub_effect(
        self,
        effect: str,
        *,
        returns: Any = None,
        raises: BaseException | list[BaseException | None] | None = None,
        call: Callable[..., Any] | None = None,
    ) -> EffectStub:
        """Answer ``effect``'s calls (by its ``ctx.effect`` name) with ``returns``, raise
        ``raises`` (one per call in turn when a list, ``None`` meaning answer), or run
        ``call(*args, idempotency_key=..., **kwargs)`` instead of the real function."""
        if call is not None:
            return self.effects.stub(effect, call=call)
        return self.effects.stub(effect, returns=returns, raises=raises)

    def effect_calls(
        self, effect: str | None = None, *, workflow_id: str | None = None
    ) -> list[EffectCall]:
        """The effects' calls the handlers made, in order (a repeat the ledger answered
        made no call)."""
        return self.effects.of(effect, workflow_id=workflow_id)

    # -- running -----------------------------------------------------------------------------

    def run_until_quiet(self, *, until_ms: int | None = None) -> None:
        """Deliver every record to the tracker and the agents until nothing is left
        to do but wait for a person or a tracker's timer. An agent's retry that is not
        due yet is waited for by moving the clock to it (no further than
        ``until_ms``), the tracker's timers due before it firing on the way.

        Raises:
            FlowNotQuiet: after ``MAX_BATCHES`` batches the flow was still busy (a loop
                between handlers), or an effect had no stub under ``strict_effects``.
        """
        for _ in range(MAX_BATCHES):
            if self._deliver():
                continue
            retry = self.agents.next_retry_ms()
            if retry is None or (until_ms is not None and retry > until_ms):
                break
            self.tracker.advance_to(retry)
        else:
            raise FlowNotQuiet(
                f"the flows were still busy after {MAX_BATCHES} batches; the last records: "
                + ", ".join(f"{r.topic()}:{r.header('ce_type')}" for r in self._tail(5))
            )
        if self.effects.missing:
            missing = ", ".join(sorted(set(self.effects.missing)))
            self.effects.missing.clear()
            raise FlowNotQuiet(
                f"effect(s) without a stub under strict_effects: {missing}; "
                "add env.stub_effect(name, returns=...)"
            )

    def _deliver(self) -> bool:
        """One round: the tracker reads what is new, then each agent one batch; whether
        anything was delivered."""
        delivered = self._collect_tracker_output()
        for topic in sorted({flow.topic for flow in self.tracker.registry}):
            for record in self.log.consume(TRACKER, topic):
                delivered = True
                self._feed_tracker(record)
        return self.agents.run() or delivered

    def _feed_tracker(self, record: LogRecord) -> None:
        """As the tracker service reads a workflow topic: decoded by ``read_event``, its
        own requests read back only sealed, the rest decided."""
        event = read_event(
            self.codec,
            record.key(),
            record.value(),
            record.headers(),
            needs_payload=self._needs_payload,
        )
        if isinstance(event, TrackedEvent):
            self.tracker.feed(event, topic=record.topic())
        self._collect_tracker_output()

    def _collect_tracker_output(self) -> bool:
        """Put what the tracker published since last time in the log (its transitions
        stay in the harness: no agent reads them)."""
        actions = self.tracker.published[self._published :]
        self._published += len(actions)
        for publish in actions:
            if publish.topic == TRANSITIONS_TOPIC:
                continue
            value = self.codec.encode(
                publish.topic, publish.event.event_type, publish.event.to_avro()
            )
            self.log.append(
                publish.topic, publish.workflow_id.encode(), value, publish.headers().to_kafka()
            )
        return bool(actions)

    def _publish(
        self,
        event: Event,
        *,
        workflow_id: str,
        topic: str,
        event_id: str | None,
        source: str,
        priority: str | None,
        flow_version: int | None,
    ) -> str:
        headers = EventHeaders(
            id=event_id or f"test-{next(self._ids)}",
            type=event.event_type,
            source=source,
            workflow_id=workflow_id,
            time=self.now,
            flow_version=flow_version,
            priority=priority,
        )
        value = self.codec.encode(topic, event.event_type, event.to_avro())
        self.log.append(topic, workflow_id.encode(), value, headers.to_kafka())
        return headers.id

    def _topic_for(self, event_type: str, record: WorkflowRecord | None) -> str:
        registry = self.tracker.registry
        if record is not None:
            return registry.get(record.flow, record.flow_version).topic
        for name in registry.names():
            if registry.latest(name).starts_on == event_type:
                return registry.latest(name).topic
        raise ConfigurationError(
            f"no flow starts on {event_type} (flows: {', '.join(registry.names())}); "
            "start a workflow with its flow's starts_on event, or pass topic="
        )

    def _tail(self, count: int) -> list[LogRecord]:
        return sorted(self.log, key=lambda r: r.offset())[-count:]

    # -- reading -------------------------------------------------------------------------

    def record(self, workflow_id: str) -> WorkflowRecord:
        """The tracker's record of ``workflow_id``."""
        return self.tracker.record(workflow_id)

    def state(self, workflow_id: str) -> WorkflowState:
        return self.tracker.state(workflow_id)

    def transitions(self, workflow_id: str) -> list[tuple[str, str, str | None]]:
        """``(from, to, step)`` of every transition of ``workflow_id``."""
        return self.tracker.transitions(workflow_id)

    def state_transitions(self, workflow_id: str) -> list[StateTransition]:
        return [
            p.event
            for p in self.tracker.published
            if isinstance(p.event, StateTransition) and p.workflow_id == workflow_id
        ]

    def events(self, workflow_id: str) -> list[LoggedEvent]:
        """Every event of ``workflow_id`` on its flow's topic, in log order."""
        record = self.tracker.get(workflow_id)
        topics = (
            [self.tracker.registry.get(record.flow, record.flow_version).topic]
            if record is not None
            else sorted({flow.topic for flow in self.tracker.registry})
        )
        return self.log.events(topics, workflow_id, self.codec)

    def event_types(self, workflow_id: str) -> list[str]:
        """The types of ``workflow_id``'s events, in log order (``EffectRecorded``
        left out: one per effect call, they say what ``effect_calls`` says)."""
        return [
            e.event_type
            for e in self.events(workflow_id)
            if e.event_type != EffectRecorded.event_type
        ]

    def latest(self, workflow_id: str, event_class: type[E]) -> E | None:
        """The latest ``event_class`` event of ``workflow_id``, None when it has none."""
        found = [e for e in self.events(workflow_id) if e.event_type == event_class.event_type]
        return found[-1].as_(event_class) if found else None

    def dead_letters(self, workflow_id: str | None = None) -> list[DeadLetter]:
        """The records the agents dead-lettered (optionally of one workflow)."""
        topics = {lane.settings.deadletter_topic for lane in self.agents.lanes}
        return self.log.dead_letters(sorted(topics), workflow_id)
