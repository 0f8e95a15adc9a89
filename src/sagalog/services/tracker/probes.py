"""What a tracker worker answers on ``/health/live`` and ``/health/ready``.

Live: the watchdog, a faust timer every 5 s, went round within ``live_bound_s``,
so the event loop is not blocked; while the tables restore from their changelogs
(minutes for a large state) or the broker is away, the worker is riding that out
and stays live: a restart would only start the restore again. A partition that
stalls is the watchdog's to judge, and it exits 70 itself.

Ready: the tables are restored and faust's running consumer checked
(``watchdog``), no rebalance is in progress, and the tables' disk is not full
(``disk_space``: the worker waits for space, live and not ready).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sagalog.disk_space import disk_problems
from sagalog.health import Verdict, liveness, readiness

if TYPE_CHECKING:
    from sagalog.services.tracker.app import Tracker


def live(tracker: Tracker) -> Verdict:
    riding_out = sorted(tracker.health.problems)
    if not tracker.ready:
        riding_out.append("restoring tables")
    return liveness(
        last_progress=tracker.watchdog.last_look,
        now=time.monotonic(),
        bound_s=tracker.settings.live_bound_s,
        riding_out=riding_out,
    )


def ready(tracker: Tracker) -> Verdict:
    waiting = []
    if not tracker.ready:
        waiting.append("tables: restoring from the changelogs")
    if tracker.app.rebalancing:
        waiting.append("rebalance: partitions are being reassigned")
    waiting += disk_problems(tracker.health)  # the batch in hand waits for space
    return readiness(tracker.health, waiting_for=waiting)
