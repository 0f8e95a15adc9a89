"""Registry-encoded Avro through the real broker: publish, then read back."""

from __future__ import annotations

import datetime as dt
import decimal

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from procurement.events import BudgetReserved, Priority, RequestSubmitted
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.personal.cipher import personal_data
from sagalog.publisher import EventPublisher
from sagalog.tail import tail

from .project import Project

REQUEST = RequestSubmitted(
    request_id="r-1",
    requester="ana@example.com",
    department="it",
    title="Laptops",
    description="ten laptops",
    amount=decimal.Decimal("12500.50"),
    currency="EUR",
    vendor="Acme",
    priority=Priority.HIGH,
    submitted_at=dt.datetime(2026, 11, 29, 7, 30, tzinfo=dt.UTC),
)


def test_typed_event_round_trip_with_headers(project: Project) -> None:
    project.apply()
    topic = project.topic("procurement.events")
    publisher = EventPublisher(project.settings, catalog=project.catalog, source="tests/roundtrip")
    first = publisher.publish_event(topic, REQUEST, workflow_id="wf-1", flow_version=1)
    second = publisher.publish_event(
        topic,
        BudgetReserved(
            reservation_id="res-1",
            cost_center="cc-7",
            amount=decimal.Decimal("12500.50"),
            currency="EUR",
        ),
        workflow_id="wf-1",
        causation_id=first.headers.id,
    )
    assert first.partition == second.partition  # one workflow, one partition
    assert second.offset == first.offset + 1

    # Read as `sagalog tail` reads: the requester's address (personal data) opened.
    codec = EventCodec(
        catalog=project.catalog,
        registry=SchemaRegistry(project.settings),
        personal=personal_data(project.settings, reveal=True),
    )
    records = list(tail(project.settings, codec, topic, max_records=2, idle_timeout_s=20))
    assert [r.event_type for r in records] == [
        "procurement.v1.RequestSubmitted",
        "procurement.v1.BudgetReserved",
    ]
    assert RequestSubmitted.from_avro(records[0].payload or {}) == REQUEST
    assert records[1].headers["ce_causationid"] == first.headers.id
    assert records[0].headers["ce_flowversion"] == "1"
    assert records[0].key == "wf-1"


def test_wire_format_is_readable_by_confluent_deserializer(project: Project) -> None:
    """Any Confluent-compatible consumer (Java, Go, ksqlDB) can read what sagalog writes."""
    project.apply()
    topic = project.topic("procurement.events")
    publisher = EventPublisher(project.settings, catalog=project.catalog, source="tests/wire")
    publisher.publish_event(topic, REQUEST, workflow_id="wf-2")
    codec = EventCodec(catalog=project.catalog, registry=SchemaRegistry(project.settings))
    value = codec.encode(topic, REQUEST.event_type, REQUEST.to_avro())
    client = SchemaRegistryClient(project.settings.registry_config())
    decoded = AvroDeserializer(client)(value, SerializationContext(topic, MessageField.VALUE))
    assert decoded["amount"] == decimal.Decimal("12500.50")
    assert decoded["priority"] == "HIGH"


def test_undecodable_records_are_reported_not_fatal(project: Project) -> None:
    project.apply()
    topic = project.topic("procurement.events")
    producer = Producer(project.settings.producer_config())
    producer.produce(
        topic,
        key=b"wf-x",
        value=b"not avro",
        partition=0,
        headers=[("ce_type", b"procurement.v1.RequestSubmitted")],
    )
    producer.produce(topic, key=b"wf-x", value=b"\x00\x7f\xff\xff\xf0body", partition=0)
    producer.flush(10)
    publisher = EventPublisher(project.settings, catalog=project.catalog, source="tests/poison")
    publisher.publish_event(topic, REQUEST, workflow_id="wf-x")

    codec = EventCodec(catalog=project.catalog, registry=SchemaRegistry(project.settings))
    records = list(tail(project.settings, codec, topic, max_records=3, idle_timeout_s=20))
    errors = [r.error for r in records if r.error]
    assert len(errors) == 2
    assert any("not the wire-format magic byte" in e for e in errors)
    assert any("unknown schema id 2147483632" in e for e in errors)
    assert [r.event_type for r in records if not r.error] == ["procurement.v1.RequestSubmitted"]


def test_workflow_keys_land_where_faust_and_java_clients_put_them(project: Project) -> None:
    """sagalog's producers (librdkafka) and the tracker (faust on aiokafka) must agree on
    a workflow's partition, or its history splits: both use the Java client's murmur2."""
    from aiokafka.partitioner import DefaultPartitioner
    from confluent_kafka.admin import NewTopic

    from sagalog.cluster import connect_admin

    topic = project.topic("partitioning")
    admin, _ = connect_admin(project.settings)
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(15)
    producer = Producer(project.settings.producer_config())
    landed: dict[bytes, int] = {}

    def delivered(error: object, message: object) -> None:
        landed[message.key()] = message.partition()  # type: ignore[attr-defined]

    keys = [f"wf-{n}".encode() for n in range(100)]
    for key in keys:
        producer.produce(topic, key=key, value=b"x", on_delivery=delivered)
    producer.flush(15)
    partitions = list(range(6))
    expected = {key: DefaultPartitioner()(key, partitions, partitions) for key in keys}
    assert landed == expected
