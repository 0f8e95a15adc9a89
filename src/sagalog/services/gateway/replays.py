"""Whether a dead letter may be replayed, and under which ids: pure rules.

An operator replays a dead letter after fixing what made its handler fail. The
replay is a new event for every consumer (a new ``ce_id``), so one replay too many
would run a handler twice; the rules here keep that a deliberate act:

- the log is the ledger: a replay is a record with ``sagalog_replay_of`` naming the
  dead letter, on the topic the dead letter came from, so any gateway replica (or one
  whose read model was rebuilt) sees the replays that happened;
- a dead letter that was replayed is refused, unless the operator says ``again``;
- the ids are derived from the dead letter's position and the replay's number, so a
  request retried after a failure (a broker away) publishes the same events again,
  which consumers drop as duplicates, instead of a second replay.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sagalog.dead_letters import DeadLetter
from sagalog.errors import EventValidationError
from sagalog.position import RecordPosition
from sagalog.services.gateway.exceptions import (
    AlreadyReplayed,
    MalformedPosition,
    NotADeadLetter,
    NotReplayable,
)

_REPLAY_IDS = uuid.UUID("0b7c6a43-5d2e-5f81-8e3c-7a9d4b1f2c65")
"""The namespace of replay event ids (uuid5); fixed forever, or retries stop matching."""


@dataclass(frozen=True)
class EarlierReplay:
    """A replay of a dead letter found in the log: its event id and where it lies."""

    event_id: str
    position: RecordPosition


def dead_letter_position(text: str, *, deadletter_topics: Collection[str]) -> RecordPosition:
    """The position an operator named, checked to be in a dead-letter topic.

    Raises:
        MalformedPosition: not ``topic/partition/offset`` (400).
        NotADeadLetter: a position in another topic (400).
    """
    try:
        position = RecordPosition.parse(text)
    except EventValidationError:
        raise MalformedPosition(
            f"'{text}' is not a dead letter's position: write it topic/partition/offset, "
            "as `sagalog dlq list` prints it (e.g. sagalog.deadletter/0/42)",
            position=text,
        ) from None
    if position.topic not in deadletter_topics:
        raise NotADeadLetter(
            f"'{text}' is not in a dead-letter topic ({', '.join(sorted(deadletter_topics))}); "
            "name a dead letter as `sagalog dlq list` prints it",
            position=text,
            deadletter_topics=sorted(deadletter_topics),
        )
    return position


def replay_number(dead_letter: DeadLetter, earlier: Sequence[EarlierReplay], *, again: bool) -> int:
    """The number of the replay asked for: 1 for the first, one more for each earlier one.

    Raises:
        AlreadyReplayed: replayed before and ``again`` not given (409).
        NotReplayable: the record names no workflow (409).
    """
    if dead_letter.workflow_id is None:
        raise NotReplayable(
            f"the dead letter at {dead_letter.position} names no workflow (no ce_workflowid "
            "header and no key), so its replay could not be audited; re-publish it by hand "
            "with `sagalog publish` if it must go back",
            position=str(dead_letter.position),
        )
    if earlier and not again:
        last = earlier[-1]
        raise AlreadyReplayed(
            f"the dead letter at {dead_letter.position} was replayed already ({len(earlier)} "
            f"time(s); the last as event {last.event_id} at {last.position}); nothing was "
            'published. Ask with --again ("again": true) to replay it once more',
            position=str(dead_letter.position),
            replays=[{"event_id": r.event_id, "position": str(r.position)} for r in earlier],
        )
    return len(earlier) + 1


def replay_event_id(dead_letter: RecordPosition, number: int) -> str:
    """The ``ce_id`` of the ``number``-th replay of the dead letter: the same every time."""
    return str(uuid.uuid5(_REPLAY_IDS, f"replay\x00{dead_letter}\x00{number}"))


def audit_event_id(dead_letter: RecordPosition, number: int) -> str:
    """The ``ce_id`` of the ``DeadLetterReplayed`` that records that replay."""
    return str(uuid.uuid5(_REPLAY_IDS, f"replayed\x00{dead_letter}\x00{number}"))
