"""What faust and aiokafka believe about a partition, for the log of a stalled worker.

When the watchdog finds a partition whose committed records are not read, the
worker exits; the next one usually reads on. Before it goes, this snapshot names
which of the layers holds the partition back: faust's fetch set (active, paused,
buffered), aiokafka's subscription (paused, position) and its fetch buffer.
Read from the worker's loop while the consumer thread runs: a diagnostic, not a
consistent view.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def describe(app: Any, keys: Iterable[tuple[str, int]]) -> dict[str, dict[str, Any]]:
    """A JSON-friendly description of each ``(topic, partition)`` in ``keys``."""
    consumer = app.consumer
    wanted = {(topic, partition) for topic, partition in keys}
    out: dict[str, dict[str, Any]] = {}
    active = {(tp.topic, tp.partition) for tp in (consumer._active_partitions or ())}
    paused = {(tp.topic, tp.partition) for tp in consumer._paused_partitions}
    buffered = {(tp.topic, tp.partition) for tp in consumer._buffered_partitions}
    read = {(tp.topic, tp.partition): offset for tp, offset in consumer._read_offset.items()}
    kafka = _aiokafka(consumer)
    queues = _queues(app)
    for key in sorted(wanted):
        entry: dict[str, Any] = {
            "faust_active": key in active,
            "faust_paused": key in paused,
            "faust_buffered": key in buffered,
            "faust_read_offset": read.get(key),
            "flow_active": consumer.flow_active,
            "app_flow_control": app.flow_control.is_active(),
            "stream_queues": queues,
        }
        if kafka is not None:
            entry.update(_kafka_state(kafka, key))
        out[f"{key[0]}/{key[1]}"] = entry
    return out


def _queues(app: Any) -> list[dict[str, Any]]:
    """Each subscribed channel's queue: records handed over by the fetcher, not yet taken."""
    found = []
    for channel in getattr(app.topics, "_topics", ()):
        queue = getattr(channel, "_queue", None)  # not .queue: that would create one
        if queue is None:
            continue
        found.append(
            {
                "topics": sorted(getattr(channel, "topics", ()) or ()),
                "size": queue.qsize(),
                "pressure_callbacks": len(getattr(queue, "_pending_pressure_drop_callbacks", ())),
            }
        )
    return found


def _aiokafka(consumer: Any) -> Any:
    thread = getattr(consumer, "_thread", None)
    return getattr(thread, "_consumer", None)


def _kafka_state(kafka: Any, key: tuple[str, int]) -> dict[str, Any]:
    try:
        assignment = kafka._subscription.subscription.assignment
    except AttributeError:
        return {"kafka": "no assignment"}
    if assignment is None:
        return {"kafka": "no assignment"}
    match = [tp for tp in assignment.tps if (tp.topic, tp.partition) == key]
    if not match:
        return {"kafka_assigned": False}
    tp = match[0]
    state = assignment.state_value(tp)
    buffered = kafka._fetcher._records.get(tp)
    return {
        "kafka_assigned": True,
        "kafka_paused": state.paused,
        "kafka_position": state._position,
        "kafka_highwater": state.highwater,
        "kafka_lso": state.lso,
        "kafka_buffered": repr(buffered) if buffered is not None else None,
        "kafka_in_flight": sorted(kafka._fetcher._in_flight),
    }


def queued(app: Any, topic: str) -> int:
    """Records handed to the stream that reads ``topic`` and not yet taken by it."""
    for channel in getattr(app.topics, "_topics", ()):
        queue = getattr(channel, "_queue", None)
        if queue is not None and topic in (getattr(channel, "topics", ()) or ()):
            return int(queue.qsize())
    return 0
