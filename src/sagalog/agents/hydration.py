"""Rebuild an agent's projection from the log.

When an instance is assigned a partition whose committed offset is ahead of its local
checkpoint (a new instance, a lost disk, a partition moved by a rebalance), it replays
that partition from its checkpoint to the committed offset and folds every event into
the projection before handling anything new. The log is the source of truth; the
local store is a cache of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from sagalog.agents.records import headers_of
from sagalog.agents.state_store import StateStore
from sagalog.contracts.headers import EventHeaders
from sagalog.errors import EventValidationError, ServiceUnavailableError
from sagalog.memory import release_free_memory
from sagalog.position import RecordPosition
from sagalog.settings import ClientSettings

POLL_S = 0.05


def hydrate(
    settings: ClientSettings,
    store: StateStore,
    targets: Mapping[tuple[str, int], int],
    *,
    read_ahead_kb: int = 8192,
    idle_timeout_s: float = 30.0,
    on_event: Callable[[EventHeaders, bytes | None, RecordPosition], None] | None = None,
) -> int:
    """Fold each partition's events from its checkpoint up to the target offset.

    Args:
        targets: (topic, partition) -> the offset to reach (exclusive): the committed one.
        read_ahead_kb: librdkafka's fetch queue per partition (``queued.max.messages.kbytes``):
            the rebuild's memory peak against its speed.
        on_event: called with each event's headers, body and position as it is
            folded (the budgets read their claims from ``EffectRecorded``).

    Returns:
        How many events were folded in.

    Raises:
        ServiceUnavailableError: no progress for ``idle_timeout_s``.
    """
    reader = Consumer(
        settings.kafka_config(
            **{
                "group.id": f"sagalog-hydrate-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                # librdkafka prefetches up to 64 MB by default; hydration reads the
                # whole backlog, and a heap grown once stays grown (RSS per workflow).
                "queued.max.messages.kbytes": read_ahead_kb,
            }
        )
    )
    remaining = {key: end for key, end in targets.items() if store.checkpoint(*key) < end}
    folded = 0
    try:
        reader.assign([TopicPartition(t, p, store.checkpoint(t, p)) for t, p in remaining])
        idle = 0.0
        while remaining:
            # librdkafka waits the whole timeout unless 500 records are there: a short
            # one keeps a small backlog (a restart) from costing half a second a call.
            messages = reader.consume(num_messages=500, timeout=POLL_S)
            if not messages:
                idle += POLL_S
                if idle > idle_timeout_s:
                    raise ServiceUnavailableError(
                        f"hydrating {sorted(remaining)} made no progress for {idle_timeout_s:g}s"
                    )
                continue
            idle = 0.0
            for message in messages:
                position = RecordPosition.of(message)
                key = (position.topic, position.partition)
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        # read_committed: the end may sit below the target only while an
                        # aborted transaction's markers are skipped; the partition is done.
                        remaining.pop(key, None)
                    continue
                if key not in remaining:
                    continue
                _fold(store, message, position, on_event)
                folded += 1
                store.set_checkpoint(key[0], key[1], position.offset + 1)
                if position.offset + 1 >= remaining[key]:
                    del remaining[key]
            store.flush()  # the chunk's events and checkpoints in one write
    finally:
        store.flush()
        reader.close()
    release_free_memory()
    return folded


def _fold(
    store: StateStore,
    message: Any,
    position: RecordPosition,
    on_event: Callable[[EventHeaders, bytes | None, RecordPosition], None] | None,
) -> None:
    try:
        headers = EventHeaders.from_kafka(headers_of(message))
    except EventValidationError:
        return  # the live path dead-lettered it; nothing to fold
    if on_event is not None:
        on_event(headers, message.value(), position)
    if not store.keeps(headers.type):
        return
    store.project(
        workflow_id=headers.workflow_id,
        event_id=headers.id,
        event_type=headers.type,
        source=headers.source,
        payload=message.value(),
        position=position,
    )
