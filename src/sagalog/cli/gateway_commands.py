"""What the commands that talk to the gateway share (``workflows``, ``gates``, ``dlq``):
its options, the client kept in the click context, and how times print (tables print
through ``sagalog.cli.tables``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from sagalog.cli.gateway_client import GatewayClient, GatewayClientSettings

F = TypeVar("F", bound=Callable[..., Any])


def gateway_options(command: F) -> F:
    command = click.option(
        "--api-key", metavar="KEY", help="Gateway API key [env SAGALOG_GATEWAY_API_KEY]"
    )(command)
    command = click.option(
        "--gateway-url",
        metavar="URL",
        help="The gateway [env SAGALOG_GATEWAY_URL; default http://127.0.0.1:8080]",
    )(command)
    return command


def gateway_of(ctx: click.Context) -> GatewayClient:
    client = ctx.find_object(GatewayClient)
    assert client is not None
    return client


def connect(ctx: click.Context, gateway_url: str | None, api_key: str | None) -> None:
    overrides: dict[str, Any] = {}
    if gateway_url:
        overrides["url"] = gateway_url
    if api_key:
        overrides["api_key"] = api_key
    ctx.obj = GatewayClient(GatewayClientSettings(**overrides))


def when(text: str | None) -> str:
    return "-" if not text else text.replace("T", " ").replace("Z", "").split(".")[0]
