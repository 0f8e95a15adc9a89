"""Raw records of fixed offset ranges, chunk by chunk, with the positions to resume from.

``TopicReplay`` decodes payloads and forgets where records came from; a rebuild
needs the opposite: headers as well as values, several topics at once, and after
each chunk the offset to resume from per partition, to store with the state that
chunk produced. ``ChunkReader`` is that lower layer (``TopicReplay`` reads through
it too):

- the ranges are fixed before reading (``plan_ranges``): records appended later are
  not read, so a run, or a resumed run, reads one snapshot of the log;
- the consumer assigns partitions itself and never commits: a unique group id that
  joins no group and moves no service's offsets (a *shadow* reader);
- a partition is finished when the consumer's position reached its end, or at
  ``read_committed``'s end of the partition (an open or aborted transaction's
  records and the markers after them take offsets but are never delivered).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from sagalog.errors import ServiceUnavailableError
from sagalog.replay.decoding import cyclic_gc_paused
from sagalog.replay.exceptions import ReplayError

Position = tuple[str, int]
"""A partition of a topic: ``(topic, partition)``."""


@dataclass(frozen=True, slots=True)
class LogRange:
    """Offsets ``start`` (first to read) to ``stop`` (first not read) of one partition."""

    topic: str
    partition: int
    start: int
    stop: int

    @property
    def size(self) -> int:
        return max(0, self.stop - self.start)

    @property
    def position(self) -> Position:
        return (self.topic, self.partition)


def plan_ranges(consumer: Consumer, topics: Sequence[str], *, timeout_s: float) -> list[LogRange]:
    """Every partition of ``topics``, from the oldest record kept to the end now.

    Raises:
        ReplayError: a topic does not exist.
        ServiceUnavailableError: the broker did not answer within ``timeout_s``.
    """
    ranges = []
    try:
        for topic in topics:
            info = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise ReplayError(
                    f"topic {topic} does not exist; `sagalog topology plan` lists the declared "
                    "topics"
                )
            for partition in sorted(info.partitions):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=timeout_s
                )
                ranges.append(LogRange(topic, partition, int(low), int(high)))
    except KafkaException as exc:
        raise ServiceUnavailableError(
            f"reading the offsets of {', '.join(topics)} failed: "
            f"{exc.args[0].str() if exc.args else exc}"
        ) from exc
    return ranges


class ChunkReader:
    """Reads ``ranges`` in chunks of at most ``chunk_size`` records, in log order per partition.

    Args:
        consumer: a consumer made with ``replay_consumer_config`` (it is closed by
            whoever made it).
        ranges: what to read; empty ranges are skipped.
        chunk_size: records asked of librdkafka per call.
        idle_timeout_s: give up when nothing arrives for this long before the end.
    """

    def __init__(
        self,
        consumer: Consumer,
        ranges: Sequence[LogRange],
        *,
        chunk_size: int = 10_000,
        idle_timeout_s: float = 30.0,
    ) -> None:
        self.consumer = consumer
        self.ranges = [r for r in ranges if r.size]
        self.chunk_size = chunk_size
        self.idle_timeout_s = idle_timeout_s
        self.read = 0

    def chunks(self) -> Iterator[list[Message]]:
        """Lists of records (never empty), until every range was read to its end."""
        ends = {r.position: r.stop for r in self.ranges}
        if not ends:
            return
        self.consumer.assign([TopicPartition(r.topic, r.partition, r.start) for r in self.ranges])
        done: set[Position] = set()
        last_seen = time.monotonic()
        while len(done) < len(ends):
            with cyclic_gc_paused():  # see decoding.cyclic_gc_paused
                messages = self.consumer.consume(self.chunk_size, 0.5)
                kept = self._in_range(messages, ends, done) if messages else []
            if not messages:
                if time.monotonic() - last_seen > self.idle_timeout_s:
                    waiting = ", ".join(f"{t}/{p}" for t, p in sorted(set(ends) - done))
                    raise ReplayError(
                        f"nothing arrived from {waiting} for {self.idle_timeout_s:g}s before the "
                        "end of the range"
                    )
                continue
            last_seen = time.monotonic()
            if kept:
                self.read += len(kept)
                yield kept

    def _in_range(
        self, messages: list[Message], ends: dict[Position, int], done: set[Position]
    ) -> list[Message]:
        """The records of ``messages`` before their partition's end; finished ones join ``done``.

        The consumer's positions (last record handed over + 1) tell, once per batch,
        whether a partition reached its end and whether this batch passed it; only
        then are offsets read record by record, to drop the ones past the end.
        """
        kept = [m for m in messages if m.error() is None]
        if len(kept) < len(messages):
            for message in messages:
                error = message.error()
                if error is None:
                    continue
                if error.code() != KafkaError._PARTITION_EOF:
                    if error.retriable() and not error.fatal():
                        continue  # librdkafka retries on its own
                    raise ReplayError(f"reading {message.topic()} failed: {error.str()}")
                # The end of what is readable now (read_committed: before open transactions).
                where = (message.topic() or "", message.partition() or 0)
                if where in ends:
                    ends[where] = min(ends[where], message.offset() or 0)
        finished, beyond = [], {}
        asked = [TopicPartition(t, p) for t, p in ends if (t, p) not in done]
        for tp in self.consumer.position(asked) if asked else []:
            where = (tp.topic, tp.partition)
            if tp.offset >= ends[where]:
                finished.append(where)
            if tp.offset > ends[where]:
                beyond[where] = ends[where]
        if finished:
            done.update(finished)
            self.consumer.pause([TopicPartition(t, p) for t, p in finished])
        if beyond:
            kept = [
                m
                for m in kept
                if (m.offset() or 0) < beyond.get((m.topic() or "", m.partition() or 0), 1 << 62)
            ]
        return kept


def next_offsets(messages: Sequence[Message]) -> dict[Position, int]:
    """Per partition, the offset after the last of ``messages``: where to resume."""
    after: dict[Position, int] = {}
    for message in messages:
        after[(message.topic() or "", message.partition() or 0)] = (message.offset() or 0) + 1
    return after
