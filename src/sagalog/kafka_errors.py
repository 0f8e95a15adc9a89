"""librdkafka error codes that mean the same thing to every sagalog client.

Defined here once, below the agents and the tracker, which both run transactional
producers and must tell "another producer took this ``transactional.id``" from a
broker that is merely away.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

#: A producer whose transactional id a newer producer initialized: it may send nothing more.
FENCED_PRODUCER = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    }
)

#: What a client request raises when the broker did not answer in time: it refuses nothing.
NO_ANSWER = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    }
)
