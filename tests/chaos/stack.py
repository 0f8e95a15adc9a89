"""The chaos suite's own Kafka and schema registry, which it may kill at will.

The suite kills, pauses and restarts the broker, so it never runs against the shared
stack (9092/8081): it starts a second ``LocalStack`` on its own ports and state
directory (``sagalog dev up`` with other settings) and stops it at the end. Broker
faults go through the stack's own pid record, so only this stack's JVM is signalled.

Faults name their target as a ``Broker`` (``brokers()``, ``leader_of(topic,
partition)``, ``group_coordinator(group)``), asked of the cluster's metadata, so a
round written for one broker picks the right one of three (the leader of a workflow
partition, an agent group's coordinator) once the stack runs several; today there is
one, node 1, and every question answers it.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from sagalog.devstack import DevStackSettings, LocalStack
from sagalog.devstack.layout import KAFKA
from sagalog.devstack.processes import is_running, port_is_free
from sagalog.settings import ClientSettings

from .proxy import BrokerProxy

DEFAULT_PORTS = {
    "kafka_port": 29092,
    "controller_port": 29093,
    "registry_port": 28081,
    "proxy_port": 29094,
}
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
    """A private single-node Kafka + registry; ``kill_broker`` and friends act on it only."""

    state_dir: Path
    kafka_port: int = DEFAULT_PORTS["kafka_port"]
    controller_port: int = DEFAULT_PORTS["controller_port"]
    registry_port: int = DEFAULT_PORTS["registry_port"]
    proxy_port: int = DEFAULT_PORTS["proxy_port"]
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        ports = {self.kafka_port, self.controller_port, self.registry_port, self.proxy_port}
        if ports & SHARED_PORTS:
            raise ValueError(
                f"the chaos stack must not use the shared ports {sorted(SHARED_PORTS)}"
            )
        self.settings = DevStackSettings(
            kafka_port=self.kafka_port,
            controller_port=self.controller_port,
            registry_port=self.registry_port,
            kafka_advertised_port=self.proxy_port,
            state_dir=self.state_dir,
        )
        self.stack = LocalStack(self.settings, progress=self.log.append)
        self.proxy = BrokerProxy(listen_port=self.proxy_port, target_port=self.kafka_port)
        self._proxying = False

    @classmethod
    def from_env(cls, state_dir: Path) -> ChaosStack:
        """Ports from ``SAGALOG_CHAOS_KAFKA_PORT`` etc., defaults 29092/29093/28081/29094."""
        ports = {
            name: int(os.environ.get(f"SAGALOG_CHAOS_{name.upper()}", default))
            for name, default in DEFAULT_PORTS.items()
        }
        return cls(state_dir=state_dir, **ports)

    def client_settings(self, project_dir: Path) -> ClientSettings:
        return ClientSettings(
            bootstrap_servers=f"127.0.0.1:{self.proxy_port}",
            schema_registry_url=self.settings.schema_registry_url,
            project_dir=str(project_dir),
            connect_timeout_s=15,
            # one broker: the dev profile, not production's 3 replicas / min ISR 2
            replication_factor=1,
            min_insync_replicas=1,
        )

    def up(self) -> float:
        """Start the proxy, then what is not running; seconds until both answer.

        The broker advertises the proxy's port, so the proxy runs first: even the
        readiness probe reaches the broker through it after bootstrapping.
        """
        if not self._proxying:
            self.proxy.start()
            self._proxying = True
        return self.stack.up().elapsed_s

    def down(self) -> None:
        self.stack.down()
        if self._proxying:
            self.proxy.stop()
            self._proxying = False

    # -- which broker ----------------------------------------------------------------

    def brokers(self) -> list[Broker]:
        """Every broker of the stack (one: node 1, as ``sagalog dev up`` formats it)."""
        return [Broker(1, self)]

    def leader_of(self, topic: str, partition: int) -> Broker:
        """The broker leading ``topic``'s ``partition`` now (the metadata's answer)."""
        metadata = self._admin().list_topics(topic, timeout=10)
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
        return AdminClient({"bootstrap.servers": self.settings.bootstrap_servers})

    # -- signals (one broker today: ``node_id`` is checked, not used) ---------------------

    def broker_pid(self, node_id: int = 1) -> int:
        self._one(node_id)
        record = self.stack._supervisor.our_record(KAFKA)
        if record is None:
            raise RuntimeError(f"the chaos broker is not running ({self.state_dir})")
        return record.pid

    def _one(self, node_id: int) -> None:
        if node_id != 1:
            raise ValueError(f"the chaos stack runs one broker (node 1), not node {node_id}")

    def kill_broker(self, node_id: int = 1) -> None:
        """SIGKILL: no clean shutdown marker, so the next start recovers its logs."""
        pid = self.broker_pid(node_id)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            is_running(pid) or not port_is_free(host="127.0.0.1", port=self.kafka_port)
        ):
            time.sleep(0.05)

    def restart_broker(self, node_id: int = 1) -> float:
        """Start the broker again (the registry is left alone); seconds until it answers."""
        self._one(node_id)
        started = time.monotonic()
        self.stack.up()
        return time.monotonic() - started

    def pause_broker(self, node_id: int = 1) -> None:
        os.kill(self.broker_pid(node_id), signal.SIGSTOP)

    def resume_broker(self, node_id: int = 1) -> None:
        os.kill(self.broker_pid(node_id), signal.SIGCONT)
