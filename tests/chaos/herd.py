"""The thundering herd: thousands of workflows stalled on a dependency outage, then it recovers.

The ledger (the budget agent's dependency, called before the human gate, so no one
has to decide anything for the measured part) goes down before the round's
workflows are submitted. Every one of them stalls at ``reserve_budget``: the budget
agents' breakers trip and the events wait in the retry topic, probing now and then.
Then the ledger comes back, and the herd is let loose on it. Three budget agent
instances share a global rate limit of ``rate`` calls per second (by partition
share) and their breakers; a tenth of the workflows are high-priority.

The ledger's own call log (every call with its arrival time) is the evidence, judged
by ``herd_checker.judge_herd``: the rate in any window after the recovery, the probes
during the outage and at the recovery, and who passed first. The budget agents are
set back to the fleet's usual one instance without limits at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from demo.scenario import Request

from .herd_checker import Call, HerdLimits, Pass, judge_herd

if TYPE_CHECKING:
    from .harness import ChaosRun

Injections = list[tuple[float, float]]
BUDGET = "budget_agent"
UPSTREAM = frozenset({None, "classify_request", "retrieve_policies", "score_risk"})
USUAL_ENV = {"BUDGET_AGENT_TRANSACTION_TIMEOUT_S": "15"}  # as ChaosRun.setup starts it


@dataclass
class ThunderingHerd:
    """The scenario's settings and what one run of it recorded (its outage's times)."""

    rate: float = 40.0
    instances: Sequence[str] = ("a", "b", "c")
    failure_threshold: int = 5
    open_for_s: float = 5.0
    high_every: int = 10
    """Every ``high_every``-th workflow is high-priority, the rest normal."""
    hold_s: float = 8.0
    """How long the outage lasts after every workflow stalled: probes keep failing."""
    stall_timeout_s: float = 300.0
    outage: tuple[float, float] | None = None
    exits_before: int = 0
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def limits(self) -> HerdLimits:
        return HerdLimits(
            rate=self.rate,
            open_for_s=self.open_for_s,
            instances=len(self.instances),
            failure_threshold=self.failure_threshold,
        )

    def env(self) -> dict[str, str]:
        return {
            **USUAL_ENV,
            "BUDGET_AGENT_RATE_LIMITS": json.dumps({"ledger": self.rate}),
            "BUDGET_AGENT_BREAKER_FAILURE_THRESHOLD": str(self.failure_threshold),
            "BUDGET_AGENT_BREAKER_OPEN_FOR_S": str(self.open_for_s),
        }

    # -- the round's hooks (see harness.Fault) ---------------------------------------------

    def mix(self, requests: list[Request]) -> list[Request]:
        """The round's requests with every ``high_every``-th one HIGH and the rest NORMAL."""
        mixed = []
        for n, request in enumerate(requests):
            priority = "HIGH" if n % self.high_every == 0 else "NORMAL"
            payload = {**request.payload, "priority": priority}
            mixed.append(replace(request, payload=payload, priority=priority))
        return mixed

    def inject(self, run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
        """Down before the first workflow gets there; up once all stalled and probes failed.

        The usual budget agent stops first (its work waits in Kafka), so that only the
        configured instances ever call the ledger in its outage.
        """
        self.outage = None
        self.exits_before = len(run.supervisor.exits)
        _budget_agents(run, (), {})
        run.fleet.faults("ledger", outage=True)
        started, started_wall = time.monotonic(), time.time()
        _budget_agents(run, self.instances, self.env())
        ids = [r.workflow_id for r in run.current]
        arrived = run.wait(lambda: _upstream(run, ids) == 0, self.stall_timeout_s)
        if not arrived:
            run.report(
                f"chaos: thundering herd: {_upstream(run, ids)} of {len(ids)} workflows had "
                f"not reached reserve_budget after {self.stall_timeout_s:g}s; recovering anyway"
            )
        time.sleep(self.hold_s)
        run.fleet.faults("ledger", outage=False)
        self.outage = (started_wall, time.time())
        run.report(
            f"chaos: thundering herd: ledger down {self.outage[1] - started_wall:.0f}s, "
            f"{_stalled(run, ids)} workflows stalled on it; recovered"
        )
        return [(started, time.monotonic())]

    def verify(self, run: ChaosRun, requests: list[Request]) -> list[str]:
        """Judge the herd from the ledger's call log; set the budget agents back."""
        try:
            return self._judge(run, requests)
        finally:
            _budget_agents(run, ("a",), USUAL_ENV)

    def _judge(self, run: ChaosRun, requests: list[Request]) -> list[str]:
        if self.outage is None:
            return ["the ledger never recovered (the injector failed)"]
        calls = [
            Call(at, operation, key, status)
            for at, operation, key, status in _get(run, "/calls")["calls"]
            if at >= self.outage[0]
        ]
        applied = _get(run, "/effects")["effects"].values()
        reserved_at = {
            str(e["body"].get("request_id")): float(e["applied_at"])
            for e in applied
            if e["operation"] == "reserve"
        }
        passes = [
            Pass(r.workflow_id, r.priority == "HIGH", reserved_at[rid])
            for r in requests
            if (rid := str(r.payload["request_id"])) in reserved_at
        ]
        figures = judge_herd(calls, passes, outage=self.outage, limits=self.limits)
        exits = run.supervisor.exits[self.exits_before :]
        states = run.recorder.states([r.workflow_id for r in requests])
        off_plan = [r.workflow_id for r in requests if states.get(r.workflow_id) != r.expected_end]
        self.figures = {
            "dependency_peak": f"{figures.peak.get('1s')}/{figures.allowed.get('1s', 0):.0f}",
            "p50_high_normal": f"{figures.p50_high_s}/{figures.p50_normal_s}",
            **figures.summary(self.rate),
            "outage_s": round(self.outage[1] - self.outage[0], 1),
            "workflows_high": sum(r.priority == "HIGH" for r in requests),
            "budget_agent_exits": [f"{n}:{rc}" for n, rc in exits if n.startswith(BUDGET)],
            "detail": {k: v for k, v in vars(figures).items() if k != "failures"},
        }
        run.figures.update(self.figures)
        failures = list(figures.failures)
        if off_plan:
            failures.append(
                f"{len(off_plan)} of {len(requests)} workflows did not end as planned: "
                f"{off_plan[:5]}"
            )
        return failures


def _upstream(run: ChaosRun, ids: list[str]) -> int:
    """Workflows not at the ledger yet: unseen, or at a step before reserve_budget."""
    return sum(
        1
        for workflow_id in ids
        if (latest := run.recorder.latest(workflow_id)) is None or latest.step in UPSTREAM
    )


def _stalled(run: ChaosRun, ids: list[str]) -> int:
    """Workflows waiting on the ledger: at reserve_budget, not past it."""
    count = 0
    for workflow_id in ids:
        latest = run.recorder.latest(workflow_id)
        if latest is not None and latest.to_state == "running" and latest.step == "reserve_budget":
            count += 1
    return count


def _budget_agents(run: ChaosRun, instances: Sequence[str], env: dict[str, str]) -> None:
    """Stop every budget agent instance (SIGTERM), start ``instances`` with ``env``."""
    with run.supervisor.lock:
        for name, service in list(run.fleet.services.items()):
            if name == BUDGET or name.startswith(f"{BUDGET}-"):
                run.supervisor.held.add(name)
                service.stop()
        with _environment(env):
            for instance in instances:
                service = run.fleet.start_agent(BUDGET, instance)
                run.supervisor.held.discard(service.name)


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in os.environ while services start (they copy it), then as before."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _get(run: ChaosRun, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{run.fleet.urls['ledger']}{path}", timeout=30) as reply:
        return dict(json.load(reply))
