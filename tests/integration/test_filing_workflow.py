"""The regulatory filing end to end: every service its own process, crashes mid-run.

The same fleet and driver as ``make demo --workflow filing``, on throwaway topics:
the records, registers and regulator stand-ins, the stand-in model, the tracker
(virtual clock), the gateway and the three filing agents. While filings are being
drafted, the drafting agent and the tracker are SIGKILLed and restarted. Every
filing must still end as planned, and every external effect must have happened
exactly once by the stand-ins' own books: one legal hold per filing, one release per
compensated filing, one submission per filed one, two tool lookups per drafted one.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from pathlib import Path

from demo.filing_driver import FilingDriver
from demo.filing_scenario import FilingPlan, build_filings
from demo.fleet import Fleet
from sagalog.cli.gateway_client import GatewayClient, GatewayClientSettings

from .project import REPO, Project
from .test_reference_workflow import reference_fleet_config

TOPOLOGY = """
ignore: ["*"]
topics:
  filings.events.{s}:
    partitions: 3
    retention: forever
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


def apply_filing_project(project: Project) -> None:
    """The filing flow (v2) on this project's own topics, applied to the cluster."""
    s = project.suffix
    # The topic's event types follow from the flow on it (topology.topic_schemas).
    project.write_topology(TOPOLOGY)
    flows = project.root / "topology" / "flows"
    flows.mkdir()
    flow = (REPO / "topology" / "flows" / "filing.v2.yaml").read_text()
    (flows / "filing.v2.yaml").write_text(
        flow.replace("topic: filings.events", f"topic: filings.events.{s}")
    )
    project.apply()


def test_every_filing_ends_as_planned_and_every_effect_happens_once_despite_crashes(
    project: Project, tmp_path: Path
) -> None:
    s = project.suffix
    apply_filing_project(project)
    api_key = secrets.token_urlsafe(16)
    config = reference_fleet_config(
        project,
        tmp_path / "run",
        api_key=api_key,
        workflows=("filing",),
        filing_topic=f"filings.events.{s}",
        blob_dir=tmp_path / "blobs",
    )
    fleet = Fleet(config)
    filings = build_filings(f"e2e{s[:6]}", 24, seed=3)
    try:
        fleet.start_all()
        fleet.wait_gateway_ready()
        gateway = GatewayClient(
            GatewayClientSettings(url=fleet.urls["gateway"], api_key=api_key, timeout_s=30)
        )
        driver = FilingDriver(
            settings=project.settings,
            catalog=project.catalog,
            gateway=gateway,
            topic=f"filings.events.{s}",
            tracker_app_id=config.tracker_app_id,
            filings=filings,
        )
        failure: list[BaseException] = []

        def drive() -> None:
            try:
                driver.run(phase_timeout_s=180)
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)

        runner = threading.Thread(target=drive, daemon=True)
        runner.start()
        # Crash while filings are drafted: once a few reached the legal review, kill -9
        # the drafting agent and the tracker, and start them again.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            at_review = Counter(driver.states.values())["pending_approval"]
            if 3 <= at_review < len(filings):
                break
            time.sleep(0.2)
        crashed = ["drafting_agent", "tracker-a"]
        for name in crashed:
            fleet.restart(name)
        runner.join(900)
        assert not runner.is_alive(), "the driver did not finish"
        assert not failure, failure
        assert all(fleet.services[name].starts == 2 for name in crashed)
        assert not fleet.dead(), [(d.name, d.tail()) for d in fleet.dead()]

        wrong = {
            f.workflow_id: (f.plan, driver.states.get(f.workflow_id))
            for f in filings
            if driver.states.get(f.workflow_id) != f.expected_end
        }
        assert not wrong, wrong

        # Every effect exactly once, by the stand-ins' own records.
        numbers = {f.payload["filing_number"]: f for f in filings}
        filed = {n for n, f in numbers.items() if f.plan is FilingPlan.FILE}
        drafted = {n for n, f in numbers.items() if f.drafted}
        records = _effects(fleet, "records")
        assert Counter(records["hold"]) == Counter(list(numbers))  # one hold each
        assert len(records["release"]) == len(numbers) - len(filed)  # one per compensation
        assert Counter(_effects(fleet, "regulator")["submit"]) == Counter(filed)
        registers = _effects(fleet, "registers")
        for tool in ("lookup_rule", "company_facts"):  # a repeat reuses its key
            assert len(registers[tool]) == len(drafted), (tool, registers[tool])
        # The model was asked by drafted filings only: a trial filing's call was refused
        # before it was made. A crash may repeat a turn, never skip one.
        served = [c for c in fleet.calls("model") if c[3] == 200]
        assert len(served) >= 3 * len(drafted)
    finally:
        fleet.stop_all()


def _effects(fleet: Fleet, standin: str) -> dict[str, list[str]]:
    """Applied effects by operation: the filing number, hold id or query of each."""
    found: dict[str, list[str]] = {}
    for effect in fleet.effects(standin)["effects"].values():
        body = effect["body"]
        found.setdefault(effect["operation"], []).append(
            str(body.get("filing_number") or body.get("hold_id") or body.get("query"))
        )
    return found
