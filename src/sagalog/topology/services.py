"""Services as principals: who connects to the cluster, as frozen, validated objects.

Each service is one Kafka principal, and what it may do follows from the flows and
from these declarations (``sagalog.topology.acls``), never from hand-made grants. A
declaration says only what the flows cannot: which principal a service logs in as,
the tracker's app id, the tracker a gateway follows, and any topic an agent reads or
writes that no flow names. Everything else has a default that matches the runtime:
an agent's consumer group ``sagalog-agent-<name>`` and transactional ids
``sagalog-agent-<name>-<instance>`` (``agents.worker``), the tracker's topics
``<app id>-...`` (faust), the gateway's throwaway groups ``sagalog-gateway-...``.

In ``topology/services.yaml``::

    services:
      saga-tracker: {kind: tracker, app_id: saga-tracker}
      gateway: {kind: gateway, tracker_app_id: saga-tracker}
      intake-agent: {kind: agent}
      risk-agent: {kind: agent, principal: "User:risk", reads: [models.events]}
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, model_validator

from sagalog.topic_names import (
    claims_topic_for,
    owned_prefix,
    records_changelog,
    retry_topic_for,
)
from sagalog.validators import checked as _checked

_PRINCIPAL = re.compile(r"^User:[^\s*]+$")
_SERVICE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_RESOURCE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

AGENT_GROUP_PREFIX = "sagalog-agent-"
AGENT_HYDRATION_GROUP_PREFIX = "sagalog-hydrate-"
GATEWAY_GROUP_PREFIX = "sagalog-gateway-"
TRACKER_CLOCK_GROUP = "sagalog-clock"
DEADLETTER_TOPIC = "sagalog.deadletter"
TRANSITIONS_TOPIC = "sagalog.transitions"
ALERTS_TOPIC = "sagalog.alerts"


Principal = Annotated[
    str, _checked(_PRINCIPAL, "a Kafka principal such as User:intake-agent (no spaces or '*')")
]
ServiceName = Annotated[
    str, _checked(_SERVICE_NAME, "a service name of letters, digits, '-' and '_'")
]
ResourceName = Annotated[
    str, _checked(_RESOURCE, "a topic or group name of letters, digits, '.', '_' and '-'")
]


class _Service(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: ServiceName
    description: str = ""
    principal: Principal = Field(description="Whom the cluster sees; default User:<name>.")
    reads: tuple[ResourceName, ...] = Field(
        default=(), description="Topics it reads that the flows do not say (declared topics)."
    )
    writes: tuple[ResourceName, ...] = Field(
        default=(), description="Topics it writes that the flows do not say (declared topics)."
    )

    @model_validator(mode="before")
    @classmethod
    def _default_principal(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("principal") is None and data.get("name"):
            data = {**data, "principal": f"User:{data['name']}"}
        return data


class AgentService(_Service):
    """An agent service: reads and writes the topics of the flow steps that name it."""

    kind: Literal["agent"] = "agent"
    group: ResourceName = Field(description="Consumer group; default sagalog-agent-<name>.")
    transactional_id_prefix: ResourceName = Field(
        description="Every instance's transactional.id starts with it; default "
        "sagalog-agent-<name>- (the instance id follows)."
    )
    deadletter_topic: ResourceName = DEADLETTER_TOPIC

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("name"):
            name = data["name"]
            data = {
                **data,
                "group": data.get("group") or f"{AGENT_GROUP_PREFIX}{name}",
                "transactional_id_prefix": data.get("transactional_id_prefix")
                or f"{AGENT_GROUP_PREFIX}{name}-",
            }
        return data

    @property
    def retry_topic(self) -> str:
        return retry_topic_for(self.name)

    @property
    def claims_topic(self) -> str:
        """Its budget claims topic: created at start by an agent that declares budgets
        (which agents do is in their code, not the topology: every agent may)."""
        return claims_topic_for(self.name)


class TrackerService(_Service):
    """The saga tracker: a faust app that owns every topic named ``<app_id>-...``."""

    kind: Literal["tracker"] = "tracker"
    app_id: ResourceName = Field(
        description="faust app id: its group and the prefix of its changelogs, clock topic "
        "and assignor topic; default the service name."
    )
    transitions_topic: ResourceName = TRANSITIONS_TOPIC
    alerts_topic: ResourceName = ALERTS_TOPIC
    deadletter_topic: ResourceName = DEADLETTER_TOPIC

    @model_validator(mode="before")
    @classmethod
    def _default_app_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("name") and not data.get("app_id"):
            data = {**data, "app_id": data["name"]}
        return data

    @property
    def topic_prefix(self) -> str:
        return owned_prefix(self.app_id)


class GatewayService(_Service):
    """The HTTP gateway: follows one tracker's records and writes decisions and webhooks."""

    kind: Literal["gateway"] = "gateway"
    tracker_app_id: ResourceName = Field(description="The app id of the tracker it follows.")
    transitions_topic: ResourceName = TRANSITIONS_TOPIC
    group_prefix: ResourceName = GATEWAY_GROUP_PREFIX

    @property
    def records_changelog(self) -> str:
        return records_changelog(self.tracker_app_id)


ServiceSpec = Annotated[AgentService | TrackerService | GatewayService, Discriminator("kind")]


def deadletter_topics(
    services: Iterable[AgentService | TrackerService | GatewayService],
) -> tuple[str, ...]:
    """The dead-letter topics the declared agents and trackers write, sorted: where
    ``sagalog dlq`` looks. The runtimes' default one when no service is declared."""
    found = {
        service.deadletter_topic
        for service in services
        if isinstance(service, AgentService | TrackerService)
    }
    return tuple(sorted(found)) or (DEADLETTER_TOPIC,)
