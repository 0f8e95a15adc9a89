"""The procurement fleet run with this run's own requester addresses, one of them
erased afterwards, and the readers' checks on it: what the crypto-shredding test
(``test_personal_data``) and the key-rotation test (``test_key_rotation``) share.

The fleet and driver of ``make demo`` run a dozen requests on throwaway topics, every
service sharing the test's key file; four requesters (``person<n>.<suffix>``), so an
erased one has several workflows and the others stay to be read in clear.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from demo.driver import Driver
from demo.fleet import Fleet
from demo.scenario import FAILING_VENDOR, Plan, Request, build_mix
from sagalog.cli.gateway_client import GatewayClient, GatewayClientSettings
from sagalog.personal import ERASED
from sagalog.settings import ClientSettings

from .project import REPO, Project
from .test_reference_workflow import apply_reference_project, reference_fleet_config

ERASURES = """
  erasures.{s}:
    partitions: 1
    retention: forever
    schemas: [sagalog.v1.SubjectErased]
"""


@dataclass(frozen=True)
class RequesterRun:
    """What a fleet run left: its requests, the requester to erase, where it ran, and
    the orders the ERP received (the purchasing agent reveals the address to it)."""

    requests: list[Request]
    erased: str
    topic: str
    app_id: str
    erp_orders: list[dict[str, Any]]


def run_requesters(
    project: Project,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: ClientSettings,
    *,
    prefix: str,
    seed: int,
) -> RequesterRun:
    """Run a dozen requests through the whole fleet under ``settings``' keys and wait
    until each ends as its plan says (the ERP refuses the failing vendor, quoting the
    request, address and all); the erasure topic is made beside the others."""
    s = project.suffix
    monkeypatch.setenv("PYTHONPATH", str(REPO / "services"))
    apply_reference_project(project, more_topics=ERASURES.replace("{s}", s))
    topic, app_id = f"procurement.events.{s}", f"saga-tracker-{s}"
    requests = build_mix(f"{prefix}{s[:6]}", 12, seed=seed)
    for n, request in enumerate(requests):  # addresses of this run only
        request.payload["requester"] = f"person{n % 4}.{s}@example.com"
    erased = next(r for r in requests if r.plan is Plan.APPROVE).payload["requester"]
    api_key, gate_secret = secrets.token_urlsafe(16), secrets.token_urlsafe(32)
    monkeypatch.setenv("SAGALOG_TRACKER_GATE_SECRET", gate_secret)  # the replay checks gates
    fleet = Fleet(
        reference_fleet_config(
            project, tmp_path / "run", api_key=api_key, gate_secret=gate_secret, settings=settings
        )
    )
    try:
        fleet.start_all()
        fleet.faults("erp", reject_when={"vendor": FAILING_VENDOR})
        fleet.wait_gateway_ready()
        gateway = GatewayClient(
            GatewayClientSettings(url=fleet.urls["gateway"], api_key=api_key, timeout_s=30)
        )
        driver = Driver(
            settings=settings,
            catalog=project.catalog,
            gateway=gateway,
            topic=topic,
            tracker_app_id=app_id,
            requests=requests,
        )
        driver.run(phase_timeout_s=180)
        wrong = {
            r.workflow_id: driver.states.get(r.workflow_id)
            for r in requests
            if driver.states.get(r.workflow_id) != r.expected_end
        }
        assert not wrong, wrong
        orders = [e["body"] for e in fleet.effects("erp")["effects"].values()]
    finally:
        fleet.stop_all()
    return RequesterRun(requests, erased, topic, app_id, orders)


def erase(project: Project, address: str, *, reason: str) -> None:
    """``sagalog erase`` of one requester, recorded on the run's erasure topic."""
    result = project.sagalog(
        "erase",
        address,
        "--reason",
        reason,
        "--by",
        "dpo",
        "--topic",
        f"erasures.{project.suffix}",
    )
    assert result.exit_code == 0, result.output
    assert "1 key(s) deleted" in result.output


def tailed_requests(project: Project, topic: str) -> dict[str, dict[str, Any]]:
    """``sagalog tail`` of the run's topic: request id -> its RequestSubmitted payload."""
    tailed = project.sagalog("tail", topic, "--idle-timeout", "3")
    assert tailed.exit_code == 0, tailed.output
    return {
        r["payload"]["request_id"]: r["payload"]
        for r in map(json.loads, tailed.stdout.splitlines())
        if r.get("type") == "procurement.v1.RequestSubmitted"
    }


def shown_requester(run: RequesterRun, request: Request) -> str:
    """What a reader with the keys must show as ``request``'s requester after the
    erasure: ``ERASED`` for the erased one, the address for everyone else."""
    want = str(request.payload["requester"])
    return ERASED if want == run.erased else want


def audit_the_erased(project: Project, run: RequesterRun) -> None:
    """``sagalog audit --verify`` of every workflow of the erased requester: each
    verifies, shows the address as erased and holds no part of it, not even the name
    before the @ (what an error quoting the first bytes of an answer keeps of it)."""
    name = run.erased.split("@")[0]
    for request in (r for r in run.requests if r.payload["requester"] == run.erased):
        audited = project.sagalog(
            "audit",
            request.workflow_id,
            "--verify",
            "--tracker-app-id",
            run.app_id,
            "--transitions-topic",
            f"transitions.{project.suffix}",
            "--json",
        )
        assert audited.exit_code == 0, audited.output
        assert json.loads(audited.stdout)["verification"]["ok"] is True
        at = audited.output.find(name)
        assert at < 0, (request.plan, audited.output[max(0, at - 1500) : at + 200])
        assert ERASED in audited.stdout
