"""What happens to each consumed record: the agent runtime's decisions, as plain functions.

Every record an agent polls ends in exactly one ``Outcome``. The decisions are
taken in gates, in the order the worker can afford them, because each gate costs
more than the one before and most records stop early:

1. ``screen``, from the ``ce_type`` header alone: an event the projection does not
   keep is skipped without reading anything else (the usual record of an agent that
   handles one type in six).
2. ``hold_not_due``, over a batch: a retry record whose time has not come holds its
   partition, and the records behind it wait with it.
3. ``sort``, once the headers are validated and the event folded into the
   projection: unreadable headers or a retry without an origin are dead-lettered, an
   event id first seen at an earlier offset is a duplicate, a type no handler takes
   is skipped.
4. ``admit``, once the payload is decoded: a payload that does not decode or does
   not validate is dead-lettered, one no handler takes is skipped, one whose
   workflow has an earlier event parked in the retry topic parks behind it; the
   rest is handled.
5. ``after_failure`` and ``Outcome.holds_workflow``, once handlers ran: a failed
   attempt is retried or dead-lettered, and a workflow whose event went to the
   retry topic parks the rest of its events in the batch.

The worker performs what these say (folding, decoding, producing, committing);
nothing here touches Kafka or RocksDB, so every branch is tested as a function.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from sagalog.agents.routing import RetryMark
from sagalog.backoff import RetryPolicy
from sagalog.open_transactions import OPEN_TRANSACTION_CLOSED
from sagalog.position import RecordPosition

PARKED_BEHIND = "parked behind an earlier event of its workflow"


class Outcome(enum.Enum):
    """What became (or is to become) of one record.

    The values are the ``outcome`` field of the agent's log lines.
    """

    HANDLE = "handle"  # the triage's go: run the handler
    HANDLED = "ok"  # the handler succeeded; its outputs are produced
    SKIP = "ignored"  # not this agent's: nothing produced
    DUPLICATE = "duplicate"  # an event id first seen at an earlier offset
    NOT_DUE = "not_due"  # a retry whose time has not come: its partition waits
    PARK = "park"  # queued in the retry topic behind an earlier event of its workflow
    RETRY = "retry"  # a failed attempt, to the retry topic with backoff
    DEFER = "defer"  # a dependency is unavailable: to the retry topic, attempt not spent
    DEAD_LETTER = "dead"  # to the dead-letter topic (and a StepFailed where a step ran)
    GATED = "gated"  # out of budget, the flow opens a gate: a StepFailed, no dead letter

    @property
    def holds_workflow(self) -> bool:
        """The record went to the retry topic, so its workflow's later events must
        wait behind it (parked) to keep the workflow's order."""
        return self in _TO_RETRY_TOPIC

    @property
    def ends_parking(self) -> bool:
        """A retried record that ends here releases its workflow's parking entry."""
        return self in _FINAL


_TO_RETRY_TOPIC = frozenset({Outcome.RETRY, Outcome.DEFER, Outcome.PARK})
_FINAL = frozenset({Outcome.HANDLED, Outcome.DEAD_LETTER, Outcome.GATED})


@dataclass(frozen=True)
class Verdict:
    """A gate's decision about one record.

    Attributes:
        outcome: what happens to it.
        origin: where its event was first consumed: the record itself, or for a
            retry the position its mark names. None only where no origin is known
            (the outcome is then SKIP, DUPLICATE or DEAD_LETTER).
        attempt: for HANDLE, the number of this attempt (1 = the first); for PARK,
            the attempts already made (the retry mark carries it on).
        reason: why, for a record that is not handled (logged, and put in the
            dead-letter or retry headers).
    """

    outcome: Outcome
    origin: RecordPosition | None = None
    attempt: int = 0
    reason: str = ""


SKIP = Verdict(Outcome.SKIP)
DUPLICATE = Verdict(Outcome.DUPLICATE)


def screen(*, from_retry: bool, event_type: str | None, kept: bool) -> Verdict | None:
    """Skip an input the projection does not keep, from its ``ce_type`` header alone.

    A retry record is never skipped here: it was handled once, so its type is
    handled. The one exception, on any topic, is a record that ends a transaction
    left open (``sagalog.open_transactions``): it carries no event, and the agent
    writes it to its retry topic too. A record without the header goes on to the
    header validation, which dead-letters it.

    Args:
        kept: whether the projection keeps ``event_type`` (ignored when it is None).

    Returns:
        SKIP, or None to go on.
    """
    if event_type == OPEN_TRANSACTION_CLOSED:
        return SKIP
    if not from_retry and event_type and not kept:
        return SKIP
    return None


def hold_not_due(
    records: Sequence[tuple[RecordPosition, RetryMark | None]],
    *,
    retry_topics: Collection[str],
    now_ms: int,
) -> tuple[list[int], dict[tuple[str, int], tuple[int, int]]]:
    """Which records of a batch go on, and which retry partitions wait.

    A retry record not due yet holds its partition: it and every later record of
    that partition in the batch are dropped, to be read again once it is due. Other
    partitions are not held by it.

    Returns:
        The indexes of the records that go on, in order; and for each held
        partition, (the offset to read again from, the time it is due in ms).
    """
    kept: list[int] = []
    held: dict[tuple[str, int], tuple[int, int]] = {}
    for index, (position, mark) in enumerate(records):
        key = (position.topic, position.partition)
        if key in held:
            continue
        if position.topic in retry_topics and mark is not None and mark.not_before_ms > now_ms:
            held[key] = (position.offset, mark.not_before_ms)
            continue
        kept.append(index)
    return kept, held


def origin_of(
    delivered: RecordPosition, *, from_retry: bool, mark: RetryMark | None
) -> RecordPosition | None:
    """Where a record's event was first consumed: the record itself, or for a retry
    the origin its mark carries (None when the mark is missing or unreadable)."""
    if not from_retry:
        return delivered
    return mark.origin if mark is not None else None


def sort(
    *,
    delivered: RecordPosition,
    origin: RecordPosition | None,
    header_error: str | None,
    first_seen: RecordPosition | None,
    wanted: bool,
) -> Verdict | None:
    """Decide from the validated headers and the projection's fold.

    Args:
        delivered: the record's own position.
        origin: see ``origin_of``.
        header_error: why the CloudEvents headers do not validate, if they do not.
        first_seen: where the fold first saw the event id (None: not folded, as for a
            retry, which was folded when first consumed). A position other than
            ``delivered`` is a true duplicate; the same one is this record again,
            replayed after an aborted transaction, and is handled again.
        wanted: whether a handler takes the event's type.

    Returns:
        DEAD_LETTER, DUPLICATE or SKIP; or None to go on to decoding.
    """
    if header_error is not None:
        return Verdict(Outcome.DEAD_LETTER, origin=delivered, reason=header_error)
    if origin is None:
        # Only a record in the retry topic lacks an origin: one without sagalog's
        # mark (written by hand) or with a mark edited out of shape. Handled, its
        # outputs would go to the retry topic instead of the workflow's.
        return Verdict(
            Outcome.DEAD_LETTER,
            origin=delivered,
            reason="a record in the retry topic without a readable sagalog_origin header",
        )
    if first_seen is not None and first_seen != delivered:
        return DUPLICATE
    if not wanted:
        return SKIP
    return None


def admit(
    *,
    origin: RecordPosition,
    event_id: str,
    from_retry: bool,
    mark: RetryMark | None,
    decode_error: str | None,
    has_handler: bool,
    validation_error: str | None,
    parked: Mapping[str, int],
) -> Verdict:
    """Decide once the payload is decoded: handle it, or say why not.

    Args:
        origin: where the event was first consumed.
        event_id: its ``ce_id``.
        from_retry: whether it came from the agent's retry topic.
        mark: its retry mark, if any.
        decode_error: why the payload does not decode, if it does not.
        has_handler: whether a handler takes it (a compensation is taken by the
            handler of the step its payload names, so this is known only now).
        validation_error: why the decoded payload breaks the event class's rules.
        parked: the workflow's events waiting in the retry topic: event id -> the
            offset of their origin.

    Returns:
        DEAD_LETTER, SKIP, PARK, or HANDLE with the attempt's number.
    """
    if decode_error is not None:
        return Verdict(Outcome.DEAD_LETTER, origin=origin, reason=decode_error)
    if not has_handler:
        return SKIP
    if validation_error is not None:
        return Verdict(Outcome.DEAD_LETTER, origin=origin, reason=validation_error)
    made = mark.attempt if mark is not None else 0
    # A retry is the parked event itself, so only a first delivery parks; it waits
    # behind an earlier event (a lower origin offset), never behind itself, which
    # it finds parked when it is replayed after an aborted transaction.
    if not from_retry and any(
        parked_id != event_id and offset < origin.offset for parked_id, offset in parked.items()
    ):
        return Verdict(Outcome.PARK, origin=origin, attempt=made, reason=PARKED_BEHIND)
    return Verdict(Outcome.HANDLE, origin=origin, attempt=made + 1)


def after_failure(*, retryable: bool, attempt: int, policy: RetryPolicy) -> Outcome:
    """A failed attempt is retried while the error allows it and attempts remain;
    otherwise it is dead-lettered and its step fails."""
    if retryable and not policy.exhausted(attempt):
        return Outcome.RETRY
    return Outcome.DEAD_LETTER
