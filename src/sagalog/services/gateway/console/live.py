"""``/console/live``: the read model's changes as server-sent events, for the live pages.

A page that updates itself (the overview, a workflow's page, the gates inbox) opens one
``EventSource`` here (``static/live.js``). The connection holds one subscription to the
read model's broadcast (``changes``), narrowed to one workflow for a workflow's page, and
sends ``changed`` with the workflow ids when a batch touched any of them; the page then
fetches again what shows them (an htmx GET of its own region). The server never polls
the store for a connection. The page names the change sequence it was rendered at
(``since``), so what landed before its connection opened is not missed.

Messages gathered while one is being sent go out together after ``settle_s``, a quiet
connection gets a comment every ``heartbeat_s`` (so a proxy does not close it and a
closed one is noticed), and a connection ends with its session: the browser asks again,
and is told ``204`` (stop trying) until it signs in again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from sagalog.services.gateway.changes import Change, Subscription
from sagalog.services.gateway.console.headers import HEADERS
from sagalog.services.gateway.exceptions import SignInRequired

if TYPE_CHECKING:
    from sagalog.services.gateway.console.routes import Console

RETRY_MS = 3000
"""How long a browser waits before it connects again after a connection ended."""

EVENT = "changed"

STREAM_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "X-Accel-Buffering": "no",  # nginx: pass each message on as it comes
}


def change_message(change: Change) -> str:
    """One ``changed`` event; its data is JSON, so no id can break the framing."""
    data = json.dumps(
        {"workflows": sorted(change.workflow_ids), "everything": change.everything},
        ensure_ascii=True,
    )
    return f"event: {EVENT}\ndata: {data}\n\n"


async def change_stream(
    subscription: Subscription,
    *,
    lasts_s: float,
    heartbeat_s: float,
    settle_s: float,
) -> AsyncIterator[str]:
    """The event stream of one connection, until ``lasts_s`` (its session's end) passes.

    The subscription is closed when the stream ends, is closed, or is cancelled (the
    browser went away: Starlette cancels the response).
    """
    deadline = time.monotonic() + lasts_s
    with subscription:
        yield f"retry: {RETRY_MS}\n\n"
        while (left := deadline - time.monotonic()) > 0:
            change = await subscription.next(timeout_s=min(heartbeat_s, left))
            if change is None:
                if deadline > time.monotonic():
                    yield ": still here\n\n"
                continue
            yield change_message(change)
            await asyncio.sleep(settle_s)


def live_routes(router: APIRouter, console: Console) -> None:
    @router.get("/live")
    async def live(request: Request) -> Response:
        try:
            viewer = console.viewer(request)
        except SignInRequired:
            # 204 tells an EventSource to stop trying: the next page it loads signs in.
            return Response(status_code=204, headers=HEADERS)
        workflow_id = request.query_params.get("workflow") or None
        since_text = request.query_params.get("since", "")
        options = console.options
        stream = change_stream(
            console.gateway.model.changes.subscribe(
                workflow_id=workflow_id, since=int(since_text) if since_text.isdigit() else None
            ),
            lasts_s=max(viewer.session.expires_s - console.now_s(), 0),
            heartbeat_s=options.live_heartbeat_s,
            settle_s=options.live_settle_s,
        )
        return StreamingResponse(stream, headers={**HEADERS, **STREAM_HEADERS})
