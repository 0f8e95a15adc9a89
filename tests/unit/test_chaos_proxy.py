"""The chaos suite's TCP proxy alone, in front of an echo server on loopback.

The network rows of the chaos table are only as true as the proxy: bytes must pass
unchanged and in order, a delay must be felt, loss must end in a reset (TCP does not
drop bytes silently), and a blackhole must hold traffic until it is lifted.
"""

from __future__ import annotations

import asyncio
import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from chaos.proxy import BrokerProxy

from .timing import GENEROUS_S


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Pauses:
    """The proxy's delays, recorded as asked for rather than timed."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await asyncio.sleep(0)


@pytest.fixture
def pauses() -> _Pauses:
    return _Pauses()


@pytest.fixture
def proxy(pauses: _Pauses) -> Iterator[BrokerProxy]:
    echo = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    echo.daemon_threads = True
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    started = BrokerProxy(
        listen_port=_free_port(), target_port=echo.server_address[1], pause=pauses
    ).start()
    yield started
    started.stop()
    echo.shutdown()
    echo.server_close()


def _connect(proxy: BrokerProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=GENEROUS_S)


def _round_trip(conn: socket.socket, payload: bytes) -> bytes:
    conn.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = conn.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_bytes_pass_unchanged_and_in_order(proxy: BrokerProxy) -> None:
    payload = bytes(range(256)) * 400  # 100 KiB: several chunks each way
    with _connect(proxy) as conn:
        assert _round_trip(conn, payload) == payload


def test_a_delay_is_felt_on_every_chunk(proxy: BrokerProxy, pauses: _Pauses) -> None:
    proxy.faults.delay_ms = 150
    with _connect(proxy) as conn:
        assert _round_trip(conn, b"ping") == b"ping"
        assert _round_trip(conn, b"pong") == b"pong"
    assert pauses.asked == [0.15] * 4  # each chunk, each way


def test_no_delay_pauses_nothing(proxy: BrokerProxy, pauses: _Pauses) -> None:
    with _connect(proxy) as conn:
        assert _round_trip(conn, b"ping") == b"ping"
    assert pauses.asked == []


def test_loss_resets_the_connection(proxy: BrokerProxy) -> None:
    proxy.faults.loss = 1.0
    with _connect(proxy) as conn:
        conn.sendall(b"ping")
        with pytest.raises((ConnectionResetError, ConnectionAbortedError)):
            if not conn.recv(16):  # an orderly close would also do: no byte went through
                raise ConnectionResetError
    assert proxy.resets == 1


def test_a_blackhole_holds_traffic_until_lifted(proxy: BrokerProxy) -> None:
    with _connect(proxy) as conn:
        assert _round_trip(conn, b"before") == b"before"
        proxy.faults.blackhole = True
        conn.sendall(b"held")
        # Nothing may come while the blackhole holds. Waiting longer could only let a
        # leak show more often; a loaded machine cannot make this pass wrongly.
        conn.settimeout(0.5)
        with pytest.raises(TimeoutError):
            conn.recv(16)
        proxy.faults.blackhole = False
        conn.settimeout(GENEROUS_S)  # returns as soon as the held bytes come
        assert conn.recv(16) == b"held"
