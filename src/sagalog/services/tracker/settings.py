"""The saga tracker's settings: one class, env prefix ``SAGALOG_TRACKER_``.

Connection fields come from ``ClientSettings`` (``SAGALOG_TRACKER_BOOTSTRAP_SERVERS``
and so on), so the tracker points at a cluster the way every sagalog client does.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from sagalog.settings import ServiceSettings
from sagalog.topic_names import owned_prefix
from sagalog.tracker.memo import RECORDS_KEPT


def _default_instance_id() -> str:
    return socket.gethostname()


class TrackerSettings(ServiceSettings):
    """One tracker worker. Several workers with the same ``app_id`` share the partitions."""

    model_config = SettingsConfigDict(
        env_prefix="SAGALOG_TRACKER_", env_file=".env", extra="ignore"
    )

    app_id: str = Field(
        default="saga-tracker",
        description="faust application id: the consumer group and the prefix of the "
        "changelog and clock topics. Workers with the same id share the work.",
    )
    instance_id: str = Field(default_factory=_default_instance_id)
    data_dir: Path = Field(
        default=Path("./data/saga-tracker"),
        description="This worker's RocksDB tables; one directory per worker, never shared.",
    )
    flows_dir: Path | None = Field(
        default=None, description="Flow files; defaults to <project_dir>/topology/flows."
    )
    gate_secret: SecretStr = Field(
        default=SecretStr(""),
        description="Key of the HMAC resumption tokens of human gates. Required; every "
        "worker and the gateway must share it.",
    )
    clock: Literal["wall", "virtual"] = Field(
        default="wall",
        description="wall: the machine's clock. virtual: time moves only when a tick "
        "arrives on the clock topic (tests and demos: days pass in seconds).",
    )
    tick_interval_s: float = Field(
        default=1.0, gt=0, description="How often a wall-clock worker looks for due timers."
    )
    timers_per_tick: int = Field(
        default=5_000, ge=1, description="Most timers fired per partition per tick."
    )
    transitions_topic: str = "sagalog.transitions"
    alerts_topic: str = "sagalog.alerts"
    deadletter_topic: str = "sagalog.deadletter"
    admission: dict[str, int] = Field(
        default_factory=dict,
        description='Most active workflows per flow, e.g. {"procurement": 500}. Each '
        "partition gets an equal share (rounded up): the limit needs no coordination "
        "between workers.",
    )
    compensation_attempts: int = Field(
        default=5, ge=1, description="Requests of a stuck compensation before it is given up."
    )
    compensation_max_wait_s: float = Field(
        default=86_400.0, gt=0, description="Longest wait for one compensation attempt."
    )
    sla_interval_s: float = Field(
        default=60.0, gt=0, description="How often SLA rules are evaluated (tracker time)."
    )
    batch_max: int = Field(
        default=1_000, ge=1, description="Most records decided before one flush of publishes."
    )
    batch_linger_s: float = Field(
        default=0.0,
        ge=0,
        le=5,
        description="How long every batch's first record waits for more before the batch "
        "is decided, idle or not (0: no wait beyond batch_interval_s). More batching than "
        "the interval buys, at the cost of every tracker hand-off, idle or busy "
        "(docs/tracker.md, 'Batches').",
    )
    batch_interval_s: float = Field(
        default=0.1,
        ge=0,
        le=5,
        description="At most one batch starts per this interval, as an agent's "
        "batch_interval_s: a busy tracker's batches grow instead of multiplying (each "
        "costs a transaction per partition and writes a workflow's record once however "
        "many of its events it holds), while the first record after a quiet spell is "
        "decided at once (0: every batch starts as soon as the last one ended). Longer "
        "cuts the tracker's and the broker's CPU and records per saga and lengthens the "
        "tracker's hand-offs (docs/tracker.md, 'Batches').",
    )
    records_kept: int = Field(
        default=RECORDS_KEPT,
        ge=0,
        description="Decoded workflow records remembered between batches (0: none): a "
        "workflow's next event then skips the RocksDB read and the JSON parse. Size it "
        "above the workflows in flight (rate x the time a saga runs); ~9 KB each.",
    )
    gc_young_threshold: int = Field(
        default=10_000,
        ge=0,
        description="Allocations between two collections of Python's youngest generation "
        "(0: Python's default, 700). Next to nothing the tracker allocates per event is "
        "in a reference cycle, so frequent collections only traverse the heap for nothing.",
    )
    compression_type: Literal["none", "lz4", "zstd", "snappy", "gzip"] = Field(
        default="lz4",
        description="How the tracker's producers compress its record batches (its "
        "transitions, changelogs and events).",
    )
    commit_interval_s: float = Field(default=1.0, gt=0)
    fetch_max_wait_ms: int = Field(
        default=100,
        gt=0,
        le=1500,
        description="Longest the broker may hold a fetch of the workflow partitions with "
        "little new (log_input.py): the most a quiet tracker's decision waits there; an idle "
        "tracker sends that many empty fetches a second.",
    )
    session_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="A worker silent this long is dropped from the group and its partitions "
        "move; faust's default (60 s) would stall a restart that long after a crash.",
    )
    transaction_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="Longest a batch's transaction may stay open, and its records wait "
        "for Kafka: the coordinator aborts it past this, so a broker away longer fails the "
        "batch. A worker frozen mid-batch is fenced as soon as another takes its partitions "
        "over; if none does, it holds back read_committed readers at most this long.",
    )
    stop_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Longest a stop waits for the batch in hand before the tables are "
        "closed; past it the tracker exits 70 storing and committing nothing more, and "
        "the next worker decides the batch again. Keep it under the grace period.",
    )
    standby_replicas: int = Field(
        default=0, ge=0, description="Standby table copies on other workers (faster takeover)."
    )
    stall_timeout_s: float = Field(
        default=20.0,
        gt=0,
        description="Exit (70, to be restarted) when records wait and none was delivered "
        "for this long: a stuck consumer must not look alive.",
    )
    open_transaction_after_s: float = Field(
        default=30.0,
        gt=0,
        description="Close a transaction left open on an input partition (its marker lost "
        "in a broker failure) once the partition's stable offset stood still this long.",
    )
    rocksdb_cache_mb: int = Field(
        default=16,
        ge=1,
        description="Block cache shared by all the tracker's RocksDB tables (every table "
        "and partition); memory stays within it however many workflows wait.",
    )
    rocksdb_memtables_mb: int = Field(
        default=32,
        ge=1,
        description="Limit on all the tables' memtables together; past it RocksDB "
        "flushes the largest.",
    )
    log_level: str = "INFO"
    json_logs: bool = True

    @property
    def transactional_id_prefix(self) -> str:
        """Every partition producer's ``transactional.id`` starts with this (``fencing``);
        the tracker's ACLs grant it, PREFIXED (``topology.acls``)."""
        return owned_prefix(self.app_id)
