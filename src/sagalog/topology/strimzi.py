"""The topology as Strimzi resources: a ``KafkaTopic`` per declared topic and a
``KafkaUser`` per declared service, with the ACLs ``derive_acls`` derives.

On Kubernetes with the Strimzi operator, topics and users are resources the operator
reconciles, not calls a CLI makes: ``sagalog topology export --strimzi`` renders the
same facts ``topology apply`` would set (partitions, the cluster profile's
replication and min.insync.replicas, retention, every ACL of every principal) for
``kubectl apply`` or a GitOps repository. Each user authenticates with SCRAM-SHA-512;
the operator writes its password to a Secret of the user's name, which the Helm
chart (``kafka.userSecretName``) mounts into that service.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sagalog.errors import TopologyError
from sagalog.flows.model import Flow
from sagalog.topology.acls import AclRule, Operation, PatternKind, ResourceKind, derive_acls
from sagalog.topology.model import Topology

API_VERSION = "kafka.strimzi.io/v1beta2"
CLUSTER_LABEL = "strimzi.io/cluster"
_RESOURCE = {
    ResourceKind.TOPIC: "topic",
    ResourceKind.GROUP: "group",
    ResourceKind.TRANSACTIONAL_ID: "transactionalId",
    ResourceKind.CLUSTER: "cluster",
}
_PATTERN = {PatternKind.LITERAL: "literal", PatternKind.PREFIXED: "prefix"}
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def _operation(operation: Operation) -> str:
    """``DESCRIBE_CONFIGS`` as Strimzi spells it: ``DescribeConfigs``."""
    return "".join(word.capitalize() for word in operation.value.split("_"))


def _resource_name(name: str) -> str:
    """A Kubernetes object name for a topic or a user; the real name stays in the spec."""
    candidate = re.sub(r"[^a-z0-9.-]", "-", name.lower()).strip("-.")
    if not _DNS_NAME.match(candidate):
        raise TopologyError(
            f"'{name}' cannot be made a Kubernetes object name (got '{candidate}'); "
            "rename it with letters, digits, '.' and '-'"
        )
    return candidate


def strimzi_resources(
    topology: Topology,
    flows: Iterable[Flow],
    *,
    cluster: str,
    replication_factor: int,
    min_insync_replicas: int,
    namespace: str | None = None,
) -> list[dict[str, Any]]:
    """``KafkaTopic`` and ``KafkaUser`` resources for Strimzi cluster ``cluster``.

    Raises:
        TopologyError: a name cannot become a Kubernetes object name, or the ACLs
            cannot be derived (see ``derive_acls``).
    """
    topology = topology.on_cluster(
        replication_factor=replication_factor, min_insync_replicas=min_insync_replicas
    )

    def metadata(name: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": {CLUSTER_LABEL: cluster}}
        if namespace:
            meta["namespace"] = namespace
        return meta

    resources: list[dict[str, Any]] = []
    for spec in topology.topics:
        resources.append(
            {
                "apiVersion": API_VERSION,
                "kind": "KafkaTopic",
                "metadata": metadata(_resource_name(spec.name)),
                "spec": {
                    "topicName": spec.name,
                    "partitions": spec.partitions,
                    "replicas": spec.replication_factor or replication_factor,
                    "config": dict(sorted(spec.kafka_config().items())),
                },
            }
        )
    by_principal: dict[str, list[AclRule]] = defaultdict(list)
    for rule in derive_acls(topology, flows):
        by_principal[rule.principal].append(rule)
    for service in topology.services:
        kind, _, user = service.principal.partition(":")
        if kind != "User":
            raise TopologyError(
                f"service '{service.name}' logs in as '{service.principal}': a Strimzi "
                "KafkaUser is a User: principal; declare `principal: User:<name>`"
            )
        resources.append(
            {
                "apiVersion": API_VERSION,
                "kind": "KafkaUser",
                "metadata": metadata(_resource_name(user)),
                "spec": {
                    "authentication": {"type": "scram-sha-512"},
                    "authorization": {
                        "type": "simple",
                        "acls": _acls(by_principal[service.principal]),
                    },
                },
            }
        )
    return resources


def _acls(rules: list[AclRule]) -> list[dict[str, Any]]:
    """One Strimzi ACL per resource and permission, with its operations together."""
    grouped: dict[tuple[str, str, str, str, str], list[str]] = defaultdict(list)
    for rule in rules:
        key = (
            _RESOURCE[rule.resource_type],
            rule.resource_name,
            _PATTERN[rule.pattern_type],
            rule.permission.value.lower(),
            rule.host,
        )
        grouped[key].append(_operation(rule.operation))
    acls = []
    for (kind, name, pattern, permission, host), operations in sorted(grouped.items()):
        resource: dict[str, Any] = {"type": kind}
        if kind != "cluster":
            resource |= {"name": name, "patternType": pattern}
        acls.append(
            {
                "resource": resource,
                "operations": sorted(set(operations)),
                "host": host,
                "type": permission,
            }
        )
    return acls
