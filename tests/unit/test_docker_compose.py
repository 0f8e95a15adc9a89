"""docker-compose.yml cannot run here (no Docker engine). Debian's docker-compose checks
it against the Compose schema and resolves it (`config`, which needs no engine); the
tests below check that it declares the same stack as `sagalog dev up` (images at the
pinned versions, ports, settings) and the whole reference system on it, every service
with a health check on /health/ready and a restart policy that follows the exit-code
contract."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import external_tools
from sagalog.topology.loader import load_topology
from sagalog.topology.services import AgentService


@pytest.fixture(scope="module")
def compose(repo_root: Path) -> dict[str, Any]:
    document = yaml.safe_load((repo_root / "docker-compose.yml").read_text())
    assert isinstance(document, dict)
    return document


@pytest.fixture(scope="module")
def lock(repo_root: Path) -> dict[str, Any]:
    return dict(json.loads((repo_root / "deploy/local/devstack-lock.json").read_text()))


def _declared_agents() -> tuple[str, ...]:
    """Every agent service of the topology (those the flows name on their steps, and any
    services.yaml declares): compose ships each of them."""
    topology = load_topology(Path(__file__).resolve().parents[2] / "topology")
    return tuple(s.name for s in topology.services if isinstance(s, AgentService))


AGENTS = _declared_agents()
SAGALOG_SERVICES = ("saga-tracker", "gateway", *AGENTS)


@pytest.mark.tool("docker-compose")
def test_docker_compose_accepts_and_resolves_the_file(repo_root: Path) -> None:
    tool = external_tools.require("docker-compose")
    env = {**os.environ, "SAGALOG_GATE_SECRET": "s" * 32, "GATEWAY_API_KEYS": "k1,k2"}
    done = subprocess.run(
        [tool, "-f", str(repo_root / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        env=env,
        cwd=repo_root,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    assert set(resolved["services"]) >= set(SAGALOG_SERVICES)
    budget = resolved["services"]["budget-agent"]["environment"]
    assert budget["BUDGET_AGENT_LEDGER_URL"] == "http://ledger:8701"
    assert budget["SAGALOG_BOOTSTRAP_SERVERS"] == "kafka:29092"  # merged from the anchor


@pytest.mark.tool("docker-compose")
def test_without_the_gate_secret_compose_refuses_naming_it(repo_root: Path) -> None:
    tool = external_tools.require("docker-compose")
    env = {k: v for k, v in os.environ.items() if k != "SAGALOG_GATE_SECRET"}
    done = subprocess.run(
        [tool, "-f", str(repo_root / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        env={**env, "GATEWAY_API_KEYS": "k"},
        check=False,
    )
    assert done.returncode != 0 and "SAGALOG_GATE_SECRET" in done.stderr


def test_declares_the_whole_reference_system(compose: dict[str, Any]) -> None:
    from demo.fleet import STANDINS  # the stand-ins of both reference workflows

    standins = {name for names in STANDINS.values() for name in names}
    assert len(AGENTS) == 9
    assert set(compose["services"]) == {
        "kafka",
        "schema-registry",
        "topology",
        *standins,
        *SAGALOG_SERVICES,
    }
    for service in compose["services"].values():
        assert "healthcheck" in service or service["command"][1:3] == ["topology", "apply"]


@pytest.mark.parametrize("name", SAGALOG_SERVICES)
def test_each_service_is_probed_on_ready_and_restarted_as_the_contract_allows(
    compose: dict[str, Any], name: str
) -> None:
    service = compose["services"][name]
    probe = " ".join(service["healthcheck"]["test"])
    assert "/health/ready" in probe
    # compose cannot tell exit codes apart: a bounded on-failure restarts 70 and 3,
    # and stops a 2, 5, 6 or 7 (which no restart cures) after a few tries.
    policy, _, tries = service["restart"].partition(":")
    assert policy == "on-failure" and 1 <= int(tries) <= 10
    assert service["depends_on"]["topology"]["condition"] == "service_completed_successfully"
    assert service["stop_grace_period"] == "30s"


@pytest.mark.parametrize("name", AGENTS)
def test_each_agent_is_the_agent_image_built_for_its_own_package(
    compose: dict[str, Any], repo_root: Path, name: str
) -> None:
    service = compose["services"][name]
    # the image's CMD runs the package (tests/integration/test_installed_wheel.py plays it)
    assert "command" not in service
    build = service["build"]
    assert build["dockerfile"] == "deploy/images/agent.Dockerfile"
    package = build["args"]["AGENT"]
    assert package == name.replace("-", "_")
    assert (repo_root / "services" / package / "__main__.py").is_file()


def test_images_match_the_local_stack_pins(compose: dict[str, Any], lock: dict[str, Any]) -> None:
    kafka, registry = compose["services"]["kafka"], compose["services"]["schema-registry"]
    assert kafka["image"] == f"apache/kafka:{lock['kafka']['version']}"
    assert registry["image"] == f"apicurio/apicurio-registry:{lock['registry'][0]['version']}"


def test_same_ports_as_the_local_stack(compose: dict[str, Any]) -> None:
    assert "9092:9092" in compose["services"]["kafka"]["ports"]
    assert "8081:8080" in compose["services"]["schema-registry"]["ports"]


def test_kafka_runs_kraft_single_node_like_the_local_stack(compose: dict[str, Any]) -> None:
    env = compose["services"]["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka:9093"
    assert "PLAINTEXT://127.0.0.1:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"  # topics come from topology/
    for internal in ("OFFSETS_TOPIC", "TRANSACTION_STATE_LOG", "SHARE_COORDINATOR_STATE_TOPIC"):
        assert env[f"KAFKA_{internal}_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"] == "0"


def test_registry_persists_and_depends_on_kafka(compose: dict[str, Any]) -> None:
    registry = compose["services"]["schema-registry"]
    assert registry["environment"]["APICURIO_DATASOURCE_URL"].startswith("jdbc:h2:file:")
    assert registry["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert {"kafka-data", "registry-data"} <= set(compose["volumes"])
