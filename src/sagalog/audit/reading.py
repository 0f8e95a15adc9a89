"""Reading records for an audit: by position, or through a bounded range of one partition.

An audit reads a handful of records, so it never scans a topic: it seeks to the
offsets the tracker sealed (``fetch_at``), or reads one partition's range that a
time index or a key's partition bounds (``read_range``). The consumer assigns
partitions itself, commits nothing and joins no group, so it moves no service's
offsets, and it fetches little ahead, since most reads are single records.

It reads committed records only, as the tracker does: an aborted transaction's
events were never sealed, and never belong in a workflow's history.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from sagalog.agents.records import headers_of
from sagalog.assigned_reader import assigned_consumer, not_ours
from sagalog.audit.exceptions import AuditError
from sagalog.contracts.headers import header_dict
from sagalog.errors import ServiceUnavailableError
from sagalog.settings import ClientSettings

READ_THROUGH = 200
"""Read on instead of seeking when the next wanted offset is at most this far ahead."""

Position = tuple[str, int, int]
"""(topic, partition, offset)."""


@dataclass(frozen=True)
class LoggedEvent:
    """One record as it lies in the log: the raw bytes an audit shows and verifies."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def position(self) -> str:
        return f"{self.topic}/{self.partition}@{self.offset}"

    @cached_property
    def header_values(self) -> dict[str, str]:
        return header_dict(self.headers)

    @classmethod
    def of(cls, message: Message) -> LoggedEvent:
        return cls(
            topic=str(message.topic()),
            partition=int(message.partition() or 0),
            offset=int(message.offset() or 0),
            timestamp_ms=int(message.timestamp()[1]),
            key=message.key(),
            value=message.value(),
            headers=tuple(
                (name, value if value is None or isinstance(value, bytes) else value.encode())
                for name, value in headers_of(message)
            ),
        )


@dataclass
class ReadStats:
    """How much an audit read, for its report: the point of the positions is that it is little."""

    records_read: int = 0
    seeks: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def audit_consumer(settings: ClientSettings) -> Consumer:
    """A consumer for point reads and short ranges: no group, no commits, no waiting
    for a fetch to fill (a point read wants one record now)."""
    return assigned_consumer(
        settings,
        f"sagalog-audit-{uuid.uuid4().hex}",
        **{
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
            "max.partition.fetch.bytes": 4 * 1024 * 1024,
        },
    )


def partitions_of(consumer: Consumer, topic: str, *, timeout_s: float) -> int:
    """How many partitions ``topic`` has.

    Raises:
        AuditError: the topic does not exist.
    """
    try:
        info = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    except Exception as exc:
        raise ServiceUnavailableError(f"reading the metadata of {topic} failed: {exc}") from exc
    if info is None or info.error is not None or not info.partitions:
        raise AuditError(
            f"topic {topic} does not exist; `sagalog topology plan` lists the declared topics"
        )
    return len(info.partitions)


def watermarks(
    consumer: Consumer, topic: str, partition: int, *, timeout_s: float
) -> tuple[int, int]:
    """The first offset kept and the next offset to be written."""
    low, high = consumer.get_watermark_offsets(
        TopicPartition(topic, partition), timeout=timeout_s, cached=False
    )
    return int(low), int(high)


def offset_at_time(
    consumer: Consumer, topic: str, partition: int, at_ms: int, *, timeout_s: float
) -> int | None:
    """The first offset timestamped at or after ``at_ms`` (None: none is)."""
    found = consumer.offsets_for_times([TopicPartition(topic, partition, at_ms)], timeout=timeout_s)
    offset = int(found[0].offset)
    return None if offset < 0 else offset


def fetch_at(
    consumer: Consumer, positions: Iterable[Position], *, timeout_s: float, stats: ReadStats
) -> dict[Position, LoggedEvent]:
    """The records at ``positions``; a position with no record (deleted, compacted, a
    transaction marker, never written) is absent from the answer.

    Positions are read partition by partition in offset order: a seek to each, or
    reading on through a short gap (``READ_THROUGH``), which is cheaper than a seek.
    """
    started = time.monotonic()
    wanted: dict[tuple[str, int], list[int]] = {}
    for topic, partition, offset in positions:
        wanted.setdefault((topic, partition), []).append(offset)
    found: dict[Position, LoggedEvent] = {}
    for (topic, partition), offsets in sorted(wanted.items()):
        pending = sorted(set(offsets))
        for event in _read_offsets(consumer, topic, partition, pending, timeout_s, stats):
            found[(topic, partition, event.offset)] = event
    stats.seconds += time.monotonic() - started
    return found


def _read_offsets(
    consumer: Consumer,
    topic: str,
    partition: int,
    pending: list[int],
    timeout_s: float,
    stats: ReadStats,
) -> Iterator[LoggedEvent]:
    index, next_read = 0, -1
    while index < len(pending):
        target = pending[index]
        if next_read < 0 or target < next_read or target - next_read > READ_THROUGH:
            consumer.assign([TopicPartition(topic, partition, target)])
            stats.seeks += 1
        message = _poll(consumer, topic, partition, timeout_s)
        if message is None:  # the end of the partition: nothing more to find in it
            return
        stats.records_read += 1
        offset = int(message.offset() or 0)
        while index < len(pending) and pending[index] < offset:
            index += 1  # nothing at that offset: it is reported missing by the caller
        if index < len(pending) and pending[index] == offset:
            yield LoggedEvent.of(message)
            index += 1
        next_read = offset + 1


def read_range(
    consumer: Consumer,
    topic: str,
    partition: int,
    start: int,
    stop: int,
    *,
    keep: Callable[[Message], bool],
    timeout_s: float,
    stats: ReadStats,
    until: Callable[[LoggedEvent], bool] | None = None,
) -> list[LoggedEvent]:
    """The records of offsets ``[start, stop)`` that ``keep`` accepts, in log order.

    ``until``: stop early after a kept record it accepts.
    """
    return list(
        iter_range(
            consumer,
            topic,
            partition,
            start,
            stop,
            keep=keep,
            timeout_s=timeout_s,
            stats=stats,
            until=until,
        )
    )


def iter_range(
    consumer: Consumer,
    topic: str,
    partition: int,
    start: int,
    stop: int,
    *,
    keep: Callable[[Message], bool],
    timeout_s: float,
    stats: ReadStats,
    until: Callable[[LoggedEvent], bool] | None = None,
) -> Iterator[LoggedEvent]:
    """``read_range`` one record at a time: a reader that keeps only a few of a long
    range (the newest dead letters) holds those, not the range."""
    if start >= stop:
        return
    started = time.monotonic()
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        stats.seeks += 1
        done = False
        last_arrival = time.monotonic()
        while not done:
            # A short wait per call: consume() waits its whole timeout for a full batch,
            # and the end of a range rarely fills one.
            messages = consumer.consume(5000, 0.1)
            if not messages:
                if time.monotonic() - last_arrival > timeout_s:
                    raise ServiceUnavailableError(
                        f"nothing arrived from {topic}/{partition} for {timeout_s:g}s before "
                        f"offset {stop}"
                    )
                continue
            last_arrival = time.monotonic()
            for message in messages:
                kind = _kind(message, topic, partition)
                if kind == "skip":
                    continue
                if kind == "end":
                    done = True
                    break
                offset = int(message.offset() or 0)
                if offset >= stop:
                    done = True
                    break
                stats.records_read += 1
                if keep(message):
                    event = LoggedEvent.of(message)
                    yield event
                    if until is not None and until(event):
                        done = True
                        break
                if offset + 1 >= stop:
                    done = True
                    break
    finally:
        stats.seconds += time.monotonic() - started


def _poll(consumer: Consumer, topic: str, partition: int, timeout_s: float) -> Message | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = consumer.poll(min(0.5, timeout_s))
        if message is None:
            continue
        kind = _kind(message, topic, partition)
        if kind == "end":
            return None
        if kind == "record":
            return message
    raise ServiceUnavailableError(f"nothing arrived from {topic}/{partition} for {timeout_s:g}s")


def _kind(message: Message, topic: str, partition: int) -> str:
    """``record``, ``end`` (of the partition) or ``skip`` (an error librdkafka retries).

    Raises:
        AuditError: any other error.
    """
    error: Any = message.error()
    if error is None:
        return "record"
    if error.code() == KafkaError._PARTITION_EOF:
        return "end"
    if (error.retriable() and not error.fatal()) or not_ours(error):
        return "skip"
    raise AuditError(f"reading {topic}/{partition} failed: {error.str()}")
