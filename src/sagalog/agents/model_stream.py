"""``ctx.model_stream``: a budgeted model call whose answer the handler reads as it is
written, while the runtime publishes it to the workflow's stream (``sagalog.streams``).

The call is ``ctx.model_call`` in every other respect: reserved in its budget before
it goes out, its claim written to the claims topic, settled to the usage the stream
reports, recorded once in the log with its ``EffectRecorded``; a redelivered event gets
the recorded answer (as one delta) and publishes nothing.

What the stream gets (``StreamRecord``): each delta numbered from 0 within its attempt,
then ``end``. A failure this process sees (the model's stream broke, the step timed
out) marks the attempt ``interrupted`` at once; one it cannot see (SIGKILL, a lost
machine) is marked by the retry, on whichever instance, before its own first delta:
the retry is a repeat of the call (its budget claim numbered after the cut one), so
the attempt it cuts off is known without reading the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from sagalog.streams.record import StreamKind, StreamRecord

OnText = Callable[[str], None]
WriteStream = Callable[[str, int, StreamRecord], None]
"""(workflow topic, partition, record): publishes one record (``StreamWriter.write``)."""


class ModelStream:
    """The deltas of one model call, for ``async for``; ``completion`` after them.

    Iterating starts the call; breaking out of the loop cancels it (the attempt is
    marked interrupted and the step's handler decides what follows)::

        stream = ctx.model_stream("standard", model.chat, model=..., messages=..., max_tokens=300)
        async for text in stream:
            ...  # show it, check it
        answer = stream.completion  # the chat completion, as model_call returns it

    ``await stream.result()`` reads it through and returns the completion.
    """

    def __init__(self, start: Callable[[OnText], Awaitable[Any]]) -> None:
        self._start = start
        self._started = False
        self.completion: Any = None

    def __aiter__(self) -> AsyncIterator[str]:
        if self._started:
            raise RuntimeError("a model stream is read once; make another call to ask again")
        self._started = True
        return self._deltas()

    async def result(self) -> Any:
        async for _ in self:
            pass
        return self.completion

    async def _deltas(self) -> AsyncIterator[str]:
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        task = asyncio.ensure_future(self._start(queue.put_nowait))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        yielded = False
        try:
            while (text := await queue.get()) is not None:
                yielded = True
                yield text
            self.completion = task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if not yielded:  # a recorded answer (a redelivery), or a stand-in's: one delta
            text = _content(self.completion)
            if text:
                yield text


def _content(completion: Any) -> str:
    try:
        content = completion["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""
    return content if isinstance(content, str) else ""


class StreamPublisher:
    """One attempt's records: numbered deltas, then ``end`` or ``interrupted``."""

    def __init__(
        self,
        write: WriteStream | None,
        *,
        topic: str,
        partition: int,
        workflow_id: str,
        step: str,
        agent: str,
        call: str,
        attempt: int,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._write = write
        self._topic = topic
        self._partition = partition
        self._wall_ms = wall_ms
        self._base = {
            "workflow_id": workflow_id,
            "step": step,
            "agent": agent,
            "call": call,
        }
        self.attempt = attempt
        self.seq = 0
        self.closed = False

    def _send(self, kind: StreamKind, *, attempt: int, seq: int, text: str = "") -> None:
        if self._write is None:
            return
        record = StreamRecord(
            **self._base,
            attempt=attempt,
            seq=seq,
            kind=kind,
            text=text,
            at_ms=self._wall_ms(),
        )
        self._write(self._topic, self._partition, record)

    def earlier_cut_off(self) -> None:
        """Mark the attempt before this one interrupted (this one repeats it)."""
        if self.attempt > 1:
            self._send(StreamKind.INTERRUPTED, attempt=self.attempt - 1, seq=-1)

    def delta(self, text: str) -> None:
        self._send(StreamKind.DELTA, attempt=self.attempt, seq=self.seq, text=text)
        self.seq += 1

    def end(self) -> None:
        if not self.closed:
            self.closed = True
            self._send(StreamKind.END, attempt=self.attempt, seq=self.seq)

    def interrupted(self) -> None:
        if not self.closed:
            self.closed = True
            self._send(StreamKind.INTERRUPTED, attempt=self.attempt, seq=self.seq)


def streaming(
    call: Callable[..., Any], publisher: StreamPublisher, on_text: OnText
) -> Callable[..., Awaitable[Any]]:
    """``call`` asked to stream: each delta published and handed to the handler, then
    ``end``; a failure marks the attempt interrupted and goes on up."""

    async def streamed(*args: Any, **kwargs: Any) -> Any:
        def each(text: str) -> None:
            publisher.delta(text)
            on_text(text)

        try:
            result = call(*args, stream=True, on_delta=each, **kwargs)
            if asyncio.iscoroutine(result) or isinstance(result, Awaitable):
                result = await result
        except BaseException:
            publisher.interrupted()
            raise
        publisher.end()
        return result

    return streamed
