"""How many cores, brokers and partitions a workload needs, from figures measured here.

    python -m tests.bench.sizing --workflows-per-day 100000000 --waiting 10000000
    python -m tests.bench.sizing ... --results bench-results.json   # a run's own figures

The model is arithmetic over what ``make bench`` measures on this machine: CPU per
saga of the tracker, the agents and the broker; broker requests, records and bytes
per saga; a tracker worker's events per second; the tracker's memory per waiting
workflow; its restore rate. A figure the results file lacks comes from ``MEASURED``
(each with the run it came from) and is marked so. What it does not know, it assumes
and says: the peak over the day's average, the utilization to plan for, the cost of
replication. Its output is a starting point for a load test on the target hardware,
not a promise: these figures come from two shared cores with a one-broker cluster.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Figure:
    value: float
    source: str


MEASURED: dict[str, Figure] = {
    # at a fixed 100 sagas/s, five agents co-hosted, tracker batching every 0.1 s
    # (2026-12-04, `--saga-rate 100 --saga-cohosted`, two runs: the higher of each)
    "tracker_us_per_saga": Figure(5_145, "co-hosted run at 100 sagas/s, 2026-12-04"),
    "agents_us_per_saga": Figure(2_952, "co-hosted run at 100 sagas/s, 2026-12-04"),
    "broker_us_per_saga": Figure(4_081, "co-hosted run at 100 sagas/s, 2026-12-04"),
    "requests_per_saga": Figure(12.5, "co-hosted run at 100 sagas/s, 2026-12-04"),
    "bytes_in_per_saga": Figure(8_975, "co-hosted run at 100 sagas/s, 2026-12-04"),
    "records_in_per_saga": Figure(25.5, "co-hosted run at 100 sagas/s, 2026-12-04"),
    # the tracker alone on one core (`make bench`'s tracker part, 2026-12-05: its input
    # read by librdkafka; 2,983 and 3,098 the same day before it)
    "tracker_events_per_s": Figure(4_880, "tracker live bench, 2026-12-05 (librdkafka input)"),
    "restore_records_per_s": Figure(78_551, "tracker restore bench, 2026-12-05"),
    # idle at a gate: the tracker's RSS with 10,000 and 100,000 waiting (2026-12-04)
    "tracker_rss_mb_10k": Figure(202.1, "idle bench, 2026-12-04"),
    "tracker_rss_mb_100k": Figure(206.6, "idle bench, 2026-12-05"),
}
"""The figures a results file may lack, each with the run it came from."""

EVENTS_PER_SAGA = 6
"""The bench saga's events on its workflow topic: the start and five step completions."""

CHANGELOG_RECORDS_PER_WAITING = 2.0
"""Changelog records a restore reads per waiting workflow: its record and its timer."""


@dataclass(frozen=True)
class Assumptions:
    peak_factor: float = 3.0
    """The busiest hour's rate over the day's average."""
    utilization: float = 0.6
    """The share of a core to plan for: headroom for bursts, GC, rebalances."""
    replication_factor: int = 3
    broker_cores: int = 8
    """Cores of one broker machine."""
    partition_headroom: int = 4
    """Partitions per worker at the peak: room to scale out without repartitioning."""


def figures_from(results: Mapping[str, Any]) -> dict[str, Figure]:
    """The model's inputs from a ``make bench`` results file, ``MEASURED`` for the rest."""
    found = dict(MEASURED)
    run = results.get("sagas_run") or {}
    cpu = run.get("cpu_us_per_saga") or {}
    source = f"results of {results.get('sagas_measured_at', 'a bench run')}"
    for name, key in (("tracker", "tracker_us_per_saga"), ("agents", "agents_us_per_saga")):
        if cpu.get(name):
            found[key] = Figure(float(cpu[name]), source)
    agents = sum(v for k, v in cpu.items() if k.startswith("agent") and k != "agents")
    if agents and not cpu.get("agents"):
        found["agents_us_per_saga"] = Figure(float(agents), source)
    if cpu.get("kafka"):
        found["broker_us_per_saga"] = Figure(float(cpu["kafka"]), source)
    broker = run.get("broker") or {}
    for key in ("requests_per_saga", "bytes_in_per_saga", "records_in_per_saga"):
        if broker.get(key):
            found[key] = Figure(float(broker[key]), source)
    for key in ("tracker_events_per_s", "restore_records_per_s"):
        if results.get(key):
            found[key] = Figure(float(results[key]), f"results of {results.get('measured_at')}")
    rss = (results.get("idle_rss_mb") or {}).get
    small, large = rss("10000") or {}, rss("100000") or {}
    if small.get("tracker") and large.get("tracker"):
        found["tracker_rss_mb_10k"] = Figure(float(small["tracker"]), source)
        found["tracker_rss_mb_100k"] = Figure(float(large["tracker"]), source)
    return found


@dataclass(frozen=True)
class Plan:
    peak_sagas_per_s: float
    peak_events_per_s: float
    tracker_workers: int
    agent_processes: int
    broker_cores: float
    brokers: int
    partitions: int
    waiting_per_worker: int
    tracker_memory_gb_per_worker: float
    restore_minutes: float
    broker_requests_per_s: float
    broker_mb_per_s_in: float
    storage_tb_per_day: float


def plan(
    *,
    workflows_per_day: int,
    waiting: int,
    figures: Mapping[str, Figure],
    assume: Assumptions = Assumptions(),
) -> Plan:
    """What ``workflows_per_day`` with ``waiting`` at once needs, by ``figures``."""
    f = {name: figure.value for name, figure in figures.items()}
    peak = workflows_per_day / 86_400 * assume.peak_factor
    events = peak * EVENTS_PER_SAGA
    usable = assume.utilization
    # One tracker worker is one Python process: at most a core, and a partition is
    # decided by one worker at a time.
    tracker_cores = peak * f["tracker_us_per_saga"] / 1e6 / usable
    by_rate = events / (f["tracker_events_per_s"] * usable)
    workers = max(2, math.ceil(max(tracker_cores, by_rate)))
    agents = max(2, math.ceil(peak * f["agents_us_per_saga"] / 1e6 / usable))
    # Measured on one broker without replication: every follower fetches and writes
    # what a leader writes, so the broker's work grows with the replicas.
    broker_cores = peak * f["broker_us_per_saga"] / 1e6 * assume.replication_factor / usable
    brokers = max(assume.replication_factor, math.ceil(broker_cores / assume.broker_cores))
    partitions = _round_up(max(workers, agents) * assume.partition_headroom)
    per_worker = math.ceil(waiting / workers)
    per_waiting_mb = max(
        0.0, (f["tracker_rss_mb_100k"] - f["tracker_rss_mb_10k"]) / 90_000
    )  # the RSS a waiting workflow adds
    memory_gb = (f["tracker_rss_mb_10k"] + per_worker * per_waiting_mb) / 1024
    restore_s = per_worker * CHANGELOG_RECORDS_PER_WAITING / f["restore_records_per_s"]
    bytes_in = peak * f["bytes_in_per_saga"] * assume.replication_factor
    return Plan(
        peak_sagas_per_s=peak,
        peak_events_per_s=events,
        tracker_workers=workers,
        agent_processes=agents,
        broker_cores=broker_cores,
        brokers=brokers,
        partitions=partitions,
        waiting_per_worker=per_worker,
        tracker_memory_gb_per_worker=memory_gb,
        restore_minutes=restore_s / 60,
        broker_requests_per_s=peak * f["requests_per_saga"],
        broker_mb_per_s_in=bytes_in / 1e6,
        storage_tb_per_day=(
            workflows_per_day * f["bytes_in_per_saga"] * assume.replication_factor / 1e12
        ),
    )


def _round_up(n: int) -> int:
    """Up to a multiple of 6 (evenly split by 1, 2, 3 and 6 workers)."""
    return max(6, math.ceil(n / 6) * 6)


def render(p: Plan, figures: Mapping[str, Figure], assume: Assumptions) -> str:
    lines = [
        f"peak: {p.peak_sagas_per_s:,.0f} sagas/s, {p.peak_events_per_s:,.0f} events/s "
        f"(the day's average x {assume.peak_factor:g})",
        f"tracker workers     {p.tracker_workers:>8,}  (one core each, planned at "
        f"{assume.utilization:.0%})",
        f"agent processes     {p.agent_processes:>8,}  (co-hosted agents, one core each)",
        f"brokers             {p.brokers:>8,}  ({p.broker_cores:,.0f} cores at RF "
        f"{assume.replication_factor}, {assume.broker_cores} cores each)",
        f"partitions          {p.partitions:>8,}  per workflow topic "
        f"({assume.partition_headroom}x the workers: room to scale out)",
        f"waiting per worker  {p.waiting_per_worker:>8,}  "
        f"(~{p.tracker_memory_gb_per_worker:,.1f} GB RSS each)",
        f"restore of a worker {p.restore_minutes:>8,.1f}  minutes from the changelogs "
        "(a standby replica takes over at once)",
        f"broker requests     {p.broker_requests_per_s:>8,.0f}  /s at the peak",
        f"broker bytes in     {p.broker_mb_per_s_in:>8,.1f}  MB/s at the peak, replicas included",
        f"storage             {p.storage_tb_per_day:>8,.2f}  TB/day before compaction and "
        "retention, replicas included",
        "",
        "from:",
    ]
    lines += [f"  {name:<24} {fig.value:>10,.1f}  {fig.source}" for name, fig in figures.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows-per-day", type=int, required=True)
    parser.add_argument("--waiting", type=int, required=True, help="workflows waiting at once")
    parser.add_argument(
        "--results",
        type=Path,
        default=REPO / "bench-results.json",
        help="a `make bench` results file (its figures replace the built-in ones)",
    )
    parser.add_argument("--peak-factor", type=float, default=Assumptions.peak_factor)
    parser.add_argument("--replication-factor", type=int, default=Assumptions.replication_factor)
    parser.add_argument("--broker-cores", type=int, default=Assumptions.broker_cores)
    args = parser.parse_args(argv)
    if args.workflows_per_day <= 0 or args.waiting < 0:
        parser.error("--workflows-per-day must be positive and --waiting not negative")
    results: dict[str, Any] = {}
    if args.results.exists():
        try:
            results = json.loads(args.results.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            parser.error(f"{args.results} is not a bench results file: {exc}")
    figures = figures_from(results)
    assume = Assumptions(
        peak_factor=args.peak_factor,
        replication_factor=args.replication_factor,
        broker_cores=args.broker_cores,
    )
    print(
        render(
            plan(
                workflows_per_day=args.workflows_per_day,
                waiting=args.waiting,
                figures=figures,
                assume=assume,
            ),
            figures,
            assume,
        )
    )


if __name__ == "__main__":
    main()
