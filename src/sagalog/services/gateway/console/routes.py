"""``/console``: the operator console's routes, each a thin shell over ``Gateway``.

This module holds what every page shares (``Console``: sessions, rendering, refusals),
signing in and out, and ``install_console``; the pages are beside it, by what they
show: ``workflow_pages``, ``gate_pages``, ``dead_letter_pages`` and ``live``.

A page reads the session, asks the read model (or the log) through the gateway's
objects, and renders a template; an action also checks the CSRF token and the key's
role, then calls the same ``Gateway`` method the API calls, so the console, the API
and the CLI answer a request the same way. The decisions (filters, cursors, tables,
sessions) are the plain functions of the modules beside this one.

Every page is server-rendered and works without JavaScript; htmx (vendored in
``static/``, no CDN) only spares a reload: a filter or a "next page" swaps the list,
a decision in the inbox swaps its row, and a live page fetches a region again when the
read model changes what it shows (``live``). A refusal (4xx/5xx) under htmx lands in
the page's alert region, and a session that ended sends the browser to sign in.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
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
from markupsafe import Markup

from sagalog.errors import SagalogError
from sagalog.services.gateway.application import Gateway
from sagalog.services.gateway.auth import ApiKeys, Role, require_operator
from sagalog.services.gateway.console import paths
from sagalog.services.gateway.console.dead_letter_pages import dead_letter_routes
from sagalog.services.gateway.console.forms import read_form
from sagalog.services.gateway.console.gate_pages import gate_routes
from sagalog.services.gateway.console.headers import HEADERS
from sagalog.services.gateway.console.live import live_routes
from sagalog.services.gateway.console.model_stream_pages import model_stream_routes
from sagalog.services.gateway.console.sessions import (
    COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    SIGN_IN_COOKIE,
    SIGN_IN_FORM_S,
    Session,
    SessionSigner,
)
from sagalog.services.gateway.console.stories import IsErased, RowMemo, StoryRow, StorySource
from sagalog.services.gateway.console.workflow_pages import workflow_routes
from sagalog.services.gateway.dead_letter_operations import DeadLetterOperations
from sagalog.services.gateway.exceptions import (
    BadQuery,
    GatewayError,
    SignInRequired,
)

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
        is_erased: whether a personal-data envelope's subject was erased (asks the key
            topic); None: no key file is configured, so every envelope shows as sealed.
    """

    session_s: int = 8 * 3600
    secure_cookie: bool = False
    stories: StorySource | None = None
    live_heartbeat_s: float = 15.0
    live_settle_s: float = 0.5
    is_erased: IsErased | None = None


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
        self.story_rows = RowMemo()
        """The rows of the stories shown lately (``stories.RowMemo``)."""
        self._row_html: dict[int, tuple[StoryRow, Markup]] = {}
        self._row_html_lock = threading.Lock()

    def story_row(self, row: StoryRow) -> Markup:
        """One row of a story as HTML, rendered once while the row is kept: ``RowMemo``
        hands out the same rows while a workflow's seal holds, and rendering a
        500-record story's rows (each value escaped) was most of its page's time."""
        with self._row_html_lock:
            held = self._row_html.get(id(row))
        if held is not None and held[0] is row:
            return held[1]
        html = Markup(_TEMPLATES.get_template("_story_row.html").render(row=row))
        with self._row_html_lock:
            if len(self._row_html) >= self.story_rows.max_rows:
                self._row_html.clear()
            self._row_html[id(row)] = (row, html)  # the row is held, so its id is not reused
        return html

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
    workflow_routes(router, console)
    gate_routes(router, console)
    dead_letter_routes(router, console)
    live_routes(router, console)
    model_stream_routes(router, console)  # app.state.streams: the API's stream hub
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
        fields = await read_form(request)
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
        fields = await read_form(request)
        viewer = console.viewer(request)
        console.signer.check_csrf(
            viewer.session, fields.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
        )
        done = RedirectResponse(paths.SIGN_IN, status_code=303, headers=HEADERS)
        done.delete_cookie(COOKIE, path=paths.ROOT, httponly=True, samesite="strict")
        return done
