"""What a client of the dev stack must be told, in one place: the ``SAGALOG_*`` variables.

``sagalog dev up`` and ``sagalog dev env`` print this environment for ``eval``, the
integration tests build their ``ClientSettings`` from it, and a service of a secure
stack gets its own variant (its SCRAM user, or its client certificate). The
replication profile lives here too: production's default is 3 replicas with min ISR
2 (``ClientSettings``), and a one-broker dev stack can only hold 1/1. This is the one
place that overrides it.
"""

from __future__ import annotations

from pathlib import Path

from sagalog.devstack.certificates import CertificateFiles
from sagalog.devstack.credentials import SCRAM_MECHANISM, ScramCredential
from sagalog.devstack.nodes import KafkaNode, bootstrap_servers
from sagalog.settings import ClientSettings


def replication_profile(brokers: int) -> tuple[int, int]:
    """``(replication factor, min.insync.replicas)`` for a cluster of ``brokers``.

    Three brokers get production's 3/2: a write with acks=all survives one broker
    down, and the tests see what production sees. One broker can only hold 1/1.
    """
    if brokers >= 3:
        return 3, 2
    return brokers, 1


def variable(field: str) -> str:
    """The environment variable ``ClientSettings`` reads ``field`` from.

    Raises:
        KeyError: ``ClientSettings`` has no such field (a renamed setting must fail
            here, in the unit tests, not in a shell that silently ignores it).
    """
    if field not in ClientSettings.model_fields:
        raise KeyError(f"ClientSettings has no field {field!r}")
    prefix = str(ClientSettings.model_config.get("env_prefix", ""))
    return f"{prefix}{field}".upper()


def client_environment(
    *,
    nodes: tuple[KafkaNode, ...],
    secure: bool,
    schema_registry_url: str,
    ca_certificate: Path | None = None,
    scram: ScramCredential | None = None,
    certificate: CertificateFiles | None = None,
    registry_login: ScramCredential | None = None,
) -> dict[str, str]:
    """Every ``SAGALOG_*`` variable a client of this stack needs, by variable name.

    Args:
        nodes: the stack's Kafka nodes (all of them are in the bootstrap list).
        secure: whether the stack is the secure variant.
        schema_registry_url: the registry's Confluent-compatible API.
        ca_certificate: the stack's CA (secure only).
        scram: connect over SASL_SSL as this user (secure only).
        certificate: connect over mTLS with this certificate instead (secure only).
        registry_login: basic-auth user of the registry (secure only).

    Raises:
        ValueError: a secure stack without a way to authenticate, or both ways at once.
    """
    replicas, min_isr = replication_profile(len(nodes))
    environment = {
        variable("schema_registry_url"): schema_registry_url,
        variable("replication_factor"): str(replicas),
        variable("min_insync_replicas"): str(min_isr),
    }
    if not secure:
        return {variable("bootstrap_servers"): bootstrap_servers(nodes), **environment}
    if (scram is None) == (certificate is None) or ca_certificate is None:
        raise ValueError("a secure stack's client needs the CA and either SCRAM or a certificate")
    if certificate is not None:
        environment |= {
            variable("bootstrap_servers"): bootstrap_servers(nodes, mtls=True),
            variable("security_protocol"): "SSL",
            variable("ssl_certificate_location"): str(certificate.certificate),
            variable("ssl_key_location"): str(certificate.key),
        }
    elif scram is not None:
        environment |= {
            variable("bootstrap_servers"): bootstrap_servers(nodes),
            variable("security_protocol"): "SASL_SSL",
            variable("sasl_mechanism"): SCRAM_MECHANISM,
            variable("sasl_username"): scram.username,
            variable("sasl_password"): scram.password.get_secret_value(),
        }
    environment[variable("ssl_ca_location")] = str(ca_certificate)
    if registry_login is not None:
        environment |= {
            variable("schema_registry_username"): registry_login.username,
            variable("schema_registry_password"): registry_login.password.get_secret_value(),
        }
    return dict(sorted(environment.items(), key=lambda item: _ORDER.index(item[0])))


_ORDER = [
    variable(field)
    for field in (
        "bootstrap_servers",
        "schema_registry_url",
        "replication_factor",
        "min_insync_replicas",
        "security_protocol",
        "sasl_mechanism",
        "sasl_username",
        "sasl_password",
        "ssl_ca_location",
        "ssl_certificate_location",
        "ssl_key_location",
        "schema_registry_username",
        "schema_registry_password",
    )
]


def admin_kafka_config(*, admin: ScramCredential, ca_certificate: Path) -> dict[str, str]:
    """librdkafka settings of the secure stack's admin, for the stack's own probes."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.username": admin.username,
        "sasl.password": admin.password.get_secret_value(),
        "ssl.ca.location": str(ca_certificate),
    }


def export_lines(environment: dict[str, str]) -> list[str]:
    """``export NAME=value`` lines for ``eval``; values are single-quoted for the shell."""
    return [f"export {name}={_quote(value)}" for name, value in environment.items()]


def _quote(value: str) -> str:
    """Shell-quote only when needed, so the common case stays readable."""
    if value and all(c.isalnum() or c in "@%+=:,./-_" for c in value):
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"
