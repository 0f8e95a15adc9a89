"""A small server-sent-events client for the stream tests and the bench (httpx)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Event:
    id: int
    kind: str
    data: dict[str, Any]
    received_ms: float


def events(response: httpx.Response) -> Iterator[Event]:
    """The events of an open ``text/event-stream`` response, as they come."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line == "":
            if "data" in fields:
                yield Event(
                    int(fields.get("id", "-1")),
                    fields.get("event", "message"),
                    json.loads(fields["data"]),
                    time.time() * 1000,
                )
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields[name] = value.removeprefix(" ")


def stream_url(gateway_url: str, workflow_id: str) -> str:
    return f"{gateway_url}/v1/workflows/{workflow_id}/stream"
