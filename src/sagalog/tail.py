"""Read a topic's events back, decoded, with their headers: ``sagalog tail``.

The reader assigns every partition itself instead of joining a consumer group, so
tailing never moves a service's offsets or triggers a rebalance, and it reads
committed records only, so an aborted transaction's events never show.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, TopicPartition

from sagalog.assigned_reader import assigned_consumer, not_ours
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import H_WORKFLOW_ID, header_dict
from sagalog.contracts.json_values import jsonable
from sagalog.errors import SagalogError, SchemaError
from sagalog.settings import ClientSettings


@dataclass(frozen=True)
class TailedRecord:
    """One record as read; ``error`` is set (and ``payload`` None) when it did not decode."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: str | None
    headers: dict[str, str]
    event_type: str | None
    schema_id: int | None
    payload: dict[str, Any] | None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "timestamp": dt.datetime.fromtimestamp(self.timestamp_ms / 1000, dt.UTC).isoformat(),
            "key": self.key,
            "type": self.event_type,
            "schema_id": self.schema_id,
            "headers": self.headers,
            "payload": jsonable(self.payload),
            **({"error": self.error} if self.error else {}),
        }


def tail(
    settings: ClientSettings,
    codec: EventCodec,
    topic: str,
    *,
    from_beginning: bool = True,
    max_records: int | None = None,
    idle_timeout_s: float | None = None,
    workflow_id: str | None = None,
) -> Iterator[TailedRecord]:
    """Yield ``topic``'s records in partition order until ``max_records`` were read or
    nothing arrived for ``idle_timeout_s`` (forever when both are None).

    With ``workflow_id``, only that workflow's records, chosen from the headers
    before any decoding; ``max_records`` then counts only those.

    Raises:
        SagalogError: the topic does not exist.
    """
    consumer = assigned_consumer(
        settings,
        f"sagalog-tail-{uuid.uuid4()}",
        **{"isolation.level": "read_committed", "enable.partition.eof": False},
    )
    try:
        metadata = consumer.list_topics(topic, timeout=settings.connect_timeout_s)
        info = metadata.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            raise SagalogError(
                f"topic {topic} does not exist on {settings.bootstrap_servers}; "
                "`sagalog topology plan` lists the declared topics"
            )
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        consumer.assign([TopicPartition(topic, p, start) for p in sorted(info.partitions)])
        seen = 0
        last = time.monotonic()
        while max_records is None or seen < max_records:
            message = consumer.poll(0.2)
            if message is None:
                if idle_timeout_s is not None and time.monotonic() - last > idle_timeout_s:
                    return
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF or not_ours(error):
                    continue
                raise SagalogError(f"reading {topic} failed: {error.str()}")
            last = time.monotonic()
            if workflow_id is not None and _workflow_of(message) != workflow_id:
                continue
            seen += 1
            yield _record(codec, message)
    finally:
        consumer.close()


def _workflow_of(message: Any) -> str | None:
    for name, value in message.headers() or ():
        if name == H_WORKFLOW_ID and value is not None:
            return str(value.decode("utf-8", "replace"))
    return None


def _record(codec: EventCodec, message: Any) -> TailedRecord:
    key = message.key()
    headers = header_dict(message.headers())
    base = {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp_ms": message.timestamp()[1],
        "key": key.decode("utf-8", "replace") if key is not None else None,
        "headers": headers,
    }
    try:
        decoded = codec.decode(message.value())
    except SchemaError as exc:
        return TailedRecord(
            **base, event_type=headers.get("ce_type"), schema_id=None, payload=None, error=str(exc)
        )
    return TailedRecord(
        **base, event_type=decoded.event_type, schema_id=decoded.schema_id, payload=decoded.payload
    )
