"""Where each file of a running dev stack lives under the state directory.

Kept in one place so that ``up``, ``down``, ``status`` and ``logs`` agree, and so
a user who wants to look at (or delete) the broker's data knows where to go.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"
"""Every service of the stack binds here only: nothing of it is reachable from the network."""
KAFKA = "kafka"
REGISTRY = "registry"


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

    def node_dir(self, *, component: str) -> Path:
        """A Kafka node's generated configuration (``kafka`` or ``kafka-<id>``)."""
        return self.state_dir / component

    def data_dir(self, *, component: str) -> Path:
        """``log.dirs`` of a node: topic partitions and KRaft metadata, kept across restarts."""
        return self.node_dir(component=component) / "data"

    def server_properties(self, *, component: str) -> Path:
        """A node's generated ``server.properties``."""
        return self.node_dir(component=component) / "server.properties"

    @property
    def security_dir(self) -> Path:
        """The secure stack's CA, certificates and passwords: mode 0700."""
        return self.state_dir / "security"

    @property
    def passwords_dir(self) -> Path:
        """One 0600 file per SCRAM user (``admin``, then each service)."""
        return self.security_dir / "passwords"

    @property
    def admin_client_properties(self) -> Path:
        """The Kafka CLIs' ``--command-config`` for the admin (0600: it holds the password)."""
        return self.security_dir / "admin-client.properties"

    @property
    def registry_secrets(self) -> Path:
        """The registry's basic-auth users, read through ``quarkus.config.locations``."""
        return self.security_dir / "registry-users.properties"

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
        """Console output of a Kafka node or of the registry."""
        return self.logs_dir / f"{component}.log"

    def pid_file(self, *, component: str) -> Path:
        """Pid record of a Kafka node or of the registry."""
        return self.run_dir / f"{component}.json"
