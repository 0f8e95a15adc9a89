"""Sealing: the tracker keeps each workflow's event positions and hashes, chained.

The pure rule (``sagalog.tracker.seal``) and how the processor applies it: every
event read for a tracked workflow is sealed once, whatever the rules decide, and
every event the tracker publishes carries the chain head that includes its cause.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.hash_chain import chain_start, chain_values
from sagalog.flows.registry import FlowRegistry
from sagalog.tracker import Outcome, WorkflowRecord
from sagalog.tracker.record import SEALED_EVENTS, SealedEvent
from sagalog.tracker.seal import chain_head, is_sealed, seal

from .test_tracker_processor import RESERVED, SUBMITTED, TOPIC, Lab, orders_registry

FIXTURE = Path(__file__).parent / "fixtures" / "tracker_record_v1.json"
SEALED_FIXTURE = Path(__file__).parent / "fixtures" / "tracker_record_v1_sealed.json"
"""A record with sealed events as the release that added sealing wrote it. Never
regenerate it: every later release must read its seal and recompute its chain."""


def _sealed(offset: int, *, partition: int = 0, event_id: str | None = None) -> SealedEvent:
    return SealedEvent(
        topic=TOPIC,
        partition=partition,
        offset=offset,
        event_id=event_id or f"e-{offset}",
        hash=hashlib.sha256(b"%d" % offset).hexdigest(),
    )


@pytest.fixture
def record() -> WorkflowRecord:
    stored: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return WorkflowRecord.from_stored(stored)


def test_a_record_stored_before_sealing_reads_with_nothing_sealed(record: WorkflowRecord) -> None:
    assert (record.chain, record.sealed, record.sealed_dropped, record.chain_base) == (
        None,
        (),
        0,
        None,
    )
    assert chain_head(record) == chain_start(record.workflow_id)


def test_a_sealed_record_as_first_written_still_reads_and_recomputes_its_chain() -> None:
    stored: dict[str, Any] = json.loads(SEALED_FIXTURE.read_text(encoding="utf-8"))
    record = WorkflowRecord.from_stored(stored)
    assert [s.offset for s in record.sealed] == [1000, 1007, 1014, 1021, 1028, 1035]
    assert record.sealed[-1].event_id == "evt-GateOpened"
    start = record.chain_base or chain_start(record.workflow_id)
    assert chain_values(start, [s.hash for s in record.sealed])[-1] == record.chain
    # Written before waits, traces and wake-ups existed: it reads with none open, no
    # trace context and no wake-up, and keeps everything else.
    assert record.to_stored() == {
        **stored,
        "schema_version": record.schema_version,
        "waiting": None,
        "keys": {},
        "traceparent": None,
        "wake_ms": None,
    }


def test_sealing_appends_in_order_and_chains_the_hashes(record: WorkflowRecord) -> None:
    first = seal(record, _sealed(10))
    assert first is not None
    second = seal(first, _sealed(12))
    assert second is not None
    assert [s.offset for s in second.sealed] == [10, 12]
    assert (
        second.chain
        == chain_values(chain_start(record.workflow_id), [_sealed(10).hash, _sealed(12).hash])[-1]
    )
    # The stored form keeps it all, as plain JSON, and reads back equal.
    assert WorkflowRecord.from_stored(json.loads(json.dumps(second.to_stored()))) == second


def test_sealing_is_idempotent_by_position(record: WorkflowRecord) -> None:
    sealed = seal(record, _sealed(10))
    assert sealed is not None
    assert seal(sealed, _sealed(10)) is None  # the same record read again after a crash
    assert seal(sealed, _sealed(7)) is None  # an earlier offset of the partition: read before
    assert is_sealed(sealed, _sealed(9))
    assert not is_sealed(sealed, _sealed(3, partition=1))  # another partition counts apart
    assert seal(sealed, _sealed(11, event_id="e-10")) is not None  # a duplicate id, new place


def test_past_the_bound_the_oldest_are_dropped_and_the_chain_still_recomputes(
    record: WorkflowRecord,
) -> None:
    current = record
    for offset in range(SEALED_EVENTS + 5):
        after = seal(current, _sealed(offset))
        assert after is not None
        current = after
    assert len(current.sealed) == SEALED_EVENTS and current.sealed_dropped == 5
    assert current.sealed[0].offset == 5
    assert current.chain_base is not None
    assert chain_values(current.chain_base, [s.hash for s in current.sealed])[-1] == current.chain
    every = [_sealed(o).hash for o in range(SEALED_EVENTS + 5)]
    assert chain_values(chain_start(record.workflow_id), every)[-1] == current.chain


# -- the processor -------------------------------------------------------------------


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, catalog: SchemaCatalog) -> FlowRegistry:
    return orders_registry(tmp_path_factory.mktemp("orders-seal"), catalog)


def _send(lab: Lab, event_type: str, workflow_id: str, event_id: str, offset: int) -> Outcome:
    event = lab.event(event_type, workflow_id, event_id)
    decision = lab.processor.handle(
        lab.batch,
        0,
        event,
        now_ms=lab.now_ms,
        topic=TOPIC,
        sealed=_sealed(offset, event_id=event_id),
    )
    return decision.outcome


def test_the_processor_seals_every_event_and_stamps_the_chain_on_what_it_publishes(
    registry: FlowRegistry,
) -> None:
    lab = Lab(registry)
    assert _send(lab, SUBMITTED, "wf-1", "e-start", 0) is Outcome.APPLIED
    after_start = lab.seen("wf-1")
    assert [s.event_id for s in after_start.sealed] == ["e-start"]
    # What the start caused carries the chain that includes the start.
    assert lab.sink.published
    assert {p.chain for p in lab.sink.published} == {after_start.chain}
    assert lab.sink.published[0].headers().chain == after_start.chain

    # An event the rules ignore (a stale, a duplicate id) is sealed all the same.
    assert _send(lab, SUBMITTED, "wf-1", "e-again", 1) is Outcome.REJECTED
    assert _send(lab, SUBMITTED, "wf-1", "e-start", 2) is Outcome.DUPLICATE
    assert [s.offset for s in lab.seen("wf-1").sealed] == [0, 1, 2]

    # The tracker's own output read back is sealed without being decided.
    assert lab.processor.seal(lab.batch, 0, "wf-1", _sealed(3, event_id="echo"))
    assert not lab.processor.seal(lab.batch, 0, "wf-unknown", _sealed(4, event_id="x"))
    lab.commit()
    assert [s.event_id for s in lab.stored("wf-1").sealed] == [
        "e-start",
        "e-again",
        "e-start",
        "echo",
    ]


def test_a_batch_read_again_is_not_sealed_twice(registry: FlowRegistry) -> None:
    lab = Lab(registry)
    _send(lab, SUBMITTED, "wf-2", "e-start", 0)
    _send(lab, RESERVED, "wf-2", "e-reserved", 1)
    lab.commit()
    before = lab.stored("wf-2")
    published = len(lab.sink.published)
    # The same records again (a crash before the offsets were committed).
    assert _send(lab, SUBMITTED, "wf-2", "e-start", 0) is Outcome.DUPLICATE
    assert _send(lab, RESERVED, "wf-2", "e-reserved", 1) is Outcome.DUPLICATE
    lab.commit()
    assert lab.stored("wf-2").sealed == before.sealed
    assert lab.stored("wf-2").chain == before.chain
    assert len(lab.sink.published) == published


def test_an_event_of_an_unknown_workflow_seals_nothing(registry: FlowRegistry) -> None:
    lab = Lab(registry)
    assert _send(lab, RESERVED, "wf-none", "e-1", 0) is Outcome.IGNORED
    lab.commit()
    assert not lab.is_stored("wf-none")
