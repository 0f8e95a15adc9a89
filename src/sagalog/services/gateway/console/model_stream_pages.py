"""``/console/model-stream?workflow=<id>``: a workflow's model output for its page.

The same records as ``GET /v1/workflows/{id}/stream`` (``stream_api``), from the same
hub, under the console's session instead of an API key (a browser's ``EventSource``
sends no header of its own). ``templates/_model_stream.html`` shows them on a
workflow's page (``static/model_stream.js``): the text as it is written, a mark where an
attempt was cut off, and the retry's text after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from sagalog.services.gateway.console.headers import HEADERS
from sagalog.services.gateway.console.live import STREAM_HEADERS
from sagalog.services.gateway.exceptions import SignInRequired
from sagalog.services.gateway.stream_api import events_of
from sagalog.services.gateway.stream_hub import StreamHub
from sagalog.streams.record import parse_last_event_id
from sagalog.topic_names import stream_topic_for

if TYPE_CHECKING:
    from sagalog.services.gateway.console.routes import Console

PATH = "/model-stream"


def model_stream_routes(router: APIRouter, console: Console) -> None:
    @router.get(PATH)
    async def model_stream(request: Request) -> Response:
        try:
            console.viewer(request)
        except SignInRequired:
            return Response(status_code=204, headers=HEADERS)  # an EventSource stops
        hub: StreamHub | None = getattr(request.app.state, "streams", None)
        workflow_id = request.query_params.get("workflow", "")
        try:
            after = parse_last_event_id(request.headers.get("Last-Event-ID"))
        except ValueError:
            after = None
        record = console.gateway.model.record(workflow_id) if workflow_id else None
        if hub is None or record is None:
            return Response(status_code=204, headers=HEADERS)  # nothing to stream here
        topic = stream_topic_for(console.gateway.flow_of(record).topic)
        subscription = hub.subscribe(topic, workflow_id, after=after)
        return StreamingResponse(
            events_of(hub, subscription), headers={**HEADERS, **STREAM_HEADERS}
        )
