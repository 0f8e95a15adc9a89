"""The rolling-restart rehearsal, part of every ``pytest`` run (deselect with ``-m "not chaos"``).

While 1,000 workflows run, every agent and then the tracker get SIGTERM, start
again and must answer ``/health/ready`` before the next one goes: a rolling
deployment. The checker must find nothing lost, no effect twice and nothing stuck,
and every service must have exited 0 on SIGTERM. The table (with each service's
seconds to stop and to become ready) is printed, and kept in the failure message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .suite import ROLLING, run_suite, table


@pytest.mark.timeout(2400)
def test_a_rolling_restart_of_every_service_loses_duplicates_and_strands_nothing(
    tmp_path: Path,
) -> None:
    seed, results = run_suite((ROLLING,), work_dir=tmp_path)
    report = table([r.row() for r in results])
    (result,) = results
    print(report)
    print("rolling restart:", result.figures.get("rolling_restart"))
    assert not result.failures, f"seed {seed}\n{report}\n" + "\n".join(result.failures)
