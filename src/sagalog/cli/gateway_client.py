"""A small HTTP client of the gateway, for the ``workflows`` and ``gates`` commands.

The CLI reaches workflows through the gateway (its read model and its checks), not
through Kafka: a person deciding a gate from a terminal gets the same answers as one
using the API. Standard library only (``urllib``), so the CLI needs no HTTP package.

A 503 is the gateway saying "not now": still catching up, or Kafka did not
acknowledge a decision (a broker away). The client waits what its ``Retry-After``
says and asks again, as it is (decisions and keyed webhooks carry the same event
id every time, so a retry lands once), for at most ``retry_for_s`` in all; then it
gives up with the gateway's last answer, the tries and the time spent.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from sagalog.errors import ConfigurationError, SagalogError, ServiceUnavailableError
from sagalog.exit_codes import ExitCode


class GatewayClientSettings(BaseSettings):
    """Where the gateway is and the key to use (``SAGALOG_GATEWAY_URL``, ``..._API_KEY``)."""

    model_config = SettingsConfigDict(
        env_prefix="SAGALOG_GATEWAY_", env_file=".env", extra="ignore"
    )

    url: str = "http://127.0.0.1:8080"
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=10.0, gt=0)
    retry_for_s: float = Field(
        default=60.0,
        ge=0,
        description="How long in all to keep retrying a 503 (as its Retry-After says) "
        "before giving up; 0 gives up at the first.",
    )


DEFAULT_RETRY_AFTER_S = 2.0
"""The wait after a 503 that names none."""


class GatewayRefused(SagalogError):
    """The gateway answered with a 4xx: the request was wrong; its message says why."""

    exit_code = ExitCode.CONFIGURATION

    def __init__(self, status: int, message: str, detail: Any = None) -> None:
        super().__init__(f"gateway refused ({status}): {message}")
        self.status = status
        self.detail = detail


class GatewayFailed(ServiceUnavailableError):
    """The gateway is unreachable, not ready, or failed (5xx); retry, or check it runs."""


class GatewayClient:
    def __init__(
        self,
        settings: GatewayClientSettings,
        *,
        opener: Callable[..., Any] = urllib.request.urlopen,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.base = settings.url.rstrip("/")
        self._open = opener
        self._sleep = sleep
        self._clock = clock
        self.retried = 0
        """503s waited out and retried, over the client's life."""

    def get(self, path: str, **query: Any) -> Any:
        params = {k: v for k, v in query.items() if v is not None}
        suffix = f"?{urllib.parse.urlencode(params)}" if params else ""
        return self._call("GET", f"{path}{suffix}", None)

    def post(
        self, path: str, body: dict[str, Any], *, headers: dict[str, str] | None = None
    ) -> Any:
        """``headers``: e.g. an ``Idempotency-Key``, which makes a retried webhook land once."""
        return self._call("POST", path, body, headers)

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """The JSON answer of a 2xx; a 503 is retried after its ``Retry-After``.

        Raises:
            ConfigurationError: no API key is set (exit 2).
            GatewayRefused: a 4xx, with the gateway's message (exit 2).
            GatewayFailed: unreachable, a 5xx, or 503s for longer than ``retry_for_s``
                (exit 3).
        """
        started = self._clock()
        tries = 0
        while True:
            tries += 1
            try:
                return self._once(method, path, body, headers or {})
            except _Unavailable as exc:
                spent = self._clock() - started
                wait = exc.retry_after_s
                if spent + wait > self.settings.retry_for_s:
                    raise GatewayFailed(
                        f"the gateway at {self.base} still answers {exc.status} to {method} "
                        f"{path} after {tries} tries over {spent:.1f}s (giving up: "
                        f"SAGALOG_GATEWAY_RETRY_FOR_S={self.settings.retry_for_s:g}); its last "
                        f"answer: {exc.message}"
                    ) from None
                self.retried += 1
                self._sleep(wait)

    def _once(
        self, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]
    ) -> Any:
        if self.settings.api_key is None:
            raise ConfigurationError(
                "no gateway API key: set SAGALOG_GATEWAY_API_KEY (or pass --api-key)"
            )
        request = urllib.request.Request(
            self.base + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "X-API-Key": self.settings.api_key.get_secret_value(),
                "Accept": "application/json",
                **({"Content-Type": "application/json"} if body is not None else {}),
                **headers,
            },
        )
        try:
            with self._open(request, timeout=self.settings.timeout_s) as reply:
                return json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as exc:
            message, detail = _error_of(exc)
            if 400 <= exc.code < 500:
                raise GatewayRefused(exc.code, message, detail) from None
            if exc.code == 503:
                raise _Unavailable(503, message, _retry_after(exc)) from None
            raise GatewayFailed(
                f"the gateway at {self.base} failed ({exc.code}): {message}"
            ) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise GatewayFailed(
                f"the gateway at {self.base} is unreachable ({reason}); check that it runs "
                "and that SAGALOG_GATEWAY_URL (or --gateway-url) points at it"
            ) from None


class _Unavailable(Exception):
    def __init__(self, status: int, message: str, retry_after_s: float) -> None:
        self.status, self.message, self.retry_after_s = status, message, retry_after_s


def _retry_after(exc: urllib.error.HTTPError) -> float:
    """The ``Retry-After`` seconds (the gateway sends seconds, never a date)."""
    value = exc.headers.get("Retry-After") if exc.headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else DEFAULT_RETRY_AFTER_S
    except ValueError:
        return DEFAULT_RETRY_AFTER_S


def _error_of(exc: urllib.error.HTTPError) -> tuple[str, Any]:
    raw = exc.read()
    try:
        body = json.loads(raw)
    except ValueError:
        return (raw.decode("utf-8", "replace").strip() or exc.reason or "no message"), None
    if isinstance(body, dict) and "error" in body:
        return str(body["error"]), body.get("detail")
    if isinstance(body, dict) and "detail" in body:  # FastAPI's own shape, just in case
        return json.dumps(body["detail"]), None
    return json.dumps(body), None
