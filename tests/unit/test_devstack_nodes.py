"""Port derivation of the nodes and the recorded shape of a stack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagalog.devstack.nodes import bootstrap_servers, kafka_nodes
from sagalog.devstack.settings import DevStackSettings
from sagalog.devstack.shape import StackShape, decide_shape, read_shape, write_shape
from sagalog.errors import ConfigurationError, LocalStackError

STATE = Path("/state")


def _settings(**fields: object) -> DevStackSettings:
    return DevStackSettings(state_dir=STATE, **fields)  # type: ignore[arg-type]


def test_one_broker_keeps_the_name_kafka_and_the_configured_ports() -> None:
    (node,) = kafka_nodes(_settings(kafka_port=19092, controller_port=19093), StackShape())
    assert (node.node_id, node.component) == (1, "kafka")
    assert (node.client_port, node.controller_port, node.mtls_port) == (19092, 19093, 0)
    assert node.advertised_port == 19092


def test_three_brokers_step_by_100_and_the_mtls_port_is_the_client_port_plus_10() -> None:
    nodes = kafka_nodes(_settings(), StackShape(brokers=3, secure=True))
    assert [n.component for n in nodes] == ["kafka-1", "kafka-2", "kafka-3"]
    assert [(n.client_port, n.controller_port, n.mtls_port) for n in nodes] == [
        (9092, 9093, 9102),
        (9192, 9193, 9202),
        (9292, 9293, 9302),
    ]
    assert bootstrap_servers(nodes) == "127.0.0.1:9092,127.0.0.1:9192,127.0.0.1:9292"
    assert bootstrap_servers(nodes, mtls=True) == "127.0.0.1:9102,127.0.0.1:9202,127.0.0.1:9302"


def test_the_step_and_offset_are_settings() -> None:
    nodes = kafka_nodes(
        _settings(kafka_port=17092, controller_port=17093, node_port_step=10, mtls_port_offset=5),
        StackShape(brokers=3, secure=True),
    )
    assert [(n.client_port, n.controller_port, n.mtls_port) for n in nodes] == [
        (17092, 17093, 17097),
        (17102, 17103, 17107),
        (17112, 17113, 17117),
    ]


def test_every_node_serves_metrics_on_its_client_port_plus_the_offset() -> None:
    nodes = kafka_nodes(_settings(), StackShape(brokers=3))
    assert [n.metrics_port for n in nodes] == [9404, 9504, 9604]
    assert (9404, "SAGALOG_DEV_METRICS_PORT_OFFSET") in nodes[0].ports
    (alone,) = kafka_nodes(_settings(kafka_port=29092, metrics_port_offset=0), StackShape())
    assert alone.metrics_port == 0
    assert all(setting != "SAGALOG_DEV_METRICS_PORT_OFFSET" for _, setting in alone.ports)


def test_colliding_node_ports_are_refused_with_the_settings_to_change() -> None:
    with pytest.raises(ConfigurationError, match="SAGALOG_DEV_NODE_PORT_STEP"):
        kafka_nodes(_settings(node_port_step=1), StackShape(brokers=3))


def test_the_chaos_proxy_port_is_for_one_broker_only() -> None:
    (node,) = kafka_nodes(_settings(kafka_advertised_port=29094), StackShape())
    assert node.advertised_port == 29094
    with pytest.raises(ConfigurationError, match="one broker only"):
        kafka_nodes(_settings(kafka_advertised_port=29094), StackShape(brokers=3))


def test_only_one_or_three_brokers() -> None:
    for count in (0, 2, 4):
        with pytest.raises(ConfigurationError, match="1 or 3 brokers"):
            StackShape(brokers=count)


def test_the_shape_is_recorded_and_read_back(tmp_path: Path) -> None:
    assert read_shape(tmp_path) is None
    write_shape(tmp_path, StackShape(brokers=3, secure=True))
    assert json.loads((tmp_path / "stack.json").read_text()) == {"brokers": 3, "secure": True}
    assert read_shape(tmp_path) == StackShape(brokers=3, secure=True)


def test_a_state_dir_from_before_shapes_reads_as_one_plaintext_broker(tmp_path: Path) -> None:
    (tmp_path / "kafka" / "data").mkdir(parents=True)
    (tmp_path / "kafka" / "data" / "meta.properties").write_text("cluster.id=x\n")
    assert read_shape(tmp_path) == StackShape()


def test_no_flags_take_the_recorded_shape_and_a_new_dir_the_default() -> None:
    recorded = StackShape(brokers=3, secure=True)
    assert (
        decide_shape(
            requested_brokers=None, requested_secure=None, stored=recorded, state_dir=STATE
        )
        == recorded
    )
    assert (
        decide_shape(requested_brokers=None, requested_secure=None, stored=None, state_dir=STATE)
        == StackShape()
    )
    assert decide_shape(
        requested_brokers=3, requested_secure=None, stored=None, state_dir=STATE
    ) == StackShape(brokers=3)


def test_asking_another_shape_of_a_used_state_dir_says_what_to_do() -> None:
    with pytest.raises(LocalStackError) as refused:
        decide_shape(
            requested_brokers=3, requested_secure=True, stored=StackShape(), state_dir=STATE
        )
    message = str(refused.value)
    assert "created as 1 broker, plaintext" in message
    assert "cannot start as 3 brokers, secure" in message
    assert "SAGALOG_DEV_STATE_DIR" in message and "sagalog dev down" in message
    assert "sagalog dev up --brokers 3 --secure" in message
    assert refused.value.exit_code == 3


def test_a_damaged_shape_file_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text('{"brokers": 2, "secure": false}')
    with pytest.raises(LocalStackError, match=r"stack\.json"):
        read_shape(tmp_path)


def test_a_placement_moves_nodes_off_loopback_for_listeners_quorum_and_bootstrap() -> None:
    """The chaos suite's namespaces: each node on its own address, started under a prefix."""
    from sagalog.devstack.commands import kafka_server_properties
    from sagalog.devstack.nodes import NodePlacement

    hosts = {1: "10.231.7.11", 2: "10.231.7.12", 3: "10.231.7.13"}
    placement = NodePlacement(
        hosts=hosts, prefixes={i: ("ip", "netns", "exec", f"sgf-kafka-{i}") for i in hosts}
    )
    nodes = kafka_nodes(_settings(), StackShape(brokers=3), placement)
    assert [n.host for n in nodes] == list(hosts.values())
    assert nodes[1].launch_prefix == ("ip", "netns", "exec", "sgf-kafka-2")
    assert bootstrap_servers(nodes) == "10.231.7.11:9092,10.231.7.12:9192,10.231.7.13:9292"
    properties = kafka_server_properties(node=nodes[0], nodes=nodes, data_dir=STATE, tls=None)
    assert properties["controller.quorum.voters"] == (
        "1@10.231.7.11:9093,2@10.231.7.12:9193,3@10.231.7.13:9293"
    )
    assert properties["listeners"] == "PLAINTEXT://10.231.7.11:9092,CONTROLLER://10.231.7.11:9093"
    assert properties["advertised.listeners"] == "PLAINTEXT://10.231.7.11:9092"
    (alone,) = kafka_nodes(_settings(), StackShape())
    assert (alone.host, alone.launch_prefix) == ("127.0.0.1", ())


def test_a_placed_registry_is_named_by_the_url_every_client_gets(tmp_path: Path) -> None:
    """A client in a namespace (the fencing round's tracker) reaches the registry on the
    bridge's end; a stack without a placement keeps it on loopback."""
    from sagalog.devstack import DevStackSettings, LocalStack
    from sagalog.devstack.nodes import NodePlacement

    settings = DevStackSettings(state_dir=tmp_path, kafka_port=34092, registry_port=34081)
    placed = LocalStack(settings, placement=NodePlacement(registry_host="10.231.7.1"))
    assert placed.schema_registry_url == "http://10.231.7.1:34081/apis/ccompat/v7"
    environment = placed.client_environment()
    assert environment["SAGALOG_SCHEMA_REGISTRY_URL"] == placed.schema_registry_url
    assert LocalStack(settings).schema_registry_url == settings.schema_registry_url
