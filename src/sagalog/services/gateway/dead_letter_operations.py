"""An operator's dead-letter use cases, apart from HTTP: list, show, replay.

A replay goes through the gateway, like a cancellation, so that it is an audited act:
the gateway publishes ``DeadLetterReplayed`` (who asked, why, which dead letter, the
replay's event id) on the workflow's topic, where the tracker seals it into the
workflow's audit trail, and then the record itself to where it was first consumed.

Order, and what a failure leaves: the audit event goes first, so no replay is ever
in the log without the act that asked for it. If the replay then fails (a broker
away), the request answers 503 and may be retried as it is: nothing found the
replay, so the retry has the same number and so the same two event ids, and
consumers take the repeated ``DeadLetterReplayed`` once.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterable
from contextlib import closing

from sagalog.dead_letters import DeadLetter, replay_headers
from sagalog.events import DeadLetterReplayed
from sagalog.position import RecordPosition
from sagalog.services.gateway.application import Gateway
from sagalog.services.gateway.dead_letter_log import DeadLetterLog, FoundDeadLetter
from sagalog.services.gateway.dead_letter_views import (
    DeadLetterDetail,
    DeadLetterList,
    DeadLetterPage,
    ReplayAccepted,
    summary_of,
)
from sagalog.services.gateway.exceptions import NotADeadLetter, UnknownDeadLetter
from sagalog.services.gateway.replays import (
    audit_event_id,
    dead_letter_position,
    replay_event_id,
    replay_number,
)
from sagalog.services.gateway.views import Accepted


def newest(letters: Iterable[DeadLetter], limit: int) -> list[DeadLetter]:
    """The ``limit`` newest of ``letters``, oldest first, holding no more than ``limit``
    while reading: a topic of a million dead letters must not fill the gateway."""
    return sorted(heapq.nlargest(limit, letters, key=_age), key=_age)


def _age(letter: DeadLetter) -> tuple[int, str]:
    return letter.dead_lettered_at_ms, str(letter.position)


class DeadLetterOperations:
    """Thread-safe: replays take a lock of their own, so two requests to replay the same
    dead letter in one gateway are one replay and one refusal. Not the gateway's: a
    replay reads Kafka (the dead letter, its origin partition for earlier replays),
    and decisions, cancellations and webhooks must not wait behind that."""

    def __init__(self, gateway: Gateway, log: DeadLetterLog) -> None:
        self.gateway = gateway
        self.log = log
        self.lock = threading.Lock()

    def list(
        self,
        *,
        topic: str | None = None,
        agent: str | None = None,
        since_ms: int | None = None,
        limit: int = 1000,
    ) -> DeadLetterList:
        """The dead letters, newest last, each with its replays.

        Raises:
            NotADeadLetter: ``topic`` is not a dead-letter topic (400).
        """
        if topic is not None and topic not in self.log.topics:
            raise NotADeadLetter(
                f"'{topic}' is not a dead-letter topic; the dead-letter topics are "
                f"{', '.join(self.log.topics)}",
                topic=topic,
            )
        letters = newest(
            (x for x in self.log.scan(topic=topic, since_ms=since_ms) if agent in (None, x.agent)),
            limit,
        )
        replays = self.log.replays(letters)
        return DeadLetterList(
            topics=list(self.log.topics),
            dead_letters=[summary_of(x, replays.get(x.position, [])) for x in letters],
        )

    def page(self, *, after: str | None = None, limit: int = 50) -> DeadLetterPage:
        """Up to ``limit`` dead letters after the position ``after``, in log order, each
        with its replays, and the position to pass for the next page (None at the end).

        Raises:
            MalformedPosition, NotADeadLetter: ``after`` is not a dead-letter position (400).
        """
        start = self._position(after) if after else None
        with closing(self.log.scan_after(start)) as letters:
            found = list(itertools.islice(letters, limit + 1))
        shown = found[:limit]
        replays = self.log.replays(shown)
        return DeadLetterPage(
            dead_letters=[summary_of(x, replays.get(x.position, [])) for x in shown],
            next_after=str(shown[-1].position) if len(found) > limit else None,
        )

    def record_count(self) -> int:
        """About how many dead letters are kept (an upper bound, from the watermarks)."""
        return self.log.record_count()

    def show(self, text: str) -> DeadLetterDetail:
        """One dead letter whole: headers, stack, the record decoded, its replays."""
        found = self._find(self._position(text))
        letter, record = found.letter, found.record
        payload, payload_error = self.log.decoded(record)
        summary = summary_of(letter, self.log.replays([letter]).get(letter.position, []))
        return DeadLetterDetail(
            **summary.model_dump(),
            stack=letter.stack,
            key=record.key.decode("utf-8", "replace") if record.key is not None else None,
            headers=record.header_values,
            payload=payload,
            payload_error=payload_error,
        )

    def replay(self, text: str, *, reason: str, requested_by: str, again: bool) -> ReplayAccepted:
        """Re-drive the dead letter at ``text`` to its origin as a new event, audited.

        Raises:
            MalformedPosition, NotADeadLetter (400); UnknownDeadLetter (404);
            AlreadyReplayed, NotReplayable (409); PublishFailed (503).
        """
        gateway = self.gateway
        gateway.require_ready()
        position = self._position(text)
        with self.lock:
            found = self._find(position)
            letter = found.letter
            earlier = self.log.replays([letter]).get(position, [])
            number = replay_number(letter, earlier, again=again)
            assert letter.workflow_id is not None  # replay_number refuses the others
            replay_id = replay_event_id(position, number)
            event = DeadLetterReplayed(
                dead_letter=str(position),
                origin=str(letter.origin),
                replayed_type=letter.event_type,
                original_event_id=letter.event_id,
                replay_event_id=replay_id,
                replay=number,
                dead_lettered_by=letter.agent,
                dead_letter_reason=letter.reason[:2000],
                reason=reason,
                requested_by=requested_by,
            )
            record = gateway.model.record(letter.workflow_id)
            topic = gateway.flow_of(record).topic if record is not None else letter.origin.topic
            audited = gateway.publish(
                topic,
                event,
                record,
                event_id=audit_event_id(position, number),
                workflow_id=letter.workflow_id,
            )
            origin, raw = letter.origin, found.record
            with gateway.publishing(origin.topic, letter.workflow_id, replay_id):
                partition, offset = gateway.publisher.publish_record(
                    origin.topic,
                    partition=origin.partition,
                    key=raw.key,
                    value=raw.value,
                    headers=replay_headers(raw.headers, event_id=replay_id, replay_of=position),
                )
            accepted = Accepted(
                event_id=audited.headers.id,
                event_type=audited.headers.type,
                workflow_id=letter.workflow_id,
                topic=audited.topic,
                partition=audited.partition,
                offset=audited.offset,
            )
            return ReplayAccepted(
                **accepted.model_dump(),
                dead_letter=str(position),
                replay=number,
                replay_event_id=replay_id,
                replayed_to=str(RecordPosition(origin.topic, partition, offset)),
            )

    def _position(self, text: str) -> RecordPosition:
        return dead_letter_position(text, deadletter_topics=self.log.topics)

    def _find(self, position: RecordPosition) -> FoundDeadLetter:
        found = self.log.at(position)
        if found is None:
            raise UnknownDeadLetter(
                f"no record lies at {position}: past the end of the partition, or deleted "
                "by the topic's retention; `sagalog dlq list` shows the dead letters kept",
                position=str(position),
            )
        if not isinstance(found, FoundDeadLetter):
            raise NotADeadLetter(
                f"the record at {position} carries no dead-letter headers "
                "(sagalog_dlq_reason, sagalog_origin): it was not dead-lettered by sagalog, "
                "so there is nowhere to send it back to",
                position=str(position),
            )
        return found
