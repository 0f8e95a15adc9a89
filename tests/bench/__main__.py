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
from .plot import latency_plot
from .raw_handoff import start_raw_relay
from .replay import measure_replay
from .sagas import measure_idle, measure_sagas
from .tracker import measure_tracker

REPO = Path(__file__).resolve().parents[2]


def _kafka_version() -> str:
    try:
        from sagalog.devstack import DevStackSettings, LocalStack

        kafka = LocalStack(DevStackSettings()).status().kafka
        if kafka.state.value == "running":
            return f"{kafka.version} (local stack, {_jit_of(kafka.pid)})"
        return "unknown (not the local stack)"
    except Exception as exc:  # describing the machine must never stop a run
        return f"unknown ({exc.__class__.__name__})"


def _jit_of(pid: int | None) -> str:
    """The broker's JIT, from its command line: the dev stack's default ``quick`` (C1
    only) costs more broker CPU per saga at load than production's C1 and C2 would;
    ``SAGALOG_DEV_JVM_JIT=full`` with a restarted stack measures a production broker."""
    try:
        flags = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "JIT unknown"
    return "C1 only: jvm_jit quick" if b"-XX:TieredStopAtLevel=1" in flags else "C1 and C2"


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
    parser.add_argument("--skip-sagas", action="store_true", help="skip the saga part")
    parser.add_argument(
        "--saga-duration", type=float, default=60.0, help="seconds of the sustained saga run"
    )
    parser.add_argument(
        "--saga-probe-duration", type=float, default=20.0, help="seconds of each search probe"
    )
    parser.add_argument(
        "--saga-latency-duration",
        type=float,
        default=30.0,
        help="seconds of each latency run (25%%, 50%%, 80%% of the maximum)",
    )
    parser.add_argument(
        "--saga-start-rate", type=float, default=50.0, help="sagas/s of the first probe"
    )
    parser.add_argument(
        "--saga-rate",
        type=float,
        default=None,
        help="skip the search: confirm this many sagas/s and measure latency under it",
    )
    parser.add_argument("--skip-baseline", action="store_true", help="skip the chain baseline")
    parser.add_argument(
        "--baseline-shared",
        action="store_true",
        help="also search the chain on one shared topic, as sagalog's topology "
        "(baseline_shared_sagas_per_s: what the shared topic itself costs)",
    )
    parser.add_argument(
        "--baseline-start-rate", type=float, default=200.0, help="sagas/s of its first probe"
    )
    parser.add_argument(
        "--saga-profile-dir",
        type=Path,
        default=None,
        help="where py-spy writes the tracker's and agent 3's profiles of the sustained run "
        "(default: bench-profiles/ next to --output)",
    )
    parser.add_argument(
        "--saga-tick-hz",
        type=float,
        default=0.0,
        help="experiment: tick the tracker's clock topic this often during the saga runs "
        "(ends faust's 1.5 s fetch waits on the idle clock partitions; 0 = off)",
    )
    parser.add_argument(
        "--saga-tracker-fetch-wait-ms",
        type=int,
        default=0,
        help="experiment: run the tracker with this aiokafka fetch_max_wait_ms instead of "
        "faust's hard-coded 1500 (0 = as shipped)",
    )
    parser.add_argument(
        "--saga-cohosted",
        action="store_true",
        help="run the five agents in one process (`sagalog run agents`) instead of five",
    )
    parser.add_argument(
        "--skip-observability",
        action="store_true",
        help="skip the cost of span export (sagas/s with OTLP export on against off)",
    )
    parser.add_argument("--skip-console", action="store_true", help="skip the console part")
    parser.add_argument(
        "--console-workflows",
        type=int,
        default=1_000_000,
        help="workflows in the console's read model (kept in .bench/ between runs)",
    )
    parser.add_argument("--skip-idle", action="store_true", help="skip the idle-at-a-gate part")
    parser.add_argument("--skip-replay", action="store_true", help="skip the replay part")
    parser.add_argument(
        "--replay-events", type=int, default=500_000, help="events in the replay topic"
    )
    parser.add_argument(
        "--idle-sizes",
        type=_sizes,
        default=(10_000, 100_000),
        help='workflows waiting at the gate, e.g. "10000,100000"',
    )
    parser.add_argument("--idle-seconds", type=float, default=20.0)
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

    if not args.skip_sagas:
        sagas = measure_sagas(
            settings,
            partitions=args.partitions,
            duration_s=args.saga_duration,
            probe_s=args.saga_probe_duration,
            latency_s=args.saga_latency_duration,
            start_rate=args.saga_start_rate,
            rate=args.saga_rate,
            baseline=not args.skip_baseline,
            baseline_start_rate=args.baseline_start_rate,
            baseline_shared=args.baseline_shared,
            profile_dir=args.saga_profile_dir or args.output.parent / "bench-profiles",
            tick_hz=args.saga_tick_hz,
            tracker_fetch_wait_ms=args.saga_tracker_fetch_wait_ms,
            cohosted=args.saga_cohosted,
        )
        results |= sagas.results
        rows += sagas.rows

    if not args.skip_observability:
        from .observability import measure_observability

        observed = measure_observability(
            settings,
            partitions=args.partitions,
            probe_s=args.saga_probe_duration,
            start_rate=args.saga_start_rate,
        )
        results |= observed.results
        rows += observed.rows

    if not args.skip_console:
        from .console import measure_console

        console, console_rows = measure_console(
            settings,
            workflows=args.console_workflows,
            model_dir=REPO / ".bench" / f"console-{args.console_workflows}",
        )
        results |= console
        rows += console_rows

    if not args.skip_idle:
        idle = measure_idle(
            settings, sizes=args.idle_sizes, partitions=args.partitions, idle_s=args.idle_seconds
        )
        results |= idle.results
        rows += idle.rows

    if not args.skip_replay:
        replay = measure_replay(settings, events=args.replay_events, partitions=args.partitions)
        results |= replay
        rows += [
            ("replay (decoded, 1 process)", f"{replay['replay_events_per_s']:,.0f} events/s"),
            ("raw consume (same topic)", f"{replay['raw_consume_events_per_s']:,.0f} events/s"),
            ("replay / raw", f"{replay['replay_to_raw_ratio']:.2f}"),
        ]

    results["machine"] = machine.as_dict()
    results["measured_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    merged = write_results(args.output, results)
    if merged.get("latency_by_load"):  # the plot shows the file's figures, this run's or not
        plot = args.output.with_name("bench-latency.svg")
        plot.write_text(latency_plot(merged["latency_by_load"], merged))
        write_results(args.output, {"latency_plot": str(plot)})
        rows.append(("latency plot", str(plot)))
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
