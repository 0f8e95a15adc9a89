"""The short chaos suite, in ``make test-all`` (``make chaos`` runs the full one).

Tracker SIGKILL, agent SIGKILL, one broker SIGKILL + restart and poison events
against the reference workflow's real services, on the run's private broker behind
the fault proxy (``chaos_run``, ``tests/stacks.py``; never the shared stack), whose
fleet the broker outage tests and the rolling restart share.
"""

from __future__ import annotations

import pytest

from .harness import ChaosRun
from .suite import SHORT, run_rounds, table


@pytest.mark.timeout(1500)
def test_no_fault_of_the_short_suite_loses_duplicates_strands_or_misorders_work(
    chaos_run: ChaosRun,
) -> None:
    """About three minutes: four rounds of 12 to 20 workflows, each with its fault's
    window (20-25 s) and the time its workflows take to settle after it."""
    results = run_rounds(chaos_run, SHORT)
    report = table([r.row() for r in results])
    failures = [f"{r.fault}: {failure}" for r in results for failure in r.failures]
    assert len(results) == len(SHORT), report
    seed = chaos_run.seed
    assert not failures, f"seed {seed} (rerun: make chaos CHAOS_ARGS='--short --seed {seed}')\n" + (
        report + "\n" + "\n".join(failures)
    )
