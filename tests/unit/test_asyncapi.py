"""``sagalog topology asyncapi``: the generated AsyncAPI 3.0 document, validated by the
official parser (``@asyncapi/parser``) with its Avro schema parser, run by Node.js.

``.ci/ensure-tools`` installs the parser (``npm ci`` in tests/asyncapi); without Node.js
these tests skip and say why.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import external_tools
from sagalog.cli.main import cli
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.loader import load_flows
from sagalog.topology.asyncapi import asyncapi_document
from sagalog.topology.loader import load_topology

REPO = Path(__file__).resolve().parents[2]
CHECKER = REPO / "tests" / "asyncapi"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    catalog = SchemaCatalog.load(REPO / "schemas")
    topology = load_topology(REPO / "topology", known_schemas=catalog)
    flows = load_flows(REPO / "topology" / "flows", catalog=catalog, topology=topology)
    return asyncapi_document(
        topology, flows, catalog, title="t", version="1", bootstrap_servers="k:9092"
    )


def parse(document: dict[str, Any], tmp_path: Path) -> tuple[int, dict[str, Any]]:
    node = external_tools.require(external_tools.ASYNCAPI)
    path = tmp_path / "asyncapi.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    done = subprocess.run(
        [node, str(CHECKER / "validate.mjs"), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.tool(external_tools.ASYNCAPI)
def test_the_official_parser_accepts_the_generated_document(
    document: dict[str, Any], tmp_path: Path
) -> None:
    code, result = parse(document, tmp_path)
    assert code == 0 and result["valid"], result["errors"]
    assert result["errors"] == [] and result["warnings"] == []
    assert (result["channels"], result["messages"]) == (7, 31)


@pytest.mark.tool(external_tools.ASYNCAPI)
def test_the_check_fails_on_a_broken_avro_payload(document: dict[str, Any], tmp_path: Path) -> None:
    """The parser reads the Avro schemas too: the check can fail, and names the place."""
    broken = copy.deepcopy(document)
    payload = broken["components"]["messages"]["procurement.v1.BudgetReserved"]["payload"]
    del payload["schema"]["fields"]  # an Avro record must have fields
    code, result = parse(broken, tmp_path)
    assert code == 1 and not result["valid"]
    assert any("BudgetReserved" in error for error in result["errors"]), result["errors"]


def test_operations_follow_the_flows_and_the_platform_services(document: dict[str, Any]) -> None:
    ops = document["operations"]
    budget_in = ops["budget-agent_receive_procurement_events"]
    assert budget_in["action"] == "receive"
    received = {m["$ref"].rsplit("/", 1)[-1] for m in budget_in["messages"]}
    # its step starts on RiskScored; its compensation on the tracker's request
    assert received == {"procurement_v1_RiskScored", "sagalog_v1_CompensationRequested"}
    budget_out = {
        m["$ref"].rsplit("/", 1)[-1]
        for m in ops["budget-agent_send_procurement_events"]["messages"]
    }
    assert {"procurement_v1_BudgetReserved", "procurement_v1_BudgetReleased"} <= budget_out
    assert ops["saga-tracker_send_sagalog_transitions"]["messages"] == [
        {"$ref": "#/channels/sagalog_transitions/messages/sagalog_v1_StateTransition"}
    ]
    gateway = {
        m["$ref"].rsplit("/", 1)[-1] for m in ops["gateway_send_procurement_events"]["messages"]
    }
    assert gateway == {"sagalog_v1_GateDecided", "sagalog_v1_WebhookReceived"}


def test_each_message_carries_its_avro_schema_and_the_cloudevents_headers(
    document: dict[str, Any],
) -> None:
    message = document["components"]["messages"]["sagalog.v1.StepFailed"]
    assert message["payload"]["schemaFormat"].startswith("application/vnd.apache.avro")
    assert message["payload"]["schema"]["name"] == "StepFailed"
    assert "ce_type" in message["headers"]["required"]


def test_the_cli_writes_yaml_or_json(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "api.json"
    result = runner.invoke(
        cli, ["--project-dir", str(REPO), "topology", "asyncapi", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "31 message(s)" in result.output
    assert json.loads(out.read_text())["asyncapi"] == "3.0.0"
    shown = runner.invoke(cli, ["--project-dir", str(REPO), "topology", "asyncapi"])
    assert yaml.safe_load(shown.output)["asyncapi"] == "3.0.0"
