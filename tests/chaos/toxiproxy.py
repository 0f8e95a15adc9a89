"""The network faults of the one-broker chaos stack, through Toxiproxy.

The broker advertises the proxy's port, so every client reaches it only through the
proxy, whatever its bootstrap list says. Toxiproxy (Shopify's; built from the Go
module proxy by ``.ci/ensure-tools``, as ``toxiproxy-server``) is the ecosystem's
tool for exactly this: a TCP proxy whose faults ("toxics") are set over an HTTP API
while connections stay open. The three faults the rounds use:

- **delay**: a ``latency`` toxic on both directions (every chunk waits ``latency``
  plus up to ``jitter`` ms);
- **loss**: TCP does not lose bytes silently; a lossy path ends in retransmission
  timeouts and resets. ``reset_some`` adds a ``reset_peer`` toxic for a moment with
  a toxicity (the share of the open connections it applies to, drawn per
  connection), so that share of them is reset at their next byte;
- **blackhole**: a ``timeout`` toxic with no timeout on both directions: nothing is
  delivered and nothing is closed, new connections included, until it is removed;
  the healing then closes the connections that were in it (their streams lost
  bytes), as a real path's retransmissions would have given out, and clients connect
  again.

Between two brokers, or a broker and a service, the partition rounds cut links with
iptables in network namespaces instead (``netns.py``): a proxy cannot stand between
brokers that must reach each other by their own addresses.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx

from external_tools import TOOLS
from sagalog.devstack.processes import port_is_free

PROXY = "kafka"
"""The proxy's name in Toxiproxy: the one broker's."""

DIRECTIONS = ("upstream", "downstream")
"""Toxiproxy's names for client-to-broker and broker-to-client."""


class ToxiproxyMissing(RuntimeError):
    """``toxiproxy-server`` is not installed; the message says how to build it."""


class Toxiproxy:
    """A ``toxiproxy-server`` process with one proxy, ``listen_port`` to ``target_port``."""

    def __init__(self, *, listen_port: int, target_port: int, api_port: int, log: Path) -> None:
        self.listen_port = listen_port
        self.target_port = target_port
        self.api = f"http://127.0.0.1:{api_port}"
        self.api_port = api_port
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.client = httpx.Client(base_url=self.api, timeout=10.0)

    def start(self) -> Toxiproxy:
        """Start the server, wait for its API, and create the broker's proxy."""
        server = TOOLS["toxiproxy-server"].path()
        if server is None:
            raise ToxiproxyMissing(
                "the chaos stack's network faults need toxiproxy-server: "
                + TOOLS["toxiproxy-server"].install
            )
        for port in (self.api_port, self.listen_port):
            if not port_is_free(host="127.0.0.1", port=port):
                raise RuntimeError(f"port {port} is taken: the chaos proxy needs it")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [server, "-host", "127.0.0.1", "-port", str(self.api_port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 20
        while True:
            try:
                self.client.get("/version").raise_for_status()
                break
            except httpx.HTTPError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"toxiproxy-server did not answer on {self.api} (its log: {self.log})"
                    ) from None
                time.sleep(0.1)
        self.client.post(
            "/proxies",
            json={
                "name": PROXY,
                "listen": f"127.0.0.1:{self.listen_port}",
                "upstream": f"127.0.0.1:{self.target_port}",
                "enabled": True,
            },
        ).raise_for_status()
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.client.close()

    # -- the faults ------------------------------------------------------------------

    def delay(self, latency_ms: float, jitter_ms: float = 0.0) -> None:
        """Every chunk, both ways, waits ``latency_ms`` plus up to ``jitter_ms``."""
        for direction in DIRECTIONS:
            self._add(
                f"delay_{direction}",
                "latency",
                direction,
                {"latency": int(latency_ms), "jitter": int(jitter_ms)},
            )

    def reset_some(self, share: float, *, hold_s: float = 0.2) -> None:
        """Reset about ``share`` of the open connections at their next byte (then
        lift it: connections made after ``hold_s`` are not touched)."""
        self._add("loss", "reset_peer", "downstream", {"timeout": 0}, toxicity=share)
        time.sleep(hold_s)
        self._remove("loss")

    def blackhole(self) -> None:
        """Deliver nothing either way, and close nothing, until ``heal``."""
        for direction in DIRECTIONS:
            self._add(f"blackhole_{direction}", "timeout", direction, {"timeout": 0})

    def heal(self) -> None:
        """Remove every toxic: bytes flow as they came."""
        for toxic in self.toxics():
            self._remove(toxic)

    def toxics(self) -> list[str]:
        """The names of the toxics in place now."""
        answer = self.client.get(f"/proxies/{PROXY}/toxics")
        answer.raise_for_status()
        return [toxic["name"] for toxic in answer.json()]

    def _add(
        self,
        name: str,
        kind: str,
        direction: str,
        attributes: dict[str, int],
        *,
        toxicity: float = 1.0,
    ) -> None:
        answer = self.client.post(
            f"/proxies/{PROXY}/toxics",
            json={
                "name": name,
                "type": kind,
                "stream": direction,
                "toxicity": toxicity,
                "attributes": attributes,
            },
        )
        if answer.status_code == 409:  # already in place: set its attributes
            answer = self.client.post(
                f"/proxies/{PROXY}/toxics/{name}",
                json={"toxicity": toxicity, "attributes": attributes},
            )
        answer.raise_for_status()

    def _remove(self, name: str) -> None:
        answer = self.client.delete(f"/proxies/{PROXY}/toxics/{name}")
        if answer.status_code != 404:
            answer.raise_for_status()
