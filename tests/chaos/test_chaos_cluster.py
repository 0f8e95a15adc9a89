"""The short cluster round, in ``make test-all``.

One broker that leads the workflow topic and coordinates an agent's transactions is
SIGKILLed under ~20 workflows and restarted, on the run's three-broker plaintext
stack (``cluster``, ``tests/stacks.py``; replication 3, min ISR 2).
``make chaos CHAOS_ARGS="--brokers 3"`` runs both cluster rounds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .cluster import CLUSTER_SHORT, COLUMNS
from .stack import ChaosStack
from .suite import run_suite, table


@pytest.mark.timeout(900)
def test_a_leader_and_coordinator_killed_loses_duplicates_strands_and_exits_nothing(
    cluster: ChaosStack, tmp_path: Path
) -> None:
    """About a minute and a half: the fleet starts on the cluster, and the killed
    broker must rejoin and catch its replicas up before the round's workflows settle."""
    seed, results = run_suite(CLUSTER_SHORT, work_dir=tmp_path, stack=cluster)
    report = table([r.row() for r in results], COLUMNS)
    failures = [f"{r.fault}: {failure}" for r in results for failure in r.failures]
    assert len(results) == len(CLUSTER_SHORT), report
    assert not failures, (
        f"seed {seed} (rerun: make chaos CHAOS_ARGS='--brokers 3 --short --seed {seed}')\n"
        + report
        + "\n"
        + "\n".join(failures)
    )
