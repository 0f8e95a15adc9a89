"""The client agents use to reach a stand-in (or any service with the same contract)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from sagalog import NonRetryableError, RetryableError


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
    answer = _exchange(request, what=operation, base_url=base_url, timeout_s=timeout_s)
    assert answer is not None  # only a lookup treats 404 as an answer
    return answer


def perform_once(
    base_url: str,
    operation: str,
    body: dict[str, Any],
    *,
    key: str,
    idempotency_key: str,
    timeout_s: float = 5.0,
) -> dict[str, Any]:
    """``perform`` under the caller's business ``key`` instead of the runtime's.

    The runtime's key is one per handled event; some effects are one per workflow (a
    filing's submission, the release of its hold). Two events asking for one (a
    redelivery under a new id, a compensation the tracker asks for again when the
    first is slow) must still find one effect. The runtime's key still guards the
    agent's own record, so a redelivered event does not call at all.
    """
    del idempotency_key  # replaced by the business key, which is as stable and broader
    return perform(base_url, operation, body, idempotency_key=key, timeout_s=timeout_s)


def look_up(
    base_url: str, *, idempotency_key: str, timeout_s: float = 5.0
) -> dict[str, Any] | None:
    """The result of the effect applied under ``idempotency_key``, or None if there is
    none: the lookup ``ctx.effect`` reconciles an unanswered call with."""
    url = f"{base_url.rstrip('/')}/lookup/{urllib.parse.quote(idempotency_key, safe='')}"
    request = urllib.request.Request(url)
    return _exchange(request, what="lookup", base_url=base_url, timeout_s=timeout_s, none_on=404)


def _exchange(
    request: urllib.request.Request,
    *,
    what: str,
    base_url: str,
    timeout_s: float,
    none_on: int | None = None,
) -> dict[str, Any] | None:
    """The JSON answer to ``request``; ``none_on``: the status that means "no such
    thing" (None). 5xx, 429 and network errors are retryable, other 4xx are not."""
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            return dict(json.load(reply))
    except urllib.error.HTTPError as exc:
        if exc.code == none_on:
            return None
        message = f"{what} at {base_url} answered {exc.code}: {exc.read()[:200]!r}"
        if exc.code >= 500 or exc.code == 429:
            raise RetryableError(message) from exc
        raise NonRetryableError(message) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise RetryableError(f"{what} at {base_url} unreachable: {exc}") from exc
