"""The clock round (``clock_rounds.py``): the tracker's wall clock +1 h, then back 10 min.

On the run's chaos fleet (``chaos_run``, ``tests/stacks.py``), with Debian's
libfaketime (``tool("faketime")``: a skip outside CI, a failure under it). Outside
``make test-all`` (``CHAOS_ONLY`` in the Makefile: it takes longer than a round
there may); ``make chaos`` runs the round too.
"""

from __future__ import annotations

import pytest

from .harness import ChaosRun
from .suite import CLOCK_JUMPS, COLUMNS, run_rounds, table

TIMER_COLUMNS = (
    *COLUMNS[:-1],
    ("timers", "timers_fired", 6),
    ("early", "timers_early", 5),
    ("twice", "timers_twice", 5),
    ("webhooks ok", "webhooks ok", 11),
    COLUMNS[-1],
)


@pytest.mark.tool("faketime")
@pytest.mark.timeout(1500)
def test_a_tracker_whose_wall_clock_jumps_fires_no_timer_early_or_twice(
    chaos_run: ChaosRun,
) -> None:
    """Minutes, not seconds: the tracker restarts twice (under libfaketime, and back;
    each restores its tables, 20 s on a quiet machine, 390 s at a load average of 40
    on two cores), and the round waits for 50 workflows to reach their gates, escalate
    and expire between the jumps (about 80 s): 231 s at a load average of 45, and
    264 s more for the fleet's start."""
    (result,) = run_rounds(chaos_run, (CLOCK_JUMPS,))
    report = table([result.row()], TIMER_COLUMNS)
    print(report)
    assert not result.failures, f"seed {chaos_run.seed}\n{report}\n" + "\n".join(result.failures)
