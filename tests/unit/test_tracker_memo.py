"""What the processor remembers between batches (``sagalog.tracker.memo``), over
``MemoryTables`` that count their reads: a record committed by one batch is read from
memory by the next, changed records are encoded and written once per batch, and the
parked table is scanned only for workflows that may have parked events. Nothing a
failed batch, a writer behind the processor's back or another worker did is served
from memory.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import SagalogError
from sagalog.flows.registry import FlowRegistry
from sagalog.services.tracker.store import MemoryTables, Table, parked_prefix
from sagalog.tracker import Outcome, WorkflowRecord
from sagalog.tracker.memo import CommittedMemo
from sagalog.tracker.tables import parked_workflow

from .test_tracker_processor import (
    CLASSIFIED,
    RESERVED,
    RETRIEVED,
    SUBMITTED,
    Lab,
    orders_registry,
)


class CountingTables(MemoryTables):
    """``MemoryTables`` that count gets and scans by table, and puts by key."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: Counter[Table] = Counter()
        self.scans: Counter[Table] = Counter()
        self.puts: Counter[tuple[Table, bytes]] = Counter()

    def get(self, table: Table, partition: int, key: bytes) -> bytes | None:
        self.gets[table] += 1
        return super().get(table, partition, key)

    def put(self, table: Table, partition: int, key: bytes, value: bytes) -> None:
        self.puts[(table, key)] += 1
        super().put(table, partition, key, value)

    def scan(
        self, table: Table, partition: int, lower: bytes, upper: bytes, limit: int
    ) -> list[tuple[bytes, bytes]]:
        self.scans[table] += 1
        return super().scan(table, partition, lower, upper, limit)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, catalog: SchemaCatalog) -> FlowRegistry:
    return orders_registry(tmp_path_factory.mktemp("orders"), catalog)


@pytest.fixture
def lab(registry: FlowRegistry) -> Lab:
    lab = Lab(registry)
    lab.tables = CountingTables()
    lab.batch = lab.processor.begin(lab.tables)
    return lab


def counting(lab: Lab) -> CountingTables:
    assert isinstance(lab.tables, CountingTables)
    return lab.tables


def test_a_record_changed_twice_in_a_batch_is_written_once_as_it_ended(lab: Lab) -> None:
    lab.send(SUBMITTED, "wf-1", "e1")
    lab.send(RESERVED, "wf-1", "e2")
    lab.commit()

    assert counting(lab).puts[(Table.RECORDS, b"wf-1")] == 1
    assert lab.stored("wf-1").current == "classify_request"


def test_the_next_batch_reads_a_committed_record_from_memory(lab: Lab) -> None:
    lab.send(SUBMITTED, "wf-1", "e1")
    lab.commit()
    before = counting(lab).gets[Table.RECORDS]

    decision = lab.send(RESERVED, "wf-1", "e2")

    assert decision.outcome is Outcome.APPLIED
    assert counting(lab).gets[Table.RECORDS] == before  # not read from the tables
    assert lab.processor.memo.hits == 1


def test_released_records_are_read_from_the_tables_and_decide_the_same(lab: Lab) -> None:
    """The watchdog releases the kept records when a burst ended (with the heap trim)."""
    lab.send(SUBMITTED, "wf-1", "e1")
    lab.commit()
    assert lab.processor.memo.release() == 1
    before = counting(lab).gets[Table.RECORDS]

    decision = lab.send(RESERVED, "wf-1", "e2")

    assert decision.outcome is Outcome.APPLIED
    assert counting(lab).gets[Table.RECORDS] == before + 1
    lab.commit()
    assert lab.stored("wf-1").current == "classify_request"


def test_a_failed_commit_leaves_nothing_in_memory(lab: Lab) -> None:
    lab.send(SUBMITTED, "wf-1", "e1")
    lab.commit()
    lab.send(RESERVED, "wf-1", "e2")
    lab.sink.fail = SagalogError("the broker refused the batch")
    with pytest.raises(SagalogError):
        asyncio.run(lab.processor.commit(lab.batch))
    lab.batch = lab.processor.begin(lab.tables)
    hits = lab.processor.memo.hits

    # Redelivered: decided again from what the tables hold (the start only).
    decision = lab.send(RESERVED, "wf-1", "e2")

    assert decision.outcome is Outcome.APPLIED
    assert lab.processor.memo.hits == hits


def test_a_record_written_behind_the_processor_is_read_from_the_tables(lab: Lab) -> None:
    lab.send(SUBMITTED, "wf-1", "e1")
    lab.commit()
    changed = lab.stored("wf-1").model_copy(update={"current": "retrieve_policies"})
    lab.batch.overlay.put(Table.RECORDS, 0, b"wf-1", changed.encoded())
    lab.commit()

    lab.send(RETRIEVED, "wf-1", "e4")
    lab.commit()

    assert lab.processor.memo.hits == 0
    assert lab.stored("wf-1").current == "manager_approval"


def test_after_forget_a_record_another_worker_changed_is_read_from_the_tables(lab: Lab) -> None:
    lab.send(SUBMITTED, "wf-1", "e1")
    lab.commit()
    # Another worker held the partition meanwhile and moved the workflow on.
    changed = lab.stored("wf-1").model_copy(update={"current": "retrieve_policies"})
    lab.tables.put(Table.RECORDS, 0, b"wf-1", changed.encoded())

    lab.processor.forget()
    lab.send(RETRIEVED, "wf-1", "e4")

    assert lab.stored("wf-1").current == "retrieve_policies"  # not committed yet
    lab.commit()
    assert lab.stored("wf-1").current == "manager_approval"


def test_the_parked_table_is_scanned_once_when_nothing_is_parked(lab: Lab) -> None:
    for n in range(5):
        lab.send(SUBMITTED, f"wf-{n}", f"s{n}")
        lab.send(RESERVED, f"wf-{n}", f"r{n}")
    lab.commit()

    assert counting(lab).scans[Table.PARKED] == 1  # the first look at the partition


def test_a_parked_event_is_found_again_in_a_later_batch(lab: Lab) -> None:
    lab.send(SUBMITTED, "wf-1", "e1")
    lab.commit()
    assert lab.send(CLASSIFIED, "wf-1", "e3").outcome is Outcome.PARKED
    lab.commit()

    lab.send(RESERVED, "wf-1", "e2")
    lab.commit()

    assert lab.stored("wf-1").current == "retrieve_policies"
    assert lab.rows(Table.PARKED) == {}


def test_events_parked_before_this_processor_started_are_found(
    lab: Lab, registry: FlowRegistry
) -> None:
    lab.send(SUBMITTED, "wf-1", "e1")
    lab.send(CLASSIFIED, "wf-1", "e3")
    lab.commit()
    # A new worker over the same (restored) tables: its memo starts empty.
    restarted = Lab(registry)
    restarted.tables = lab.tables
    restarted.batch = restarted.processor.begin(lab.tables)

    restarted.send(RESERVED, "wf-1", "e2")
    restarted.commit()

    assert restarted.stored("wf-1").current == "retrieve_policies"


def test_a_workflow_whose_parked_events_were_applied_is_not_scanned_again(lab: Lab) -> None:
    lab.send(SUBMITTED, "wf-1", "e1")
    lab.send(CLASSIFIED, "wf-1", "e3")
    lab.commit()
    lab.send(RESERVED, "wf-1", "e2")  # applies e3; the next look finds nothing
    lab.commit()
    scans = counting(lab).scans[Table.PARKED]

    lab.send(RETRIEVED, "wf-1", "e4")
    lab.commit()

    assert counting(lab).scans[Table.PARKED] == scans


def test_the_memo_keeps_at_most_its_bound_dropping_the_least_recently_used() -> None:
    memo = CommittedMemo(keep=2)
    records = {n: WorkflowRecord.model_construct(workflow_id=f"wf-{n}") for n in range(3)}
    memo.committed([((0, "wf-0"), records[0]), ((0, "wf-1"), records[1])])
    assert memo.record((0, "wf-0")) is records[0]  # now the most recently used
    memo.committed([((0, "wf-2"), records[2])])

    assert memo.record((0, "wf-1")) is None
    assert memo.record((0, "wf-0")) is records[0]
    assert memo.record((0, "wf-2")) is records[2]


def test_a_memo_that_keeps_nothing_never_answers() -> None:
    memo = CommittedMemo(keep=0)
    memo.committed([((0, "wf-0"), WorkflowRecord.model_construct(workflow_id="wf-0"))])
    assert memo.record((0, "wf-0")) is None


def test_a_parked_key_names_its_workflow() -> None:
    for workflow_id in ("wf-1", "a|b", "ünï"):
        assert parked_workflow(parked_prefix(workflow_id) + b"event-9") == workflow_id


def test_a_record_written_over_in_its_own_batch_is_not_remembered(lab: Lab) -> None:
    lab.send(SUBMITTED, "wf-1", "e1")
    lab.commit()
    lab.send(RESERVED, "wf-1", "e2")
    # Something else writes the key after the processor stored it, in the same batch.
    changed = lab.seen("wf-1").model_copy(update={"current": "retrieve_policies"})
    lab.batch.overlay.put(Table.RECORDS, 0, b"wf-1", changed.encoded())
    lab.commit()
    hits = lab.processor.memo.hits

    lab.send(RETRIEVED, "wf-1", "e4")

    assert lab.processor.memo.hits == hits
    lab.commit()
    assert lab.stored("wf-1").current == "manager_approval"
