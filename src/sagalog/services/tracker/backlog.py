"""What the broker says is waiting for this tracker, independent of faust's consumer.

The watchdog (``watchdog.Watchdog``) needs to know whether records wait that a stalled
worker is not delivering. Asking faust's own consumer for its high watermark and
position cannot tell: a consumer that came out of a rebalance and never fetched
knows neither, which is exactly the stall to catch: a replacement worker assigned,
its tables ready, nothing delivered and no watermark. So
the probe asks the broker, with its own clients: the last stable offset (what a
``read_committed`` reader can reach) against the group's committed offset, and
where they differ, whether a record can actually be read from there. The second
look matters because agents write in transactions: the commit marker after their
last record takes an offset that no reader ever receives, so a tracker that
processed everything still has its committed offset one short of the end.
The offsets are asked every watch (two small admin requests and one offset fetch);
the read, which
costs a consumer, only for a partition whose committed offset stood still for
``stall_timeout_s`` with records past it (``stall.judge``), and a verdict of
"only markers there" is remembered for the same offsets. Only a read that reached the
span's end can give that verdict: a read that ran out of time (a fresh consumer on a
loaded machine) knows nothing, and remembering it as "only markers" once hid a
stalled partition from every later watch (issue 45).

While the broker is away every one of those calls fails, and they fail two ways: a
``KafkaException`` from librdkafka, or a ``TimeoutError`` from ``future.result``
when the answer does not come within ``TIMEOUT_S`` (the latter once killed the
tracker, exit 1, because the watch caught only the former). Both leave here as one
``ServiceUnavailableError``: "the broker did not answer", which the watch rides out.

The group's committed offsets are read with a consumer of the group that never
subscribes (so never joins it), not with ``AdminClient.list_consumer_group_offsets``:
an admin client's offset fetch answered NOT_COORDINATOR, which a restarted broker
answers while it loads the group, makes librdkafka dereference the consumer-group
handle an admin client does not have (``rd_kafka_cgrp_op(rkcg=0x0)`` from
``rd_kafka_handle_OffsetFetch``, confluentinc/confluent-kafka-javascript#374; the
same call's segfaults in confluent-kafka-python#1982). Seen here: the tracker
died of SIGSEGV (exit -11) at the first watch after a broker restart, twice in
three runs, with the watch's previous call timed out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from confluent_kafka import Consumer, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from sagalog.errors import ServiceUnavailableError
from sagalog.services.tracker.settings import TrackerSettings

log = logging.getLogger("sagalog.tracker")

TIMEOUT_S = 10.0
READ_S = TIMEOUT_S / 2
"""How long a read of the records past a stalled partition's offset may take."""
GUARD_TIMEOUT_S = 2.0
"""How long the timer guard waits for the partitions' ends (``stable_ends``): it holds
the batch in hand, and a partition whose leader is moving answers after the election;
its timers wait for the next tick instead."""

Position = tuple[str, int]
_Answer = TypeVar("_Answer", bound=dict)  # type: ignore[type-arg]
Span = tuple[int, int]
"""The group's committed offset and the read_committed end of a partition."""


class BacklogProbe:
    """Records readable but not committed by the tracker's group, per partition."""

    def __init__(self, settings: TrackerSettings) -> None:
        self.settings = settings
        self.group = settings.app_id
        self.admin = AdminClient(
            settings.kafka_config(**{"client.id": f"{settings.app_id}-backlog-probe"})
        )
        self._unreadable: dict[Position, Span] = {}
        config = settings.kafka_config(
            **{
                "group.id": self.group,  # the tracker's group, read and never joined
                "enable.auto.commit": False,
                "client.id": f"{settings.app_id}-backlog-probe",
            }
        )
        self._group_offsets = Consumer(config)

    def behind(self, partitions: Iterable[Position]) -> dict[Position, Span]:
        """``{(topic, partition): (committed, end)}`` where the read_committed end lies
        past the group's committed offset (blocking; run it in a thread).

        Raises:
            ServiceUnavailableError: the broker did not answer within ``TIMEOUT_S``.
        """
        return self._asking(
            "the group's offsets and the partitions' ends", self._behind, partitions
        )

    def _behind(self, tps: list[TopicPartition]) -> dict[Position, Span]:
        stable = self._offsets(tps, OffsetSpec.latest())  # type: ignore[no-untyped-call]
        earliest = self._offsets(tps, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
        committed = {
            (tp.topic, tp.partition): tp.offset
            for tp in self._group_offsets.committed(tps, timeout=TIMEOUT_S)
        }
        behind = {}
        for key, end in stable.items():
            start = committed.get(key, -1)
            if start < 0:  # nothing committed yet: the group starts from the earliest
                start = earliest.get(key, 0)
            if end > start:
                behind[key] = (start, end)
        return behind

    def held_open(self, partitions: Iterable[Position]) -> dict[Position, Span]:
        """``{(topic, partition): (stable, end)}`` where the last stable offset lies below
        the log end: a transaction is open there (``sagalog.open_transactions``; blocking).

        Raises:
            ServiceUnavailableError: the broker did not answer within ``TIMEOUT_S``.
        """
        return self._asking("the partitions' stable offsets and ends", self._held_open, partitions)

    def _held_open(self, tps: list[TopicPartition]) -> dict[Position, Span]:
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        stable = self._offsets(tps, latest)
        ends = self._offsets(tps, latest, isolation=IsolationLevel.READ_UNCOMMITTED)
        return {
            key: (stable[key], end)
            for key, end in ends.items()
            if key in stable and stable[key] < end
        }

    def stable_ends(self, partitions: Iterable[Position]) -> dict[Position, int]:
        """``{(topic, partition): end}``: what a ``read_committed`` reader can reach now,
        for the timer guard (``caught_up``; blocking). A partition the broker does not
        answer for is left out, which the guard takes for "cannot tell".

        Raises:
            ServiceUnavailableError: the broker did not answer within ``GUARD_TIMEOUT_S``.
        """
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        return self._asking(
            "the partitions' stable offsets",
            lambda tps: self._offsets(tps, latest, timeout_s=GUARD_TIMEOUT_S),
            partitions,
            GUARD_TIMEOUT_S,
        )

    def readable(self, spans: dict[Position, Span], *, within_s: float = READ_S) -> set[Position]:
        """The partitions where a committed record can be read inside its span.

        A span read to its end without a record holds only markers, and is not read
        again while it stays the same; one not read to its end within ``within_s`` is
        neither, and is read again at the next look.

        Raises:
            ServiceUnavailableError: the broker did not answer.
        """
        unknown = {key: span for key, span in spans.items() if self._unreadable.get(key) != span}
        try:
            found, unsettled = self._read(unknown, within_s)
        except (KafkaException, TimeoutError) as exc:
            raise self._unavailable("a read of the records past the group's offset", exc) from exc
        for key, span in unknown.items():
            if key not in found and key not in unsettled:
                self._unreadable[key] = span
        if unsettled:
            log.warning(
                "stall check: %s not read to the end within %g s; read again at the next look",
                {f"{t}/{p}": unknown[(t, p)] for t, p in sorted(unsettled)},
                within_s,
                extra={"sagalog": {"agent": "saga-tracker", "action": "stall_check"}},
            )
        return found

    def waiting(self, partitions: Iterable[Position]) -> dict[Position, int]:
        """``{(topic, partition): records}`` past the group's offset that can be read."""
        behind = self.behind(partitions)
        readable = self.readable(behind)
        return {key: end - start for key, (start, end) in behind.items() if key in readable}

    def _read(
        self, spans: dict[Position, Span], within_s: float
    ) -> tuple[set[Position], set[Position]]:
        """The spans where a record was read, and those not read to their end in time."""
        if not spans:
            return set(), set()
        reader = Consumer(
            self.settings.kafka_config(
                **{
                    "group.id": f"{self.group}-backlog-probe",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "client.id": f"{self.group}-backlog-probe",
                }
            )
        )
        found: set[Position] = set()
        open_spans = dict(spans)
        try:
            reader.assign([TopicPartition(t, p, start) for (t, p), (start, _) in spans.items()])
            deadline = time.monotonic() + within_s
            while open_spans and time.monotonic() < deadline:
                for message in reader.consume(num_messages=500, timeout=0.2):
                    if message.error() is None:
                        key = (str(message.topic()), int(message.partition() or 0))
                        found.add(key)
                        open_spans.pop(key, None)
                # A reader past a span's end without a record saw only markers there:
                # settled, no need to wait out the deadline for it.
                for tp in reader.position([TopicPartition(t, p) for t, p in open_spans]):
                    if tp.offset >= open_spans[(tp.topic, tp.partition)][1]:
                        del open_spans[(tp.topic, tp.partition)]
        finally:
            reader.close()
        return found, set(open_spans)

    def _asking(
        self,
        what: str,
        call: Callable[[list[TopicPartition]], _Answer],
        partitions: Iterable[Position],
        timeout_s: float = TIMEOUT_S,
    ) -> _Answer:
        """``call`` on ``partitions`` (``{}`` for none), its broker errors as one
        ``ServiceUnavailableError`` naming ``what`` was asked (the module's docstring)."""
        tps = [TopicPartition(topic, partition) for topic, partition in partitions]
        if not tps:
            return {}  # type: ignore[return-value]
        try:
            return call(tps)
        except (KafkaException, TimeoutError) as exc:
            raise self._unavailable(what, exc, timeout_s) from exc

    def _unavailable(
        self, what: str, exc: BaseException, timeout_s: float = TIMEOUT_S
    ) -> ServiceUnavailableError:
        reason = exc.args[0].str() if isinstance(exc, KafkaException) and exc.args else exc
        return ServiceUnavailableError(
            f"Kafka at {self.settings.bootstrap_servers} did not answer for {what} within "
            f"{timeout_s:g}s ({reason or type(exc).__name__})"
        )

    def _offsets(
        self,
        tps: list[TopicPartition],
        spec: OffsetSpec,
        *,
        isolation: IsolationLevel = IsolationLevel.READ_COMMITTED,
        timeout_s: float = TIMEOUT_S,
    ) -> dict[Position, int]:
        futures = self.admin.list_offsets(
            {tp: spec for tp in tps},
            isolation_level=isolation,
            request_timeout=timeout_s,
        )
        offsets = {}
        for tp, future in futures.items():
            try:
                offsets[(tp.topic, tp.partition)] = future.result(timeout=timeout_s).offset
            except KafkaException:
                continue  # the partition is gone or moving: nothing known to wait for
        return offsets
