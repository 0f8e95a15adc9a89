"""Transactions left open on a reader's input, and when to close them: pure judgement.

A ``read_committed`` reader stops at a partition's last stable offset (LSO): the first
offset of the oldest transaction still open there. A transaction whose commit marker
never reaches the partition holds it forever, and every record after it with it.

**How that happens to the tracker's own transactions.** A broker SIGKILLed just after
it wrote the tracker's ``PREPARE_COMMIT`` restarts while the controller still holds
its old registration (``DUPLICATE_BROKER_REGISTRATION`` until the session times out);
its transaction coordinator resends the markers, and when the controller then fences
the broker, every partition is leaderless for a moment. The coordinator treats
leaderless partitions as deleted ("Couldn't find leader endpoint ... likely deleted
already and hence can be skipped", the rule of KAFKA-5202) and completes the
transaction without their markers: it knows the transaction as committed, and the
partition has its records open. The tracker cannot read past them, and nothing it
decides would ever write to that partition again: its timers wait until it has read
its input, and its input waits on its own transaction (the chaos run where it
happened: docs/design/incident-history.md). Kafka documents the same hang after an
unclean leader election (KAFKA-20716), with ``kafka-transactions.sh find-hanging`` and
``abort`` as the cure; an abort would lose records the coordinator decided to commit.

**The cure used here.** The broker ends a producer's open range at that producer's next
marker on the partition, whatever the epoch: a later transaction of the same
transactional id that writes to the partition closes the earlier records with its own
outcome. The tracker holds partition *p*'s transactional id
(``services.tracker.fencing``), so it writes one record to the held-open partition in
*p*'s transaction and commits: the commit's marker ends the open range, committed, as
the coordinator had decided. An agent is exposed the same way (it writes to a partition
of its input only when it handles that partition's events, and to a partition of its
retry topic only when it retries), and closes those partitions the same way, with its
own transactional id.

The record is ``sagalog.v1.OpenTransactionClosed``: CloudEvents headers, no value
(nothing to decode, like a Kafka control record), keyed ``closer_key(writer, p)``. The
tracker and replay skip it when they read it back (``tracker.decoding.read_event``);
agents skip it from its type header on any topic (``agents.triage.screen``).

When: a partition whose LSO sits below its log end, unmoved, for ``after_s`` (an
ordinary transaction ends within seconds; an agent's open transaction past
``after_s`` gets a record that changes nothing). Once per held offset: if the same
offset is still held ``after_s`` after the record, the open range is another
producer's (an agent's, a tool's), which only its own transactional id or an operator
can end, and ``judge`` reports it.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from sagalog.contracts.headers import H_CONTENT_TYPE, EventHeaders, new_event_id
from sagalog.health import HealthBook

OPEN_TRANSACTION_CLOSED = "sagalog.v1.OpenTransactionClosed"
"""The type of the valueless record that ends a transaction left open (see above)."""

PROBLEM = "open_transaction:"
Headers = list[tuple[str, str | bytes | None]]
Position = tuple[str, int]
Span = tuple[int, int]
"""A partition's last stable offset and its log end (high watermark)."""


class Stage(enum.Enum):
    WATCHED = "watched"  # held open; not for long enough yet
    CLOSING = "closing"  # the closing record was written at this offset
    REPORTED = "reported"  # still held after it: another producer's; said once


@dataclass(frozen=True, slots=True)
class HeldOpen:
    """A partition seen held open at ``stable`` since ``since`` (monotonic seconds)."""

    stable: int
    since: float
    stage: Stage = Stage.WATCHED


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do after one look.

    Attributes:
        held: the state to pass to the next look.
        close: partitions to write a closing record to, in their transactions.
        report: partitions still held after their closing record (once each).
    """

    held: dict[Position, HeldOpen]
    close: list[Position]
    report: list[Position]


def judge(
    previous: Mapping[Position, HeldOpen],
    spans: Mapping[Position, Span],
    *,
    now: float,
    after_s: float,
    paused: Collection[Position] = (),
) -> Verdict:
    """Which held-open partitions to close, and which to report, after this look.

    Args:
        previous: the last look's ``Verdict.held``.
        spans: ``(stable, end)`` of the partitions looked at; those with ``stable >=
            end`` are not held and leave the state.
        now: monotonic seconds.
        after_s: how long a partition stays held at one offset before it is closed, and
            again before it is reported.
        paused: partitions the reader does not fetch now (an agent's retry partition
            waiting for its next retry to be due). Their figures are those of the last
            fetch, however old, so they neither start, advance nor end a watch: each
            keeps the state it had, and is judged again once it is fetched.
    """
    held: dict[Position, HeldOpen] = {key: old for key, old in previous.items() if key in paused}
    close: list[Position] = []
    report: list[Position] = []
    for key, (stable, end) in sorted(spans.items()):
        if stable >= end or key in paused:
            continue
        old = previous.get(key)
        if old is None or old.stable != stable:
            held[key] = HeldOpen(stable, now)
        elif now - old.since < after_s or old.stage is Stage.REPORTED:
            held[key] = old
        elif old.stage is Stage.WATCHED:
            held[key] = HeldOpen(stable, now, Stage.CLOSING)
            close.append(key)
        else:
            held[key] = HeldOpen(stable, old.since, Stage.REPORTED)
            report.append(key)
    return Verdict(held, close, report)


def closer_key(writer: str, partition: int) -> str:
    """The key (and workflow id header) of ``writer``'s closing records on partition
    ``partition``: no workflow's, so that a reader can tell whose and where."""
    return f"sagalog.{writer}.p{partition}"


def closer(*, source: str, writer: str, partition: int) -> tuple[bytes, Headers]:
    """The key and headers of a closing record (its value is None): CloudEvents headers
    as every sagalog event's, less the content type, as there is no content."""
    key = closer_key(writer, partition)
    headers = EventHeaders(
        id=new_event_id(), type=OPEN_TRANSACTION_CLOSED, source=source, workflow_id=key
    )
    pairs: Headers = [pair for pair in headers.to_kafka() if pair[0] != H_CONTENT_TYPE]
    return key.encode(), pairs


def problem_name(place: Position) -> str:
    """The health problem a partition held by another producer is reported under."""
    topic, partition = place
    return f"{PROBLEM}{topic}/{partition}"


def cleared(problems: Iterable[str], verdict: Verdict) -> list[str]:
    """The reported problems (``problem_name``) whose partition is no longer held at a
    reported offset: the holder ended its transaction, or the partition moved on."""
    gone = []
    for name in problems:
        if not name.startswith(PROBLEM):
            continue
        topic, _, partition = name.removeprefix(PROBLEM).rpartition("/")
        held = verdict.held.get((topic, int(partition)))
        if held is None or held.stage is not Stage.REPORTED:
            gone.append(name)
    return gone


def mark_health(
    health: HealthBook, verdict: Verdict, spans: Mapping[Position, Span], *, reader: str
) -> list[str]:
    """Degrade ``health`` for each partition ``verdict`` reports, recover those cleared;
    the reports' messages (``held_by_another``), for the caller's log."""
    problems = []
    for place in verdict.report:
        problem = held_by_another(reader, place[0], place[1], spans[place])
        health.degrade(problem_name(place), problem)
        problems.append(problem)
    for name in cleared(list(health.problems), verdict):
        health.recover(name)
    return problems


def held_by_another(reader: str, topic: str, partition: int, span: Span) -> str:
    """What to tell an operator of a partition still held after its closing record."""
    stable, end = span
    return (
        f"{topic}/{partition} is held open at offset {stable} (log end {end}) by another "
        f"producer's transaction: {reader} reads nothing of it past {stable}. Find the "
        f"producer with `kafka-transactions.sh find-hanging --broker-id <leader of "
        f"{topic}/{partition}>`; it ends when that transactional id commits again, or with "
        f"`kafka-transactions.sh abort` (which discards its records)"
    )
