"""The tracker's input on an assignment the broker is slow to describe: read, not exit.

An assignment comes after every broker outage (the rebalance that follows it), so the
input's rights check meets a broker that may not answer yet. That is no refusal: the
input reads on. A denied topic and a fatal client error still end it. No broker here:
the consumer is a stand-in.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from faust.types import TP

from sagalog.errors import AuthorizationError
from sagalog.services.tracker import log_input
from sagalog.services.tracker.log_input import LogInput, ends_the_input
from sagalog.settings import ClientSettings

TOPIC = "procurement.events"
TIMED_OUT = KafkaError(KafkaError._TIMED_OUT, "Failed to get metadata: Local: Timed out")
TRANSPORT = KafkaError(KafkaError._TRANSPORT, "Failed to get metadata: Broker transport failure")


class _Message:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"w-1"

    def value(self) -> bytes:
        return b"event"

    def headers(self) -> list[tuple[str, bytes]]:
        return []

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_000)


class _Consumer:
    """librdkafka's consumer as the input uses it; ``metadata`` is what ``list_topics``
    answers, or the error it raises."""

    def __init__(self, metadata: Any) -> None:
        self.metadata = metadata
        self.waiting = [_Message(0)]

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        if isinstance(self.metadata, KafkaError):
            raise KafkaException(self.metadata)
        return self.metadata

    def assign(self, partitions: list[Any]) -> None:
        pass

    def poll(self, timeout: float) -> Any:
        return self.waiting.pop() if self.waiting else None

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return []

    def position(self, partitions: list[Any]) -> list[Any]:
        return partitions

    def get_watermark_offsets(self, partition: Any, cached: bool = False) -> tuple[int, int]:
        return (0, 1)

    def close(self) -> None:
        pass


def _input() -> LogInput:
    return LogInput(
        ClientSettings(bootstrap_servers="127.0.0.1:1"), group="g", client_id="c", capacity=10
    )


def _first_record(metadata: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What the input hands over first after an assignment, through its own thread."""
    monkeypatch.setattr(log_input, "Consumer", lambda config: _Consumer(metadata))

    async def first() -> Any:
        reader = _input()
        reader.assign(1, [TP(TOPIC, 0)])
        try:
            async for record in reader.records():
                return record
        finally:
            reader.stop()

    return asyncio.run(asyncio.wait_for(first(), 5))


def test_an_assignment_the_broker_does_not_describe_in_time_is_read_anyway(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = _first_record(TIMED_OUT, monkeypatch)
    assert (record.topic, record.partition, record.offset) == (TOPIC, 0, 0)


def test_a_topic_this_principal_may_not_describe_still_ends_the_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    denied = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed")
    metadata = SimpleNamespace(topics={TOPIC: SimpleNamespace(error=denied)})
    with pytest.raises(AuthorizationError, match=TOPIC):
        _first_record(metadata, monkeypatch)


def test_only_a_broker_that_did_not_answer_lets_the_input_read_on() -> None:
    assert not ends_the_input(TIMED_OUT)
    assert not ends_the_input(TRANSPORT)
    assert not ends_the_input(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert ends_the_input(KafkaError(KafkaError._FATAL, "fatal", fatal=True))
    assert ends_the_input(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication failed"))


def test_an_assignment_whose_committed_offsets_were_not_fetched_is_read_from_them_again() -> None:
    """CI13's partition round: after the healing the input was assigned while the group's
    coordinator moved; the fetch of the committed offsets failed ("Not coordinator"),
    librdkafka did not retry it, and two partitions stayed at no position until the
    stall watch exited. The partitions without a position are assigned again from the
    committed offsets; the one that was read goes on from where it is."""
    from confluent_kafka import OFFSET_INVALID, OFFSET_STORED

    from sagalog.services.tracker.log_input import refetch_from

    again = refetch_from([("w", 0, OFFSET_INVALID), ("w", 1, OFFSET_INVALID), ("w", 2, 24)])
    assert again == [("w", 0, OFFSET_STORED), ("w", 1, OFFSET_STORED), ("w", 2, 24)]
