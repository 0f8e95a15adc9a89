"""Debian's Chromium, driven by Playwright for Python.

Playwright launches the system's browser (``executable_path``, found by
``external_tools``): the browsers Playwright can download are never fetched or used.
A test gets a ``WatchedBrowser``: pages that hear every console message and page error,
so a test can say the console showed none, and a screenshot helper that writes the
pictures the docs show (``docs/images/console/``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Error,
    Page,
    expect,
    sync_playwright,
)

import external_tools

VIEWPORT = {"width": 1280, "height": 800}
expect.set_options(timeout=30_000)  # a page waits on the broker and the tracker, not on a person
ARGS = [
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",  # no calls home: this machine has no network
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class WatchedBrowser:
    """One browser context (one cookie jar: one person signed in) and what its pages said."""

    browser: Browser
    context: BrowserContext
    problems: list[str] = field(default_factory=list)
    """Console errors and uncaught page errors, as ``page url: text``."""

    def new_page(self) -> Page:
        page = self.context.new_page()

        def heard(message: ConsoleMessage) -> None:
            if message.type == "error":
                self.problems.append(f"{page.url}: console error: {message.text}")

        def thrown(error: Error) -> None:
            self.problems.append(f"{page.url}: page error: {error}")

        page.on("console", heard)
        page.on("pageerror", thrown)
        return page


@contextmanager
def chromium(*, viewport: dict[str, int] | None = None) -> Iterator[WatchedBrowser]:
    """A headless Debian Chromium under Playwright; skips (fails under CI) without it."""
    executable = external_tools.require("chromium")
    external_tools.require(external_tools.PLAYWRIGHT)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=ARGS)
        try:
            context = browser.new_context(
                viewport=viewport or VIEWPORT,  # type: ignore[arg-type]
                device_scale_factor=1,
                locale="en-GB",
                timezone_id="UTC",
            )
            context.set_default_timeout(30_000)
            yield WatchedBrowser(browser, context)
            context.close()
        finally:
            browser.close()


def screenshot(page: Page, path: Path, *, full_page: bool = False) -> Path:
    """A PNG of what ``page`` shows (the viewport, or the whole page), once it loaded."""
    page.wait_for_load_state("load")
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=full_page, animations="disabled")
    return path
