"""The model streams, tailed once, served to every subscriber (``/v1/workflows/{id}/stream``).

One thread reads every stream topic of the gateway's flows (``sagalog.stream.<topic>``)
from the start of what they hold, with ``assign()`` and no commits, and keeps each
workflow's records in memory, in offset order. A subscriber takes, under one lock,
the records after the offset it names (``Last-Event-ID``; none: all of them, so a late
subscriber replays what the topic holds) and registers for what comes next: no record
falls between the two, and none comes twice. Each poll's records reach each event loop
that has subscribers with one ``call_soon_threadsafe``, where they are fanned out.

Memory: what the topics hold, about an hour of model output (``STREAM_TOPIC_CONFIG``).
A workflow whose last record is older than the retention is dropped, as Kafka drops
it. At a few hundred bytes a delta, a thousand streams of a thousand deltas an hour
are a few hundred MB; beyond that, run more gateways behind a balancer by workflow.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from sagalog.audit.lookup import partition_for
from sagalog.errors import ConfigurationError
from sagalog.settings import ClientSettings
from sagalog.streams.record import HOUR_MS, StreamRecord

log = logging.getLogger("sagalog.gateway")

POLL_S = 0.05
BATCH = 500
TOPICS_RECHECK_S = 2.0


@dataclass(eq=False)  # by identity: a hub keeps them in sets
class Subscription:
    """One SSE connection's queue of (offset, record), on its event loop."""

    key: tuple[str, str]
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[tuple[int, StreamRecord]] = field(default_factory=asyncio.Queue)
    last_offset: int = -1

    def offer(self, items: Iterable[tuple[int, StreamRecord]]) -> None:
        """On the subscriber's loop."""
        for offset, record in items:
            if offset > self.last_offset:
                self.last_offset = offset
                self.queue.put_nowait((offset, record))


_Delivery = tuple[Subscription, list[tuple[int, StreamRecord]]]


@dataclass
class _Held:
    records: list[tuple[int, StreamRecord]] = field(default_factory=list)
    touched_ms: int = 0


class StreamHub:
    """Tails the stream topics; hands each workflow's records to its subscribers."""

    def __init__(
        self,
        settings: ClientSettings,
        *,
        topics: Iterable[str],
        group_prefix: str,
        retention_ms: int = HOUR_MS,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.settings = settings
        self.topics = tuple(sorted(set(topics)))
        self.group_prefix = group_prefix
        self.retention_ms = retention_ms
        self.wall_ms = wall_ms
        self.partitions: dict[str, int] = {}
        """Each stream topic's partition count, once it exists."""
        self._held: dict[tuple[str, str], _Held] = {}
        self._subscribers: dict[tuple[str, str], set[Subscription]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.records_read = 0

    # -- serving -------------------------------------------------------------------

    def partition_of(self, topic: str, workflow_id: str) -> int | None:
        """The partition of ``topic`` holding ``workflow_id``'s records (None: the topic
        does not exist yet, no agent has streamed on it)."""
        count = self.partitions.get(topic)
        return None if count is None else partition_for(workflow_id.encode(), count)

    def topic_holding(self, workflow_id: str) -> str | None:
        """The stream topic that holds records of ``workflow_id``, if one does."""
        with self._lock:
            for topic in self.topics:
                if (topic, workflow_id) in self._held:
                    return topic
        return None

    def subscribe(self, topic: str, workflow_id: str, *, after: int | None) -> Subscription:
        """A subscription to ``workflow_id``'s stream on ``topic``, holding already every
        record after offset ``after`` (None: every record held), then what comes next.

        Raises:
            ConfigurationError: ``topic`` is not a stream topic this hub reads.
        """
        if topic not in self.topics:
            raise ConfigurationError(f"the gateway does not read stream topic '{topic}'")
        key = (topic, workflow_id)
        subscription = Subscription(key, asyncio.get_running_loop())
        with self._lock:
            held = self._held.get(key)
            backlog = [] if held is None else list(held.records)
            subscription.last_offset = -1 if after is None else after
            subscription.offer(backlog)
            self._subscribers.setdefault(key, set()).add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            found = self._subscribers.get(subscription.key)
            if found is not None:
                found.discard(subscription)
                if not found:
                    del self._subscribers[subscription.key]

    @property
    def subscribers(self) -> int:
        with self._lock:
            return sum(len(s) for s in self._subscribers.values())

    # -- the tail --------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._supervise, name="gateway-streams", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _supervise(self) -> None:
        while not self._stop.is_set():
            try:
                self._run()
            except Exception:  # the thread must go on, not vanish: streams are live output
                log.exception("the model stream reader starts again")
            self._stop.wait(1.0)

    def _run(self) -> None:
        consumer = Consumer(
            self.settings.kafka_config(
                **{
                    "group.id": f"{self.group_prefix}streams-{uuid.uuid4()}",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 10,  # latency over batching: deltas are small
                    "queued.max.messages.kbytes": 8192,
                }
            )
        )
        assigned: list[TopicPartition] = []
        next_check = 0.0
        next_trim = time.monotonic() + 60
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= next_check and len(self.partitions) < len(self.topics):
                    added = self._new_partitions(consumer)
                    if added:
                        assigned += added
                        consumer.assign(assigned)  # offsets kept: each new one from the start
                    next_check = now + TOPICS_RECHECK_S
                if not assigned:
                    self._stop.wait(POLL_S)
                    continue
                # consume(n, t) waits for n records or all of t: a delta would wait
                # out the timeout. The first record wakes the loop, the rest come along.
                first = consumer.poll(POLL_S)
                if first is not None:
                    self._take([first, *consumer.consume(BATCH, 0)])
                if now >= next_trim:
                    self._trim()
                    next_trim = now + 60
        except KafkaException as exc:
            log.warning("the model stream reader lost the broker: %s", exc)
        finally:
            consumer.close()
            with self._lock:  # read again from the start on the next run
                self._held.clear()
            self.partitions.clear()

    def _new_partitions(self, consumer: Consumer) -> list[TopicPartition]:
        metadata = consumer.list_topics(timeout=self.settings.connect_timeout_s)
        added = []
        for topic in self.topics:
            found = metadata.topics.get(topic)
            if topic in self.partitions or found is None or found.error is not None:
                continue
            self.partitions[topic] = len(found.partitions)
            added += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in found.partitions]
        return added

    def _take(self, messages: Sequence[Message]) -> None:
        now = self.wall_ms()
        by_loop: dict[asyncio.AbstractEventLoop, list[_Delivery]] = {}
        fresh: dict[tuple[str, str], list[tuple[int, StreamRecord]]] = {}
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("model stream read error: %s", error)
                continue
            topic, offset, value = message.topic(), message.offset(), message.value()
            if topic is None or offset is None or value is None:
                continue
            try:
                record = StreamRecord.decode(value)
            except ConfigurationError as exc:
                log.warning("skipped a model stream record: %s", exc)
                continue
            fresh.setdefault((topic, record.workflow_id), []).append((offset, record))
        if not fresh:
            return
        with self._lock:
            for key, items in fresh.items():
                held = self._held.setdefault(key, _Held())
                held.records += items
                held.touched_ms = now
                for subscription in self._subscribers.get(key, ()):
                    by_loop.setdefault(subscription.loop, []).append((subscription, items))
        self.records_read += sum(len(items) for items in fresh.values())
        for loop, deliveries in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, deliveries)
            except RuntimeError:  # the loop closed (the server is stopping)
                continue

    def _trim(self) -> None:
        """Drop what Kafka's retention has dropped (``retention_ms`` after its last
        record), unless someone is still subscribed."""
        oldest = self.wall_ms() - self.retention_ms
        with self._lock:
            for key in [k for k, h in self._held.items() if h.touched_ms < oldest]:
                if key not in self._subscribers:
                    del self._held[key]


def _deliver(deliveries: list[_Delivery]) -> None:
    for subscription, items in deliveries:
        subscription.offer(items)
