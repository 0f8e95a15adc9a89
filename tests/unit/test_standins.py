"""The stand-ins' fault modes as their callers see them, over HTTP on loopback.

A refusal (``reject_when``, 422) must reach an agent as ``NonRetryableError`` so the
step fails at once and no breaker counts it; unavailability (``fail_when``, 503) as
``RetryableError``; and every call, failed or not, lands in the call log that the
thundering-herd round measures rates from.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from sagalog.agents.failures import NonRetryableError, RetryableError
from standins.client import perform
from standins.server import StandinServer, serve

from .timing import GENEROUS_S


@pytest.fixture
def erp() -> Iterator[str]:
    server: StandinServer = serve(name="erp")
    host, port = server.server_address[:2]
    yield f"http://{host!s}:{port}"
    server.shutdown()
    server.server_close()


def _post(url: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=GENEROUS_S):
        pass


def _calls(url: str) -> list[list[Any]]:
    with urllib.request.urlopen(f"{url}/calls", timeout=GENEROUS_S) as reply:
        return list(json.load(reply)["calls"])


def test_a_refused_request_is_not_retryable_and_others_go_through(erp: str) -> None:
    _post(f"{erp}/faults", {"reject_when": {"vendor": "Faultline Ltd"}})
    with pytest.raises(NonRetryableError, match="422"):
        perform(erp, "create_po", {"vendor": "Faultline Ltd"}, idempotency_key="k1")
    done = perform(erp, "create_po", {"vendor": "Acme"}, idempotency_key="k2")
    assert done["id"]
    assert [(op, key, status) for _, op, key, status in _calls(erp)] == [
        ("create_po", "k1", 422),
        ("create_po", "k2", 200),
    ]


def test_an_unavailable_answer_is_retryable(erp: str) -> None:
    _post(f"{erp}/faults", {"fail_when": {"vendor": "Faultline Ltd"}})
    with pytest.raises(RetryableError, match="503"):
        perform(erp, "create_po", {"vendor": "Faultline Ltd"}, idempotency_key="k1")
    assert [status for *_, status in _calls(erp)] == [503]
