"""A client of an OpenAI-compatible chat completions endpoint, for ``ctx.model_call``.

One POST to ``{base_url}/chat/completions``, returning the completion's JSON as it
came (its ``usage`` settles the call's budget claim), or, with ``stream=True``, the
same completion assembled from the endpoint's server-sent events while each text
delta goes to ``on_delta`` as it arrives (``ctx.model_stream``).

httpx, not the ``openai`` package: the runtime needs the answer as the endpoint's
JSON (a dict it records and settles a budget from), its own error classification
(the retry rule below) and an ``Idempotency-Key`` header on every request; the SDK
would give typed objects to turn back into dicts, retries of its own to switch off,
and a dependency tree pinned to its release cycle. httpx is what that SDK is built
on: one async connection pool per endpoint (no thread per call), HTTP/1.1 keep-alive,
timeouts per phase, and line-by-line reads of a streamed body. The same code serves
OpenAI, Azure-style gateways, vLLM, llama.cpp and Ollama's compatible endpoints.

Errors carry their retry rule: a 5xx, a 408, a 429, a timeout, a refused connection
or a stream cut before ``data: [DONE]`` may pass (``RetryableError``: the runtime
retries with backoff and the circuit breaker counts it); any other 4xx will not
(``NonRetryableError``; a model call gives its budget reservation back then, nothing
was served); a 200 whose body is not a chat completion is a ``NonRetryableError`` too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from sagalog.agents.failures import NonRetryableError, RetryableError

OnDelta = Callable[[str], Awaitable[None] | None]
"""Called with each text delta of a streamed answer, in order."""


def _headers(api_key: str, idempotency_key: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if idempotency_key:  # ignored by most servers; lets a gateway deduplicate a retry
        headers["Idempotency-Key"] = idempotency_key
    return headers


def _refusal(url: str, status: int, body: bytes) -> Exception:
    message = f"{url} answered {status}: {body[:300]!r}"
    if status >= 500 or status in (408, 429):
        return RetryableError(message)
    return NonRetryableError(message)


def post_chat(
    base_url: str,
    body: dict[str, Any],
    *,
    api_key: str = "",
    timeout_s: float = 30.0,
    idempotency_key: str = "",
) -> tuple[str, bytes]:
    """POST ``body`` to the endpoint, blocking; the URL and the raw answer of a 200.

    Raises:
        RetryableError: a 5xx, 408 or 429, or no answer.
        NonRetryableError: any other 4xx.
    """
    url = f"{base_url.rstrip('/')}/chat/completions"
    try:
        reply = httpx.post(
            url, json=body, headers=_headers(api_key, idempotency_key), timeout=timeout_s
        )
    except httpx.TransportError as exc:  # refused, reset, timed out
        raise RetryableError(f"{url} unreachable: {exc!r}") from exc
    if reply.status_code != 200:
        raise _refusal(url, reply.status_code, reply.content)
    return url, reply.content


class ChatModel:
    """An endpoint and its credentials; ``chat`` is what ``ctx.model_call`` calls.

    Args:
        base_url: up to and without ``/chat/completions`` (``https://api.openai.com/v1``).
        api_key: sent as a bearer token when set.
        timeout_s: how long one call may take to answer (streamed: between two chunks).
        concurrency: connections kept open to the endpoint at once; calls beyond it
            wait for a connection. A model thinks for seconds, so it is generous.
    """

    def __init__(
        self, base_url: str, api_key: str = "", timeout_s: float = 30.0, concurrency: int = 32
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"ChatModel base_url must be an http(s) URL, got {base_url!r}")
        self.base_url = base_url
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.concurrency = concurrency
        self.url = f"{base_url.rstrip('/')}/chat/completions"
        self._clients: dict[int, httpx.AsyncClient] = {}

    def __repr__(self) -> str:
        return f"ChatModel({self.base_url!r}, timeout_s={self.timeout_s})"

    def _client(self) -> httpx.AsyncClient:
        """One pool per event loop: an httpx client is bound to the loop that first
        used it, and a test or a co-host may run more than one loop in a process."""
        loop = id(asyncio.get_running_loop())
        client = self._clients.get(loop)
        if client is None:
            client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0)),
                limits=httpx.Limits(
                    max_connections=self.concurrency,
                    max_keepalive_connections=self.concurrency,
                ),
            )
            self._clients[loop] = client
        return client

    async def chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        max_tokens: int,
        idempotency_key: str = "",
        stream: bool = False,
        on_delta: OnDelta | None = None,
        **parameters: Any,
    ) -> dict[str, Any]:
        """One chat completion, as the endpoint's JSON (``choices``, ``usage``).

        ``parameters`` go into the request as they are (``tools``, ``temperature``,
        ``response_format``). With ``stream``, the endpoint is asked for server-sent
        events (with ``stream_options.include_usage``, so the budget still settles to
        what the model reports), each text delta goes to ``on_delta``, and the
        completion is assembled from them: the same dict a plain call returns.
        """
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            **parameters,
        }
        headers = _headers(self.api_key, idempotency_key)
        client = self._client()
        try:
            if not stream:
                reply = await client.post(self.url, json=body, headers=headers)
                if reply.status_code != 200:
                    raise _refusal(self.url, reply.status_code, reply.content)
                return self._completion(reply.content)
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
            async with client.stream("POST", self.url, json=body, headers=headers) as reply:
                if reply.status_code != 200:
                    raise _refusal(self.url, reply.status_code, await reply.aread())
                assembly = StreamAssembly(self.url)
                async for line in reply.aiter_lines():
                    text = assembly.feed(line)
                    if text and on_delta is not None:
                        outcome = on_delta(text)
                        if outcome is not None:
                            await outcome
                    if assembly.done:
                        break
                return assembly.completion(model)
        except httpx.TransportError as exc:  # refused, reset, timed out, cut mid-stream
            raise RetryableError(f"{self.url} unreachable or cut off: {exc!r}") from exc

    def _completion(self, raw: bytes) -> dict[str, Any]:
        try:
            completion = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise NonRetryableError(
                f"{self.url} answered 200 but not with JSON: {raw[:300]!r}"
            ) from exc
        if not isinstance(completion, dict) or not completion.get("choices"):
            raise NonRetryableError(
                f"{self.url} answered 200 but not with a chat completion: {raw[:300]!r}"
            )
        return completion

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


class StreamAssembly:
    """A streamed chat completion put back together, one SSE line at a time.

    OpenAI's format: ``data: <chunk JSON>`` lines (blank lines between events), each
    chunk's ``choices[0].delta`` holding a piece of ``content`` or of ``tool_calls``
    (by ``index``; the first piece of a call has its ``id`` and name, the rest add to
    its ``arguments``), ``finish_reason`` on the last, ``usage`` on a final chunk with
    no choices, then ``data: [DONE]``. Lines that are not ``data:`` (comments,
    ``event:``) are skipped.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.done = False
        self.content: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.id: str | None = None
        self.created: int | None = None

    def feed(self, line: str) -> str:
        """Take one line; the text delta it carries ('' for none)."""
        if not line.startswith("data:"):
            return ""
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return ""
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError as exc:
            raise NonRetryableError(
                f"{self.url} streamed a chunk that is not JSON: {data[:300]!r}"
            ) from exc
        if not isinstance(chunk, dict):
            raise NonRetryableError(f"{self.url} streamed a chunk that is not an object")
        if "error" in chunk:  # some servers report a failure mid-stream this way
            raise RetryableError(f"{self.url} failed mid-stream: {str(chunk['error'])[:300]}")
        self.id = self.id or chunk.get("id")
        self.model = self.model or chunk.get("model")
        self.created = self.created or chunk.get("created")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        text = ""
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                self.content.append(piece)
                text += piece
            for call in delta.get("tool_calls") or ():
                held = self.tool_calls.setdefault(
                    int(call.get("index", 0)),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                held["id"] = call.get("id") or held["id"]
                function = call.get("function") or {}
                held["function"]["name"] += function.get("name") or ""
                held["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return text

    def completion(self, model: str) -> dict[str, Any]:
        """The chat completion the chunks make.

        Raises:
            RetryableError: the stream ended before ``data: [DONE]`` (cut off: a
                retry asks again).
        """
        if not self.done:
            raise RetryableError(f"{self.url}: the stream ended before 'data: [DONE]'")
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        completion: dict[str, Any] = {
            "id": self.id or "",
            "object": "chat.completion",
            "created": self.created or 0,
            "model": self.model or model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": self.finish_reason or "stop"}
            ],
        }
        if self.usage is not None:
            completion["usage"] = self.usage
        return completion
