"""Admission control: at most ``limit`` workflows of a flow active at once; the rest wait.

A new workflow beyond the limit is recorded ``queued`` (``decide(..., admit=False)``)
and holds no slot. When an active workflow leaves the active states (it completes,
fails, is compensated, times out), the freed slot goes to the queued workflow with
the highest priority, the oldest first among equals: the same rule as the agents'
priority lanes. Nothing else waits for the queue: events of other workflows, and the
queued workflows' own deadlines, go on as usual.

The policy is pure and knows no storage. The faust layer keeps, per flow, the count
of active workflows and the queue; ``queue_key`` orders a queue kept in an ordered
table (RocksDB) so that the next workflow to admit is its *first* key, the same
trick as the timer table's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sagalog.errors import ConfigurationError
from sagalog.flows.states import TERMINAL_STATES, WorkflowState
from sagalog.priority import Priority

ACTIVE_STATES = frozenset(WorkflowState) - TERMINAL_STATES - {WorkflowState.QUEUED}
"""The states that hold a slot: every state a workflow can be in between admission and its end."""

_PRIORITY_DIGITS = 3


def is_active(state: WorkflowState) -> bool:
    """Whether a workflow in ``state`` holds one of its flow's slots."""
    return state in ACTIVE_STATES


@dataclass(frozen=True, order=True)
class QueuedWorkflow:
    """A workflow waiting for a slot. Orders as it is served: first is admitted first."""

    sort_key: tuple[int, int, str]
    workflow_id: str
    priority: Priority
    queued_at_ms: int

    @classmethod
    def of(cls, workflow_id: str, *, priority: Priority, queued_at_ms: int) -> QueuedWorkflow:
        return cls((-int(priority), queued_at_ms, workflow_id), workflow_id, priority, queued_at_ms)

    @property
    def key(self) -> str:
        """Its key in an ordered queue table; the first key is admitted first."""
        return queue_key(
            priority=self.priority, queued_at_ms=self.queued_at_ms, workflow_id=self.workflow_id
        )


def queue_key(*, priority: Priority | int, queued_at_ms: int, workflow_id: str) -> str:
    """``{999 - priority:03d}|{queued_at_ms:015d}|{workflow_id}``: higher priority sorts first."""
    rank = 10**_PRIORITY_DIGITS - 1 - int(priority)
    return f"{rank:0{_PRIORITY_DIGITS}d}|{queued_at_ms:015d}|{workflow_id}"


@dataclass(frozen=True)
class Admission:
    """The admission policy of one flow.

    Attributes:
        limit: the most workflows of the flow active at once; None for no limit.
    """

    limit: int | None = None

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ConfigurationError(
                f"admission limit {self.limit}: set it to 1 or more, or leave it unset for no limit"
            )

    def admits(self, *, active: int) -> bool:
        """Whether a new workflow may start now, with ``active`` workflows holding slots.

        A new workflow also waits when others are queued (``queued > 0``): it must not
        overtake them. Call ``admits_new`` for that rule.
        """
        return self.limit is None or active < self.limit

    def admits_new(self, *, active: int, queued: int) -> bool:
        """Whether a *new* workflow starts now: a free slot and nobody already waiting for one.

        With a queue, the newcomer joins it and the queue's first takes the slot, so a
        low-priority newcomer cannot jump an urgent workflow that was waiting.
        """
        return self.admits(active=active) and queued == 0

    def free_slots(self, *, active: int) -> int | None:
        """How many more workflows may be active now (None: no limit)."""
        return None if self.limit is None else max(0, self.limit - active)

    def to_admit(self, queued: Iterable[QueuedWorkflow], *, active: int) -> list[QueuedWorkflow]:
        """The queued workflows that take the free slots now, in the order to admit them."""
        ordered = sorted(queued)
        free = self.free_slots(active=active)
        return ordered if free is None else ordered[:free]

    def next_up(self, queued: Iterable[QueuedWorkflow]) -> QueuedWorkflow | None:
        """Which queued workflow takes the next freed slot: highest priority, then oldest."""
        return min(queued, default=None)
