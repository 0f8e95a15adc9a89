"""The stored state of one workflow: what the tracker keeps in RocksDB, keyed by workflow id.

A record outlives the release that wrote it: a waiting workflow sits at a gate for
days while the tracker is upgraded under it, and a new worker restores records from
the changelog that an older one wrote. So the stored form is designed to evolve:

- ``to_stored()`` gives a plain dict of JSON types with readable field names;
  ``from_stored()`` reads it back. The caller picks the bytes (JSON, msgpack).
- **Unknown fields are ignored**, at every level: a record written by a newer
  release that only *added* fields still reads (its additions are dropped).
- **New fields get defaults**, so a record written before they existed reads.
- ``schema_version`` changes only when a field changes *meaning*; then an upgrade
  function from the old version is added to ``_UPGRADES``, and a record from a newer
  version than this release knows is refused (``StoredRecordError``) rather than
  misread.
- Enums are stored by name (``"pending_approval"``, ``"high"``), never by position.

``tests/unit/fixtures/tracker_record_v1.json`` is a record in schema version 1 as the
first release wrote it; a test reads it with every later release.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, ValidationError

from sagalog.flows.states import TERMINAL_STATES, WorkflowState
from sagalog.priority import Priority
from sagalog.tracker.exceptions import StoredRecordError
from sagalog.tracker.timers import Timer

STORED_SCHEMA_VERSION = 1
"""The version this release writes. Bump it only with an entry in ``_UPGRADES``."""
_CURRENT_PREFIX = b'{"schema_version":%d,' % STORED_SCHEMA_VERSION  # how this release's start

RECENT_EVENT_IDS = 64
"""How many applied event ids a record remembers for deduplication.

A workflow of the reference flow sees about twenty events in its whole life, so 64
covers every realistic redelivery; a duplicate older than that is still refused by
the structural rules (it would complete a step already complete, or decide a gate
already closed), only classified as stale rather than duplicate.
"""

SEALED_EVENTS = 256
"""How many sealed event positions a record lists (the newest); older ones are dropped.

A reference workflow seals about twenty (its own events and the tracker's echoes).
The bound keeps the record, which is written on every event, from growing without
limit for a pathological workflow; the chain still covers the dropped ones
(``chain_base``), and ``sealed_dropped`` tells the audit how many it cannot list.
"""

_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}
"""``{n: f}``: ``f`` turns a stored record of schema version ``n`` into version ``n + 1``."""


def _priority_in(value: Any) -> Any:
    return Priority.parse(value) if isinstance(value, str) else value


StoredPriority = Annotated[
    Priority,
    BeforeValidator(_priority_in),
    PlainSerializer(lambda p: p.name.lower(), return_type=str),
]


class _Stored(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """``BaseModel.model_copy``, shallow copies made the short way.

        A decision copies its workflow's record two or three times (the change, the seal
        and trace, the wake-up), and pydantic's general copy (``copy.copy`` of each of
        its four slots) was a tenth of the tracker's decision time. These models keep no
        extra fields (``extra="ignore"``) and no private attributes, so a copy is its
        field values and the set of fields given; ``update`` is not validated, as in
        pydantic's own.
        """
        if deep:
            return super().model_copy(update=update, deep=True)
        cls = type(self)
        copied = cls.__new__(cls)
        values = self.__dict__.copy()
        fields_set = set(self.__pydantic_fields_set__)
        if update:
            values.update(update)
            fields_set.update(update)
        _set_slot(copied, "__dict__", values)
        _set_slot(copied, "__pydantic_extra__", None)
        _set_slot(copied, "__pydantic_fields_set__", fields_set)
        _set_slot(copied, "__pydantic_private__", None)
        return copied


_set_slot = object.__setattr__


class CompletedEntry(_Stored):
    """A step or gate the workflow got past, with the event that completed it."""

    name: str
    event_id: str
    at_ms: int


class CompensationCause(enum.StrEnum):
    """Why a workflow undoes its work; decides its terminal state and the wording of reasons."""

    FAILURE = "failure"
    """A step failed (StepFailed), or a gate's deadline default was ``fail``."""
    TIMEOUT = "timeout"
    """A step or segment took longer than its timeout."""
    REJECTION = "rejection"
    """A person (or a gate's deadline default) rejected at a gate."""
    DEADLINE = "deadline"
    """The workflow's own deadline passed; ends in ``timed_out``."""
    CANCELLATION = "cancellation"
    """An operator cancelled it (``sagalog workflows cancel``); ends like a failure."""


class CompensationProgress(_Stored):
    """Where the undoing stands: one compensation in flight, the rest waiting, in order.

    Attributes:
        cause: why the workflow compensates.
        reason: the same for a person, e.g. "step 'notify_vendor' failed: SMTP 550".
        in_flight: the step whose compensation (or follow-up) was last requested.
        attempt: how many times it has been requested.
        requested_at_ms: when the current attempt was requested.
        remaining: the steps still to undo after ``in_flight``, next first.
        undone: the steps undone so far, in the order they were undone.
    """

    cause: CompensationCause
    reason: str
    in_flight: str | None = None
    attempt: int = 1
    requested_at_ms: int = 0
    remaining: tuple[str, ...] = ()
    undone: tuple[str, ...] = ()


class GateProgress(_Stored):
    """The open human gate: who holds it now and the token a decision must carry."""

    gate: str
    attempt: int = 1
    escalation_level: int = 0
    assignee: str
    token: str
    opened_at_ms: int
    deadline_ms: int


class SignalReceived(_Stored):
    """A signal of the open wait that arrived, with the event that carried it."""

    signal: str
    event_id: str
    at_ms: int


class WaitProgress(_Stored):
    """The open wait for outside events: what arrived so far, and when it times out."""

    wait: str
    opened_at_ms: int
    deadline_ms: int
    received: tuple[SignalReceived, ...] = ()

    @property
    def received_names(self) -> tuple[str, ...]:
        return tuple(r.signal for r in self.received)


class SealedEvent(_Stored):
    """An event the tracker read for a workflow: where it lies in the log, and its hash.

    The audit fetches the workflow's events by these positions instead of scanning
    the topic, and ``audit --verify`` compares what it finds there with ``hash``.
    """

    topic: str
    partition: int
    offset: int
    event_id: str
    hash: str


class WorkflowRecord(_Stored):
    """One workflow as the tracker knows it.

    Attributes:
        schema_version: the stored layout; see the module docstring.
        workflow_id: the saga instance, also the Kafka key and the table key.
        flow: the flow's name.
        flow_version: the version it started under and finishes under.
        state: where it is.
        current: the step running or the gate open; while compensating (and once
            failed), the entry where the forward path stopped; None once completed or
            while queued.
        completed: the steps and gates it got past, in order, with the completing
            event's id.
        compensation: the undoing, once it started.
        gate: the gate open now (kept after it closes, for the record).
        waiting: the wait open now (kept after it ends, for the record).
        keys: the flow's correlation keys, as the starting event gave them
            (``{"filing_number": "F-2026-0042"}``); the gateway finds the workflow by them.
        timers: every timer it still expects; any other timer that fires is stale.
        recent_event_ids: the ids of the last ``RECENT_EVENT_IDS`` events applied.
        priority: its priority lane, from the starting event or the flow.
        started_at_ms: when the tracker first saw it.
        entered_current_state_at_ms: when it entered ``state`` (or its current step).
        last_event_at_ms: the ``ce_time`` of the last event applied.
        terminal_reason: why it ended, once terminal.
        step_of_state: the ``step`` of the transition that entered ``state`` (the
            ``from_step`` of the next one), so a span is attributed to its step.
        chain: the head of the workflow's hash chain over ``sealed`` (see
            ``sagalog.contracts.hash_chain``); None until the first event is sealed
            (and for records written before sealing existed).
        sealed: the events read for the workflow, in log order, the newest
            ``SEALED_EVENTS`` of them (``sagalog.tracker.seal``).
        sealed_dropped: how many older sealed events were dropped from ``sealed``.
        chain_base: the chain value before ``sealed[0]``; None: ``chain_start``.
        traceparent: the trace context of the last event applied that carried one:
            what the tracker's timers and the gateway's decisions continue, so a
            workflow stays one trace even where no event starts the action.
        wake_ms: when its one key in the timer table is due, at or before the
            earliest of ``timers``; None when it has none (``timers.arm``). Kept
            by the processor, never by the rules.
    """

    schema_version: int = STORED_SCHEMA_VERSION
    workflow_id: str
    flow: str
    flow_version: int
    state: WorkflowState
    current: str | None = None
    completed: tuple[CompletedEntry, ...] = ()
    compensation: CompensationProgress | None = None
    gate: GateProgress | None = None
    waiting: WaitProgress | None = None
    keys: dict[str, str] = {}
    timers: tuple[Timer, ...] = ()
    recent_event_ids: tuple[str, ...] = ()
    priority: StoredPriority = Priority.NORMAL
    started_at_ms: int
    entered_current_state_at_ms: int
    last_event_at_ms: int | None = None
    terminal_reason: str | None = None
    step_of_state: str | None = None
    chain: str | None = None
    sealed: tuple[SealedEvent, ...] = ()
    sealed_dropped: int = 0
    chain_base: str | None = None
    traceparent: str | None = None
    wake_ms: int | None = None

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def completed_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.completed)

    def has_seen(self, event_id: str) -> bool:
        """Whether an event with this id was applied recently (the duplicate check)."""
        return event_id in self.recent_event_ids

    def to_stored(self) -> dict[str, Any]:
        """The record as a plain dict of JSON types, for the state table."""
        return self.model_dump(mode="json")

    def encoded(self) -> bytes:
        """The stored form (``from_json`` reads it back)."""
        return self.model_dump_json().encode()

    @classmethod
    def from_json(cls, raw: bytes) -> WorkflowRecord:
        """Read a stored record from its JSON bytes, whichever release wrote it.

        This release's own writes (``model_dump_json``: ``schema_version`` first) are
        validated straight from the bytes, in pydantic's core, about twice as fast as
        parsing to a dict and validating that; anything else goes by ``from_stored``.

        Raises:
            StoredRecordError: as ``from_stored``, or when ``raw`` is not JSON.
        """
        if raw.startswith(_CURRENT_PREFIX):
            try:
                return cls.model_validate_json(raw)
            except ValidationError:
                pass  # from_stored names what is wrong with it
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise StoredRecordError(f"stored record is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise StoredRecordError(f"stored record is not a JSON object: {raw[:80]!r}")
        return cls.from_stored(data)

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> WorkflowRecord:
        """Read a stored record, whichever release wrote it.

        Raises:
            StoredRecordError: when it was written by a newer schema version than
                this release knows, or is not a workflow record.
        """
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or version < 1:
            raise StoredRecordError(
                f"stored record of workflow {data.get('workflow_id')!r} has schema_version "
                f"{version!r}; expected an integer 1..{STORED_SCHEMA_VERSION}"
            )
        if version > STORED_SCHEMA_VERSION:
            raise StoredRecordError(
                f"stored record of workflow {data.get('workflow_id')!r} was written with "
                f"schema_version {version}, newer than this tracker's "
                f"{STORED_SCHEMA_VERSION}; run the release that wrote it or a newer one"
            )
        while version < STORED_SCHEMA_VERSION:
            data = _UPGRADES[version](data)
            version += 1
        try:
            return cls.model_validate({**data, "schema_version": STORED_SCHEMA_VERSION})
        except ValidationError as exc:
            raise StoredRecordError(
                f"stored record of workflow {data.get('workflow_id')!r} is not readable as a "
                f"workflow record (schema_version {version}): {exc}"
            ) from None
