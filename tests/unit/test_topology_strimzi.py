"""``sagalog topology export --strimzi``: the topology as Strimzi KafkaTopic and KafkaUser
resources, carrying exactly the topics and the ACLs ``topology apply`` would set."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from sagalog.cli.main import cli
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import TopologyError
from sagalog.flows.loader import load_flows
from sagalog.topology.acls import derive_acls
from sagalog.topology.loader import load_topology
from sagalog.topology.strimzi import strimzi_resources

REPO = Path(__file__).resolve().parents[2]
# What Strimzi's v1beta2 API accepts in a simple authorization's ACL (its CRD enums).
STRIMZI_TYPES = {"topic", "group", "cluster", "transactionalId"}
STRIMZI_PATTERNS = {"literal", "prefix"}
STRIMZI_OPERATIONS = {
    "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
    "AlterConfigs", "DescribeConfigs", "IdempotentWrite", "All",
}  # fmt: skip
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


@pytest.fixture(scope="module")
def project() -> tuple[Any, Any]:
    catalog = SchemaCatalog.load(REPO / "schemas")
    topology = load_topology(REPO / "topology", known_schemas=catalog)
    flows = load_flows(REPO / "topology" / "flows", catalog=catalog, topology=topology)
    return topology, flows


@pytest.fixture(scope="module")
def resources(project: tuple[Any, Any]) -> list[dict[str, Any]]:
    topology, flows = project
    return strimzi_resources(
        topology, flows, cluster="prod", replication_factor=3, min_insync_replicas=2,
        namespace="kafka",
    )  # fmt: skip


def test_a_kafka_topic_per_declared_topic_with_the_cluster_profile(
    project: tuple[Any, Any], resources: list[dict[str, Any]]
) -> None:
    topology, _ = project
    topics = {r["spec"]["topicName"]: r for r in resources if r["kind"] == "KafkaTopic"}
    assert set(topics) == {t.name for t in topology.topics}
    events = topics["procurement.events"]
    assert events["metadata"] == {
        "name": "procurement.events", "labels": {"strimzi.io/cluster": "prod"}, "namespace": "kafka"
    }  # fmt: skip
    assert (events["spec"]["partitions"], events["spec"]["replicas"]) == (6, 3)
    assert events["spec"]["config"]["min.insync.replicas"] == "2"
    assert events["spec"]["config"]["retention.ms"] == "-1"  # forever: the audit trail


def test_every_user_carries_exactly_the_derived_acls(
    project: tuple[Any, Any], resources: list[dict[str, Any]]
) -> None:
    topology, flows = project
    users = {r["metadata"]["name"]: r for r in resources if r["kind"] == "KafkaUser"}
    assert set(users) == {s.name for s in topology.services}
    exported = set()
    for name, user in users.items():
        assert user["spec"]["authentication"] == {"type": "scram-sha-512"}
        for acl in user["spec"]["authorization"]["acls"]:
            resource = acl["resource"]
            assert resource["type"] in STRIMZI_TYPES
            assert resource.get("patternType", "literal") in STRIMZI_PATTERNS
            assert set(acl["operations"]) <= STRIMZI_OPERATIONS
            for operation in acl["operations"]:
                exported.add((f"User:{name}", resource["type"], resource.get("name"), operation))
    derived = {
        (r.principal, r.resource_type.value, r.resource_name, r.operation.value)
        for r in derive_acls(topology, flows)
    }
    to_strimzi = {"TOPIC": "topic", "GROUP": "group", "TRANSACTIONAL_ID": "transactionalId"}
    assert exported == {
        (p, to_strimzi[t], n, "".join(w.capitalize() for w in o.split("_")))
        for p, t, n, o in derived
    }


def test_every_object_name_is_a_kubernetes_name(resources: list[dict[str, Any]]) -> None:
    for resource in resources:
        assert DNS_SUBDOMAIN.match(resource["metadata"]["name"]), resource["metadata"]


def test_a_principal_that_is_not_a_user_is_refused_naming_the_service(
    project: tuple[Any, Any],
) -> None:
    topology, flows = project
    services = [
        s.model_copy(update={"principal": "Group:ops"}) if s.name == "gateway" else s
        for s in topology.services
    ]
    changed = topology.model_copy(update={"services": tuple(services)})
    with pytest.raises(TopologyError, match="service 'gateway' logs in as 'Group:ops'"):
        strimzi_resources(changed, flows, cluster="c", replication_factor=3, min_insync_replicas=2)


def test_the_cli_writes_the_resources(tmp_path: Path) -> None:
    out = tmp_path / "strimzi.yaml"
    result = CliRunner().invoke(
        cli, ["--project-dir", str(REPO), "topology", "export", "--strimzi", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "7 KafkaTopic(s), 11 KafkaUser(s)" in result.output
    assert len(list(yaml.safe_load_all(out.read_text()))) == 18
