"""What an agent instance answers on ``/health/live`` and ``/health/ready``.

Live: its run loop went round within ``live_bound_s`` (a broker outage keeps it
going round, rebuilding clients with backoff, so it stays live: a restart would not
help). Ready: it joined its group and holds its assignment (possibly none, when
there are more instances than partitions), with no partition still paused to
rebuild its projection from the log; a rolling restart moves on only then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagalog.health import Verdict, liveness, readiness

if TYPE_CHECKING:
    from sagalog.agents.worker import AgentWorker


def live(worker: AgentWorker) -> Verdict:
    return liveness(
        last_progress=worker.last_progress,
        now=worker.clock(),
        bound_s=worker.settings.live_bound_s,
        riding_out=sorted(worker.health.problems),
    )


def ready(worker: AgentWorker) -> Verdict:
    waiting = []
    assignment = getattr(worker, "assignment", None)
    if assignment is None or not assignment.joined:
        waiting.append("assignment: the group has not assigned this instance yet")
    elif assignment.to_hydrate:
        waiting.append(
            f"hydration: {len(assignment.to_hydrate)} partition(s) rebuilding the projection"
        )
    if worker.stopping:
        waiting.append("stopping: SIGTERM received, finishing the batch")
    return readiness(worker.health, waiting_for=waiting)
