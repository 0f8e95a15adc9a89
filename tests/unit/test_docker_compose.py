"""docker-compose.yml cannot run here (no Docker engine); check that it declares the
same stack as `sagalog dev up`: services, images at the pinned versions, ports, settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml


@pytest.fixture(scope="module")
def compose(repo_root: Path) -> dict[str, Any]:
    document = yaml.safe_load((repo_root / "docker-compose.yml").read_text())
    assert isinstance(document, dict)
    return document


@pytest.fixture(scope="module")
def lock(repo_root: Path) -> dict[str, Any]:
    return dict(json.loads((repo_root / "deploy/local/devstack-lock.json").read_text()))


def test_declares_kafka_and_registry(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"kafka", "schema-registry"}
    for service in compose["services"].values():
        assert "healthcheck" in service


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
    assert set(compose["volumes"]) == {"kafka-data", "registry-data"}
