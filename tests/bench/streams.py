"""``python -m tests.bench.streams`` (``make bench-streams``): model streams, end to end.

The runtime's path, minus the handler: 100 model calls at once, each
``ChatModel.chat(stream=True)`` against the stand-in model (a chunk every
``--chunk-ms``), each delta handed to a ``StreamPublisher`` and written by the
runtime's ``StreamWriter`` to a stream topic; one gateway process (the real app and
stream hub, ``stream_gateway``) serves them as server-sent events.

- **Delta latency**: an SSE client per stream; each delta's latency is when the client
  read it minus ``at_ms``, stamped when the runtime had the model's chunk. p50, p99.
- **1,000 subscribers**: ten SSE clients per stream on one gateway process, the same
  100 streams; the gateway's CPU (user + system seconds per wall second, from
  ``/proc``) and RSS while they run, and the latency they saw.

Goal (issue 49): p99 <= 50 ms on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from sagalog.agents.model_client import ChatModel
from sagalog.agents.model_stream import StreamPublisher
from sagalog.agents.streaming import StreamWriter
from sagalog.audit.lookup import partition_for
from sagalog.cluster import connect_admin, internal_topic
from sagalog.service_process import free_port
from sagalog.settings import ClientSettings
from sagalog.streams.record import STREAM_TOPIC_CONFIG
from sagalog.topic_names import stream_topic_for

from .harness import print_table, write_results
from .stream_gateway import API_KEY

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 6


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _run(
    *,
    gateway_url: str,
    model_url: str,
    writer: StreamWriter,
    workflow_topic: str,
    streams: int,
    per_stream: int,
    gateway_pid: int,
    round_name: str,
) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    ids = [f"bench-{round_name}-{run}-{n:04d}" for n in range(streams)]
    # A first record makes each stream known to the gateway before its subscribers come.
    openers = {
        w: StreamPublisher(
            writer.write,
            topic=workflow_topic,
            partition=partition_for(w.encode(), PARTITIONS),
            workflow_id=w,
            step="draft",
            agent="bench",
            call=f"{w}:warmup",
            attempt=1,
        )
        for w in ids
    }
    for opener in openers.values():
        opener.end()
    writer.flush()
    time.sleep(2.0)  # the gateway's hub reads them within milliseconds
    out = Path(tempfile.mkdtemp(prefix="bench-streams-")) / "latencies.json"
    subscribers = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.bench.stream_subscribers",
            gateway_url,
            API_KEY,
            str(out),
            *ids,
            "--per-stream",
            str(per_stream),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert subscribers.stdout is not None
    if subscribers.stdout.readline().strip() != "ready":
        raise SystemExit("the SSE subscribers did not connect")
    model = ChatModel(f"{model_url}/v1", timeout_s=60, concurrency=streams)
    cpu_before, wall_before = _proc_cpu_s(gateway_pid), time.monotonic()
    rss_peak = _proc_rss_mb(gateway_pid)

    async def one(w: str) -> None:
        publisher = StreamPublisher(
            writer.write,
            topic=workflow_topic,
            partition=partition_for(w.encode(), PARTITIONS),
            workflow_id=w,
            step="draft",
            agent="bench",
            call=f"{w}:answer",
            attempt=1,
        )
        await model.chat(
            model="bench",
            messages=[{"role": "user", "content": " ".join(["word"] * 60)}],
            max_tokens=200,
            stream=True,
            on_delta=publisher.delta,
        )
        publisher.end()

    async def calls() -> None:
        nonlocal rss_peak
        running = asyncio.gather(*(one(w) for w in ids))
        while not running.done():
            rss_peak = max(rss_peak, _proc_rss_mb(gateway_pid))
            await asyncio.wait([running], timeout=0.2)
        await running
        await model.aclose()

    asyncio.run(calls())
    writer.flush()
    subscribers.wait(300)
    cpu = _proc_cpu_s(gateway_pid) - cpu_before
    wall = time.monotonic() - wall_before
    latencies = json.loads(out.read_text())["latencies_ms"]
    return {
        "streams": streams,
        "subscribers": streams * per_stream,
        "deltas_read": len(latencies),
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(_percentile(latencies, 0.99), 2),
        "max_ms": round(max(latencies), 2),
        "wall_s": round(wall, 2),
        "gateway_cpu_s": round(cpu, 2),
        "gateway_cpu_cores": round(cpu / wall, 3),
        "gateway_rss_peak_mb": round(rss_peak, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.streams", description=__doc__)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--subscribers", type=int, default=1000, help="in the second round")
    parser.add_argument("--chunk-ms", type=int, default=20, help="the model's pause per chunk")
    parser.add_argument("--output", type=Path, default=REPO / "bench-results.json")
    args = parser.parse_args(argv)
    if args.subscribers % args.streams:
        parser.error("--subscribers must be a multiple of --streams")

    settings = ClientSettings()
    workflow_topic = f"bench.streams.{uuid.uuid4().hex[:8]}"
    topic = stream_topic_for(workflow_topic)
    admin, _ = connect_admin(settings)
    admin.create_topics(
        [internal_topic(settings, topic, partitions=PARTITIONS, config=STREAM_TOPIC_CONFIG)]
    )[topic].result(30)
    model_port = free_port()
    model = subprocess.Popen(
        [sys.executable, "-m", "standins.model", "--port", str(model_port)],
        cwd=REPO / "services",
        stdout=subprocess.DEVNULL,
    )
    model_url = f"http://127.0.0.1:{model_port}"
    port = free_port()
    gateway = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.stream_gateway", str(port), topic],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "services")])},
    )
    writer = StreamWriter(settings)
    gateway_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{gateway_url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or gateway.poll() is not None:
                raise SystemExit("the bench gateway did not start")
            time.sleep(0.2)
        httpx.post(f"{model_url}/faults", json={"chunk_delay_ms": args.chunk_ms}, timeout=10)
        rounds = {}
        for name, per_stream in (
            ("latency", 1),
            ("fanout", args.subscribers // args.streams),
        ):
            rounds[name] = _run(
                gateway_url=gateway_url,
                model_url=model_url,
                writer=writer,
                workflow_topic=workflow_topic,
                streams=args.streams,
                per_stream=per_stream,
                gateway_pid=gateway.pid,
                round_name=name,
            )
    finally:
        writer.close()
        gateway.terminate()
        gateway.wait(30)
        model.terminate()
        model.wait(30)
        admin.delete_topics([topic])
    latency, fanout = rounds["latency"], rounds["fanout"]
    rows = [
        (
            f"delta latency, {latency['streams']} streams",
            f"p50 {latency['p50_ms']} ms  p99 {latency['p99_ms']} ms  "
            f"max {latency['max_ms']} ms  (n={latency['deltas_read']:,})",
        ),
        (
            f"{fanout['subscribers']:,} SSE subscribers",
            f"p50 {fanout['p50_ms']} ms  p99 {fanout['p99_ms']} ms  (n={fanout['deltas_read']:,})",
        ),
        (
            "  gateway process",
            f"CPU {fanout['gateway_cpu_cores']} cores ({fanout['gateway_cpu_s']} s in "
            f"{fanout['wall_s']} s), RSS peak {fanout['gateway_rss_peak_mb']} MB",
        ),
    ]
    load = os.getloadavg()
    rows.append(("  machine", f"{os.cpu_count()} cores, load average {load[0]:.1f} (1 min)"))
    print_table(f"Model streams (chunk every {args.chunk_ms} ms)", rows)
    write_results(
        args.output,
        {"model_streams": {"chunk_ms": args.chunk_ms, "load_average_1m": load[0], **rounds}},
    )


if __name__ == "__main__":
    main()
