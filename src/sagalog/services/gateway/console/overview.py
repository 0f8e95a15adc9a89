"""The overview's tables, from counts the read model keeps: pure functions.

Counts by flow, version and state are kept by the read model as batches land
(``ReadModel.version_counts``), so the overview costs no scan however many workflows
there are. What is stuck is read from the ``idle`` index up to a cap: past it the
page says "at least", since an operator needs to know there are many, not how many.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sagalog.flows.states import TERMINAL_STATES, WorkflowState
from sagalog.services.gateway.read_model import VersionState
from sagalog.services.gateway.workflow_index import Facets

STUCK_CAP = 1_000
"""The most stuck workflows the overview counts one by one. Each is an index entry read
on every render (and every live refresh): 10,000 took the overview to 1.7 s over a
million workflows (``tests/bench/console.py``); past the cap it says "1000+", and the
workflows list, filtered by "stuck for longer than", pages through them all."""

STATE_ORDER = tuple(WorkflowState)
"""The overview's columns: the states in the order a workflow meets them."""


@dataclass(frozen=True)
class VersionRow:
    """One flow version's workflows, by state."""

    flow: str
    version: int
    by_state: Mapping[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_state.values())

    @property
    def in_flight(self) -> int:
        terminal = {s.value for s in TERMINAL_STATES}
        return sum(n for state, n in self.by_state.items() if state not in terminal)


def version_rows(counts: Mapping[VersionState, int]) -> list[VersionRow]:
    """A row per flow version with any workflow, by flow name then version."""
    grouped: dict[tuple[str, int], Counter[str]] = {}
    for (flow, version, state), n in counts.items():
        if n > 0:
            grouped.setdefault((flow, version), Counter())[state] += n
    return [
        VersionRow(flow=flow, version=version, by_state=dict(by_state))
        for (flow, version), by_state in sorted(grouped.items())
    ]


@dataclass(frozen=True)
class StuckRow:
    flow: str
    version: int
    state: str
    count: int
    oldest_entered_ms: int


def stuck_rows(stuck: Iterable[Facets]) -> list[StuckRow]:
    """The stuck workflows grouped by flow version and state, the longest idle first."""
    groups: dict[tuple[str, int, str], list[Facets]] = {}
    for facets in stuck:
        groups.setdefault((facets.flow, facets.flow_version, facets.state.value), []).append(facets)
    rows = [
        StuckRow(flow, version, state, len(found), min(f.entered_ms for f in found))
        for (flow, version, state), found in groups.items()
    ]
    return sorted(rows, key=lambda r: (r.oldest_entered_ms, r.flow, r.version, r.state))


def shown_states(rows: Iterable[VersionRow]) -> list[str]:
    """The states some workflow is in, in the machine's order: thirteen columns of dots
    would push the totals off a laptop's screen."""
    present = {state for row in rows for state, n in row.by_state.items() if n}
    return [s.value for s in STATE_ORDER if s.value in present]
