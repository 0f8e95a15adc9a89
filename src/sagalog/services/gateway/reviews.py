"""``/reviews``: a server-rendered page listing open gates, with approve/reject buttons.

Plain HTML and form posts, no JavaScript: it works in any browser, in a mail
client's web view, and behind any proxy. A decision posted here goes through the
same ``Gateway.decide`` as ``POST /v1/gates/decisions``, so the same checks apply.

**The API key, and the trade-off.** A browser cannot add an ``X-API-Key`` header to
a link or a form post, so the page also takes the key as ``?api_key=`` and carries
it in a hidden form field:

- *Query/form key* (``/reviews?api_key=...``): works with a bookmark and no other
  infrastructure, but the key sits in the URL: in browser history, in proxy and
  access logs, in a screenshot. The page limits the damage (``Referrer-Policy:
  no-referrer`` so it never leaves in a Referer header, ``Cache-Control: no-store``,
  no third-party resources, no framing), but anyone who sees the URL can decide
  gates. Give reviewers their own key, and rotate it (several keys may be valid at
  once).
- *Header key*: put the page behind an authenticating reverse proxy that adds
  ``X-API-Key``; then no key appears in any URL or page, and the forms carry none.
  Prefer this wherever a proxy exists.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Mapping, Sequence
from typing import Annotated
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from sagalog.services.gateway.application import Gateway
from sagalog.services.gateway.auth import check_api_key
from sagalog.services.gateway.exceptions import GatewayError, MalformedBody
from sagalog.services.gateway.views import DecisionAccepted, DecisionRequest, GateView, gate_view

HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'",
}

_STYLE = """
body{font:15px/1.4 system-ui,sans-serif;margin:2rem;color:#1d1d1f}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.5rem;
border-bottom:1px solid #ddd;vertical-align:top}th{background:#f4f4f6}
.notice{padding:.6rem 1rem;border-radius:4px;margin-bottom:1rem;background:#e7f6ea}
.error{background:#fde8e8}button{margin-right:.3rem}code{font-size:12px}
input[type=text]{width:12rem}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _when(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def render_page(
    gates: Sequence[GateView],
    *,
    decided: Mapping[str, str] | None = None,
    form_key: str | None,
    decided_by: str = "",
    notice: str | None = None,
    error: str | None = None,
) -> str:
    """The page: every value escaped; ``form_key`` goes into the forms only when the
    key came in the URL (a header key is added again by whatever added it).

    ``decided`` maps the tokens already answered through the gateway to the answer:
    those rows show it instead of buttons, since the tracker (and so the read model)
    takes a moment to close the gate, and a second click would only be refused.
    """
    hidden_key = f'<input type="hidden" name="api_key" value="{_e(form_key)}">' if form_key else ""
    rows = []
    for gate in gates:
        rows.append(
            f"""<tr data-workflow="{_e(gate.workflow_id)}">
<td><strong>{_e(gate.workflow_id)}</strong><br>{_e(gate.flow)} v{gate.flow_version}</td>
<td>{_e(gate.gate)}</td><td>{_e(gate.assignee)}<br>level {gate.escalation_level}</td>
<td>{_when(gate.opened_at)}</td><td>{_when(gate.deadline)}</td>
<td>{_decision_cell(gate, hidden_key, decided_by, (decided or {}).get(gate.token))}</td></tr>"""
        )
    banner = ""
    if notice:
        banner = f'<p class="notice" role="status">{_e(notice)}</p>'
    if error:
        banner = f'<p class="notice error" role="alert">{_e(error)}</p>'
    table = (
        "<table><thead><tr><th>Workflow</th><th>Gate</th><th>Assignee</th><th>Opened</th>"
        "<th>Deadline</th><th>Decision</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        if rows
        else '<p id="empty">No gate is waiting for a decision.</p>'
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>Reviews - sagalog</title><style>{_STYLE}</style></head><body>"
        f"<h1>Decisions waiting ({len(gates)})</h1>{banner}{table}</body></html>"
    )


def _decision_cell(gate: GateView, hidden_key: str, decided_by: str, answer: str | None) -> str:
    if answer is not None:
        return f'<em class="decided">{_e(answer)}: waiting for the workflow to move on</em>'
    return f"""<form method="post" action="/reviews/decisions">{hidden_key}
<input type="hidden" name="workflow_id" value="{_e(gate.workflow_id)}">
<input type="hidden" name="token" value="{_e(gate.token)}">
<input type="text" name="decided_by" placeholder="your email" required maxlength="200"
 value="{_e(decided_by)}" aria-label="decided by">
<input type="text" name="comment" placeholder="comment (optional)" maxlength="2000"
 aria-label="comment">
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="reject">Reject</button>
</form>"""


def render_key_form(message: str) -> str:
    """The page a browser gets without a valid key: why, and a field to enter one."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Reviews - sagalog</title><style>{_STYLE}</style></head><body>"
        f'<h1>Reviews</h1><p class="notice error" role="alert">{_e(message)}</p>'
        '<form method="get" action="/reviews"><label>API key '
        '<input type="password" name="api_key" required></label> '
        "<button type=submit>Open</button></form></body></html>"
    )


def reviews_router(gateway: Gateway, *, api_keys: Sequence[bytes]) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    def page(
        *,
        form_key: str | None,
        decided_by: str = "",
        assignee: str | None = None,
        notice: str | None = None,
        error: str | None = None,
        status: int = 200,
    ) -> HTMLResponse:
        try:
            gateway.require_ready()
            records = gateway.model.open_gates(assignee=assignee or None, limit=500)
        except GatewayError as exc:
            records, error, status = [], str(exc), exc.status
        gates = [g for g in map(gate_view, records) if g is not None]
        decided = {}
        for gate in gates:
            earlier = gateway.model.token_decision(gate.token)
            if earlier is not None:
                verb = "approved" if earlier["decision"] == "approve" else "rejected"
                decided[gate.token] = f"{verb} by {earlier.get('decided_by') or 'someone'}"
        text = render_page(
            gates,
            decided=decided,
            form_key=form_key,
            decided_by=decided_by,
            notice=notice,
            error=error,
        )
        return HTMLResponse(text, status_code=status, headers=HEADERS)

    @router.get("/reviews", response_class=HTMLResponse)
    def reviews(
        api_key: str | None = None,
        x_api_key: Annotated[str | None, Header()] = None,
        assignee: str | None = None,
        by: Annotated[str, Query(max_length=200)] = "",
        notice: Annotated[str | None, Query(max_length=500)] = None,
    ) -> HTMLResponse:
        key = x_api_key or api_key
        try:
            check_api_key(key, api_keys)
        except GatewayError as exc:
            return HTMLResponse(render_key_form(str(exc)), exc.status, headers=HEADERS)
        form_key = None if x_api_key else api_key
        return page(form_key=form_key, decided_by=by, assignee=assignee, notice=notice)

    @router.post("/reviews/decisions", response_class=HTMLResponse)
    async def decide(
        request: Request, x_api_key: Annotated[str | None, Header()] = None
    ) -> Response:
        fields = _form_fields(await request.body(), request.headers.get("content-type", ""))
        form_key = fields.pop("api_key", None)
        key = x_api_key or form_key
        try:
            check_api_key(key, api_keys)
        except GatewayError as exc:
            return HTMLResponse(render_key_form(str(exc)), exc.status, headers=HEADERS)
        form_key = None if x_api_key else form_key
        decided_by = fields.get("decided_by", "")
        try:
            body = DecisionRequest.model_validate(fields)
            accepted = await _run(gateway, body)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
            )
            return page(form_key=form_key, decided_by=decided_by, error=problems, status=422)
        except GatewayError as exc:
            return page(form_key=form_key, decided_by=decided_by, error=str(exc), status=exc.status)
        verb = "approved" if accepted.decision.value == "approve" else "rejected"
        again = " (already recorded)" if accepted.duplicate else ""
        notice = f"{accepted.workflow_id}: gate '{accepted.gate}' {verb}{again}."
        query = {"notice": notice, "by": decided_by}
        if form_key:
            query["api_key"] = form_key
        return RedirectResponse(f"/reviews?{urlencode(query)}", status_code=303, headers=HEADERS)

    return router


async def _run(gateway: Gateway, body: DecisionRequest) -> DecisionAccepted:
    return await run_in_threadpool(
        lambda: gateway.decide(
            workflow_id=body.workflow_id,
            token=body.token,
            decision=body.decision,
            decided_by=body.decided_by,
            comment=body.comment or None,
        )
    )


def _form_fields(body: bytes, content_type: str) -> dict[str, str]:
    """A urlencoded form's fields, the last value of each (what a browser sends).

    Raises:
        MalformedBody: the body is not ``application/x-www-form-urlencoded``.
    """
    if not content_type.startswith("application/x-www-form-urlencoded"):
        raise MalformedBody(
            "the reviews page posts an HTML form (application/x-www-form-urlencoded); "
            "scripts should use POST /v1/gates/decisions with JSON"
        )
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[-1] for name, values in parsed.items()}
