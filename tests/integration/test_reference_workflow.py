"""The procurement approval end to end: every service its own process, crashes mid-run.

The same fleet and driver as ``make demo``, on throwaway topics: three stand-ins,
the tracker (virtual clock), the gateway and six agents. While requests are in
flight two agents and the tracker are SIGKILLed and restarted. Every workflow must
still end as planned, and every external effect must have happened exactly once,
by the stand-ins' own books, and each workflow's log must verify clean
(``fleet_audit.py``).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from demo.driver import Driver
from demo.fleet import Fleet, FleetConfig
from demo.scenario import FAILING_VENDOR, Plan, build_mix
from sagalog.cli.gateway_client import GatewayClient, GatewayClientSettings

from .fleet_audit import assert_every_log_verifies
from .project import Project
from .tracker_harness import PROCUREMENT

TOPOLOGY = """
ignore: ["*"]
topics:
  procurement.events.{s}:
    partitions: 3
    retention: forever
    schemas: [%s]
  transitions.{s}:
    partitions: 3
    schemas: [sagalog.v1.StateTransition]
  alerts.{s}:
    partitions: 1
    schemas: [sagalog.v1.TrackerAlert]
  deadletter.{s}:
    partitions: 1
    schemas: []
"""


def apply_reference_project(project: Project, *, more_topics: str = "") -> None:
    """The procurement flow on this project's own topics (``TOPOLOGY`` plus
    ``more_topics``, YAML entries under ``topics:``), applied to the cluster."""
    s = project.suffix
    project.write_topology(
        TOPOLOGY.replace("%s", ", ".join([*PROCUREMENT, "sagalog.v1.WebhookReceived"]))
        + more_topics
    )
    # the fleet's agents are named <name>-<suffix>: the flow names them so
    project.write_reference_flow("procurement.v1", agent_suffix=f"-{s}")
    project.apply()


def reference_fleet_config(
    project: Project, run_dir: Path, *, api_key: str, gate_secret: str | None = None, **more: Any
) -> FleetConfig:
    """The procurement fleet on the topics ``apply_reference_project`` declared,
    under ``project``'s settings unless ``more`` names others."""
    s = project.suffix
    return FleetConfig(
        **{
            "run_dir": run_dir,
            "settings": project.settings,
            "gate_secret": gate_secret or secrets.token_urlsafe(32),
            "api_key": api_key,
            "topic": f"procurement.events.{s}",
            "transitions_topic": f"transitions.{s}",
            "alerts_topic": f"alerts.{s}",
            "deadletter_topic": f"deadletter.{s}",
            "tracker_app_id": f"saga-tracker-{s}",
            "agent_suffix": f"-{s}",
            **more,
        }
    )


@pytest.mark.extended
def test_every_workflow_ends_as_planned_and_every_effect_happens_once_despite_crashes(
    project: Project, tmp_path: Path
) -> None:
    """About a minute and a half: the fleet's ten processes start, 40 requests run
    through every path of the mix while three services are SIGKILLed and restarted,
    the gate's escalation and deadline pass on the tracker's virtual clock, and two
    workflows of each plan are audited twice. One fleet for both checks: a shorter
    run would not cross every path of the mix."""
    s = project.suffix
    apply_reference_project(project)
    api_key = secrets.token_urlsafe(16)
    fleet = Fleet(reference_fleet_config(project, tmp_path / "run", api_key=api_key))
    requests = build_mix(f"e2e{s[:6]}", 40, seed=3)
    try:
        fleet.start_all()
        fleet.faults("erp", reject_when={"vendor": FAILING_VENDOR})
        fleet.wait_gateway_ready()
        gateway = GatewayClient(
            GatewayClientSettings(url=fleet.urls["gateway"], api_key=api_key, timeout_s=30)
        )
        driver = Driver(
            settings=project.settings,
            catalog=project.catalog,
            gateway=gateway,
            topic=f"procurement.events.{s}",
            tracker_app_id=f"saga-tracker-{s}",
            requests=requests,
        )
        failure: list[BaseException] = []

        def drive() -> None:
            try:
                driver.run(phase_timeout_s=180)
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)

        runner = threading.Thread(target=drive, daemon=True)
        runner.start()
        # Crash while requests are in flight: once a few reached the gate, kill -9
        # the retrieval agent, the budget agent and the tracker, and start them again.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            at_gate = Counter(driver.states.values())["pending_approval"]
            if 5 <= at_gate < len(requests):
                break
            time.sleep(0.2)
        crashed = ["retrieval_agent", "budget_agent", "tracker-a"]
        for name in crashed:
            fleet.restart(name)
        runner.join(900)
        assert not runner.is_alive(), "the driver did not finish"
        assert not failure, failure
        assert all(fleet.services[name].starts == 2 for name in crashed)
        assert not fleet.dead(), [(d.name, d.tail()) for d in fleet.dead()]

        ends = {r.workflow_id: driver.states.get(r.workflow_id) for r in requests}
        wrong = {
            r.workflow_id: (r.plan, ends[r.workflow_id])
            for r in requests
            if ends[r.workflow_id] != r.expected_end
        }
        assert not wrong, wrong

        # Every effect exactly once, by the stand-ins' own records.
        plans = {r.payload["request_id"]: r.plan for r in requests}
        completed = {rid for rid, plan in plans.items() if plan in (Plan.APPROVE, Plan.ESCALATE)}
        compensated = set(plans) - completed
        ledger = _effects(fleet, "ledger")
        assert Counter(ledger["reserve"]) == Counter(list(plans))  # one reservation each
        assert len(ledger["release"]) == len(compensated)  # one release per compensation
        erp = _effects(fleet, "erp")
        assert Counter(erp["create_po"]) == Counter(completed)
        assert erp.get("cancel_po", []) == []
        mail = _effects(fleet, "mail")
        assert Counter(mail["send"]) == Counter(completed)

        # And each workflow's log verifies clean despite the crashes: two of each plan.
        by_plan: dict[Plan, list[Any]] = {}
        for request in requests:
            by_plan.setdefault(request.plan, []).append(request)
        sample = [request for same in by_plan.values() for request in same[:2]]
        assert_every_log_verifies(project, fleet, api_key, sample)
    finally:
        fleet.stop_all()


def _effects(fleet: Fleet, standin: str) -> dict[str, list[str]]:
    """Applied effects by operation: the request id of each (or the reservation id)."""
    found: dict[str, list[str]] = {}
    for effect in fleet.effects(standin)["effects"].values():
        body = effect["body"]
        found.setdefault(effect["operation"], []).append(
            str(body.get("request_id") or body.get("reservation_id"))
        )
    return found
