"""A whole flow in memory, measured: the CPU seconds of a user's flow tests.

``FlowTestEnvironment`` runs the tracker's rules and the agents' handlers together,
no broker, on a virtual clock. This runs a project made by ``sagalog new`` (rendered
into a temporary folder) through its paths (paid and stocked; out of stock, so
refunded; a payment provider down until the step's timeout compensates it), then
the reference procurement flow with its six agents through the paths that need
days (the manager's gate escalated to the director after a virtual day, then
approved; the gate's 72 h deadline, rejected by default and the budget released),
and prints ``time.process_time`` for each and in all, imports and loading apart.

    PYTHONPATH=services python -m tests.bench.whole_flow     (make bench-memory)

No broker is needed; nothing is asserted about time.
"""

from __future__ import annotations

import decimal
import importlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
STARTED = time.process_time()

from sagalog import FlowTestEnvironment, __version__  # noqa: E402 (measured from here)
from sagalog.scaffold import ProjectNames, create_project  # noqa: E402

Scenario = Callable[[FlowTestEnvironment, str], str]


def scaffolded(project: Path) -> tuple[FlowTestEnvironment, Any]:
    sys.path.insert(0, str(project / "src"))
    orders = importlib.import_module("bench_shop.orders")
    events = importlib.import_module("bench_shop.events")
    env = FlowTestEnvironment.for_project(project, [orders.agent], strict_effects=True)
    env.stub_effect("payments.charge", returns="pay-1")
    env.stub_effect("payments.refund", returns=None)
    return env, events.OrderPlaced


def procurement() -> tuple[FlowTestEnvironment, Any]:
    os.environ.setdefault("PURCHASING_AGENT_GATE_SECRET", "bench-gate-secret-0123456789abcdef")
    names = ["intake", "retrieval", "risk", "budget", "purchasing", "notification"]
    modules = {n: importlib.import_module(f"{n}_agent.agent") for n in names}
    secret = modules["purchasing"].settings.gate_secret.get_secret_value().encode()
    env = FlowTestEnvironment.for_project(
        REPO, [m.agent for m in modules.values()], secret=secret, strict_effects=True
    )
    for effect, answer in {
        "ledger.reserve": {"id": "res-1"},
        "ledger.release": {"id": "res-1"},
        "erp.create_po": {"id": "po-1", "operation": "create_po"},
        "erp.cancel_po": {"id": "po-1", "operation": "cancel_po"},
        "mail.send": {"id": "msg-1"},
        "mail.send_correction": {"id": "msg-2"},
    }.items():
        env.stub_effect(effect, returns=answer)
    return env, importlib.import_module("procurement.events").RequestSubmitted


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "bench-shop"
        create_project(ProjectNames.of("bench-shop", sagalog_version=__version__), project)
        shop, placed = scaffolded(project)
        office, submitted = procurement()
        loaded = time.process_time()

        def order(workflow_id: str, quantity: int) -> None:
            shop.start(placed(order_id=workflow_id, item="book", quantity=quantity,
                              amount_cents=1990), workflow_id=workflow_id)  # fmt: skip
            shop.run_until_quiet()

        def request(workflow_id: str) -> None:
            office.start(submitted(request_id=workflow_id, requester="ann@example.com",
                                   department="it", title="Laptops", description="Three laptops",
                                   amount=decimal.Decimal("2400.00"), currency="EUR",
                                   vendor="Acme", submitted_at="2030-01-07T09:00:00Z"),
                         workflow_id=workflow_id)  # fmt: skip
            office.run_until_quiet()

        def down(workflow_id: str) -> None:
            shop.stub_effect("payments.charge", raises=ConnectionError("provider down"))
            order(workflow_id, 1)
            shop.stub_effect("payments.charge", returns="pay-1")

        def escalated(workflow_id: str) -> None:
            request(workflow_id)
            office.advance(days=1)
            office.decide_gate(workflow_id, approve=True, by="director@procurement.example")
            office.run_until_quiet()

        def deadline(workflow_id: str) -> None:
            request(workflow_id)
            office.advance(days=3)

        scenarios: list[tuple[str, FlowTestEnvironment, str, Callable[[str], None], str]] = [
            ("scaffold: paid and stocked", shop, "o-1", lambda w: order(w, 2), "completed"),
            ("scaffold: out of stock, refunded", shop, "o-2", lambda w: order(w, 1000),
             "compensated"),
            ("scaffold: provider down, step timed out", shop, "o-3", down, "compensated"),
            ("procurement: gate escalated after a day, approved", office, "pr-1", escalated,
             "completed"),
            ("procurement: gate deadline, budget released", office, "pr-2", deadline,
             "compensated"),
        ]  # fmt: skip
        print(f"{'scenario':<52} {'end state':<12} {'virtual':>10} {'CPU s':>7}")
        for title, env, workflow_id, run, expected in scenarios:
            before, virtual = time.process_time(), env.now_ms
            run(workflow_id)
            state = env.state(workflow_id).value
            spent = time.process_time() - before
            hours = (env.now_ms - virtual) / 3_600_000
            flag = "" if state == expected else f"  (expected {expected})"
            print(f"{title:<52} {state:<12} {hours:>9.2f}h {spent:>7.3f}{flag}")
        ran = time.process_time() - loaded
        shop.close()
        office.close()
    print(f"\nimports and loading (two projects, seven agents): {loaded - STARTED:.3f} CPU s")
    print(f"the five workflows: {ran:.3f} CPU s")
    print(f"in all: {time.process_time() - STARTED:.3f} CPU s (time.process_time)")


if __name__ == "__main__":
    main()
