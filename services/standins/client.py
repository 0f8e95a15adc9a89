"""The client agents use to reach a stand-in (or any service with the same contract)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from sagalog.agents import NonRetryableError, RetryableError


def perform(
    base_url: str,
    operation: str,
    body: dict[str, Any],
    *,
    idempotency_key: str,
    timeout_s: float = 5.0,
) -> dict[str, Any]:
    """POST one effect with its idempotency key; 5xx and network errors are retryable."""
    request = urllib.request.Request(
        f"{base_url.rstrip('/')}/effects/{operation}",
        data=json.dumps(body, default=str).encode(),
        headers={"Content-Type": "application/json", "Idempotency-Key": idempotency_key},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            return dict(json.load(reply))
    except urllib.error.HTTPError as exc:
        message = f"{operation} at {base_url} answered {exc.code}: {exc.read()[:200]!r}"
        if exc.code >= 500 or exc.code == 429:
            raise RetryableError(message) from exc
        raise NonRetryableError(message) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise RetryableError(f"{operation} at {base_url} unreachable: {exc}") from exc


def look_up(
    base_url: str, *, idempotency_key: str, timeout_s: float = 5.0
) -> dict[str, Any] | None:
    """The result of the effect applied under ``idempotency_key``, or None if there is
    none: the lookup ``ctx.effect`` reconciles an unanswered call with."""
    url = f"{base_url.rstrip('/')}/lookup/{urllib.parse.quote(idempotency_key, safe='')}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            return dict(json.load(reply))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        message = f"lookup at {base_url} answered {exc.code}: {exc.read()[:200]!r}"
        if exc.code >= 500 or exc.code == 429:
            raise RetryableError(message) from exc
        raise NonRetryableError(message) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise RetryableError(f"lookup at {base_url} unreachable: {exc}") from exc
