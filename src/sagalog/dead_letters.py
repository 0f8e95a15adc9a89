"""What a dead-lettered record carries: the original record, byte for byte, plus why.

Agents and the tracker both dead-letter what they cannot process, to their own
dead-letter topics, and an operator reads both with ``sagalog tail`` (or replays
them by hand). So the headers that say why are one contract, written here once: the
same names and formats whichever runtime wrote them (the tracker's once carried its
own time header name and a ``topic/p@offset`` origin).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

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
