"""How sagalog reaches Kafka and the schema registry.

One settings class for every client sagalog builds (CLI, agents, tracker, replay),
read from ``SAGALOG_*`` environment variables or a ``.env`` file. The defaults point
at the embedded local stack (``sagalog dev up``); a user with their own cluster sets
``SAGALOG_BOOTSTRAP_SERVERS`` and ``SAGALOG_SCHEMA_REGISTRY_URL`` (plus SASL/TLS and
registry credentials) and nothing else changes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ClientSettings(BaseSettings):
    """Connection settings shared by every sagalog Kafka and registry client."""

    model_config = SettingsConfigDict(env_prefix="SAGALOG_", env_file=".env", extra="ignore")

    bootstrap_servers: str = "127.0.0.1:9092"
    schema_registry_url: str = Field(
        default="http://127.0.0.1:8081/apis/ccompat/v7",
        description="A Confluent-compatible registry API; for Apicurio, its /apis/ccompat/v7 path.",
    )
    schema_registry_username: str | None = None
    schema_registry_password: SecretStr | None = None
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: str | None = Field(
        default=None, description="PEM file of the CA that signed the brokers' certificates."
    )
    ssl_certificate_location: str | None = Field(
        default=None, description="PEM client certificate, for mTLS (SSL with a client cert)."
    )
    ssl_key_location: str | None = Field(default=None, description="PEM key of that certificate.")
    ssl_key_password: SecretStr | None = None
    replication_factor: int = Field(
        default=3,
        ge=1,
        description="The cluster profile: replicas of every topic sagalog creates (declared "
        "topics without their own, agents' retry topics, the tracker's changelogs).",
    )
    min_insync_replicas: int = Field(
        default=2,
        ge=1,
        description="The cluster profile: min.insync.replicas of those topics; with acks=all "
        "a write is acknowledged once this many replicas have it.",
    )
    connect_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Bound on every wait for the broker or registry to answer; never hang.",
    )
    project_dir: str = Field(
        default=".",
        description="Where schemas/ and topology/ live.",
    )

    def kafka_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka configuration for this cluster, with per-client overrides."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
            # The Java client's partitioner (murmur2), also aiokafka's and so faust's:
            # librdkafka's default (crc32) would send one workflow id to a different
            # partition than the tracker does, breaking "one workflow, one partition".
            "partitioner": "murmur2_random",
            "socket.connection.setup.timeout.ms": int(self.connect_timeout_s * 1000),
        }
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username:
            config["sasl.username"] = self.sasl_username
        if self.sasl_password:
            config["sasl.password"] = self.sasl_password.get_secret_value()
        if self.ssl_ca_location:
            config["ssl.ca.location"] = self.ssl_ca_location
        config.update(overrides)
        return config

    def registry_config(self) -> dict[str, Any]:
        """``confluent_kafka.schema_registry`` client configuration, with bounded retries."""
        config: dict[str, Any] = {
            "url": self.schema_registry_url,
            "timeout": self.connect_timeout_s,
            "max.retries": 2,
        }
        if self.schema_registry_username and self.schema_registry_password:
            config["basic.auth.user.info"] = (
                f"{self.schema_registry_username}:"
                f"{self.schema_registry_password.get_secret_value()}"
            )
        return config
