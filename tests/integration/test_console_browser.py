"""The operator console in Debian's Chromium (Playwright), on the reference filing flow.

The filing fleet of ``make demo --workflow filing`` runs on throwaway topics: the
stand-ins, the stand-in model, the tracker (virtual clock), the gateway and the three
filing agents, each its own process. Three filings are opened; two reach the legal
review, and the records stand-in refuses to hold the third's documents (no retry can
help), so its event is dead-lettered. Then a person, in the browser, does what issue 47
asks:

- signs in (no key in any URL);
- finds a filing by its correlation key (``filing_number=...``);
- opens its story, which lists the events and transitions ``sagalog audit`` lists, in
  the same order;
- approves its legal review in the gates inbox and sees, without a reload, the inbox
  row and the filing's own page (open in a second tab) move on to the signature wait;
- replays the dead letter with a reason;
- cancels the other filing and sees it compensate.

No page logs an error in the browser's console or throws. Every page is photographed
(1280x800); with ``SAGALOG_UPDATE_SCREENSHOTS=1`` the pictures replace the ones the docs
show (``docs/images/console/``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from playwright.sync_api import Page, expect

import external_tools
from demo.filing_driver import FilingDriver
from demo.filing_scenario import Filing, build_filings
from demo.fleet import Fleet
from sagalog.cli.gateway_client import GatewayClient, GatewayClientSettings
from sagalog.exit_codes import Restart, restart_policy
from sagalog.tracker.ticks import clock_topic

from . import stuck_fleet
from .browser import chromium, screenshot
from .project import REPO, Project
from .test_filing_workflow import apply_filing_project
from .test_reference_workflow import reference_fleet_config

DOCS_SHOTS = REPO / "docs" / "images" / "console"
TRACKER_S = 120_000
"""How long a page may wait for the tracker (ms): on a loaded machine its stall detector
may restart it (exit 70, "has not moved for 20s": the fleet is supervised), and it then
restores its tables."""
PAGES = (
    "sign-in",
    "overview",
    "workflows",
    "workflow",
    "verified",
    "gates",
    "dead-letters",
    "dead-letter",
    "analytics",
)


class FilingRun:
    """The fleet, its gateway, and the filings' states as the gateway tells them."""

    def __init__(self, project: Project, tmp: Path) -> None:
        s = project.suffix
        self.project = project
        self.api_key = secrets.token_urlsafe(16)
        self.config = reference_fleet_config(
            project,
            tmp / "run",
            api_key=self.api_key,
            workflows=("filing",),
            filing_topic=f"filings.events.{s}",
            blob_dir=tmp / "blobs",
        )
        self.fleet = Fleet(self.config)
        self.filings: list[Filing] = build_filings(f"ui{s[:6]}", 3, seed=5)
        self.gateway: GatewayClient | None = None
        self.driver: FilingDriver | None = None

    def start(self) -> None:
        self.fleet.start_all()
        self.fleet.supervise()  # a tracker that exits 70 is restarted, as in production
        self.fleet.wait_gateway_ready()
        self.gateway = GatewayClient(
            GatewayClientSettings(url=self.url, api_key=self.api_key, timeout_s=30)
        )
        self.driver = FilingDriver(
            settings=self.project.settings,
            catalog=self.project.catalog,
            gateway=self.gateway,
            topic=self.config.filing_topic,
            tracker_app_id=self.config.tracker_app_id,
            filings=self.filings,
        )
        self.driver._start_clock()
        # Events decided before the first tick would run on the virtual clock's 0, and
        # the tick (the real time) would then fire every timer of theirs at once: under
        # load the gate's deadline rejected the filing the test was about to approve.
        # Loaded, the tracker may still be rebalancing (a minute or more past its start).
        self.wait(
            self._clock_decided, what="the tracker deciding the clock's first tick", timeout=360
        )

    def _clock_decided(self) -> bool:
        """Whether the tracker's group committed every clock partition to its end."""
        topic = clock_topic(self.config.tracker_app_id)
        reader = Consumer(
            self.project.settings.kafka_config(**{"group.id": self.config.tracker_app_id})
        )
        try:
            parts = reader.list_topics(topic, timeout=10).topics[topic].partitions
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            committed = reader.committed(tps, timeout=10)
            ends = [reader.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
        finally:
            reader.close()
        return all(tp.offset >= end for tp, end in zip(committed, ends, strict=True))

    @property
    def url(self) -> str:
        return self.fleet.urls["gateway"]

    def open(self, *filings: Filing) -> None:
        assert self.driver is not None
        self.driver._publish_each(
            "filings.v1.FilingOpened",
            ((f.workflow_id, f.payload, None) for f in filings),
            source="tests/filers",
            purpose="console-browser",
        )

    def api(self, path: str, **query: Any) -> Any:
        assert self.gateway is not None
        return self.gateway.get(path, **query)

    def state(self, workflow_id: str) -> str | None:
        try:
            return str(self.api(f"/v1/workflows/{workflow_id}")["state"])
        except Exception:  # not known to the gateway yet
            return None

    def wait(self, condition: Callable[[], bool], *, what: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            dead = [
                d
                for d in self.fleet.dead()
                if restart_policy(d.process.returncode if d.process else 0) is not Restart.AT_ONCE
            ]
            assert not dead, [(d.name, d.tail()) for d in dead]
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}")

    @contextmanager
    def explained(self, what: str) -> Iterator[None]:
        """A wait on the tracker that fails says why: the offsets, the logs and the
        tracker's stacks at that moment (``stuck_fleet``)."""
        try:
            yield
        except AssertionError as exc:
            told = stuck_fleet.report(
                self.fleet,
                self.project.settings,
                topic=self.config.filing_topic,
                group=self.config.tracker_app_id,
            )
            raise AssertionError(f"{what}: {exc}\n{told}") from exc

    def audit(self, workflow_id: str) -> list[tuple[str, str]]:
        """``sagalog audit --json``'s history: (kind, event id or transition's states)."""
        result = self.project.sagalog(
            "audit",
            workflow_id,
            "--json",
            "--tracker-app-id",
            self.config.tracker_app_id,
            "--transitions-topic",
            self.config.transitions_topic,
            "--no-gateway",
        )
        assert result.exit_code == 0, result.output
        return [_audited(entry) for entry in json.loads(result.stdout)["history"]]


def _audited(entry: dict[str, Any]) -> tuple[str, str]:
    if entry["kind"] == "transition":
        payload = entry["payload"]
        return "transition", f"{payload['from_state']}->{payload['to_state']}"
    return "event", str(entry["event_id"])


def _story(page: Page) -> list[tuple[str, str]]:
    """The story as the page lists it, in the audit's terms."""
    rows: list[list[str]] = page.eval_on_selector_all(
        "#story > li",
        """items => items.map(li => li.classList.contains('transition')
            ? ['transition', [...li.querySelectorAll('.state')].map(s => s.textContent).join('->')]
            : ['event', li.dataset.eventId])""",
    )
    return [(kind, ident) for kind, ident in rows]


@pytest.fixture
def filing_run(project: Project, tmp_path: Path) -> Iterator[FilingRun]:
    apply_filing_project(project)
    run = FilingRun(project, tmp_path)
    try:
        run.start()
        yield run
    finally:
        run.fleet.stop_all()


@pytest.mark.extended
@pytest.mark.tool("chromium", external_tools.PLAYWRIGHT)
def test_an_operator_works_the_filings_in_the_browser_console(
    filing_run: FilingRun, tmp_path: Path
) -> None:
    """Two to four minutes: nine processes start, three filings are drafted by the
    stand-in model, and the tracker compensates one filing in the browser's sight."""
    run = filing_run
    approved, cancelled, poisoned = run.filings
    run.open(approved, cancelled)
    for filing in (approved, cancelled):
        run.wait(
            lambda f=filing: run.state(f.workflow_id) == "pending_approval",
            what=f"{filing.workflow_id} at its legal review",
        )
    run.fleet.faults("records", reject_when={"filing_number": poisoned.payload["filing_number"]})
    run.open(poisoned)
    run.wait(
        lambda: bool(run.api("/v1/dead-letters", limit=10)["dead_letters"]),
        what="the poisoned filing's event in the dead-letter topic",
    )
    run.fleet.faults("records", reject_when={})  # fixed: a replay now goes through
    shots = tmp_path / "shots"
    number = approved.payload["filing_number"]

    with chromium() as browser:
        page = browser.new_page()
        # Signing in: any console page sends a stranger to the sign-in form first.
        page.goto(f"{run.url}/console/workflows")
        expect(page).to_have_url(re.compile(r"/console/sign-in\?next="))
        screenshot(page, shots / "sign-in.png")
        page.fill("input[name=api_key]", run.api_key)
        page.fill("input[name=who]", "lee@filings.example")
        page.click("form button[type=submit]")
        expect(page).to_have_url(f"{run.url}/console/workflows")
        assert run.api_key not in page.url

        # The overview, then a filing found by its correlation key.
        page.goto(f"{run.url}/console")
        expect(page.locator("#by-state")).to_contain_text("filing")
        screenshot(page, shots / "overview.png")
        page.goto(f"{run.url}/console/workflows")
        expect(page.locator(f'tr[data-workflow="{cancelled.workflow_id}"]')).to_be_visible()
        screenshot(page, shots / "workflows.png")
        page.fill("input[name=q]", f"filing_number={number}")
        page.click("form[role=search] button")
        found = page.locator("tbody tr[data-workflow]")
        expect(found).to_have_count(1)
        assert found.get_attribute("data-workflow") == approved.workflow_id

        # Its story, event for event and transition for transition as `sagalog audit`.
        found.locator("a").first.click()
        expect(page.locator("h1")).to_have_text(approved.workflow_id)
        expect(page.locator("#story")).to_be_visible()
        assert _story(page) == run.audit(approved.workflow_id)
        assert page.locator("#story li.event").count() >= 3
        screenshot(page, shots / "workflow.png", full_page=True)  # the story is the point
        # Verify: the audit chain check, as `sagalog audit --verify` makes it.
        page.click("#verify")
        expect(page.locator(".verified")).to_contain_text("Audit chain verified")
        expect(page.locator("#story")).to_be_visible()
        screenshot(page, shots / "verified.png")

        # The filing's page stays open in a second tab while the inbox decides its gate.
        watching = browser.new_page()
        watching.goto(f"{run.url}/console/workflows/{approved.workflow_id}")
        expect(watching.locator("dl.facts .state")).to_have_text("pending_approval")
        watching.evaluate("window.sameDocument = true")

        page.goto(f"{run.url}/console/gates")
        row = page.locator(f'tr[data-workflow="{approved.workflow_id}"]')
        expect(row.locator("button[value=approve]")).to_be_visible()
        screenshot(page, shots / "gates.png")
        page.evaluate("window.sameDocument = true")
        row.locator("input[name=comment]").fill("reviewed in the console")
        row.locator("button[value=approve]").click()
        expect(row.locator(".decided")).to_contain_text("approved by lee@filings.example")
        # The tracker takes the decision: the row and the other tab hear it, no reload.
        with run.explained(f"{approved.workflow_id} past its legal review"):
            expect(
                page.locator(f'tr.moved-on[data-workflow="{approved.workflow_id}"]')
            ).to_contain_text("moved on: now awaiting_input", timeout=TRACKER_S)
        expect(watching.locator("dl.facts .state")).to_have_text("awaiting_input")
        assert page.evaluate("window.sameDocument") is True
        assert watching.evaluate("window.sameDocument") is True
        expect(watching.locator("#story .gate").last).to_contain_text("by lee@filings.example")
        watching.close()

        # The dead letter, replayed with a reason.
        page.goto(f"{run.url}/console/dead-letters")
        letter = page.locator("tbody tr[data-position]").first
        expect(letter).to_contain_text(poisoned.workflow_id)
        screenshot(page, shots / "dead-letters.png")
        letter.locator("a").first.click()
        expect(page.locator("h1")).to_contain_text("Dead letter")
        screenshot(page, shots / "dead-letter.png")
        page.fill("input[name=reason]", "records service fixed")
        page.click("form button:has-text('Replay')")
        expect(page.locator("[role=status]")).to_contain_text("replay ")
        expect(page.locator("[role=status]")).to_contain_text("published to")

        # Analytics: the figures of the read model, drawn by the vendored Chart.js.
        page.goto(f"{run.url}/console/analytics")
        expect(page.locator("#durations")).to_contain_text("filing")
        assert page.evaluate("typeof Chart") == "function"
        assert page.evaluate(
            "Chart.getChart(document.getElementById('throughput-chart')) !== undefined"
        )
        screenshot(page, shots / "analytics.png", full_page=True)  # the table too

        # The other filing, cancelled: its page follows the compensation as it lands.
        page.goto(f"{run.url}/console/workflows/{cancelled.workflow_id}")
        page.fill("#cancel-reason", "filed twice by mistake")
        page.click("form button:has-text('Cancel the workflow')")
        expect(page.locator("[role=status]")).to_contain_text("cancellation published")
        with run.explained(f"{cancelled.workflow_id} compensated"):
            expect(page.locator("dl.facts .state")).to_have_text(
                re.compile("compensat"), timeout=TRACKER_S
            )
            expect(page.locator("dl.facts .state")).to_have_text("compensated", timeout=TRACKER_S)
        expect(page.locator("#story")).to_contain_text("WorkflowCancelled")

    assert not browser.problems, browser.problems
    # What the browser did is in the log, with who did it.
    replays = run.api("/v1/dead-letters", limit=10)["dead_letters"]
    assert any(r["replays"] for r in replays), replays
    cancelled_view = run.api(f"/v1/workflows/{cancelled.workflow_id}")
    assert "lee@filings.example" in cancelled_view["terminal_reason"]
    assert "filed twice by mistake" in cancelled_view["terminal_reason"]
    assert sorted(p.name for p in shots.iterdir()) == sorted(f"{name}.png" for name in PAGES)
    if os.environ.get("SAGALOG_UPDATE_SCREENSHOTS") == "1":
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        for shot in shots.iterdir():
            shutil.copy(shot, DOCS_SHOTS / shot.name)
