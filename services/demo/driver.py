"""The people and the calendar of the demo: submit requests, decide gates, let days pass.

Time is compressed with the tracker's virtual clock, and only while nothing is in
flight, so no step ever times out for want of real seconds:

1. **submit** every request (the clock stands still); agents classify, retrieve,
   score and reserve; each workflow stops at the manager's gate.
2. **decide**: managers approve (``approve``, ``fail``) or reject (``reject``)
   through the gateway; those workflows run to their end.
3. **a day passes** (+25 h): the unanswered gates escalate to the director, who
   approves the ``escalate`` ones.
4. **the deadline passes** (+48 h, 73 h after opening): the gates nobody answered
   take their default, reject, and those workflows compensate.

Everything the driver knows it reads from the gateway, like any client would.
``Calendar`` holds what every driver does (the clock, gates, watching, phases); the
filings' driver (``filing_driver``) is its other user.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from demo.scenario import Plan, Request
from sagalog.backoff import RetryPolicy, retry_within
from sagalog.cli.gateway_client import GatewayClient
from sagalog.cli.progress_bars import ProgressBars
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import ServiceUnavailableError
from sagalog.flows.states import TERMINAL_STATES
from sagalog.publisher import EventPublisher
from sagalog.settings import ClientSettings
from sagalog.tracker.ticks import clock_topic, last_tick_ms, tick_all

HOUR_MS = 3_600_000
SUBMIT_RETRY_S = 180.0
SUBMIT_BACKOFF = RetryPolicy(base_delay_s=0.5, max_delay_s=10.0)


@dataclass
class Phase:
    name: str
    seconds: float
    done: int
    of: int


class Planned(Protocol):
    """A workflow the demo starts with a plan: a procurement request or a filing."""

    @property
    def workflow_id(self) -> str: ...

    @property
    def plan(self) -> str: ...

    @property
    def expected_end(self) -> str: ...


@dataclass(kw_only=True)
class Calendar:
    """What every driver does: keep the virtual clock, decide gates through the
    gateway, watch states and time each phase. ``planned`` are its workflows."""

    settings: ClientSettings
    catalog: SchemaCatalog
    gateway: GatewayClient
    topic: str
    tracker_app_id: str
    progress: Callable[[str, int, int, bool], None] = lambda phase, done, of, final: None
    phases: list[Phase] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)

    @property
    def planned(self) -> Sequence[Planned]:
        raise NotImplementedError

    @property
    def prefix(self) -> str:
        return self.planned[0].workflow_id.rsplit("-", 1)[0] + "-"

    def _start_clock(self) -> None:
        topic = clock_topic(self.tracker_app_id)
        now = int(time.time() * 1000)
        if last_tick_ms(self.settings, topic) < now:
            tick_all(self.settings, topic, now)

    def _advance(self, ms: int) -> None:
        topic = clock_topic(self.tracker_app_id)
        tick_all(self.settings, topic, last_tick_ms(self.settings, topic) + ms)

    def _publish_each(
        self,
        event_type: str,
        events: Iterable[tuple[str, dict[str, Any], str | None]],
        *,
        source: str,
        purpose: str,
    ) -> None:
        """Each ``(workflow id, payload, priority)`` once; a broker away is waited out
        (``SUBMIT_RETRY_S`` per event). The event id is derived from the workflow and
        ``purpose``, so a retry of a send that landed after all is the same event,
        which the tracker takes once."""
        publisher = EventPublisher(self.settings, catalog=self.catalog, source=source)
        try:
            for workflow_id, payload, priority in events:
                retry_within(
                    functools.partial(
                        publisher.publish,
                        self.topic,
                        event_type,
                        payload,
                        workflow_id=workflow_id,
                        priority=priority,
                        event_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{purpose}/{workflow_id}")),
                    ),
                    policy=SUBMIT_BACKOFF,
                    within_s=SUBMIT_RETRY_S,
                    retry_on=(ServiceUnavailableError,),
                )
        finally:
            publisher.close()

    def _decide_gates(self, decisions: dict[str, str], *, level: int, comment: str) -> None:
        """``decisions``: workflow id -> ``approve`` or ``reject``, for the gates open
        at escalation ``level``, as the person they are assigned to."""
        for gate in self.gateway.get("/v1/gates", limit=1000)["gates"]:
            decision = decisions.get(gate["workflow_id"])
            if decision is None or gate["escalation_level"] != level:
                continue
            self.gateway.post(
                "/v1/gates/decisions",
                {
                    "token": gate["token"],
                    "workflow_id": gate["workflow_id"],
                    "decision": decision,
                    "decided_by": gate["assignee"],
                    "comment": comment,
                },
            )

    # -- watching ------------------------------------------------------------------

    def refresh(self) -> dict[str, str]:
        """Every demo workflow's state, from the gateway (paged by id)."""
        states: dict[str, str] = {}
        after: str | None = self.prefix
        while after is not None:
            page = self.gateway.get("/v1/workflows", after=after, limit=1000)
            for summary in page["workflows"]:
                if not summary["workflow_id"].startswith(self.prefix):
                    after = None
                    break
                states[summary["workflow_id"]] = summary["state"]
            else:
                after = page["next_after"]
        self.states = states
        return states

    def _count(
        self, wanted: Iterable[str], planned: Iterable[Planned] | None = None
    ) -> tuple[int, int]:
        states = self.refresh()
        ids = [p.workflow_id for p in (planned if planned is not None else self.planned)]
        wanted = set(wanted)
        return sum(1 for w in ids if states.get(w) in wanted), len(ids)

    def _phase(
        self,
        name: str,
        act: Callable[[], None],
        measure: Callable[[], tuple[int, int]],
        timeout_s: float,
    ) -> None:
        started = time.monotonic()
        act()
        done, of = measure()
        while done < of and time.monotonic() - started < timeout_s:
            self.progress(name, done, of, False)
            time.sleep(0.5)
            done, of = measure()
        self.progress(name, done, of, True)
        self.phases.append(Phase(name, round(time.monotonic() - started, 1), done, of))

    def end_states(self) -> Counter[str]:
        states = self.refresh()
        return Counter(states.get(p.workflow_id, "unknown") for p in self.planned)


@dataclass(kw_only=True)
class Driver(Calendar):
    """The procurement requests' people and calendar (the module's docstring)."""

    requests: list[Request]

    @property
    def planned(self) -> Sequence[Planned]:
        return self.requests

    # -- the scenario ----------------------------------------------------------

    def run(self, *, phase_timeout_s: float = 240) -> None:
        self._start_clock()
        self._phase(
            "submit", self._submit, lambda: self._count({"pending_approval"}), phase_timeout_s
        )
        now = [r for r in self.requests if r.plan in (Plan.APPROVE, Plan.FAIL, Plan.REJECT)]
        self._phase(
            "decide",
            lambda: self._decide(now, level=0),
            lambda: self._count(TERMINAL_STATES, now),
            phase_timeout_s,
        )
        later = [r for r in self.requests if r.plan is Plan.ESCALATE]
        self._phase(
            "a day passes",
            lambda: self._advance(25 * HOUR_MS),
            lambda: self._escalated(later),
            phase_timeout_s,
        )
        self._phase(
            "director decides",
            lambda: self._decide(later, level=1),
            lambda: self._count(TERMINAL_STATES, later),
            phase_timeout_s,
        )
        self._phase(
            "the deadline passes",
            lambda: self._advance(48 * HOUR_MS),
            lambda: self._count(TERMINAL_STATES),
            phase_timeout_s,
        )

    # -- steps -----------------------------------------------------------------

    def _submit(self) -> None:
        self._publish_each(
            "procurement.v1.RequestSubmitted",
            ((r.workflow_id, r.payload, r.priority) for r in self.requests),
            source="demo/requesters",
            purpose="demo",
        )

    def _decide(self, requests: Iterable[Request], *, level: int) -> None:
        self._decide_gates(
            {r.workflow_id: "reject" if r.plan is Plan.REJECT else "approve" for r in requests},
            level=level,
            comment="demo decision",
        )

    def _escalated(self, requests: list[Request]) -> tuple[int, int]:
        ids = {r.workflow_id for r in requests}
        gates = self.gateway.get("/v1/gates", limit=1000)["gates"]
        return sum(1 for g in gates if g["workflow_id"] in ids and g["escalation_level"] >= 1), len(
            ids
        )


class PhaseBars:
    """The driver's phases as progress bars on stderr, drawn as the CLI draws its own
    (``sagalog.cli.progress_bars``): redrawn in place on a terminal, a plain line now
    and then in a log."""

    def __init__(self) -> None:
        self.bars = ProgressBars()

    def __call__(self, phase: str, done: int, of: int, final: bool) -> None:
        self.bars.show(phase, done, of)
        if final:
            self.bars.close()


def history(gateway: GatewayClient, workflow_id: str) -> dict[str, Any]:
    return dict(gateway.get(f"/v1/workflows/{workflow_id}"))
