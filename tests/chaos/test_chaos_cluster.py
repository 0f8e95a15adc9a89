"""The short cluster round, part of every ``pytest`` run (deselect with ``-m "not chaos"``).

One broker that leads the workflow topic and coordinates an agent's transactions is
SIGKILLed under ~20 workflows and restarted, on a private three-broker plaintext
stack (replication 3, min ISR 2; ports 29092/29192/29292 and 28081, or
``SAGALOG_CHAOS_*``). ``make chaos CHAOS_ARGS="--brokers 3"`` runs both cluster rounds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .cluster import CLUSTER_SHORT, COLUMNS
from .suite import run_suite, table


@pytest.mark.timeout(900)
def test_a_leader_and_coordinator_killed_loses_duplicates_strands_and_exits_nothing(
    tmp_path: Path,
) -> None:
    seed, results = run_suite(CLUSTER_SHORT, work_dir=tmp_path, brokers=3)
    report = table([r.row() for r in results], COLUMNS)
    failures = [f"{r.fault}: {failure}" for r in results for failure in r.failures]
    assert len(results) == len(CLUSTER_SHORT), report
    assert not failures, (
        f"seed {seed} (rerun: make chaos CHAOS_ARGS='--brokers 3 --short --seed {seed}')\n"
        + report
        + "\n"
        + "\n".join(failures)
    )
