"""Read the cluster's state and carry out a plan against it.

Everything here is I/O around ``plan``: describe topics and configs, read registry
subjects, then create, alter, delete and register. Each admin call waits with the
client settings' bound, so a dead cluster is an error, not a hang.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from sagalog.cluster import connect_admin
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.registry import SchemaRegistry
from sagalog.contracts.subjects import subject_for
from sagalog.errors import (
    ConfigurationError,
    DestructiveChangeRefused,
    SagalogError,
    ServiceUnavailableError,
)
from sagalog.flows.loader import load_flows
from sagalog.flows.model import Flow
from sagalog.settings import ClientSettings
from sagalog.topology.acl_apply import NOT_ENFORCED, create_acl, current_acls, delete_acl
from sagalog.topology.acl_plan import plan_acls
from sagalog.topology.acls import AclRule, derive_acls
from sagalog.topology.model import TopicSpec, Topology
from sagalog.topology.plan import (
    Change,
    ChangeKind,
    Plan,
    SubjectState,
    TopicState,
    plan_schemas,
    plan_topics,
)

Report = Callable[[str], None]


@dataclass
class TopologyClient:
    """The cluster and registry one topology is planned and applied against."""

    settings: ClientSettings
    catalog: SchemaCatalog

    def __post_init__(self) -> None:
        self.admin, metadata = connect_admin(self.settings)
        self._metadata = metadata
        self.registry = SchemaRegistry(self.settings)

    @property
    def timeout(self) -> float:
        return self.settings.connect_timeout_s

    def topics(self, topology: Topology) -> dict[str, TopicState]:
        """The cluster's topics (internal ones excluded) with the configs the plan compares."""
        metadata = self.admin.list_topics(timeout=self.timeout)
        names = [n for n in metadata.topics if not n.startswith("__")]
        declared_keys = {t.name: set(t.kafka_config()) for t in topology.topics}
        configs: dict[str, dict[str, str]] = {}
        wanted = [n for n in names if n in declared_keys]
        if wanted:
            futures = self.admin.describe_configs(
                [ConfigResource(ResourceType.TOPIC, n) for n in wanted],
                request_timeout=self.timeout,
            )
            for resource, future in futures.items():
                entries = future.result(timeout=self.timeout)
                configs[resource.name] = {
                    key: entries[key].value
                    for key in declared_keys[resource.name]
                    if key in entries and entries[key].value is not None
                }
        states = {}
        for name in names:
            partitions = metadata.topics[name].partitions
            replicas = len(next(iter(partitions.values())).replicas) if partitions else 0
            states[name] = TopicState(
                name=name,
                partitions=len(partitions),
                replication_factor=replicas,
                config=configs.get(name, {}),
            )
        return states

    def subjects(self, topology: Topology) -> dict[str, SubjectState]:
        """Latest schema and rule of every subject the topology implies."""
        states = {}
        for spec in topology.topics:
            for event_type in spec.schemas:
                subject = subject_for(spec.name, event_type)
                latest = self.registry.latest(subject)
                states[subject] = SubjectState(
                    definition=latest.definition if latest else None,
                    compatibility=self.registry.compatibility(subject),
                )
        return states

    def acls(self) -> list[AclRule] | None:
        """Every ACL binding on the cluster; None when it has no authorizer."""
        return current_acls(self.admin, broker_ids=self._metadata.brokers, timeout=self.timeout)

    def plan(self, topology: Topology, *, flows: Iterable[Flow] | None = None) -> Plan:
        """Topic, schema and ACL changes.

        Args:
            flows: what the agents' rights derive from; by default the flows in the
                ``flows/`` folder next to the topology files (read only when the
                topology declares services).
        """
        topology = topology.on_cluster(
            replication_factor=self.settings.replication_factor,
            min_insync_replicas=self.settings.min_insync_replicas,
        )
        changes = plan_topics(topology, self.topics(topology))
        changes += plan_schemas(topology, self.subjects(topology), self.catalog)
        notes: list[str] = []
        if topology.services:
            desired = derive_acls(topology, self._flows(topology) if flows is None else flows)
            current = self.acls()
            if current is None:
                notes.append(NOT_ENFORCED)
            else:
                changes += plan_acls(desired, current, principals=topology.principals)
        return Plan(tuple(changes), notes=tuple(notes))

    def _flows(self, topology: Topology) -> tuple[Flow, ...]:
        if not topology.sources:
            return ()
        directory = Path(topology.sources[0]).parent / "flows"
        if not directory.is_dir():
            return ()
        return tuple(load_flows(directory, catalog=self.catalog, topology=topology))

    def apply(self, plan: Plan, *, force: bool = False, report: Report = print) -> list[Change]:
        """Carry out ``plan``; return the changes made.

        Safe changes are made even when others are refused: a stray topic somewhere on a
        shared cluster must not block a new topic or schema version. Each change that
        needs ``force`` is left untouched and listed in the refusal.

        Raises:
            DestructiveChangeRefused: after the safe changes, when changes that need
                ``force`` were refused.
        """
        refused = [] if force else list(plan.refused_without_force)
        done = []
        for change in plan.changes:
            if change.kind is ChangeKind.UNSUPPORTED:
                report(f"skipped: {change.describe()}")
                continue
            if change in refused:
                continue
            self._apply_one(change)
            report(f"done: {change.describe().splitlines()[0]}")
            done.append(change)
        if refused:
            listed = "\n".join(c.describe() for c in refused)
            raise DestructiveChangeRefused(
                f"refused {len(refused)} change(s) that need --force ({len(done)} other "
                f"change(s) applied):\n{listed}"
            )
        return done

    def _apply_one(self, change: Change) -> None:
        match change.kind:
            case ChangeKind.CREATE_TOPIC:
                assert change.spec is not None
                self._create(change.spec)
            case ChangeKind.ADD_PARTITIONS:
                assert change.spec is not None
                self._wait(
                    self.admin.create_partitions(
                        [NewPartitions(change.target, change.spec.partitions)],
                        request_timeout=self.timeout,
                    ).values(),
                    f"add partitions to {change.target}",
                )
            case ChangeKind.ALTER_CONFIG:
                entries = [
                    ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                    for k, v in change.config.items()
                ]
                resource = ConfigResource(
                    ResourceType.TOPIC, change.target, incremental_configs=entries
                )
                self._wait(
                    self.admin.incremental_alter_configs(
                        [resource], request_timeout=self.timeout
                    ).values(),
                    f"alter config of {change.target}",
                )
            case ChangeKind.DELETE_TOPIC:
                self._delete(change.target)
            case ChangeKind.RECREATE_TOPIC:
                assert change.spec is not None
                self._delete(change.target)
                self._create(change.spec)
            case ChangeKind.SET_COMPATIBILITY:
                self.registry.set_rule(change.target)
            case ChangeKind.REGISTER_SCHEMA:
                assert change.event_type is not None
                self.registry.register(change.target, self.catalog[change.event_type])
            case ChangeKind.CREATE_ACL:
                assert change.acl is not None
                create_acl(self.admin, change.acl, timeout=self.timeout)
            case ChangeKind.DELETE_ACL:
                assert change.acl is not None
                delete_acl(self.admin, change.acl, timeout=self.timeout)

    def _create(self, spec: TopicSpec) -> None:
        topic = NewTopic(
            spec.name,
            num_partitions=spec.partitions,
            replication_factor=spec.replication_factor or -1,
            config=spec.kafka_config(),
        )
        deadline = time.monotonic() + max(self.timeout, 30.0)
        while True:
            try:
                self._wait(
                    self.admin.create_topics([topic], request_timeout=self.timeout).values(),
                    f"create topic {spec.name}",
                )
                self._await_listed(spec, deadline)
                return
            except SagalogError as exc:
                if "replication factor" in str(exc).lower():
                    raise ConfigurationError(
                        f"{exc}; the cluster profile asks for {spec.replication_factor} "
                        "replicas (SAGALOG_REPLICATION_FACTOR, 3 by default). On the "
                        'one-broker dev stack run `eval "$(sagalog dev env)"`, which sets it '
                        "to 1, or give the topic its own replication_factor"
                    ) from exc
                # A topic just deleted is removed asynchronously; creating it again
                # fails until the controller has finished.
                if "already exists" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _await_listed(self, spec: TopicSpec, deadline: float) -> None:
        """Return once the broker lists the new topic with all its partitions: the
        controller answers a creation before the brokers' metadata has it, and a
        command run right after ``apply`` (or the next change of this one) must find
        the topic it was told exists (on a loaded machine a topic just recreated can be
        missing from the next metadata request)."""
        while True:
            listed = self.admin.list_topics(spec.name, timeout=self.timeout).topics.get(spec.name)
            if (
                listed is not None
                and listed.error is None
                and (len(listed.partitions) == spec.partitions)
            ):
                return
            if time.monotonic() > deadline:
                raise ServiceUnavailableError(
                    f"topic {spec.name} was created, but the broker did not list its "
                    f"{spec.partitions} partitions within 30 s; run `sagalog topology plan` "
                    "to see what the cluster holds"
                )
            time.sleep(0.2)

    def _delete(self, name: str) -> None:
        self._wait(
            self.admin.delete_topics([name], request_timeout=self.timeout).values(),
            f"delete topic {name}",
        )
        deadline = time.monotonic() + max(self.timeout, 30.0)
        while name in self.admin.list_topics(timeout=self.timeout).topics:
            if time.monotonic() > deadline:
                raise ServiceUnavailableError(f"topic {name} was still listed 30 s after deletion")
            time.sleep(0.2)

    def _wait(self, futures: Iterable[object], what: str) -> None:
        for future in futures:
            try:
                future.result(timeout=self.timeout)  # type: ignore[attr-defined]
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                raise SagalogError(f"{what} failed: {error.str()}") from exc
            except TimeoutError as exc:
                raise ServiceUnavailableError(
                    f"{what}: no answer from {self.settings.bootstrap_servers} within "
                    f"{self.timeout:g}s"
                ) from exc
