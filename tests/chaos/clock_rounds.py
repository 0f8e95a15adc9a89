"""The clock round (issue 50): the tracker's wall clock jumps 1 h forward, then 10 min back.

The tracker runs under libfaketime (``wall_clock.py``) for the round, and its wall
clock moves while it decides the round's load: +1 h once some workflows are in, back
10 min (to +50 min) after the gates escalated. Its monotonic clock does not move,
as with a real jump.

The chaos fleet's tracker runs on the virtual clock (``clock=virtual``: the harness
moves time days ahead to fire escalations and deadlines), so timers are due on the
clock topic's time, and the round asks what a jump of the process's wall clock does
to them and to everything else in the process (faust, aiokafka, librdkafka,
RocksDB; the records it produces are stamped with the shifted clock):

- **timers** (``timer_checker``, from the transitions topic): none fired before its
  due time on the tracker's clock, none fired twice; each waiting gate escalated once
  and each expired one took its default once (``faults.clock_jump_verify``);
- **gate tokens** carry no time (``sagalog.tracker.gates``: a MAC over workflow,
  gate and opening): a token handed out before a jump decides the gate after it, as
  long as the gate is open on the tracker's clock, which is its deadline timer's
  business. The round's gates are decided through the jumps with the tokens of their
  first opening, and every approval and rejection must end as planned;
- **webhook signatures** are judged by the gateway against the gateway's own clock,
  ±``webhook_tolerance_s`` (``sagalog.services.gateway.signatures``); the tracker's
  clock has no say. While the tracker is shifted, a call signed now is accepted and
  reaches the log, and calls dated by the tracker's shifted clock, or older than the
  tolerance, are refused with 401.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from demo.scenario import Plan, Request
from sagalog.services.gateway.signatures import HEADER, sign_webhook

from . import timer_checker
from .faults import clock_jump_verify, escalated
from .harness import HOUR_MS, ChaosRun
from .wall_clock import WallClockShift

TRACKER = "tracker-a"
WEBHOOK_SOURCE = "chaos-clock"
WEBHOOK_SECRET = "chaos-clock-webhook-secret-32-bytes"
WEBHOOK_KIND = "clock.probe"
TOLERANCE_S = 300
"""The gateway's default ``webhook_tolerance_s``, set explicitly for the round."""


@dataclass
class WebhookCall:
    """One signed call to the gateway while the tracker's clock was shifted."""

    label: str
    workflow_id: str
    dated_s: int
    expected: int
    status: int | None = None


@dataclass
class WallClockJumps:
    """The round's fault (``inject``), its set-up (``prepare``) and its checks (``verify``),
    sharing the offset file and the webhook calls made."""

    forward_s: int = 3600
    back_s: int = 600
    shift: WallClockShift | None = None
    calls: list[WebhookCall] = field(default_factory=list)
    _envs: dict[str, dict[str, str]] = field(default_factory=dict)

    # -- before the load -------------------------------------------------------------

    def prepare(self, run: ChaosRun) -> None:
        """Restart the tracker under libfaketime (offset 0) and the gateway with a signed
        webhook source, both before the round's first workflow."""
        self.shift = WallClockShift(run.work_dir / "wall-clock")
        self.shift.check()
        self.calls = []
        sources = {WEBHOOK_SOURCE: {"secret": WEBHOOK_SECRET, "kinds": [WEBHOOK_KIND]}}
        self._restart(run, TRACKER, self.shift.environment())
        self._restart(
            run,
            "gateway",
            {
                "GATEWAY_WEBHOOK_SOURCES": json.dumps(sources),
                "GATEWAY_WEBHOOK_TOLERANCE_S": str(TOLERANCE_S),
            },
        )

    def _restart(self, run: ChaosRun, name: str, extra: dict[str, str] | None) -> None:
        """Stop ``name`` (SIGTERM: not an exit of its own), start it with ``extra`` in its
        environment (None: the one it had), wait until it is ready."""
        service = run.fleet.services[name]
        self._envs.setdefault(name, dict(service.env))
        with run.supervisor.lock:
            run.supervisor.held.add(name)
            try:
                service.stop(timeout=60)
                service.env = {**self._envs[name], **(extra or {})}
                service.start()
            finally:
                run.supervisor.held.discard(name)
        # A tracker restores its tables first: 20 s on a quiet machine, 390 s at a load
        # average of 40 on two cores (the first pytest run of this round timed out at 240)
        run.fleet.wait_ready(name, timeout=600)

    # -- the fault -------------------------------------------------------------------

    def inject(
        self, run: ChaosRun, rng: random.Random, window_s: float
    ) -> list[tuple[float, float]]:
        """+1 h under load, escalations, back 10 min under load, deadlines; then restore."""
        assert self.shift is not None, "prepare runs first"
        requests = run.current
        waiting = [r.workflow_id for r in requests if r.plan in (Plan.ESCALATE, Plan.EXPIRE)]
        others = [r.workflow_id for r in requests if r.workflow_id not in waiting]
        time.sleep(window_s * rng.uniform(0.2, 0.35))  # some workflows in, more coming
        jumped = back = time.monotonic()
        try:
            self.shift.shift(self.forward_s)
            run.report(f"chaos: the tracker's wall clock is now {self.forward_s:+d} s")
            self._call_webhooks(run, "ahead")
            run.wait(lambda: _at(run, waiting, {"pending_approval"}) and _ended(run, others), 300)
            run.advance(25 * HOUR_MS)  # the gates escalate (24 h), on the virtual clock
            run.wait(lambda: escalated(run, waiting), 240)
            back = time.monotonic()
            self.shift.shift(self.forward_s - self.back_s)  # the escalated ones run on
            run.report(f"chaos: the tracker's wall clock went back {self.back_s} s")
            self._call_webhooks(run, "back")
            run.advance(48 * HOUR_MS)  # past the gates' deadline (72 h)
            run.wait(lambda: _ended(run, [r.workflow_id for r in requests]), 240)
        finally:  # later rounds get the fleet as it was, whatever happened here
            restored = time.monotonic()
            for name in (TRACKER, "gateway"):
                self._restart(run, name, None)
        return [(jumped, back), (back, restored)]

    def _call_webhooks(self, run: ChaosRun, when: str) -> None:
        """Three signed calls on the round's first workflow: dated now (accepted), by
        the tracker's shifted clock and past the tolerance (both refused by the gateway's
        clock)."""
        assert self.shift is not None
        workflow_id = run.current[0].workflow_id
        now = int(time.time())
        for label, dated, expected in (
            ("signed now", now, 202),
            ("dated by the tracker's clock", now + self.shift.offset_s, 401),
            ("older than the tolerance", now - TOLERANCE_S - 60, 401),
        ):
            call = WebhookCall(f"{label} ({when})", workflow_id, dated, expected)
            call.status = _post_webhook(run, call)
            self.calls.append(call)

    # -- the verdict -----------------------------------------------------------------

    def verify(self, run: ChaosRun, requests: list[Request]) -> list[str]:
        ids = [r.workflow_id for r in requests]
        found = timer_checker.firings(run.recorder.transitions(ids))
        early, twice = timer_checker.early(found), timer_checker.twice(found)
        run.figures.update(
            timers_fired=len(found), timers_early=len(early), timers_twice=len(twice)
        )
        failures = [f"timer fired early: {e}" for e in early[:10]]
        failures += [f"timer fired twice: {t}" for t in twice[:10]]
        failures += clock_jump_verify(run, requests)
        wrong = [
            f"{c.label}: {c.status}, not {c.expected}" for c in self.calls if c.status != c.expected
        ]
        received = [
            str(e.get("payload_json"))
            for c in {c.workflow_id for c in self.calls}
            for e in run.recorder.events(c, "sagalog.v1.WebhookReceived")
        ]
        landed = [
            c
            for c in self.calls
            if c.status == 202 and not any(c.label in text for text in received)
        ]
        run.figures["webhooks ok"] = f"{len(self.calls) - len(wrong)}/{len(self.calls)}"
        failures += [f"webhook {w}" for w in wrong]
        failures += [f"webhook {c.label} was accepted but is not in the log" for c in landed]
        if not found:
            failures.append("no timer fired in the round: it tested nothing")
        return failures


def _post_webhook(run: ChaosRun, call: WebhookCall) -> int | None:
    """The gateway's answer; a 404 (its read model has not seen the workflow yet) is
    asked again for up to 60 s."""
    deadline = time.monotonic() + 60
    while True:
        status = _post_webhook_once(run, call)
        if status != 404 or time.monotonic() > deadline:
            return status
        time.sleep(1)


def _post_webhook_once(run: ChaosRun, call: WebhookCall) -> int | None:
    body = json.dumps({"probe": call.label}).encode()
    query = f"workflow_id={call.workflow_id}"
    signature = sign_webhook(
        WEBHOOK_SECRET.encode(), kind=WEBHOOK_KIND, body=body, timestamp=call.dated_s, query=query
    )
    request = urllib.request.Request(
        f"{run.fleet.urls['gateway']}/v1/webhooks/{WEBHOOK_KIND}?{query}",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-API-Key": run.fleet.config.api_key,
            "X-Webhook-Source": WEBHOOK_SOURCE,
            HEADER: signature,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def _at(run: ChaosRun, ids: list[str], states: set[str]) -> bool:
    return all(s in states for s in run.recorder.states(ids).values())


def _ended(run: ChaosRun, ids: list[str]) -> bool:
    return _at(run, ids, {"completed", "compensated", "failed", "timed_out"})
