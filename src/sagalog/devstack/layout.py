"""Where each file of a running dev stack lives under the state directory.

Kept in one place so that ``up``, ``down``, ``status`` and ``logs`` agree, and so
a user who wants to look at (or delete) the broker's data knows where to go.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

KAFKA = "kafka"
REGISTRY = "registry"
COMPONENTS: tuple[str, ...] = (KAFKA, REGISTRY)


@dataclass(frozen=True)
class StackLayout:
    """Paths derived from ``state_dir``; nothing here touches the disk.

    Attributes:
        state_dir: the root, ``$XDG_STATE_HOME/sagalog/dev`` by default.
    """

    state_dir: Path

    @property
    def logs_dir(self) -> Path:
        """stdout and stderr of both JVMs."""
        return self.state_dir / "logs"

    @property
    def run_dir(self) -> Path:
        """Pid files: one JSON record per running component."""
        return self.state_dir / "run"

    @property
    def kafka_dir(self) -> Path:
        """The broker's generated configuration."""
        return self.state_dir / KAFKA

    @property
    def kafka_data_dir(self) -> Path:
        """``log.dirs``: topic partitions and KRaft metadata, kept across restarts."""
        return self.kafka_dir / "data"

    @property
    def kafka_properties(self) -> Path:
        """The generated ``server.properties``; its path also identifies our broker."""
        return self.kafka_dir / "server.properties"

    def registry_dir(self, *, version: str) -> Path:
        """Working directory and H2 database of one registry version.

        One per version because a database upgraded by a newer registry may not
        open in an older one (3.3.3 vs the 3.0.9 fallback).
        """
        return self.state_dir / REGISTRY / version

    def registry_database(self, *, version: str) -> Path:
        """H2 file-store base name (H2 appends ``.mv.db``)."""
        return self.registry_dir(version=version) / "db"

    def log_file(self, *, component: str) -> Path:
        """Console output of ``kafka`` or ``registry``."""
        return self.logs_dir / f"{component}.log"

    def pid_file(self, *, component: str) -> Path:
        """Pid record of ``kafka`` or ``registry``."""
        return self.run_dir / f"{component}.json"
