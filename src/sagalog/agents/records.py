"""Typed access to consumed records' headers (a record's place in the log is
``position.RecordPosition.of``)."""

from __future__ import annotations

from typing import Any


def headers_of(message: Any) -> list[tuple[str, bytes | str | None]]:
    """A record's headers as a list of pairs (confluent-kafka gives a list or None)."""
    return list(message.headers() or [])
