"""``python -m sagalog.services.tracker``: run one tracker worker until SIGTERM.

Exit codes: 0 stopped, 2 bad configuration or flows, 3 Kafka/registry unreachable,
6 a right the cluster denied (at start or on a write; a restart does not help), 70
a batch failed or a partition stalled (restart it; see ``exits``).
"""

from __future__ import annotations

import sys

from sagalog.agents.telemetry import configure_logging
from sagalog.errors import SagalogError
from sagalog.memory import limit_arenas
from sagalog.services.tracker.settings import TrackerSettings
from sagalog.tracing import configure_tracing

# Two arenas for the event loop's thread and the clients' threads (``limit_arenas``).
MALLOC_ARENAS = 2


def main(settings: TrackerSettings | None = None) -> int:
    """Run one worker with ``settings`` (default: read from the environment)."""
    from faust import Worker

    from sagalog.health_server import serve_health
    from sagalog.services.tracker import faust_internals, probes
    from sagalog.services.tracker.app import Tracker
    from sagalog.services.tracker.startup import (
        check_secret,
        load_registry,
        make_clock,
        make_codec,
        prepare_topics,
    )

    limit_arenas(MALLOC_ARENAS)  # before any client starts a thread
    settings = settings or TrackerSettings()
    configure_logging(json_lines=settings.json_logs, level=settings.log_level)
    configure_tracing("saga-tracker")
    try:
        faust_internals.check_classes()
        check_secret(settings)
        registry, catalog = load_registry(settings)
        partitions = prepare_topics(settings, registry)
        clock = make_clock(settings, partitions)
        tracker = Tracker(
            settings,
            registry=registry,
            codec=make_codec(settings, catalog),
            partitions=partitions,
            clock=clock,
        )
    except SagalogError as exc:
        print(f"saga-tracker: {exc}", file=sys.stderr)
        return exc.exit_code
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        health = serve_health(
            settings, live=lambda: probes.live(tracker), ready=lambda: probes.ready(tracker)
        )
    except SagalogError as exc:
        print(f"saga-tracker: {exc}", file=sys.stderr)
        return exc.exit_code
    if health is not None:
        print(f"saga-tracker: health and metrics on :{health.port}", file=sys.stderr)
    tracker.export_metrics()  # the process ends with the worker: nothing to undo
    worker = Worker(tracker.app, loglevel=settings.log_level.lower(), quiet=True)
    worker.execute_from_commandline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
