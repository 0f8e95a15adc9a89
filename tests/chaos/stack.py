"""The chaos suite's own Kafka and schema registry, which it may kill at will.

The suite kills, pauses and restarts the broker, so it never runs against the shared
stack (9092/8081): it starts a second ``LocalStack`` on its own ports and state
directory (``sagalog dev up`` with other settings) and stops it at the end. Broker
faults go through the stack's own pid record, so only this stack's JVM is signalled.

Faults name their target as a ``Broker`` (``brokers()``, ``leader_of(topic,
partition)``, ``group_coordinator(group)``), asked of the cluster's metadata, so a
round written for one broker picks the right one of three (the leader of a workflow
partition, an agent group's coordinator). ``broker_count=1`` (the default) is one node,
behind Toxiproxy when the rounds include network faults (``network_faults``;
``toxiproxy.py``); ``broker_count=3`` is a three-node KRaft
quorum (replication 3, min ISR 2, production's profile) without a proxy: the cluster
rounds (``cluster.py``) kill and wipe brokers, they do not cut the network.

With a ``network`` (``netns.Network``, hosts ``kafka-1`` .. ``kafka-3``) each broker
of the three runs in a network namespace of its own and listens on and advertises
that host's address (``NodePlacement``), so the partition rounds (``partitions.py``)
can cut brokers off from each other while the fleet, in the machine's namespace,
still reaches every one. ``secure`` is the secured cluster's shape (TLS, SCRAM,
mTLS between brokers, ACLs); the chaos fleet logs in as the admin.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from sagalog.devstack import DevStackSettings, LocalStack
from sagalog.devstack.nodes import KafkaNode, NodePlacement
from sagalog.devstack.processes import is_running, port_is_free
from sagalog.settings import ClientSettings

from .netns import Network
from .toxiproxy import Toxiproxy

DEFAULT_PORTS = {
    "kafka_port": 29092,
    "controller_port": 29093,
    "registry_port": 28081,
    "proxy_port": 29094,
}
"""The proxy's API listens on the next port (29095)."""
SHARED_PORTS = frozenset({9092, 9093, 8081})


@dataclass(frozen=True)
class Broker:
    """One broker of the chaos stack, as a fault acts on it."""

    node_id: int
    stack: ChaosStack

    def kill(self) -> None:
        self.stack.kill_broker(self.node_id)

    def restart(self) -> float:
        return self.stack.restart_broker(self.node_id)

    def pause(self) -> None:
        self.stack.pause_broker(self.node_id)

    def resume(self) -> None:
        self.stack.resume_broker(self.node_id)


@dataclass
class ChaosStack:
    """A private Kafka (1 or 3 nodes) + registry; ``kill_broker`` and friends act on it only."""

    state_dir: Path
    kafka_port: int = DEFAULT_PORTS["kafka_port"]
    controller_port: int = DEFAULT_PORTS["controller_port"]
    registry_port: int = DEFAULT_PORTS["registry_port"]
    proxy_port: int = DEFAULT_PORTS["proxy_port"]
    log: list[str] = field(default_factory=list)
    broker_count: int = 1
    """1: one node behind the proxy; 3: a quorum, node i on the ports + 100 * (i - 1)."""
    network: Network | None = None
    """Each broker in its namespace (hosts ``kafka-<id>``); three brokers only."""
    secure: bool = False
    network_faults: bool = True
    """One broker behind Toxiproxy, for the network rounds (``faults.network_*``); the
    test shapes, which run none, reach the broker directly."""

    def __post_init__(self) -> None:
        if self.broker_count not in (1, 3):
            raise ValueError(f"the chaos stack runs 1 or 3 brokers, not {self.broker_count}")
        clustered = self.broker_count > 1
        proxied = self.network_faults and not clustered
        ports = {self.kafka_port, self.controller_port, self.registry_port}
        if proxied:
            ports |= {self.proxy_port, self.proxy_port + 1}
        for node in range(1, self.broker_count):
            ports |= {self.kafka_port + 100 * node, self.controller_port + 100 * node}
        if ports & SHARED_PORTS:
            raise ValueError(
                f"the chaos stack must not use the shared ports {sorted(SHARED_PORTS)}"
            )
        self.settings = DevStackSettings(
            kafka_port=self.kafka_port,
            controller_port=self.controller_port,
            registry_port=self.registry_port,
            kafka_advertised_port=self.proxy_port if proxied else 0,
            node_port_step=100,
            state_dir=self.state_dir,
            # the agent binds loopback; in a namespace nobody would read it
            metrics_port_offset=0 if self.network is not None else 312,
        )
        placement = None
        if self.network is not None:
            if not clustered:
                raise ValueError("the chaos stack puts brokers in namespaces with 3 brokers only")
            hosts = [self.network[f"kafka-{i}"] for i in range(1, self.broker_count + 1)]
            placement = NodePlacement(
                hosts={i: h.address for i, h in enumerate(hosts, 1)},
                prefixes={i: h.prefix for i, h in enumerate(hosts, 1)},
                # a service placed in a namespace (the fencing round's tracker) must
                # reach the registry: it listens on the bridge's end, not loopback
                registry_host=self.network.gateway,
            )
        self.stack = LocalStack(
            self.settings,
            brokers=self.broker_count,
            secure=self.secure,
            progress=self.log.append,
            placement=placement,
        )
        self.proxy: Toxiproxy | None = None
        if proxied:
            self.proxy = Toxiproxy(
                listen_port=self.proxy_port,
                target_port=self.kafka_port,
                api_port=self.proxy_port + 1,
                log=self.state_dir / "toxiproxy.log",
            )
        self._proxying = False

    @classmethod
    def from_env(cls, state_dir: Path, *, brokers: int = 1) -> ChaosStack:
        """Ports from ``SAGALOG_CHAOS_KAFKA_PORT`` etc., defaults 29092/29093/28081/29094."""
        ports = {
            name: int(os.environ.get(f"SAGALOG_CHAOS_{name.upper()}", default))
            for name, default in DEFAULT_PORTS.items()
        }
        return cls(state_dir=state_dir, broker_count=brokers, **ports)

    def client_settings(self, project_dir: Path) -> ClientSettings:
        if self.secure:  # the admin's login: TLS + SCRAM on every connection
            fields = {
                name.removeprefix("SAGALOG_").lower(): value
                for name, value in self.stack.client_environment().items()
                if name.startswith("SAGALOG_")
            }
            fields |= {"project_dir": str(project_dir), "connect_timeout_s": "15"}
            return ClientSettings(_env_file=None, **fields)  # type: ignore[call-arg, arg-type]
        if self.broker_count > 1:  # production's profile: 3 replicas, min ISR 2
            return ClientSettings(
                bootstrap_servers=self.stack.bootstrap_servers,
                schema_registry_url=self.stack.schema_registry_url,
                project_dir=str(project_dir),
                connect_timeout_s=15,
                replication_factor=3,
                min_insync_replicas=2,
            )
        return ClientSettings(
            bootstrap_servers=f"127.0.0.1:{self.proxy_port if self.proxy else self.kafka_port}",
            schema_registry_url=self.settings.schema_registry_url,
            project_dir=str(project_dir),
            connect_timeout_s=15,
            # one broker: the dev profile, not production's 3 replicas / min ISR 2
            replication_factor=1,
            min_insync_replicas=1,
        )

    def up(self) -> float:
        """Start the proxy (if any), then what is not running; seconds until both answer.

        The broker advertises the proxy's port, so the proxy runs first: even the
        readiness probe reaches the broker through it after bootstrapping.
        """
        if self.proxy is not None and not self._proxying:
            self.proxy.start()
            self._proxying = True
        return self.stack.up().elapsed_s

    def down(self) -> None:
        self.stack.down()
        if self.proxy is not None and self._proxying:
            self.proxy.stop()
            self._proxying = False

    # -- which broker ----------------------------------------------------------------

    def brokers(self) -> list[Broker]:
        """Every broker of the stack, by KRaft node id (1, or 1-3)."""
        return [Broker(node.node_id, self) for node in self.stack.nodes]

    def leader_of(self, topic: str, partition: int) -> Broker:
        """The broker leading ``topic``'s ``partition`` now (the metadata's answer)."""
        metadata = self._admin().list_topics(topic, timeout=30)
        leader = metadata.topics[topic].partitions[partition].leader
        return self._broker(leader)

    def group_coordinator(self, group: str) -> Broker:
        """The coordinator of a consumer group (an agent's, the tracker's)."""
        [future] = self._admin().describe_consumer_groups([group], request_timeout=10).values()
        return self._broker(future.result(timeout=10).coordinator.id)

    def _broker(self, node_id: int) -> Broker:
        found = [b for b in self.brokers() if b.node_id == node_id]
        return found[0] if found else self.brokers()[0]

    def _admin(self) -> AdminClient:
        config = {"bootstrap.servers": self.stack.bootstrap_servers}
        if self.secure:
            config |= self.stack.security.admin_client_config()
        return AdminClient(config)

    def controller(self) -> int | str:
        """The active KRaft controller's node id (the metadata's answer), or why not."""
        admin = self._admin()  # held: a client collected mid-call cancels it (_DESTROY)
        try:
            return int(admin.describe_cluster(request_timeout=10).result(15).controller.id)
        except Exception as exc:  # mid-partition the answer may not come
            return f"? {exc!r}"[:80]

    # -- signals ----------------------------------------------------------------------

    def node(self, node_id: int) -> KafkaNode:
        """The devstack's node ``node_id`` (component ``kafka``, or ``kafka-<id>``)."""
        for node in self.stack.nodes:
            if node.node_id == node_id:
                return node
        raise ValueError(
            f"the chaos stack runs brokers {[n.node_id for n in self.stack.nodes]}, "
            f"not node {node_id}"
        )

    def broker_pid(self, node_id: int = 1) -> int:
        component = self.node(node_id).component
        record = self.stack._supervisor.our_record(component)
        if record is None:
            raise RuntimeError(f"the chaos broker {component} is not running ({self.state_dir})")
        return record.pid

    def kill_broker(self, node_id: int = 1) -> None:
        """SIGKILL: no clean shutdown marker, so the next start recovers its logs."""
        pid = self.broker_pid(node_id)
        port = self.node(node_id).client_port
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            is_running(pid) or not port_is_free(host="127.0.0.1", port=port)
        ):
            time.sleep(0.05)

    def restart_broker(self, node_id: int = 1) -> float:
        """Start the broker again (the registry is left alone); seconds until it answers.

        ``up`` starts only what is not running, so the other brokers are left alone; a
        node whose data directory is gone is formatted first, with the cluster id of
        the others (``wipe_broker``).
        """
        self.node(node_id)
        started = time.monotonic()
        self.stack.up()
        return time.monotonic() - started

    def pause_broker(self, node_id: int = 1) -> None:
        os.kill(self.broker_pid(node_id), signal.SIGSTOP)

    def resume_broker(self, node_id: int = 1) -> None:
        os.kill(self.broker_pid(node_id), signal.SIGCONT)

    def wipe_broker(self, node_id: int) -> Path:
        """Delete a stopped broker's data directory (its partitions and its KRaft log)."""
        component = self.node(node_id).component
        if self.stack._supervisor.our_record(component) is not None:
            raise RuntimeError(f"{component} still runs: kill it before wiping its data")
        data_dir = self.stack.layout.data_dir(component=component)
        shutil.rmtree(data_dir)
        return data_dir
