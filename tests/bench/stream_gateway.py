"""``python -m tests.bench.stream_gateway PORT TOPIC...``: the gateway's app, serving
the model streams of ``TOPIC``\\s, as its own process, for ``tests.bench.streams``.

The real app (``create_app``), the real stream hub on the broker, uvicorn as
``python -m sagalog.services.gateway`` runs it. What is left out is the read model's
follower, which needs a tracker: the read model is empty and the gateway says it is
ready, so ``GET /v1/workflows/{id}/stream`` finds each stream by the topic that holds
it, as it does for a workflow the read model has not caught up with.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import uvicorn

from sagalog.flows.registry import FlowRegistry
from sagalog.services.gateway.api import create_app
from sagalog.services.gateway.application import Gateway
from sagalog.services.gateway.follower import FollowerStatus
from sagalog.services.gateway.read_model import ReadModel
from sagalog.services.gateway.stream_hub import StreamHub
from sagalog.settings import ClientSettings

API_KEY = "bench-streams-key-0123456789"


def main(argv: list[str]) -> None:
    port, topics = int(argv[0]), argv[1:]
    settings = ClientSettings()
    hub = StreamHub(settings, topics=topics, group_prefix="sagalog-gateway-bench-")
    model = ReadModel(Path(tempfile.mkdtemp(prefix="bench-gateway-")) / "read-model")
    ready = FollowerStatus(ready=True, health="ok")
    gateway = Gateway(
        model=model,
        publisher=None,  # type: ignore[arg-type]  # the bench posts nothing
        flows=FlowRegistry([]),
        secret=b"bench-secret-0123456789abcdef0123",
        status=lambda: ready,
        follower_alive=lambda: True,
    )
    app = create_app(
        gateway,
        api_keys=[API_KEY.encode()],
        max_body_bytes=65536,
        webhook_source="bench",
        streams=hub,
    )
    hub.start()
    try:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", log_config=None)
    finally:
        hub.stop()
        model.close()


if __name__ == "__main__":
    main(sys.argv[1:])
