"""A small HTTP client of the gateway, for the ``workflows`` and ``gates`` commands.

The CLI reaches workflows through the gateway (its read model and its checks), not
through Kafka: a person deciding a gate from a terminal gets the same answers as one
using the API. Standard library only (``urllib``), so the CLI needs no HTTP package.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from sagalog.errors import ConfigurationError, SagalogError, ServiceUnavailableError


class GatewayClientSettings(BaseSettings):
    """Where the gateway is and the key to use (``SAGALOG_GATEWAY_URL``, ``..._API_KEY``)."""

    model_config = SettingsConfigDict(
        env_prefix="SAGALOG_GATEWAY_", env_file=".env", extra="ignore"
    )

    url: str = "http://127.0.0.1:8080"
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=10.0, gt=0)


class GatewayRefused(SagalogError):
    """The gateway answered with a 4xx: the request was wrong; its message says why."""

    exit_code = 2

    def __init__(self, status: int, message: str, detail: Any = None) -> None:
        super().__init__(f"gateway refused ({status}): {message}")
        self.status = status
        self.detail = detail


class GatewayFailed(ServiceUnavailableError):
    """The gateway is unreachable, not ready, or failed (5xx); retry, or check it runs."""


class GatewayClient:
    def __init__(self, settings: GatewayClientSettings) -> None:
        self.settings = settings
        self.base = settings.url.rstrip("/")

    def get(self, path: str, **query: Any) -> Any:
        params = {k: v for k, v in query.items() if v is not None}
        suffix = f"?{urllib.parse.urlencode(params)}" if params else ""
        return self._call("GET", f"{path}{suffix}", None)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._call("POST", path, body)

    def _call(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """The JSON answer of a 2xx.

        Raises:
            ConfigurationError: no API key is set (exit 2).
            GatewayRefused: a 4xx, with the gateway's message (exit 2).
            GatewayFailed: unreachable, or a 5xx (exit 3).
        """
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
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.settings.timeout_s) as reply:
                return json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as exc:
            message, detail = _error_of(exc)
            if 400 <= exc.code < 500:
                raise GatewayRefused(exc.code, message, detail) from None
            raise GatewayFailed(
                f"the gateway at {self.base} failed ({exc.code}): {message}"
            ) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise GatewayFailed(
                f"the gateway at {self.base} is unreachable ({reason}); check that it runs "
                "and that SAGALOG_GATEWAY_URL (or --gateway-url) points at it"
            ) from None


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
