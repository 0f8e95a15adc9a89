"""How an agent instance stops, or rebuilds its clients, when Kafka says it must.

Each error carries the exit code a supervisor sees (``Agent`` runs document them);
the first three are cured in-process by new clients first (see ``recovery``).
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from sagalog.errors import SagalogError
from sagalog.exit_codes import ExitCode

BROKER_AWAY = {KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT}


class ZombieFenced(SagalogError):
    """Another instance with this ``transactional.id`` took over; this one must stop.

    Give every live instance its own ``SAGALOG_AGENT_INSTANCE_ID``. It exits
    ``FENCED`` (7), which a supervisor must not restart: the restarted zombie would
    fence the instance that replaced it, and the two would take turns.
    """

    exit_code = ExitCode.FENCED


class ConsumerFailed(SagalogError):
    """The consumer hit a fatal error (librdkafka cannot go on with it).

    Seen when the broker restarts under a static member: the consumer comes back
    "fenced by other consumer with same group.instance.id" (itself, rejoining), and a
    fatal consumer refuses every later call, so an agent that only logged it would
    sit alive and idle while its workflows waited. The worker builds new clients
    (``recovery``); it exits 70 (``RESTART``) with this only past ``max_rejoins``.
    """

    exit_code = ExitCode.RESTART


class ClientHung(SagalogError):
    """A librdkafka call blocked past its bound; the worker abandons it and builds new
    clients (exit 70 only if that, too, fails for ``outage_limit_s``)."""

    exit_code = ExitCode.RESTART


class TransactionTimedOut(SagalogError):
    """The coordinator aborted a transaction that outlived its timeout; new clients cure it."""

    exit_code = ExitCode.RESTART


def is_fatal(error: KafkaError) -> bool:
    """A consumer's fatal error arrives as ``_FATAL`` (whose ``fatal()`` is False) or flagged."""
    return bool(error.fatal()) or error.code() == KafkaError._FATAL
