"""``/console/dead-letters``: the list, one dead letter, and its replay with a reason."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from sagalog.services.gateway.console import paths
from sagalog.services.gateway.console.forms import invalid_form, read_form
from sagalog.services.gateway.console.listing import PAGE_SIZE
from sagalog.services.gateway.dead_letter_views import ReplayRequest
from sagalog.services.gateway.exceptions import BadQuery

if TYPE_CHECKING:
    from sagalog.services.gateway.console.routes import Console


def dead_letter_routes(router: APIRouter, console: Console) -> None:
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
        fields = await read_form(request)
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
            raise invalid_form(exc) from None
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
