"""The chaos suite's TCP proxy alone, in front of an echo server on loopback.

The network rows of the chaos table are only as true as the proxy: bytes must pass
unchanged and in order, a delay must be felt, loss must end in a reset (TCP does not
drop bytes silently), and a blackhole must hold traffic until it is lifted.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from chaos.proxy import BrokerProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def proxy() -> Iterator[BrokerProxy]:
    echo = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    echo.daemon_threads = True
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    started = BrokerProxy(listen_port=_free_port(), target_port=echo.server_address[1]).start()
    yield started
    started.stop()
    echo.shutdown()
    echo.server_close()


def _connect(proxy: BrokerProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=5)


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


def test_a_delay_is_felt_on_every_chunk(proxy: BrokerProxy) -> None:
    proxy.faults.delay_ms = 150
    with _connect(proxy) as conn:
        started = time.monotonic()
        assert _round_trip(conn, b"ping") == b"ping"
        assert time.monotonic() - started >= 0.3  # once each way


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
        conn.settimeout(0.5)
        with pytest.raises(TimeoutError):
            conn.recv(16)
        proxy.faults.blackhole = False
        conn.settimeout(5)
        assert conn.recv(16) == b"held"
