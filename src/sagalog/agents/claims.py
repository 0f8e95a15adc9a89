"""The claims topic's two ends: each model call's claim written, acknowledged, before
the call, and a newly assigned partition's claims read before its records are handled.

Why a topic and not only the store (``sagalog.budgets.claims``): an instance that dies
during a call and is not back within its session timeout hands its partitions over
without the call's ``EffectRecorded``, and the model served the call. Its successor
reads the claim here, counts it until its windows pass, and numbers its own repeat of
the call after it (``<key>#<n+1>``), so both are counted and both reach the log.

The writer is a plain idempotent producer (``acks=all``), not the batch's
transactional one: an aborted batch does not unsend a call, so its claim must not be
aborted with it. One write per model call, which takes hundreds of milliseconds
anyway; the handler awaits its acknowledgement, and the call is made only after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from sagalog.agents.failures import RetryableError
from sagalog.agents.state_store import StateStore
from sagalog.budgets.book import Spend
from sagalog.budgets.claims import ClaimNote, counts_at
from sagalog.errors import ServiceUnavailableError
from sagalog.position import RecordPosition
from sagalog.settings import ClientSettings
from sagalog.topology.services import AGENT_HYDRATION_GROUP_PREFIX

POLL_S = 0.05


class ClaimsLog:
    """Writes a process's model-call claims to their agents' claims topics.

    A daemon thread serves the producer's delivery reports, so a handler awaits its
    acknowledgement without holding the event loop.
    """

    def __init__(self, settings: ClientSettings) -> None:
        self._producer = Producer(
            settings.producer_config(
                **{
                    "linger.ms": 0,  # one record per call, awaited: nothing to batch for
                    "message.timeout.ms": int(settings.connect_timeout_s * 1000),
                }
            )
        )
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._serve_reports, name="sagalog-claims", daemon=True
        )
        self._thread.start()

    async def write(self, topic: str, note: ClaimNote) -> None:
        """Write ``note`` to claims partition ``note.partition`` and wait until the
        brokers acknowledge it.

        Raises:
            RetryableError: it was not acknowledged (the brokers are away, or this
                principal may not write the topic): the call is not made, and the
                event is tried again.
        """
        loop = asyncio.get_running_loop()
        acknowledged: asyncio.Future[None] = loop.create_future()

        def delivered(error: KafkaError | None, message: Message) -> None:
            loop.call_soon_threadsafe(_settle, acknowledged, error)

        self._producer.produce(
            topic,
            key=note.key,
            value=note.encode(),
            partition=note.partition,
            on_delivery=delivered,
        )
        try:
            await acknowledged
        except KafkaWriteFailed as exc:
            raise RetryableError(
                f"the budget claim {note.claim.reservation} was not written to {topic} "
                f"({exc}); the model call was not made"
            ) from exc

    def close(self) -> None:
        self._stopped.set()
        with contextlib.suppress(Exception):
            self._producer.flush(5)

    def _serve_reports(self) -> None:
        while not self._stopped.is_set():
            self._producer.poll(0.1)


class KafkaWriteFailed(Exception):
    """A claim's write came back with an error."""


def _settle(future: asyncio.Future[None], error: KafkaError | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(KafkaWriteFailed(error.str()))


def read_claims(
    settings: ClientSettings,
    store: StateStore,
    *,
    topic: str,
    partitions: frozenset[int],
    from_ms: int,
    idle_timeout_s: float = 30.0,
) -> int:
    """Keep in ``store`` the claims of ``partitions`` that may still count at
    ``from_ms`` (``ledger.held_from_ms`` of now), up to the end of each partition now.

    Each partition is read from where the last read here ended (the store's
    checkpoint of the claims topic), or from the first claim reserved at ``from_ms``,
    whichever is later: an instance that held a partition all along reads only what
    was written since it last read it.

    Returns:
        How many claims were kept.

    Raises:
        ServiceUnavailableError: no progress for ``idle_timeout_s``.
    """
    if not partitions:
        return 0
    reader = Consumer(
        settings.kafka_config(
            **{
                # assign() only, never a commit: DESCRIBE on the rebuild's group prefix.
                "group.id": f"{AGENT_HYDRATION_GROUP_PREFIX}claims-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
    )
    kept = 0
    try:
        ends, starts = _bounds(reader, settings, topic, partitions, from_ms, store)
        remaining = {p: end for p, end in ends.items() if starts[p] < end}
        for partition, end in ends.items():
            if partition not in remaining:
                store.set_checkpoint(topic, partition, end)
        reader.assign([TopicPartition(topic, p, starts[p]) for p in remaining])
        idle = 0.0
        while remaining:
            messages = reader.consume(num_messages=500, timeout=POLL_S)
            if not messages:
                idle += POLL_S
                if idle > idle_timeout_s:
                    raise ServiceUnavailableError(
                        f"reading the budget claims of {topic} {sorted(remaining)} made no "
                        f"progress for {idle_timeout_s:g}s"
                    )
                continue
            idle = 0.0
            for message in messages:
                position = RecordPosition.of(message)
                partition = position.partition
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        remaining.pop(partition, None)
                        store.set_checkpoint(topic, partition, ends[partition])
                    continue
                if partition not in remaining:
                    continue
                offset = position.offset
                note = ClaimNote.decode(message.value() or b"")
                if note is not None and counts_at(note.claim, from_ms=from_ms):
                    kept += _keep(store, note)
                store.set_checkpoint(topic, partition, offset + 1)
                if offset + 1 >= remaining[partition]:
                    del remaining[partition]
            store.flush()
    finally:
        store.flush()
        reader.close()
    return kept


def _bounds(
    reader: Consumer,
    settings: ClientSettings,
    topic: str,
    partitions: frozenset[int],
    from_ms: int,
    store: StateStore,
) -> tuple[Mapping[int, int], Mapping[int, int]]:
    """Each partition's end now, and where its read starts."""
    timeout = settings.connect_timeout_s
    ends = {
        p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
        for p in sorted(partitions)
    }
    found = reader.offsets_for_times(
        [TopicPartition(topic, p, from_ms) for p in sorted(partitions)], timeout=timeout
    )
    starts = {}
    for tp in found:
        by_time = ends[tp.partition] if tp.offset < 0 else tp.offset  # none that late: the end
        starts[tp.partition] = max(by_time, store.checkpoint(topic, tp.partition))
    return ends, starts


def _keep(store: StateStore, note: ClaimNote) -> int:
    """Fold one note into the store: a claim kept (merged with a copy held), or a
    released one dropped."""
    claim: Spend = note.claim
    if note.released:
        store.drop_spend(note.topic, note.partition, claim)
        return 0
    store.keep_spend(note.topic, note.partition, claim)
    return 1
