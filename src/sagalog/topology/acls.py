"""The ACLs each service needs, derived from the flows and the services, as a pure function.

Deny by default: the cluster runs with ``allow.everyone.if.no.acl.found=false``, and
every right a service has is one of the bindings below, each derived from something
the topology says, with the reason kept beside it (``why``) for the plan to show.

What each client of sagalog asks the broker, and so what it needs (checked against
Kafka 4.4 on a secured broker, ``tests/integration/test_acls_secure.py``):

- **Agent** (``agents.worker``): subscribes its input topics and its retry topic in
  the group ``sagalog-agent-<name>`` (READ on the group: JoinGroup, SyncGroup and
  TxnOffsetCommit); produces in transactions with ``transactional.id``
  ``sagalog-agent-<name>-<instance>`` (WRITE on that TRANSACTIONAL_ID, PREFIXED, since
  the instance id is a runtime setting); creates its retry topic at start (CREATE on
  it, LITERAL), and its budget claims topic, which it writes with a plain idempotent
  producer and reads with ``assign()`` (``agents.claims``); dead-letters (WRITE).
  Its projection's rebuild and its claims reader read with ``assign()`` under
  throwaway groups ``sagalog-hydrate-<uuid>``: librdkafka still looks up such a
  group's coordinator, so it needs DESCRIBE on the group prefix, and no more, since
  it never commits.
- **Tracker** (faust, ``src/sagalog/services/tracker``): reads the workflow topics and its
  clock topic in the group ``<app id>``; writes the workflow topics, transitions,
  alerts and dead letters; faust creates, reads and writes its changelogs
  ``<app id>-<table>-changelog`` and ``<app id>-__assignor-__leader``, and the tracker
  creates ``<app id>-clock``: READ, WRITE, CREATE and DESCRIBE on the PREFIXED topic
  ``<app id>-``. faust only sends CreateTopics (it never describes or alters
  configs), so no DESCRIBE_CONFIGS or ALTER_CONFIGS. Each partition's outputs go
  in that partition's transaction, ``transactional.id`` ``<app id>-p<partition>``
  (WRITE and DESCRIBE on the PREFIXED TRANSACTIONAL_ID ``<app id>-``). Its backlog
  probe, changelog tail reader and clock reader assign partitions under the groups
  ``<app id>-backlog-probe``, ``<app id>-changelog-tail`` and ``sagalog-clock``:
  DESCRIBE on those.
- **Gateway**: reads the tracker's records changelog and the transitions with
  ``assign()`` under ``sagalog-gateway-<instance>-<uuid>``, committing nothing:
  DESCRIBE on the group prefix (FindCoordinator, OffsetFetch), not READ. Writes
  GateDecided and WebhookReceived to the workflow topics, and nothing else: not
  ``sagalog.transitions``, which only the tracker writes. Reads the model streams of
  every flow's topic (``sagalog.stream.<topic>``), which it serves as server-sent
  events; the agents of a flow create and write its stream topic (no READ).

No CLUSTER right anywhere. A transactional producer needs WRITE on its
TRANSACTIONAL_ID; a plain idempotent producer (the tracker's ticks, the gateway's
publisher) needs, since KIP-679 (Kafka 3.0), IDEMPOTENT_WRITE on the cluster *or*
WRITE on any topic, and every such service has a topic WRITE (Kafka 4.4's
``KafkaApis.handleInitProducerIdRequest`` checks exactly that). DESCRIBE is implied
by READ and WRITE in Kafka; it is listed anyway where a client asks for metadata, so
a binding read alone says what the client does.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from sagalog.errors import TopologyError
from sagalog.flows.model import Flow
from sagalog.topic_names import stream_topic_for
from sagalog.topology.model import Topology
from sagalog.topology.services import (
    AGENT_HYDRATION_GROUP_PREFIX,
    TRACKER_CLOCK_GROUP,
    AgentService,
    GatewayService,
    ServiceSpec,
    TrackerService,
    deadletter_topics,
)


class ResourceKind(enum.StrEnum):
    """Names as in ``confluent_kafka.admin.ResourceType``."""

    TOPIC = "TOPIC"
    GROUP = "GROUP"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"
    CLUSTER = "BROKER"  # librdkafka calls the cluster resource BROKER


class PatternKind(enum.StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(enum.StrEnum):
    """Names as in ``confluent_kafka.admin.AclOperation``."""

    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"
    ALL = "ALL"


class Permission(enum.StrEnum):
    ALLOW = "ALLOW"
    DENY = "DENY"


@dataclass(frozen=True, order=True)
class AclRule:
    """One ACL binding. ``why`` explains it and takes no part in equality."""

    principal: str
    resource_type: ResourceKind
    pattern_type: PatternKind
    resource_name: str
    operation: Operation
    permission: Permission = Permission.ALLOW
    host: str = "*"
    why: str = field(default="", compare=False)

    def describe(self) -> str:
        """``ALLOW READ on TOPIC LITERAL 'procurement.events'`` (host shown when not ``*``)."""
        host = "" if self.host == "*" else f" from host {self.host}"
        kind = "CLUSTER" if self.resource_type is ResourceKind.CLUSTER else self.resource_type
        return (
            f"{self.permission} {self.operation} on {kind} {self.pattern_type} "
            f"'{self.resource_name}'{host}"
        )


class _Rules:
    """Collects one service's bindings; the same binding from two reasons keeps both."""

    def __init__(self, principal: str) -> None:
        self.principal = principal
        self.found: dict[AclRule, list[str]] = {}

    def grant(
        self,
        resource: ResourceKind,
        name: str,
        operations: Iterable[Operation],
        why: str,
        *,
        pattern: PatternKind = PatternKind.LITERAL,
    ) -> None:
        for operation in operations:
            rule = AclRule(self.principal, resource, pattern, name, operation)
            reasons = self.found.setdefault(rule, [])
            if why not in reasons:
                reasons.append(why)

    def topics(self, names: Iterable[str], operations: Iterable[Operation], why: str) -> None:
        ops = tuple(operations)
        for name in names:
            self.grant(ResourceKind.TOPIC, name, ops, why)


READ = (Operation.READ, Operation.DESCRIBE)
WRITE = (Operation.WRITE, Operation.DESCRIBE)
OWN = (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE)


def derive_acls(topology: Topology, flows: Iterable[Flow]) -> tuple[AclRule, ...]:
    """Every ACL binding the declared services need, sorted; nothing for anyone else.

    Raises:
        TopologyError: a flow step names an agent that ``services:`` does not declare
            (its principal would have no rights), or a declared agent has nothing to
            read (no flow step names it and it declares no ``reads``).
    """
    flows = tuple(flows)
    if not topology.services:
        return ()
    _check_agents(topology, flows)
    deadletters = deadletter_topics(topology.services)
    found: dict[AclRule, list[str]] = {}
    for service in topology.services:
        for rule, reasons in _service_rules(service, flows, deadletters).items():
            merged = found.setdefault(rule, [])
            merged += [r for r in reasons if r not in merged]
    return tuple(sorted(replace(rule, why="; ".join(found[rule])) for rule in found))


def _service_rules(
    service: ServiceSpec, flows: tuple[Flow, ...], deadletters: tuple[str, ...]
) -> dict[AclRule, list[str]]:
    rules = _Rules(service.principal)
    if isinstance(service, AgentService):
        _agent(rules, service, flows)
    elif isinstance(service, TrackerService):
        _tracker(rules, service, flows)
    elif isinstance(service, GatewayService):
        _gateway(rules, service, flows, deadletters)
    rules.topics(service.reads, READ, f"{service.name}: declared reads")
    rules.topics(service.writes, WRITE, f"{service.name}: declared writes")
    return rules.found


def _agent(rules: _Rules, agent: AgentService, flows: tuple[Flow, ...]) -> None:
    for flow in flows:
        steps = [s.name for s in flow.steps if s.agent == agent.name]
        if not steps:
            continue
        rules.topics(
            [flow.topic],
            (*READ, Operation.WRITE),
            f"flow {flow.name} v{flow.version} step(s) {', '.join(steps)}: inputs, "
            "compensation requests, outcomes",
        )
        rules.topics(
            [stream_topic_for(flow.topic)],
            (Operation.WRITE, Operation.CREATE, Operation.DESCRIBE),
            f"model streams of flow {flow.name}: created at start by an agent with budgets, "
            "written by ctx.model_stream (sagalog.streams)",
        )
    rules.grant(ResourceKind.GROUP, agent.group, [Operation.READ], "the agent's consumer group")
    rules.grant(
        ResourceKind.GROUP,
        AGENT_HYDRATION_GROUP_PREFIX,
        [Operation.DESCRIBE],
        "projection rebuild: assign()-only reader (FindCoordinator), never commits",
        pattern=PatternKind.PREFIXED,
    )
    rules.topics([agent.retry_topic], OWN, "the agent's retry topic, created at start")
    rules.topics(
        [agent.claims_topic],
        OWN,
        "the agent's budget claims topic, created at start by an agent with budgets, "
        "written before each model call, read by a partition's next holder",
    )
    rules.topics([agent.deadletter_topic], WRITE, "records no handler could process")
    rules.grant(
        ResourceKind.TRANSACTIONAL_ID,
        agent.transactional_id_prefix,
        (Operation.WRITE, Operation.DESCRIBE),
        "consume-handle-produce-commit transactions, one id per instance",
        pattern=PatternKind.PREFIXED,
    )


def _tracker(rules: _Rules, tracker: TrackerService, flows: tuple[Flow, ...]) -> None:
    for topic in sorted({f.topic for f in flows}):
        labels = ", ".join(f"{f.name} v{f.version}" for f in flows if f.topic == topic)
        rules.topics([topic], (*READ, Operation.WRITE), f"workflow topic of {labels}")
    outputs = [tracker.transitions_topic, tracker.alerts_topic, tracker.deadletter_topic]
    rules.topics(outputs, WRITE, "transitions, alerts and dead letters")
    rules.grant(
        ResourceKind.TOPIC,
        tracker.topic_prefix,
        OWN,
        "faust changelogs and assignor topic, the clock topic: created by the tracker",
        pattern=PatternKind.PREFIXED,
    )
    rules.grant(ResourceKind.GROUP, tracker.app_id, [Operation.READ], "the faust app's group")
    rules.grant(
        ResourceKind.TRANSACTIONAL_ID,
        tracker.topic_prefix,
        [Operation.WRITE, Operation.DESCRIBE],
        "a transaction per partition and batch (fencing), id <app id>-p<partition>",
        pattern=PatternKind.PREFIXED,
    )
    rules.grant(
        ResourceKind.GROUP,
        tracker.topic_prefix,
        [Operation.DESCRIBE],
        "backlog probe: assign()-only reader <app id>-backlog-probe",
        pattern=PatternKind.PREFIXED,
    )
    rules.grant(
        ResourceKind.GROUP,
        TRACKER_CLOCK_GROUP,
        [Operation.DESCRIBE],
        "reads the last ticks with assign() at start (virtual clock)",
    )


def _gateway(
    rules: _Rules, gateway: GatewayService, flows: tuple[Flow, ...], deadletters: tuple[str, ...]
) -> None:
    rules.topics(
        [gateway.records_changelog, gateway.transitions_topic],
        READ,
        f"read model: follows tracker '{gateway.tracker_app_id}'",
    )
    for topic in sorted({f.topic for f in flows}):
        rules.topics([topic], WRITE, "GateDecided, WebhookReceived and dead-letter replays")
        rules.topics([topic], READ, "sagalog dlq replay: finds earlier replays of a dead letter")
    rules.topics(deadletters, READ, "sagalog dlq list|show|replay")
    rules.topics(
        sorted({stream_topic_for(f.topic) for f in flows}),
        READ,
        "GET /v1/workflows/{id}/stream: the model streams it serves",
    )
    rules.grant(
        ResourceKind.GROUP,
        gateway.group_prefix,
        [Operation.DESCRIBE],
        "assign()-only follower (FindCoordinator), never commits",
        pattern=PatternKind.PREFIXED,
    )


def _check_agents(topology: Topology, flows: tuple[Flow, ...]) -> None:
    agents = {s.name: s for s in topology.services if isinstance(s, AgentService)}
    for flow in flows:
        for step in flow.steps:
            if step.agent not in agents:
                raise TopologyError(
                    f"{flow.source or flow.label}, step '{step.name}': agent '{step.agent}' is "
                    "not a service of the topology (so it would have no rights): the topology "
                    "was loaded without this flow; load both from the same project"
                )
    named = {step.agent for flow in flows for step in flow.steps}
    for name, agent in agents.items():
        if name not in named and not agent.reads:
            raise TopologyError(
                f"service '{name}': no flow step names this agent and it declares no reads, "
                "so it would read nothing; name it in a flow step, add reads:, or remove it"
            )
