"""The chaos stack's Toxiproxy, alone, in front of an echo server on loopback.

The network rows of the chaos table are only as true as the proxy's faults: bytes
must pass unchanged and in order, a delay must be felt, a reset must reach an open
connection at its next byte, and a blackhole must deliver nothing until it is healed.
Toxiproxy's own server runs (``toxiproxy-server``, built by ``.ci/ensure-tools``), on
the wall clock: a delay is a lower bound, which a loaded machine cannot break.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .toxiproxy import Toxiproxy

GENEROUS_S = 60.0
"""How long a socket waits for an answer that must come: generous, for a loaded machine."""

pytestmark = pytest.mark.tool("toxiproxy-server")


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Toxiproxy]:
    echo = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    echo.daemon_threads = True
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    started = Toxiproxy(
        listen_port=_free_port(),
        target_port=echo.server_address[1],
        api_port=_free_port(),
        log=tmp_path / "toxiproxy.log",
    ).start()
    yield started
    started.stop()
    echo.shutdown()
    echo.server_close()


def _connect(proxy: Toxiproxy) -> socket.socket:
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


def test_bytes_pass_unchanged_and_in_order(proxy: Toxiproxy) -> None:
    payload = bytes(range(256)) * 400
    with _connect(proxy) as conn:
        assert _round_trip(conn, payload) == payload


def test_a_delay_is_felt_both_ways_and_healed(proxy: Toxiproxy) -> None:
    """A lower bound only: a loaded machine makes a round trip slower, never faster."""
    with _connect(proxy) as conn:
        proxy.delay(300)
        assert sorted(proxy.toxics()) == ["delay_downstream", "delay_upstream"]
        started = time.monotonic()
        assert _round_trip(conn, b"ping") == b"ping"
        assert time.monotonic() - started >= 0.6  # 300 ms each way
        proxy.heal()
        assert proxy.toxics() == []
        assert _round_trip(conn, b"pong") == b"pong"


def test_a_reset_reaches_an_open_connection_at_its_next_byte(proxy: Toxiproxy) -> None:
    with _connect(proxy) as conn:
        assert _round_trip(conn, b"before") == b"before"
        sender = threading.Timer(0.3, lambda: conn.sendall(b"during"))
        sender.start()
        proxy.reset_some(1.0, hold_s=1.5)
        sender.join()
        with pytest.raises(OSError):
            if _round_trip(conn, b"after") != b"after":
                raise ConnectionResetError("closed")  # a reset may read as an end
    assert proxy.toxics() == []  # lifted: a new connection is not touched
    with _connect(proxy) as fresh:
        assert _round_trip(fresh, b"fresh") == b"fresh"


def test_a_blackhole_delivers_nothing_until_healed(proxy: Toxiproxy) -> None:
    with _connect(proxy) as conn:
        proxy.blackhole()
        conn.sendall(b"lost")
        conn.settimeout(1.0)
        with pytest.raises(TimeoutError):
            conn.recv(65536)
        proxy.heal()
        conn.settimeout(GENEROUS_S)
        # What was sent into the hole is gone, so the healing closes the connections
        # that were in it (Toxiproxy's rule: their streams lost bytes); a client
        # connects again, as after a real path's retries gave out.
        assert conn.recv(65536) == b""
    with _connect(proxy) as fresh:
        assert _round_trip(fresh, b"back") == b"back"
