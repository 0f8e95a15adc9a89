"""Shared pieces of the gateway's unit tests: the reference flow and records the
tracker's own rules produced, so the gateway is tested on what the tracker writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.headers import EventHeaders, new_event_id
from sagalog.contracts.models import Event
from sagalog.errors import ServiceUnavailableError
from sagalog.flows.loader import load_flow_file
from sagalog.flows.model import Flow
from sagalog.publisher import PublishedEvent
from sagalog.testing import TrackerHarness
from sagalog.topology.loader import load_topology
from sagalog.tracker.record import WorkflowRecord

SECRET = b"unit-test-gate-secret-32-bytes!!"
T0 = 1_700_000_000_000
BEFORE_GATE = (
    "procurement.v1.RequestSubmitted",
    "procurement.v1.RequestClassified",
    "procurement.v1.PoliciesRetrieved",
    "procurement.v1.RiskScored",
    "procurement.v1.BudgetReserved",
)


def reference_flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    return load_flow_file(
        repo_root / "topology/flows/procurement.v1.yaml", catalog=catalog, topology=topology
    )


def tracked(flow: Flow, workflow_id: str, *event_types: str) -> TrackerHarness:
    """A tracker that ran ``event_types`` for ``workflow_id``, a minute apart."""
    tracker = TrackerHarness([flow], secret=SECRET, now_ms=T0, echo=False)
    for event_type in event_types:
        tracker.send(event_type, workflow_id)
        tracker.advance(60_000)
    return tracker


def at_gate(flow: Flow, workflow_id: str = "wf-1") -> WorkflowRecord:
    """A record waiting at manager_approval, attempt 1."""
    return tracked(flow, workflow_id, *BEFORE_GATE).record(workflow_id)


@dataclass
class KeptPublisher:
    """Keeps what the gateway asks it to publish instead of sending it to Kafka."""

    sent: list[tuple[str, Event, dict[str, Any]]] = field(default_factory=list)
    records: list[tuple[str, int, bytes | None]] = field(default_factory=list)
    down: bool = False

    def publish_event(self, topic: str, event: Event, **metadata: Any) -> PublishedEvent:
        if self.down:
            raise ServiceUnavailableError("Kafka at test:9092 did not acknowledge the event")
        self.sent.append((topic, event, metadata))
        headers = EventHeaders(
            id=metadata.get("event_id") or new_event_id(),
            type=event.event_type,
            source="sagalog/gateway",
            workflow_id=metadata["workflow_id"],
        )
        return PublishedEvent(topic=topic, partition=0, offset=len(self.sent) - 1, headers=headers)

    def publish_record(
        self,
        topic: str,
        *,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, str | bytes | None]],
    ) -> tuple[int, int]:
        if self.down:
            raise ServiceUnavailableError("Kafka at test:9092 did not acknowledge the record")
        self.records.append((topic, partition, value))
        return partition, 1000 + len(self.records)
