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
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from sagalog import client_config
from sagalog.blobs.store import BlobStore, LocalBlobStore
from sagalog.errors import ConfigurationError


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
    blob_dir: str | None = Field(
        default=None,
        description="The blob store (a directory every writer and reader of the same "
        "workflows shares): model payloads over blob_threshold_bytes live there, the "
        "events hold their sha256 (sagalog.blobs). Unset: payloads stay inline, and an "
        "audit says it checked no blob.",
    )
    blob_threshold_bytes: int = Field(
        default=16 * 1024,
        ge=0,
        description="A payload in a field that admits a blob reference is kept inline up "
        "to this size, and as a blob above it.",
    )

    personal_data_key_file: str | None = Field(
        default=None,
        description="The naming secret of personal data (sagalog.personal), a file "
        "every writer and entitled reader of the same workflows shares: fields a schema "
        "marks sagalog.personal are written encrypted per data subject, and `sagalog "
        "erase` makes a subject's unreadable. Unset: they are written in clear, with a "
        "warning.",
    )
    personal_data_kek_file: str | None = Field(
        default=None,
        description="The KEK set of personal data: JSON naming the key-encryption keys "
        "that wrap subjects' data keys and which one is current (`sagalog keys add-kek` "
        "writes it, `sagalog keys rotate` re-wraps under its current KEK; "
        "docs/personal-data.md). Unset: the wrapping key is the one derived from "
        "personal_data_key_file (KEK 'v0'), as before KEK sets.",
    )

    blob_url: str | None = Field(
        default=None,
        description="The blob store as an S3-compatible bucket, s3://<bucket>[/<prefix>], "
        "instead of blob_dir; credentials come from boto3's chain (AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY, a profile, an instance role).",
    )
    blob_endpoint_url: str | None = Field(
        default=None,
        description="The S3 API of a store other than AWS (MinIO, Ceph, R2), e.g. "
        "http://minio:9000.",
    )

    def blob_store(self) -> BlobStore | None:
        """The blob store ``blob_url`` or ``blob_dir`` names, or None when none is.

        Raises:
            ConfigurationError: both are set, or the URL is not an s3:// URL.
        """
        if self.blob_url and self.blob_dir:
            raise ConfigurationError(
                f"both SAGALOG_BLOB_DIR ({self.blob_dir}) and SAGALOG_BLOB_URL "
                f"({self.blob_url}) are set: a workflow's blobs live in one store; unset one"
            )
        if self.blob_url:
            from sagalog.blobs.s3 import S3BlobStore  # boto3 loads only where it is used

            return S3BlobStore.from_url(self.blob_url, endpoint_url=self.blob_endpoint_url)
        return None if self.blob_dir is None else LocalBlobStore(self.blob_dir)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The service's own prefix first, then each ancestor's, for the fields it declares.

        pydantic-settings reads a class's fields under its own ``env_prefix`` only, so
        ``TrackerSettings`` ignored ``SAGALOG_BOOTSTRAP_SERVERS`` and silently dialled
        127.0.0.1. Here ``SAGALOG_TRACKER_BOOTSTRAP_SERVERS`` wins over
        ``SAGALOG_BOOTSTRAP_SERVERS``, field by field, and a service agent's
        ``BUDGET_AGENT_MAX_ATTEMPTS`` over the runtime's ``SAGALOG_AGENT_MAX_ATTEMPTS``;
        an ancestor's prefix never reaches a field the ancestor does not declare
        (``SAGALOG_APP_ID`` is nobody's).
        """
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings, dotenv_settings]
        seen = {settings_cls.model_config.get("env_prefix", "")}
        for ancestor in settings_cls.__mro__[1:]:
            if not (isinstance(ancestor, type) and issubclass(ancestor, ClientSettings)):
                continue
            prefix = ancestor.model_config.get("env_prefix", "")
            if prefix in seen:
                continue
            seen.add(prefix)
            fields = frozenset(ancestor.model_fields)
            sources.append(_Inherited(EnvSettingsSource(settings_cls, env_prefix=prefix), fields))
            env_file = settings_cls.model_config.get("env_file")
            if env_file:
                dotenv = DotEnvSettingsSource(settings_cls, env_file=env_file, env_prefix=prefix)
                sources.append(_Inherited(dotenv, fields))
        sources.append(file_secret_settings)
        return tuple(sources)

    def kafka_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka configuration for this cluster, for a consumer or an admin client.

        A producer takes ``producer_config`` instead: this one lacks its partitioner.
        """
        return client_config.librdkafka(self, **overrides)

    def producer_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka producer configuration (``client_config.PRODUCER_ONLY`` added)."""
        return client_config.producer(self, **overrides)

    def registry_config(self) -> dict[str, Any]:
        """``confluent_kafka.schema_registry`` client configuration, with bounded retries."""
        return client_config.registry(self)


class ServiceSettings(ClientSettings):
    """What a long-running service that speaks only Kafka adds: its health endpoints.

    The tracker and every agent take these (under their own prefix first, then
    ``SAGALOG_``); the gateway answers the same paths on its own HTTP port.
    """

    health_host: str = Field(default="0.0.0.0", description="Address of the health endpoints.")
    health_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Serve /health/live and /health/ready on this port (0: a free one, "
        "logged at start); unset: not served. Set it where an orchestrator probes.",
    )
    live_bound_s: float = Field(
        default=120.0,
        gt=0,
        description="/health/live fails once the service loop has not gone round for this "
        "long (a deadlock, a blocked event loop); a broker outage does not fail it.",
    )


class _Inherited(PydanticBaseSettingsSource):
    """An ancestor's source, narrowed to the fields that ancestor declares."""

    def __init__(self, source: PydanticBaseSettingsSource, fields: frozenset[str]) -> None:
        super().__init__(source.settings_cls)
        self._source = source
        self._fields = fields

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._source.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        return {name: value for name, value in self._source().items() if name in self._fields}
