"""``/console`` and ``/console/workflows``: the overview, the list, one workflow and its
cancellation."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from sagalog.audit.verify import Verification
from sagalog.durations import format_duration, positive_duration_ms
from sagalog.errors import SagalogError
from sagalog.services.gateway.console import paths
from sagalog.services.gateway.console.analytics import analyse, durations_chart, throughput_chart
from sagalog.services.gateway.console.forms import invalid_form, read_form
from sagalog.services.gateway.console.gates_inbox import decided_label
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
from sagalog.services.gateway.console.overview import (
    STUCK_CAP,
    shown_states,
    stuck_rows,
    version_rows,
)
from sagalog.services.gateway.console.stories import story_rows
from sagalog.services.gateway.exceptions import BadQuery, GatewayError, UnknownWorkflow
from sagalog.services.gateway.views import CancelRequest, detail_view, summary_view
from sagalog.services.gateway.workflow_index import Index, time_suffix

if TYPE_CHECKING:
    from sagalog.services.gateway.console.routes import Console


def _here(request: Request) -> str:
    """This page's address without its one-time notice: what a live region fetches again."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "notice"]
    return request.url.path + (f"?{urlencode(query)}" if query else "")


def workflow_routes(router: APIRouter, console: Console) -> None:
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
        gates = gateway.model.open_gate_count(cap=1001)
        rows = version_rows(gateway.model.version_counts())
        now_ms = console.now_ms()
        hour = analyse(  # the last hour's throughput; the analytics page has the rest
            gateway.model.newest_facets(Index.START, low=time_suffix(now_ms - HOUR_MS)),
            now_ms=now_ms,
            window_ms=HOUR_MS,
            budget=OVERVIEW_BUDGET,
        )
        return console.render(
            "overview.html",
            hour=hour,
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
            open_gates=min(gates, 1000),
            open_gates_capped=gates > 1000,
        )

    @router.get("/analytics")
    def analytics(request: Request) -> Response:
        viewer = console.viewer(request)
        gateway.require_ready()
        window_text = request.query_params.get("window") or "1d"
        window_ms = _window(window_text)
        now_ms = console.now_ms()
        figures = analyse(
            gateway.model.newest_facets(Index.START, low=time_suffix(now_ms - window_ms)),
            now_ms=now_ms,
            window_ms=window_ms,
        )
        labels = [_minute(ms) for ms in figures.throughput.minute_ms]
        return console.render(
            "analytics.html",
            viewer=viewer,
            nav="analytics",
            figures=figures,
            window_text=format_duration(window_ms),
            throughput_chart=json.dumps(throughput_chart(figures.throughput, labels)),
            durations_chart=json.dumps(durations_chart(figures.durations)),
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
        story, story_notes, story_error = None, [], None
        verifying = _verify_asked(request)
        verification: Verification | None = None
        if verifying and console.options.stories is None:
            raise BadQuery(
                "this gateway reads no log (it was started without one), so it cannot verify "
                "the workflow's audit chain; run `sagalog audit --verify` instead"
            )
        if console.options.stories is not None:
            try:
                if verifying:
                    trail, verification = console.options.stories.verified(record, history)
                else:
                    trail = console.options.stories.story(record, history)
                story = story_rows(
                    trail, is_erased=console.options.is_erased, memo=console.story_rows
                )
                story_notes = [*trail.notes] + [
                    f"sealed event {s.event_id} at {s.topic}/{s.partition}@{s.offset} was not "
                    "found in the log"
                    for s in trail.missing
                ]
            except SagalogError as exc:
                story_error = str(exc)
        # The read model's transitions are listed only when the log's story is not shown.
        detail = detail_view(record, history if story is None else [])
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
            story_row=console.story_row,
            story_notes=story_notes,
            story_error=story_error,
            verifying=verifying,
            verification=verification,
            verified_at=console.now_ms(),
            gate=gate,
            gate_decided=decided_label(gateway.model.token_decision(gate.token)) if gate else None,
            cancellable=not record.is_terminal and record.state.value != "compensating",
            notice=request.query_params.get("notice"),
        )

    @router.post("/workflows/{workflow_id:path}/cancel")
    async def cancel(request: Request, workflow_id: str) -> Response:
        fields = await read_form(request)
        viewer = console.acting(request, fields, action="cancelling a workflow")
        try:
            body = CancelRequest(reason=fields.get("reason", "").strip(), requested_by=viewer.who)
        except ValidationError as exc:
            raise invalid_form(exc) from None
        accepted = await run_in_threadpool(
            gateway.cancel, workflow_id, reason=body.reason, requested_by=body.requested_by
        )
        again = " (asked before: nothing new published)" if accepted.duplicate else ""
        return console.done(
            request,
            paths.workflow(workflow_id),
            f"cancellation published{again}: the tracker compensates what the workflow did",
        )


MAX_WINDOW_MS = 90 * 86_400_000
HOUR_MS = 3_600_000
OVERVIEW_BUDGET = 20_000
"""The most workflows started in the last hour the overview reads to count them."""


def _window(text: str) -> int:
    """The analytics window (``6h``, ``1d``, ``7d``), refused past 90 days."""
    try:
        window_ms = positive_duration_ms(text)
    except ValueError:
        raise BadQuery(
            f"window={text!r} is not a duration; give one such as 6h, 1d or 7d"
        ) from None
    if window_ms > MAX_WINDOW_MS:
        raise BadQuery(f"window={text!r}: give a duration between 1s and 90d")
    return window_ms


def _minute(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M")


def _verify_asked(request: Request) -> bool:
    """``?verify=1`` asks the page to check the audit chain; anything else is refused, so a
    mistyped link does not pass for a page that verified nothing."""
    value = request.query_params.get("verify")
    if value is None:
        return False
    if value != "1":
        raise BadQuery(f"verify={value!r} is not understood: use verify=1, or leave it out")
    return True


def _search(console: Console, search: Search) -> list[Any]:
    model = console.gateway.model
    if search.key is not None:
        return model.by_key(search.key, search.value or "", limit=PAGE_SIZE)
    record = model.record(search.workflow_id or "")
    return [record] if record is not None else []
