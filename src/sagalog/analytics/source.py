"""The transitions of a time range, read from the transitions topic.

Records are chosen by their Kafka timestamp, which the tracker's producer sets when
it publishes the transition, so Kafka's time index finds the range without reading
the rest of the topic. With the tracker on the wall clock that is the transition's
``at`` to within milliseconds; under a virtual clock (tests, the demo) the range is
when transitions were published, while the statistics use ``at``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sagalog.analytics.records import Transition, transitions_from
from sagalog.analytics.timerange import TimeRange
from sagalog.contracts.codec import EventCodec
from sagalog.events import StateTransition
from sagalog.replay import TopicReplay, UndecodableRecord
from sagalog.settings import ClientSettings

TRANSITION_TYPE = StateTransition.event_type


@dataclass(frozen=True, slots=True)
class TransitionLog:
    """The transitions read, and what could not be used.

    Attributes:
        transitions: the decoded ``StateTransition`` events.
        read: records in the range.
        undecodable: records that did not decode (counted, not fatal).
        other_types: records of other event types (not decoded).
        examples: the first undecodable records, with why.
    """

    transitions: list[Transition]
    read: int = 0
    undecodable: int = 0
    other_types: int = 0
    examples: list[UndecodableRecord] = field(default_factory=list)


def read_transitions(
    settings: ClientSettings,
    codec: EventCodec,
    topic: str,
    time_range: TimeRange,
    *,
    flow: str | None = None,
    on_plan: Callable[[int], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> TransitionLog:
    """The ``StateTransition`` events of ``topic`` published within ``time_range``.

    ``on_plan(n)`` is told how many records the range holds before reading starts;
    ``progress(n)`` after each ``n`` read. ``flow`` keeps one flow's transitions.

    Raises:
        ReplayError: the topic does not exist.
        ServiceUnavailableError: the broker or the registry did not answer.
    """
    transitions: list[Transition] = []
    with TopicReplay(
        settings,
        codec,
        topic,
        since_ms=time_range.since_ms,
        until_ms=time_range.until_ms,
        event_types={TRANSITION_TYPE},
        keys=True,
        logical_types=False,
    ) as replay:
        if on_plan is not None:
            on_plan(replay.plan.total)
        for batch in replay.batches(progress):
            found = transitions_from(batch.payloads, batch.keys)
            if flow is not None:
                found = [t for t in found if t.flow == flow]
            transitions.extend(found)
        stats = replay.stats
    return TransitionLog(
        transitions=transitions,
        read=stats.read,
        undecodable=stats.undecodable,
        other_types=stats.skipped,
        examples=list(stats.examples),
    )
