"""The workflows list's decisions, as plain functions: what a query asks, which index
answers it, which entries match, and the cursor that resumes it.

A page is a keyset scan of one listing index (``workflow_index``), never an offset:
the cursor is the key of the last entry looked at, so page 1,000 costs what page 1
does and a workflow that starts while someone pages is neither skipped nor shown
twice. Which index:

- "stuck for longer than" asks for in-flight workflows idle since before a moment:
  the ``idle`` index up to that moment, longest idle first;
- otherwise the ``start`` index, newest first, bounded by the started-time filter.

Every other filter (flow, version, state, ended time) is checked on the index
entry's facets, without reading the workflow's record.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields

from sagalog.durations import format_duration, positive_duration_ms
from sagalog.flows.states import TERMINAL_STATES, WorkflowState
from sagalog.services.gateway.exceptions import BadQuery
from sagalog.services.gateway.workflow_index import Facets, Index, time_suffix

PAGE_SIZE = 50
SCAN_BUDGET = 20_000
"""Index entries one page may look at: a filter that matches one workflow in a million
answers a short page and a cursor rather than a scan of the whole index."""

DEFAULT_STUCK = "1h"
"""The overview's "stuck" threshold when none is asked for."""

_END = b"\xff"
"""Above every key suffix (suffixes start with a digit)."""

STATES = tuple(s.value for s in WorkflowState)


@dataclass(frozen=True)
class WorkflowQuery:
    """What the workflows list is asked for; every field is optional."""

    flow: str | None = None
    version: int | None = None
    state: WorkflowState | None = None
    started_from_ms: int | None = None
    started_to_ms: int | None = None
    ended_from_ms: int | None = None
    ended_to_ms: int | None = None
    stuck_ms: int | None = None

    def params(self) -> dict[str, str]:
        """The query as the page's URL spells it (the inverse of ``parse_query``)."""
        found: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if f.name.endswith("_ms") and f.name != "stuck_ms":
                found[f.name[:-3]] = _iso(value)
            elif f.name == "stuck_ms":
                found["stuck"] = format_duration(value)
            elif isinstance(value, WorkflowState):
                found[f.name] = value.value
            else:
                found[f.name] = str(value)
        return found


@dataclass(frozen=True)
class Scan:
    """Which index a query reads, in which direction, between which key suffixes."""

    index: Index
    low: bytes
    high: bytes
    backwards: bool


def parse_query(params: Mapping[str, str]) -> WorkflowQuery:
    """The query in a page's parameters; empty values mean "any".

    Raises:
        BadQuery: a parameter that does not read, named with what it takes (400).
    """
    given = {k: v.strip() for k, v in params.items() if v and v.strip()}
    version = given.get("version")
    if version is not None and not version.isdigit():
        raise BadQuery(
            f"version={version!r} is not a flow version; give a whole number such as 2",
            parameter="version",
        )
    state = given.get("state")
    if state is not None and state not in STATES:
        raise BadQuery(
            f"state={state!r} is not a workflow state; use one of {', '.join(STATES)}",
            parameter="state",
        )
    stuck = given.get("stuck")
    stuck_ms = None
    if stuck is not None:
        try:
            stuck_ms = positive_duration_ms(stuck)
        except ValueError:
            raise BadQuery(
                f"stuck={stuck!r} is not a duration; give one such as 30m, 1h or 2d",
                parameter="stuck",
            ) from None
    return WorkflowQuery(
        flow=given.get("flow"),
        version=int(version) if version is not None else None,
        state=WorkflowState(state) if state is not None else None,
        started_from_ms=_moment(given, "started_from"),
        started_to_ms=_moment(given, "started_to"),
        ended_from_ms=_moment(given, "ended_from"),
        ended_to_ms=_moment(given, "ended_to"),
        stuck_ms=stuck_ms,
    )


def _moment(given: Mapping[str, str], name: str) -> int | None:
    text = given.get(name)
    return None if text is None else moment_ms(name, text)


def moment_ms(name: str, text: str) -> int:
    """A time as a browser's date-time field sends it (``2026-12-03T09:00``), in UTC
    unless it names its offset.

    Raises:
        BadQuery: naming the parameter ``name`` (400).
    """
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadQuery(
            f"{name}={text!r} is not a time; give one such as 2026-12-03T09:00 (UTC)",
            parameter=name,
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M")


def scan_of(query: WorkflowQuery, now_ms: int) -> Scan:
    """The index range that holds every answer to ``query``, and the order to read it."""
    if query.stuck_ms is not None:
        return Scan(Index.IDLE, b"", time_suffix(now_ms - query.stuck_ms), backwards=False)
    low = time_suffix(query.started_from_ms) if query.started_from_ms is not None else b""
    high = time_suffix(query.started_to_ms) if query.started_to_ms is not None else _END
    return Scan(Index.START, low, high, backwards=True)


def matcher(query: WorkflowQuery) -> Callable[[Facets], bool]:
    """Whether an index entry answers ``query`` (the range already holds its bounds)."""

    def keep(facets: Facets) -> bool:
        if query.flow is not None and facets.flow != query.flow:
            return False
        if query.version is not None and facets.flow_version != query.version:
            return False
        if query.state is not None and facets.state is not query.state:
            return False
        if not _within(facets.started_ms, query.started_from_ms, query.started_to_ms):
            return False
        if query.ended_from_ms is not None or query.ended_to_ms is not None:
            if facets.state not in TERMINAL_STATES:
                return False
            return _within(facets.entered_ms, query.ended_from_ms, query.ended_to_ms)
        return True

    return keep


def _within(ms: int, low: int | None, high: int | None) -> bool:
    return (low is None or ms >= low) and (high is None or ms < high)


def cursor_text(index: Index, suffix: bytes) -> str:
    """An opaque cursor: the index and the key suffix to resume after."""
    return base64.urlsafe_b64encode(index.value.encode() + b":" + suffix).decode().rstrip("=")


def cursor_suffix(text: str, index: Index) -> bytes:
    """The key suffix in a cursor made for ``index``.

    Raises:
        BadQuery: the cursor is not one the list made, or it was made for the other
            order (the filters changed under it): start again from the first page.
    """
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, binascii.Error):
        raw = b""
    name, sep, suffix = raw.partition(b":")
    if not sep or name != index.value.encode() or not suffix:
        raise BadQuery(
            f"after={text!r} is not a cursor of this list (the filters changed, or the link "
            "was cut); open the list's first page again",
            parameter="after",
        )
    return suffix


@dataclass(frozen=True)
class Search:
    """What the search box names: a workflow id, or a correlation key and its value."""

    workflow_id: str | None = None
    key: str | None = None
    value: str | None = None


def parse_search(text: str, declared_keys: Iterable[str]) -> Search:
    """``filing_number=F-1`` searches by a correlation key the flows declare; anything
    else is a workflow id.

    Raises:
        BadQuery: a ``name=value`` whose name no loaded flow declares (400).
    """
    text = text.strip()
    name, sep, value = text.partition("=")
    declared = sorted(set(declared_keys))
    if sep and name.strip() and " " not in name.strip():
        if name.strip() not in declared:
            known = ", ".join(declared) if declared else "none"
            raise BadQuery(
                f"q={text!r}: '{name.strip()}' is not a correlation key of any loaded flow "
                f"(declared: {known}); search by a workflow id, or by one of those keys "
                "as name=value",
                parameter="q",
            )
        return Search(key=name.strip(), value=value.strip())
    return Search(workflow_id=text)
