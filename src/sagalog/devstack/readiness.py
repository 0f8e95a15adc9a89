"""Asking the services whether they are ready, instead of sleeping and hoping.

A port that accepts connections is not a broker that serves metadata, nor a
registry whose database is migrated; each probe therefore makes the same kind
of request a sagalog client will make first.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from sagalog.devstack.processes import POLL_INTERVAL_S, port_answers

_LIBRDKAFKA_LOG = logging.getLogger("sagalog.devstack.librdkafka")
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
_LIBRDKAFKA_LOG.propagate = False


class Probe(Protocol):
    """One readiness question to a service, bounded by ``timeout_s``."""

    def __call__(self, *, timeout_s: float = ...) -> bool:
        """True when the service answered as a client needs it to."""


class KafkaProbe:
    """Lists topics through the admin API, reusing one client across attempts.

    The client is created only once the port accepts connections, and with a
    short reconnect backoff, so librdkafka neither floods stderr with "connection
    refused" nor backs off for seconds after the broker has come up.
    """

    def __init__(
        self, *, host: str, port: int, client_config: Mapping[str, Any] | None = None
    ) -> None:
        self._host = host
        self._port = port
        self._client_config = dict(client_config or {})
        self._client: Any = None

    def __call__(self, *, timeout_s: float = 2.0) -> bool:
        """True when the broker returned cluster metadata within ``timeout_s``."""
        if not port_answers(host=self._host, port=self._port, timeout_s=min(timeout_s, 0.5)):
            return False
        if self._client is None:
            config: dict[str, Any] = {
                "bootstrap.servers": f"{self._host}:{self._port}",
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "socket.connection.setup.timeout.ms": 2000,
                "logger": _LIBRDKAFKA_LOG,
                **self._client_config,
            }
            self._client = AdminClient(config)
        try:
            metadata = self._client.list_topics(timeout=timeout_s)
        except KafkaException:
            return False
        return bool(metadata.brokers)


class RegistryProbe:
    """GETs the subject list of the Confluent-compatible API, which needs the database."""

    def __init__(self, *, url: str, login: tuple[str, str] | None = None) -> None:
        self._url = url.rstrip("/") + "/subjects"
        self._headers = {}
        if login is not None:
            token = base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"

    def __call__(self, *, timeout_s: float = 2.0) -> bool:
        """True when the registry answered 200 with a JSON list within ``timeout_s``."""
        request = urllib.request.Request(self._url, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                if response.status != 200:
                    return False
                return isinstance(json.loads(response.read()), list)
        except (OSError, urllib.error.URLError, ValueError):
            return False


#: Builds the readiness question of a component (by name) on a port.
ProbeFactory = Callable[[str, int], Probe]


@dataclass(frozen=True)
class WaitResult:
    """``ready`` True: the probe succeeded; False with ``died``: the process exited first."""

    ready: bool
    died: bool
    elapsed_s: float


def wait_until_ready(
    *,
    probe: Probe,
    alive: Callable[[], bool],
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> WaitResult:
    """Probe until it succeeds, the process dies, or ``timeout_s`` passes.

    Checking ``alive`` on each round turns a JVM that crashed during startup
    (port clash, bad config, wrong Java) into an immediate error instead of a
    two-minute timeout.
    """
    started = clock()
    deadline = started + timeout_s
    while True:
        if probe():
            return WaitResult(ready=True, died=False, elapsed_s=clock() - started)
        if not alive():
            return WaitResult(ready=False, died=True, elapsed_s=clock() - started)
        if clock() >= deadline:
            return WaitResult(ready=False, died=False, elapsed_s=clock() - started)
        time.sleep(POLL_INTERVAL_S)
