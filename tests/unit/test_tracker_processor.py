"""The tracker's processor without Kafka: decide, publish to a fake sink, store at commit.

The flow is ``tests/integration/flows/orders.v1.yaml`` (reserve_budget,
classify_request, retrieve_policies, the gate manager_approval, score_risk,
create_purchase_order; 10m step timeouts, a 5d deadline), loaded over a one-topic
topology written to a temporary folder. The tables are ``MemoryTables``; a batch's
writes reach them only through ``Processor.commit``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.headers import EventHeaders
from sagalog.errors import SagalogError
from sagalog.events import CompensationRequested, GateOpened, StateTransition
from sagalog.flows.loader import load_flows
from sagalog.flows.model import Flow
from sagalog.flows.registry import FlowRegistry
from sagalog.flows.states import WorkflowState
from sagalog.priority import Priority
from sagalog.services.tracker.store import MemoryTables, Table, parked_prefix
from sagalog.topology.loader import load_topology
from sagalog.tracker import Alert, Decision, Outcome, Publish, TrackedEvent, WorkflowRecord
from sagalog.tracker.processor import NOTHING_DUE, Batch, Processor
from sagalog.tracker.timers import wake_timer

SECRET = b"unit-test-gate-secret-32-bytes!!"
T0 = 1_700_000_000_000
MIN = 60_000
H = 60 * MIN

ORDERS_FLOW = Path(__file__).parents[1] / "integration" / "flows" / "orders.v1.yaml"
TOPIC = "orders.events.unit"
SUBMITTED = "procurement.v1.RequestSubmitted"
RESERVED = "procurement.v1.BudgetReserved"
CLASSIFIED = "procurement.v1.RequestClassified"
RETRIEVED = "procurement.v1.PoliciesRetrieved"
SCORED = "procurement.v1.RiskScored"
PO_CREATED = "procurement.v1.PurchaseOrderCreated"
STEP_FAILED = "sagalog.v1.StepFailed"
GATE_DECIDED = "sagalog.v1.GateDecided"
SCHEMAS = (
    SUBMITTED,
    RESERVED,
    CLASSIFIED,
    RETRIEVED,
    SCORED,
    PO_CREATED,
    "procurement.v1.BudgetReleased",
    "procurement.v1.PurchaseOrderCancelled",
    STEP_FAILED,
    "sagalog.v1.GateOpened",
    GATE_DECIDED,
    "sagalog.v1.CompensationRequested",
    "sagalog.v1.CompensationCompleted",
)
FAILED_AT_FIRST_STEP: dict[str, Any] = {
    "step": "reserve_budget",
    "reason": "no budget",
    "error_class": "BudgetError",
    "attempts": 1,
}


def orders_registry(folder: Path, catalog: SchemaCatalog) -> FlowRegistry:
    """orders v1 on ``TOPIC``: the integration tests' flow, its ``{s}`` filled in."""
    (folder / "flows").mkdir(parents=True)
    schemas = "".join(f"      - {name}\n" for name in SCHEMAS)
    (folder / "topics.yaml").write_text(f"topics:\n  {TOPIC}:\n    schemas:\n{schemas}")
    text = ORDERS_FLOW.read_text().replace("{s}", TOPIC.rsplit(".", 1)[1])
    (folder / "flows" / "orders.v1.yaml").write_text(text)
    topology = load_topology(folder, known_schemas=catalog)
    return load_flows(folder / "flows", catalog=catalog, topology=topology)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, catalog: SchemaCatalog) -> FlowRegistry:
    return orders_registry(tmp_path_factory.mktemp("orders"), catalog)


class FakeSink:
    """Collects what the processor publishes; ``fail`` makes the next ``flush`` raise it."""

    def __init__(self) -> None:
        self.published: list[Publish] = []
        self.alerts: list[Alert] = []
        self.alerted_for: list[tuple[str | None, int]] = []
        self.flushes = 0
        self.fail: Exception | None = None

    def publish(self, action: Publish, *, partition: int) -> None:
        self.published.append(action)

    def alert(self, alert: Alert, *, flow: Flow | None, now_ms: int, partition: int) -> None:
        self.alerts.append(alert)
        self.alerted_for.append((flow.label if flow is not None else None, now_ms))

    async def flush(self) -> None:
        self.flushes += 1
        if self.fail is not None:
            error, self.fail = self.fail, None
            raise error

    def types(self, workflow_id: str | None = None) -> list[str]:
        return [
            p.event.event_type
            for p in self.published
            if workflow_id is None or p.workflow_id == workflow_id
        ]

    def transitions(self, workflow_id: str) -> list[tuple[str, str, str | None]]:
        return [
            (p.event.from_state, p.event.to_state, p.event.step)
            for p in self.published
            if isinstance(p.event, StateTransition) and p.workflow_id == workflow_id
        ]


class Lab:
    """A processor over ``MemoryTables`` and a ``FakeSink``, with one open batch."""

    def __init__(self, registry: FlowRegistry, **options: Any) -> None:
        self.sink = FakeSink()
        self.tables = MemoryTables()
        self.processor = Processor(
            registry=registry, secret=SECRET, partitions=1, sink=self.sink, **options
        )
        self.batch: Batch = self.processor.begin(self.tables)
        self.now_ms = T0

    def event(
        self,
        event_type: str,
        workflow_id: str,
        event_id: str,
        *,
        priority: Priority | None = None,
        **payload: Any,
    ) -> TrackedEvent:
        headers = EventHeaders(
            id=event_id,
            type=event_type,
            source="test",
            workflow_id=workflow_id,
            time=dt.datetime.fromtimestamp(self.now_ms / 1000, dt.UTC),
            priority=priority.name if priority is not None else None,
        )
        return TrackedEvent.from_headers(headers, payload)

    def send(
        self,
        event_type: str,
        workflow_id: str,
        event_id: str,
        *,
        priority: Priority | None = None,
        **payload: Any,
    ) -> Decision:
        event = self.event(event_type, workflow_id, event_id, priority=priority, **payload)
        return self.processor.handle(self.batch, 0, event, now_ms=self.now_ms, topic=TOPIC)

    def commit(self) -> int:
        """Commit the open batch and open the next one; how many writes it made."""
        written = asyncio.run(self.processor.commit(self.batch))
        self.batch = self.processor.begin(self.tables)
        return written

    def is_stored(self, workflow_id: str) -> bool:
        return self.tables.get(Table.RECORDS, 0, workflow_id.encode()) is not None

    def stored(self, workflow_id: str) -> WorkflowRecord:
        """The record in the tables (what committed batches wrote)."""
        raw = self.tables.get(Table.RECORDS, 0, workflow_id.encode())
        assert raw is not None, f"no stored record of {workflow_id}"
        return WorkflowRecord.model_validate_json(raw)

    def seen(self, workflow_id: str) -> WorkflowRecord:
        """The record as the open batch sees it (pending writes included)."""
        raw = self.batch.overlay.get(Table.RECORDS, 0, workflow_id.encode())
        assert raw is not None, f"no record of {workflow_id} in the batch"
        return WorkflowRecord.model_validate_json(raw)

    def rows(self, table: Table) -> dict[bytes, bytes]:
        return dict(self.tables.data.get((table, 0), {}))

    def token(self, workflow_id: str) -> str:
        [opened] = [
            p.event
            for p in self.sink.published
            if isinstance(p.event, GateOpened) and p.workflow_id == workflow_id
        ]
        return opened.token


@pytest.fixture
def lab(registry: FlowRegistry) -> Lab:
    return Lab(registry)


def applied(decision: Decision) -> Decision:
    assert decision.outcome is Outcome.APPLIED, decision.reason
    return decision


# -- the forward path --------------------------------------------------------------


def test_the_happy_path_runs_through_the_gate_to_completed(lab: Lab) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    applied(lab.send(RESERVED, "wf-1", "e2"))
    applied(lab.send(CLASSIFIED, "wf-1", "e3"))
    applied(lab.send(RETRIEVED, "wf-1", "e4"))
    assert lab.commit() > 0
    assert lab.stored("wf-1").state is WorkflowState.PENDING_APPROVAL

    verdict: dict[str, Any] = {
        "gate": "manager_approval",
        "decision": "APPROVED",
        "decided_by": "ann",
    }
    applied(lab.send(GATE_DECIDED, "wf-1", "e5", token=lab.token("wf-1"), **verdict))
    applied(lab.send(SCORED, "wf-1", "e6"))
    applied(lab.send(PO_CREATED, "wf-1", "e7"))
    lab.commit()

    record = lab.stored("wf-1")
    assert record.state is WorkflowState.COMPLETED
    assert record.completed_names == (
        "reserve_budget",
        "classify_request",
        "retrieve_policies",
        "manager_approval",
        "score_risk",
        "create_purchase_order",
    )
    assert lab.sink.transitions("wf-1") == [
        ("initiated", "running", "reserve_budget"),
        ("running", "running", "classify_request"),
        ("running", "running", "retrieve_policies"),
        ("running", "pending_approval", "manager_approval"),
        ("pending_approval", "approved", "manager_approval"),
        ("approved", "running", "score_risk"),
        ("running", "running", "create_purchase_order"),
        ("running", "completed", None),
    ]
    assert lab.sink.types().count(GateOpened.event_type) == 1
    assert record.timers == () and lab.rows(Table.TIMERS) == {}  # every timer cancelled
    assert record.wake_ms is None  # and its wake-up key dropped
    assert lab.rows(Table.PARKED) == {} and lab.sink.alerts == []
    assert lab.processor.outcomes == {Outcome.APPLIED: 7}
    assert lab.sink.flushes == 2


def test_records_reach_the_tables_only_when_the_batch_commits(lab: Lab) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))

    assert lab.tables.writes == 0 and not lab.is_stored("wf-1")
    assert lab.rows(Table.TIMERS) == {}
    seen = lab.seen("wf-1")  # the batch reads its own writes
    assert seen.current == "reserve_budget"
    assert lab.sink.flushes == 0

    assert lab.commit() == 2  # the record and its wake-up key (for its two timers)
    assert lab.sink.flushes == 1 and lab.tables.writes == 2
    stored = lab.stored("wf-1")
    assert (stored.state, stored.current) == (WorkflowState.RUNNING, "reserve_budget")


def test_a_later_event_of_the_batch_sees_the_record_an_earlier_one_left(lab: Lab) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    applied(lab.send(RESERVED, "wf-1", "e2"))  # decided against the unstored record
    assert lab.tables.writes == 0
    lab.commit()
    stored = lab.stored("wf-1")
    assert stored.current == "classify_request"


def test_a_failed_flush_stores_nothing_so_a_redelivery_decides_again(lab: Lab) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    first = [(p.event_id, p.event) for p in lab.sink.published]
    lab.sink.fail = SagalogError("Kafka refused 1 tracker record(s)")

    with pytest.raises(SagalogError, match="refused"):
        asyncio.run(lab.processor.commit(lab.batch))
    assert lab.tables.writes == 0
    assert not lab.is_stored("wf-1") and lab.rows(Table.TIMERS) == {}

    # The batch is consumed again by a fresh one: same decision, same event ids.
    lab.batch = lab.processor.begin(lab.tables)
    lab.sink.published.clear()
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    assert [(p.event_id, p.event) for p in lab.sink.published] == first
    assert lab.commit() == 2
    assert lab.is_stored("wf-1")


def test_a_duplicate_after_commit_rewrites_the_record_and_its_timers_and_publishes_nothing(
    lab: Lab,
) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    applied(lab.send(RESERVED, "wf-1", "e2"))
    lab.commit()
    record_before = lab.rows(Table.RECORDS)[b"wf-1"]
    timers_before = lab.rows(Table.TIMERS)
    published, writes = len(lab.sink.published), lab.tables.writes

    decision = lab.send(RESERVED, "wf-1", "e2")
    assert decision.outcome is Outcome.DUPLICATE and decision.record is None
    assert len(lab.sink.published) == published
    assert lab.tables.writes == writes  # nothing before the commit

    stored = lab.stored("wf-1")
    assert len(stored.timers) == 2  # deadline, classify_request timeout
    assert lab.commit() == 2
    assert lab.tables.writes - writes == 2  # the record and its wake-up key, again
    assert lab.rows(Table.RECORDS)[b"wf-1"] == record_before
    assert lab.rows(Table.TIMERS) == timers_before
    assert stored.wake_ms == min(t.due_ms for t in stored.timers)
    assert set(timers_before) == {wake_timer("wf-1", stored.wake_ms).key.encode()}
    assert lab.processor.outcomes[Outcome.DUPLICATE] == 1


def test_an_unknown_workflows_non_start_event_is_ignored_and_changes_nothing(lab: Lab) -> None:
    decision = lab.send(RESERVED, "wf-ghost", "e1")

    assert decision.outcome is Outcome.IGNORED and decision.record is None
    assert "no workflow wf-ghost is tracked" in (decision.reason or "")
    assert lab.sink.published == [] and lab.sink.alerts == []
    assert all(pending == {} for pending in lab.batch.overlay.pending.values())
    assert lab.commit() == 0
    assert lab.tables.writes == 0 and not lab.is_stored("wf-ghost")
    assert lab.processor.outcomes == {Outcome.IGNORED: 1}


def test_an_effect_after_the_end_goes_to_the_sink_as_an_alert_and_stores_nothing(
    lab: Lab,
) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    ended = applied(lab.send(STEP_FAILED, "wf-1", "f1", **FAILED_AT_FIRST_STEP))
    assert ended.record is not None and ended.record.state is WorkflowState.FAILED
    lab.commit()
    published, writes = len(lab.sink.published), lab.tables.writes

    lab.now_ms += MIN
    late = lab.send(RESERVED, "wf-1", "e2")  # the budget was reserved after all
    assert late.outcome is Outcome.IGNORED and late.record is None
    assert [a.name for a in lab.sink.alerts] == ["effect_after_end"]
    assert lab.sink.alerts[0].workflow_id == "wf-1"
    assert lab.sink.alerted_for == [("orders v1", T0 + MIN)]
    assert len(lab.sink.published) == published
    assert lab.commit() == 0 and lab.tables.writes == writes


# -- out of order ------------------------------------------------------------------


def test_an_early_completion_is_parked_and_applied_once_its_predecessor_arrives(lab: Lab) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    lab.commit()

    parked = lab.send(CLASSIFIED, "wf-1", "e3")  # before reserve_budget completed
    assert parked.outcome is Outcome.PARKED and parked.record is None
    lab.commit()
    [(key, value)] = lab.rows(Table.PARKED).items()
    assert key == parked_prefix("wf-1") + b"e3"
    assert TrackedEvent.model_validate_json(value).event_type == CLASSIFIED
    assert lab.stored("wf-1").current == "reserve_budget"

    published = len(lab.sink.published)
    decision = applied(lab.send(RESERVED, "wf-1", "e2"))
    assert decision.record is not None and decision.record.current == "classify_request"
    lab.commit()

    record = lab.stored("wf-1")
    assert record.current == "retrieve_policies"  # the parked completion applied too
    assert record.completed_names == ("reserve_budget", "classify_request")
    assert lab.rows(Table.PARKED) == {}
    steps = [
        (p.event.step, p.causation_id)
        for p in lab.sink.published[published:]
        if isinstance(p.event, StateTransition)
    ]
    assert steps == [("classify_request", "e2"), ("retrieve_policies", "e3")]
    assert lab.processor.outcomes == {Outcome.APPLIED: 3, Outcome.PARKED: 1}


def test_parked_events_stay_parked_while_still_early(lab: Lab) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    assert lab.send(RETRIEVED, "wf-1", "e4").outcome is Outcome.PARKED
    applied(lab.send(RESERVED, "wf-1", "e2"))  # retrieve_policies is still two ahead
    lab.commit()
    assert list(lab.rows(Table.PARKED)) == [parked_prefix("wf-1") + b"e4"]

    applied(lab.send(CLASSIFIED, "wf-1", "e3"))
    lab.commit()
    assert lab.rows(Table.PARKED) == {}
    assert lab.stored("wf-1").state is WorkflowState.PENDING_APPROVAL


def test_parked_events_of_another_workflow_whose_id_extends_this_one_are_left_alone(
    lab: Lab,
) -> None:
    applied(lab.send(SUBMITTED, "a", "a1"))
    applied(lab.send(SUBMITTED, "a|b", "b1"))
    assert lab.send(CLASSIFIED, "a|b", "b3").outcome is Outcome.PARKED
    applied(lab.send(RESERVED, "a", "a2"))
    lab.commit()
    assert list(lab.rows(Table.PARKED)) == [parked_prefix("a|b") + b"b3"]
    assert lab.stored("a|b").current == "reserve_budget"


# -- timers ------------------------------------------------------------------------


def test_a_workflow_has_one_wake_up_key_due_with_its_earliest_timer(lab: Lab) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    lab.commit()
    assert [(t.kind, t.due_ms) for t in lab.stored("wf-1").timers] == [
        ("workflow_deadline", T0 + 5 * 24 * H),
        ("step_timeout", T0 + 10 * MIN),
    ]
    assert list(lab.rows(Table.TIMERS)) == [b"%015d|wf-1|wake|next" % (T0 + 10 * MIN)]


def test_a_step_that_hands_over_to_the_next_writes_no_timer_key(lab: Lab) -> None:
    """The next step's timeout is later than the one it cancels: the wake-up stays."""
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    lab.commit()
    keys = lab.rows(Table.TIMERS)
    lab.now_ms = T0 + MIN
    applied(lab.send(RESERVED, "wf-1", "e2"))
    assert lab.commit() == 1  # the record alone
    assert lab.rows(Table.TIMERS) == keys
    assert lab.stored("wf-1").current == "classify_request"


def test_a_saga_decided_event_by_event_writes_two_timer_keys_in_all(lab: Lab) -> None:
    """Its wake-up key is put by the start and deleted by the end; every step between
    cancels and schedules timers in its record only (a single-timer key per timer
    wrote 16 here: a put and a delete each)."""
    written = []

    def batch(event_type: str, event_id: str, **fields: Any) -> None:
        applied(lab.send(event_type, "wf-1", event_id, **fields))
        written.append(len(lab.batch.overlay.pending[Table.TIMERS]))
        lab.commit()

    for event_type, event_id in ((SUBMITTED, "e1"), (RESERVED, "e2"), (CLASSIFIED, "e3")):
        batch(event_type, event_id)
    batch(RETRIEVED, "e4")
    verdict = {"gate": "manager_approval", "decision": "APPROVED", "decided_by": "ann"}
    batch(GATE_DECIDED, "e5", token=lab.token("wf-1"), **verdict)
    batch(SCORED, "e6")
    batch(PO_CREATED, "e7")

    assert lab.stored("wf-1").state is WorkflowState.COMPLETED
    assert written == [1, 0, 0, 0, 0, 0, 1]


def test_an_early_wake_up_fires_nothing_and_moves_to_the_earliest_timer(lab: Lab) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    lab.commit()
    lab.now_ms = T0 + MIN
    applied(lab.send(RESERVED, "wf-1", "e2"))  # classify_request's timeout: T0 + 11 min
    lab.commit()
    published = len(lab.sink.published)

    assert lab.processor.fire_due(lab.batch, 0, now_ms=T0 + 10 * MIN, limit=100) == 1
    assert len(lab.sink.published) == published and lab.processor.fired == 0
    assert lab.processor.woke_early == 1
    lab.commit()
    assert list(lab.rows(Table.TIMERS)) == [b"%015d|wf-1|wake|next" % (T0 + 11 * MIN)]
    assert lab.stored("wf-1").wake_ms == T0 + 11 * MIN

    assert lab.processor.fire_due(lab.batch, 0, now_ms=T0 + 11 * MIN, limit=100) == 1
    assert lab.processor.fired == 1 and lab.processor.woke_early == 1  # this one fired
    assert lab.seen("wf-1").state is WorkflowState.COMPENSATING


def test_fire_due_fires_only_due_timers_and_deletes_them(lab: Lab) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    lab.commit()
    published = len(lab.sink.published)

    assert lab.processor.fire_due(lab.batch, 0, now_ms=T0 + 10 * MIN - 1, limit=100) == 0
    assert len(lab.sink.published) == published and lab.processor.fired == 0
    assert lab.commit() == 0

    due = T0 + 10 * MIN
    assert lab.processor.fire_due(lab.batch, 0, now_ms=due, limit=100) == 1
    assert lab.processor.fired == 1
    record = lab.seen("wf-1")
    assert record.state is WorkflowState.COMPENSATING
    [requested] = [
        p.event for p in lab.sink.published if isinstance(p.event, CompensationRequested)
    ]
    assert (requested.step, requested.compensation) == ("reserve_budget", "release_budget")
    lab.commit()

    # The record expects the compensation's timeout (and the deadline); the wake-up
    # moved to the earlier.
    stored = lab.stored("wf-1")
    assert (due + 30 * MIN) in {t.due_ms for t in stored.timers}
    assert set(lab.rows(Table.TIMERS)) == {b"%015d|wf-1|wake|next" % (due + 30 * MIN)}


def test_fire_due_fires_at_most_limit_timers_earliest_first(lab: Lab) -> None:
    for i in range(3):
        lab.now_ms = T0 + i * MIN
        applied(lab.send(SUBMITTED, f"wf-{i}", f"s{i}"))
    lab.commit()

    late = T0 + H
    assert lab.processor.fire_due(lab.batch, 0, now_ms=late, limit=2) == 2
    workflows = ("wf-0", "wf-1", "wf-2")
    fired = {wf for wf in workflows if lab.seen(wf).state is WorkflowState.COMPENSATING}
    assert fired == {"wf-0", "wf-1"}  # the two earliest timeouts
    assert lab.processor.fire_due(lab.batch, 0, now_ms=late, limit=2) == 1
    assert lab.seen("wf-2").state is WorkflowState.COMPENSATING
    assert lab.processor.fire_due(lab.batch, 0, now_ms=late, limit=2) == 0


def test_the_next_timer_is_the_earliest_pending_and_firing_it_twice_is_harmless(
    lab: Lab,
) -> None:
    assert lab.processor.next_timer(lab.batch, 0) is None
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    wake = lab.processor.next_timer(lab.batch, 0)  # the batch sees its own writes
    assert wake == wake_timer("wf-1", T0 + 10 * MIN)
    [timeout] = [t for t in lab.seen("wf-1").timers if t.ref == "reserve_budget"]
    lab.commit()

    applied(lab.processor.fire(lab.batch, 0, wake, now_ms=wake.due_ms))  # fires the timeout
    assert lab.processor.fire(lab.batch, 0, timeout, now_ms=timeout.due_ms).outcome is (
        Outcome.STALE  # the record no longer expects it
    )
    assert lab.processor.fire(lab.batch, 0, wake, now_ms=wake.due_ms).reason == NOTHING_DUE
    lab.commit()
    assert wake.key.encode() not in lab.rows(Table.TIMERS)
    assert lab.processor.fired == 2 and lab.processor.woke_early == 1
    after = lab.processor.next_timer(lab.batch, 0)
    assert after == wake_timer("wf-1", T0 + 10 * MIN + 30 * MIN)  # the compensation's timeout


def test_a_timer_whose_step_completed_is_deleted_and_fires_nothing(lab: Lab) -> None:
    applied(lab.send(SUBMITTED, "wf-1", "e1"))
    lab.commit()
    stale = b"%015d|wf-1|step_timeout|reserve_budget" % (T0 + 10 * MIN)
    # The completion's cancel was lost (say, a crash): the key is still in the table.
    applied(lab.send(RESERVED, "wf-1", "e2"))
    lab.commit()
    lab.tables.put(Table.TIMERS, 0, stale, b"")
    published = len(lab.sink.published)

    assert lab.processor.fire_due(lab.batch, 0, now_ms=T0 + 10 * MIN, limit=100) == 2
    lab.commit()
    assert stale not in lab.rows(Table.TIMERS)
    assert lab.processor.outcomes[Outcome.STALE] == 1
    # The other due timer (classify_request's timeout) did fire.
    assert lab.stored("wf-1").state is WorkflowState.COMPENSATING
    assert len(lab.sink.published) > published


# -- admission ---------------------------------------------------------------------


def test_beyond_the_limit_workflows_queue_and_a_freed_slot_admits_the_most_urgent(
    registry: FlowRegistry,
) -> None:
    lab = Lab(registry, admission={"orders": 2})
    applied(lab.send(SUBMITTED, "wf-1", "s1"))
    applied(lab.send(SUBMITTED, "wf-2", "s2"))
    lab.now_ms += 1
    queued = applied(lab.send(SUBMITTED, "wf-3", "s3", priority=Priority.LOW))
    assert queued.record is not None and queued.record.state is WorkflowState.QUEUED
    lab.now_ms += 1
    applied(lab.send(SUBMITTED, "wf-4", "s4", priority=Priority.URGENT))  # later, but urgent
    lab.commit()

    assert lab.rows(Table.ADMISSION) == {
        b"slot|orders|wf-1": b"",
        b"slot|orders|wf-2": b"",
        b"queue|orders|996|%015d|wf-4" % (T0 + 2): b"wf-4",
        b"queue|orders|999|%015d|wf-3" % (T0 + 1): b"wf-3",
    }
    assert [lab.stored(wf).state for wf in ("wf-1", "wf-2", "wf-3", "wf-4")] == [
        "running",
        "running",
        "queued",
        "queued",
    ]

    # wf-1 fails at its first step: nothing to undo, it ends and frees its slot.
    ended = applied(lab.send(STEP_FAILED, "wf-1", "f1", **FAILED_AT_FIRST_STEP))
    assert ended.record is not None and ended.record.is_terminal
    lab.commit()

    states = {wf: lab.stored(wf).state for wf in ("wf-1", "wf-2", "wf-3", "wf-4")}
    assert states == {
        "wf-1": WorkflowState.FAILED,
        "wf-2": WorkflowState.RUNNING,
        "wf-3": WorkflowState.QUEUED,
        "wf-4": WorkflowState.RUNNING,
    }
    assert lab.rows(Table.ADMISSION) == {
        b"slot|orders|wf-2": b"",
        b"slot|orders|wf-4": b"",
        b"queue|orders|999|%015d|wf-3" % (T0 + 1): b"wf-3",
    }
    assert ("queued", "running", "reserve_budget") in lab.sink.transitions("wf-4")
    assert lab.sink.transitions("wf-3") == [("initiated", "queued", None)]


def test_an_event_of_a_queued_workflow_is_parked_and_applied_once_it_is_admitted(
    registry: FlowRegistry,
) -> None:
    lab = Lab(registry, admission={"orders": 1})
    applied(lab.send(SUBMITTED, "wf-1", "s1"))
    applied(lab.send(SUBMITTED, "wf-2", "s2"))
    lab.commit()
    assert lab.stored("wf-2").state is WorkflowState.QUEUED
    # An event for the queued workflow is held until it runs.
    assert lab.send(RESERVED, "wf-2", "r2").outcome is Outcome.PARKED
    lab.commit()
    assert list(lab.rows(Table.PARKED)) == [parked_prefix("wf-2") + b"r2"]

    applied(lab.send(STEP_FAILED, "wf-1", "f1", **FAILED_AT_FIRST_STEP))
    lab.commit()

    record = lab.stored("wf-2")
    # Admitted, and its parked completion applied right after.
    assert (record.state, record.current) == (WorkflowState.RUNNING, "classify_request")
    assert lab.rows(Table.PARKED) == {}
    assert lab.rows(Table.ADMISSION) == {b"slot|orders|wf-2": b""}


def test_the_admission_share_is_the_limit_divided_among_partitions(
    registry: FlowRegistry,
) -> None:
    processor = Processor(
        registry=registry,
        secret=SECRET,
        partitions=4,
        sink=FakeSink(),
        admission={"orders": 10},
    )
    assert processor.shares["orders"].limit == 3  # ceil(10 / 4)


class KilledBeforeRecords(MemoryTables):
    """Tables whose first record write fails: the process died during the write-back."""

    def __init__(self) -> None:
        super().__init__()
        self.alive = False

    def put(self, table: Table, partition: int, key: bytes, value: bytes) -> None:
        if table is Table.RECORDS and not self.alive:
            self.alive = True
            raise RuntimeError("killed between the admission and the record writes")
        super().put(table, partition, key, value)


def test_a_kill_between_the_admission_and_record_writes_does_not_leak_a_slot(
    registry: FlowRegistry,
) -> None:
    lab = Lab(registry, admission={"orders": 2})
    lab.tables = KilledBeforeRecords()
    lab.batch = lab.processor.begin(lab.tables)
    applied(lab.send(SUBMITTED, "wf-1", "s1"))
    with pytest.raises(RuntimeError, match="killed"):
        lab.commit()
    assert lab.rows(Table.ADMISSION) == {b"slot|orders|wf-1": b""} and not lab.is_stored("wf-1")

    lab.batch = lab.processor.begin(lab.tables)  # the batch is consumed again
    applied(lab.send(SUBMITTED, "wf-1", "s1"))
    applied(lab.send(SUBMITTED, "wf-2", "s2"))
    lab.commit()

    assert lab.stored("wf-2").state is WorkflowState.RUNNING
    assert lab.rows(Table.ADMISSION) == {b"slot|orders|wf-1": b"", b"slot|orders|wf-2": b""}
