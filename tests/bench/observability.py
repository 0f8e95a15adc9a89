"""What observability costs: the sustained sagas/s with span export on against off.

Saga systems (the tracker and five relay agents, as ``make bench``'s saga part runs
them) are searched for their sustained maximum one after the other, in one run, in
the order off, on, on, off (each side's mean, so a machine that warms up or gets
busier weighs on both alike). Off is as shipped: no ``OTEL_*``, nothing exported,
each service passes the trace context on. On, every service exports its spans over
OTLP/HTTP to a receiver in this process (``OTEL_EXPORTER_OTLP_ENDPOINT``). In both,
the tracker's ``/metrics`` is scraped each second as Prometheus would.

Metrics are counted the same way in both (the services read their own counts at a
scrape), so what differs is the spans: one per handled event in the agents, one per
published event in the tracker, their batching and their export.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.otlp_receiver import OtlpReceiver

from sagalog.service_process import free_port
from sagalog.settings import ClientSettings

from .sagas import Progress, SagalogSystem, find_max_rate, warm_up


@dataclass
class ObservabilityResult:
    results: dict[str, Any]
    rows: list[tuple[str, str]]


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """Set ``values`` in this process's environment, which the services inherit."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _scrape_every_second(url: str, stop: threading.Event, scrapes: list[int]) -> None:
    while not stop.wait(1.0):
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as answer:
            scrapes.append(len(answer.read()))


def _max_rate(
    settings: ClientSettings,
    scratch: Path,
    *,
    label: str,
    partitions: int,
    probe_s: float,
    start_rate: float,
    progress: Progress,
) -> float | None:
    system = SagalogSystem(settings, scratch / label, partitions=partitions, progress=progress)
    system.scratch.mkdir(parents=True)
    health_port = free_port()
    stop, scrapes = threading.Event(), []
    try:
        system.setup()
        with _environment({"SAGALOG_TRACKER_HEALTH_PORT": str(health_port)}):
            system.start()
        scraper = threading.Thread(
            target=_scrape_every_second,
            args=(f"http://127.0.0.1:{health_port}/metrics", stop, scrapes),
            daemon=True,
        )
        scraper.start()
        warm_up(system, progress=progress)
        rate, _ = find_max_rate(
            system, start_rate=start_rate, probe_s=probe_s, probes=6, cap=5000, progress=progress
        )
        progress(f"observability {label}: {rate} sagas/s sustained, {len(scrapes)} scrapes")
        return rate
    finally:
        stop.set()
        for problem in system.close():
            progress(f"{system.suffix}: cleanup: {problem}")


def measure_observability(
    settings: ClientSettings,
    *,
    partitions: int,
    probe_s: float,
    start_rate: float,
    progress: Progress = print,
) -> ObservabilityResult:
    """Sustained sagas/s without span export, then with it; their ratio."""
    receiver = OtlpReceiver().start()
    try:
        with tempfile.TemporaryDirectory(prefix="sagalog-obs-bench-") as scratch_dir:
            scratch = Path(scratch_dir)

            def max_rate(label: str) -> float | None:
                return _max_rate(
                    settings,
                    scratch,
                    label=label,
                    partitions=partitions,
                    probe_s=probe_s,
                    start_rate=start_rate,
                    progress=progress,
                )

            exporting = {
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_BSP_SCHEDULE_DELAY": "1000",
            }
            found: dict[str, list[float]] = {"off": [], "on": []}
            # off, on, on, off: a machine that warms up or gets busier in the run
            # weighs on both sides alike.
            for n, mode in enumerate(("off", "on", "on", "off")):
                with _environment(exporting if mode == "on" else {}):
                    rate = max_rate(f"{mode}{n}")
                if rate is not None:
                    found[mode].append(rate)
            off = round(sum(found["off"]) / len(found["off"]), 1) if found["off"] else None
            on = round(sum(found["on"]) / len(found["on"]), 1) if found["on"] else None
    finally:
        receiver.stop()
    spans = len(receiver.received())
    ratio = round(on / off, 3) if on and off else None
    results = {
        "observability_off_sagas_per_s": off,
        "observability_on_sagas_per_s": on,
        "observability_runs": found,
        "observability_ratio": ratio,
        "observability_spans_received": spans,
    }
    rows = [
        ("observability off", f"{off} sagas/s sustained, mean of {found['off']} (no OTEL_*)"),
        ("observability on", f"{on} sagas/s sustained, mean of {found['on']} (spans over OTLP)"),
        ("observability spans", f"{spans:,} received by the OTLP receiver"),
        ("observability ratio", "n/a" if ratio is None else f"{ratio:.3f} of off"),
    ]
    return ObservabilityResult(results, rows)
