"""Record what the system did: every event and transition in the log, every send and ack.

The ``Recorder`` reads the workflow, transitions and dead-letter topics from the
beginning (read_committed, no consumer group) in a background thread and keeps
everything in memory with its arrival time. The ``Sender`` produces the driver's
events (requests, gate decisions) and records whether the broker acknowledged each.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders, header_dict, new_event_id
from sagalog.contracts.validation import to_avro_datum
from sagalog.errors import SagalogError
from sagalog.settings import ClientSettings

from .checker import Send, Transition


@dataclass
class Topics:
    workflow: str
    transitions: str
    deadletter: str


@dataclass
class Seen:
    events: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    event_ids: set[str] = field(default_factory=set)
    transitions: dict[str, list[Transition]] = field(default_factory=lambda: defaultdict(list))
    transition_at: list[float] = field(default_factory=list)
    deadletters: list[dict[str, str]] = field(default_factory=list)
    raw: dict[str, list[tuple[Any, Any, Any]]] = field(default_factory=lambda: defaultdict(list))
    """Workflow-topic records as they were (key, value, headers), to deliver again."""


class Recorder:
    """Everything in the log, decoded, by workflow; thread-safe reads."""

    def __init__(self, settings: ClientSettings, codec: EventCodec, topics: Topics) -> None:
        self.settings = settings
        self.codec = codec
        self.topics = topics
        self.seen = Seen()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-recorder", daemon=True)

    def start(self) -> Recorder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    # -- reading -------------------------------------------------------------------

    def state(self, workflow_id: str) -> str | None:
        with self._lock:
            moves = self.seen.transitions.get(workflow_id)
            return moves[-1].to_state if moves else None

    def states(self, workflow_ids: list[str]) -> dict[str, str | None]:
        return {w: self.state(w) for w in workflow_ids}

    def latest(self, workflow_id: str) -> Transition | None:
        with self._lock:
            moves = self.seen.transitions.get(workflow_id)
            return moves[-1] if moves else None

    def events(self, workflow_id: str, event_type: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            found = list(self.seen.events.get(workflow_id, []))
        return [e for e in found if event_type is None or e["type"] == event_type]

    def transitions(self, workflow_ids: list[str]) -> dict[str, list[Transition]]:
        with self._lock:
            return {w: list(self.seen.transitions.get(w, [])) for w in workflow_ids}

    def event_ids(self) -> set[str]:
        with self._lock:
            return set(self.seen.event_ids)

    def progress_at(self) -> list[float]:
        with self._lock:
            return list(self.seen.transition_at)

    def raw(self, workflow_ids: list[str]) -> list[tuple[Any, Any, Any]]:
        with self._lock:
            return [r for w in workflow_ids for r in self.seen.raw.get(w, [])]

    def deadletters(self) -> list[dict[str, str]]:
        with self._lock:
            return list(self.seen.deadletters)

    # -- the thread ----------------------------------------------------------------

    def _run(self) -> None:
        consumer = Consumer(
            self.settings.kafka_config(
                **{
                    "group.id": f"chaos-recorder-{uuid.uuid4()}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                }
            )
        )
        topics = [self.topics.workflow, self.topics.transitions, self.topics.deadletter]
        assignment = []
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=30).topics[topic]
            assignment += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
        consumer.assign(assignment)
        try:
            while not self._stop.is_set():
                for message in consumer.consume(500, 0.2):
                    if message.error() is None:
                        self._keep(message)
        finally:
            consumer.close()

    def _keep(self, message: Any) -> None:
        headers = header_dict(message.headers())
        topic = message.topic()
        if topic == self.topics.deadletter:
            with self._lock:
                self.seen.deadletters.append(headers)
            return
        try:
            payload = self.codec.decode(message.value()).payload
        except SagalogError:
            payload = {"undecodable": True}
        workflow_id = headers.get("ce_workflowid", "")
        if topic == self.topics.transitions:
            move = Transition(
                workflow_id=workflow_id,
                event_id=headers.get("ce_id", ""),
                from_state=str(payload.get("from_state")),
                to_state=str(payload.get("to_state")),
                step=payload.get("step"),
                from_step=payload.get("from_step"),
                cause_event_id=payload.get("cause_event_id"),
                at_ms=_epoch_ms(payload.get("at")),
            )
            with self._lock:
                self.seen.transitions[workflow_id].append(move)
                self.seen.transition_at.append(time.monotonic())
            return
        row = {"type": headers.get("ce_type"), "id": headers.get("ce_id"), **payload}
        with self._lock:
            self.seen.raw[workflow_id].append((message.key(), message.value(), message.headers()))
            self.seen.events[workflow_id].append(row)
            self.seen.event_ids.add(headers.get("ce_id", ""))


class Sender:
    """The driver's producer: idempotent, every send and its acknowledgement recorded."""

    def __init__(self, settings: ClientSettings, codec: EventCodec, catalog: Any, topic: str):
        self.codec = codec
        self.catalog = catalog
        self.topic = topic
        self.sends: list[Send] = []
        self._lock = threading.Lock()
        self.producer = Producer(
            settings.producer_config(**{"linger.ms": 5, "message.timeout.ms": 120_000})
        )

    def close(self) -> None:
        """Flush and close the producer: left open, it would go on dialling a stopped
        stack's broker for the rest of the test run."""
        self.producer.close()

    def send(
        self,
        event_type: str,
        workflow_id: str,
        payload: dict[str, Any],
        *,
        event_id: str | None = None,
        priority: str | None = None,
        source: str = "chaos/driver",
    ) -> str:
        datum = to_avro_datum(self.catalog[event_type].definition, payload, event_type=event_type)
        headers = EventHeaders(
            id=event_id or new_event_id(),
            type=event_type,
            source=source,
            workflow_id=workflow_id,
            priority=priority,
        )

        def delivered(error: Any, _message: Any) -> None:
            with self._lock:
                self.sends.append(Send(headers.id, workflow_id, event_type, error is None))

        self.producer.produce(
            self.topic,
            key=workflow_id.encode(),
            value=self.codec.encode(self.topic, event_type, datum),
            headers=headers.to_kafka(),
            on_delivery=delivered,
        )
        self.producer.poll(0)
        return headers.id

    def raw(self, *, key: bytes | None, value: bytes | None, headers: list[Any]) -> None:
        """A record as is (poison): not counted as a send the system must keep."""
        self.producer.produce(self.topic, key=key, value=value, headers=headers)
        self.producer.poll(0)

    def flush(self, timeout: float = 150) -> int:
        return int(self.producer.flush(timeout))

    def recorded(self) -> list[Send]:
        with self._lock:
            return list(self.sends)


def _epoch_ms(at: Any) -> int | None:
    """A ``timestamp-millis`` as fastavro decodes it (an aware datetime), in epoch ms."""
    if at is None:
        return None
    if isinstance(at, int):
        return at
    return round(at.timestamp() * 1000)
