"""The gateway serves what ``sagalog audit`` needs: sealed positions and transition offsets."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagalog.audit.lookup import WorkflowSeal
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.model import Flow
from sagalog.services.gateway.read_model import ReadModel, TransitionEntry
from sagalog.services.gateway.views import detail_view
from sagalog.tracker.record import SealedEvent
from sagalog.tracker.seal import seal

from .gateway_fixtures import at_gate, reference_flow


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    return reference_flow(repo_root, catalog)


@pytest.fixture
def model(tmp_path: Path) -> Iterator[ReadModel]:
    model = ReadModel(tmp_path / "rm")
    yield model
    model.close()


def test_the_workflow_detail_carries_the_seal_and_where_each_transition_lies(
    model: ReadModel, flow: Flow
) -> None:
    record = at_gate(flow, "wf-1")
    for offset in (4, 9):
        sealed = seal(
            record,
            SealedEvent(
                topic="procurement.events",
                partition=2,
                offset=offset,
                event_id=f"e-{offset}",
                hash=hashlib.sha256(b"%d" % offset).hexdigest(),
            ),
        )
        assert sealed is not None
        record = sealed
    batch = model.batch()
    batch.put_record("wf-1", json.dumps(record.to_stored()).encode())
    for offset in (7, 3):
        entry = TransitionEntry(
            event_id=f"t-{offset}",
            flow="procurement",
            flow_version=1,
            from_state="running",
            to_state="running",
            cause_event_id="e-4",
            time_in_previous_state_ms=1,
            at_ms=1_000,
        )
        batch.add_transition("wf-1", entry, partition=2, offset=offset)
    batch.commit()

    stored = model.record("wf-1")
    assert stored is not None
    detail = detail_view(stored, model.history("wf-1")).model_dump(mode="json")
    assert [(h["partition"], h["offset"]) for h in detail["history"]] == [(2, 3), (2, 7)]

    seen = WorkflowSeal.from_gateway(detail, source="gateway test")
    assert seen.sealed == record.sealed
    assert seen.chain == record.chain
    assert seen.transitions == ((2, 3), (2, 7))
    assert (seen.workflow_id, seen.state) == ("wf-1", "pending_approval")
