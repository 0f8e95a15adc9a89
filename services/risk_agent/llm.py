"""A minimal client of an OpenAI-compatible chat completions endpoint.

Only what the risk agent needs: one POST to ``{base_url}/chat/completions`` with
temperature 0 and JSON mode, returning the answer's text and the model that wrote it.
urllib, not an SDK: one call does not justify a dependency, and the same code serves
OpenAI, Azure-style gateways, vLLM, llama.cpp and Ollama's compatible endpoints.

Errors carry their retry rule: a 5xx, a 429, a timeout or a refused connection may
pass (``RetryableError``: the runtime retries with backoff and the circuit breaker
counts it); any other 4xx will not (``NonRetryableError``); a 200 whose body is not a
chat completion is a ``ModelAnswerError``, like an answer that breaks the contract.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from procurement.exceptions import ModelAnswerError
from sagalog.agents import NonRetryableError, RetryableError


def request_parameters(model: str, *, json_mode: bool = True) -> dict[str, Any]:
    """Everything the request sends besides the messages: what a decision's lineage
    records as the model's parameters."""
    parameters: dict[str, Any] = {"model": model, "temperature": 0}
    if json_mode:
        parameters["response_format"] = {"type": "json_object"}
    return parameters


def chat_completion(
    base_url: str,
    model: str,
    messages: Sequence[dict[str, str]],
    *,
    api_key: str = "",
    timeout_s: float = 30.0,
    json_mode: bool = True,
    idempotency_key: str = "",
) -> dict[str, str]:
    """Ask ``model`` for one completion of ``messages``.

    Returns:
        ``{"content": <the answer text>, "model": <the model that answered>}``.
    """
    body = {**request_parameters(model, json_mode=json_mode), "messages": list(messages)}
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
            raw = reply.read()
    except urllib.error.HTTPError as exc:
        message = f"{url} answered {exc.code}: {exc.read()[:300]!r}"
        if exc.code >= 500 or exc.code in (408, 429):
            raise RetryableError(message) from exc
        raise NonRetryableError(message) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise RetryableError(f"{url} unreachable: {exc}") from exc
    try:
        completion = json.loads(raw)
        content = completion["choices"][0]["message"]["content"]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
        raise ModelAnswerError(
            f"{url} answered 200 but not with a chat completion: {raw[:300]!r}"
        ) from exc
    if not isinstance(content, str):
        raise ModelAnswerError(f"{url}: the completion's content is not text: {content!r}")
    return {"content": content, "model": str(completion.get("model") or model)}
