"""The difference between the topology files and the cluster, as a pure function.

``plan`` decides; ``apply`` only carries out what it decided. Changes that lose data
or break ordering are marked ``needs_force`` with the reason, so the same plan both
explains a refusal and, with ``--force``, is what runs:

- deleting a topic loses its events: the audit trail and the replay source;
- fewer partitions is impossible in Kafka except by deleting and recreating the topic;
- more partitions remaps keys, so a running workflow's next events land in another
  partition than its history and lose their total order.
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sagalog.contracts.catalog import same_schema
from sagalog.contracts.registry import COMPATIBILITY_RULE
from sagalog.contracts.subjects import subject_for
from sagalog.topology.acls import AclRule
from sagalog.topology.model import TopicSpec, Topology


@dataclass(frozen=True)
class TopicState:
    """A topic as the cluster reports it (configs: only the ones the plan compares)."""

    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SubjectState:
    """A registry subject's latest schema and its own compatibility rule."""

    definition: Any | None
    compatibility: str | None


class ChangeKind(enum.StrEnum):
    CREATE_TOPIC = "create topic"
    ADD_PARTITIONS = "add partitions"
    RECREATE_TOPIC = "recreate topic"
    ALTER_CONFIG = "alter config"
    DELETE_TOPIC = "delete topic"
    SET_COMPATIBILITY = "set compatibility"
    REGISTER_SCHEMA = "register schema"
    CREATE_ACL = "create acl"
    DELETE_ACL = "delete acl"
    UNSUPPORTED = "cannot apply"


_SYMBOL = {
    ChangeKind.CREATE_TOPIC: "+",
    ChangeKind.REGISTER_SCHEMA: "+",
    ChangeKind.CREATE_ACL: "+",
    ChangeKind.DELETE_TOPIC: "-",
    ChangeKind.DELETE_ACL: "-",
    ChangeKind.RECREATE_TOPIC: "-/+",
    ChangeKind.UNSUPPORTED: "!",
}


@dataclass(frozen=True)
class Change:
    """One step towards the declared topology."""

    kind: ChangeKind
    target: str
    detail: str
    needs_force: bool = False
    reason: str = ""
    spec: TopicSpec | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    event_type: str | None = None
    acl: AclRule | None = None

    def describe(self) -> str:
        line = f"{_SYMBOL.get(self.kind, '~')} {self.kind} {self.target}: {self.detail}"
        return f"{line}\n    {self.reason}" if self.reason else line


@dataclass(frozen=True)
class Plan:
    """``notes``: what was not planned and why (ACLs on a cluster without an authorizer)."""

    changes: tuple[Change, ...]
    notes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.changes

    @property
    def refused_without_force(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.needs_force)


def plan_topics(topology: Topology, cluster: Mapping[str, TopicState]) -> list[Change]:
    """Topic changes that make ``cluster`` match ``topology``."""
    changes: list[Change] = []
    for spec in topology.topics:
        state = cluster.get(spec.name)
        if state is None:
            rf = spec.replication_factor or "broker default"
            changes.append(
                Change(
                    ChangeKind.CREATE_TOPIC,
                    spec.name,
                    f"{spec.partitions} partitions, replication {rf}, "
                    + ", ".join(f"{k}={v}" for k, v in sorted(spec.kafka_config().items())),
                    spec=spec,
                )
            )
            continue
        if spec.partitions < state.partitions:
            changes.append(
                Change(
                    ChangeKind.RECREATE_TOPIC,
                    spec.name,
                    f"partitions {state.partitions} -> {spec.partitions}",
                    needs_force=True,
                    reason="Kafka cannot remove partitions: the topic would be deleted and "
                    "recreated, losing every event in it.",
                    spec=spec,
                )
            )
            continue
        if spec.partitions > state.partitions:
            changes.append(
                Change(
                    ChangeKind.ADD_PARTITIONS,
                    spec.name,
                    f"partitions {state.partitions} -> {spec.partitions}",
                    needs_force=True,
                    reason="more partitions remap keys: running workflows' next events would land "
                    "in another partition than their history and lose their order.",
                    spec=spec,
                )
            )
        if spec.replication_factor and spec.replication_factor != state.replication_factor:
            changes.append(
                Change(
                    ChangeKind.UNSUPPORTED,
                    spec.name,
                    f"replication factor {state.replication_factor} -> {spec.replication_factor}",
                    reason="changing replication is a partition reassignment; run "
                    "kafka-reassign-partitions, then rerun the plan.",
                )
            )
        differing = {
            key: value
            for key, value in spec.kafka_config().items()
            if state.config.get(key) != value
        }
        if differing:
            changes.append(
                Change(
                    ChangeKind.ALTER_CONFIG,
                    spec.name,
                    ", ".join(
                        f"{k}: {state.config.get(k, '(unset)')} -> {v}"
                        for k, v in sorted(differing.items())
                    ),
                    config=differing,
                )
            )
    declared = {t.name for t in topology.topics}
    for name in sorted(cluster):
        if name in declared or any(fnmatch.fnmatchcase(name, p) for p in topology.ignore):
            continue
        changes.append(
            Change(
                ChangeKind.DELETE_TOPIC,
                name,
                "not declared in the topology",
                needs_force=True,
                reason="deleting a topic loses its events (the audit trail); declare it, add it "
                "to 'ignore', or rerun with --force to delete it.",
            )
        )
    return changes


def plan_schemas(
    topology: Topology,
    subjects: Mapping[str, SubjectState],
    catalog: Mapping[str, Any],
) -> list[Change]:
    """Registry changes: each topic's event types registered under the sagalog rule.

    ``catalog`` maps event type to an object with ``definition`` (an ``EventSchema``).
    """
    changes: list[Change] = []
    for spec in topology.topics:
        for event_type in spec.schemas:
            subject = subject_for(spec.name, event_type)
            state = subjects.get(subject, SubjectState(definition=None, compatibility=None))
            if state.compatibility != COMPATIBILITY_RULE:
                changes.append(
                    Change(
                        ChangeKind.SET_COMPATIBILITY,
                        subject,
                        f"{state.compatibility or '(inherited)'} -> {COMPATIBILITY_RULE}",
                        event_type=event_type,
                    )
                )
            definition = catalog[event_type].definition
            if state.definition is None:
                changes.append(
                    Change(
                        ChangeKind.REGISTER_SCHEMA,
                        subject,
                        f"{event_type} (first version)",
                        event_type=event_type,
                    )
                )
            elif not same_schema(state.definition, definition):
                changes.append(
                    Change(
                        ChangeKind.REGISTER_SCHEMA,
                        subject,
                        f"{event_type} (new version)",
                        event_type=event_type,
                    )
                )
    return changes
