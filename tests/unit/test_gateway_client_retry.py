"""``GatewayClient`` waits out a 503 as its Retry-After says, within a bound: a fake
opener plays the gateway, a virtual clock the time."""

from __future__ import annotations

import io
import json
import urllib.error
from email.message import Message
from typing import Any

import pytest

from sagalog.cli.gateway_client import GatewayClient, GatewayClientSettings, GatewayFailed


class Gateway:
    """Answers 503 (Retry-After: 3) ``unavailable`` times, then 200."""

    def __init__(self, unavailable: int) -> None:
        self.unavailable = unavailable
        self.calls = 0
        self.now = 0.0

    def open(self, request: Any, *, timeout: float) -> Any:
        self.calls += 1
        if self.calls <= self.unavailable:
            headers = Message()
            headers["Retry-After"] = "3"
            body = json.dumps({"error": "not acknowledged by Kafka", "detail": None})
            raise urllib.error.HTTPError(
                request.full_url, 503, "Service Unavailable", headers, io.BytesIO(body.encode())
            )
        return io.BytesIO(b'{"accepted": true}')

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def client(gateway: Gateway, retry_for_s: float) -> GatewayClient:
    settings = GatewayClientSettings(url="http://gw", api_key="k", retry_for_s=retry_for_s)
    return GatewayClient(
        settings, opener=gateway.open, sleep=gateway.sleep, clock=lambda: gateway.now
    )


def test_a_503_is_retried_after_its_retry_after_until_the_gateway_answers() -> None:
    gateway = Gateway(unavailable=4)
    reply = client(gateway, retry_for_s=60).post("/v1/gates/decisions", {"token": "t"})
    assert reply == {"accepted": True}
    assert gateway.calls == 5 and gateway.now == 12.0  # four waits of 3 s


def test_the_client_gives_up_with_the_last_answer_when_the_bound_runs_out() -> None:
    gateway = Gateway(unavailable=100)
    with pytest.raises(GatewayFailed, match=r"503 .* after 4 tries over 9\.0s .*not acknowledged"):
        client(gateway, retry_for_s=10).get("/v1/gates")
    assert gateway.now == 9.0  # no wait that would end past the 10 s bound


def test_no_retry_when_the_bound_is_zero() -> None:
    gateway = Gateway(unavailable=1)
    with pytest.raises(GatewayFailed, match="after 1 tries"):
        client(gateway, retry_for_s=0).get("/v1/gates")
