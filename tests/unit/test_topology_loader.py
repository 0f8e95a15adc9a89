"""Malformed topology files are refused with the file, the entry and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.durations import duration_ms
from sagalog.errors import TopologyError
from sagalog.topology.loader import load_topology


def load(tmp_path: Path, text: str, catalog: SchemaCatalog | None = None) -> object:
    (tmp_path / "topics.yaml").write_text(text)
    return load_topology(tmp_path, known_schemas=catalog)


def test_repository_topology_loads(repo_root: Path, catalog: SchemaCatalog) -> None:
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    events = topology.topic("procurement.events")
    assert events is not None and events.kafka_config()["retention.ms"] == "-1"
    assert "procurement.v1.RequestSubmitted" in events.schemas


def test_repository_services_are_those_declared_before_agents_were_derived(
    repo_root: Path, catalog: SchemaCatalog
) -> None:
    """An agent named on a flow step needs no entry in services.yaml; every reader of
    the services (ACLs, topology plan, dev users, compose and Helm checks) must see the
    set the repository declared by hand before (the fixture, from that commit)."""
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    derived = sorted(
        (s.model_dump(mode="json") for s in topology.services), key=lambda d: d["name"]
    )
    fixture = repo_root / "tests" / "unit" / "fixtures" / "repository_services.json"
    assert derived == json.loads(fixture.read_text())


def test_an_agent_a_flow_names_is_a_service_unless_declared(tmp_path: Path) -> None:
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "orders.v1.yaml").write_text(
        """
flow: orders
version: 1
topic: orders.events
starts_on: shop.v1.OrderPlaced
deadline: 1d
steps:
  - {name: pay, agent: pay-agent, starts_on: shop.v1.OrderPlaced,
     completes_on: shop.v1.Paid, timeout: 5m, effect: none}
  - {name: ship, agent: ship-agent, after: pay, completes_on: shop.v1.Shipped,
     timeout: 5m, effect: none}
"""
    )
    topology = load(
        tmp_path,
        """
topics: {orders.events: {}}
services:
  ship-agent: {kind: agent, principal: "User:shipping"}
""",
    )
    by_name = {s.name: s for s in topology.services}  # type: ignore[attr-defined]
    assert by_name["pay-agent"].kind == "agent"
    assert by_name["pay-agent"].group == "sagalog-agent-pay-agent"
    assert by_name["ship-agent"].principal == "User:shipping"


def test_defaults_apply_and_topics_override(tmp_path: Path) -> None:
    topology = load(
        tmp_path,
        """
defaults: {partitions: 4, config: {min.insync.replicas: 2}}
topics:
  a.events: {}
  b.events: {partitions: 2, retention: 12h, config: {segment.ms: 3600000}}
""",
    )
    a, b = topology.topics  # type: ignore[attr-defined]
    assert (a.partitions, b.partitions) == (4, 2)
    assert b.kafka_config() == {
        "min.insync.replicas": "2",
        "segment.ms": "3600000",
        "cleanup.policy": "delete",
        "retention.ms": "43200000",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "topics:\n  a.events: {partitions: 0}",
            "topic 'a.events', field 'partitions': Input should be greater than 0 (got 0)",
        ),
        (
            "topics:\n  a.events: {partitons: 3}",
            "topics.yaml, topic 'a.events', field 'partitons': unknown field",
        ),
        (
            "topics:\n  a.events: {retention: soon}",
            "topic 'a.events', field 'retention': Value error, 'soon' is not a duration",
        ),
        (
            "topics:\n  a.events: {cleanup_policy: keep}",
            "topics.yaml, topic 'a.events', field 'cleanup_policy'",
        ),
        ("topics:\n  'bad name!': {}", "topics.yaml, topic 'bad name!', field 'name'"),
        ("topic:\n  a.events: {}", "topics.yaml: unknown top-level key(s) ['topic']"),
        ("topics: [a, b]", "topics.yaml: 'topics' must be a mapping"),
        ("topics:\n  a.events: {partitions: 3\n", "topics.yaml: not valid YAML at line"),
        ("defaults: {partitions: many}\ntopics: {}", "topics.yaml, defaults, field 'partitions'"),
    ],
)
def test_malformed_files_name_file_entry_and_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TopologyError) as caught:
        load(tmp_path, text)
    assert message in str(caught.value)


def test_unknown_schema_is_named(tmp_path: Path, catalog: SchemaCatalog) -> None:
    with pytest.raises(
        TopologyError,
        match=r"topic 'a.events', field 'schemas': no schema "
        r"declares event type 'shop.v1.Nope'",
    ):
        load(tmp_path, "topics:\n  a.events: {schemas: [shop.v1.Nope]}", catalog)


def test_duplicate_topic_across_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("topics:\n  x.events: {}")
    (tmp_path / "b.yaml").write_text("topics:\n  x.events: {}")
    with pytest.raises(
        TopologyError, match=r"b.yaml, topic 'x.events': already declared in .*a.yaml"
    ):
        load_topology(tmp_path)


def test_durations() -> None:
    assert duration_ms("30d") == 30 * 86_400_000
    assert duration_ms("500ms") == 500
    assert duration_ms("forever") == -1
    assert duration_ms(1000) == 1000
    with pytest.raises(ValueError, match="not a duration"):
        duration_ms("3 weeks")
