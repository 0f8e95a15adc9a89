"""What a handler knows about its workflow without asking another service.

A handler reads an earlier event of its workflow as the class it wrote against:

    reserved = ctx.workflow.latest(BudgetReserved)    # BudgetReserved | None
    request = ctx.workflow.require(RequestSubmitted)  # or the step fails, saying why

``require`` exists because every agent needed it: an event the flow guarantees
came earlier, whose absence no retry mends. The runtime folds the events into the
agent's local projection (``sagalog.agents.state_store``) and hands the handler a
snapshot as of its own event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from sagalog.agents.failures import NonRetryableError
from sagalog.contracts.models import Event
from sagalog.errors import ConfigurationError
from sagalog.flows.model import GATE_DECIDED, GATE_OPENED

E = TypeVar("E", bound=Event)

KEPT_EACH = frozenset({GATE_OPENED, GATE_DECIDED})
"""The event types of which the projection keeps every payload, by event id, besides
the latest: a workflow has several gates, and a step's budget gate opens and decides
after the gate whose decision started the step, so the step run again after its
budget gate must still find that decision (``without_gate``). Gate events are few."""


def _by_id(event_type: str, event_id: str) -> str:
    """Where ``records`` keeps an event of a ``KEPT_EACH`` type by its id (never an
    event type's name: those hold no ``@``)."""
    return f"{event_type}@{event_id}"


@dataclass(frozen=True)
class Reader:
    """The handler reading a context, named in the errors its reads raise."""

    agent: str
    step: str
    handling: str  # the event type of the event being handled

    def __str__(self) -> str:
        return f"agent '{self.agent}', step '{self.step}' (handling {self.handling})"


@dataclass
class WorkflowContext:
    """A workflow's accumulated context: the latest event of each type, and its history.

    Payloads are kept as the record bytes (wire format) and decoded when a handler
    asks for them: most events are folded in and never read, and bytes store and load
    several times faster than decoded values.

    Attributes:
        workflow_id: the workflow.
        records: the latest record value of each event type seen, by event type, and
            every one of the ``KEPT_EACH`` types by ``<type>@<event id>`` too.
        history: (event id, event type, producing source) in log order.
        decoder: turns a record value into its payload (set by the runtime).
        kept: the event types the projection keeps (those the flows on the agent's
            topics name, ``BoundAgent.kept``); None: all.
        reader: the handler reading it (set by ``HandlerContext``), for the errors.
    """

    workflow_id: str
    records: dict[str, bytes] = field(default_factory=dict)
    history: list[tuple[str, str, str]] = field(default_factory=list)
    decoder: Callable[[bytes], dict[str, Any]] | None = field(default=None, repr=False)
    kept: frozenset[str] | None = field(default=None, repr=False)
    reader: Reader | None = field(default=None, repr=False)

    def latest(self, event_class: type[E]) -> E | None:
        """The latest earlier event of ``event_class`` in this workflow, if any.

        Raises:
            ConfigurationError: no flow on the agent's topics names the event's
                type, so the agent does not keep it and the answer would be None
                whatever the log holds.
        """
        payload = self.get(event_class.event_type)
        return None if payload is None else event_class.from_avro(payload)

    def require(self, event_class: type[E]) -> E:
        """The latest earlier event of ``event_class``, which the flow says must exist.

        Raises:
            NonRetryableError: the workflow has none; no retry can make an earlier
                event appear, so the step fails and the workflow compensates.
            ConfigurationError: as ``latest``.
        """
        found = self.latest(event_class)
        if found is None:
            who = "a handler" if self.reader is None else str(self.reader)
            raise NonRetryableError(
                f"workflow {self.workflow_id}: {who} requires an earlier "
                f"{event_class.event_type}, and the workflow has none; publish it on the "
                "workflow's topic and key before this step runs, or read it with "
                f"ctx.workflow.latest({event_class.__name__}) if it may be absent"
            )
        return found

    def get(self, event_type: str) -> dict[str, Any] | None:
        """The latest payload of ``event_type`` in this workflow, decoded but untyped.

        Raises:
            ConfigurationError: as ``latest``.
        """
        raw = self.records.get(event_type)
        if raw is None:
            self._check_kept(event_type)
            return None
        if self.decoder is None:
            raise RuntimeError("WorkflowContext has no decoder; the runtime sets one")
        return self.decoder(raw)

    def latest_id(self, event_class: type[Event]) -> str | None:
        """The id of the latest earlier event of ``event_class``, if any: what a
        lineage cites, or whether the workflow ever had one (a payload-less event).

        Raises:
            ConfigurationError: as ``latest``.
        """
        wanted = event_class.event_type
        found = next((eid for eid, kind, _ in reversed(self.history) if kind == wanted), None)
        if found is None:
            self._check_kept(wanted)
        return found

    def _check_kept(self, event_type: str) -> None:
        """Checked on a miss only: a type the projection keeps is the common case."""
        if self.kept is None or event_type in self.kept:
            return
        who = "a handler" if self.reader is None else str(self.reader)
        raise ConfigurationError(
            f"workflow {self.workflow_id}: {who} reads {event_type} from ctx.workflow, "
            "which no flow on the agent's topics names, so the agent does not keep it; "
            "name it in a flow or fix the class "
            f"(it keeps: {', '.join(sorted(self.kept)) or 'nothing'})"
        )

    def keep(self, event_id: str, event_type: str, payload: bytes) -> None:
        """Hold ``payload`` as the latest of its type (and by its id, for a
        ``KEPT_EACH`` type)."""
        self.records[event_type] = payload
        if event_type in KEPT_EACH:
            self.records[_by_id(event_type, event_id)] = payload

    def without_gate(self, gate: str) -> WorkflowContext:
        """A copy without gate ``gate``'s openings and decisions: what a step run again
        after its budget gate ``gate`` sees, as it saw the workflow when it first ran.
        Its latest ``GateOpened`` and ``GateDecided`` are then the ones before that
        gate's (a step started by a gate's decision starts on that decision again).

        A payload folded before the projection kept them by id cannot be brought back:
        its type then has no latest here, and a reader requiring it is told so.
        """
        view = self.snapshot()
        view.reader = self.reader
        latest = {kind: self._latest_id(kind) for kind in KEPT_EACH}
        hidden = {
            event_id
            for event_id, kind, _ in self.history
            if kind in KEPT_EACH and self._gate_of(kind, event_id, latest[kind]) == gate
        }
        if not hidden:
            return view
        view.history = [entry for entry in self.history if entry[0] not in hidden]
        for kind, current in latest.items():
            if current not in hidden:
                continue
            before = view._latest_id(kind)
            raw = None if before is None else self.records.get(_by_id(kind, before))
            if raw is None:
                view.records.pop(kind, None)
            else:
                view.records[kind] = raw
        return view

    def _latest_id(self, event_type: str) -> str | None:
        return next((eid for eid, kind, _ in reversed(self.history) if kind == event_type), None)

    def _gate_of(self, kind: str, event_id: str, latest_id: str | None) -> str | None:
        raw = self.records.get(_by_id(kind, event_id))
        if raw is None and event_id == latest_id:
            raw = self.records.get(kind)
        if raw is None:
            return None
        if self.decoder is None:
            raise RuntimeError("WorkflowContext has no decoder; the runtime sets one")
        gate = self.decoder(raw).get("gate")
        return None if gate is None else str(gate)

    def seen(self, event_id: str) -> bool:
        # A plain loop: twice as fast as any() over a generator, on every folded event.
        for entry in self.history:  # noqa: SIM110
            if entry[0] == event_id:
                return True
        return False

    def snapshot(self) -> WorkflowContext:
        """A copy frozen at this point of the log.

        The store keeps one live context per workflow and folds a whole polled batch
        into it before handlers run; a handler must see the workflow as it was when
        its own event arrived, not events that come after it, or its decision would
        depend on where batch boundaries fell.
        """
        return WorkflowContext(
            self.workflow_id,
            records=dict(self.records),
            history=list(self.history),
            decoder=self.decoder,
            kept=self.kept,
        )

    def read_by(self, reader: Reader) -> WorkflowContext:
        """This context, naming ``reader`` in its errors (it shares the contents)."""
        return replace(self, reader=reader)

    def to_stored(self) -> tuple[dict[str, bytes], list[tuple[str, str, str]]]:
        # Plain containers pickle several times faster than a dataclass.
        return (self.records, self.history)
