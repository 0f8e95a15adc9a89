"""The read model's listing indexes: what a key and its value hold, as pure functions.

A console lists workflows newest first, filtered by flow, version, state, start and
end time, or "no transition for longer than". Reading each ``WorkflowRecord`` to
decide whether it matches would parse a JSON document per workflow passed over, so
two indexes carry what every filter needs in the value of each key (``Facets``):

- ``start/<started_ms:013d><workflow>``: every workflow, in start order (a page is a
  reverse range scan: newest first; a started-time filter bounds the range);
- ``idle/<entered_ms:013d><workflow>``: workflows in flight only, by when they
  entered their state (a "stuck for longer than" filter is a range up to now minus
  the threshold, longest idle first).

The key after its prefix (its *suffix*) is unique and sorts as the index does, so it
is the keyset cursor a page resumes after. Milliseconds take 13 digits until 2286.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sagalog.flows.states import TERMINAL_STATES, WorkflowState
from sagalog.tracker.record import WorkflowRecord

_SEP = b"\x00"


class Index(enum.StrEnum):
    """A listing index, by the name its keys start with."""

    START = "start"
    IDLE = "idle"

    @property
    def prefix(self) -> bytes:
        return self.value.encode() + b"/"


@dataclass(frozen=True)
class Facets:
    """What the listing filters look at, kept in each index entry's value."""

    state: WorkflowState
    flow: str
    flow_version: int
    started_ms: int
    entered_ms: int

    @property
    def in_flight(self) -> bool:
        return self.state not in TERMINAL_STATES

    @classmethod
    def of(cls, record: WorkflowRecord) -> Facets:
        return cls(
            state=record.state,
            flow=record.flow,
            flow_version=record.flow_version,
            started_ms=record.started_at_ms,
            entered_ms=record.entered_current_state_at_ms,
        )

    def encode(self) -> bytes:
        return _SEP.join(
            (
                self.state.value.encode(),
                self.flow.encode(),
                b"%d" % self.flow_version,
                b"%d" % self.started_ms,
                b"%d" % self.entered_ms,
            )
        )

    @classmethod
    def decode(cls, raw: bytes) -> Facets:
        state, flow, version, started, entered = raw.split(_SEP)
        return cls(
            state=WorkflowState(state.decode()),
            flow=flow.decode(),
            flow_version=int(version),
            started_ms=int(started),
            entered_ms=int(entered),
        )


def time_suffix(ms: int, workflow_id: str = "") -> bytes:
    """The key suffix for a moment (and a workflow): with no workflow, the first key at
    ``ms``, a range bound."""
    return b"%013d" % max(ms, 0) + workflow_id.encode()


def suffix_workflow(suffix: bytes) -> str:
    """The workflow id an index key's suffix ends with."""
    return suffix[13:].decode()


def entries(record: WorkflowRecord) -> dict[bytes, bytes]:
    """The listing-index entries (full keys) ``record`` has."""
    facets = Facets.of(record).encode()
    found = {Index.START.prefix + time_suffix(record.started_at_ms, record.workflow_id): facets}
    if not record.is_terminal:
        idle = time_suffix(record.entered_current_state_at_ms, record.workflow_id)
        found[Index.IDLE.prefix + idle] = facets
    return found
