"""An audit given the records it read before fetches only the rest, on the real broker,
and tells the same story as a read of everything (what the console's story cache
relies on when a running workflow moves on)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from contextlib import closing

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sagalog.audit.collect import Collected, Sources, collect
from sagalog.audit.lookup import WorkflowSeal
from sagalog.audit.reading import ReadStats, audit_consumer
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.registry import SchemaRegistry
from sagalog.settings import ClientSettings
from sagalog.tracker.record import SealedEvent

EVENTS = 6


def _written(settings: ClientSettings, topic: str, workflow_id: str) -> list[SealedEvent]:
    """``EVENTS`` records of one workflow, each caused by the one before, where they lie."""
    producer = Producer(settings.producer_config())
    sealed: list[SealedEvent] = []

    def delivered(event_id: str) -> Callable[[object, object], None]:
        """The delivery report of one record (a report carries no headers)."""

        def report(err: object, message: object) -> None:
            offset = None if err is not None else message.offset()  # type: ignore[attr-defined]
            sealed.append(
                SealedEvent(
                    topic=topic,
                    partition=0,
                    offset=-1 if offset is None else offset,
                    event_id=event_id,
                    hash="unchecked",
                )
            )

        return report

    for n in range(EVENTS):
        headers = EventHeaders(
            id=f"{workflow_id}-e{n}",
            type="procurement.v1.RequestSubmitted",
            source="test/known-records",
            workflow_id=workflow_id,
            causation_id=f"{workflow_id}-e{n - 1}" if n else None,
        ).to_kafka()
        producer.produce(
            topic,
            key=workflow_id.encode(),
            value=b"not avro",
            headers=headers,
            on_delivery=delivered(f"{workflow_id}-e{n}"),
        )
        producer.flush(30)  # in order: one at a time
    assert [s.offset >= 0 for s in sealed] == [True] * EVENTS, sealed
    return sealed


def _collect(
    settings: ClientSettings, codec: EventCodec, seal: WorkflowSeal, known: Collected | None
) -> tuple[Collected, ReadStats]:
    stats = ReadStats()
    before = {} if known is None else {(e.topic, e.partition, e.offset): e for e in known.events}
    with closing(audit_consumer(settings)) as consumer:
        collected = collect(
            consumer,
            codec,
            seal,
            sources=Sources(transitions_topic=None),
            timeout_s=15,
            stats=stats,
            known=before,
        )
    return collected, stats


def test_a_grown_seal_reads_only_its_new_records_and_tells_the_same_story(
    settings: ClientSettings, catalog: SchemaCatalog
) -> None:
    topic = f"known-records-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(settings.kafka_config())
    for created in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        created.result(30)
    try:
        workflow_id = f"wf-{uuid.uuid4().hex[:6]}"
        sealed = _written(settings, topic, workflow_id)
        codec = EventCodec(catalog=catalog, registry=SchemaRegistry(settings))
        whole = WorkflowSeal(
            workflow_id=workflow_id,
            flow="procurement",
            flow_version=1,
            state="running",
            terminal_reason=None,
            chain=None,
            chain_base=None,
            dropped=0,
            sealed=tuple(sealed),
            source="test",
            transitions=(),
        )
        earlier = dataclasses.replace(whole, sealed=whole.sealed[:4])
        first, first_stats = _collect(settings, codec, earlier, None)
        assert first_stats.records_read == 4 and not first.trail.missing

        grown, grown_stats = _collect(settings, codec, whole, first)
        assert grown_stats.records_read == EVENTS - 4  # the two new ones, nothing again
        fresh, fresh_stats = _collect(settings, codec, whole, None)
        assert fresh_stats.records_read == EVENTS

        def told(c: Collected) -> list[tuple[str | None, str, tuple[str, ...], str | None]]:
            return [
                (e.event_id, e.record.position, e.causation_path, e.error) for e in c.trail.entries
            ]

        assert told(grown) == told(fresh)
        assert grown.trail.entries[-1].causation_path == tuple(
            f"{workflow_id}-e{n}" for n in range(EVENTS - 2, -1, -1)
        )
    finally:
        admin.delete_topics([topic])
