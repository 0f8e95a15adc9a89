"""The HTTP API: FastAPI routes over ``Gateway``, every error as ``{"error", "detail"}``.

Everything under ``/v1`` needs an API key (``X-API-Key``); ``/healthz``, ``/metrics``
and ``/openapi.json`` do not, so a load balancer and a client generator need no secret.
A read-only key reads everything; every POST needs an operator key (``auth``).
The console (``/console``, ``console``) is a second shell over the same ``Gateway``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, Path, Query, Request, Security
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sagalog.flows.states import WorkflowState
from sagalog.services.gateway import exported_metrics
from sagalog.services.gateway.application import Gateway
from sagalog.services.gateway.auth import HEADER, ApiKeys, Role, require_operator
from sagalog.services.gateway.console.routes import ConsoleOptions, install_console
from sagalog.services.gateway.dead_letter_operations import DeadLetterOperations
from sagalog.services.gateway.dead_letter_views import (
    DeadLetterDetail,
    DeadLetterList,
    ReplayAccepted,
    ReplayRequest,
)
from sagalog.services.gateway.exceptions import BodyTooLarge, GatewayError, UnknownWorkflow
from sagalog.services.gateway.reviews import reviews_router
from sagalog.services.gateway.signatures import HEADER as SIGNATURE_HEADER
from sagalog.services.gateway.signatures import WebhookSource, verify_webhook
from sagalog.services.gateway.stream_api import install_stream_route
from sagalog.services.gateway.stream_hub import StreamHub
from sagalog.services.gateway.views import (
    Accepted,
    CancelRequest,
    DecisionAccepted,
    DecisionRequest,
    ErrorBody,
    GateList,
    Health,
    WorkflowDetail,
    WorkflowList,
    detail_view,
    gate_view,
    summary_view,
)
from sagalog.services.gateway.webhooks import read_webhook

KEY_HEADER = APIKeyHeader(name=HEADER, auto_error=False)
"""Declared as a security scheme, so the OpenAPI document says how to authenticate."""

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 413, 503)
}


def create_app(
    gateway: Gateway,
    *,
    api_keys: Sequence[bytes],
    max_body_bytes: int,
    webhook_source: str,
    webhook_sources: Mapping[str, WebhookSource] | None = None,
    webhook_tolerance_s: float = 300.0,
    dead_letters: DeadLetterOperations | None = None,
    read_only_keys: Sequence[bytes] = (),
    console: ConsoleOptions | None = None,
    streams: StreamHub | None = None,
) -> FastAPI:
    """The ASGI application; ``__main__`` serves it with uvicorn, tests with TestClient.

    ``webhook_sources``: who may call webhooks, each with its secret; when given, every
    webhook must be signed by one of them (``signatures``). None or empty: unsigned.
    ``dead_letters``: serves ``/v1/dead-letters`` (list, show, replay) when given.
    ``read_only_keys``: keys that read everything and may POST nothing (403).
    ``console``: the console's session settings and where it reads the log from.
    ``streams``: serves ``GET /v1/workflows/{id}/stream`` (the model streams) when given.
    """
    keys = ApiKeys(operators=tuple(api_keys), readers=tuple(read_only_keys))
    sources = dict(webhook_sources or {})
    correlation_keys = frozenset(k for flow in gateway.flows for k in flow.correlation_keys)
    app = FastAPI(
        title="sagalog gateway",
        version="1",
        summary="Human gate decisions, webhooks and workflow queries for sagalog.",
    )

    def authenticate(key: Annotated[str | None, Security(KEY_HEADER)]) -> Role:
        return keys.role_of(key)

    def operator(key: Annotated[str | None, Security(KEY_HEADER)]) -> None:
        require_operator(keys.role_of(key), action="a POST")

    def ready() -> None:
        gateway.require_ready()

    v1 = APIRouter(prefix="/v1", dependencies=[Depends(authenticate)], responses=ERRORS)

    @v1.get("/gates", response_model=GateList, dependencies=[Depends(ready)])
    def list_gates(
        assignee: str | None = None,
        flow: str | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> GateList:
        """Open gates awaiting a person, with the token a decision must carry."""
        records = gateway.model.open_gates(assignee=assignee, flow=flow, limit=limit)
        return GateList(gates=[g for g in map(gate_view, records) if g is not None])

    @v1.post(
        "/gates/decisions",
        status_code=202,
        response_model=DecisionAccepted,
        dependencies=[Depends(operator)],
    )
    def decide(body: DecisionRequest) -> DecisionAccepted:
        """Approve or reject an open gate. Posting the same decision again publishes nothing
        new and answers with the same event id (``duplicate: true``)."""
        return gateway.decide(
            workflow_id=body.workflow_id,
            token=body.token,
            decision=body.decision,
            decided_by=body.decided_by,
            comment=body.comment,
        )

    @v1.post(
        "/webhooks/{kind}",
        status_code=202,
        response_model=Accepted,
        dependencies=[Depends(operator)],
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": "Any JSON document, kept verbatim in WebhookReceived.payload_json.",
                "content": {"application/json": {"schema": {}}},
            }
        },
    )
    async def webhook(
        request: Request,
        kind: Annotated[str, Path(max_length=64)],
        workflow_id: Annotated[str | None, Query(max_length=256)] = None,
        x_webhook_source: Annotated[str | None, Header()] = None,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
        x_sagalog_signature: Annotated[
            str | None, Header(alias=SIGNATURE_HEADER, max_length=1000)
        ] = None,
    ) -> Accepted:
        """Publish an outside system's call as ``sagalog.v1.WebhookReceived`` on the
        workflow's topic. Name the workflow with ``?workflow_id=``, a top-level
        ``workflow_id`` field, or a correlation key its flow declares
        (``?filing_number=F-1``); send ``Idempotency-Key`` to make retries publish once.
        Where the gateway has webhook sources, name yours in ``X-Webhook-Source`` and
        sign the call (``X-Sagalog-Signature``); a bad signature is a 401."""
        body = await request.body()
        if sources:
            verify_webhook(
                source=(x_webhook_source or "").strip(),
                kind=kind,
                query=request.url.query,
                body=body,
                signature=x_sagalog_signature,
                sources=sources,
                now_s=gateway.now().timestamp(),
                tolerance_s=webhook_tolerance_s,
            )
        call = read_webhook(
            kind,
            body,
            workflow_id=workflow_id,
            source=x_webhook_source,
            default_source=webhook_source,
            max_bytes=max_body_bytes,
            correlation={k: v for k, v in request.query_params.items() if k != "workflow_id"},
            keys=correlation_keys,
        )
        return await run_in_threadpool(gateway.webhook, call, idempotency_key=idempotency_key)

    @v1.post(
        "/workflows/{workflow_id:path}/cancel",
        status_code=202,
        response_model=Accepted,
        dependencies=[Depends(operator)],
    )
    def cancel_workflow(workflow_id: str, body: CancelRequest) -> Accepted:
        """Cancel a running workflow: the tracker compensates what it did, the step
        running included, and the audit keeps who asked and why. Asking again publishes
        nothing new (``duplicate: true``); an ended workflow is a 409."""
        return gateway.cancel(workflow_id, reason=body.reason, requested_by=body.requested_by)

    if dead_letters is not None:
        _dead_letter_routes(v1, dead_letters, Depends(operator))

    if streams is not None:
        install_stream_route(v1, gateway, streams, Depends(ready))
        app.state.streams = streams  # the console's stream page reads it there

    @v1.get("/workflows", response_model=WorkflowList, dependencies=[Depends(ready)])
    def list_workflows(
        state: WorkflowState | None = None,
        flow: str | None = None,
        after: Annotated[str | None, Query(description="The last id of the previous page.")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> WorkflowList:
        """Workflows in id order, optionally in one state or of one flow."""
        records = gateway.model.workflows(state=state, flow=flow, after=after, limit=limit)
        return WorkflowList(
            workflows=[summary_view(r) for r in records],
            next_after=records[-1].workflow_id if len(records) == limit else None,
        )

    @v1.get(
        "/workflows/{workflow_id:path}",
        response_model=WorkflowDetail,
        dependencies=[Depends(ready)],
    )
    def show_workflow(workflow_id: str) -> WorkflowDetail:
        """One workflow: state, current step, history, pending timers, open gate."""
        record = gateway.model.record(workflow_id)
        if record is None:
            raise UnknownWorkflow(
                f"no workflow '{workflow_id}' is known to the gateway; check the id "
                "(GET /v1/workflows lists them)",
                workflow_id=workflow_id,
            )
        return detail_view(record, gateway.model.history(workflow_id))

    @app.get("/healthz", response_model=Health, responses={503: {"model": Health}})
    @app.get("/health/ready", response_model=Health, responses={503: {"model": Health}})
    def health() -> JSONResponse:
        """200 once the read model has caught up with the tracker (``status`` ``ok``, or
        ``degraded`` while the broker is away: reads are served, writes answer 503 with
        Retry-After), 503 before (``starting``). ``/healthz`` is the same answer."""
        body = Health(**gateway.health())
        return JSONResponse(body.model_dump(mode="json"), status_code=200 if body.ready else 503)

    @app.get("/health/live")
    def live() -> JSONResponse:
        """200 while the gateway serves and its read-model follower runs; 503 when the
        follower stopped for good (restart the process)."""
        verdict = gateway.liveness()
        return JSONResponse(verdict.body, status_code=200 if verdict.ok else 503)

    app.include_router(v1)
    app.include_router(reviews_router())
    install_console(app, gateway, keys=keys, dead_letters=dead_letters, options=console)
    _install_error_handlers(app)
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    exported_metrics.install(app)
    return app


def _dead_letter_routes(v1: APIRouter, dead_letters: DeadLetterOperations, operator: Any) -> None:
    """``sagalog dlq``'s endpoints. A position is ``topic/partition/offset`` in the path,
    as ``GET /v1/dead-letters`` lists it (Kafka topic names hold no ``/``)."""

    @v1.get("/dead-letters", response_model=DeadLetterList)
    def list_dead_letters(
        topic: str | None = None,
        agent: Annotated[str | None, Query(description="Who dead-lettered them.")] = None,
        since: Annotated[dt.datetime | None, Query(description="Dead-lettered since.")] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> DeadLetterList:
        """The dead letters of every dead-letter topic (the newest ``limit``), oldest
        first, each with who dead-lettered it, why, and its replays so far."""
        since_ms = int(since.timestamp() * 1000) if since is not None else None
        return dead_letters.list(topic=topic, agent=agent, since_ms=since_ms, limit=limit)

    @v1.get("/dead-letters/{position:path}", response_model=DeadLetterDetail)
    def show_dead_letter(position: str) -> DeadLetterDetail:
        """One dead letter whole: every header (reason, error class, stack, attempts,
        origin), the record's payload decoded, and its replays so far."""
        return dead_letters.show(position)

    @v1.post(
        "/dead-letters/{position:path}/replay",
        status_code=202,
        response_model=ReplayAccepted,
        dependencies=[operator],
    )
    def replay_dead_letter(position: str, body: ReplayRequest) -> ReplayAccepted:
        """Re-drive a dead letter to where it was first consumed, as a new event (a new
        ``ce_id``, and ``sagalog_replay_of`` naming the dead letter), after a
        ``DeadLetterReplayed`` on the workflow's topic that keeps who asked and why. A
        dead letter replayed before is a 409 unless ``again`` is true."""
        return dead_letters.replay(
            position, reason=body.reason, requested_by=body.requested_by, again=body.again
        )


def error_response(
    status: int, message: str, detail: Any = None, *, retry_after_s: int | None = None
) -> JSONResponse:
    headers = {"Retry-After": str(retry_after_s)} if retry_after_s is not None else None
    return JSONResponse(
        ErrorBody(error=message, detail=jsonable_encoder(detail)).model_dump(),
        status_code=status,
        headers=headers,
    )


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(GatewayError)
    async def refused(request: Request, exc: GatewayError) -> JSONResponse:
        return error_response(exc.status, str(exc), exc.detail, retry_after_s=exc.retry_after_s)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}; see /openapi.json"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}; see /openapi.json"
        return error_response(exc.status_code, message)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_response(exc.errors())


def validation_response(errors: Sequence[Any]) -> JSONResponse:
    """400 for a body that is not JSON at all, 422 naming each wrong field otherwise."""
    for error in errors:
        if error.get("type") == "json_invalid":
            reason = error.get("ctx", {}).get("error", "")
            return error_response(
                400,
                f"the body is not valid JSON ({reason}); send a JSON object with "
                "Content-Type: application/json",
            )
    problems = []
    for error in errors:
        location = [str(p) for p in error.get("loc", ()) if p != "body"]
        problems.append(f"{'.'.join(location) or 'body'}: {error.get('msg')}")
    return error_response(
        422,
        "the request is invalid: " + "; ".join(problems),
        [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in errors],
    )


class BodyLimit:
    """Refuses a body over the limit before the application reads it whole.

    A declared ``Content-Length`` over the limit is answered at once; a chunked body
    is counted as it arrives and stopped once it passes the limit.
    """

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send, int(declared))
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise self._too_large(seen)
            return message

        await self.app(scope, counted, send)

    def _too_large(self, size: int) -> BodyTooLarge:
        return BodyTooLarge(
            f"the body has {size} bytes or more, over the gateway's limit of {self.limit}; "
            "send a smaller body (a reference to the document, not the document)",
            limit=self.limit,
        )

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, size: int) -> None:
        exc = self._too_large(size)
        body = json.dumps({"error": str(exc), "detail": exc.detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
