"""Reaching the Kafka cluster with a bounded wait, and a named cause when it fails.

librdkafka retries forever by design; a person at a terminal or a CI job needs a
clear error after a few seconds instead. Every sagalog command that talks to the
cluster goes through ``connect_admin`` first, so a refused credential is reported
there, before anything is planned or written.
"""

from __future__ import annotations

import collections
import itertools
import logging
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from sagalog.connect_diagnosis import ClientReport, diagnose
from sagalog.errors import ServiceUnavailableError
from sagalog.settings import ClientSettings

#: How long one metadata request may wait before the recorded errors are looked at:
#: a refused login is known after one round trip, so it fails in about a second,
#: not after ``connect_timeout_s``.
_ATTEMPT_S = 1.0
_REPORTS_KEPT = 64
_clients = itertools.count()


class _Recorder(logging.Handler):
    """Keeps librdkafka's last log lines (served by ``poll``) for ``diagnose``."""

    def __init__(self, reports: collections.deque[ClientReport]) -> None:
        super().__init__(level=logging.DEBUG)
        self._reports = reports

    def emit(self, record: logging.LogRecord) -> None:
        self._reports.append(ClientReport(code="LOG", text=record.getMessage()))


def connect_admin(settings: ClientSettings) -> tuple[AdminClient, ClusterMetadata]:
    """An admin client and the cluster's metadata, or a clear error within the timeout.

    Raises:
        AuthenticationError: the brokers refused the credentials (wrong password, a
            certificate they do not trust, a plaintext client on a TLS listener).
        ServiceUnavailableError: the brokers did not answer within
            ``settings.connect_timeout_s``.
    """
    reports: collections.deque[ClientReport] = collections.deque(maxlen=_REPORTS_KEPT)
    logger = logging.getLogger(f"sagalog.cluster.librdkafka.{next(_clients)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(_Recorder(reports))

    def on_error(error: KafkaError) -> None:
        reports.append(ClientReport(code=error.name(), text=error.str()))

    admin = AdminClient(settings.kafka_config(error_cb=on_error, logger=logger))
    deadline = time.monotonic() + settings.connect_timeout_s
    while True:
        remaining = deadline - time.monotonic()
        try:
            return admin, admin.list_topics(timeout=max(min(_ATTEMPT_S, remaining), 0.1))
        except KafkaException as exc:
            admin.poll(0)  # serves the error callbacks and log lines of this attempt
            refused = diagnose(settings, list(reports))
            if refused is not None:
                raise refused from exc
            if time.monotonic() >= deadline:
                raise ServiceUnavailableError(
                    f"Kafka at {settings.bootstrap_servers} did not answer within "
                    f"{settings.connect_timeout_s:g}s "
                    f"({exc.args[0].str() if exc.args else exc}); start the local stack "
                    "with `sagalog dev up` or set SAGALOG_BOOTSTRAP_SERVERS"
                ) from exc


def profile_config(settings: ClientSettings) -> dict[str, str]:
    """Topic configs the cluster profile gives every topic sagalog creates by itself."""
    return {"min.insync.replicas": str(settings.min_insync_replicas)}


def internal_topic(
    settings: ClientSettings, name: str, *, partitions: int, config: dict[str, str]
) -> NewTopic:
    """A topic a service creates for itself (retry, clock, assignor), on the cluster profile.

    Internal topics hold state a restart needs (pending retries, the last tick, the
    tracker's group leader), so they get the replication and min ISR of the declared
    topics, never the broker's default of one replica.
    """
    return NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=settings.replication_factor,
        config={**profile_config(settings), **config},
    )
