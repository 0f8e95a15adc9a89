"""One record of a model stream, and what a reader makes of a run of them.

A stream is a run of records per workflow, in one partition of its stream topic, so
Kafka's offset orders them and names each one (the server-sent event's ``id``). Within
a workflow, a model call (``call``, the effect's idempotency key) streams under an
``attempt``: 1 for its first try, n+1 for the try after n was cut off (the runtime
numbers attempts as it numbers the call's budget claims, so a successor instance
continues the count). Each attempt is ``delta`` records numbered by ``seq`` from 0,
then one ``end``; an attempt cut off (its instance died, the model's stream broke)
gets an ``interrupted`` mark instead, written by the retry before its own first delta
(or at once, when the same process sees the failure).

JSON, not Avro: a stream is not an event of the log, lives an hour, and is read by a
browser as it is; ``version`` lets a later reader tell an older record apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from sagalog.errors import ConfigurationError

VERSION = 1
HOUR_MS = 3_600_000

STREAM_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(HOUR_MS)}
"""An hour: long enough for a late subscriber to replay a running step's output, and
for one who lost the connection to resume; the answer itself is in the log."""


class StreamKind(StrEnum):
    DELTA = "delta"
    END = "end"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class StreamRecord:
    """One record of a workflow's model stream.

    Attributes:
        workflow_id: the workflow (the record's key).
        step: the flow step whose handler made the call.
        agent: the agent that runs the step.
        call: the model call's effect key (a step may call a model several times).
        attempt: 1, then n+1 for the try after attempt n was cut off.
        seq: the delta's number within its attempt, from 0; an ``end`` carries the
            count of deltas, an ``interrupted`` mark the attempt's it knows (-1: none).
        kind: ``delta``, ``end`` or ``interrupted``.
        text: a delta's text ('' for the marks).
        at_ms: when the runtime had it (wall clock, ms): a reader's latency is its
            receipt time minus this.
    """

    workflow_id: str
    step: str
    agent: str
    call: str
    attempt: int
    seq: int
    kind: StreamKind
    text: str = ""
    at_ms: int = 0

    def encode(self) -> bytes:
        return json.dumps({"version": VERSION, **asdict(self)}, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes | str) -> StreamRecord:
        """Raises:
        ConfigurationError: not a stream record of a version this reader knows.
        """
        try:
            data = json.loads(raw)
            if data.pop("version") != VERSION:
                raise ValueError(f"version {data.get('version')} (this reader knows {VERSION})")
            return cls(**{**data, "kind": StreamKind(data["kind"])})
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ConfigurationError(
                f"not a model stream record ({exc}): {str(raw)[:200]!r}; is something "
                "else writing the stream topic?"
            ) from exc

    def as_event(self) -> dict[str, Any]:
        """What a server-sent event's ``data`` carries (``kind`` is its ``event``)."""
        return {
            "workflow_id": self.workflow_id,
            "step": self.step,
            "agent": self.agent,
            "call": self.call,
            "attempt": self.attempt,
            "seq": self.seq,
            "text": self.text,
            "at_ms": self.at_ms,
        }


def attempt_of(reservation: str, key: str) -> int:
    """The stream attempt of a model call from its budget reservation: ``key`` is the
    first (1), ``key#n`` the (n+1)th (``budgets.claims.next_reservation``)."""
    if reservation == key:
        return 1
    prefix = f"{key}#"
    if not reservation.startswith(prefix) or not reservation[len(prefix) :].isdigit():
        raise ValueError(f"reservation {reservation!r} is not one of call {key!r}")
    return int(reservation[len(prefix) :]) + 1


def sse_message(offset: int, record: StreamRecord) -> bytes:
    """One server-sent event: the offset as ``id`` (what ``Last-Event-ID`` resumes
    from), the kind as ``event``, the record as JSON ``data``."""
    data = json.dumps(record.as_event(), separators=(",", ":"))
    return f"id: {offset}\nevent: {record.kind}\ndata: {data}\n\n".encode()


def parse_last_event_id(value: str | None) -> int | None:
    """The offset a ``Last-Event-ID`` names, None when absent.

    Raises:
        ValueError: not an offset this server sent (a non-negative integer).
    """
    if value is None or value.strip() == "":
        return None
    text = value.strip()
    if not text.isdigit():
        raise ValueError(
            f"Last-Event-ID {value[:40]!r} is not an event id of this stream (a "
            "non-negative integer, the id: line of the last event you received)"
        )
    return int(text)


@dataclass(frozen=True)
class AttemptSummary:
    """What a reader saw of one attempt of one call."""

    call: str
    attempt: int
    deltas: int
    ended: bool
    interrupted: bool
    gaps: bool
    """A delta's ``seq`` skipped or repeated: a delta was lost or seen twice."""


def summarize(records: Iterable[StreamRecord]) -> list[AttemptSummary]:
    """Each attempt of each call, in the order first seen: a checker's view of a
    stream (the SIGKILL test: every cut attempt is marked, the last one ended)."""
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        entry = found.setdefault(
            (record.call, record.attempt),
            {"seqs": [], "ended": False, "interrupted": False},
        )
        if record.kind is StreamKind.DELTA:
            entry["seqs"].append(record.seq)
        elif record.kind is StreamKind.END:
            entry["ended"] = True
        else:
            entry["interrupted"] = True
    return [
        AttemptSummary(
            call=call,
            attempt=attempt,
            deltas=len(entry["seqs"]),
            ended=entry["ended"],
            interrupted=entry["interrupted"],
            gaps=entry["seqs"] != list(range(len(entry["seqs"]))),
        )
        for (call, attempt), entry in found.items()
    ]
