"""Typed access to consumed records: confluent-kafka's accessors are Optional by their
stubs, but a record without an error always has a topic, partition and offset."""

from __future__ import annotations

from typing import Any


def topic_of(message: Any) -> str:
    return str(message.topic())


def partition_of(message: Any) -> int:
    return int(message.partition() or 0)


def offset_of(message: Any) -> int:
    return int(message.offset() or 0)


def headers_of(message: Any) -> list[tuple[str, bytes | str | None]]:
    """A record's headers as a list of pairs (confluent-kafka gives a list or None)."""
    return list(message.headers() or [])
