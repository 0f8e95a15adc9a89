"""The gateway's stream hub without a broker: what a subscriber gets on subscribing
and after, with ``Last-Event-ID``, and never twice (``services.gateway.stream_hub``).
The broker's side is ``tests/integration/test_model_streams.py``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from sagalog.errors import ConfigurationError
from sagalog.services.gateway.stream_hub import StreamHub
from sagalog.settings import ClientSettings
from sagalog.streams.record import StreamKind, StreamRecord

TOPIC = "sagalog.stream.filings.events"


@dataclass
class Message:
    """What the hub reads of a consumed record."""

    _offset: int
    _value: bytes
    _topic: str = TOPIC

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value


def _message(offset: int, workflow_id: str, seq: int) -> Message:
    record = StreamRecord(workflow_id, "draft", "a", "k", 1, seq, StreamKind.DELTA, f"t{seq}")
    return Message(offset, record.encode())


def _hub() -> StreamHub:
    return StreamHub(ClientSettings(), topics=[TOPIC], group_prefix="sagalog-gateway-t-")


def test_a_subscriber_gets_what_is_held_after_its_offset_then_what_comes_once() -> None:
    hub = _hub()
    hub._take([_message(0, "w1", 0), _message(1, "w2", 0), _message(2, "w1", 1)])

    async def run() -> list[tuple[int, int]]:
        late = hub.subscribe(TOPIC, "w1", after=None)
        resumed = hub.subscribe(TOPIC, "w1", after=0)
        # A record the hub took before a subscription and delivers after it is
        # held already: it must not come twice.
        hub._take([_message(3, "w1", 2), _message(4, "w2", 1)])
        await asyncio.sleep(0.01)
        got = []
        for subscription in (late, resumed):
            while not subscription.queue.empty():
                offset, record = subscription.queue.get_nowait()
                got.append((offset, record.seq))
            hub.unsubscribe(subscription)
        return got

    assert asyncio.run(run()) == [(0, 0), (2, 1), (3, 2), (2, 1), (3, 2)]
    assert hub.subscribers == 0
    assert hub.topic_holding("w2") == TOPIC and hub.topic_holding("w9") is None


def test_a_topic_the_hub_does_not_read_is_refused() -> None:
    async def run() -> None:
        _hub().subscribe("elsewhere", "w1", after=None)

    with pytest.raises(ConfigurationError, match="does not read stream topic 'elsewhere'"):
        asyncio.run(run())


def test_a_record_that_is_not_a_stream_record_is_skipped() -> None:
    hub = _hub()
    hub._take([Message(0, b"not json"), _message(1, "w1", 0)])
    assert hub.records_read == 1
