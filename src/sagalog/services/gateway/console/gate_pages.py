"""``/console/gates``: the inbox, a decision on a gate, and one row as it is now."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from sagalog.services.gateway.changes import MAX_IDS
from sagalog.services.gateway.console import paths
from sagalog.services.gateway.console.forms import invalid_form, read_form
from sagalog.services.gateway.console.gates_inbox import (
    decided_label,
    gate_matches,
    moved_on_label,
    parse_gate_query,
)
from sagalog.services.gateway.console.listing import PAGE_SIZE
from sagalog.services.gateway.exceptions import BadQuery, UnknownWorkflow
from sagalog.services.gateway.views import DecisionRequest, GateView, gate_view, summary_view
from sagalog.tracker.gates import gate_token

if TYPE_CHECKING:
    from sagalog.services.gateway.console.routes import Console

MAX_ARRIVALS = MAX_IDS
"""The most workflows one arrivals request names: a change names at most that many
(past it, it says "everything" and the page fetches its whole list again)."""


def gate_routes(router: APIRouter, console: Console) -> None:
    gateway = console.gateway

    def gate_rows(gates: list[GateView]) -> list[tuple[GateView, str | None]]:
        return [(g, decided_label(gateway.model.token_decision(g.token))) for g in gates]

    @router.get("/gates")
    def gates(request: Request) -> Response:
        viewer = console.viewer(request)
        since = gateway.model.changes.sequence
        gateway.require_ready()
        query = parse_gate_query(dict(request.query_params))
        after = request.query_params.get("after") or None

        def keep(record: Any) -> bool:
            gate = gate_view(record)
            return gate is not None and gate_matches(query, gate)

        records = gateway.model.open_gates(
            assignee=query.assignee, flow=query.flow, after=after, limit=PAGE_SIZE, keep=keep
        )
        found = [g for g in map(gate_view, records) if g is not None]
        next_url = None
        if len(records) == PAGE_SIZE:
            next_url = (
                f"{paths.GATES}?{urlencode({**query.params(), 'after': records[-1].workflow_id})}"
            )
        return console.render(
            "gates.html",
            viewer=viewer,
            nav="gates",
            live=paths.live(None, since=since),
            rows=gate_rows(found),
            query=query.params(),
            next_url=next_url,
            notice=request.query_params.get("notice"),
        )

    @router.get("/gates/arrived")
    def gates_arrived(request: Request) -> Response:
        """The inbox rows of the named workflows that wait at a gate the page's filters
        show: the live inbox asks for the workflows that changed and that it does not
        show yet, and appends what comes back (``static/live.js``)."""
        viewer = console.viewer(request)
        query = parse_gate_query({k: v for k, v in request.query_params.items() if k != "workflow"})
        workflow_ids = request.query_params.getlist("workflow")
        if not 0 < len(workflow_ids) <= MAX_ARRIVALS:
            raise BadQuery(
                f"name 1 to {MAX_ARRIVALS} workflows (workflow=<id>, repeated); "
                f"{len(workflow_ids)} were named"
            )
        rows = []
        for workflow_id in dict.fromkeys(workflow_ids):
            record = gateway.model.record(workflow_id)
            gate = gate_view(record) if record is not None else None
            if gate is None or not gate_matches(query, gate):
                continue
            if query.assignee is not None and gate.assignee != query.assignee:
                continue
            if query.flow is not None and gate.flow != query.flow:
                continue
            rows.append((gate, decided_label(gateway.model.token_decision(gate.token))))
        return console.render("_gate_rows.html", viewer=viewer, rows=rows)

    @router.get("/gates/row")
    def gate_row(request: Request, workflow_id: str, gate: str, attempt: int) -> Response:
        """One inbox row as it is now: fetched again when its workflow changes, so a
        decided gate shows the workflow moving on."""
        viewer = console.viewer(request)
        token = gate_token(gateway.secret, workflow_id, gate, attempt)
        record = gateway.model.record(workflow_id)
        if record is None:
            raise UnknownWorkflow(
                f"no workflow '{workflow_id}' is known to the gateway", workflow_id=workflow_id
            )
        still = gate_view(record)
        earlier = gateway.model.token_decision(token)
        if still is not None and still.token == token:
            return console.render(
                "_gate_row.html", viewer=viewer, gate=still, decided=decided_label(earlier)
            )
        return console.render(
            "_gate_row.html",
            viewer=viewer,
            gate=None,
            moved=summary_view(record),
            moved_label=moved_on_label(earlier),
            moved_gate=gate,
        )

    @router.post("/gates/decision")
    async def decide(request: Request) -> Response:
        fields = await read_form(request)
        viewer = console.acting(request, fields, action="deciding a gate")
        try:
            body = DecisionRequest(
                workflow_id=fields.get("workflow_id", ""),
                token=fields.get("token", ""),
                decision=fields.get("decision", ""),
                decided_by=viewer.who,
                comment=fields.get("comment", "").strip() or None,
            )
        except ValidationError as exc:
            raise invalid_form(exc) from None
        accepted = await run_in_threadpool(
            lambda: gateway.decide(
                workflow_id=body.workflow_id,
                token=body.token,
                decision=body.decision,
                decided_by=body.decided_by,
                comment=body.comment,
            )
        )
        verb = "approved" if accepted.decision.value == "approve" else "rejected"
        again = " (already recorded)" if accepted.duplicate else ""
        notice = f"{accepted.workflow_id}: gate '{accepted.gate}' {verb}{again}."
        if request.headers.get("HX-Request") == "true":
            record = gateway.model.record(body.workflow_id)
            gate = gate_view(record) if record is not None else None
            return console.render(
                "_gate_row.html",
                viewer=viewer,
                gate=gate,
                decided=decided_label(gateway.model.token_decision(body.token)),
                row_notice=notice,
            )
        back = paths.workflow(body.workflow_id) if fields.get("back") == "workflow" else paths.GATES
        return console.done(request, back, notice)
