"""The full-disk rounds (issue 50), in ``make chaos`` (the Makefile's CHAOS_ONLY keeps
them out of ``make test-all``: 7-8 minutes; ``test_small_disk_store.py`` holds what they
found, in seconds): the broker's log directory,
the tracker's and the budget agent's RocksDB directories, each filled under load and
freed (``full_disks.py``), on a fleet whose data directories are small disks
(``disk_run``, ``tests/stacks.py``; root only)."""

from __future__ import annotations

import pytest

from .full_disks import COLUMNS, DISKS
from .harness import ChaosRun
from .suite import run_rounds, table


@pytest.mark.timeout(1500)
def test_a_full_disk_loses_nothing_and_each_service_waits_it_out_and_says_where(
    disk_run: ChaosRun,
) -> None:
    """About four minutes, after the fleet's start: three rounds of 30 workflows, each
    disk full for 40 s (past the tracker's 20 s stall watch, so a wait that is not
    ridden out shows as an exit), then the workflows settling; one fleet serves all
    three, as its disks must be mounted before it starts."""
    results = run_rounds(disk_run, DISKS)
    report = table([r.row() for r in results], COLUMNS)
    print(f"seed {disk_run.seed}\n{report}")  # the rows, for -s or a failure's output
    failures = [f"{r.fault}: {failure}" for r in results for failure in r.failures]
    assert len(results) == len(DISKS), report
    seed = disk_run.seed
    assert not failures, f"seed {seed} (rerun: make chaos CHAOS_ARGS='--disks --seed {seed}')\n" + (
        report + "\n" + "\n".join(failures)
    )
