"""A report: the statistics of a time range, with what was read to compute them."""

from __future__ import annotations

from dataclasses import dataclass, field

from sagalog.analytics.source import TransitionLog
from sagalog.analytics.statistics import Analytics, analyse
from sagalog.analytics.timerange import TimeRange
from sagalog.replay import UndecodableRecord


@dataclass(frozen=True)
class AnalyticsReport:
    """Everything every output shows.

    Attributes:
        topic: where the transitions were read.
        time_range: the records' publish times covered.
        generated_ms: when the report was made; what is in flight is aged to the end
            of the range or this, whichever is earlier.
        analytics: the tables.
        flow: the one flow reported, if asked.
        read: records in the range.
        undecodable: records that did not decode, and
        examples: the first of them, with why.
        other_types: records of other event types on the topic.
    """

    topic: str
    time_range: TimeRange
    generated_ms: int
    analytics: Analytics
    flow: str | None = None
    read: int = 0
    undecodable: int = 0
    other_types: int = 0
    examples: list[UndecodableRecord] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """No transition in the range (records that did not decode do not count)."""
        return self.analytics.empty

    @property
    def as_of_ms(self) -> int:
        return min(self.time_range.until_ms, self.generated_ms)


def build_report(
    log: TransitionLog,
    *,
    topic: str,
    time_range: TimeRange,
    generated_ms: int,
    flow: str | None = None,
    top: int = 10,
) -> AnalyticsReport:
    """The statistics of ``log`` (read from ``topic`` over ``time_range``)."""
    as_of = min(time_range.until_ms, generated_ms)
    return AnalyticsReport(
        topic=topic,
        time_range=time_range,
        generated_ms=generated_ms,
        analytics=analyse(log.transitions, now_ms=as_of, top=top),
        flow=flow,
        read=log.read,
        undecodable=log.undecodable,
        other_types=log.other_types,
        examples=list(log.examples),
    )
