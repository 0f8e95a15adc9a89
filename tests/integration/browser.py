"""A headless Chromium (Debian's ``chromium``) driven over the DevTools protocol.

Just enough to use a page as a person would: open a URL, click where an element is,
type into the focused field, read the page, take a screenshot. It speaks the
protocol over aiohttp's WebSocket client (already installed with faust), so the
tests need no browser-automation package, and it never downloads a browser.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

import external_tools

FLAGS = [
    "--headless=new",
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # no calls home: this machine has no network
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
    "--remote-debugging-port=0",
]


class Browser:
    """One Chromium process with one page; use as ``async with Browser(profile) as page``."""

    def __init__(self, profile: Path) -> None:
        self.chromium = external_tools.require("chromium")
        self.profile = profile
        self.process: subprocess.Popen[bytes] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._socket: aiohttp.ClientWebSocketResponse | None = None
        self._ids = 0

    async def __aenter__(self) -> Browser:
        self.profile.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [self.chromium, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=(self.profile / "chromium.log").open("wb"),
        )
        port = await self._port()
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as reply:
            targets = json.loads(await reply.text())
        page = next(t for t in targets if t["type"] == "page")
        self._socket = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        await self.send("Page.enable")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._socket is not None:
            await self._socket.close()
        if self._session is not None:
            await self._session.close()
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)

    async def _port(self, timeout: float = 120) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text().splitlines()[0])
            assert self.process is not None and self.process.poll() is None, (
                self.profile / "chromium.log"
            ).read_text(errors="replace")[-3000:]
            await asyncio.sleep(0.1)
        raise TimeoutError("chromium did not open its DevTools port")

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        assert self._socket is not None
        self._ids += 1
        ident = self._ids
        await self._socket.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads((await self._socket.receive(timeout=30)).data)
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def open(self, url: str) -> None:
        """Go to ``url`` and wait for the document it lands on (after any redirect)."""
        await self.evaluate("window.__left = true")  # gone once another document loads
        await self.send("Page.navigate", url=url)
        await self.wait_for("!window.__left && document.readyState === 'complete'")

    async def wait_for(self, expression: str, timeout: float = 20) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = await self.evaluate(expression)
            except RuntimeError:  # the page is between two documents
                value = None
            if value:
                return value
            await asyncio.sleep(0.1)
        raise TimeoutError(f"page never satisfied: {expression}")

    async def click(self, selector: str) -> None:
        """A mouse click in the middle of the element, as a person's."""
        box = await self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1
            )

    async def type(self, text: str) -> None:
        await self.send("Input.insertText", text=text)

    async def screenshot(self, path: Path) -> Path:
        shot = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
