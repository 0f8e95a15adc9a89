"""A workflow's whole story, as ``sagalog audit`` tells it, for the console's workflow page.

The console does not tell the story again: it asks ``sagalog.audit`` for the trail
(the events at the positions the tracker sealed, the transitions at the positions
the read model knows, each event with its cause, gate and model decisions) and turns
each entry into a row (``story_rows``, pure). The record comes from the read model,
so no changelog is read; the events come from the log, a handful of point reads.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Protocol

from sagalog.audit.collect import Collected, Sources, collect, verify_collected
from sagalog.audit.lookup import WorkflowSeal
from sagalog.audit.reading import LoggedEvent, Position, ReadStats, audit_consumer
from sagalog.audit.trail import AuditTrail, GateRecord, ModelDecision, TrailEntry
from sagalog.audit.verify import Verification
from sagalog.contracts.codec import EventCodec
from sagalog.events import EffectRecorded
from sagalog.personal.envelope import ERASED, Envelope
from sagalog.personal.envelope import parse as parse_envelope
from sagalog.services.gateway.console.story_cache import CACHED_RECORDS, StoryCache
from sagalog.services.gateway.read_model import TransitionEntry
from sagalog.settings import ClientSettings
from sagalog.tracker.record import WorkflowRecord


class StorySource(Protocol):
    def story(self, record: WorkflowRecord, history: Sequence[TransitionEntry]) -> AuditTrail:
        """The workflow's audit trail; raises a ``SagalogError`` when the log cannot be read."""
        ...

    def verified(
        self, record: WorkflowRecord, history: Sequence[TransitionEntry]
    ) -> tuple[AuditTrail, Verification]:
        """The trail and its check, as ``sagalog audit --verify`` makes it: every event
        against its hash and the record's seal, every blob against its hash."""
        ...


def seal_of(record: WorkflowRecord, history: Sequence[TransitionEntry]) -> WorkflowSeal:
    """What the audit needs of the record, with where each transition lies (when the
    read model knows every one: otherwise the audit finds them itself)."""
    positions = tuple(
        (h.partition, h.offset) for h in history if h.partition is not None and h.offset is not None
    )
    return dataclasses.replace(
        WorkflowSeal.from_record(record, source="the gateway's read model"),
        transitions=positions if len(positions) == len(history) else None,
    )


class LogStories:
    """Reads stories from Kafka with the audit's own reader (its own consumer per story:
    pages are served from a thread pool, and a consumer is not shared between threads),
    keeping what it read (``story_cache``): a story seen before is read again only for
    its new records."""

    def __init__(
        self,
        settings: ClientSettings,
        *,
        codec: EventCodec,
        transitions_topic: str,
        timeout_s: float,
        cache: StoryCache | None = None,
    ) -> None:
        self.settings = settings
        self.codec = codec
        self.transitions_topic = transitions_topic
        self.timeout_s = timeout_s
        self.cache = cache if cache is not None else StoryCache()

    def story(self, record: WorkflowRecord, history: Sequence[TransitionEntry]) -> AuditTrail:
        seal = seal_of(record, history)
        held = self.cache.story(seal)
        if held is not None:
            return held.trail
        return self._collect(seal, known=self.cache.known(seal.workflow_id)).trail

    def verified(
        self, record: WorkflowRecord, history: Sequence[TransitionEntry]
    ) -> tuple[AuditTrail, Verification]:
        collected = self._collect(seal_of(record, history), known={})
        return collected.trail, verify_collected(collected, self.settings.blob_store())

    def _collect(self, seal: WorkflowSeal, *, known: Mapping[Position, LoggedEvent]) -> Collected:
        with closing(audit_consumer(self.settings)) as consumer:
            collected = collect(
                consumer,
                self.codec,
                seal,
                sources=Sources(transitions_topic=self.transitions_topic),
                timeout_s=self.timeout_s,
                stats=ReadStats(),
                known=known,
            )
        self.cache.keep(seal, collected)
        return collected


@dataclass(frozen=True)
class StoryRow:
    """One line of the story as the page shows it."""

    kind: str  # "event" or "transition"
    number: int | None  # events are numbered, as `sagalog audit` numbers them
    time: str | None
    event_type: str | None
    short_type: str
    source: str | None
    event_id: str | None
    position: str
    causation_path: tuple[str, ...]
    causes_shown: tuple[str, ...]
    gate: GateRecord | None = None
    model: ModelDecision | None = None
    model_json: str | None = None  # the model's outcome, pretty-printed once (rows are kept)
    effect: dict[str, Any] | None = None
    payload_json: str | None = None
    error: str | None = None
    from_state: str | None = None
    to_state: str | None = None
    step: str | None = None


SEALED = "[personal data, sealed]"
"""What the page shows for a personal field whose subject was not erased: the console
does not open personal data (``sagalog audit`` does, for whoever holds the key file)."""

IsErased = Callable[[Envelope], bool]
"""Whether an envelope's subject was erased (its data key tombstoned)."""


def shown_personal(value: Any, is_erased: IsErased | None) -> Any:
    """``value`` with every personal-data envelope in it replaced by ``ERASED`` (its
    subject was erased) or ``SEALED``: never the ciphertext, never the plaintext. With
    no key topic to ask (``is_erased`` None), every envelope shows as sealed."""
    if isinstance(value, dict):
        return {k: shown_personal(v, is_erased) for k, v in value.items()}
    if isinstance(value, list):
        return [shown_personal(v, is_erased) for v in value]
    envelope = parse_envelope(value)
    if envelope is None:
        return value
    return ERASED if is_erased is not None and is_erased(envelope) else SEALED


CAUSES_SHOWN = 3
"""The nearest causes a row names before it skips to the first one (the request)."""


def shown_causes(path: tuple[str, ...]) -> tuple[str, ...]:
    """What a row says of its causation path: the nearest causes and the first, with how
    many lie between. Each cause is a row of the same story; a workflow whose every
    event causes the next would otherwise print its whole history on every row, a page
    that grows with the square of the story."""
    if len(path) <= CAUSES_SHOWN + 1:
        return path
    between = len(path) - CAUSES_SHOWN - 1
    return (*path[:CAUSES_SHOWN], f"… {between} more", path[-1])


class RowMemo:
    """Rows already made, by the trail entry they were made from: the story cache hands
    out the same entries while a workflow's seal holds, and a row costs a pretty-printed
    payload (Python's JSON encoder does not indent in C). A row whose payload holds
    personal data is made each time: its subject may have been erased since. Shared by
    the threads that serve pages; past ``max_rows`` it starts again."""

    def __init__(self, *, max_rows: int = CACHED_RECORDS) -> None:
        self.max_rows = max_rows
        self._rows: dict[tuple[int, int | None], tuple[TrailEntry, StoryRow]] = {}
        self._lock = threading.Lock()

    def row(self, entry: TrailEntry, number: int | None, is_erased: IsErased | None) -> StoryRow:
        key = (id(entry), number)
        with self._lock:
            held = self._rows.get(key)
        if held is not None and held[0] is entry:
            return held[1]
        shown = entry.payload if entry.payload is None else shown_personal(entry.payload, is_erased)
        row = _row(dataclasses.replace(entry, payload=shown), number)
        if shown == entry.payload:
            with self._lock:
                if len(self._rows) >= self.max_rows:
                    self._rows.clear()
                self._rows[key] = (entry, row)  # the entry is held, so its id is not reused
        return row


def story_rows(
    trail: AuditTrail, *, is_erased: IsErased | None = None, memo: RowMemo | None = None
) -> list[StoryRow]:
    """The trail's entries in its order (each transition after the event that caused
    it), with what the page shows of each; personal data as erased or sealed."""
    memo = memo if memo is not None else RowMemo()
    rows = []
    number = 0
    for entry in trail.entries:
        if entry.kind == "event":
            number += 1
        rows.append(memo.row(entry, number if entry.kind == "event" else None, is_erased))
    return rows


def _row(entry: TrailEntry, number: int | None) -> StoryRow:
    payload = entry.payload or {}
    effect = None
    if entry.event_type == EffectRecorded.event_type and entry.payload is not None:
        effect = {
            k: payload.get(k)
            for k in ("effect", "idempotency_key", "dependency", "reconciliation", "result_json")
            if payload.get(k) is not None
        }
    shown = (
        entry.kind == "event"  # a transition's row says its states; the page shows no payload
        and entry.payload is not None
        and entry.gate is None
        and entry.model is None
        and not effect
    )
    return StoryRow(
        kind=entry.kind,
        number=number,
        time=entry.time,
        event_type=entry.event_type,
        short_type=(entry.event_type or "?").rsplit(".", 1)[-1],
        source=entry.source,
        event_id=entry.event_id,
        position=entry.record.position,
        causation_path=entry.causation_path,
        causes_shown=shown_causes(entry.causation_path),
        gate=entry.gate,
        model=entry.model,
        model_json=None
        if entry.model is None
        else json.dumps(entry.model.outcome, indent=2, ensure_ascii=False),
        effect=effect,
        payload_json=json.dumps(payload, indent=2, ensure_ascii=False) if shown else None,
        error=entry.error,
        from_state=payload.get("from_state") if entry.kind == "transition" else None,
        to_state=payload.get("to_state") if entry.kind == "transition" else None,
        step=payload.get("step") if entry.kind == "transition" else None,
    )
