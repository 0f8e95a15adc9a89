"""The tracker's input, read by librdkafka; faust keeps the group, the tables and the clock.

faust's delivery is costly for a tracker under load
(docs/design/tuning-measurements.md): aiokafka parses every fetch response in Python,
and each record then goes through faust's conductor, its stream and an event object
before the tracker sees it. Here one librdkafka consumer reads the workflow topics'
partitions this worker owns and hands the records over in lists, each record a small
slotted object with the fields the tracker reads.

faust still decides who owns what: its group membership and assignor (the workflow
topics stay in its subscription, so partition *p* of them, of the clock topic and of
every table still go to one worker), its table recovery and its commits of the
tracker's offsets. Its own consumer never fetches the workflow partitions: they are
paused in aiokafka as they are assigned (``transport``). This consumer never joins
the group: it is given, by ``assign``, the partitions faust has recovered the tables
of, from the group's committed offsets, once faust's recovery is complete, and it
lets them go when faust revokes them.

The consumer is used from one thread of its own, which waits in librdkafka (GIL
released) instead of waking the event loop; the records cross to the loop in one
call per fetch. Records taken under an assignment carry its generation, so those
still queued when a rebalance came are dropped (``batching.of_generation``), as
faust's own stream drops them.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_STORED, Consumer, KafkaError, KafkaException, TopicPartition
from faust.types import TP

from sagalog.authorization import authorization_error, is_authorization_failure, topic_denied
from sagalog.errors import SagalogError
from sagalog.kafka_errors import NO_ANSWER
from sagalog.settings import ClientSettings

log = logging.getLogger("sagalog.tracker")

# One consume call's most records; the batcher takes batches of its own size from the
# queue they join.
CONSUME_MAX = 500

# How long the thread waits in librdkafka for records before it looks at its commands
# again (an assignment, a stop): the longest a new assignment waits to be read. Each
# wait that ends empty costs a look at the positions: four a second while idle.
CONSUME_WAIT_S = 0.25

# How long the check of the tracker's rights on an assignment's topics waits for the
# broker's metadata.
METADATA_TIMEOUT_S = 15.0

# How the consumer fetches. A short prefetch queue: the records are decided as fast
# as they come, and what waits in librdkafka's queue or in a large fetch buffer is
# memory a tracker keeps after a burst. A partition past its queue's bound is fetched
# again after 10 ms (librdkafka waits a second by default: a stall per burst). The
# broker answers a fetch once 4 KiB are there or the tracker's ``fetch_max_wait_ms``
# passed: librdkafka fetches again as soon as its queue has room, so with less a busy
# tracker fetches for every few records, and with much more a quiet one waits out the
# whole ``fetch_max_wait_ms``. The measurements: docs/design/tuning-measurements.md.
FETCH_CONFIG: dict[str, Any] = {
    "fetch.min.bytes": 4 * 1024,
    "fetch.queue.backoff.ms": 10,
    "queued.min.messages": 500,
    "queued.max.messages.kbytes": 1024,
    "max.partition.fetch.bytes": 256 * 1024,
    "fetch.max.bytes": 2 * 1024 * 1024,
}


class InputFailed(SagalogError):
    """The input consumer met an error it cannot read past (a fatal client error): the
    tracker exits and a fresh worker takes over. A missing right is an
    ``AuthorizationError`` instead, naming the principal and the resource."""


class Record:
    """One consumed record, with the fields (and the names) faust's message has.

    Slotted and built without validation: one per input record on the hot path.
    """

    __slots__ = (
        "generation_id",
        "headers",
        "key",
        "offset",
        "partition",
        "timestamp",
        "topic",
        "tp",
        "value",
    )

    def __init__(
        self,
        tp: TP,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None,
        timestamp_ms: int,
        generation_id: int,
    ) -> None:
        self.tp = tp
        self.topic = tp.topic
        self.partition = tp.partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers or []
        self.timestamp = timestamp_ms / 1000  # seconds, as faust's
        self.generation_id = generation_id


@dataclass(frozen=True)
class _Assign:
    generation: int
    partitions: tuple[TP, ...]


_UNASSIGN = object()
_STOP = object()


class LogInput:
    """Reads the partitions it is given with librdkafka, for the tracker's batches.

    Args:
        settings: the connection and security settings (the tracker's principal).
        group: the tracker's group, for its committed offsets only: never joined.
        client_id: the consumer's name in the broker's logs and quotas.
        capacity: how many records may wait, read and not yet taken, before the
            thread stops reading (librdkafka's own prefetch aside).
        fetch_max_wait_ms: how long the broker may hold a fetch with little new.
    """

    def __init__(
        self,
        settings: ClientSettings,
        *,
        group: str,
        client_id: str,
        capacity: int,
        fetch_max_wait_ms: int = 100,
    ) -> None:
        self.settings = settings
        self.group = group
        self.config = {
            **settings.kafka_config(**{"group.id": group, "client.id": client_id}),
            **FETCH_CONFIG,
            "fetch.wait.max.ms": fetch_max_wait_ms,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,  # where a partition's end is: ``_look``
            "auto.offset.reset": "earliest",
        }
        self.capacity = capacity
        self._queued = 0  # read and not yet taken: counted by both threads, under the lock
        self._lock = threading.Lock()
        self.assigned: tuple[TP, ...] = ()
        self._tps: dict[tuple[str, int], TP] = {}
        self._ends: dict[tuple[str, int], tuple[int | None, int | None]] = {}
        self._at_end: dict[tuple[str, int], int] = {}  # the offset each partition's end was seen at
        self._handed: dict[
            tuple[str, int], int
        ] = {}  # the offset after the last record handed over
        self._refetch = False  # the committed offsets of an assignment were not fetched
        self._records: asyncio.Queue[list[Any] | BaseException] = asyncio.Queue()
        self._commands: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._room = threading.Event()
        self._room.set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._consumer: Consumer | None = None

    # -- the loop's side --------------------------------------------------------------

    def assign(self, generation: int, partitions: Iterable[TP]) -> None:
        """Read ``partitions`` from the group's committed offsets, as ``generation``'s.

        The first assignment creates the consumer and its thread, on the running loop.
        """
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            self._consumer = Consumer(self.config)
            self._thread = threading.Thread(target=self._run, name="tracker-input", daemon=True)
            self._thread.start()
        self.assigned = tuple(sorted(partitions))
        self._commands.put(_Assign(generation, self.assigned))

    def add(self, records: list[Any]) -> None:
        """Queue records read elsewhere (the clock topic's ticks, which faust reads)
        behind those read here, for the same batches."""
        self._count(len(records))
        self._records.put_nowait(records)

    @property
    def queued(self) -> int:
        """Records read and not yet taken by the batches."""
        return self._queued

    def _count(self, change: int) -> None:
        """Count records in (read) or out (taken); the thread reads on while fewer than
        ``capacity`` are queued and again once half of them were taken.

        Counted by the thread as it reads, not when the loop gets round to its
        delivery: a loop busy deciding a batch let the thread read on, unbounded.
        """
        with self._lock:
            self._queued += change
            if self._queued >= self.capacity:
                self._room.clear()
            elif self._queued * 2 <= self.capacity:
                self._room.set()

    def unassign(self) -> None:
        """Stop reading every partition; records already queued are the batcher's to drop."""
        self.assigned = ()
        self._commands.put(_UNASSIGN)

    def stop(self) -> None:
        """End the thread, which closes the consumer; never waits for it."""
        if self._thread is not None:
            self._commands.put(_STOP)

    async def records(self) -> AsyncIterator[Any]:
        """Every record read, in the order of each partition, one at a time.

        Raises:
            InputFailed: the consumer met an error it cannot read past.
        """
        while True:
            got = await self._records.get()
            if isinstance(got, BaseException):
                raise got
            self._count(-len(got))
            for record in got:
                yield record

    def position(self, tp: TP) -> tuple[int | None, int | None]:
        """The next offset to read and the high watermark last fetched (None: not known
        yet), for ``caught_up``, as the thread saw them after its last fetch.

        Read from the thread's last look, not asked of the consumer: a librdkafka
        consumer called from a second thread while the first waits in ``consume``
        blocks, and the event loop with it (docs/design/incident-history.md).
        """
        if tp not in self.assigned:
            return None, None
        return self._ends.get((tp.topic, tp.partition), (None, None))

    def handed(self, tp: TP) -> int | None:
        """The offset after the last record of ``tp`` handed over to the batches (None:
        none yet under this assignment), for ``caught_up``: what the consumer fetched
        may still wait in a queue, undecided."""
        return self._handed.get((tp.topic, tp.partition))

    def _deliver(self, got: list[Any] | BaseException) -> None:
        self._records.put_nowait(got)

    # -- the thread's side ----------------------------------------------------------

    def _run(self) -> None:
        consumer = self._consumer
        loop = self._loop
        assert consumer is not None and loop is not None
        generation = -1
        reading = False
        parts: list[TopicPartition] = []
        try:
            while True:
                while not self._commands.empty() or not reading:
                    command = self._commands.get()
                    if command is _STOP:
                        return
                    if command is _UNASSIGN:
                        consumer.unassign()
                        reading, parts = False, []
                    elif isinstance(command, _Assign):
                        generation = command.generation
                        self._check_rights(consumer, {t for t, _ in command.partitions})
                        parts = [TopicPartition(t, p) for t, p in command.partitions]
                        consumer.assign(
                            [TopicPartition(t, p, OFFSET_STORED) for t, p in command.partitions]
                        )
                        reading = bool(parts)
                    self._ends, self._at_end, self._handed = {}, {}, {}
                if not self._room.wait(CONSUME_WAIT_S):
                    continue  # the batches are behind: librdkafka's prefetch holds the rest
                messages = self._next(consumer)
                if messages:
                    got = self._records_of(messages, generation)
                    if got:
                        self._count(len(got))
                        loop.call_soon_threadsafe(self._deliver, got)
                self._ends = self._look(consumer, parts)
                if self._refetch:
                    self._refetch = False
                    self._assign_again(consumer, parts)
        except BaseException as exc:  # handed to the loop, which ends the process
            failed = exc if isinstance(exc, SagalogError) else InputFailed(f"input: {exc}")
            loop.call_soon_threadsafe(self._deliver, failed)
        finally:
            consumer.close()

    def _assign_again(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        """Assign again, from the committed offsets, the partitions still without a
        position, keeping the others where they are (``refetch_from``)."""
        time.sleep(REFETCH_PAUSE_S)  # the group's coordinator is moving: give it a moment
        again = refetch_from(
            [(tp.topic, tp.partition, tp.offset) for tp in consumer.position(parts)]
        )
        log.warning(
            "input: assigning again, from the committed offsets, %s",
            ", ".join(f"{t}/{p}" for t, p, o in again if o == OFFSET_STORED) or "nothing",
            extra={"sagalog": {"agent": "saga-tracker", "action": "input_refetch"}},
        )
        consumer.assign([TopicPartition(t, p, o) for t, p, o in again])

    def _check_rights(self, consumer: Consumer, topics: set[str]) -> None:
        """Refuse to read a topic this principal may not see, naming both.

        Without DESCRIBE the partition's metadata never comes and librdkafka waits
        silently, delivering nothing and no error; a
        missing READ alone comes back as an error on the partition (``_read_error``).
        A broker that does not answer the check refuses nothing (``ends_the_input``).
        """
        for topic in sorted(topics):
            try:
                denied = topic_denied(consumer, topic, timeout=METADATA_TIMEOUT_S)
            except KafkaException as exc:
                if ends_the_input(exc.args[0]):
                    raise
                log.warning(
                    "input: the rights on %s were not checked, the broker did not answer "
                    "(%s); reading the assignment anyway",
                    ", ".join(sorted(topics)),
                    exc.args[0].str(),
                    extra={"sagalog": {"agent": "saga-tracker", "action": "outage"}},
                )
                return
            if denied is not None:
                raise authorization_error(self.settings, denied, operation="READ", resource=topic)

    @staticmethod
    def _next(consumer: Consumer) -> list[Any]:
        """Wait for the first record, then take what else is queued, without waiting.

        ``consume(n, timeout)`` returns only when it has ``n`` records or the timeout
        ran out: asked for a batch, every record of a quiet tracker would wait the whole
        timeout, and with it every tracker hand-off (docs/design/tuning-measurements.md).
        """
        first = consumer.poll(CONSUME_WAIT_S)
        if first is None:
            return []
        return [first, *consumer.consume(CONSUME_MAX - 1, 0)]

    def _look(
        self, consumer: Consumer, parts: list[TopicPartition]
    ) -> dict[tuple[str, int], tuple[int | None, int | None]]:
        """Each partition's next offset and last fetched high watermark (no request).

        librdkafka knows a position only once it delivered a record of the partition;
        a partition read to its end is also known by where its end was reported
        (``enable.partition.eof``). Without that, an empty partition (a flow nobody
        started yet) would count as unread for good, and the timers of its partition
        number would never fire (docs/design/incident-history.md).
        """
        ends: dict[tuple[str, int], tuple[int | None, int | None]] = {}
        for at in consumer.position(parts):
            key = (at.topic, at.partition)
            _low, high = consumer.get_watermark_offsets(at, cached=True)
            known = [o for o in (at.offset, self._at_end.get(key, -1)) if o >= 0]
            ends[key] = (max(known) if known else None, high if high >= 0 else None)
        return ends

    def _records_of(self, messages: list[Any], generation: int) -> list[Record]:
        tps = self._tps
        handed = self._handed
        got = []
        for message in messages:
            error = message.error()
            if error is not None:
                self._read_error(error, message)
                continue
            topic, partition = message.topic(), message.partition()
            tp = tps.get((topic, partition))
            if tp is None:
                tp = tps[(topic, partition)] = TP(topic, partition)
            offset = message.offset()
            handed[(topic, partition)] = offset + 1
            got.append(
                Record(
                    tp,
                    offset,
                    message.key(),
                    message.value(),
                    message.headers(),
                    message.timestamp()[1],
                    generation,
                )
            )
        return got

    def _read_error(self, error: KafkaError, message: Any) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            self._at_end[(message.topic(), message.partition())] = message.offset()
            return
        if is_authorization_failure(error):  # no restart gets past a missing right
            resource = self.group if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED else None
            raise authorization_error(
                self.settings, error, operation="READ", resource=resource or message.topic()
            )
        if error.fatal() or error.code() in _CANNOT_READ_PAST:
            raise InputFailed(
                f"reading {message.topic()}/{message.partition()} failed: {error.str()}; "
                "the worker exits so that a fresh one takes its partitions over"
            ) from KafkaException(error)
        if error.code() in _COORDINATOR_AWAY:
            # This consumer never joins the group: a coordinator error can only be the
            # fetch of an assignment's committed offsets, which librdkafka does not
            # retry; the partitions would stay unread until the stall watch exits.
            self._refetch = True
        log.warning(
            "input: %s",
            error.str(),
            extra={"sagalog": {"agent": "saga-tracker", "action": "input_error"}},
        )


_CANNOT_READ_PAST = frozenset({KafkaError._INVALID_ARG})

_COORDINATOR_AWAY = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)

REFETCH_PAUSE_S = 1.0
"""How long the input waits before it asks for the committed offsets again."""


def refetch_from(positions: Iterable[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """Where each assigned partition is to be read from when an assignment's committed
    offsets were not fetched: a partition with a position (it was read) goes on from
    it, and one without (``position`` answers a negative offset) from the committed
    offset again. Nothing read is read twice, and nothing is skipped."""
    return [(t, p, o if o >= 0 else OFFSET_STORED) for t, p, o in positions]


def ends_the_input(error: KafkaError) -> bool:
    """Whether a rights check that raised ``error`` ends the input (the tracker exits 70).

    An assignment comes at the end of a rebalance, and a rebalance after every broker
    outage, so the check's metadata request meets a broker restarted or resumed a
    moment ago, on a machine busy with every client reconnecting, after this
    consumer's reconnect backoff: it can outlast ``METADATA_TIMEOUT_S``, and an outage
    every service is to ride out then cost a restart. A broker that did not answer
    refuses nothing: the partitions are read anyway, librdkafka waits for the broker
    as for any fetch, and a right truly missing shows as the stall the watchdog exits
    on, after which the new worker checks again. Any other error still ends the input.
    """
    return error.code() not in NO_ANSWER
