"""``python -m tests.bench``: run the benchmarks, print a table, merge bench-results.json.

Needs the broker running (``make bench`` starts the local stack first). The Kafka
address and credentials come from the ``SAGALOG_*`` settings, like every sagalog client.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

from sagalog.settings import ClientSettings

from .handoff import HandoffResult, measure_handoff
from .harness import describe_machine, print_table, write_results
from .raw_handoff import start_raw_relay

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


def measure_sagalog_handoff(
    kafka_config: dict[str, Any], args: argparse.Namespace
) -> HandoffResult | None:
    """The sagalog agent's handoff, or None while there is no agent to measure.

    ===== PLUG THE SAGALOG AGENT IN HERE =====
    When ``src/sagalog/agents`` can run an agent as a service, return
    ``measure_handoff(start_agent_relay, kafka_config=kafka_config, records=..., ...)``
    with the same ``partitions``, ``preload``, ``load_fraction`` and ``duration_s`` as the
    raw run, where:

    - ``start_agent_relay(job: RelayJob) -> subprocess.Popen[bytes]`` starts, as its own
      process, an agent consuming ``job.in_topic`` in group ``job.group_id`` (with
      ``job.transactional_id``) whose handler records ``(bench_sent_ns header,
      time.time_ns())`` on entry and publishes one event to ``job.out_topic`` per input;
      on SIGTERM it stops and calls ``harness.write_pickups(job.result_path, pairs)``;
    - ``records`` builds registry-encoded events with CloudEvents headers the agent
      handles (the load adds ``bench_sent_ns``).
    """
    return None


def _row_latency(result: HandoffResult) -> str:
    p = result.pickup
    return f"p50 {p.p50_ms:.2f}  p99 {p.p99_ms:.2f}  p99.9 {p.p999_ms:.2f}  (n={p.count})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("--preload", type=int, default=50_000, help="records, max-throughput run")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds of open-loop load")
    parser.add_argument("--load-fraction", type=float, default=0.5, help="share of the maximum")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--output", type=Path, default=REPO / "bench-results.json")
    args = parser.parse_args(argv)

    settings = ClientSettings()
    kafka_config = settings.kafka_config()
    machine = describe_machine(
        bootstrap_servers=settings.bootstrap_servers, kafka_version=_kafka_version()
    )
    options = {
        "partitions": args.partitions,
        "preload": args.preload,
        "load_fraction": args.load_fraction,
        "duration_s": args.duration,
    }

    raw = measure_handoff(start_raw_relay(kafka_config), kafka_config=kafka_config, **options)
    results: dict[str, Any] = {
        "raw_handoff_per_s": round(raw.throughput_per_s, 1),
        "raw_handoff_p50_ms": round(raw.pickup.p50_ms, 3),
        "raw_handoff_p99_ms": round(raw.pickup.p99_ms, 3),
        "raw_handoff_p999_ms": round(raw.pickup.p999_ms, 3),
        "raw_handoff_e2e_p50_ms": round(raw.end_to_end.p50_ms, 3),
        "raw_handoff_e2e_p99_ms": round(raw.end_to_end.p99_ms, 3),
        "raw_handoff_load_per_s": round(raw.load.achieved_per_s, 1),
        "raw_handoff_load_lag_p99_ms": round(raw.load.lag.p99_ms, 3),
    }
    rows = [
        ("raw handoff, max", f"{raw.throughput_per_s:,.0f} events/s ({raw.preload:,} preloaded)"),
        (
            f"raw pickup latency at {args.load_fraction:.0%}",
            f"{_row_latency(raw)} ms",
        ),
        (
            "raw publish→committed output",
            f"p50 {raw.end_to_end.p50_ms:.2f}  p99 {raw.end_to_end.p99_ms:.2f} ms",
        ),
        (
            "  offered load",
            f"{raw.load.achieved_per_s:,.0f}/s of {raw.load.target_per_s:,.0f}/s target, "
            f"generator lag p99 {raw.load.lag.p99_ms:.2f} ms",
        ),
    ]

    sagalog = measure_sagalog_handoff(kafka_config, args)
    if sagalog is None:
        rows.append(("sagalog handoff", "not measured: no runnable agent yet"))
    else:
        results |= {
            "handoff_per_s": round(sagalog.throughput_per_s, 1),
            "handoff_ratio": round(sagalog.throughput_per_s / raw.throughput_per_s, 3),
            "handoff_p50_ms": round(sagalog.pickup.p50_ms, 3),
            "handoff_p99_ms": round(sagalog.pickup.p99_ms, 3),
            "handoff_p999_ms": round(sagalog.pickup.p999_ms, 3),
        }
        rows += [
            ("sagalog handoff, max", f"{sagalog.throughput_per_s:,.0f} events/s"),
            ("handoff ratio", f"{results['handoff_ratio']:.2f} of raw"),
            (f"sagalog pickup latency at {args.load_fraction:.0%}", f"{_row_latency(sagalog)} ms"),
        ]

    results["machine"] = machine.as_dict()
    results["measured_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    write_results(args.output, results)
    print()
    print_table(
        f"handoff on {machine.cores} cores, {machine.cpu_model}, Kafka {machine.kafka_version} "
        f"at {machine.kafka_bootstrap}, confluent-kafka {machine.confluent_kafka} "
        f"(librdkafka {machine.librdkafka})",
        rows,
    )
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
