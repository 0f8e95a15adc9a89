"""What the gateway answered while a round's faults ran: a reader polling it.

The gateway is the fleet's door for people, so a fault it does not ride out shows
here first: every ``interval_s`` the probe asks ``/healthz`` and reads one page of
workflows (``GET /v1/workflows?limit=1``, which needs only the read model), and
keeps the answers. ``figures`` sums them up for a round's row: the share of reads
answered 200 during the injections and the seconds ``/healthz`` said ``degraded``.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Answer:
    at: float  # monotonic
    health_code: int | None  # None: no answer at all
    health: str | None
    read_code: int | None


@dataclass
class GatewayProbe:
    url: str
    api_key: str
    interval_s: float = 0.5
    answers: list[Answer] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> GatewayProbe:
        threading.Thread(target=self._run, name="chaos-gateway-probe", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            code, body = _get(f"{self.url}/healthz", None)
            read, _ = _get(f"{self.url}/v1/workflows?limit=1", self.api_key)
            status = body.get("status") if isinstance(body, dict) else None
            self.answers.append(Answer(time.monotonic(), code, status, read))

    def figures(
        self, since: float, until: float, injections: list[tuple[float, float]]
    ) -> dict[str, Any]:
        mine = [a for a in self.answers if since <= a.at <= until]
        during = [a for a in mine if any(s <= a.at <= e for s, e in injections)] or mine
        ok = sum(1 for a in during if a.read_code == 200)
        degraded = sum(1 for a in mine if a.health == "degraded") * self.interval_s
        unanswered = sum(1 for a in during if a.health_code is None)
        return {
            "gateway_reads_ok": f"{100 * ok / len(during):.0f}% of {len(during)}"
            if during
            else None,
            "gateway_degraded_s": round(degraded, 1),
            "gateway_unanswered": unanswered,
            "gateway_read_codes": sorted({str(a.read_code) for a in during}),
        }


def _get(url: str, key: str | None) -> tuple[int | None, Any]:
    request = urllib.request.Request(url, headers={"X-API-Key": key} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"null")
        except ValueError:
            return exc.code, None
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None, None
