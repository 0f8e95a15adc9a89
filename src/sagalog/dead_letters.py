"""What a dead-lettered record carries: the original record, byte for byte, plus why.

Agents and the tracker both dead-letter what they cannot process, to their own
dead-letter topics, and an operator reads both with ``sagalog tail`` (or replays
them by hand). So the headers that say why are one contract, written here once: the
same names and formats whichever runtime wrote them (the tracker's once carried its
own time header name and a ``topic/p@offset`` origin).

A dead letter is re-driven to where it came from with ``sagalog dlq replay``: the
record as it was before it was dead-lettered, as a new event (a new ``ce_id``, so
every consumer handles it instead of dropping it as a duplicate of the event it
already saw), marked with ``sagalog_replay_of`` so that the log itself says which
dead letter it re-drives and whether a dead letter was replayed already.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sagalog.contracts.headers import H_ID, H_TYPE, H_WORKFLOW_ID, header_dict
from sagalog.errors import EventValidationError
from sagalog.position import RecordPosition

H_ORIGIN = "sagalog_origin"
"""Where the record was first consumed (``RecordPosition`` text)."""
H_DLQ_REASON = "sagalog_dlq_reason"
H_DLQ_ERROR_CLASS = "sagalog_dlq_error_class"
H_DLQ_STACK = "sagalog_dlq_stack"
H_DLQ_ATTEMPTS = "sagalog_dlq_attempts"
H_DLQ_AGENT = "sagalog_dlq_agent"
"""Who dead-lettered it: the agent's name, or the tracker's app id."""
H_DLQ_TIME = "sagalog_dlq_time_ms"
H_REPLAY_OF = "sagalog_replay_of"
"""On a record re-driven from a dead-letter topic: the dead letter's position
(``RecordPosition`` text). Only a replay carries it; finding one that names a dead
letter is how a second replay of it is refused."""

MARKS = frozenset(
    {
        H_ORIGIN,
        H_DLQ_REASON,
        H_DLQ_ERROR_CLASS,
        H_DLQ_STACK,
        H_DLQ_ATTEMPTS,
        H_DLQ_AGENT,
        H_DLQ_TIME,
    }
)
"""What dead-lettering adds to a record; a replay takes them off again."""

RawHeaders = Sequence[tuple[str, bytes | str | None]]


def dead_letter_headers(
    original: RawHeaders | None,
    *,
    agent: str,
    reason: str,
    error_class: str,
    origin: RecordPosition,
    now_ms: int,
    attempts: int = 1,
    stack: str = "",
    dropped: Collection[str] = (),
) -> list[tuple[str, bytes | str | None]]:
    """The original headers (minus ``dropped``, a runtime's own marks) plus why the
    record could not be processed. Long texts are cut to what a header should hold."""
    kept = [(name, value) for name, value in original or () if name not in dropped]
    return [
        *kept,
        (H_DLQ_REASON, reason[:4000].encode()),
        (H_DLQ_ERROR_CLASS, error_class.encode()),
        (H_DLQ_STACK, stack[-8000:].encode()),
        (H_DLQ_ATTEMPTS, str(attempts).encode()),
        (H_DLQ_AGENT, agent.encode()),
        (H_ORIGIN, str(origin).encode()),
        (H_DLQ_TIME, str(now_ms).encode()),
    ]


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter as its headers tell it.

    Attributes:
        position: where it lies in its dead-letter topic (what an operator names).
        origin: where the record was first consumed: where a replay sends it.
        agent: who dead-lettered it (an agent's name, or the tracker's app id).
        event_type, event_id, workflow_id: the record's own CloudEvents headers;
            None when it had none (unreadable headers are one reason to dead-letter).
    """

    position: RecordPosition
    origin: RecordPosition
    agent: str
    reason: str
    error_class: str
    stack: str
    attempts: int
    dead_lettered_at_ms: int
    event_type: str | None
    event_id: str | None
    workflow_id: str | None


def read_dead_letter(
    position: RecordPosition, headers: RawHeaders | None, *, key: bytes | None = None
) -> DeadLetter | None:
    """The dead letter at ``position``, or None when the record there carries no
    dead-letter marks (something else written to the topic), so it has nowhere to go back to.

    The workflow id is the ``ce_workflowid`` header, else the record's key (every
    sagalog publisher keys by it).
    """
    values = header_dict(headers)
    if H_DLQ_REASON not in values or H_ORIGIN not in values:
        return None
    try:
        origin = RecordPosition.parse(values[H_ORIGIN])
    except EventValidationError:
        return None
    workflow_id = values.get(H_WORKFLOW_ID) or (key.decode("utf-8", "replace") if key else None)
    return DeadLetter(
        position=position,
        origin=origin,
        agent=values.get(H_DLQ_AGENT, ""),
        reason=values[H_DLQ_REASON],
        error_class=values.get(H_DLQ_ERROR_CLASS, ""),
        stack=values.get(H_DLQ_STACK, ""),
        attempts=_int(values.get(H_DLQ_ATTEMPTS)),
        dead_lettered_at_ms=_int(values.get(H_DLQ_TIME)),
        event_type=values.get(H_TYPE),
        event_id=values.get(H_ID),
        workflow_id=workflow_id,
    )


def replay_headers(
    headers: RawHeaders | None, *, event_id: str, replay_of: RecordPosition
) -> list[tuple[str, bytes | str | None]]:
    """The headers of a dead letter's replay: the record's own as they were before it
    was dead-lettered, with ``event_id`` as its ``ce_id`` and ``sagalog_replay_of``.

    Everything else is kept (type, source, time, workflow, causation, trace), so the
    replay is the same fact as the original for every consumer; only its id is new.
    Its content hash changes with the id: the publisher signs the record again.
    """
    dropped = {*MARKS, H_ID, H_REPLAY_OF}
    kept = [(name, value) for name, value in headers or () if name not in dropped]
    return [*kept, (H_ID, event_id.encode()), (H_REPLAY_OF, str(replay_of).encode())]


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0
