"""``python -m tests.bench.stream_subscribers URL KEY OUT ID...``: SSE clients for
``tests.bench.streams``, in a process of their own so their reading is not slowed by
the model calls the bench makes (nor slows them).

Each workflow id gets ``--per-stream`` connections, on plain asyncio sockets (an HTTP
client library costs more per event than the gateway does). Each ``delta`` event's
latency is the time it was read minus its ``at_ms``; a connection ends at its stream's
``end`` with text. Writes ``{"latencies_ms": [...]}`` to OUT; prints ``ready`` on
stdout once every connection has its response headers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit


async def _one(
    host: str, port: int, path: str, key: str, out: list[float], ready: asyncio.Event
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nX-API-Key: {key}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        raise SystemExit(f"{path}: {status!r}")
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    ready.set()
    try:
        while True:
            line = await reader.readline()
            if not line:
                return
            if not line.startswith(b"data:"):
                continue
            # Chunked transfer: data lines arrive whole within a chunk.
            event = json.loads(line[5:])
            now = time.time() * 1000
            if event["text"]:
                out.append(now - event["at_ms"])
            elif event["seq"] > 0:  # the answer's end
                return
    finally:
        writer.close()


async def _main(url: str, key: str, ids: list[str], per_stream: int) -> list[float]:
    parts = urlsplit(url)
    latencies: list[float] = []
    readies = [asyncio.Event() for _ in range(len(ids) * per_stream)]
    tasks = [
        asyncio.create_task(
            _one(
                parts.hostname or "127.0.0.1",
                parts.port or 80,
                f"/v1/workflows/{w}/stream",
                key,
                latencies,
                readies[n * per_stream + k],
            )
        )
        for n, w in enumerate(ids)
        for k in range(per_stream)
    ]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 120)
    latencies.clear()  # replayed warm-up records are no model deltas
    print("ready", flush=True)
    await asyncio.wait_for(asyncio.gather(*tasks), 300)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("key")
    parser.add_argument("out")
    parser.add_argument("ids", nargs="+")
    parser.add_argument("--per-stream", type=int, default=1)
    args = parser.parse_args()
    latencies = asyncio.run(_main(args.url, args.key, args.ids, args.per_stream))
    Path(args.out).write_text(json.dumps({"latencies_ms": latencies}))


if __name__ == "__main__":
    sys.exit(main())
