"""The short chaos suite, part of every ``pytest`` run (deselect with ``-m "not chaos"``).

Tracker SIGKILL, agent SIGKILL, one broker SIGKILL + restart and poison events
against the reference workflow's real services, on a private Kafka + registry that
the suite starts and stops itself (ports 29092/29093/28081, never the shared stack).
``make chaos`` runs the full suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .suite import SHORT, run_suite, table


@pytest.mark.timeout(1500)
def test_no_fault_of_the_short_suite_loses_duplicates_strands_or_misorders_work(
    tmp_path: Path,
) -> None:
    seed, results = run_suite(SHORT, work_dir=tmp_path)
    report = table([r.row() for r in results])
    failures = [f"{r.fault}: {failure}" for r in results for failure in r.failures]
    assert len(results) == len(SHORT), report
    assert not failures, f"seed {seed} (rerun: make chaos CHAOS_ARGS='--short --seed {seed}')\n" + (
        report + "\n" + "\n".join(failures)
    )
