"""``/health/live``, ``/health/ready`` and ``/metrics`` over HTTP, for a service that
serves nothing else.

The tracker and the agents speak Kafka, not HTTP, yet an orchestrator needs to ask
them two things: is the process stuck (restart it), and has it taken up its work
(move a rolling restart on). This serves both from the service's own probe, on a
thread of its own so that a busy or blocked service loop cannot keep the answer
from being sent (a blocked loop shows as not live, which is the point). The
gateway answers the same paths from its own FastAPI app.

``/metrics`` is the Prometheus text of every metric of the process (``metrics``), on
the same port, so a pod has one port to probe and scrape.

The standard library's server is enough: three GETs, a few per minute.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sagalog import metrics
from sagalog.errors import ConfigurationError
from sagalog.health import Verdict
from sagalog.settings import ServiceSettings

log = logging.getLogger("sagalog.health")

LIVE = "/health/live"
READY = "/health/ready"
METRICS = "/metrics"


class HealthServer:
    """Answers ``GET /health/live`` and ``GET /health/ready`` from two probes.

    Args:
        live: the liveness verdict, computed at each request.
        ready: the readiness verdict, computed at each request.
        host: the address to listen on.
        port: the port; 0 picks a free one (``port`` tells which, once started).
    """

    def __init__(
        self,
        *,
        live: Callable[[], Verdict],
        ready: Callable[[], Verdict],
        host: str = "0.0.0.0",
        port: int = 0,
    ) -> None:
        self.probes = {LIVE: live, READY: ready}
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="health-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        probes = self.probes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == METRICS:
                    self._send_bytes(200, *metrics.render())
                    return
                probe = probes.get(path)
                if probe is None:
                    self._send(
                        404,
                        {"error": f"no such path {self.path!r}; try {LIVE}, {READY} or {METRICS}"},
                    )
                    return
                try:
                    verdict = probe()
                except Exception as exc:  # fail closed: a probe that fails says so, never hangs
                    log.warning(
                        "%s answered 503: its probe failed (%s: %s)",
                        self.path,
                        exc.__class__.__name__,
                        exc,
                        extra={"sagalog": {"action": "probe_failed"}},
                    )
                    self._send(503, {"status": "probe failed", "error": repr(exc)})
                    return
                self._send(200 if verdict.ok else 503, verdict.body)

            def _send(self, code: int, body: dict[str, object]) -> None:
                self._send_bytes(code, json.dumps(body, default=str).encode(), "application/json")

            def _send_bytes(self, code: int, data: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                """Probes come every few seconds; the service's own log is not for them."""

        return Handler


def serve_health(
    settings: ServiceSettings,
    *,
    live: Callable[[], Verdict],
    ready: Callable[[], Verdict],
) -> HealthServer | None:
    """Start the health endpoints where ``settings.health_port`` says; None when unset."""
    if settings.health_port is None:
        return None
    try:
        server = HealthServer(
            live=live, ready=ready, host=settings.health_host, port=settings.health_port
        )
    except OSError as exc:
        raise ConfigurationError(
            f"SAGALOG_HEALTH_PORT={settings.health_port}: cannot listen on "
            f"{settings.health_host}:{settings.health_port} ({exc.strerror or exc}); "
            "choose a free port, or 0 for any"
        ) from exc
    return server.start()
