"""Typed access to consumed records: their headers, and what every lane reads first."""

from __future__ import annotations

from typing import Any, NamedTuple

from sagalog.contracts.headers import H_TYPE, header_value
from sagalog.position import RecordPosition


def headers_of(message: Any) -> list[tuple[str, bytes | str | None]]:
    """A record's headers as a list of pairs (confluent-kafka gives a list or None)."""
    return list(message.headers() or [])


class Delivered(NamedTuple):
    """A consumed record with what every lane reads of it before anything else: its
    headers, its place in the log and its ``ce_type``.

    Read once per batch. Co-hosted, each of the process's agents screens every record
    of the topic, and mostly skips it from its type alone: read per lane, these reads
    were most of that skip (five lanes, four skipping each record).
    """

    message: Any
    headers: list[tuple[str, bytes | str | None]]
    position: RecordPosition
    event_type: str | None  # the ce_type header; None without one

    @classmethod
    def of(cls, message: Any) -> Delivered:
        headers = headers_of(message)
        return cls(message, headers, RecordPosition.of(message), header_value(headers, H_TYPE))
