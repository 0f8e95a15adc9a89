"""A TCP proxy between every client and the chaos broker that can delay, drop and blackhole.

``tc qdisc ... netem`` is not available on these machines (the kernel has no netem
qdisc: "Specified qdisc kind is unknown", even as root in a fresh network
namespace) and neither iptables nor nft is installed, so network faults are made
here: the chaos broker advertises the proxy's port, so clients reach the broker
only through it, whatever the bootstrap list says.

- **delay**: every chunk waits ``delay_ms`` (plus up to ``jitter_ms``) before it is
  forwarded, in order;
- **loss**: with probability ``loss`` per chunk the connection is reset (TCP does not
  lose bytes silently; a lossy path ends in retransmission timeouts and resets);
- **blackhole**: nothing is forwarded and new connections hang, until lifted.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass
class NetworkFaults:
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    blackhole: bool = False
    rng: random.Random = field(default_factory=random.Random)


class BrokerProxy:
    """Listens on ``listen_port`` and forwards to ``target_port`` on loopback, in a thread."""

    def __init__(
        self,
        *,
        listen_port: int,
        target_port: int,
        pause: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """Args:
        pause: waits out a chunk's delay; a test passes one that records the delays
            asked for, instead of timing round trips on a loaded machine.
        """
        self.listen_port = listen_port
        self.target_port = target_port
        self.faults = NetworkFaults()
        self.resets = 0
        self._pause = pause
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="chaos-proxy", daemon=True)
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> BrokerProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"the chaos proxy did not listen on {self.listen_port}")
        return self

    def stop(self) -> None:
        """Cut every connection, end their tasks, then stop the loop."""
        if self._thread.is_alive():
            done = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            with contextlib.suppress(Exception):
                done.result(10)
        self._thread.join(10)

    async def _shutdown(self) -> None:
        self._close_all()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop.call_soon(self._loop.stop)

    def reset_all(self) -> None:
        """Cut every open connection (what a long blackhole ends in)."""
        self._loop.call_soon_threadsafe(self._close_all)

    def _close_all(self) -> None:
        for writer in list(self._writers):
            writer.close()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.listen_port, reuse_address=True)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            self._loop.run_until_complete(server.wait_closed())
            self._loop.close()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        while self.faults.blackhole:  # a SYN that is never answered, as near as TCP allows
            await asyncio.sleep(0.1)
        try:
            broker_r, broker_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.close()
            return
        self._writers |= {client_w, broker_w}
        try:
            await asyncio.gather(self._pipe(client_r, broker_w), self._pipe(broker_r, client_w))
        finally:
            for writer in (client_w, broker_w):
                self._writers.discard(writer)
                writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await reader.read(65536):
                faults = self.faults
                while faults.blackhole:
                    await asyncio.sleep(0.1)
                if faults.loss and faults.rng.random() < faults.loss:
                    self.resets += 1
                    writer.transport.abort()
                    return
                if faults.delay_ms or faults.jitter_ms:
                    await self._pause(
                        (faults.delay_ms + faults.rng.uniform(0, faults.jitter_ms)) / 1000
                    )
                writer.write(chunk)
                await writer.drain()
        writer.close()
