"""Each kind of librdkafka client gets only the properties of its kind.

librdkafka logs a CONFWARN ("... is a producer property and will be ignored by this
consumer instance") for every property of the other kind, on every client it builds:
a newcomer's screen filled with them once, from a partitioner in the shared base.
The property lists below are librdkafka's (CONFIGURATION.md, column P/C) for what
sagalog and its tests set; the last tests ask librdkafka itself, with no broker.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from pydantic import SecretStr

from sagalog import client_config
from sagalog.replay import replay_consumer_config
from sagalog.settings import ClientSettings

REPO = Path(__file__).resolve().parents[2]

PRODUCER_ONLY = frozenset(
    {
        "acks",
        "request.required.acks",
        "enable.idempotence",
        "partitioner",
        "linger.ms",
        "queue.buffering.max.ms",
        "queue.buffering.max.messages",
        "compression.type",
        "batch.size",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "transactional.id",
        "transaction.timeout.ms",
        "retries",
    }
)
CONSUMER_ONLY = frozenset(
    {
        "group.id",
        "group.instance.id",
        "auto.offset.reset",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.partition.eof",
        "isolation.level",
        "fetch.wait.max.ms",
        "fetch.max.bytes",
        "fetch.min.bytes",
        "max.partition.fetch.bytes",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "partition.assignment.strategy",
    }
)

SETTINGS = {
    "plaintext": ClientSettings(),
    "sasl": ClientSettings(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password=SecretStr("p"),
    ),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_the_shared_base_holds_no_producer_property(name: str) -> None:
    assert not PRODUCER_ONLY & set(SETTINGS[name].kafka_config())


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_the_producer_config_holds_no_consumer_property(name: str) -> None:
    assert not CONSUMER_ONLY & set(SETTINGS[name].producer_config())


def test_every_producer_partitions_as_the_java_client_does() -> None:
    """aiokafka (faust, the tracker) hashes keys with murmur2: so must every producer."""
    assert ClientSettings().producer_config()["partitioner"] == "murmur2_random"
    assert set(client_config.PRODUCER_ONLY) <= PRODUCER_ONLY


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _confwarns(make: Any, config: dict[str, Any]) -> list[str]:
    """librdkafka's CONFWARN lines on building a client from ``config``, with no broker:
    without ``bootstrap.servers`` it connects nowhere (and says so, which is not ours)."""
    handler = _Lines()
    logger = logging.getLogger(f"{__name__}.{make.__name__}")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        config = {k: v for k, v in config.items() if k != "bootstrap.servers"}
        client = make({**config, "logger": logger})
        # librdkafka queues its logs; a consumer hands them over on close, a producer on flush.
        if isinstance(client, Consumer):
            client.close()
        else:
            client.flush(0)
    finally:
        logger.removeHandler(handler)
    return [
        line for line in handler.lines if "CONFWARN" in line and "bootstrap.servers" not in line
    ]


def test_the_probe_sees_a_misplaced_property() -> None:
    """The test below would pass on a probe that hears nothing: it must hear this."""
    config = ClientSettings().kafka_config(**{"group.id": "g", "linger.ms": 5})
    assert any(
        "linger.ms" in line or "queue.buffering" in line for line in _confwarns(Consumer, config)
    )


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_librdkafka_warns_about_no_property_sagalog_gives_a_client(name: str) -> None:
    settings = SETTINGS[name]
    consumers = {
        "a group member": settings.kafka_config(**{"group.id": "g"}),
        "a replay reader": replay_consumer_config(settings),
    }
    producers = {
        "a producer": settings.producer_config(),
        "a transactional producer": settings.producer_config(**{"transactional.id": "t"}),
    }
    warned = {what: _confwarns(Consumer, config) for what, config in consumers.items()}
    warned |= {what: _confwarns(Producer, config) for what, config in producers.items()}
    assert warned == {what: [] for what in warned}


def _producers_built_from_the_base(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        first = node.args[0]
        if (
            name == "Producer"
            and isinstance(first, ast.Call)
            and getattr(first.func, "attr", None) == "kafka_config"
        ):
            lines.append(node.lineno)
    return lines


def test_no_producer_is_built_from_the_consumers_config() -> None:
    """``kafka_config`` lacks the partitioner: a producer built from it would send a
    workflow's events to other partitions than the tracker's."""
    found = {
        str(path.relative_to(REPO)): lines
        for root in ("src", "services", "tests")
        for path in sorted((REPO / root).rglob("*.py"))
        if (lines := _producers_built_from_the_base(path))
    }
    assert found == {}
