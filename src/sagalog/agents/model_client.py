"""A client of an OpenAI-compatible chat completions endpoint, for ``ctx.model_call``.

One POST to ``{base_url}/chat/completions``, returning the completion's JSON as it
came (its ``usage`` settles the call's budget claim). urllib, not an SDK: one call
does not justify a dependency, and the same code serves OpenAI, Azure-style
gateways, vLLM, llama.cpp and Ollama's compatible endpoints.

Errors carry their retry rule: a 5xx, a 408, a 429, a timeout or a refused
connection may pass (``RetryableError``: the runtime retries with backoff and the
circuit breaker counts it); any other 4xx will not (``NonRetryableError``; a model
call gives its budget reservation back then, nothing was served); a 200 whose body
is not JSON is a ``NonRetryableError`` too.
"""

from __future__ import annotations

import asyncio
import functools
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sagalog.agents.failures import NonRetryableError, RetryableError


def post_chat(
    base_url: str,
    body: dict[str, Any],
    *,
    api_key: str = "",
    timeout_s: float = 30.0,
    idempotency_key: str = "",
) -> tuple[str, bytes]:
    """POST ``body`` to the endpoint; the URL and the raw answer of a 200.

    Raises:
        RetryableError: a 5xx, 408 or 429, or no answer.
        NonRetryableError: any other 4xx.
    """
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if idempotency_key:  # ignored by most servers; lets a gateway deduplicate a retry
        headers["Idempotency-Key"] = idempotency_key
    url = f"{base_url.rstrip('/')}/chat/completions"
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            return url, bytes(reply.read())
    except urllib.error.HTTPError as exc:
        message = f"{url} answered {exc.code}: {exc.read()[:300]!r}"
        if exc.code >= 500 or exc.code in (408, 429):
            raise RetryableError(message) from exc
        raise NonRetryableError(message) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise RetryableError(f"{url} unreachable: {exc}") from exc


class ChatModel:
    """An endpoint and its credentials; ``chat`` is what ``ctx.model_call`` calls.

    Args:
        base_url: up to and without ``/chat/completions`` (``https://api.openai.com/v1``).
        api_key: sent as a bearer token when set.
        timeout_s: how long one call may take.
        concurrency: calls out at once. Its own threads, not asyncio's default pool (a
            few threads per core): a model thinks for seconds, and calls queued
            behind each other reach it late, after their budget reservation's time.
            The pool starts its threads as calls need them.
    """

    def __init__(
        self, base_url: str, api_key: str = "", timeout_s: float = 30.0, concurrency: int = 32
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.concurrency = concurrency
        self._threads = ThreadPoolExecutor(concurrency, thread_name_prefix="model-call")

    def __repr__(self) -> str:
        return f"ChatModel({self.base_url!r}, timeout_s={self.timeout_s})"

    async def chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        max_tokens: int,
        idempotency_key: str = "",
        **parameters: Any,
    ) -> dict[str, Any]:
        """One chat completion, as the endpoint's JSON (``choices``, ``usage``).

        ``parameters`` go into the request as they are (``tools``, ``temperature``,
        ``response_format``). The blocking POST runs in a thread, so the agent's
        other workflows go on while the model thinks.
        """
        body = {"model": model, "messages": messages, "max_tokens": max_tokens, **parameters}
        url, raw = await asyncio.get_running_loop().run_in_executor(
            self._threads,
            functools.partial(
                post_chat,
                self.base_url,
                body,
                api_key=self.api_key,
                timeout_s=self.timeout_s,
                idempotency_key=idempotency_key,
            ),
        )
        try:
            completion = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise NonRetryableError(f"{url} answered 200 but not with JSON: {raw[:300]!r}") from exc
        if not isinstance(completion, dict) or not completion.get("choices"):
            raise NonRetryableError(
                f"{url} answered 200 but not with a chat completion: {raw[:300]!r}"
            )
        return completion
