"""The Kafka nodes of a stack: names, node ids and ports, derived from the settings.

Node ``i`` (1-based) listens on the configured ports plus ``node_port_step * (i - 1)``,
so with the defaults a three-node stack uses 9092/9093 (node 1), 9192/9193 (node 2)
and 9292/9293 (node 3); the secure mode's mTLS listener is the client port plus
``mtls_port_offset`` (9102, 9202, 9302). One broker keeps the component name
``kafka`` and the layout it always had, so existing state directories and the chaos
suite's pid lookups are unchanged; three are ``kafka-1`` .. ``kafka-3``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sagalog.devstack.layout import KAFKA, LOOPBACK
from sagalog.devstack.settings import DevStackSettings
from sagalog.devstack.shape import StackShape
from sagalog.errors import ConfigurationError


@dataclass(frozen=True)
class KafkaNode:
    """One combined broker+controller.

    Attributes:
        node_id: KRaft ``node.id``, 1-based.
        component: the name in pid files, logs and ``status`` (``kafka`` or ``kafka-i``).
        client_port: PLAINTEXT (plain) or SASL_SSL (secure): where clients bootstrap.
        controller_port: the KRaft controller listener.
        mtls_port: the SSL listener with required client certificates (secure only; 0
            otherwise). The brokers also talk to each other on it.
        advertised_port: what the client listener advertises (a proxy's port, or
            ``client_port``).
        metrics_port: where the node serves its metrics to Prometheus (0: nowhere).
        host: the address it listens on and advertises (loopback, or its own address
            where a ``NodePlacement`` puts it, e.g. in a network namespace).
        launch_prefix: what its command line is run under (``ip netns exec <name>``),
            empty on loopback.
    """

    node_id: int
    component: str
    client_port: int
    controller_port: int
    mtls_port: int
    advertised_port: int
    metrics_port: int = 0
    host: str = LOOPBACK
    launch_prefix: tuple[str, ...] = ()

    @property
    def ports(self) -> list[tuple[int, str]]:
        """Every port this node binds, with the setting that moves it."""
        ports = [
            (self.client_port, "SAGALOG_DEV_KAFKA_PORT"),
            (self.controller_port, "SAGALOG_DEV_CONTROLLER_PORT"),
        ]
        if self.mtls_port:
            ports.append((self.mtls_port, "SAGALOG_DEV_MTLS_PORT_OFFSET"))
        if self.metrics_port:
            ports.append((self.metrics_port, "SAGALOG_DEV_METRICS_PORT_OFFSET"))
        return ports


@dataclass(frozen=True)
class NodePlacement:
    """Where each node runs when not every node is on loopback, by node id.

    The chaos suite puts each broker in a network namespace of its own, with an
    address of its own, so that it can cut the network between brokers: the node
    listens on and advertises ``hosts[id]`` (the controller quorum too) and its JVM
    starts under ``prefixes[id]``. A node not named stays on loopback. Nothing else
    about the stack changes: ports, layout, formatting, security.

    ``registry_host`` is the one address the registry listens on (and every client's
    URL names): loopback unless a client in a namespace must reach it, as the chaos
    suite's namespaced tracker does; then the bridge's end on this machine, which
    only the namespaces of that bridge and this machine can reach.
    """

    hosts: Mapping[int, str] = field(default_factory=dict)
    prefixes: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    registry_host: str = LOOPBACK


def component_name(*, node_id: int, brokers: int) -> str:
    """``kafka`` for a single broker (as before), ``kafka-<id>`` in a cluster."""
    return KAFKA if brokers == 1 else f"{KAFKA}-{node_id}"


def kafka_nodes(
    settings: DevStackSettings, shape: StackShape, placement: NodePlacement | None = None
) -> tuple[KafkaNode, ...]:
    """The nodes of a stack of this shape, in node id order (``placement``: not on loopback).

    Raises:
        ConfigurationError: a proxy port with several brokers (each node would need
            its own proxy), or two nodes' ports that collide or leave the port range.
    """
    if settings.kafka_advertised_port and shape.brokers != 1:
        raise ConfigurationError(
            "SAGALOG_DEV_KAFKA_ADVERTISED_PORT (a proxy in front of the broker) works with "
            "one broker only; unset it for `--brokers 3`"
        )
    nodes = []
    for index in range(shape.brokers):
        offset = settings.node_port_step * index
        client = settings.kafka_port + offset
        node_id = index + 1
        nodes.append(
            KafkaNode(
                node_id=index + 1,
                component=component_name(node_id=index + 1, brokers=shape.brokers),
                client_port=client,
                controller_port=settings.controller_port + offset,
                mtls_port=client + settings.mtls_port_offset if shape.secure else 0,
                advertised_port=settings.kafka_advertised_port or client,
                metrics_port=(
                    client + settings.metrics_port_offset if settings.metrics_port_offset else 0
                ),
                host=placement.hosts.get(node_id, LOOPBACK) if placement else LOOPBACK,
                launch_prefix=tuple(placement.prefixes.get(node_id, ())) if placement else (),
            )
        )
    _check_ports(nodes, registry_port=settings.registry_port)
    return tuple(nodes)


def _check_ports(nodes: list[KafkaNode], *, registry_port: int) -> None:
    seen: dict[int, str] = {registry_port: "the registry"}
    for node in nodes:
        for port, _ in node.ports:
            if not 1 <= port <= 65535:
                raise ConfigurationError(
                    f"{node.component} would listen on port {port}, outside 1-65535: lower "
                    f"SAGALOG_DEV_KAFKA_PORT / SAGALOG_DEV_CONTROLLER_PORT"
                )
            if port in seen:
                raise ConfigurationError(
                    f"{node.component} and {seen[port]} would both listen on port {port}: "
                    f"change SAGALOG_DEV_NODE_PORT_STEP or SAGALOG_DEV_MTLS_PORT_OFFSET so "
                    f"that each node's ports stay apart"
                )
            seen[port] = node.component


def bootstrap_servers(nodes: tuple[KafkaNode, ...], *, mtls: bool = False) -> str:
    """Every node's client (or mTLS) address, comma-separated, as clients want it."""
    return ",".join(
        f"{node.host}:{node.mtls_port if mtls else node.advertised_port}" for node in nodes
    )
