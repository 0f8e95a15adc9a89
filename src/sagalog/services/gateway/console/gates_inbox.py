"""The gates inbox's filters and labels: pure functions over the gate views.

Who holds a gate and which flow it belongs to are asked of the read model (it skips
the others as it scans); a deadline and an escalation level are checked here, on the
gates it returns.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagalog.services.gateway.console.listing import moment_ms
from sagalog.services.gateway.exceptions import BadQuery
from sagalog.services.gateway.views import GateView


@dataclass(frozen=True)
class GateQuery:
    assignee: str | None = None
    flow: str | None = None
    due_before: dt.datetime | None = None
    min_level: int | None = None

    def params(self) -> dict[str, str]:
        found = {"assignee": self.assignee, "flow": self.flow}
        if self.due_before is not None:
            found["due_before"] = self.due_before.strftime("%Y-%m-%dT%H:%M")
        if self.min_level is not None:
            found["level"] = str(self.min_level)
        return {k: v for k, v in found.items() if v}


def parse_gate_query(params: Mapping[str, str]) -> GateQuery:
    """The inbox's filters; empty values mean "any".

    Raises:
        BadQuery: a deadline that is not a time, a level that is not a number (400).
    """
    given = {k: v.strip() for k, v in params.items() if v and v.strip()}
    level = given.get("level")
    if level is not None and not level.isdigit():
        raise BadQuery(
            f"level={level!r} is not an escalation level; give a whole number (0: not escalated)",
            parameter="level",
        )
    due = given.get("due_before")
    due_before = None
    if due is not None:
        due_before = dt.datetime.fromtimestamp(moment_ms("due_before", due) / 1000, dt.UTC)
    return GateQuery(
        assignee=given.get("assignee"),
        flow=given.get("flow"),
        due_before=due_before,
        min_level=int(level) if level is not None else None,
    )


def gate_matches(query: GateQuery, gate: GateView) -> bool:
    if query.due_before is not None and gate.deadline >= query.due_before:
        return False
    return query.min_level is None or gate.escalation_level >= query.min_level


def decided_label(earlier: Mapping[str, Any] | None) -> str | None:
    """What a gate decided through the gateway shows until the tracker closes it (the
    read model keeps it open a moment): a second click would only be refused."""
    if earlier is None:
        return None
    verb = "approved" if earlier["decision"] == "approve" else "rejected"
    return (
        f"{verb} by {earlier.get('decided_by') or 'someone'}: waiting for the workflow to move on"
    )


def moved_on_label(earlier: Mapping[str, Any] | None) -> str:
    """What a row says once its gate closed: who decided it here, if someone did."""
    if earlier is None:
        return "decided elsewhere, or expired"
    verb = "approved" if earlier["decision"] == "approve" else "rejected"
    return f"{verb} by {earlier.get('decided_by') or 'someone'}"
