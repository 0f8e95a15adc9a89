"""Reading dead letters, and the replays of them, from the log.

Dead letters are rare and kept for a while (the topic's retention), so the gateway
reads them when asked instead of following them: a listing reads the dead-letter
topics to their end, a point read seeks to one position. Whether a dead letter was
replayed is read from the log as well (a replay is a record with
``sagalog_replay_of`` on the topic the dead letter came from, after its origin), so
the answer holds across gateway replicas and restarts.

Each call opens its own consumer (no group, no commits, read_committed, like the
audit's reads: ``sagalog.audit.reading``), as the API serves requests in a thread
pool and a librdkafka consumer is not to be shared between threads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Message

from sagalog.agents.records import headers_of
from sagalog.audit.reading import (
    LoggedEvent,
    ReadStats,
    audit_consumer,
    fetch_at,
    iter_range,
    offset_at_time,
    read_range,
    watermarks,
)
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import header_value
from sagalog.contracts.json_values import jsonable
from sagalog.dead_letters import H_REPLAY_OF, DeadLetter, read_dead_letter
from sagalog.errors import SagalogError, ServiceUnavailableError
from sagalog.position import RecordPosition
from sagalog.services.gateway.replays import EarlierReplay
from sagalog.settings import ClientSettings


@dataclass(frozen=True)
class FoundDeadLetter:
    """A dead letter with the record it holds, byte for byte."""

    letter: DeadLetter
    record: LoggedEvent


class DeadLetterLog:
    """The dead-letter topics of a deployment, and the workflow topics replays go to."""

    def __init__(
        self,
        settings: ClientSettings,
        *,
        topics: Sequence[str],
        codec: EventCodec,
        timeout_s: float = 10.0,
    ) -> None:
        self.settings = settings
        self.topics = tuple(topics)
        self.codec = codec
        self.timeout_s = timeout_s

    def scan(
        self, *, topic: str | None = None, since_ms: int | None = None
    ) -> Iterator[DeadLetter]:
        """Every dead letter of the dead-letter topics (or of ``topic``), in log order per
        partition, from ``since_ms`` on when given, read as it is used: a caller that
        keeps the newest few holds those, not the topics. Records without dead-letter
        headers are passed over."""
        with closing(audit_consumer(self.settings)) as consumer:
            for name in [topic] if topic else self.topics:
                for event in self._read_topic(consumer, name, since_ms):
                    letter = read_dead_letter(_position(event), event.headers, key=event.key)
                    if letter is not None:
                        yield letter

    def scan_after(self, after: RecordPosition | None) -> Generator[DeadLetter, None, None]:
        """The dead letters after ``after`` in log order (the topics as configured, each
        by partition, then offset), read as they are used: a page that takes fifty
        stops reading at the fiftieth, so paging costs what a page holds (and the
        records passed over), never the topics. Close the iterator when done."""
        topics = list(self.topics)
        if after is not None:
            topics = topics[topics.index(after.topic) :] if after.topic in topics else []
        with closing(audit_consumer(self.settings)) as consumer:
            for name in topics:
                for partition in range(self._require_topic(consumer, name)):
                    first = 0
                    if after is not None and name == after.topic:
                        if partition < after.partition:
                            continue
                        first = after.offset + 1 if partition == after.partition else 0
                    low, high = watermarks(consumer, name, partition, timeout_s=self.timeout_s)
                    low = max(low, first)
                    for event in iter_range(
                        consumer,
                        name,
                        partition,
                        low,
                        high,
                        keep=lambda _: True,
                        timeout_s=self.timeout_s,
                        stats=ReadStats(),
                    ):
                        letter = read_dead_letter(_position(event), event.headers, key=event.key)
                        if letter is not None:
                            yield letter

    def record_count(self) -> int:
        """Records in the dead-letter topics, from the watermarks alone (no record read):
        an upper bound of the dead letters kept, since transaction markers take offsets."""
        total = 0
        with closing(audit_consumer(self.settings)) as consumer:
            for name in self.topics:
                for partition in range(self._require_topic(consumer, name)):
                    low, high = watermarks(consumer, name, partition, timeout_s=self.timeout_s)
                    total += high - low
        return total

    def at(self, position: RecordPosition) -> FoundDeadLetter | LoggedEvent | None:
        """The record at ``position``: a dead letter, another record (not a dead
        letter), or None when there is none (past the end, or deleted)."""
        with closing(audit_consumer(self.settings)) as consumer:
            if position.partition >= self._require_topic(consumer, position.topic):
                return None
            _, high = watermarks(
                consumer, position.topic, position.partition, timeout_s=self.timeout_s
            )
            if position.offset >= high:
                return None
            events = fetch_at(consumer, [position], timeout_s=self.timeout_s, stats=ReadStats())
        event = events.get(position)
        if event is None:
            return None
        letter = read_dead_letter(position, event.headers, key=event.key)
        return event if letter is None else FoundDeadLetter(letter, event)

    def replays(self, letters: Iterable[DeadLetter]) -> dict[RecordPosition, list[EarlierReplay]]:
        """The replays of each of ``letters`` found in the log, oldest first.

        A replay lies on its dead letter's origin topic after the origin offset, so
        each origin partition is read once, from the first origin offset to its end,
        keeping only records that carry ``sagalog_replay_of`` (a header lookup, no decoding).
        """
        wanted: dict[tuple[str, int], dict[str, RecordPosition]] = defaultdict(dict)
        start: dict[tuple[str, int], int] = {}
        for letter in letters:
            where = (letter.origin.topic, letter.origin.partition)
            wanted[where][str(letter.position)] = letter.position
            first = letter.origin.offset + 1
            start[where] = min(start.get(where, first), first)
        found: dict[RecordPosition, list[EarlierReplay]] = defaultdict(list)
        with closing(audit_consumer(self.settings)) as consumer:
            for (topic, partition), names in sorted(wanted.items()):
                _, high = watermarks(consumer, topic, partition, timeout_s=self.timeout_s)

                def replay_of(message: Message, names: dict[str, RecordPosition] = names) -> bool:
                    return header_value(headers_of(message), H_REPLAY_OF) in names

                for event in read_range(
                    consumer,
                    topic,
                    partition,
                    start[(topic, partition)],
                    high,
                    keep=replay_of,
                    timeout_s=self.timeout_s,
                    stats=ReadStats(),
                ):
                    values = event.header_values
                    found[names[values[H_REPLAY_OF]]].append(
                        EarlierReplay(event_id=values.get("ce_id", "?"), position=_position(event))
                    )
        return dict(found)

    def decoded(self, record: LoggedEvent) -> tuple[dict[str, Any] | None, str | None]:
        """The record's payload as JSON values, or why it does not decode (often the
        very reason it was dead-lettered)."""
        try:
            return jsonable(self.codec.decode(record.value).payload), None
        except SagalogError as exc:
            return None, str(exc)

    def _read_topic(
        self, consumer: Consumer, topic: str, since_ms: int | None
    ) -> Iterator[LoggedEvent]:
        for partition in range(self._require_topic(consumer, topic)):
            low, high = watermarks(consumer, topic, partition, timeout_s=self.timeout_s)
            if since_ms is not None:
                at = offset_at_time(consumer, topic, partition, since_ms, timeout_s=self.timeout_s)
                low = high if at is None else max(low, at)
            yield from iter_range(
                consumer,
                topic,
                partition,
                low,
                high,
                keep=lambda _: True,
                timeout_s=self.timeout_s,
                stats=ReadStats(),
            )

    def _require_topic(self, consumer: Consumer, topic: str) -> int:
        """The partition count of ``topic``; a missing dead-letter topic has no dead letters."""
        try:
            info = consumer.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
        except Exception as exc:
            raise ServiceUnavailableError(f"reading the metadata of {topic} failed: {exc}") from exc
        if info is None or info.error is not None:
            return 0
        return len(info.partitions)


def _position(event: LoggedEvent) -> RecordPosition:
    return RecordPosition(event.topic, event.partition, event.offset)
