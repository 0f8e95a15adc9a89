"""The tracker's output: Avro events on the workflow and transitions topics, alerts, ticks.

What a batch decides for partition *p* (events, per-workflow alerts, dead letters and
the changelog records of *p*'s tables) goes out in *p*'s transaction, through the
producer that holds *p*'s transactional id (``fencing``): a worker that lost *p*
while paused can no longer publish for it. ``commit`` ends every partition's
transaction of the batch; the changelog writes are stored in RocksDB only after it
(``store``). Ticks and SLA alerts, which belong to no workflow and change nothing
if repeated, go through one plain idempotent producer.

Every event is signed (``sagalog_hash``) and a workflow's carry its chain head
(``sagalog_chain``, stamped by the processor), like every sagalog publisher's.
librdkafka's own threads batch and compress, far faster than producing from the
event loop; commits wait in worker threads, so the faust event loop keeps serving
heartbeats meanwhile.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Message, Producer
from opentelemetry import trace

from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.hash_chain import signed
from sagalog.contracts.headers import EventHeaders, new_event_id
from sagalog.dead_letters import dead_letter_headers
from sagalog.errors import AuthorizationError, SagalogError
from sagalog.events import StateTransition, TrackerAlert
from sagalog.flows.model import Flow
from sagalog.open_transactions import closer
from sagalog.position import RecordPosition
from sagalog.services.tracker.fencing import PartitionTransactions
from sagalog.services.tracker.settings import TrackerSettings
from sagalog.tracing import child_traceparent, records_spans
from sagalog.tracker import TRACKER_SOURCE, TRANSITIONS_TOPIC, Alert, Publish, SlaAlert
from sagalog.tracker.ticks import encode_tick

log = logging.getLogger("sagalog.tracker")

CLOSER_WRITER = "saga-tracker"
"""Whose closing records these are: ``closer_key`` gives ``sagalog.saga-tracker.p<n>``."""


class KafkaSink:
    """Produces what the processor decides; see the module docstring."""

    def __init__(self, settings: TrackerSettings, *, codec: EventCodec) -> None:
        self.settings = settings
        self.codec = codec
        self.tracer = trace.get_tracer("sagalog.tracker")
        client = f"{settings.app_id}-{settings.instance_id}"
        common = {
            # Every batch ends in a commit, which sends at once whatever the linger; a
            # short linger only split a batch's records into several produce requests
            # while it was being decided. What nothing commits (ticks) waits this long.
            "linger.ms": 20,
            "compression.type": settings.compression_type,
            "queue.buffering.max.messages": 1_000_000,
        }
        self.producer = Producer(
            settings.producer_config(
                **{**common, "message.timeout.ms": 120_000, "client.id": f"{client}-ticks"}
            )
        )
        transaction_ms = int(settings.transaction_timeout_s * 1000)
        self.transactions = PartitionTransactions(
            settings,
            settings.producer_config(
                **{
                    **common,
                    "client.id": client,
                    "transaction.timeout.ms": transaction_ms,
                    "message.timeout.ms": transaction_ms,
                    # Right after a commit the coordinator answers CONCURRENT_TRANSACTIONS
                    # until its markers are written; librdkafka's 100 ms default backoff
                    # then costs ~50-100 ms per transaction (confluent-kafka-python #967).
                    "retry.backoff.ms": 5,
                }
            ),
        )
        self._errors: list[str] = []
        self._denied: AuthorizationError | None = None  # the first refused write's error
        self._attempt = 0
        """Counts the batches' attempts whose commit failed: a record's delivery report
        counts only for the attempt that sent it (``_delivered``)."""
        self.sent = 0

    def publish(self, action: Publish, *, partition: int) -> None:
        """Send ``action``'s event in ``partition``'s transaction; when spans are exported,
        with a span of its own under the trace it continues (``sagalog.tracing``)."""
        event = action.event
        if records_spans():  # else the span's attributes would be built for nothing
            traced = child_traceparent(
                self.tracer,
                f"saga-tracker {event.event_type}",
                action.traceparent,
                attributes=_span_attributes(action),
                recording=True,
            )
            if traced != action.traceparent:
                action = action.stamped(chain=action.chain, traceparent=traced)
        topic = action.topic
        if topic == TRANSITIONS_TOPIC:
            topic = self.settings.transitions_topic
        value = self.codec.encode(topic, event.event_type, event.to_avro())
        self._produce(partition, topic, action.workflow_id, value, action.kafka_headers())

    def alert(self, alert: Alert, *, flow: Flow | None, now_ms: int, partition: int) -> None:
        self._alert(
            partition,
            TrackerAlert(
                alert=alert.name,
                message=alert.message,
                workflow_id=alert.workflow_id,
                flow=flow.name if flow else None,
                flow_version=flow.version if flow else None,
                at=_utc(now_ms),
            ),
            key=alert.workflow_id,
        )

    def sla_alert(self, alert: SlaAlert, *, now_ms: int) -> None:
        """An SLA alert is about a flow, not a workflow: no partition's, so no transaction."""
        self._alert(
            None,
            TrackerAlert(
                alert=alert.name,
                message=alert.message,
                flow=alert.flow,
                flow_version=alert.flow_version,
                value_ms=alert.value_ms,
                at=_utc(now_ms),
            ),
            key=alert.flow,
        )

    def close_open_transaction(self, topic: str, partition: int) -> None:
        """Send ``OpenTransactionClosed`` to ``topic``'s ``partition`` in that partition's
        transaction: its commit ends what an earlier epoch of the same transactional id
        left open there (``open_transactions``). Headers only: there is nothing to read."""
        key, headers = closer(source=TRACKER_SOURCE, writer=CLOSER_WRITER, partition=partition)
        self.transactions.send(
            partition,
            topic,
            partition=partition,
            key=key,
            value=None,
            headers=headers,
            on_delivery=self._reporter(),
        )
        self.sent += 1

    def produce_raw(
        self,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes | None,
        on_delivery: Callable[[Any, Any], None],
    ) -> None:
        """A record as is, to one partition (the tables' changelogs), in that partition's
        transaction."""
        self.transactions.send(
            partition, topic, key=key, value=value, partition=partition, on_delivery=on_delivery
        )

    def tick(self, topic: str, partition: int, now_ms: int) -> None:
        """A tick on the clock topic: 'look for due timers in this partition now'."""
        self.producer.produce(topic, value=encode_tick(now_ms), partition=partition)
        self.producer.poll(0)

    def dead_letter(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | str | None]],
        reason: str,
        error_class: str,
        now_ms: int,
    ) -> None:
        """The record as it was, plus why the tracker could not read it (headers), in the
        transaction of the partition it was read from."""
        self.transactions.send(
            partition,
            self.settings.deadletter_topic,
            key=key,
            value=value,
            headers=dead_letter_headers(
                headers,
                agent=self.settings.app_id,
                reason=reason,
                error_class=error_class,
                origin=RecordPosition(topic, partition, offset),
                now_ms=now_ms,
            ),
            on_delivery=self._reporter(),
        )
        log.warning(
            "dead-lettered %s/%s@%s: %s",
            topic,
            partition,
            offset,
            reason,
            extra={
                "sagalog": {
                    "agent": "saga-tracker",
                    "action": "dead_lettered",
                    "outcome": error_class,
                }
            },
        )

    async def flush(self) -> None:
        """Raise what was refused so far; the waiting is ``commit``'s (the processor calls
        this before it stores, and the store's ``sync`` commits).

        Raises:
            AuthorizationError: a write was refused for a missing ACL (names the principal).
            SagalogError: the broker refused a record (names the first refusal).
        """
        self.producer.poll(0)
        self._raise_refusals()

    async def commit(self) -> None:
        """Commit every partition's transaction of the batch; see ``fencing``.

        Raises:
            PartitionsFenced: another worker holds a partition now; nothing was published.
            BatchAborted: a transaction was aborted; the batch is to be decided again.
            AuthorizationError: a write was refused for a missing ACL (names the principal).
            SagalogError: the broker refused a record (names the first refusal).
        """
        try:
            await self.transactions.commit()
        except BaseException:
            # What was sent is aborted: its records report the abort's purge, now or
            # later, and none of that refuses the attempt that decides the batch again.
            self._attempt += 1
            self._errors.clear()
            raise
        finally:
            for producer in self.transactions.producers.values():
                producer.poll(0)  # the delivery reports not yet served
        self._raise_refusals()

    def close(self) -> None:
        self.transactions.close()
        self.producer.flush(10.0)

    def _raise_refusals(self) -> None:
        if self._denied is not None:
            denied, self._denied = self._denied, None
            self._errors.clear()
            raise denied
        if self._errors:
            first, count = self._errors[0], len(self._errors)
            self._errors.clear()
            raise SagalogError(f"Kafka refused {count} tracker record(s); first: {first}")

    def _alert(self, partition: int | None, event: TrackerAlert, *, key: str | None) -> None:
        headers = EventHeaders(
            id=new_event_id(),
            type=event.event_type,
            source=TRACKER_SOURCE,
            workflow_id=key or event.alert,
        )
        value = self.codec.encode(self.settings.alerts_topic, event.event_type, event.to_avro())
        self._produce(
            partition, self.settings.alerts_topic, key or event.alert, value, headers.to_kafka()
        )
        log.warning(
            "ALERT %s: %s",
            event.alert,
            event.message,
            extra={
                "sagalog": {
                    "agent": "saga-tracker",
                    "action": "alert",
                    "workflow_id": event.workflow_id,
                    "outcome": event.alert,
                }
            },
        )

    def _produce(
        self,
        partition: int | None,
        topic: str,
        key: str,
        value: bytes,
        headers: list[tuple[str, str | bytes | None]],
    ) -> None:
        """Sign and send: in ``partition``'s transaction, or, for None, on the plain producer."""
        raw_key = key.encode()
        record: dict[str, Any] = {
            "key": raw_key,
            "value": value,
            "headers": signed(raw_key, value, headers),
            "on_delivery": self._reporter(),
        }
        if partition is not None:
            self.transactions.send(partition, topic, **record)
        else:
            try:
                self.producer.produce(topic, **record)
            except BufferError:
                self.producer.poll(0.5)  # librdkafka's queue is full: let it drain, then retry
                self.producer.produce(topic, **record)
        self.sent += 1

    def _reporter(self) -> Callable[[KafkaError | None, Message], None]:
        """The delivery callback of a record sent now, in this attempt."""
        attempt = self._attempt
        return lambda error, message: self._delivered(error, message, attempt)

    def _delivered(self, error: KafkaError | None, message: Message, attempt: int) -> None:
        """Note a refused record of the current attempt. A report of an aborted attempt
        is no refusal: before this rule, a batch whose commit the broker aborted (its
        coordinator killed) was decided again and then failed on the first attempt's
        purged records, and the tracker exited 70 instead of riding the outage out."""
        if error is not None and attempt == self._attempt:
            self._errors.append(f"{message.topic()}: {error.str()}")
        if is_authorization_failure(error) and self._denied is None:
            assert error is not None
            self._denied = authorization_error(
                self.settings, error, operation="WRITE", resource=str(message.topic())
            )


def _span_attributes(action: Publish) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "sagalog.workflow_id": action.workflow_id,
        "sagalog.event_type": action.event.event_type,
        "sagalog.event_id": action.event_id,
    }
    event = action.event
    if isinstance(event, StateTransition):
        attributes["sagalog.transition"] = f"{event.from_state}->{event.to_state}"
    return attributes


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
