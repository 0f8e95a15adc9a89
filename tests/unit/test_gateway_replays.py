"""Whether a dead letter may be replayed, and under which ids (``services.gateway.replays``)."""

from __future__ import annotations

import datetime as dt

import pytest

from sagalog.cli.dlq import since_time
from sagalog.dead_letters import DeadLetter
from sagalog.position import RecordPosition
from sagalog.services.gateway.exceptions import (
    AlreadyReplayed,
    MalformedPosition,
    NotADeadLetter,
    NotReplayable,
)
from sagalog.services.gateway.replays import (
    EarlierReplay,
    audit_event_id,
    dead_letter_position,
    replay_event_id,
    replay_number,
)

TOPICS = ("sagalog.deadletter", "team.deadletter")
DEAD = RecordPosition("sagalog.deadletter", 1, 42)


def letter(workflow_id: str | None = "wf-1") -> DeadLetter:
    return DeadLetter(
        position=DEAD,
        origin=RecordPosition("procurement.events", 3, 17),
        agent="budget-agent",
        reason="boom",
        error_class="NonRetryableError",
        stack="",
        attempts=1,
        dead_lettered_at_ms=1,
        event_type="sagalog.v1.CompensationRequested",
        event_id="e1",
        workflow_id=workflow_id,
    )


EARLIER = EarlierReplay("r1", RecordPosition("procurement.events", 3, 90))


def test_a_position_in_a_dead_letter_topic_is_taken() -> None:
    assert dead_letter_position("sagalog.deadletter/1/42", deadletter_topics=TOPICS) == DEAD


@pytest.mark.parametrize(
    "text", ["", "sagalog.deadletter", "sagalog.deadletter/1", "t/x/1", "t/1/-3"]
)
def test_a_malformed_position_is_a_400_naming_it_and_the_form(text: str) -> None:
    with pytest.raises(MalformedPosition) as refused:
        dead_letter_position(text, deadletter_topics=TOPICS)
    assert refused.value.status == 400
    assert f"'{text}'" in str(refused.value) and "topic/partition/offset" in str(refused.value)


def test_a_position_in_another_topic_is_not_a_dead_letter() -> None:
    with pytest.raises(NotADeadLetter) as refused:
        dead_letter_position("procurement.events/3/17", deadletter_topics=TOPICS)
    assert refused.value.status == 400
    assert "sagalog.deadletter, team.deadletter" in str(refused.value)


def test_the_first_replay_is_number_one_and_again_counts_on() -> None:
    assert replay_number(letter(), [], again=False) == 1
    assert replay_number(letter(), [], again=True) == 1
    assert replay_number(letter(), [EARLIER], again=True) == 2


def test_a_second_replay_is_refused_unless_asked_again() -> None:
    with pytest.raises(AlreadyReplayed) as refused:
        replay_number(letter(), [EARLIER], again=False)
    message = str(refused.value)
    assert refused.value.status == 409
    assert "sagalog.deadletter/1/42" in message and "r1" in message and "--again" in message


def test_a_dead_letter_of_no_workflow_cannot_be_audited_so_is_not_replayed() -> None:
    with pytest.raises(NotReplayable):
        replay_number(letter(workflow_id=None), [], again=False)


def test_ids_are_the_same_for_a_retried_request_and_differ_per_replay_and_kind() -> None:
    assert replay_event_id(DEAD, 1) == replay_event_id(DEAD, 1)
    ids = {
        replay_event_id(DEAD, 1),
        replay_event_id(DEAD, 2),
        audit_event_id(DEAD, 1),
        replay_event_id(DEAD._replace(offset=43), 1),
    }
    assert len(ids) == 4


NOW = dt.datetime(2027, 1, 15, 8, 0, tzinfo=dt.UTC)


def test_since_is_a_duration_back_or_a_time() -> None:
    assert since_time("2h", now=NOW) == NOW - dt.timedelta(hours=2)
    assert since_time("2027-01-14T08:00:00Z", now=NOW) == NOW - dt.timedelta(days=1)
    assert since_time("2027-01-14T08:00:00", now=NOW) == NOW - dt.timedelta(days=1)  # UTC
    with pytest.raises(ValueError, match="neither a duration"):
        since_time("yesterday", now=NOW)
