"""Gather one workflow's audit material from Kafka: its record, its events, its transitions.

The record comes first (``lookup``: the gateway, or the one changelog partition of
its key), then every event at the position the tracker sealed (``reading.fetch_at``),
then the tracker's transitions: by position when the gateway knows them, otherwise
from the one transitions partition of the key, starting at the time of the
workflow's first event and stopping at its terminal transition. Nothing here reads
a whole topic, except a *substitute* topic: a scratch copy named with
``--from-topic original=copy`` (to verify a restored or copied log, whose offsets
differ from the sealed ones), which is read whole and matched by event id.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer

from sagalog.audit.blobs import Read, blob_findings
from sagalog.audit.exceptions import AuditError, UnknownWorkflowError
from sagalog.audit.lookup import WorkflowSeal, partition_for, record_from_changelog
from sagalog.audit.reading import (
    LoggedEvent,
    Position,
    ReadStats,
    fetch_at,
    offset_at_time,
    partitions_of,
    read_range,
    watermarks,
)
from sagalog.audit.trail import AuditTrail, Decoded, build_trail
from sagalog.audit.verify import Verification, verify
from sagalog.blobs.fields import Schema
from sagalog.blobs.store import BlobStore
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import H_ID
from sagalog.errors import SagalogError
from sagalog.tracker.record import SealedEvent

TRANSITION_LEAD_MS = 5_000
"""How far before the workflow's first event its transitions are looked for.

A transition is produced after the tracker read its cause, so its timestamp is later
than the cause's but for the skew between the producers' clocks."""


@dataclass(frozen=True)
class Sources:
    """Where the audit reads.

    Attributes:
        transitions_topic: the tracker's transitions topic; None: skip transitions.
        substitutes: original topic -> the topic to read instead (a copy).
    """

    transitions_topic: str | None
    substitutes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Collected:
    """What was read: the trail is built from it, the verification checks it."""

    trail: AuditTrail
    events: tuple[LoggedEvent, ...]
    transitions: tuple[LoggedEvent, ...]
    read: Read
    """An event's payload and the schema it was read with (None: it does not decode)."""


def verify_collected(collected: Collected, blobs: BlobStore | None) -> Verification:
    """What ``sagalog audit --verify`` finds: the chain's findings, then the blobs' (a
    note when no blob store is configured, so looking at nothing never reads as clean)."""
    checked = verify(collected.trail.workflow, collected.events, collected.transitions)
    found, unchecked = blob_findings(collected.events, collected.read, blobs)
    return dataclasses.replace(
        checked, findings=(*checked.findings, *found), notes=(*checked.notes, *unchecked)
    )


def parse_substitutes(pairs: tuple[str, ...]) -> dict[str, str]:
    """``("a=b", ...)`` as ``{"a": "b"}``.

    Raises:
        AuditError: a pair is not ``original=copy``.
    """
    found: dict[str, str] = {}
    for pair in pairs:
        original, sep, copy = pair.partition("=")
        if not sep or not original.strip() or not copy.strip():
            raise AuditError(f"--from-topic {pair!r}: expected ORIGINAL=COPY, e.g. a.events=a.copy")
        found[original.strip()] = copy.strip()
    return found


def find_workflow(
    consumer: Consumer,
    workflow_id: str,
    *,
    changelog: str,
    timeout_s: float,
    stats: ReadStats,
) -> WorkflowSeal:
    """The workflow's record from the changelog partition of its key.

    Raises:
        UnknownWorkflowError: the tracker holds no record of it.
        AuditError: the changelog does not exist (another tracker app id).
    """
    try:
        record, partition = record_from_changelog(
            consumer, changelog, workflow_id, timeout_s=timeout_s, stats=stats
        )
    except AuditError as exc:
        raise AuditError(
            f"{exc}; the tracker's records changelog is named <tracker app id>-records-"
            "changelog: pass the tracker's --tracker-app-id"
        ) from None
    if record is None:
        raise UnknownWorkflowError(
            f"no workflow '{workflow_id}' is known to the tracker: its records changelog "
            f"{changelog} holds no record of it in partition {partition} (the partition of "
            f"that key; {stats.records_read} records read). Check the id (`sagalog workflows "
            "list`) and --tracker-app-id"
        )
    return WorkflowSeal.from_record(record, source=f"changelog {changelog}/{partition}")


def collect(
    consumer: Consumer,
    codec: EventCodec,
    workflow: WorkflowSeal,
    *,
    sources: Sources,
    timeout_s: float,
    stats: ReadStats,
    notes: list[str] | None = None,
    known: Mapping[Position, LoggedEvent] | None = None,
) -> Collected:
    """Read the workflow's events and transitions and assemble its trail.

    ``known``: records already read at their positions (an earlier read of the same
    workflow): a record in the log never changes, so only the positions it lacks are
    fetched, and a running workflow's story grows by its new records alone."""
    notes = list(notes or [])
    reader = _Reader(codec)
    decode = reader.decode
    read_at = _PointReader(consumer, known or {}, timeout_s=timeout_s, stats=stats)
    events = _events(
        consumer, workflow, sources.substitutes, read_at, timeout_s=timeout_s, stats=stats
    )
    missing = _missing(workflow.sealed, events)
    transitions: list[LoggedEvent] = []
    if sources.transitions_topic is not None:
        transitions = _transitions(
            consumer,
            workflow,
            events,
            topic=sources.transitions_topic,
            substitutes=sources.substitutes,
            decode=decode,
            read_at=read_at,
            timeout_s=timeout_s,
            stats=stats,
            notes=notes,
        )
    if workflow.dropped:
        total = workflow.dropped + len(workflow.sealed)
        notes.append(
            f"the record lists the newest {len(workflow.sealed)} of {total} sealed events; "
            "the older ones are not shown"
        )
    if not workflow.sealed:
        notes.append(
            "the record lists no sealed event: it was last written by a tracker release "
            "that did not seal events"
        )
    trail = build_trail(workflow, events, transitions, decode=decode, missing=missing, notes=notes)
    return Collected(
        trail=trail, events=tuple(events), transitions=tuple(transitions), read=reader.read
    )


def _events(
    consumer: Consumer,
    workflow: WorkflowSeal,
    substitutes: Mapping[str, str],
    read_at: _PointReader,
    *,
    timeout_s: float,
    stats: ReadStats,
) -> list[LoggedEvent]:
    """The sealed events, grouped by topic in the order the tracker first read each
    topic; within a topic, in sealed order (or a substitute's log order)."""
    topics: list[str] = []
    for sealed in workflow.sealed:
        if sealed.topic not in topics:
            topics.append(sealed.topic)
    direct = [s for s in workflow.sealed if s.topic not in substitutes]
    found = read_at((s.topic, s.partition, s.offset) for s in direct)
    events: list[LoggedEvent] = []
    key = workflow.workflow_id.encode()
    for topic in topics:
        if topic in substitutes:
            events += _whole_topic(consumer, substitutes[topic], key, timeout_s, stats)
        else:
            events += [
                found[(s.topic, s.partition, s.offset)]
                for s in direct
                if s.topic == topic and (s.topic, s.partition, s.offset) in found
            ]
    return events


def _missing(sealed: tuple[SealedEvent, ...], events: list[LoggedEvent]) -> list[SealedEvent]:
    """Sealed events whose id the log no longer holds (as often as they were sealed)."""
    present = Counter(e.header_values.get(H_ID) for e in events)
    missing = []
    for s in sealed:
        if present[s.event_id] > 0:
            present[s.event_id] -= 1
        else:
            missing.append(s)
    return missing


def _transitions(
    consumer: Consumer,
    workflow: WorkflowSeal,
    events: list[LoggedEvent],
    *,
    topic: str,
    substitutes: Mapping[str, str],
    decode: Callable[[bytes | None], Decoded],
    read_at: _PointReader,
    timeout_s: float,
    stats: ReadStats,
    notes: list[str],
) -> list[LoggedEvent]:
    key = workflow.workflow_id.encode()
    if topic in substitutes:
        return _whole_topic(consumer, substitutes[topic], key, timeout_s, stats)
    try:
        partitions = partitions_of(consumer, topic, timeout_s=timeout_s)
    except AuditError as exc:
        notes.append(f"transitions not shown: {exc}")
        return []
    if workflow.transitions is not None:
        found = read_at((topic, p, o) for p, o in workflow.transitions)
        return [found[(topic, p, o)] for p, o in workflow.transitions if (topic, p, o) in found]
    partition = partition_for(key, partitions)
    low, high = watermarks(consumer, topic, partition, timeout_s=timeout_s)
    first_ms = min((e.timestamp_ms for e in events), default=None)
    start = low
    if first_ms is not None:
        at = offset_at_time(
            consumer, topic, partition, first_ms - TRANSITION_LEAD_MS, timeout_s=timeout_s
        )
        start = high if at is None else max(low, at)

    def ends(event: LoggedEvent) -> bool:
        if not workflow.terminal:
            return False
        payload, _ = decode(event.value)
        return payload is not None and payload.get("to_state") == workflow.state

    return read_range(
        consumer,
        topic,
        partition,
        start,
        high,
        keep=lambda message: message.key() == key,
        until=ends,
        timeout_s=timeout_s,
        stats=stats,
    )


def _whole_topic(
    consumer: Consumer, topic: str, key: bytes, timeout_s: float, stats: ReadStats
) -> list[LoggedEvent]:
    """Every record of ``key`` in a substitute topic, partition by partition."""
    found: list[LoggedEvent] = []
    for partition in range(partitions_of(consumer, topic, timeout_s=timeout_s)):
        low, high = watermarks(consumer, topic, partition, timeout_s=timeout_s)
        found += read_range(
            consumer,
            topic,
            partition,
            low,
            high,
            keep=lambda message: message.key() == key,
            timeout_s=timeout_s,
            stats=stats,
        )
    return found


class _PointReader:
    """Records by position: those ``known`` from an earlier read, the rest from the log."""

    def __init__(
        self,
        consumer: Consumer,
        known: Mapping[Position, LoggedEvent],
        *,
        timeout_s: float,
        stats: ReadStats,
    ) -> None:
        self._consumer = consumer
        self._known = known
        self._timeout_s = timeout_s
        self._stats = stats

    def __call__(self, positions: Iterable[Position]) -> dict[Position, LoggedEvent]:
        wanted = list(positions)
        found = {p: self._known[p] for p in wanted if p in self._known}
        if len(found) < len(wanted):
            found.update(
                fetch_at(
                    self._consumer,
                    (p for p in wanted if p not in found),
                    timeout_s=self._timeout_s,
                    stats=self._stats,
                )
            )
        return found


class _Reader:
    """Each record body decoded once, for the trail (payload or reason) and for the blob
    check (payload and the schema it was read with)."""

    def __init__(self, codec: EventCodec) -> None:
        self._codec = codec
        self._cache: dict[bytes, tuple[Schema, dict[str, Any]] | str] = {}

    def _read(self, value: bytes) -> tuple[Schema, dict[str, Any]] | str:
        found = self._cache.get(value)
        if found is None:
            try:
                decoded = self._codec.decode(value)
                reader = self._codec.reader(decoded.schema_id)
                schema = reader.reader_definition or reader.writer_definition
                found = (schema, decoded.payload)
            except SagalogError as exc:
                found = str(exc)
            self._cache[value] = found
        return found

    def decode(self, value: bytes | None) -> Decoded:
        if value is None:
            return None, "no value (a deletion marker)"
        found = self._read(value)
        return (None, found) if isinstance(found, str) else (found[1], None)

    def read(self, value: bytes | None) -> tuple[Schema, dict[str, Any]] | None:
        found = None if value is None else self._read(value)
        return None if found is None or isinstance(found, str) else found
