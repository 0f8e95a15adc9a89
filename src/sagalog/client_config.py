"""Every client family's configuration, built from one ``ClientSettings``.

sagalog talks to Kafka through three libraries: librdkafka (confluent-kafka:
agents, publishers, admin, replay, audit, the tracker's sink), aiokafka (inside
faust, the tracker's consumer and changelogs) and the schema-registry client. Each
spells security differently (``sasl.username`` vs ``sasl_plain_username``, a CA
file vs an ``ssl.SSLContext``). This module is the only place that translates, so a
cluster that one client reaches, every client reaches: a secured cluster missed by
one family (the tracker once joined with the bootstrap servers alone) cannot
happen field by field.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sagalog.settings import ClientSettings

#: What every producer sagalog builds sets, and only producers: a consumer given any
#: of these ignores it and logs a CONFWARN, so they stay out of ``librdkafka``.
PRODUCER_ONLY: dict[str, Any] = {
    # A write is acknowledged only once ``min.insync.replicas`` replicas hold it, and a
    # retried send is never a duplicate.
    "acks": "all",
    "enable.idempotence": True,
    # The Java client's partitioner (murmur2), also aiokafka's and so faust's:
    # librdkafka's default (crc32) would send one workflow id to a different
    # partition than the tracker does, breaking "one workflow, one partition".
    # Every producer must carry it, which is why none is built from ``librdkafka``.
    "partitioner": "murmur2_random",
}


def librdkafka(settings: ClientSettings, **overrides: Any) -> dict[str, Any]:
    """What every librdkafka (confluent-kafka) client shares: consumers and admin use it
    as it is, producers through ``producer``.

    Only connection and security properties belong here: librdkafka warns about a
    producer property given to a consumer (and the reverse) on every construction.
    """
    config: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": settings.security_protocol,
        "socket.connection.setup.timeout.ms": int(settings.connect_timeout_s * 1000),
    }
    if settings.sasl_mechanism:
        config["sasl.mechanism"] = settings.sasl_mechanism
    if settings.sasl_username:
        config["sasl.username"] = settings.sasl_username
    if settings.sasl_password:
        config["sasl.password"] = settings.sasl_password.get_secret_value()
    if settings.ssl_ca_location:
        config["ssl.ca.location"] = settings.ssl_ca_location
    if settings.ssl_certificate_location:
        config["ssl.certificate.location"] = settings.ssl_certificate_location
    if settings.ssl_key_location:
        config["ssl.key.location"] = settings.ssl_key_location
    if settings.ssl_key_password:
        config["ssl.key.password"] = settings.ssl_key_password.get_secret_value()
    config.update(overrides)
    return config


def producer(settings: ClientSettings, **overrides: Any) -> dict[str, Any]:
    """A librdkafka producer: ``acks=all``, idempotent and partitioned as Java's client
    is, unless ``overrides`` says otherwise."""
    config = librdkafka(settings, **PRODUCER_ONLY)
    config.update(overrides)
    return config


def registry(settings: ClientSettings) -> dict[str, Any]:
    """``confluent_kafka.schema_registry`` client configuration, with bounded retries.

    An ``https://`` registry is verified against ``ssl_ca_location`` when one is set
    (the same private CA usually signs the brokers and the registry); a client
    certificate is presented when mTLS is configured.
    """
    config: dict[str, Any] = {
        "url": settings.schema_registry_url,
        "timeout": settings.connect_timeout_s,
        "max.retries": 2,
    }
    if settings.schema_registry_username and settings.schema_registry_password:
        config["basic.auth.user.info"] = (
            f"{settings.schema_registry_username}:"
            f"{settings.schema_registry_password.get_secret_value()}"
        )
    if settings.schema_registry_url.startswith("https://"):
        if settings.ssl_ca_location:
            config["ssl.ca.location"] = settings.ssl_ca_location
        if settings.ssl_certificate_location and settings.ssl_key_location:
            config["ssl.certificate.location"] = settings.ssl_certificate_location
            config["ssl.key.location"] = settings.ssl_key_location
    return config


def ssl_context(settings: ClientSettings) -> ssl.SSLContext | None:
    """The TLS context aiokafka needs, from the same files librdkafka reads.

    None for the plaintext protocols. Hostnames are verified (the dev stack's broker
    certificates name 127.0.0.1 and localhost), as librdkafka does by default.
    """
    if settings.security_protocol not in ("SSL", "SASL_SSL"):
        return None
    context = ssl.create_default_context(
        purpose=ssl.Purpose.SERVER_AUTH, cafile=settings.ssl_ca_location
    )
    if settings.ssl_certificate_location:
        password = settings.ssl_key_password
        context.load_cert_chain(
            settings.ssl_certificate_location,
            keyfile=settings.ssl_key_location,
            password=password.get_secret_value() if password else None,
        )
    return context


def faust_broker(settings: ClientSettings) -> str:
    """``host1:9092,host2:9092`` as faust wants it: ``kafka://host1:9092;kafka://host2:9092``."""
    return ";".join(f"kafka://{server.strip()}" for server in settings.bootstrap_servers.split(","))


def faust_credentials(settings: ClientSettings) -> Any:
    """faust's ``broker_credentials``: SASL (over TLS or not), TLS alone, or None.

    faust hands them to aiokafka for its consumer, its producer and the admin calls
    that create the changelog topics, so the tracker joins a secured cluster with
    the same principal and trust as the librdkafka clients beside it.
    """
    import faust  # the tracker's dependency; imported here so the CLI stays light

    context = ssl_context(settings)
    if settings.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        return faust.SASLCredentials(
            username=settings.sasl_username,
            password=(
                settings.sasl_password.get_secret_value() if settings.sasl_password else None
            ),
            mechanism=settings.sasl_mechanism or "PLAIN",
            ssl_context=context,
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def principal(settings: ClientSettings) -> str:
    """Who the cluster will see, for error messages: ``User:<name>`` or the certificate.

    Never a secret: the SASL user name, or the client certificate's file when the
    principal comes from its subject, or ANONYMOUS on a plaintext listener.
    """
    if settings.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL") and settings.sasl_username:
        return f"User:{settings.sasl_username}"
    if settings.ssl_certificate_location:
        return f"the subject of {settings.ssl_certificate_location}"
    return "User:ANONYMOUS"


def environment(settings: ClientSettings) -> dict[str, str]:
    """The ``SAGALOG_*`` variables that give a child process these same settings.

    Every service reads them under its own prefix too (see ``ClientSettings``), so a
    launcher (the demo fleet, the chaos suite, a test harness) passes the connection
    once instead of once per service prefix. Secrets are included, as they must be
    for the child to connect: pass the result as an environment, never log it.
    """
    from sagalog.settings import ClientSettings

    values: dict[str, str] = {}
    for name in ClientSettings.model_fields:
        value = getattr(settings, name)
        if value is None:
            continue
        if hasattr(value, "get_secret_value"):
            value = value.get_secret_value()
        values[f"SAGALOG_{name.upper()}"] = str(value)
    return values
