"""The gateway's requests, counted and timed for Prometheus, and its ``/metrics``.

Counted by route template (``/v1/workflows/{workflow_id}``), never by the path a
client sent: one series per route, however many workflows are asked for. A path no
route matched counts as ``unmatched``. Human decisions and webhooks are requests
too, so their rates and refusals (4xx) show here by route and status.
"""

from __future__ import annotations

import time

from fastapi import FastAPI, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sagalog import metrics


class RequestMetrics:
    """Pure ASGI middleware (no body buffering): status and duration of each request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception that escapes every handler

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            labels = (scope["method"], route, str(status))
            metrics.GATEWAY_REQUESTS.labels(*labels).inc()
            metrics.GATEWAY_REQUEST_SECONDS.labels(scope["method"], route).observe(
                time.perf_counter() - started
            )


def install(app: FastAPI) -> None:
    """Serve ``/metrics`` (no API key, like the health paths) and count every request."""

    @app.get("/metrics", include_in_schema=False)
    def exported() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    app.add_middleware(RequestMetrics)
