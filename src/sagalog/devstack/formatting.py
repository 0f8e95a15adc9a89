"""Formatting the data directories of new Kafka nodes (``kafka-storage format``), once.

The nodes of a quorum must share one cluster id; a node added to a half-formatted
quorum (an ``up`` that failed between two formats) takes the id already on disk.
They are formatted in parallel: each format is a JVM start, seconds of CPU.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from sagalog.devstack.commands import kafka_format_command, new_cluster_id
from sagalog.devstack.credentials import ScramCredential
from sagalog.errors import LocalStackError

FORMAT_TIMEOUT_S = 300.0
META_PROPERTIES = "meta.properties"


def is_formatted(data_dir: Path) -> bool:
    """Whether ``kafka-storage format`` has already run on this data directory."""
    return (data_dir / META_PROPERTIES).is_file()


def existing_cluster_id(data_dirs: Sequence[Path]) -> str | None:
    """The ``cluster.id`` of the first formatted data directory, if any."""
    for data_dir in data_dirs:
        meta = data_dir / META_PROPERTIES
        if not meta.is_file():
            continue
        for line in meta.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "cluster.id" and value.strip():
                return value.strip()
    return None


def format_nodes(
    *,
    java: Path,
    jar_dir: Path,
    log4j_config: Path,
    targets: Sequence[tuple[Path, Path]],
    all_data_dirs: Sequence[Path],
    scram_users: Sequence[ScramCredential],
) -> None:
    """Format each ``(properties, data_dir)`` of ``targets``, all with one cluster id.

    Raises:
        LocalStackError: a format failed; the message has the end of its output (the
            tool never prints the ``--add-scram`` password).
    """
    cluster_id = existing_cluster_id(all_data_dirs) or new_cluster_id()
    running = [
        (
            data_dir,
            subprocess.Popen(
                kafka_format_command(
                    java=java,
                    jar_dir=jar_dir,
                    log4j_config=log4j_config,
                    properties=properties,
                    cluster_id=cluster_id,
                    scram_users=scram_users,
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ),
        )
        for properties, data_dir in targets
    ]
    failures = []
    for data_dir, process in running:
        try:
            output, _ = process.communicate(timeout=FORMAT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        if process.returncode != 0:
            tail = "\n".join(output.strip().splitlines()[-20:])
            failures.append(
                f"formatting the Kafka data directory {data_dir} failed "
                f"(exit {process.returncode}):\n{tail}"
            )
    if failures:
        raise LocalStackError(
            "\n".join(failures) + "\nIf the directory holds data from another Kafka cluster "
            "or version, move it away and rerun `sagalog dev up`"
        )
