"""The worker's batch path without Kafka: triage, handlers, the records each outcome
produces, the transaction's bookkeeping and the counters, through recording clients.

The clients' behaviour against a broker is covered by tests/integration
(test_agent_runtime, test_agent_resilience); here the shell's own rules are: which
records a batch produces, when a transaction is opened at all, what is parked,
checkpointed and counted, and what an aborted transaction leaves behind.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from procurement.events import BudgetReserved, RequestSubmitted
from sagalog.agents import Agent, AgentSettings, HandlerContext, NonRetryableError, RetryableError
from sagalog.agents.accounting import next_checkpoints
from sagalog.agents.routing import read_mark, retry_headers
from sagalog.agents.state_store import StateStore
from sagalog.agents.worker import AgentWorker
from sagalog.contracts.catalog import EventSchema, SchemaCatalog
from sagalog.contracts.hash_chain import signed
from sagalog.contracts.headers import EventHeaders, header_value
from sagalog.contracts.models import Event
from sagalog.position import RecordPosition

from .agent_flows import flow, step

TOPIC = "procurement.events"
RETRY = "sagalog.agent.budget-agent.retry"
DLQ = "sagalog.deadletter"
FLOWS = [
    flow(
        TOPIC,
        [
            step(
                "reserve_budget",
                "budget-agent",
                "procurement.v1.RequestSubmitted",
                "procurement.v1.BudgetReserved",
            ),
            step(
                "classify_request",
                "classify-agent",
                "procurement.v1.BudgetReserved",
                "procurement.v1.RequestClassified",
            ),
        ],
    )
]
"""What the flows give the test's agents (``test_agents_cohosted`` runs both)."""
NOW_MS = 1_800_000_000_000
T0 = dt.datetime(2027, 1, 15, 8, tzinfo=dt.UTC)


class KnownIds:
    """A schema registry that knows every schema already: one id per event type."""

    def __init__(self, catalog: SchemaCatalog) -> None:
        self.by_type = {name: n + 1 for n, name in enumerate(sorted(catalog))}
        self.by_id = {n: catalog[name].definition for name, n in self.by_type.items()}

    def schema_id(self, subject: str, schema: EventSchema) -> int:
        return self.by_type[schema.name]

    def writer_schema(self, schema_id: int) -> Any:
        return self.by_id[schema_id]


class Record:
    """A consumed record, shaped like ``confluent_kafka.Message``."""

    def __init__(self, position: RecordPosition, key: bytes, value: bytes, headers: Any) -> None:
        self.position, self._key, self._value, self._headers = position, key, value, headers

    def topic(self) -> str:
        return self.position.topic

    def partition(self) -> int:
        return self.position.partition

    def offset(self) -> int:
        return self.position.offset

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def headers(self) -> Any:
        return self._headers

    def error(self) -> None:
        return None


class Producer:
    """A transactional producer that records what each committed transaction held."""

    def __init__(self) -> None:
        self.open: list[tuple[str, bytes | None, bytes | None, Any]] = []
        self.committed: list[list[tuple[str, bytes | None, bytes | None, Any]]] = []
        self.aborted = 0
        self.fail_commit: KafkaException | None = None

    def begin_transaction(self) -> None:
        self.open = []

    def produce(self, topic: str, *, key: Any, value: Any, headers: Any, on_delivery: Any) -> None:
        self.open.append((topic, key, value, headers))

    def send_offsets_to_transaction(self, positions: Any, metadata: Any, timeout: float) -> None:
        pass

    def commit_transaction(self, timeout: float) -> None:
        if self.fail_commit is not None:
            raise self.fail_commit
        self.committed.append(self.open)

    def abort_transaction(self, timeout: float) -> None:
        self.aborted += 1

    def topics(self) -> list[str]:
        return [topic for batch in self.committed for topic, *_ in batch]


class Consumer:
    """The consumer calls the batch path makes, recorded."""

    def __init__(self) -> None:
        self.paused: list[tuple[str, int, int]] = []

    def assignment(self) -> list[Any]:
        return []

    def position(self, partitions: list[Any]) -> list[Any]:
        return []

    def consumer_group_metadata(self) -> object:
        return object()

    def pause(self, partitions: list[Any]) -> None:
        self.paused.extend((tp.topic, tp.partition, tp.offset) for tp in partitions)

    def seek(self, partition: Any) -> None:
        pass


def budget_agent() -> Agent:
    agent = Agent("budget-agent")

    @agent.handles(step="reserve_budget")
    async def reserve(event: RequestSubmitted, ctx: HandlerContext) -> BudgetReserved:
        if event.vendor == "flaky":
            raise RetryableError("the ledger timed out")
        if event.vendor == "broken":
            raise NonRetryableError("no such cost center")
        return BudgetReserved(
            reservation_id=f"R-{event.request_id}",
            cost_center="CC-1",
            amount=event.amount,
            currency=event.currency,
        )

    return agent


@pytest.fixture
def worker(tmp_path: Path, catalog: SchemaCatalog) -> Any:
    settings = AgentSettings(
        instance_id="unit",
        data_dir=tmp_path,
        log_level="WARNING",
        tracing=False,
        max_attempts=3,
        retry_base_delay_s=1.0,
        deadletter_topic=DLQ,
    )
    agent = budget_agent()
    built = AgentWorker(agent, settings, catalog=catalog, wall_ms=lambda: NOW_MS, flows=FLOWS)
    built.codec.registry = KnownIds(catalog)  # type: ignore[assignment]
    built.clients.producer = Producer()  # type: ignore[assignment]
    built.clients.consumer = Consumer()  # type: ignore[assignment]
    built.store = store = StateStore(tmp_path / "store", folded_types=built.agent.folded_types())
    yield built
    store.close()


def submitted(workflow_id: str, *, vendor: str = "Acme") -> RequestSubmitted:
    return RequestSubmitted(
        request_id=workflow_id,
        requester="a@example.com",
        department="engineering",
        title="Laptops",
        description="three laptops",
        amount=decimal.Decimal("100.00"),
        currency="EUR",
        vendor=vendor,
        submitted_at=T0,
    )


def record(
    worker: AgentWorker, event: Event, *, workflow_id: str, event_id: str, offset: int
) -> Record:
    headers = EventHeaders(
        id=event_id, type=event.event_type, source="sagalog/test", workflow_id=workflow_id, time=T0
    )
    key = workflow_id.encode()
    value = worker.codec.encode(TOPIC, event.event_type, event.to_avro())
    return Record(
        RecordPosition(TOPIC, 0, offset), key, value, signed(key, value, headers.to_kafka())
    )


def retried(original: Record, *, offset: int, attempt: int, due_ms: int) -> Record:
    headers = retry_headers(
        original.headers(),
        attempt=attempt,
        not_before_ms=due_ms,
        origin=original.position,
        error="earlier",
    )
    return Record(RecordPosition(RETRY, 0, offset), original.key(), original.value(), headers)


def types(batch: list[tuple[str, Any, Any, Any]]) -> list[tuple[str, str | None]]:
    return [(topic, header_value(headers, "ce_type")) for topic, _, _, headers in batch]


def test_a_handled_event_produces_its_output_to_its_topic_in_one_transaction(worker: Any) -> None:
    worker._process(
        [record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=5)]
    )
    producer = worker.clients.producer
    assert [types(batch) for batch in producer.committed] == [
        [(TOPIC, "procurement.v1.BudgetReserved")]
    ]
    assert worker.stats.handled == 1 and worker.stats.transactions == 1
    assert worker.store.checkpoint(TOPIC, 0) == 6


def test_a_duplicate_event_id_at_a_later_offset_is_dropped(worker: Any) -> None:
    event = submitted("wf-1")
    worker._process([record(worker, event, workflow_id="wf-1", event_id="e1", offset=5)])
    worker._process([record(worker, event, workflow_id="wf-1", event_id="e1", offset=9)])
    assert len(worker.clients.producer.committed) == 1
    assert (worker.stats.handled, worker.stats.duplicates) == (1, 1)


def test_the_same_record_replayed_after_an_abort_is_handled_again(worker: Any) -> None:
    again = record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=5)
    worker.clients.producer.fail_commit = KafkaException(KafkaError(KafkaError._TIMED_OUT))
    worker._process([again])
    assert worker.stats.aborted == 1 and worker.clients.producer.committed == []
    assert worker.store.checkpoint(TOPIC, 0) == 0  # the checkpoint waits for a commit
    worker.clients.producer.fail_commit = None
    worker._process([again])
    assert worker.stats.handled == 1 and len(worker.clients.producer.committed) == 1


def test_a_batch_with_nothing_to_produce_opens_no_transaction(worker: Any) -> None:
    other = BudgetReserved(reservation_id="R", cost_center="C", amount=1, currency="EUR")
    worker._process([record(worker, other, workflow_id="wf-1", event_id="e1", offset=5)])
    assert worker.clients.producer.committed == [] and worker.stats.ignored == 1
    assert worker._uncommitted_since is not None  # its offset rides with the next commit
    worker._process(
        [record(worker, submitted("wf-2"), workflow_id="wf-2", event_id="e2", offset=6)]
    )
    assert worker._uncommitted_since is None


def test_a_retryable_failure_goes_to_the_retry_topic_and_parks_its_workflow(worker: Any) -> None:
    first = record(
        worker, submitted("wf-1", vendor="flaky"), workflow_id="wf-1", event_id="e1", offset=5
    )
    second = record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e2", offset=6)
    other = record(worker, submitted("wf-2"), workflow_id="wf-2", event_id="e3", offset=7)
    worker._process([first, second, other])
    [batch] = worker.clients.producer.committed
    retries = [headers for topic, _, _, headers in batch if topic == RETRY]
    marks = [read_mark(headers) for headers in retries]
    assert [(m.attempt, m.origin, m.not_before_ms > NOW_MS) for m in marks if m] == [
        (1, RecordPosition(TOPIC, 0, 5), True),  # the failed attempt, due after its backoff
        (0, RecordPosition(TOPIC, 0, 6), False),  # parked behind it: no attempt spent
    ]
    assert (TOPIC, "procurement.v1.BudgetReserved") in types(batch)  # wf-2 is not held up
    assert (worker.stats.retried, worker.stats.parked, worker.stats.handled) == (1, 1, 1)
    assert worker.store.parked("wf-1") == {"e1": 5, "e2": 6}  # both before the commit


def test_a_later_batch_parks_behind_the_parked_event(worker: Any) -> None:
    worker._process(
        [
            record(
                worker,
                submitted("wf-1", vendor="flaky"),
                workflow_id="wf-1",
                event_id="e1",
                offset=5,
            )
        ]
    )
    worker._process(
        [record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e2", offset=8)]
    )
    assert worker.clients.producer.topics() == [RETRY, RETRY]
    assert worker.stats.parked == 1
    assert worker.store.parked("wf-1") == {"e1": 5, "e2": 8}  # e2 waits in its own right


def test_an_event_after_the_first_retry_ends_still_waits_behind_the_parked_one(
    worker: Any,
) -> None:
    first = record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=5)
    worker.store.park("wf-1", "e1", 5)
    worker._process(  # e2 parks behind e1 in a later batch
        [record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e2", offset=8)]
    )
    worker._process([retried(first, offset=3, attempt=1, due_ms=NOW_MS)])  # e1 ends
    assert worker.store.parked("wf-1") == {"e2": 8}
    worker._process(
        [record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e3", offset=9)]
    )
    assert worker.clients.producer.topics()[-1] == RETRY  # e3 does not overtake e2
    assert worker.store.parked("wf-1") == {"e2": 8, "e3": 9}


def test_a_retry_not_due_waits_with_its_partition_paused(worker: Any) -> None:
    original = record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=5)
    worker._process([retried(original, offset=3, attempt=1, due_ms=NOW_MS + 5_000)])
    assert worker.clients.producer.committed == [] and worker.stats.handled == 0
    assert worker.clients.consumer.paused == [(RETRY, 0, 3)]
    assert worker.assignment.paused_until == {(RETRY, 0): NOW_MS + 5_000}


def test_a_due_retry_is_handled_into_the_original_topic_and_unparks(worker: Any) -> None:
    original = record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=5)
    worker.store.park("wf-1", "e1", 5)
    worker._process([retried(original, offset=3, attempt=1, due_ms=NOW_MS)])
    [batch] = worker.clients.producer.committed
    assert types(batch) == [(TOPIC, "procurement.v1.BudgetReserved")]
    assert worker.store.parked("wf-1") == {}
    assert worker.store.checkpoint(RETRY, 0) == 0  # the retry topic is never hydrated


def test_the_last_attempt_dead_letters_and_fails_the_step(worker: Any) -> None:
    original = record(
        worker, submitted("wf-1", vendor="flaky"), workflow_id="wf-1", event_id="e1", offset=5
    )
    worker.store.park("wf-1", "e1", 5)
    worker._process([retried(original, offset=3, attempt=2, due_ms=NOW_MS)])  # attempt 3 of 3
    [batch] = worker.clients.producer.committed
    assert types(batch) == [
        (DLQ, "procurement.v1.RequestSubmitted"),
        (TOPIC, "sagalog.v1.StepFailed"),
    ]
    dead = dict(batch[0][3])
    assert dead["sagalog_origin"] == b"procurement.events/0/5"
    assert dead["sagalog_dlq_attempts"] == b"3"
    assert worker.stats.dead_lettered == 1 and worker.store.parked("wf-1") == {}


def test_a_non_retryable_failure_dead_letters_at_once(worker: Any) -> None:
    broken = record(
        worker, submitted("wf-1", vendor="broken"), workflow_id="wf-1", event_id="e1", offset=5
    )
    worker._process([broken])
    assert worker.clients.producer.topics() == [DLQ, TOPIC]
    assert (worker.stats.dead_lettered, worker.stats.retried) == (1, 0)


def test_a_retry_without_a_readable_origin_is_dead_lettered(worker: Any) -> None:
    original = record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=5)
    headers = [(k, v) for k, v in original.headers() if k != "sagalog_origin"]
    headers.append(("sagalog_attempt", b"1"))
    worker._process(
        [Record(RecordPosition(RETRY, 0, 3), original.key(), original.value(), headers)]
    )
    [batch] = worker.clients.producer.committed
    assert types(batch) == [(DLQ, "procurement.v1.RequestSubmitted")]  # no StepFailed: no step ran
    assert dict(batch[0][3])["sagalog_origin"] == f"{RETRY}/0/3".encode()
    assert worker.stats.handled == 0


def test_invalid_headers_are_dead_lettered_without_folding(worker: Any) -> None:
    original = record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=5)
    headers = [(k, v) for k, v in original.headers() if k != "ce_id"]
    worker._process([Record(original.position, original.key(), original.value(), headers)])
    assert worker.clients.producer.topics() == [DLQ]
    assert worker.store.context("wf-1").history == []


class Reassigning(Consumer):
    """A consumer that the group hands the input partition (committed up to offset 7,
    behind the empty store) and the retry partition while it gathers a batch, and
    whose gather goes on to return the retry partition's record: the retry partition
    is not paused for a rebuild."""

    def __init__(self, worker: AgentWorker, first: Record, gathered: Record) -> None:
        super().__init__()
        self.worker, self.first, self.gathered = worker, first, gathered
        self.resumed: list[tuple[str, int]] = []

    def poll(self, timeout: float) -> Record:
        return self.first

    def consume(self, num_messages: int, timeout: float) -> list[Record]:
        partitions = [TopicPartition(TOPIC, 0), TopicPartition(RETRY, 0)]
        self.worker.assignment.on_assign(self, partitions)
        return [self.gathered]

    def assign(self, partitions: list[Any]) -> None:
        pass

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        return [TopicPartition(tp.topic, tp.partition, 7) for tp in partitions]

    def resume(self, partitions: list[Any]) -> None:
        self.resumed.extend((tp.topic, tp.partition) for tp in partitions)


def test_records_polled_with_an_assignment_wait_for_the_rebuild_of_its_partitions(
    worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen in the chaos herd: a retry returned by the same poll as the assignment was
    handled before the input partition holding its context was rebuilt."""
    rebuilt: list[tuple[dict[Any, int], int]] = []

    def hydrate(settings: Any, store: StateStore, targets: dict[Any, int], **_: Any) -> int:
        rebuilt.append((dict(targets), worker.stats.handled))
        return 0

    monkeypatch.setattr("sagalog.agents.assignment.hydrate", hydrate)
    unrelated = BudgetReserved(reservation_id="R", cost_center="C", amount=1, currency="EUR")
    first = record(worker, unrelated, workflow_id="wf-0", event_id="e0", offset=1)
    original = record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=5)
    due = retried(original, offset=3, attempt=1, due_ms=NOW_MS)
    worker.clients.consumer = consumer = Reassigning(worker, first, due)
    worker._iteration()
    # only the input partition is rebuilt (the retry topic holds copies of input
    # events), and before the retry is handled
    assert rebuilt == [({(TOPIC, 0): 7}, 0)]
    assert consumer.paused == [(TOPIC, 0, -1001)]
    assert consumer.resumed == [(TOPIC, 0), (RETRY, 0), (TOPIC, 0)]  # at the assignment; rebuilt
    assert worker.stats.handled == 1


class KeepsPauses(Consumer):
    """librdkafka's rule: a pause outlives a rebalance that hands the partition back."""

    def __init__(self) -> None:
        super().__init__()
        self.paused_now: set[tuple[str, int]] = set()

    def pause(self, partitions: list[Any]) -> None:
        super().pause(partitions)
        self.paused_now |= {(tp.topic, tp.partition) for tp in partitions}

    def resume(self, partitions: list[Any]) -> None:
        self.paused_now -= {(tp.topic, tp.partition) for tp in partitions}

    def assign(self, partitions: list[Any]) -> None:
        pass

    def assignment(self) -> list[Any]:
        return [TopicPartition(TOPIC, 0), TopicPartition(RETRY, 0)]

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]


def test_a_retry_partition_paused_before_a_rebalance_is_not_left_paused_after_it(
    worker: Any,
) -> None:
    """Seen in the chaos herd: a retry partition paused until its head came due, then
    revoked and handed back in a rebalance, stayed paused (the reason forgotten at the
    revocation): its deferred records waited ten minutes, long due."""
    worker.clients.consumer = consumer = KeepsPauses()
    original = record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=5)
    not_due = retried(original, offset=3, attempt=1, due_ms=NOW_MS + 5_000)
    assert worker.assignment.hold_until_due([not_due]) == []
    assert (RETRY, 0) in consumer.paused_now
    partitions = [TopicPartition(TOPIC, 0), TopicPartition(RETRY, 0)]
    worker.assignment.on_revoke(consumer, partitions)
    worker.assignment.on_assign(consumer, partitions)
    assert consumer.paused_now == set()


def test_checkpoints_are_the_offset_after_each_input_partition_s_last_record() -> None:
    positions = [
        RecordPosition(TOPIC, 0, 7),
        RecordPosition(TOPIC, 1, 3),
        RecordPosition(TOPIC, 0, 5),  # a record read again after a rewind: not a step back
        RecordPosition(RETRY, 0, 99),  # the retry topic is never hydrated: no checkpoint
    ]
    assert next_checkpoints(positions, retry_topic=RETRY) == {(TOPIC, 0): 8, (TOPIC, 1): 4}
    assert next_checkpoints([], retry_topic=RETRY) == {}
