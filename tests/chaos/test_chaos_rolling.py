"""The rolling-restart rehearsal, in ``make test-all``.

While 1,000 workflows run, every agent and then the tracker get SIGTERM, start
again and must answer ``/health/ready`` before the next one goes: a rolling
deployment. The checker must find nothing lost, no effect twice and nothing stuck,
and every service must have exited 0 on SIGTERM. The table (with each service's
seconds to stop and to become ready) is printed, and kept in the failure message.
It runs on the run's chaos fleet (``chaos_run``, ``tests/stacks.py``).
"""

from __future__ import annotations

import pytest

from .harness import ChaosRun
from .suite import ROLLING, run_rounds, table


@pytest.mark.timeout(2400)
def test_a_rolling_restart_of_every_service_loses_duplicates_and_strands_nothing(
    chaos_run: ChaosRun,
) -> None:
    """About a minute and a half: seven services stopped and made ready in turn,
    each waiting for the one before, under 1,000 workflows that must all settle."""
    (result,) = run_rounds(chaos_run, (ROLLING,))
    report = table([result.row()])
    print(report)
    print("rolling restart:", result.figures.get("rolling_restart"))
    assert not result.failures, f"seed {chaos_run.seed}\n{report}\n" + "\n".join(result.failures)
