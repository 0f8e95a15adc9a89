"""The part of Kafka a whole flow in memory needs: topics as lists, records as the
consumer hands them out, and schema ids from the project's own catalog.

Records are encoded and decoded with the production ``EventCodec`` (the Confluent
wire format), so an agent's triage, its projection and the tracker's decoding read
exactly the bytes they read from a broker. Each topic has one partition: a
workflow's history is in order, as it is in its partition on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sagalog.contracts.catalog import EventSchema, SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.models import Event
from sagalog.dead_letters import H_DLQ_AGENT, H_DLQ_REASON
from sagalog.errors import SchemaError

E = TypeVar("E", bound=Event)

Header = tuple[str, bytes | str | None]


class CatalogRegistry:
    """A schema registry that has every schema of the catalog registered: one id per
    event type, the same on every topic (the registry's global ids are too)."""

    def __init__(self, catalog: SchemaCatalog) -> None:
        self.ids = {name: number for number, name in enumerate(sorted(catalog), start=1)}
        self.definitions = {number: catalog[name].definition for name, number in self.ids.items()}

    def schema_id(self, subject: str, schema: EventSchema) -> int:
        return self.ids[schema.name]

    def writer_schema(self, schema_id: int) -> Any:
        try:
            return self.definitions[schema_id]
        except KeyError:
            raise SchemaError(f"unknown schema id {schema_id} in the in-memory registry") from None


@dataclass(frozen=True)
class LogRecord:
    """One record of the in-memory log, shaped like ``confluent_kafka.Message``."""

    topic_: str
    offset_: int
    key_: bytes | None
    value_: bytes | None
    headers_: tuple[Header, ...]

    def topic(self) -> str:
        return self.topic_

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.offset_

    def key(self) -> bytes | None:
        return self.key_

    def value(self) -> bytes | None:
        return self.value_

    def headers(self) -> list[Header]:
        return list(self.headers_)

    def error(self) -> None:
        return None

    def header(self, name: str) -> str | None:
        """A header's value as text (the last one of that name), None when absent."""
        found = None
        for key, value in self.headers_:
            if key == name:
                found = value.decode() if isinstance(value, bytes) else value
        return found

    @property
    def meta(self) -> EventHeaders:
        """Its CloudEvents headers, read as a consumer reads them."""
        return EventHeaders.from_kafka(list(self.headers_))


@dataclass(frozen=True)
class LoggedEvent:
    """An event of a workflow's topic, as any consumer reads it.

    Attributes:
        event_type: its type (``ce_type``).
        id: its ``ce_id``.
        source: who published it (``sagalog/<agent>``, ``sagalog/tracker``, ``test``).
        payload: the decoded payload.
    """

    event_type: str
    id: str
    source: str
    payload: dict[str, Any]

    def as_(self, event_class: type[E]) -> E:
        """The payload as ``event_class`` (the class of its type)."""
        if event_class.event_type != self.event_type:
            raise TypeError(
                f"event {self.id} is a {self.event_type}, not a {event_class.event_type}"
            )
        return event_class.from_avro(self.payload)


@dataclass(frozen=True)
class DeadLetter:
    """A record an agent dead-lettered, and why."""

    agent: str
    event_type: str
    workflow_id: str
    reason: str


class MemoryLog:
    """Every topic's records, appended in order, and each reader's position in each
    topic (its committed offset)."""

    def __init__(self) -> None:
        self.topics: dict[str, list[LogRecord]] = {}
        self.positions: dict[tuple[str, str], int] = {}

    def pending(self, reader: str, topic: str) -> list[LogRecord]:
        """What ``reader`` has not consumed of ``topic`` yet, in order."""
        return self.read(topic, self.positions.get((reader, topic), 0))

    def consume(self, reader: str, topic: str, count: int | None = None) -> list[LogRecord]:
        """Hand ``reader`` the next ``count`` records of ``topic`` (all pending ones by
        default) and move its position past them."""
        records = self.pending(reader, topic)
        if count is not None:
            records = records[:count]
        at = self.positions.get((reader, topic), 0)
        self.positions[(reader, topic)] = at + len(records)
        return records

    def append(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[Header]
    ) -> LogRecord:
        records = self.topics.setdefault(topic, [])
        record = LogRecord(topic, len(records), key, value, tuple(headers))
        records.append(record)
        return record

    def read(self, topic: str, offset: int) -> list[LogRecord]:
        """The records of ``topic`` from ``offset`` on."""
        return self.topics.get(topic, [])[offset:]

    def end(self, topic: str) -> int:
        """The offset the next record of ``topic`` will have."""
        return len(self.topics.get(topic, ()))

    def __iter__(self) -> Iterator[LogRecord]:
        for records in self.topics.values():
            yield from records

    def events(
        self, topics: Iterable[str], workflow_id: str, codec: EventCodec
    ) -> list[LoggedEvent]:
        """Every event of ``workflow_id`` on ``topics``, decoded, in log order."""
        key = workflow_id.encode()
        return [
            LoggedEvent(
                event_type=meta.type,
                id=meta.id,
                source=meta.source,
                payload=codec.decode(r.value()).payload,
            )
            for topic in topics
            for r in self.read(topic, 0)
            if r.key() == key and (meta := r.meta)
        ]

    def dead_letters(self, topics: Iterable[str], workflow_id: str | None) -> list[DeadLetter]:
        """The dead letters on ``topics`` (of one workflow, or all)."""
        letters = []
        for topic in topics:
            for r in self.read(topic, 0):
                meta = r.meta
                if workflow_id is None or meta.workflow_id == workflow_id:
                    letters.append(
                        DeadLetter(
                            agent=r.header(H_DLQ_AGENT) or "",
                            event_type=meta.type,
                            workflow_id=meta.workflow_id,
                            reason=r.header(H_DLQ_REASON) or "",
                        )
                    )
        return letters
