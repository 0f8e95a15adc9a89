"""Every workflow of a reference fleet's run audited as a person would: ``sagalog audit
--verify``, from the changelog alone and through the gateway.

The reference run (``test_reference_workflow``) ends with it, so that one fleet,
crashed mid-run, shows both that every workflow ends as planned and that every
log still verifies: the agents link to what they consumed, and the gateway and
the tracker stamp the chain, across the batches the crashes made them read again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from click.testing import CliRunner, Result

from demo.fleet import Fleet
from demo.scenario import Request
from sagalog.cli.main import cli

from .project import Project

SUBMITTED = "procurement.v1.RequestSubmitted"
GATE_DECIDED = "sagalog.v1.GateDecided"


def assert_every_log_verifies(
    project: Project, fleet: Fleet, api_key: str, requests: Iterable[Request]
) -> None:
    """Each request's workflow audited twice (changelog, gateway): clean, in its planned
    end, its decisions chained, and the agents' outputs linked to their causes."""
    s = project.suffix

    def audit(workflow_id: str, *gateway_args: str) -> Result:
        return CliRunner().invoke(
            cli,
            [
                "--bootstrap-servers",
                project.settings.bootstrap_servers,
                "--schema-registry-url",
                project.settings.schema_registry_url,
                "--project-dir",
                str(project.root),
                "audit",
                workflow_id,
                "--verify",
                "--json",
                "--tracker-app-id",
                f"saga-tracker-{s}",
                "--transitions-topic",
                f"transitions.{s}",
                *gateway_args,
            ],
            catch_exceptions=False,
        )

    def settled(workflow_id: str, expected: str, *args: str) -> tuple[Result, dict[str, Any]]:
        """The audit once the record names the end (it is stored after its transition)."""
        deadline = time.monotonic() + 30
        while True:
            result = audit(workflow_id, *args)
            body = json.loads(result.stdout)
            if body["workflow"]["state"] == expected or time.monotonic() > deadline:
                return result, body
            time.sleep(0.5)

    audited = list(requests)
    linked = 0
    for request in audited:
        for args in (
            ("--no-gateway",),
            ("--gateway-url", fleet.urls["gateway"], "--api-key", api_key),
        ):
            result, body = settled(request.workflow_id, request.expected_end, *args)
            assert result.exit_code == 0, (request.plan, body["verification"])
            events = [h for h in body["history"] if h["kind"] == "event"]
            assert events[0]["type"] == SUBMITTED
            assert body["workflow"]["state"] == request.expected_end
            linked += sum(1 for e in events if "sagalog_prev_hash" in e["headers"])
            decided = [e for e in events if e["type"] == GATE_DECIDED]
            assert all("sagalog_chain" in e["headers"] for e in decided)
    assert linked > 4 * len(audited)  # the agents' outputs link to their causes
