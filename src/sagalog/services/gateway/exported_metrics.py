"""What the gateway shows Prometheus on its ``/metrics``: its requests, and the
workflows its read model holds by state.

Requests are counted by route template (``/v1/workflows/{workflow_id}``), never by the
path a client sent: one series per route, however many workflows are asked for. A
path no route matched counts as ``unmatched``. Human decisions and webhooks are
requests too, so their rates and refusals (4xx) show here by route and status.

The read model follows every workflow record the tracker writes, so it is where the
workflows in flight are counted, by state, for the whole deployment (a tracker
worker sees only its partitions): counted once, then moved by each batch it applies.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import FastAPI, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sagalog import metrics
from sagalog.flows.states import WorkflowState
from sagalog.services.gateway.read_model import ReadModel


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


def export_workflows(model: ReadModel) -> Callable[[], None]:
    """Serve the read model's workflows by state (``sagalog_workflows``); the undo.

    Counted here, once, before the follower applies anything: counting at the first
    scrape would hold the follower's writes for the length of a full index scan.
    """
    model.state_counts()

    def by_state() -> metrics.Samples:
        """Every state, 0 included: "none in flight" reads 0 on a dashboard, not absent."""
        counts = model.state_counts()
        return [((state.value,), counts.get(state.value, 0)) for state in WorkflowState]

    return metrics.read(metrics.WORKFLOWS, by_state)


def export_live_connections(model: ReadModel) -> Callable[[], None]:
    """Serve how many live-update connections the console holds open
    (``sagalog_gateway_live_connections``): each is a subscription to the read model's
    changes, so the broadcast's own count is read at scrape time; the undo."""
    return metrics.read(metrics.LIVE_CONNECTIONS, lambda: [((), model.changes.subscribers)])
