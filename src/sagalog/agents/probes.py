"""What an agent instance answers on ``/health/live`` and ``/health/ready``.

Live: its run loop went round within ``live_bound_s``, or it is rebuilding its
clients through a broker outage (bounded by ``outage_limit_s``, past which it exits
3 itself), so a restart is never asked for what a restart cannot cure. Ready: it
joined its group and holds its assignment (possibly none, when there are more
instances than partitions), with no partition still paused to rebuild its
projection from the log, and its store's disk not full (``disk_space``); a rolling
restart moves on only then.

Plain functions of what the worker knows, so that they are tested without one.
"""

from __future__ import annotations

from sagalog.disk_space import disk_problems
from sagalog.health import HealthBook, Verdict, liveness, readiness


def live(*, health: HealthBook, last_progress: float, now: float, bound_s: float) -> Verdict:
    return liveness(
        last_progress=last_progress, now=now, bound_s=bound_s, riding_out=sorted(health.problems)
    )


def ready(*, health: HealthBook, joined: bool, hydrating: int, stopping: bool) -> Verdict:
    waiting = []
    if not joined:
        waiting.append("assignment: the group has not assigned this instance yet")
    elif hydrating:
        waiting.append(f"hydration: {hydrating} partition(s) rebuilding the projection")
    if stopping:
        waiting.append("stopping: SIGTERM received, finishing the batch")
    waiting += disk_problems(health)  # a full disk stops its work: not ready
    return readiness(health, waiting_for=waiting)
