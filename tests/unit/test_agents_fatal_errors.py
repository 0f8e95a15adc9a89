"""Which librdkafka errors end an agent process (exit 70, to be restarted)."""

from __future__ import annotations

from confluent_kafka import KafkaError

from sagalog.agents.exceptions import is_fatal


def test_a_fatal_consumer_error_as_consume_delivers_it_ends_the_agent() -> None:
    # What a static member fenced after a broker restart looks like from consume():
    # code _FATAL, whose fatal() flag is not set.
    assert is_fatal(KafkaError(KafkaError._FATAL, "Static consumer fenced"))
    assert is_fatal(KafkaError(KafkaError.FENCED_INSTANCE_ID, "fenced", fatal=True))


def test_transient_errors_do_not() -> None:
    assert not is_fatal(KafkaError(KafkaError._TRANSPORT, "broker down"))
    assert not is_fatal(KafkaError(KafkaError._ALL_BROKERS_DOWN))
