"""One decision in the making: the record as it evolves and the actions it calls for.

The rules in ``machine`` and ``compensation`` describe *what* happens; this class
keeps the bookkeeping every rule shares in one place: each move publishes its
``StateTransition``, each timer set or cancelled is both in the record and in the
actions, and each published event gets a deterministic id.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Callable
from typing import Any

from sagalog.contracts.models import Event
from sagalog.events import StateTransition
from sagalog.flows.model import Flow
from sagalog.flows.states import WorkflowState
from sagalog.tracker.actions import (
    TRANSITIONS_TOPIC,
    Action,
    Alert,
    CancelTimer,
    Decision,
    Outcome,
    Publish,
    ScheduleTimer,
)
from sagalog.tracker.record import RECENT_EVENT_IDS, CompletedEntry, WorkflowRecord
from sagalog.tracker.timers import Timer, TimerKind

_EVENT_IDS = uuid.uuid5(uuid.NAMESPACE_URL, "https://sagalog.dev/tracker/published-event")
_EVENT_IDS_BYTES = _EVENT_IDS.bytes


def event_id_for(name: str) -> str:
    """``str(uuid.uuid5(_EVENT_IDS, name))``, without building a ``UUID`` on the way.

    The ids must never change (a batch decided again after an upgrade must publish
    the same ids, or consumers would not drop the duplicates); the unit tests hold
    this to ``uuid.uuid5``. ``uuid5`` itself was a sixth of a decision's time.
    """
    digest = bytearray(hashlib.sha1(_EVENT_IDS_BYTES + name.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def at(ms: int) -> dt.datetime:
    """Epoch ms as the aware UTC datetime the Avro timestamp fields take."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


class Change:
    """A record being changed by one input (``cause_id``) at ``now_ms``."""

    def __init__(
        self,
        record: WorkflowRecord,
        *,
        flow: Flow,
        now_ms: int,
        cause_id: str,
        secret: bytes,
        topic: str | None = None,
    ) -> None:
        self._record = record
        self._pending: dict[str, Any] = {}
        self.flow = flow
        self.now_ms = now_ms
        self.cause_id = cause_id
        self.secret = secret
        self.topic = topic or flow.topic
        self.actions: list[Action] = []
        self._published = 0
        self._remember: list[str] = []

    @property
    def workflow_id(self) -> str:
        return self._record.workflow_id

    @property
    def record(self) -> WorkflowRecord:
        """The record as changed so far (the models are frozen: a copy, made on read)."""
        if self._pending:
            self._record = self._record.model_copy(update=self._pending)
            self._pending = {}
        return self._record

    def set(self, **fields: object) -> None:
        """Replace fields of the record.

        The updates are kept until the record is read: a decision sets fields five or
        six times (complete, cancel, move, schedule...), and one pydantic copy per
        set was a third of the tracker's decision time.
        """
        self._pending.update(fields)

    def _field(self, name: str) -> Any:
        """One field as changed so far, without making the copy."""
        return self._pending[name] if name in self._pending else getattr(self._record, name)

    def move(self, to: WorkflowState, *, step: str | None, **fields: object) -> None:
        """Enter state ``to`` (``step``: the entry it is at, for the transition) and publish it."""
        entered_ms = self._field("entered_current_state_at_ms")
        self.publish(
            StateTransition(
                flow=self.flow.name,
                flow_version=self.flow.version,
                from_state=self._field("state").value,
                to_state=to.value,
                step=step,
                cause_event_id=self.cause_id,
                time_in_previous_state_ms=max(0, self.now_ms - entered_ms),
                at=at(self.now_ms),
                from_step=self._field("step_of_state"),
            )
        )
        self.set(state=to, entered_current_state_at_ms=self.now_ms, step_of_state=step, **fields)

    def publish(self, event: Event, *, remember: bool = False) -> str:
        """Publish ``event``; its id is derived from (workflow, cause, position), so stable.

        ``remember``: the tracker will read this event back from the workflow topic
        (a ``GateDecided`` it publishes for a gate's default); its id joins the
        record's recent ids, so the echo is a duplicate.
        """
        self._published += 1
        name = f"{self.workflow_id}\x1f{self.cause_id}\x1f{self._published}"
        event_id = event_id_for(name)
        topic = TRANSITIONS_TOPIC if isinstance(event, StateTransition) else self.topic
        self.actions.append(
            Publish(
                event=event,
                event_id=event_id,
                causation_id=self.cause_id,
                topic=topic,
                workflow_id=self.workflow_id,
                flow_version=self._field("flow_version"),
                priority=self._field("priority"),
                time_ms=self.now_ms,
            )
        )
        if remember:
            self._remember.append(event_id)
        return event_id

    def schedule(self, kind: TimerKind, ref: str, due_ms: int) -> None:
        timer = Timer(workflow_id=self.workflow_id, kind=kind, ref=ref, due_ms=due_ms)
        self.set(timers=(*self._field("timers"), timer))
        self.actions.append(ScheduleTimer(timer))

    def cancel(self, which: Callable[[Timer], bool] = lambda _: True) -> None:
        """Cancel the record's pending timers that ``which`` selects (default: all)."""
        keep = []
        for timer in self._field("timers"):
            if which(timer):
                self.actions.append(CancelTimer(timer.key))
            else:
                keep.append(timer)
        self.set(timers=tuple(keep))

    def drop(self, timer: Timer) -> None:
        """Forget a timer that fired (the tick deletes it from the table itself)."""
        self.set(timers=tuple(t for t in self._field("timers") if t != timer))

    def complete(self, name: str, event_id: str) -> None:
        entry = CompletedEntry(name=name, event_id=event_id, at_ms=self.now_ms)
        self.set(completed=(*self._field("completed"), entry))

    def alert(self, name: str, message: str) -> None:
        self.actions.append(Alert(name=name, message=message, workflow_id=self.workflow_id))

    def decision(
        self,
        *,
        event_id: str | None = None,
        event_time_ms: int | None = None,
        reason: str | None = None,
    ) -> Decision:
        """The applied decision; ``event_id`` (a workflow event) joins the recent ids."""
        remembered = [*self._remember, *([event_id] if event_id else [])]
        if remembered:
            recent = (*self._field("recent_event_ids"), *remembered)[-RECENT_EVENT_IDS:]
            self.set(recent_event_ids=recent)
        if event_time_ms is not None:
            self.set(last_event_at_ms=event_time_ms)
        return Decision(
            record=self.record, actions=tuple(self.actions), outcome=Outcome.APPLIED, reason=reason
        )
