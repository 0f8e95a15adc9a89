"""``/console``: the operator console's routes, each a thin shell over ``Gateway``.

A page reads the session, asks the read model (or the log) through the gateway's
objects, and renders a template; an action also checks the CSRF token and the key's
role, then calls the same ``Gateway`` method the API calls, so the console, the API
and the CLI answer a request the same way. The decisions (filters, cursors, tables,
sessions) are the plain functions of the modules beside this one.

Every page is server-rendered and works without JavaScript; htmx (vendored in
``static/``, no CDN) only spares a reload: a filter or a "next page" swaps the list,
a decision in the inbox swaps its row. A refusal (4xx/5xx) under htmx lands in the
page's alert region, and a session that ended sends the browser to sign in.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import jinja2
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from sagalog.durations import format_duration
from sagalog.errors import SagalogError
from sagalog.services.gateway.application import Gateway
from sagalog.services.gateway.auth import ApiKeys, Role, require_operator
from sagalog.services.gateway.console import paths
from sagalog.services.gateway.console.forms import form_fields
from sagalog.services.gateway.console.gates_inbox import (
    decided_label,
    gate_matches,
    moved_on_label,
    parse_gate_query,
)
from sagalog.services.gateway.console.headers import HEADERS
from sagalog.services.gateway.console.listing import (
    DEFAULT_STUCK,
    PAGE_SIZE,
    SCAN_BUDGET,
    STATES,
    Search,
    cursor_suffix,
    cursor_text,
    matcher,
    parse_query,
    parse_search,
    scan_of,
)
from sagalog.services.gateway.console.live import live_routes
from sagalog.services.gateway.console.overview import (
    STUCK_CAP,
    shown_states,
    stuck_rows,
    version_rows,
)
from sagalog.services.gateway.console.sessions import (
    COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    SIGN_IN_COOKIE,
    SIGN_IN_FORM_S,
    Session,
    SessionSigner,
)
from sagalog.services.gateway.console.stories import StorySource, story_rows
from sagalog.services.gateway.dead_letter_operations import DeadLetterOperations
from sagalog.services.gateway.dead_letter_views import ReplayRequest
from sagalog.services.gateway.exceptions import (
    BadQuery,
    GatewayError,
    SignInRequired,
    UnknownWorkflow,
)
from sagalog.services.gateway.views import (
    CancelRequest,
    DecisionRequest,
    GateView,
    detail_view,
    gate_view,
    summary_view,
)
from sagalog.services.gateway.workflow_index import Index, time_suffix
from sagalog.tracker.gates import gate_token

_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("sagalog.services.gateway.console", "templates"),
    autoescape=True,  # every template, whatever its name: each value from an event is text
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass(frozen=True)
class ConsoleOptions:
    """How the console runs in one gateway.

    Attributes:
        session_s: how long a sign-in lasts.
        secure_cookie: mark the cookie Secure even when the request came over plain
            HTTP (a TLS proxy in front that does not say so); over HTTPS it always is.
        stories: where a workflow's story is read (the log); None: the page shows the
            read model's transitions only.
        live_heartbeat_s: how often a quiet live-update connection says it is still there.
        live_settle_s: how long a live-update connection gathers changes after sending
            some, so a burst of transitions costs each page one refresh.
    """

    session_s: int = 8 * 3600
    secure_cookie: bool = False
    stories: StorySource | None = None
    live_heartbeat_s: float = 15.0
    live_settle_s: float = 0.5


@dataclass(frozen=True)
class Viewer:
    """The person a page is for: their session, their key's role, their CSRF token."""

    session: Session
    role: Role
    csrf: str

    @property
    def can_act(self) -> bool:
        return self.role is Role.OPERATOR

    @property
    def who(self) -> str:
        return self.session.who


def _when(value: int | dt.datetime | None) -> str:
    if value is None:
        return "-"
    moment = (
        value if isinstance(value, dt.datetime) else dt.datetime.fromtimestamp(value / 1000, dt.UTC)
    )
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(ms: int) -> str:
    """A duration for a person: the two largest units (``3d 4h``, ``12m 5s``)."""
    seconds = max(ms, 0) // 1000
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts[:2])


_TEMPLATES.filters.update(when=_when, ago=_ago)
_TEMPLATES.globals.update(
    paths=paths,
    workflow_url=paths.workflow,
    dead_letter_url=paths.dead_letter,
    urlencode=urlencode,
    CSRF_FIELD=CSRF_FIELD,
)


class Console:
    """What every console route shares: the gateway, the session signer, the renderer."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        keys: ApiKeys,
        dead_letters: DeadLetterOperations | None,
        options: ConsoleOptions,
    ) -> None:
        self.gateway = gateway
        self.keys = keys
        self.dead_letters = dead_letters
        self.options = options
        self.signer = SessionSigner(gateway.secret)
        self.roles = {self.signer.key_id(key): role for key, role in keys.by_role()}
        self.correlation_keys = sorted({k for flow in gateway.flows for k in flow.correlation_keys})

    def now_s(self) -> int:
        return int(self.gateway.now().timestamp())

    def now_ms(self) -> int:
        return int(self.gateway.now().timestamp() * 1000)

    # -- sessions --------------------------------------------------------------------

    def viewer(self, request: Request) -> Viewer:
        """The signed-in person; raises ``SignInRequired`` (a redirect to sign in)."""
        session = self.signer.read(request.cookies.get(COOKIE), now_s=self.now_s())
        role = self.roles.get(session.key_id)
        if role is None:
            raise SignInRequired(
                "the key this session signed in with is no longer accepted by the gateway "
                "(it was rotated out); sign in with a current key"
            )
        return Viewer(session=session, role=role, csrf=self.signer.csrf_token(session))

    def acting(self, request: Request, fields: Mapping[str, str], *, action: str) -> Viewer:
        """The person posting ``action``, once the session, its CSRF token and the key's
        role allow it: the checks every action passes before anything is written."""
        viewer = self.viewer(request)
        self.signer.check_csrf(
            viewer.session, fields.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
        )
        require_operator(viewer.role, action=action)
        return viewer

    def cookie_secure(self, request: Request) -> bool:
        return self.options.secure_cookie or request.url.scheme == "https"

    # -- responses -------------------------------------------------------------------

    def render(
        self,
        template: str,
        *,
        viewer: Viewer | None,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        hx_headers = json.dumps({CSRF_HEADER: viewer.csrf}) if viewer is not None else None
        context = {"notice": None, "nav": None, "live": None, **context}
        text = _TEMPLATES.get_template(template).render(
            viewer=viewer, hx_headers=hx_headers, **context
        )
        return HTMLResponse(text, status_code=status, headers=HEADERS)

    def refusal(self, request: Request, exc: SagalogError) -> Response:
        """A refusal as a page, a fragment for htmx, or, for a session that ended, the
        way to the sign-in page."""
        htmx = request.headers.get("HX-Request") == "true"
        if isinstance(exc, SignInRequired):
            target = paths.SIGN_IN
            if request.method == "GET":
                path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                target += "?" + urlencode({"next": path})
            if htmx:
                return Response(status_code=401, headers={**HEADERS, "HX-Redirect": target})
            return RedirectResponse(target, status_code=303, headers=HEADERS)
        status = exc.status if isinstance(exc, GatewayError) else 503
        template = "_alert.html" if htmx else "error.html"
        viewer = None
        if not htmx:
            try:
                viewer = self.viewer(request)
            except SignInRequired:
                viewer = None
        return self.render(template, viewer=viewer, status=status, message=str(exc))

    def done(self, request: Request, target: str, notice: str) -> Response:
        """After an action: back to ``target`` with ``notice`` (post, redirect, get)."""
        separator = "&" if "?" in target else "?"
        return RedirectResponse(
            f"{target}{separator}{urlencode({'notice': notice})}", status_code=303, headers=HEADERS
        )


def _route_class(console: Console) -> type[APIRoute]:
    class ConsoleRoute(APIRoute):
        """Refusals become pages (the API's handlers answer JSON)."""

        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def guarded(request: Request) -> Response:
                try:
                    return await handler(request)
                except SagalogError as exc:
                    return console.refusal(request, exc)
                except RequestValidationError as exc:
                    problems = "; ".join(
                        f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}"
                        for e in exc.errors()
                    )
                    return console.refusal(request, BadQuery(f"the request is invalid: {problems}"))

            return guarded

    return ConsoleRoute


def _here(request: Request) -> str:
    """This page's address without its one-time notice: what a live region fetches again."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "notice"]
    return request.url.path + (f"?{urlencode(query)}" if query else "")


def _invalid(exc: ValidationError) -> BadQuery:
    problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    refusal = BadQuery(f"the form is incomplete or wrong: {problems}; nothing was done")
    refusal.status = 422
    return refusal


async def _form(request: Request) -> dict[str, str]:
    return form_fields(await request.body(), request.headers.get("content-type", ""))


def install_console(
    app: FastAPI,
    gateway: Gateway,
    *,
    keys: ApiKeys,
    dead_letters: DeadLetterOperations | None,
    options: ConsoleOptions | None,
) -> None:
    """Serve the console under ``/console``, and its static files under ``/console/static``."""
    console = Console(
        gateway, keys=keys, dead_letters=dead_letters, options=options or ConsoleOptions()
    )
    router = APIRouter(
        prefix=paths.ROOT, include_in_schema=False, route_class=_route_class(console)
    )
    _session_routes(router, console)
    _workflow_routes(router, console)
    _gate_routes(router, console)
    _dead_letter_routes(router, console)
    live_routes(router, console)
    app.include_router(router)
    app.mount(
        paths.STATIC,
        StaticFiles(packages=[("sagalog.services.gateway.console", "static")]),
        name="console-static",
    )


# -- signing in and out ----------------------------------------------------------------


def _session_routes(router: APIRouter, console: Console) -> None:
    def sign_in_page(
        request: Request,
        *,
        status: int = 200,
        error: str | None = None,
        who: str = "",
        target: str | None = None,
    ) -> Response:
        nonce = console.signer.sign_in_nonce()
        page = console.render(
            "sign_in.html",
            viewer=None,
            status=status,
            error=error,
            who=who,
            token=console.signer.sign_in_token(nonce),
            next=paths.local_target(target or request.query_params.get("next")),
        )
        page.set_cookie(
            SIGN_IN_COOKIE,
            nonce,
            max_age=SIGN_IN_FORM_S,
            path=paths.SIGN_IN,
            httponly=True,
            samesite="strict",
            secure=console.cookie_secure(request),
        )
        return page

    @router.get("/sign-in")
    def sign_in_form(request: Request) -> Response:
        return sign_in_page(request)

    @router.post("/sign-in")
    async def sign_in(request: Request) -> Response:
        fields = await _form(request)
        console.signer.check_sign_in(request.cookies.get(SIGN_IN_COOKIE), fields.get(CSRF_FIELD))
        who = fields.get("who", "").strip()
        target = fields.get("next")
        try:
            console.keys.role_of(fields.get("api_key"))
        except GatewayError as exc:
            return sign_in_page(request, status=exc.status, error=str(exc), who=who, target=target)
        if not 0 < len(who) <= 200:
            return sign_in_page(
                request,
                status=422,
                error="give your name or email (up to 200 characters): it is recorded with "
                "every decision, cancellation and replay you make",
                target=target,
            )
        token = console.signer.issue(
            who=who,
            api_key=fields["api_key"].encode("utf-8", "replace"),
            now_s=console.now_s(),
            lifetime_s=console.options.session_s,
        )
        done = RedirectResponse(paths.local_target(target), status_code=303, headers=HEADERS)
        done.set_cookie(
            COOKIE,
            token,
            max_age=console.options.session_s,
            path=paths.ROOT,
            httponly=True,
            samesite="strict",
            secure=console.cookie_secure(request),
        )
        done.delete_cookie(SIGN_IN_COOKIE, path=paths.SIGN_IN)
        return done

    @router.post("/sign-out")
    async def sign_out(request: Request) -> Response:
        fields = await _form(request)
        viewer = console.viewer(request)
        console.signer.check_csrf(
            viewer.session, fields.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
        )
        done = RedirectResponse(paths.SIGN_IN, status_code=303, headers=HEADERS)
        done.delete_cookie(COOKIE, path=paths.ROOT, httponly=True, samesite="strict")
        return done


# -- overview, workflows, one workflow ----------------------------------------------------


def _workflow_routes(router: APIRouter, console: Console) -> None:
    gateway = console.gateway

    @router.get("")
    def overview(request: Request) -> Response:
        viewer = console.viewer(request)
        since = gateway.model.changes.sequence  # before reading: nothing falls in between
        gateway.require_ready()
        stuck_text = request.query_params.get("stuck") or DEFAULT_STUCK
        stuck_ms = parse_query({"stuck": stuck_text}).stuck_ms
        assert stuck_ms is not None
        idle = gateway.model.index_facets(Index.IDLE, high=time_suffix(console.now_ms() - stuck_ms))
        stuck = list(itertools.islice(idle, STUCK_CAP + 1))
        dead_letters: int | None = None
        dead_letter_error = None
        if console.dead_letters is not None:
            try:
                dead_letters = console.dead_letters.record_count()
            except SagalogError as exc:
                dead_letter_error = str(exc)
        gates = gateway.model.open_gates(limit=1001)
        rows = version_rows(gateway.model.version_counts())
        return console.render(
            "overview.html",
            viewer=viewer,
            nav="overview",
            live=paths.live(None, since=since),
            here=_here(request),
            rows=rows,
            states=shown_states(rows),
            stuck=stuck_rows(stuck[:STUCK_CAP]),
            stuck_total=min(len(stuck), STUCK_CAP),
            stuck_capped=len(stuck) > STUCK_CAP,
            stuck_text=format_duration(stuck_ms),
            dead_letters=dead_letters,
            dead_letter_error=dead_letter_error,
            dead_letters_served=console.dead_letters is not None,
            open_gates=min(len(gates), 1000),
            open_gates_capped=len(gates) > 1000,
        )

    @router.get("/workflows")
    def workflows(request: Request) -> Response:
        viewer = console.viewer(request)
        gateway.require_ready()
        params = dict(request.query_params)
        now_ms = console.now_ms()
        search_text = params.get("q", "").strip()
        query = parse_query(params)
        next_url = None
        scanned = None
        if search_text:
            records = _search(console, parse_search(search_text, console.correlation_keys))
        else:
            scan = scan_of(query, now_ms)
            after = params.get("after")
            page = gateway.model.index_page(
                scan.index,
                low=scan.low,
                high=scan.high,
                after=cursor_suffix(after, scan.index) if after else None,
                backwards=scan.backwards,
                keep=matcher(query),
                limit=PAGE_SIZE,
                budget=SCAN_BUDGET,
            )
            records, scanned = page.records, page.scanned
            if page.resume_after is not None:
                resume = cursor_text(scan.index, page.resume_after)
                next_url = f"{paths.WORKFLOWS}?{urlencode({**query.params(), 'after': resume})}"
        rows = [(summary_view(r), now_ms - r.entered_current_state_at_ms) for r in records]
        return console.render(
            "workflows.html",
            viewer=viewer,
            nav="workflows",
            rows=rows,
            query=query.params(),
            q=search_text,
            states=STATES,
            flows=sorted({(f.name, f.version) for f in gateway.flows}),
            correlation_keys=console.correlation_keys,
            next_url=next_url,
            short_page=scanned is not None and next_url is not None and len(rows) < PAGE_SIZE,
            first_page=not params.get("after"),
        )

    @router.get("/workflows/{workflow_id:path}")
    def workflow(request: Request, workflow_id: str) -> Response:
        viewer = console.viewer(request)
        since = gateway.model.changes.sequence
        record = gateway.model.record(workflow_id)
        if record is None:
            raise UnknownWorkflow(
                f"no workflow '{workflow_id}' is known to the gateway; check the id, or "
                "search the workflows list by id or correlation key",
                workflow_id=workflow_id,
            )
        history = gateway.model.history(workflow_id)
        detail = detail_view(record, history)
        story, story_notes, story_error = None, [], None
        if console.options.stories is not None:
            try:
                trail = console.options.stories.story(record, history)
                story = story_rows(trail)
                story_notes = [*trail.notes] + [
                    f"sealed event {s.event_id} at {s.topic}/{s.partition}@{s.offset} was not "
                    "found in the log"
                    for s in trail.missing
                ]
            except SagalogError as exc:
                story_error = str(exc)
        try:
            flow = gateway.flow_of(record)
            steps = [entry.name for entry in flow.entries]
        except GatewayError:
            steps = []
        gate = detail.open_gate
        return console.render(
            "workflow.html",
            viewer=viewer,
            nav="workflows",
            live=paths.live(workflow_id, since=since),
            w=detail,
            steps=steps,
            story=story,
            story_notes=story_notes,
            story_error=story_error,
            gate=gate,
            gate_decided=decided_label(gateway.model.token_decision(gate.token)) if gate else None,
            cancellable=not record.is_terminal and record.state.value != "compensating",
            notice=request.query_params.get("notice"),
        )

    @router.post("/workflows/{workflow_id:path}/cancel")
    async def cancel(request: Request, workflow_id: str) -> Response:
        fields = await _form(request)
        viewer = console.acting(request, fields, action="cancelling a workflow")
        try:
            body = CancelRequest(reason=fields.get("reason", "").strip(), requested_by=viewer.who)
        except ValidationError as exc:
            raise _invalid(exc) from None
        accepted = await run_in_threadpool(
            gateway.cancel, workflow_id, reason=body.reason, requested_by=body.requested_by
        )
        again = " (asked before: nothing new published)" if accepted.duplicate else ""
        return console.done(
            request,
            paths.workflow(workflow_id),
            f"cancellation published{again}: the tracker compensates what the workflow did",
        )


def _search(console: Console, search: Search) -> list[Any]:
    model = console.gateway.model
    if search.key is not None:
        return model.by_key(search.key, search.value or "", limit=PAGE_SIZE)
    record = model.record(search.workflow_id or "")
    return [record] if record is not None else []


# -- the gates inbox -------------------------------------------------------------------


def _gate_routes(router: APIRouter, console: Console) -> None:
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
        fields = await _form(request)
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
            raise _invalid(exc) from None
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


# -- dead letters ------------------------------------------------------------------------


def _dead_letter_routes(router: APIRouter, console: Console) -> None:
    @router.get("/dead-letters")
    def dead_letters(request: Request) -> Response:
        viewer = console.viewer(request)
        operations = console.dead_letters
        page = None
        if operations is not None:
            page = operations.page(after=request.query_params.get("after") or None, limit=PAGE_SIZE)
        next_url = None
        if page is not None and page.next_after is not None:
            next_url = f"{paths.DEAD_LETTERS}?{urlencode({'after': page.next_after})}"
        return console.render(
            "dead_letters.html",
            viewer=viewer,
            nav="dead_letters",
            page=page,
            next_url=next_url,
        )

    @router.get("/dead-letters/{position:path}")
    def dead_letter(request: Request, position: str) -> Response:
        viewer = console.viewer(request)
        if console.dead_letters is None:
            raise BadQuery("this gateway serves no dead letters (no dead-letter topics configured)")
        letter = console.dead_letters.show(position)
        return console.render(
            "dead_letter.html",
            viewer=viewer,
            nav="dead_letters",
            letter=letter,
            payload_json=json.dumps(letter.payload, indent=2, ensure_ascii=False)
            if letter.payload is not None
            else None,
            notice=request.query_params.get("notice"),
        )

    @router.post("/dead-letters/{position:path}/replay")
    async def replay(request: Request, position: str) -> Response:
        fields = await _form(request)
        viewer = console.acting(request, fields, action="replaying a dead letter")
        if console.dead_letters is None:
            raise BadQuery("this gateway serves no dead letters (no dead-letter topics configured)")
        try:
            body = ReplayRequest(
                reason=fields.get("reason", "").strip(),
                requested_by=viewer.who,
                again=fields.get("again") == "yes",
            )
        except ValidationError as exc:
            raise _invalid(exc) from None
        operations = console.dead_letters
        accepted = await run_in_threadpool(
            lambda: operations.replay(
                position, reason=body.reason, requested_by=body.requested_by, again=body.again
            )
        )
        return console.done(
            request,
            paths.dead_letter(position),
            f"replay {accepted.replay} published to {accepted.replayed_to} "
            f"(event {accepted.replay_event_id})",
        )
