"""Topics as frozen, validated objects.

A topic's declaration is the whole truth about it: partition count, replication,
retention, cleanup policy, any other Kafka topic setting, and the event types it
carries (which decides the registry subjects). Frozen, because a plan computed from
a topology must not change under it.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator

from sagalog.durations import DurationMs
from sagalog.topology.services import ServiceSpec

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def _config_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _config_values(value: Any) -> Any:
    """Kafka configs are strings; YAML gives ints and bools too."""
    return (
        {str(k): _config_value(v) for k, v in value.items()} if isinstance(value, dict) else value
    )


class TopicDefaults(BaseModel):
    """Values every topic takes unless it says otherwise."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partitions: PositiveInt = 6
    replication_factor: PositiveInt | None = None
    config: dict[str, str] = Field(default_factory=dict)

    _stringify = field_validator("config", mode="before")(_config_values)


class TopicSpec(BaseModel):
    """One declared topic."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    partitions: PositiveInt
    replication_factor: PositiveInt | None = Field(
        default=None, description="None: the broker's default.replication.factor."
    )
    retention: DurationMs | None = Field(
        default=None, description="retention.ms; None: broker default."
    )
    cleanup_policy: Literal["delete", "compact", "compact,delete"] = "delete"
    config: dict[str, str] = Field(default_factory=dict)
    schemas: tuple[str, ...] = ()

    @field_validator("name")
    @classmethod
    def _legal_name(cls, value: str) -> str:
        if not _TOPIC_NAME.match(value) or value in (".", ".."):
            raise ValueError(
                "a topic name is 1-249 characters of letters, digits, '.', '_' and '-'"
            )
        return value

    _stringify = field_validator("config", mode="before")(_config_values)

    def kafka_config(self) -> dict[str, str]:
        """The Kafka topic configs this declaration sets (and the plan compares)."""
        config = dict(self.config)
        config["cleanup.policy"] = self.cleanup_policy
        if self.retention is not None:
            config["retention.ms"] = str(self.retention)
        return config


class Topology(BaseModel):
    """Every declared topic, the cluster topics the plan leaves alone, and the services
    whose principals' ACLs it manages (none declared: ACLs are not managed)."""

    model_config = ConfigDict(frozen=True)

    topics: tuple[TopicSpec, ...]
    ignore: tuple[str, ...] = ()
    services: tuple[ServiceSpec, ...] = ()
    sources: tuple[str, ...] = ()

    def topic(self, name: str) -> TopicSpec | None:
        return next((t for t in self.topics if t.name == name), None)

    def on_cluster(self, *, replication_factor: int, min_insync_replicas: int) -> Topology:
        """This topology with the cluster profile filled in where a topic says nothing.

        The files describe the workflow, not the cluster, so one ``topics.yaml`` serves
        the one-broker dev stack and a production cluster: a topic without its own
        ``replication_factor`` or ``min.insync.replicas`` gets the profile's
        (``SAGALOG_REPLICATION_FACTOR``, 3, and ``SAGALOG_MIN_INSYNC_REPLICAS``, 2).
        """
        topics = tuple(
            spec.model_copy(
                update={
                    "replication_factor": spec.replication_factor or replication_factor,
                    "config": {"min.insync.replicas": str(min_insync_replicas), **spec.config},
                }
            )
            for spec in self.topics
        )
        return self.model_copy(update={"topics": topics})

    def service(self, name: str) -> ServiceSpec | None:
        return next((s for s in self.services if s.name == name), None)

    @property
    def principals(self) -> frozenset[str]:
        """The principals whose ACLs the plan manages; every other one is left alone."""
        return frozenset(s.principal for s in self.services)
