"""The workflows list: its filters and cursors (``console.listing``, pure) and the read
model's listing indexes and keyset pages (``ReadModel.index_page``) on a real RocksDB."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagalog.flows.states import WorkflowState
from sagalog.services.gateway.console.listing import (
    WorkflowQuery,
    cursor_suffix,
    cursor_text,
    matcher,
    parse_query,
    parse_search,
    scan_of,
)
from sagalog.services.gateway.exceptions import BadQuery
from sagalog.services.gateway.read_model import ReadModel
from sagalog.services.gateway.workflow_index import Facets, Index
from sagalog.tracker.record import WorkflowRecord

T0 = 1_700_000_000_000
MINUTE = 60_000


def record(
    workflow_id: str,
    *,
    started: int,
    state: WorkflowState = WorkflowState.RUNNING,
    entered: int | None = None,
    flow: str = "procurement",
    version: int = 1,
) -> WorkflowRecord:
    return WorkflowRecord(
        workflow_id=workflow_id,
        flow=flow,
        flow_version=version,
        state=state,
        started_at_ms=started,
        entered_current_state_at_ms=entered if entered is not None else started,
    )


def put(model: ReadModel, *records: WorkflowRecord) -> None:
    batch = model.batch()
    for r in records:
        batch.put_record(r.workflow_id, json.dumps(r.to_stored()).encode())
    batch.commit()


@pytest.fixture
def model(tmp_path: Path) -> Iterator[ReadModel]:
    model = ReadModel(tmp_path / "rm")
    yield model
    model.close()


def pages(model: ReadModel, query: WorkflowQuery, *, now_ms: int, limit: int, budget: int = 10**6):
    """Every page of ``query``, following each cursor as the page's link would."""
    scan = scan_of(query, now_ms)
    after = None
    while True:
        page = model.index_page(
            scan.index,
            low=scan.low,
            high=scan.high,
            after=cursor_suffix(after, scan.index) if after else None,
            backwards=scan.backwards,
            keep=matcher(query),
            limit=limit,
            budget=budget,
        )
        yield [r.workflow_id for r in page.records]
        if page.resume_after is None:
            return
        after = cursor_text(scan.index, page.resume_after)


# -- parsing -------------------------------------------------------------------------


def test_a_query_reads_every_filter_and_writes_itself_back() -> None:
    params = {
        "flow": "procurement",
        "version": "2",
        "state": "failed",
        "started_from": "2026-12-01T00:00",
        "started_to": "2026-12-03T09:30",
        "ended_from": "2026-12-02T00:00Z",
        "stuck": "90m",
        "q": "",
        "ended_to": "",
    }
    query = parse_query(params)
    assert query.state is WorkflowState.FAILED and query.version == 2
    assert query.stuck_ms == 90 * MINUTE and query.ended_to_ms is None
    assert parse_query(query.params()) == query
    assert query.params()["started_to"] == "2026-12-03T09:30"


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"version": "two"}, "version"),
        ({"state": "lost"}, "state"),
        ({"stuck": "soon"}, "stuck"),
        ({"stuck": "0s"}, "stuck"),
        ({"started_from": "yesterday"}, "started_from"),
        ({"ended_to": "2026-13-01"}, "ended_to"),
    ],
)
def test_a_bad_filter_is_a_400_that_names_it(params: dict[str, str], named: str) -> None:
    with pytest.raises(BadQuery) as refused:
        parse_query(params)
    assert refused.value.status == 400
    assert str(refused.value).startswith(f"{named}=")
    assert refused.value.detail == {"parameter": named}


def test_a_cursor_resumes_only_the_order_it_was_made_for() -> None:
    text = cursor_text(Index.START, b"0001700000000000wf-1")
    assert cursor_suffix(text, Index.START) == b"0001700000000000wf-1"
    for bad, index in [(text, Index.IDLE), ("%%%", Index.START), ("", Index.START)]:
        with pytest.raises(BadQuery, match="first page"):
            cursor_suffix(bad, index)


def test_a_search_is_an_id_or_a_declared_correlation_key() -> None:
    keys = ["filing_number"]
    assert parse_search(" wf-1 ", keys).workflow_id == "wf-1"
    found = parse_search("filing_number=F-1", keys)
    assert (found.key, found.value) == ("filing_number", "F-1")
    with pytest.raises(BadQuery, match=r"'order' is not a correlation key.*filing_number"):
        parse_search("order=7", keys)


def test_facets_round_trip() -> None:
    facets = Facets(WorkflowState.AWAITING_INPUT, "filing", 2, T0, T0 + 5)
    assert Facets.decode(facets.encode()) == facets


# -- pages on the read model -----------------------------------------------------------


def test_every_workflow_comes_exactly_once_newest_first_across_pages(model: ReadModel) -> None:
    # 137 workflows, several started in the same millisecond (the id breaks the tie).
    records = [record(f"wf-{n:03d}", started=T0 + (n // 3) * MINUTE) for n in range(137)]
    put(model, *records)
    seen = [wid for page in pages(model, WorkflowQuery(), now_ms=T0, limit=20) for wid in page]
    assert len(seen) == 137 and set(seen) == {r.workflow_id for r in records}
    by_start = sorted(records, key=lambda r: (r.started_at_ms, r.workflow_id), reverse=True)
    assert seen == [r.workflow_id for r in by_start]


def test_a_workflow_started_while_paging_is_neither_skipped_nor_repeated(model: ReadModel) -> None:
    put(model, *[record(f"wf-{n:02d}", started=T0 + n) for n in range(30)])
    scan = scan_of(WorkflowQuery(), T0)
    keep = matcher(WorkflowQuery())
    first = model.index_page(
        scan.index, low=scan.low, high=scan.high, after=None, backwards=True,
        keep=keep, limit=10, budget=1000,
    )  # fmt: skip
    put(model, record("wf-new", started=T0 + 10_000))  # newer: belongs before page 1
    rest = model.index_page(
        scan.index, low=scan.low, high=scan.high, after=first.resume_after, backwards=True,
        keep=keep, limit=100, budget=1000,
    )  # fmt: skip
    ids = [r.workflow_id for r in first.records + rest.records]
    assert ids == [f"wf-{n:02d}" for n in range(29, -1, -1)]


def test_filters_are_checked_on_the_index_entries(model: ReadModel) -> None:
    put(
        model,
        record("a", started=T0, state=WorkflowState.FAILED, entered=T0 + 5 * MINUTE),
        record("b", started=T0 + MINUTE, state=WorkflowState.COMPLETED, entered=T0 + 9 * MINUTE),
        record("c", started=T0 + 2 * MINUTE, flow="filing", version=2),
        record("d", started=T0 + 3 * MINUTE, version=2),
    )

    def ids(**params: str) -> list[str]:
        query = parse_query(params)
        return [w for page in pages(model, query, now_ms=T0 + 60 * MINUTE, limit=2) for w in page]

    assert ids() == ["d", "c", "b", "a"]
    assert ids(flow="filing") == ["c"]
    assert ids(flow="procurement", version="2") == ["d"]
    assert ids(state="failed") == ["a"]
    started = {"started_from": "2023-11-14T22:14", "started_to": "2023-11-14T22:16"}
    assert T0 == 1_700_000_000_000  # 2023-11-14T22:13:20Z
    assert ids(**started) == ["c", "b"]
    # a ended at 22:18:20, b at 22:22:20.
    assert ids(ended_from="2023-11-14T22:18") == ["b", "a"]
    assert ids(ended_from="2023-11-14T22:18", ended_to="2023-11-14T22:20") == ["a"]
    assert ids(ended_to="2023-11-14T22:18") == []
    # In flight with no transition for 57 minutes, longest idle first; ended ones never.
    assert ids(stuck="57m") == ["c"]
    assert ids(stuck="50m") == ["c", "d"]


def test_a_rare_match_answers_a_short_page_within_its_budget(model: ReadModel) -> None:
    put(model, *[record(f"wf-{n:03d}", started=T0 + n) for n in range(300)])
    put(model, record("needle", started=T0 - 1, state=WorkflowState.FAILED))
    query = parse_query({"state": "failed"})
    found = list(pages(model, query, now_ms=T0, limit=10, budget=100))
    assert found[:3] == [[], [], []]  # 100 entries looked at per page, none matching
    assert found[-1] == ["needle"] and sum(map(len, found)) == 1


def test_a_state_change_moves_the_idle_entry_and_the_counts(model: ReadModel) -> None:
    put(model, record("a", started=T0), record("b", started=T0, flow="filing"))
    assert model.version_counts() == {("procurement", 1, "running"): 1, ("filing", 1, "running"): 1}
    put(model, record("a", started=T0, state=WorkflowState.COMPLETED, entered=T0 + MINUTE))
    assert model.version_counts() == {
        ("procurement", 1, "completed"): 1,
        ("filing", 1, "running"): 1,
    }
    assert [f.flow for f in model.index_facets(Index.IDLE)] == ["filing"]
    batch = model.batch()
    batch.put_record("b", None)
    batch.commit()
    assert list(model.index_facets(Index.IDLE)) == [] and list(model.index_facets(Index.START))
    assert model.version_counts() == {("procurement", 1, "completed"): 1}


def test_a_store_from_before_the_indexes_gets_them_when_opened(tmp_path: Path) -> None:
    model = ReadModel(tmp_path / "rm")
    put(model, record("a", started=T0), record("b", started=T0 + 1))
    # As an earlier release left it: records, no listing index, no layout mark.
    for key in [k for k, _ in model.db.items() if k.startswith((b"start/", b"idle/", b"meta/"))]:
        del model.db[key]
    assert list(model.index_facets(Index.START)) == []
    model.close()
    reopened = ReadModel(tmp_path / "rm")
    try:
        assert [f.started_ms for f in reopened.index_facets(Index.START)] == [T0, T0 + 1]
        assert len(list(reopened.index_facets(Index.IDLE))) == 2
    finally:
        reopened.close()
