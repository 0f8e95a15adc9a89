"""Settings every agent service shares; a service subclasses them with its own prefix.

Example:
    class BudgetAgentSettings(AgentSettings):
        model_config = SettingsConfigDict(env_prefix="BUDGET_AGENT_")
        ledger_url: str = "http://127.0.0.1:8701"
        ledger_token: SecretStr = SecretStr("")
"""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sagalog.settings import ServiceSettings


def _default_instance_id() -> str:
    return socket.gethostname()


class AgentSettings(ServiceSettings):
    """One agent instance's runtime settings (env prefix ``SAGALOG_AGENT_`` by default).

    The Kafka and registry connection fields are inherited from ``ClientSettings``, so
    ``SAGALOG_AGENT_BOOTSTRAP_SERVERS`` (or the service's own prefix) points an agent at
    a cluster.
    """

    model_config = SettingsConfigDict(env_prefix="SAGALOG_AGENT_", env_file=".env", extra="ignore")

    instance_id: str = Field(
        default_factory=_default_instance_id,
        description="Stable per instance: the transactional.id derives from it, so a "
        "restarted instance fences its own zombie. Two live instances must differ.",
    )
    data_dir: Path = Field(default=Path("./data"), description="Local RocksDB state.")
    group_id: str | None = Field(
        default=None, description="Consumer group; defaults to sagalog-agent-<agent name>."
    )
    max_in_flight: int = Field(default=64, ge=1, description="Handlers running at once.")
    max_batch: int = Field(default=500, ge=1, description="Records per transaction.")
    poll_timeout_s: float = Field(
        default=0.05, gt=0, description="Longest wait for a record before the loop goes round."
    )
    batch_interval_s: float = Field(
        default=0.05,
        ge=0,
        description="At most one batch (one transaction) starts per this interval: an "
        "idle agent handles a record at once, a busy one lets records gather for up to "
        "this long, so its transactions grow instead of multiplying.",
    )
    queued_fetch_pause_ms: int = Field(
        default=0,
        ge=0,
        le=1000,
        description="While records the agent has not taken yet wait in its consumer's "
        "queue, fetch nothing for this long (librdkafka's fetch.queue.backoff.ms, with "
        "queued.min.messages 1). Each commit on the workflow topic answers every agent's "
        "waiting fetch, so a busy agent fetches many times per batch. A pause trades the "
        "hand-off's tail for the broker's CPU (docs/agents.md, 'Fetch pacing'). 0: "
        "fetch whenever records become readable.",
    )
    step_timeout_s: float = Field(default=30.0, gt=0, description="Default per-step timeout.")
    max_attempts: int = Field(default=5, ge=1)
    retry_base_delay_s: float = Field(default=0.5, ge=0)
    retry_max_delay_s: float = Field(default=60.0, ge=0)
    breaker_failure_threshold: int = Field(default=5, ge=1)
    breaker_open_for_s: float = Field(default=10.0, gt=0)
    breaker_outage_doubt_s: float = Field(
        default=300.0,
        ge=0,
        description="How long a call failing alone, while the dependency answers no one, "
        "is taken for an outage (no attempt spent) before its failures count.",
    )
    rate_limits: dict[str, float] = Field(
        default_factory=dict,
        description="Global calls per second per dependency, across all instances, e.g. "
        '{"ledger": 50}.',
    )
    max_rate_wait_s: float = Field(
        default=1.0,
        ge=0,
        description="Wait this long for a rate token inside a transaction; defer beyond.",
    )
    transaction_timeout_s: float = Field(default=60.0, gt=0)
    open_transaction_after_s: float = Field(
        default=30.0,
        gt=0,
        description="Close a transaction left open on an input partition (its marker lost "
        "in a broker failure) once the partition's stable offset stood still this long.",
    )
    offsets_commit_s: float = Field(
        default=1.0,
        gt=0,
        description="A batch with nothing to produce (every record skipped or a duplicate) "
        "opens no transaction: its offsets ride with the next one, or are committed on "
        "their own once they have waited this long.",
    )
    rebuild_read_ahead_kb: int = Field(
        default=8192,
        ge=64,
        description="How much of each partition the projection's rebuild fetches ahead. "
        "Less lowers the rebuild's memory peak and slows the rebuild down.",
    )
    shutdown_timeout_s: float = Field(default=20.0, gt=0)
    outage_limit_s: float = Field(
        default=300.0,
        gt=0,
        description="How long the agent rides out a broker that does not answer (rebuilding "
        "its clients with backoff, health 'degraded') before it exits 3 (Kafka unreachable).",
    )
    max_rejoins: int = Field(
        default=5,
        ge=0,
        description="In-process rejoins after the consumer was fenced (static membership) "
        "within ten minutes; one more exits 70, as a second live instance with this "
        "instance id would keep fencing this one.",
    )
    deadletter_topic: str = "sagalog.deadletter"
    tracing: bool = Field(
        default=True,
        description="A span per handled event; off, outputs carry the input's traceparent.",
    )
    log_json: bool = True
    log_level: str = Field(default="INFO", description="WARNING drops the per-event lines.")
