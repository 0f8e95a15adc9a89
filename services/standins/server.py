"""A small HTTP service that performs idempotent effects and records them.

    POST /effects/<operation>   body: JSON, header Idempotency-Key  -> 200 {"id": ..., ...}
    GET  /effects               every effect applied, with how often its key was called
    GET  /lookup/<key>          the result applied under an idempotency key, or 404
    GET  /calls                 every call in arrival order: [arrived_at, operation, key, status]
    POST /faults                {"fail_next": 3, "latency_ms": 200, "outage": true,
                                 "fail_ratio": 0.5, "fail_operations": ["release"],
                                 "fail_when": {...}, "reject_when": {"vendor": "X"}}
    GET  /health

An effect is applied once per idempotency key; a repeat returns the first result and
counts as a repeat call, so a test can tell "called twice" from "done twice". Every call,
failed ones included, is logged with its arrival time (wall clock, seconds), so a test
can measure the load a dependency saw (a rate limit, a breaker's probes).
Failures are injected before an effect is applied: a failed call never half-applies.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Faults:
    fail_next: int = 0
    fail_always: bool = False
    latency_ms: int = 0
    outage: bool = False
    fail_when: dict[str, Any] = field(default_factory=dict)  # body field -> value: always fail
    # body field -> value: always refuse (422), as a system refuses a request it will
    # never accept (a blocked vendor): the caller must not retry, and the dependency is
    # up, so no circuit breaker should open on it.
    reject_when: dict[str, Any] = field(default_factory=dict)
    fail_ratio: float = 0.0  # fail this share of calls at random (a flaky dependency)
    fail_operations: list[str] = field(default_factory=list)  # limit the above; empty: all
    seed: int | None = None  # reseeds the random failures, so a run can be repeated
    chunk_delay_ms: int = 0  # the model stand-in: the pause before each streamed chunk
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def set(self, changes: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """``POST /faults``: the status and the body to answer (400 for an unknown name)."""
        for name, value in changes.items():
            if name == "rng" or not hasattr(self, name):
                return HTTPStatus.BAD_REQUEST, {"error": f"unknown fault '{name}'"}
            setattr(self, name, value)
            if name == "seed":
                self.rng.seed(value)
        return HTTPStatus.OK, {k: v for k, v in self.__dict__.items() if k != "rng"}

    def refusal(self, operation: str, body: dict[str, Any], lock: threading.Lock) -> int | None:
        """How a call is refused, after the injected latency: 422 for a request refused
        for what it asks (``reject_when``), 503 for an injected failure, None to serve it."""
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)
        if self.reject_when and all(body.get(k) == v for k, v in self.reject_when.items()):
            return HTTPStatus.UNPROCESSABLE_ENTITY
        matches = bool(self.fail_when) and all(body.get(k) == v for k, v in self.fail_when.items())
        flaky = (
            self.fail_ratio > 0
            and (not self.fail_operations or operation in self.fail_operations)
            and self.rng.random() < self.fail_ratio
        )
        with lock:
            fail = self.outage or self.fail_always or self.fail_next > 0 or matches or flaky
            if self.fail_next > 0:
                self.fail_next -= 1
        return HTTPStatus.SERVICE_UNAVAILABLE if fail else None


@dataclass
class EffectBook:
    """Every effect applied, by idempotency key, and every call made."""

    effects: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    lookups: dict[str, int] = field(default_factory=dict)
    failures_injected: int = 0
    call_log: list[tuple[float, str, str, int]] = field(default_factory=list)
    """(arrived_at, operation, idempotency key, HTTP status) of every call, in arrival order."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def log_call(self, arrived_at: float, operation: str, key: str, status: int) -> None:
        with self.lock:
            self.call_log.append((arrived_at, operation, key, status))

    def apply(self, operation: str, key: str, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        with self.lock:
            self.calls[key] = self.calls.get(key, 0) + 1
            if key in self.effects:
                return self.effects[key]["result"], False
            result = {
                "id": f"{operation}-{uuid.uuid4().hex[:12]}",
                "operation": operation,
                **{k: v for k, v in body.items() if isinstance(v, (str, int, float))},
            }
            self.effects[key] = {
                "operation": operation,
                "body": body,
                "result": result,
                "applied_at": time.time(),
            }
            return result, True

    def look_up(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            self.lookups[key] = self.lookups.get(key, 0) + 1
            effect = self.effects.get(key)
            return None if effect is None else effect["result"]


class StandinServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], *, name: str) -> None:
        super().__init__(address, _Handler)
        self.name = name
        self.book = EffectBook()
        self.faults = Faults()
        self.after_apply: Callable[[str, str], None] | None = None
        """Called in-process with (operation, key) once an effect is applied and before
        it is answered: a test's way to crash its caller between the call and the
        record. Not settable over HTTP."""


class JsonHandler(BaseHTTPRequestHandler):
    """A stand-in's request handler: JSON replies, no access log (every stand-in's)."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Handler(JsonHandler):
    server: StandinServer

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:
        if self.path == "/health":
            self._reply(HTTPStatus.OK, {"status": "ok", "name": self.server.name})
        elif self.path == "/calls":
            book = self.server.book
            with book.lock:
                log = list(book.call_log)
            self._reply(HTTPStatus.OK, {"calls": log})
        elif self.path.startswith("/lookup/"):
            result = self.server.book.look_up(self.path.removeprefix("/lookup/"))
            if result is None:
                self._reply(HTTPStatus.NOT_FOUND, {"error": "no effect under that key"})
            else:
                self._reply(HTTPStatus.OK, result)
        elif self.path == "/effects":
            book = self.server.book
            with book.lock:
                self._reply(
                    HTTPStatus.OK,
                    {
                        "effects": book.effects,
                        "calls": book.calls,
                        "lookups": book.lookups,
                        "failures_injected": book.failures_injected,
                    },
                )
        else:
            self._reply(HTTPStatus.NOT_FOUND, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        if self.path == "/faults":
            self._reply(*self.server.faults.set(self._body()))
            return
        if not self.path.startswith("/effects/"):
            self._reply(HTTPStatus.NOT_FOUND, {"error": f"no route {self.path}"})
            return
        arrived_at = time.time()
        key = self.headers.get("Idempotency-Key")
        if not key:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": "the Idempotency-Key header is required"})
            return
        faults = self.server.faults
        body = self._body()
        operation = self.path.removeprefix("/effects/")
        book = self.server.book
        refused = faults.refusal(operation, body, book.lock)
        if refused == HTTPStatus.UNPROCESSABLE_ENTITY:
            book.log_call(arrived_at, operation, key, refused)
            fields = ", ".join(f"{k}={v!r}" for k, v in faults.reject_when.items())
            # As many systems do, the refusal quotes the request, personal data and all:
            # what the caller makes of the answer must not carry it into the log.
            self._reply(refused, {"error": f"refused: {fields}", "request": body})
            return
        if refused is not None:
            with book.lock:
                book.failures_injected += 1
            book.log_call(arrived_at, operation, key, refused)
            self._reply(refused, {"error": "injected failure"})
            return
        result, _ = self.server.book.apply(operation, key, body)
        self.server.book.log_call(arrived_at, operation, key, HTTPStatus.OK)
        if self.server.after_apply is not None:
            self.server.after_apply(operation, key)
        self._reply(HTTPStatus.OK, result)


def serve(*, name: str, host: str = "127.0.0.1", port: int = 0) -> StandinServer:
    """Start a stand-in in a background thread; ``server.server_address`` has the port."""
    server = StandinServer((host, port), name=name)
    threading.Thread(target=server.serve_forever, name=f"standin-{name}", daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description="Run an effect stand-in (ledger, ERP, mail).")
    parser.add_argument("name")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--host", default="127.0.0.1", help="0.0.0.0 in a container, for the agents to reach it"
    )
    args = parser.parse_args()
    server = StandinServer((args.host, args.port), name=args.name)
    print(json.dumps({"name": args.name, "port": server.server_address[1]}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
