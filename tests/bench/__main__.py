"""``python -m tests.bench``: run the benchmarks, print a table, merge bench-results.json.

Needs the broker running (``make bench`` starts the local stack first). The Kafka
address and credentials come from the ``SAGALOG_*`` settings, like every sagalog client.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagalog.cluster import connect_admin
from sagalog.errors import ServiceUnavailableError
from sagalog.settings import ClientSettings

from .agent_relay import agent_records, start_agent_relay
from .handoff import HandoffResult, StartRelay, measure_handoff
from .harness import RecordFactory, describe_machine, print_table, write_results
from .raw_handoff import start_raw_relay
from .tracker import measure_tracker

REPO = Path(__file__).resolve().parents[2]


def _kafka_version() -> str:
    try:
        from sagalog.devstack import DevStackSettings, LocalStack

        kafka = LocalStack(DevStackSettings()).status().kafka
        if kafka.state.value == "running":
            return f"{kafka.version} (local stack)"
        return "unknown (not the local stack)"
    except Exception as exc:  # describing the machine must never stop a run
        return f"unknown ({exc.__class__.__name__})"


Measure = Callable[[StartRelay, RecordFactory | None], HandoffResult]
"""``measure(start_relay, records)``: ``measure_handoff`` with this run's options."""


def measure_sagalog_handoff(measure: Measure) -> HandoffResult | None:
    """The sagalog agent's handoff, measured exactly like the raw baseline.

    The agent (``agent_relay``) runs as its own process with the full runtime; the
    records are registry-encoded events with CloudEvents headers.
    """
    settings = ClientSettings()
    return measure(start_agent_relay(settings.kafka_config(), settings), agent_records(settings))


def _figures(prefix: str, result: HandoffResult) -> dict[str, Any]:
    return {
        f"{prefix}_per_s": round(result.throughput_per_s, 1),
        f"{prefix}_rounds_per_s": [round(r, 1) for r in result.rounds_per_s],
        f"{prefix}_p50_ms": round(result.pickup.p50_ms, 3),
        f"{prefix}_p99_ms": round(result.pickup.p99_ms, 3),
        f"{prefix}_p999_ms": round(result.pickup.p999_ms, 3),
        f"{prefix}_load_fraction": result.load_fraction,
        f"{prefix}_load_per_s": round(result.load.achieved_per_s, 1),
        f"{prefix}_load_lag_p99_ms": round(result.load.lag.p99_ms, 3),
        f"{prefix}_saturated": result.saturated,
    }


def _rows(name: str, result: HandoffResult) -> list[tuple[str, str]]:
    p = result.pickup
    rounds = ", ".join(f"{r:,.0f}" for r in result.rounds_per_s)
    rows = [
        (f"{name} handoff, max", f"{result.throughput_per_s:,.0f} events/s (rounds: {rounds})"),
        (
            f"{name} pickup at {result.load_fraction:.0%} load",
            f"p50 {p.p50_ms:.2f}  p99 {p.p99_ms:.2f}  p99.9 {p.p999_ms:.2f} ms  (n={p.count:,})",
        ),
        (
            "  offered load",
            f"{result.load.achieved_per_s:,.0f}/s (target {result.load.target_per_s:,.0f}/s), "
            f"generator lag p99 {result.load.lag.p99_ms:.2f} ms",
        ),
    ]
    if result.saturated:
        rows.append(
            ("  WARNING", "latency grew during the run: a queue, not the handoff, was measured")
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("--preload", type=int, default=100_000, help="records per round")
    parser.add_argument("--rounds", type=int, default=3, help="max-throughput rounds (median)")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds of open-loop load")
    parser.add_argument("--load-fraction", type=float, default=0.5, help="share of the maximum")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--output", type=Path, default=REPO / "bench-results.json")
    parser.add_argument("--skip-handoff", action="store_true", help="skip the handoff part")
    parser.add_argument("--skip-tracker", action="store_true", help="skip the tracker part")
    parser.add_argument(
        "--tracker-workflows", type=int, default=20_000, help="workflows of the tracker run"
    )
    parser.add_argument(
        "--tracker-idle-sizes",
        type=_sizes,
        default=(),
        help='waiting workflows to measure the idle tracker at, e.g. "10000,100000" '
        "(default: only the tracker run's own)",
    )
    parser.add_argument(
        "--tracker-profile",
        type=Path,
        default=None,
        metavar="PREFIX",
        help="py-spy the live tracker for 20 s: PREFIX.svg, PREFIX.raw.txt, PREFIX.dump.txt",
    )
    args = parser.parse_args(argv)

    settings = ClientSettings()
    try:
        connect_admin(settings)
    except ServiceUnavailableError as exc:
        raise SystemExit(f"{exc}\n(`make bench` starts the local stack first)") from exc
    kafka_config = settings.kafka_config()
    machine = describe_machine(
        bootstrap_servers=settings.bootstrap_servers, kafka_version=_kafka_version()
    )

    def measure(start_relay: StartRelay, records: RecordFactory | None) -> HandoffResult:
        return measure_handoff(
            start_relay,
            kafka_config=kafka_config,
            records=records,
            partitions=args.partitions,
            preload=args.preload,
            rounds=args.rounds,
            load_fraction=args.load_fraction,
            duration_s=args.duration,
        )

    results: dict[str, Any] = {}
    rows: list[tuple[str, str]] = []
    if not args.skip_handoff:
        raw = measure(start_raw_relay(kafka_config), None)
        results |= _figures("raw_handoff", raw)
        rows += _rows("raw", raw)

        sagalog = measure_sagalog_handoff(measure)
        if sagalog is None:
            rows.append(("sagalog handoff", "not measured: no runnable agent yet"))
        else:
            results |= _figures("handoff", sagalog)
            results["handoff_ratio"] = round(sagalog.throughput_per_s / raw.throughput_per_s, 3)
            rows += _rows("sagalog", sagalog)
            rows.append(("handoff ratio", f"{results['handoff_ratio']:.2f} of raw"))

    if not args.skip_tracker:
        tracker = measure_tracker(
            settings,
            workflows=args.tracker_workflows,
            partitions=args.partitions,
            idle_sizes=args.tracker_idle_sizes,
            profile=args.tracker_profile,
        )
        results |= tracker.results
        rows += tracker.rows
        profile = tracker.results.get("tracker_profile")
        if profile:
            rows.append(
                (
                    "tracker profile (GIL holder)",
                    f"{profile['samples']:,} samples in {profile['seconds']:g}s, {profile['svg']}",
                )
            )
            rows += [(f"  self {pct:5.1f}%", name) for name, pct in profile["top_self"][:10]]

    results["machine"] = machine.as_dict()
    results["measured_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    write_results(args.output, results)
    print()
    print_table(
        f"bench on {machine.cores} cores ({machine.cpu_model}), Kafka {machine.kafka_version} "
        f"at {machine.kafka_bootstrap}, confluent-kafka {machine.confluent_kafka} "
        f"(librdkafka {machine.librdkafka})",
        rows,
    )
    print(f"\nwritten to {args.output}")


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.replace("_", "").split(",") if part.strip())


if __name__ == "__main__":
    main()
