"""The gateway's settings: one class, env prefix ``GATEWAY_``.

Connection fields come from ``ClientSettings`` (``GATEWAY_BOOTSTRAP_SERVERS``,
``GATEWAY_SCHEMA_REGISTRY_URL``, ``GATEWAY_PROJECT_DIR`` and so on), so the gateway
points at a cluster the way every sagalog client does.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from sagalog.settings import ClientSettings
from sagalog.topic_names import records_changelog


class WebhookSourceSettings(BaseModel):
    """One outside system allowed to call webhooks: its secret and the kinds it may send."""

    model_config = ConfigDict(extra="forbid")

    secret: SecretStr = Field(min_length=16)
    kinds: list[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")]] = Field(
        default_factory=list, description="The webhook kinds it may send; empty: any."
    )


def _default_instance_id() -> str:
    return socket.gethostname()


class GatewaySettings(ClientSettings):
    """One gateway process. Several may run side by side, each with its own ``data_dir``."""

    model_config = SettingsConfigDict(env_prefix="GATEWAY_", env_file=".env", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    api_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        description="Keys accepted in the X-API-Key header, comma-separated in the "
        "environment (GATEWAY_API_KEYS=k1,k2) so a key can be rotated without downtime.",
    )
    read_only_api_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        description="Keys that read everything (the API's GETs, every console page) and act "
        "on nothing: a POST with one is refused with 403. Comma-separated in the environment.",
    )
    console_session_s: int = Field(
        default=8 * 3600,
        ge=60,
        description="How long a console sign-in lasts; then the browser is sent to sign in again.",
    )
    console_secure_cookie: bool = Field(
        default=False,
        description="Mark the console's cookies Secure even on plain HTTP requests: set it "
        "when a TLS proxy in front does not tell the gateway the request came over HTTPS "
        "(over HTTPS they are Secure anyway).",
    )
    gate_secret: SecretStr = Field(
        default=SecretStr(""),
        description="Key of the HMAC gate tokens: the tracker's SAGALOG_TRACKER_GATE_SECRET.",
    )
    tracker_app_id: str = Field(
        default="saga-tracker",
        description="The tracker's faust app id; its records changelog is "
        "<tracker_app_id>-records-changelog.",
    )
    transitions_topic: str = "sagalog.transitions"
    deadletter_topics: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="The dead-letter topics `sagalog dlq` reads, comma-separated in the "
        "environment; empty: those of the topology's agents and "
        "trackers (sagalog.deadletter by default).",
    )
    dead_letter_read_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="How long reading dead letters (or the replays of them) may wait for "
        "a record the broker said is there before the request answers 503.",
    )
    data_dir: Path = Field(
        default=Path("./data/gateway"),
        description="The read model's RocksDB; one directory per gateway process, never shared.",
    )
    instance_id: str = Field(default_factory=_default_instance_id)
    max_body_bytes: int = Field(
        default=64 * 1024, ge=1024, description="Largest request body accepted (webhooks too)."
    )
    webhook_source: str = Field(
        default="sagalog/gateway",
        description="WebhookReceived.source when the caller sends no X-Webhook-Source header.",
    )
    webhook_sources: dict[str, WebhookSourceSettings] = Field(
        default_factory=dict,
        description='Who may call webhooks, as JSON: {"<source>": {"secret": "...", '
        '"kinds": ["document.filed"]}}. When set, every webhook must name one of them in '
        "X-Webhook-Source and carry its X-Sagalog-Signature; a missing or bad signature is "
        "refused with 401 and nothing is written. Empty (a dev stack): webhooks are taken "
        "unsigned, and the gateway says so at start.",
    )
    webhook_tolerance_s: float = Field(
        default=300.0,
        gt=0,
        description="How far a webhook signature's timestamp may be from the gateway's "
        "clock; a captured call cannot be replayed later than this.",
    )
    lag_interval_s: float = Field(
        default=2.0, gt=0, description="How often the follower asks the broker for its lag."
    )
    publish_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="How long a decision or webhook waits for Kafka's acknowledgement "
        "before the gateway answers 503 with Retry-After (the caller retries it as is).",
    )
    outage_retry_s: float = Field(
        default=30.0,
        gt=0,
        description="The longest wait between the follower's tries to reach a broker that "
        "does not answer (backoff with jitter from 0.5 s); it keeps trying for good.",
    )
    log_level: str = "INFO"
    json_logs: bool = True

    @field_validator("api_keys", "read_only_api_keys", "deadletter_topics", mode="before")
    @classmethod
    def _split_lists(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value

    @property
    def records_changelog(self) -> str:
        return records_changelog(self.tracker_app_id)
