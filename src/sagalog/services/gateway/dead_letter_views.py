"""The JSON shapes of the dead-letter endpoints (``/v1/dead-letters``), and how a
dead letter read from the log becomes one."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sagalog.dead_letters import DeadLetter
from sagalog.services.gateway.replays import EarlierReplay
from sagalog.services.gateway.views import Accepted, utc


class ReplayView(BaseModel):
    """A replay of a dead letter found in the log."""

    event_id: str
    position: str


class DeadLetterSummary(BaseModel):
    """One dead letter: where it lies, who dead-lettered it and why, whether it was replayed."""

    position: str = Field(description="topic/partition/offset: what dlq show and replay take.")
    dead_lettered_at: dt.datetime | None
    dead_lettered_by: str
    reason: str
    error_class: str
    attempts: int
    event_type: str | None
    event_id: str | None
    workflow_id: str | None
    origin: str = Field(description="Where the record was first consumed; a replay goes there.")
    replays: list[ReplayView] = Field(description="Its replays so far, oldest first.")


class DeadLetterList(BaseModel):
    topics: list[str] = Field(description="The dead-letter topics read.")
    dead_letters: list[DeadLetterSummary]


class DeadLetterPage(BaseModel):
    """A page of dead letters in log order, and where the next page starts."""

    dead_letters: list[DeadLetterSummary]
    next_after: str | None = Field(description="The position to page on from; null at the end.")


class DeadLetterDetail(DeadLetterSummary):
    """One dead letter whole: every header, and the record's payload decoded."""

    stack: str
    key: str | None
    headers: dict[str, str]
    payload: dict[str, Any] | None
    payload_error: str | None = Field(description="Why the payload does not decode, if not.")


class ReplayRequest(BaseModel):
    """An operator's replay of a dead letter."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=2000, description="Why; kept in the audit.")
    requested_by: str = Field(min_length=1, max_length=200, description="Who asks (an email).")
    again: bool = Field(
        default=False, description="Replay a dead letter that was replayed before, once more."
    )


class ReplayAccepted(Accepted):
    """The ``DeadLetterReplayed`` published (the ``Accepted`` fields) and the replay itself."""

    dead_letter: str
    replay: int = Field(description="1 for the first replay of this dead letter.")
    replay_event_id: str
    replayed_to: str = Field(description="Where the replay lies: topic/partition/offset.")


def summary_of(letter: DeadLetter, replays: list[EarlierReplay]) -> DeadLetterSummary:
    return DeadLetterSummary(
        position=str(letter.position),
        dead_lettered_at=utc(letter.dead_lettered_at_ms) if letter.dead_lettered_at_ms else None,
        dead_lettered_by=letter.agent,
        reason=letter.reason,
        error_class=letter.error_class,
        attempts=letter.attempts,
        event_type=letter.event_type,
        event_id=letter.event_id,
        workflow_id=letter.workflow_id,
        origin=str(letter.origin),
        replays=[ReplayView(event_id=r.event_id, position=str(r.position)) for r in replays],
    )
