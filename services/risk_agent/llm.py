"""What the risk agent asks an OpenAI-compatible chat completions endpoint: temperature
0 and JSON mode, returning the answer's text and the model that wrote it.

The POST and its retry rules are the platform's (``sagalog.agents.model_client``); a
200 whose body is not a chat completion is a ``ModelAnswerError`` here, like an
answer that breaks the contract.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from procurement.exceptions import ModelAnswerError
from sagalog import post_chat


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
    url, raw = post_chat(
        base_url, body, api_key=api_key, timeout_s=timeout_s, idempotency_key=idempotency_key
    )
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
