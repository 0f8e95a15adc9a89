"""``GET /v1/workflows/{id}/stream``: a workflow's model output as server-sent events.

Each event is one stream record (``sagalog.streams.record``): ``event:`` its kind
(``delta``, ``end``, ``interrupted``), ``data:`` the record as JSON (workflow, step,
call, attempt, seq, text), ``id:`` its offset in the workflow's stream partition. A
client that reconnects with ``Last-Event-ID`` (a browser's ``EventSource`` does it by
itself) gets every record after that one, and none twice; one that sends none gets
what the topic still holds first, then what comes. A comment every
``KEEPALIVE_S`` keeps proxies from closing an idle connection. Under the gateway's
API keys, as every ``/v1`` read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse

from sagalog.services.gateway.application import Gateway
from sagalog.services.gateway.exceptions import BadStreamRequest, UnknownWorkflow
from sagalog.services.gateway.stream_hub import StreamHub, Subscription
from sagalog.streams.record import parse_last_event_id, sse_message
from sagalog.topic_names import stream_topic_for

KEEPALIVE_S = 15.0
RECONNECT_MS = 1000
"""What a browser waits before reconnecting (the ``retry:`` field)."""


def install_stream_route(v1: APIRouter, gateway: Gateway, hub: StreamHub, ready: Any) -> None:
    """Add the route to ``v1``; before ``GET /workflows/{id:path}``, which would take
    ``<id>/stream`` for an id."""

    @v1.get(
        "/workflows/{workflow_id:path}/stream",
        dependencies=[ready],
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    async def stream_workflow(
        workflow_id: str,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=40)] = None,
    ) -> StreamingResponse:
        """The workflow's model output as server-sent events, from the start of what the
        stream topic holds, or after ``Last-Event-ID``; it stays open for what comes."""
        try:
            after = parse_last_event_id(last_event_id)
        except ValueError as exc:
            raise BadStreamRequest(str(exc)) from None
        record = gateway.model.record(workflow_id)
        # A stream may come before the read model has the workflow (it follows the
        # tracker, which may lag): the topic that holds its records says where it is.
        topic = (
            hub.topic_holding(workflow_id)
            if record is None
            else stream_topic_for(gateway.flow_of(record).topic)
        )
        if topic is None:
            raise UnknownWorkflow(
                f"no workflow '{workflow_id}' is known to the gateway, and no stream of it "
                "is; check the id (GET /v1/workflows lists them)",
                workflow_id=workflow_id,
            )
        subscription = hub.subscribe(topic, workflow_id, after=after)
        return StreamingResponse(
            events_of(hub, subscription),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


async def events_of(hub: StreamHub, subscription: Subscription) -> AsyncIterator[bytes]:
    try:
        yield f"retry: {RECONNECT_MS}\n\n".encode()
        while True:
            try:
                offset, record = await asyncio.wait_for(subscription.queue.get(), KEEPALIVE_S)
            except TimeoutError:
                yield b": keepalive\n\n"
                continue
            chunk = [sse_message(offset, record)]
            while not subscription.queue.empty():  # what came together goes out together
                offset, record = subscription.queue.get_nowait()
                chunk.append(sse_message(offset, record))
            yield b"".join(chunk)
    finally:
        hub.unsubscribe(subscription)
