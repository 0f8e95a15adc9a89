"""The replay engine without Kafka: records in, the tracker's processor decides, timers fire
where the journal and the tracker's read-back output place them."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, cast

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders
from sagalog.flows.registry import FlowRegistry
from sagalog.replay.engine import ReplayClock, ReplayEngine
from sagalog.replay.journal import Decided, MemoryJournal
from sagalog.replay.processing import Processor
from sagalog.tracker import TRACKER_SOURCE, WorkflowRecord, gate_token
from sagalog.tracker.recording import RecordingSink
from sagalog.tracker.tables import MemoryTables, Table
from sagalog.tracker.timers import TimerKind, timer_key

from .test_tracker_processor import SECRET, TOPIC, orders_registry

T0 = 1_800_000_000_000
H = 3_600_000
MIN = 60_000
FORWARD = [
    "procurement.v1.RequestSubmitted",
    "procurement.v1.BudgetReserved",
    "procurement.v1.RequestClassified",
    "procurement.v1.PoliciesRetrieved",
]


class FakeMessage:
    def __init__(self, offset: int, headers: EventHeaders, value: bytes) -> None:
        self._offset, self._headers, self._value = offset, headers, value

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return self._headers.workflow_id.encode()

    def value(self) -> bytes:
        return self._value

    def headers(self) -> list[tuple[str, str | bytes | None]]:
        return self._headers.to_kafka()


class JsonCodec:
    """Decodes the test's payloads (JSON), where the tracker decodes Avro."""

    class Decoded:
        def __init__(self, payload: dict[str, Any]) -> None:
            self.payload = payload

    def decode(self, value: bytes) -> Decoded:
        return self.Decoded(json.loads(value))


class Log:
    """A workflow topic partition written as the tracker and its agents would, and the
    journal the tracker would have left for it."""

    def __init__(self) -> None:
        self.messages: list[FakeMessage] = []
        self.journal = MemoryJournal()

    def event(
        self,
        event_type: str,
        event_id: str,
        *,
        time_ms: int,
        decided_ms: int | None = None,
        source: str = "test/agent",
        causation: str | None = None,
        **payload: Any,
    ) -> None:
        headers = EventHeaders(
            id=event_id,
            type=event_type,
            source=source,
            workflow_id="wf-1",
            time=dt.datetime.fromtimestamp(time_ms / 1000, dt.UTC),
            causation_id=causation,
        )
        self.messages.append(FakeMessage(len(self.messages), headers, json.dumps(payload).encode()))
        if decided_ms is not None:
            self.decided(event_id, decided_ms)

    def decided(self, cause: str, at_ms: int) -> None:
        self.journal.add([Decided("wf-1", cause, at_ms)])

    def to_gate(self, at_ms: int) -> None:
        for i, event_type in enumerate(FORWARD):
            self.event(event_type, f"ev-{i}", time_ms=at_ms - 5_000, decided_ms=at_ms)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, catalog: SchemaCatalog) -> FlowRegistry:
    return orders_registry(Path(tmp_path_factory.mktemp("orders")), catalog)


def replay(registry: FlowRegistry, log: Log) -> tuple[WorkflowRecord, ReplayEngine]:
    sink = RecordingSink()
    processor = Processor(registry=registry, secret=SECRET, partitions=1, sink=sink)
    engine = ReplayEngine(
        processor=processor,
        journal=log.journal,
        clock=ReplayClock(),
        codec=cast(EventCodec, JsonCodec()),
    )
    batch = processor.begin(MemoryTables())
    engine.feed(batch, cast(Any, log.messages))
    engine.finish(batch, 1)
    raw = batch.overlay.get(Table.RECORDS, 0, b"wf-1")
    assert raw is not None
    return WorkflowRecord.model_validate_json(raw), engine


def timer(kind: TimerKind, ref: str, due_ms: int) -> str:
    return timer_key(due_ms=due_ms, workflow_id="wf-1", kind=kind, ref=ref)


def test_inputs_are_decided_at_the_trackers_recorded_time_not_their_ce_time(
    registry: FlowRegistry,
) -> None:
    log = Log()
    log.to_gate(T0)
    record, _ = replay(registry, log)
    assert record.started_at_ms == T0  # ce_time was 5 s earlier
    assert record.gate is not None and record.gate.deadline_ms == T0 + 72 * H


def test_an_escalation_read_back_fires_before_the_gate_default_on_the_journal(
    registry: FlowRegistry,
) -> None:
    log = Log()
    log.to_gate(T0)
    escalation = timer(TimerKind.GATE_ESCALATION, "manager_approval#1#1", T0 + 24 * H)
    deadline = timer(TimerKind.GATE_DEADLINE, "manager_approval#1", T0 + 72 * H)
    # The escalation moved no state (no transition): only its GateOpened tells.
    log.event(
        "sagalog.v1.GateOpened",
        "out-1",
        time_ms=T0 + 24 * H + 900,
        source=TRACKER_SOURCE,
        causation=f"timer:{escalation}",
    )
    # The default (reject) is on the journal; its first compensation request follows.
    log.decided(f"timer:{deadline}", T0 + 72 * H + 900)
    log.event(
        "sagalog.v1.CompensationRequested",
        "out-2",
        time_ms=T0 + 72 * H + 900,
        source=TRACKER_SOURCE,
        causation=f"timer:{deadline}",
    )
    record, engine = replay(registry, log)
    assert record.state.value == "compensating"
    assert record.gate is not None and record.gate.escalation_level == 1
    assert record.compensation is not None and record.compensation.in_flight == "retrieve_policies"
    assert [t.due_ms for t in record.timers] == [T0 + 72 * H + 900 + 30 * MIN]
    assert (engine.stats.fired_recorded, engine.stats.fired_at_output) == (1, 1)
    assert engine.stats.not_reproduced == []


def test_a_completion_after_a_step_timeout_is_late_as_it_was_live(registry: FlowRegistry) -> None:
    log = Log()
    log.event(FORWARD[0], "ev-0", time_ms=T0, decided_ms=T0)
    timeout = timer(TimerKind.STEP_TIMEOUT, "reserve_budget", T0 + 10 * MIN)
    log.decided(f"timer:{timeout}", T0 + 11 * MIN)
    log.event(
        "sagalog.v1.CompensationRequested",
        "out-1",
        time_ms=T0 + 11 * MIN,
        source=TRACKER_SOURCE,
        causation=f"timer:{timeout}",
    )
    # The agent's completion came after the timeout: live, it changed nothing.
    log.event("procurement.v1.BudgetReserved", "ev-late", time_ms=T0 + 12 * MIN)
    record, engine = replay(registry, log)
    assert record.state.value == "compensating"
    assert record.completed_names == ()
    assert engine.stats.fired_recorded == 1


def test_a_completion_decided_before_a_timer_on_the_journal_keeps_it_from_firing(
    registry: FlowRegistry,
) -> None:
    """Same instant, opposite order: the journal's order decides, not the clock."""
    log = Log()
    log.event(FORWARD[0], "ev-0", time_ms=T0, decided_ms=T0)
    log.event(FORWARD[1], "ev-1", time_ms=T0, decided_ms=T0 + 10 * MIN)
    record, engine = replay(registry, log)
    assert record.current == "classify_request"
    assert engine.stats.fired_recorded == 0


def test_a_timer_that_fired_after_the_last_event_fires_at_the_end(registry: FlowRegistry) -> None:
    log = Log()
    log.to_gate(T0)
    token = gate_token(SECRET, "wf-1", "manager_approval", 1)
    deadline = timer(TimerKind.WORKFLOW_DEADLINE, "workflow", T0 + 5 * 24 * H)
    log.event(
        "sagalog.v1.GateDecided",
        "ev-approve",
        time_ms=T0 + H,
        decided_ms=T0 + H,
        gate="manager_approval",
        token=token,
        decision="APPROVED",
        decided_by="boss",
    )
    log.event("procurement.v1.RiskScored", "ev-5", time_ms=T0 + H, decided_ms=T0 + H)
    log.decided(f"timer:{deadline}", T0 + 5 * 24 * H + 100)  # the PO never came
    record, engine = replay(registry, log)
    assert record.state.value == "compensating"  # the running step is undone first
    assert (
        record.compensation is not None and record.compensation.in_flight == "create_purchase_order"
    )
    assert engine.stats.fired_recorded == 1 and engine.stats.not_reproduced == []


def test_a_recorded_firing_the_replay_cannot_reproduce_is_reported(registry: FlowRegistry) -> None:
    log = Log()
    log.event(FORWARD[0], "ev-0", time_ms=T0, decided_ms=T0)
    # A timer the record never scheduled (another due time): the replay diverged.
    log.decided(f"timer:{timer(TimerKind.STEP_TIMEOUT, 'reserve_budget', T0 + 9 * MIN)}", T0 + H)
    _, engine = replay(registry, log)
    assert len(engine.stats.not_reproduced) == 1


def test_unreadable_records_are_counted_and_listed_not_fatal(registry: FlowRegistry) -> None:
    log = Log()
    log.event(FORWARD[0], "ev-0", time_ms=T0, decided_ms=T0)
    bad = FakeMessage(1, EventHeaders(id="x", type="t.v1.X", source="s", workflow_id="wf-1"), b"")
    bad.headers = lambda: [("ce_id", "x")]  # type: ignore[method-assign]
    log.messages.append(bad)
    _, engine = replay(registry, log)
    assert engine.stats.unreadable == 1
    assert "ce_source" in engine.stats.examples[0].reason
    assert engine.stats.tracked == 1
