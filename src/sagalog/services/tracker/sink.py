"""The tracker's output: Avro events on the workflow and transitions topics, alerts, ticks.

One transactional confluent-kafka producer (librdkafka's own thread batches and
compresses, far faster than producing from the event loop). Each batch is one
transaction holding its published events, alerts, dead letters, table changelog
records and input offsets (``begin``, ``consumed``, ``commit``): a worker paused
through a rebalance is fenced by the group coordinator and its batch aborted
(``fencing``), and no crash can leave a batch's outputs without its offsets or the
other way round. Every event is signed (``sagalog_hash``) and a workflow's carry its
chain head (``sagalog_chain``, stamped by the processor), like every sagalog
publisher's. The blocking transaction calls wait in a worker thread, so the faust
event loop keeps serving heartbeats meanwhile; any failure aborts the batch, which is
then never stored, and the next worker (or this one, restarted) decides it again.
Ticks, which change nothing and are read by whoever owns the clock partition, go out
on a second, plain idempotent producer, outside any batch.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.hash_chain import signed
from sagalog.contracts.headers import EventHeaders, new_event_id
from sagalog.dead_letters import dead_letter_headers
from sagalog.errors import AuthorizationError, SagalogError, ServiceUnavailableError
from sagalog.events import TrackerAlert
from sagalog.flows.model import Flow
from sagalog.position import RecordPosition
from sagalog.services.tracker.fencing import Membership, group_metadata
from sagalog.services.tracker.settings import TrackerSettings
from sagalog.tracker import TRACKER_SOURCE, TRANSITIONS_TOPIC, Alert, Publish, SlaAlert
from sagalog.tracker.ticks import encode_tick

log = logging.getLogger("sagalog.tracker")

#: How long one transaction call (init, offsets, commit, abort) may block.
TRANSACTION_CALL_TIMEOUT_S = 60.0


class BatchAborted(SagalogError):
    """A batch's transaction did not commit and was aborted: nothing of it is visible."""


class KafkaSink:
    """Produces what the processor decides; see the module docstring."""

    def __init__(self, settings: TrackerSettings, *, codec: EventCodec) -> None:
        self.settings = settings
        self.codec = codec
        self.producer = Producer(
            settings.producer_config(
                **{
                    # A batch ends in its commit, which sends at once whatever the
                    # linger; a short linger only split a batch's records into several
                    # produce requests while it was being decided.
                    "linger.ms": 20,
                    "compression.type": "lz4",
                    "queue.buffering.max.messages": 1_000_000,
                    "client.id": f"{settings.app_id}-{settings.instance_id}",
                    "transactional.id": settings.transactional_id,
                    # librdkafka requires message.timeout.ms <= transaction.timeout.ms:
                    # a record still unsent when its transaction would expire fails it.
                    "transaction.timeout.ms": int(settings.transaction_timeout_s * 1000),
                    "message.timeout.ms": int(settings.transaction_timeout_s * 1000),
                }
            )
        )
        self.ticks = Producer(
            settings.producer_config(
                **{"linger.ms": 20, "client.id": f"{settings.app_id}-{settings.instance_id}-ticks"}
            )
        )
        self._errors: list[str] = []
        self._denied: AuthorizationError | None = None  # the first refused write's error
        self._initialized = False
        self._open = False
        self._offsets: dict[tuple[str, int], int] = {}
        self._membership: Membership | None = None
        self.sent = 0

    # -- the batch's transaction ----------------------------------------------------

    def _abort_quietly(self) -> None:
        try:
            self.producer.abort_transaction(TRANSACTION_CALL_TIMEOUT_S)
        except KafkaException as exc:
            log.warning("aborting the batch's transaction failed too: %s", exc)

    def register(self) -> None:
        """Register the transactional id, before the first batch (blocking).

        Registering aborts whatever an earlier process with the same id left open: a
        worker killed in mid-batch holds back every ``read_committed`` reader of the
        partitions its open transaction wrote, until that transaction times out,
        unless its successor registers first.

        Raises:
            AuthorizationError: no WRITE on the transactional id (names the principal).
            ServiceUnavailableError: Kafka did not answer.
        """
        try:
            self.producer.init_transactions(TRANSACTION_CALL_TIMEOUT_S)
        except KafkaException as exc:
            error = exc.args[0]
            if is_authorization_failure(error):
                raise authorization_error(
                    self.settings, error, operation="WRITE", resource=self.settings.transactional_id
                ) from exc
            raise ServiceUnavailableError(
                f"the tracker could not register its transactional id "
                f"{self.settings.transactional_id} on {self.settings.bootstrap_servers}: "
                f"{error.name()}: {error.str()}"
            ) from exc
        self._initialized = True

    def abandon(self) -> None:
        """Abort the open batch, if any (its worker is about to exit): nobody waits for
        its transaction to time out."""
        if self._open:
            self._open = False
            try:
                self.producer.abort_transaction(5.0)
            except KafkaException as exc:
                log.warning("aborting the abandoned batch failed: %s", exc)

    async def begin(self) -> None:
        """Open the batch's transaction (the first time, after registering the
        transactional id, which aborts whatever an earlier process with it left open)."""
        if not self._initialized:
            await _in_thread(self.producer.init_transactions, TRANSACTION_CALL_TIMEOUT_S)
            self._initialized = True
        if not self._open:
            self.producer.begin_transaction()
            self._open = True
            self._offsets = {}
            self._membership = None

    def consumed(self, offsets: dict[tuple[str, int], int], membership: Membership) -> None:
        """The input offsets the open batch finishes (the next offset of each partition)
        and the group membership it was decided under: committed with it."""
        self._offsets = dict(offsets)
        self._membership = membership

    async def commit(self) -> None:
        """Commit the open batch: its records and its input offsets, atomically.

        Raises:
            BatchAborted: the coordinator refused it (this worker was fenced: another
                one owns the partitions now) or a record was refused; it was aborted.
            AuthorizationError: a right is missing (names the principal and resource).
        """
        if not self._open:
            return
        try:
            await _in_thread(self._commit)
        except KafkaException as exc:
            raise self._aborted(exc.args[0]) from exc
        except BaseException:
            self._abort_quietly()
            raise
        finally:
            self._open = False
        self.producer.poll(0)  # the delivery reports the commit did not serve yet
        self._raise_refusals()

    def _commit(self) -> None:
        if self._offsets:
            if self._membership is None:
                raise SagalogError("a batch with offsets but no group membership")
            self.producer.send_offsets_to_transaction(
                [TopicPartition(t, p, o) for (t, p), o in sorted(self._offsets.items())],
                group_metadata(self._membership),
                TRANSACTION_CALL_TIMEOUT_S,
            )
        self.producer.commit_transaction(TRANSACTION_CALL_TIMEOUT_S)

    def _aborted(self, error: KafkaError) -> SagalogError:
        """Abort what can be aborted and say why the batch did not commit."""
        membership = self._membership
        member = (
            f"generation {membership.generation}, member {membership.member_id}"
            if membership
            else "no membership"
        )
        if is_authorization_failure(error):
            return authorization_error(
                self.settings,
                error,
                operation="WRITE",
                resource=self.settings.transactional_id,
            )
        if error.fatal():
            return BatchAborted(
                f"the tracker's producer ({self.settings.transactional_id}) was fenced by "
                f"another one with the same transactional id ({error.name()}: "
                f"{error.str()}): give every worker its own SAGALOG_TRACKER_INSTANCE_ID"
            )
        self._abort_quietly()
        return BatchAborted(
            f"the batch's transaction ({self.settings.transactional_id}; {member} of group "
            f"{self.settings.app_id}) did not commit and nothing of it is visible: "
            f"{error.name()}: {error.str()}. A refused generation or member means this "
            "worker was dropped from the group (paused past session_timeout_s?) and "
            "another one decides its partitions now; it exits to rejoin"
        )

    def publish(self, action: Publish) -> None:
        topic = action.topic
        if topic == TRANSITIONS_TOPIC:
            topic = self.settings.transitions_topic
        value = self.codec.encode(topic, action.event.event_type, action.event.to_avro())
        self._produce(topic, action.workflow_id, value, action.headers().to_kafka())

    def alert(self, alert: Alert, *, flow: Flow | None, now_ms: int) -> None:
        self._alert(
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
        self._alert(
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

    def produce_raw(
        self,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes | None,
        on_delivery: Callable[[Any, Any], None],
    ) -> None:
        """A record as is, to one partition (the tables' changelogs)."""
        try:
            self.producer.produce(
                topic, key=key, value=value, partition=partition, on_delivery=on_delivery
            )
        except BufferError:
            self.producer.poll(0.5)
            self.producer.produce(
                topic, key=key, value=value, partition=partition, on_delivery=on_delivery
            )

    def tick(self, topic: str, partition: int, now_ms: int) -> None:
        """A tick on the clock topic: 'look for due timers in this partition now'."""
        self.ticks.produce(topic, value=encode_tick(now_ms), partition=partition)
        self.ticks.poll(0)

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
        """The record as it was, plus why the tracker could not read it (headers)."""
        self.producer.produce(
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
            on_delivery=self._delivered,
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
        """Surface refusals of what the batch produced so far; ``commit`` waits for the
        rest (the processor calls this before storing, the transaction makes it moot).

        Raises:
            SagalogError: the broker refused a record (names the first refusal).
            AuthorizationError: it refused one for a missing ACL (names the principal).
        """
        self.producer.poll(0)
        self._raise_refusals()

    def _raise_refusals(self) -> None:
        if self._denied is not None:
            denied, self._denied = self._denied, None
            self._errors.clear()
            raise denied
        if self._errors:
            first, count = self._errors[0], len(self._errors)
            self._errors.clear()
            raise SagalogError(f"Kafka refused {count} tracker record(s); first: {first}")

    def close(self) -> None:
        self.abandon()  # a batch abandoned at stop: its records must not become visible
        self.producer.flush(10.0)
        self.ticks.flush(10.0)

    def _alert(self, event: TrackerAlert, *, key: str | None) -> None:
        headers = EventHeaders(
            id=new_event_id(),
            type=event.event_type,
            source=TRACKER_SOURCE,
            workflow_id=key or event.alert,
        )
        value = self.codec.encode(self.settings.alerts_topic, event.event_type, event.to_avro())
        self._produce(self.settings.alerts_topic, key or event.alert, value, headers.to_kafka())
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
        self, topic: str, key: str, value: bytes, headers: list[tuple[str, str | bytes | None]]
    ) -> None:
        raw_key = key.encode()
        headers = signed(raw_key, value, headers)
        try:
            self.producer.produce(
                topic, key=raw_key, value=value, headers=headers, on_delivery=self._delivered
            )
        except BufferError:
            self.producer.poll(0.5)  # librdkafka's queue is full: let it drain, then retry
            self.producer.produce(
                topic, key=raw_key, value=value, headers=headers, on_delivery=self._delivered
            )
        self.sent += 1

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._errors.append(f"{message.topic()}: {error.str()}")
        if is_authorization_failure(error) and self._denied is None:
            assert error is not None
            self._denied = authorization_error(
                self.settings, error, operation="WRITE", resource=str(message.topic())
            )


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


async def _in_thread(call: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, call, *args)
