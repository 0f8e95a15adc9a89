"""Publish events: validate against the schema, encode, add the CloudEvents headers.

The producer is idempotent with ``acks=all``, so a retried send never duplicates an
event in the log, and the record key is the workflow id, so a workflow's events stay
in one partition in the order they were published. Every event carries its content
hash (``sagalog.contracts.hash_chain``), so the audit trail can show a later change.

Make one publisher per process and keep it: a new idempotent producer's first record,
sent right after the producer was made, waits for its producer id, which librdkafka
retries on a fixed timer when no broker connection is up yet (``python -m
tests.bench.visibility`` measures it). Sent once a connection is up it does not wait, so
a process that looks its schema up first (``sagalog publish``) does not pay it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Message, Producer
from opentelemetry import trace

from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.hash_chain import signed, stated_hash
from sagalog.contracts.headers import EventHeaders, new_event_id
from sagalog.contracts.models import Event
from sagalog.contracts.registry import SchemaRegistry
from sagalog.contracts.validation import to_avro_datum
from sagalog.errors import SagalogError, ServiceUnavailableError
from sagalog.personal.cipher import personal_data
from sagalog.settings import ClientSettings
from sagalog.tracing import starting_traceparent


@dataclass(frozen=True)
class PublishedEvent:
    """Where an event landed; ``content_hash`` is its ``sagalog_hash`` (what an event
    reacting to it passes as ``prev_hash``)."""

    topic: str
    partition: int
    offset: int
    headers: EventHeaders
    content_hash: str | None = None


class EventPublisher:
    """A producer of sagalog events for one source (a service or the CLI)."""

    def __init__(
        self,
        settings: ClientSettings,
        *,
        catalog: SchemaCatalog,
        source: str,
        codec: EventCodec | None = None,
        ack_timeout_s: float | None = None,
    ) -> None:
        """
        Args:
            ack_timeout_s: how long ``publish`` waits for the broker's acknowledgement
                (default three times ``connect_timeout_s``); a server that answers
                people (the gateway) waits less and tells them to retry.
        """
        self.settings = settings
        self.ack_timeout_s = ack_timeout_s or settings.connect_timeout_s * 3
        self.source = source
        self.tracer = trace.get_tracer("sagalog.publisher")
        self.catalog = catalog
        self._own_codec = codec is None
        self.codec = codec or EventCodec(
            catalog=catalog, registry=SchemaRegistry(settings), personal=personal_data(settings)
        )
        self.producer = Producer(
            settings.producer_config(
                **{
                    "linger.ms": 5,
                    "compression.type": "lz4",
                    "message.timeout.ms": int(max(settings.connect_timeout_s, 5) * 3000),
                }
            )
        )

    def publish(
        self,
        topic: str,
        event_type: str,
        payload: Any,
        *,
        workflow_id: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
        flow_version: int | None = None,
        event_id: str | None = None,
        traceparent: str | None = None,
        priority: str | None = None,
        prev_hash: str | None = None,
        chain: str | None = None,
    ) -> PublishedEvent:
        """Validate ``payload`` (JSON-shaped) against ``event_type``, publish it, and wait
        until the broker acknowledged it.

        ``prev_hash`` is the content hash of the event this one reacts to (the cause's
        ``PublishedEvent.content_hash`` or ``sagalog_hash`` header); ``chain`` the
        workflow's chain head, for a publisher that reacts to the workflow as a whole.

        Raises:
            EventValidationError: the payload does not match the schema (names the field).
            SchemaError: the event type is unknown or not registered for ``topic``.
            ServiceUnavailableError: the broker did not acknowledge within
                ``ack_timeout_s``; the record was taken back unless already in flight.
            AuthorizationError: this principal may not write ``topic``.
        """
        datum = to_avro_datum(self.catalog[event_type].definition, payload, event_type=event_type)
        return self._send(
            topic,
            datum,
            self._headers(
                event_type,
                workflow_id=workflow_id,
                causation_id=causation_id,
                correlation_id=correlation_id,
                flow_version=flow_version,
                event_id=event_id,
                traceparent=traceparent,
                priority=priority,
                prev_hash=prev_hash,
                chain=chain,
            ),
        )

    def publish_event(self, topic: str, event: Event, **metadata: Any) -> PublishedEvent:
        """Publish a typed event (see ``publish`` for the metadata arguments).

        The class was validated by pydantic and its schema is generated from it (``sagalog
        schemas check`` fails when the committed file is not), so the payload goes
        straight to the encoder.
        """
        return self._send(topic, event.to_avro(), self._headers(event.event_type, **metadata))

    def _headers(
        self,
        event_type: str,
        *,
        workflow_id: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
        flow_version: int | None = None,
        event_id: str | None = None,
        traceparent: str | None = None,
        priority: str | None = None,
        prev_hash: str | None = None,
        chain: str | None = None,
    ) -> EventHeaders:
        workflow_id = workflow_id or str(uuid.uuid4())
        if traceparent is None:  # the event starts a trace, or continues the caller's
            traceparent = starting_traceparent(
                self.tracer,
                f"publish {event_type}",
                attributes={"sagalog.workflow_id": workflow_id, "sagalog.event_type": event_type},
            )
        return EventHeaders(
            id=event_id or new_event_id(),
            type=event_type,
            source=self.source,
            workflow_id=workflow_id,
            causation_id=causation_id,
            correlation_id=correlation_id,
            flow_version=flow_version,
            traceparent=traceparent,
            priority=priority,
            prev_hash=prev_hash,
            chain=chain,
        )

    def _send(self, topic: str, datum: dict[str, Any], headers: EventHeaders) -> PublishedEvent:
        value = self.codec.encode(topic, headers.type, datum)
        key = headers.workflow_id.encode()
        kafka_headers = signed(key, value, headers.to_kafka())
        partition, offset = self._acknowledged(topic, None, key, value, kafka_headers)
        return PublishedEvent(
            topic=topic,
            partition=partition,
            offset=offset,
            headers=headers,
            content_hash=stated_hash(kafka_headers),
        )

    def publish_record(
        self,
        topic: str,
        *,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, str | bytes | None]],
    ) -> tuple[int, int]:
        """Publish a record that is already encoded (a dead letter re-driven to where it
        came from) to one partition, signed like every sagalog record, and wait until
        the broker acknowledged it; returns its (partition, offset).

        Raises:
            ServiceUnavailableError, AuthorizationError, SagalogError: as ``publish``.
        """
        return self._acknowledged(topic, partition, key, value, signed(key, value, headers))

    def _acknowledged(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, str | bytes | None]],
    ) -> tuple[int, int]:
        outcome: dict[str, Any] = {}

        def delivered(error: KafkaError | None, message: Message) -> None:
            outcome["error"], outcome["message"] = error, message

        if partition is None:
            self.producer.produce(
                topic, key=key, value=value, headers=headers, on_delivery=delivered
            )
        else:
            self.producer.produce(
                topic,
                key=key,
                value=value,
                headers=headers,
                partition=partition,
                on_delivery=delivered,
            )
        remaining = self.producer.flush(timeout=self.ack_timeout_s)
        if remaining or "message" not in outcome:
            # What was never sent is taken back, so it cannot land after the caller was
            # told it failed; a record already in flight may still land, which is why a
            # retry must carry the same event id (consumers take an event id once).
            self.producer.purge(in_queue=True, in_flight=False)
            self.producer.poll(0)
            raise ServiceUnavailableError(
                f"Kafka at {self.settings.bootstrap_servers} did not acknowledge the event "
                f"to {topic} within {self.ack_timeout_s:g}s"
            )
        error: KafkaError | None = outcome["error"]
        if is_authorization_failure(error):
            assert error is not None
            raise authorization_error(self.settings, error, operation="WRITE", resource=topic)
        if error is not None:
            hint = ""
            if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                hint = "; declare it in topology/ and run `sagalog topology apply`"
            raise SagalogError(f"publishing to {topic} failed: {error.str()}{hint}")
        message: Message = outcome["message"]
        return int(message.partition() or 0), int(message.offset() or 0)

    def close(self) -> None:
        self.producer.flush(timeout=self.settings.connect_timeout_s)
        if self._own_codec and self.codec.personal is not None:
            self.codec.personal.close()
