"""``ctx.model_stream``: the handler reads the deltas, the stream gets them numbered
with an end, the answer and its budget are ``model_call``'s; a call cut off is marked
interrupted by its retry, whose deltas stream under the next attempt
(``sagalog.agents.model_stream``, ``sagalog.streams.record``)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from sagalog.agents.context import HandlerContext
from sagalog.agents.state_store import StateStore
from sagalog.streams.record import (
    StreamKind,
    StreamRecord,
    attempt_of,
    parse_last_event_id,
    sse_message,
    summarize,
)

from .test_budgets_model_call import KEY, MESSAGES, ORIGIN, _book, _context

WORDS = ["A", " filing", " for", " the", " regulator."]


class Crash(BaseException):
    """The process dying mid-stream."""


class StreamingModel:
    """Streams ``WORDS`` to ``on_delta``; ``crash_after`` words dies once."""

    def __init__(self, crash_after: int | None = None) -> None:
        self.crash_after = crash_after
        self.served = 0

    async def chat(self, *, stream: bool = False, on_delta: Any = None, **request: Any) -> Any:
        assert stream and on_delta is not None
        self.served += 1
        for n, word in enumerate(WORDS):
            if self.crash_after is not None and n == self.crash_after:
                self.crash_after = None
                raise Crash
            on_delta(word)
            await asyncio.sleep(0)
        return {
            "choices": [{"message": {"role": "assistant", "content": "".join(WORDS)}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": len(WORDS)},
        }


def _stream(ctx: HandlerContext, model: StreamingModel) -> tuple[list[str], Any]:
    async def read() -> tuple[list[str], Any]:
        stream = ctx.model_stream(
            "openai", model.chat, model="gpt-4o-mini", messages=MESSAGES, max_tokens=50
        )
        seen = [text async for text in stream]
        return seen, stream.completion

    return asyncio.run(read())


def _writer(into: list[tuple[str, int, StreamRecord]]) -> Any:
    return lambda topic, partition, record: into.append((topic, partition, record))


def test_the_handler_and_the_stream_get_every_delta_and_the_answer_is_recorded_once(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "db")
    written: list[tuple[str, int, StreamRecord]] = []
    ctx = _context(store, _book(store), write_stream=_writer(written))

    seen, answer = _stream(ctx, StreamingModel())

    assert seen == WORDS
    assert answer["choices"][0]["message"]["content"] == "".join(WORDS)
    assert {(t, p) for t, p, _ in written} == {(ORIGIN.topic, ORIGIN.partition)}
    records = [r for _, _, r in written]
    assert [(r.kind, r.seq, r.text) for r in records] == [
        *((StreamKind.DELTA, n, w) for n, w in enumerate(WORDS)),
        (StreamKind.END, len(WORDS), ""),
    ]
    assert {(r.workflow_id, r.step, r.call, r.attempt) for r in records} == {
        (ctx.workflow_id, ctx.step, KEY, 1)
    }
    (recorded,) = ctx.recorded  # one EffectRecorded, its claim settled to the usage
    (spend,) = recorded.spends or []
    assert spend.tokens == 20 + len(WORDS)


def test_a_stream_cut_off_is_marked_interrupted_and_the_retry_streams_as_attempt_two(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "db")
    written: list[tuple[str, int, StreamRecord]] = []
    model = StreamingModel(crash_after=2)
    with contextlib.suppress(Crash):  # SIGKILL: nothing after the crash runs
        _stream(_context(store, _book(store), write_stream=_writer(written)), model)
    store.close()
    store = StateStore(tmp_path / "db")  # the restarted process, or a successor
    ctx = _context(store, _book(store), write_stream=_writer(written))

    seen, _ = _stream(ctx, model)

    assert seen == WORDS
    summary = summarize(r for _, _, r in written)
    assert [(s.attempt, s.deltas, s.ended, s.interrupted, s.gaps) for s in summary] == [
        (1, 2, False, True, False),
        (2, len(WORDS), True, False, False),
    ]
    (recorded,) = ctx.recorded  # both calls' claims, once each, in the one record
    assert {s.reservation for s in recorded.spends or []} == {KEY, f"{KEY}#1"}


def test_a_redelivered_event_gets_the_recorded_answer_and_streams_nothing(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "db")
    written: list[tuple[str, int, StreamRecord]] = []
    model = StreamingModel()
    _stream(_context(store, _book(store), write_stream=_writer(written)), model)
    written.clear()

    seen, answer = _stream(_context(store, _book(store), write_stream=_writer(written)), model)

    assert seen == ["".join(WORDS)] and model.served == 1 and written == []
    assert answer["usage"]["completion_tokens"] == len(WORDS)


def test_a_stream_is_read_once(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    stream = _context(store, _book(store)).model_stream(
        "openai", StreamingModel().chat, model="m", messages=MESSAGES, max_tokens=5
    )
    stream.__aiter__()
    with pytest.raises(RuntimeError, match="read once"):
        stream.__aiter__()


def test_records_round_trip_and_serve_as_server_sent_events() -> None:
    record = StreamRecord("wf-1", "draft", "drafter", KEY, 2, 7, StreamKind.DELTA, "Hi", 5)
    assert StreamRecord.decode(record.encode()) == record
    message = sse_message(41, record).decode()
    assert message.startswith("id: 41\nevent: delta\ndata: {") and message.endswith("\n\n")
    with pytest.raises(Exception, match="not a model stream record"):
        StreamRecord.decode(b'{"version": 99}')


def test_last_event_id_is_an_offset_or_a_clear_error() -> None:
    assert parse_last_event_id(None) is None and parse_last_event_id(" ") is None
    assert parse_last_event_id("42") == 42
    with pytest.raises(ValueError, match="not an event id of this stream"):
        parse_last_event_id("abc")


def test_attempts_follow_the_budget_reservations() -> None:
    assert attempt_of(KEY, KEY) == 1
    assert attempt_of(f"{KEY}#1", KEY) == 2
    with pytest.raises(ValueError):
        attempt_of("other", KEY)
