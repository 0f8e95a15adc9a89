"""A Kafka authorization failure as an ``AuthorizationError`` that names who, what and where.

librdkafka reports a missing right as TOPIC_, GROUP_, TRANSACTIONAL_ID_ or
CLUSTER_AUTHORIZATION_FAILED, deep in a delivery report, a consumer error or a
transaction error, and never says as whom the client connected. The person reading
the error needs exactly that: ``User:intake-agent may not WRITE topic 'x'``, and that
the fix is a line in the topology, not a grant by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import KafkaError

from sagalog.errors import AuthorizationError
from sagalog.settings import ClientSettings

_RESOURCE = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
}


def is_authorization_failure(error: KafkaError | None) -> bool:
    return error is not None and error.code() in _RESOURCE


class _Metadata(Protocol):
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...


def topic_denied(client: _Metadata, topic: str, *, timeout: float) -> KafkaError | None:
    """The authorization error for ``topic``, if this principal may not DESCRIBE it.

    The cluster's list of all topics silently leaves out the ones a principal may not
    describe, so "not listed" reads as "does not exist"; asking for the topic by name
    returns TOPIC_AUTHORIZATION_FAILED instead (also for a topic that does not exist:
    a principal without DESCRIBE is not told).
    """
    found = client.list_topics(topic, timeout=timeout).topics.get(topic)
    error = None if found is None else found.error
    return error if is_authorization_failure(error) else None


def principal_of(settings: ClientSettings) -> str:
    """The principal the cluster sees for these settings, as well as the client can tell.

    SASL: ``User:<sasl_username>``. TLS client certificate: the broker's default
    principal is the certificate's subject, ``User:CN=...``. Anything else connects
    as ``User:ANONYMOUS``.
    """
    if settings.sasl_username and settings.security_protocol.startswith("SASL"):
        return f"User:{settings.sasl_username}"
    if settings.ssl_certificate_location and settings.security_protocol in ("SSL", "SASL_SSL"):
        return f"User:{_certificate_subject(settings.ssl_certificate_location)}"
    return "User:ANONYMOUS"


def _certificate_subject(path: str) -> str:
    try:
        from cryptography import x509

        certificate = x509.load_pem_x509_certificate(Path(path).read_bytes())
        return certificate.subject.rfc4514_string()
    except Exception:  # unreadable: still say which certificate it was
        return f"<subject of {path}>"


def authorization_error(
    settings: ClientSettings,
    error: KafkaError,
    *,
    operation: str,
    resource: str,
) -> AuthorizationError:
    """The error to raise for ``error``: who may not do ``operation`` on ``resource``.

    Args:
        operation: the ACL operation that was refused (READ, WRITE, ...).
        resource: its name (the topic, group or transactional id); the kind comes from
            the error code.
    """
    kind = _RESOURCE.get(error.code(), "resource")
    where = "" if kind == "cluster" else f" '{resource}'"
    unsure = " (or it does not exist: the cluster does not say)" if operation == "DESCRIBE" else ""
    return AuthorizationError(
        f"{principal_of(settings)} may not {operation} {kind}{where}{unsure} on "
        f"{settings.bootstrap_servers} ({error.name()}: {error.str()}). Rights follow from "
        "the topology: name the topic in the flow or in topology/services.yaml, check "
        "`sagalog topology plan`, and run `sagalog topology apply`"
    )
