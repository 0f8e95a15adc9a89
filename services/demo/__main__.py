"""``python -m demo``: the procurement approval end to end, every service its own process.

Run by ``make demo`` after the local stack is up. It applies the topology, starts
the three stand-ins, the saga tracker (virtual clock), the gateway and the six agent
services, submits a mix of requests, plays the managers and the calendar (see
``driver``), and ends with a summary table, the audit trail of one compensated
workflow, and ``demo-summary.json``. The services are stopped at the end; Kafka and
the registry keep running (``make down`` stops them). Exit 0 when every workflow
ended as planned, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import secrets
import statistics
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from demo.driver import Driver, bar, history
from demo.fleet import Fleet, FleetConfig
from demo.scenario import FAILING_VENDOR, Plan, Request, build_mix, mix_counts
from sagalog.audit import (
    AuditError,
    ReadStats,
    Sources,
    audit_consumer,
    collect,
    find_workflow,
    to_text,
    verify,
)
from sagalog.cli.gateway_client import GatewayClient, GatewayClientSettings
from sagalog.cluster import connect_admin
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.devstack import DevStackSettings, LocalStack
from sagalog.errors import DestructiveChangeRefused, SagalogError
from sagalog.flows.states import TERMINAL_STATES
from sagalog.personal import ERASED
from sagalog.personal.cipher import personal_data
from sagalog.personal.erasure import erase_subject
from sagalog.settings import ClientSettings
from sagalog.topic_names import records_changelog
from sagalog.topology.apply import TopologyClient
from sagalog.topology.dev_users import ensure_dev_users
from sagalog.topology.loader import load_topology
from sagalog.topology.model import Topology
from sagalog.topology.services import TrackerService

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    parser.add_argument("--count", type=int, default=200, help="requests to submit")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--summary", type=Path, default=REPO / "demo-summary.json")
    parser.add_argument("--run-dir", type=Path, default=Path.home() / ".local/state/sagalog/demo")
    args = parser.parse_args(argv)
    settings = ClientSettings(project_dir=str(REPO))
    run_id = f"demo{dt.datetime.now(dt.UTC):%m%d%H%M}{uuid.uuid4().hex[:4]}"
    try:
        return run(settings, args, run_id)
    except SagalogError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return exc.exit_code


def run(settings: ClientSettings, args: argparse.Namespace, run_id: str) -> int:
    connect_admin(settings)
    catalog = SchemaCatalog.load(REPO / "schemas")
    say("applying the topology (topics, schemas, compatibility rules)")
    client = TopologyClient(settings, catalog)
    topology = load_topology(REPO / "topology", known_schemas=catalog)
    try:
        list(client.apply(client.plan(topology), force=False, report=lambda _: None))
    except DestructiveChangeRefused as exc:
        # Every safe change was made; what is refused (deleting topics the topology
        # does not declare, e.g. another tool's) is none of the demo's business.
        say(f"left alone: {str(exc).splitlines()[0]}")

    api_key = secrets.token_urlsafe(24)
    tracker = next(s for s in topology.services if isinstance(s, TrackerService))
    config = FleetConfig(
        run_dir=args.run_dir / run_id,
        settings=settings,
        gate_secret=secrets.token_urlsafe(32),
        api_key=api_key,
        tracker_service=tracker.name,
        tracker_app_id=tracker.app_id,
        login=service_logins(settings, client, topology),
    )
    fleet = Fleet(config)
    requests = build_mix(run_id, args.count, seed=args.seed)
    started = time.monotonic()
    try:
        say(f"starting 12 services (logs in {config.run_dir / 'logs'})")
        fleet.start_all()
        fleet.supervise()
        fleet.faults("erp", reject_when={"vendor": FAILING_VENDOR})
        fleet.wait_gateway_ready()
        gateway = GatewayClient(
            # A broker lost and back is an outage the gateway answers 503 + Retry-After
            # to; the driver waits it out, up to three minutes in all per request.
            GatewayClientSettings(
                url=fleet.urls["gateway"], api_key=api_key, timeout_s=30, retry_for_s=180
            )
        )
        say(f"{len(requests)} requests: {dict(Counter(r.plan.value for r in requests))}")
        driver = Driver(
            settings=settings,
            catalog=catalog,
            gateway=gateway,
            topic=config.topic,
            tracker_app_id=config.tracker_app_id,
            requests=requests,
            progress=bar,
        )
        try:
            driver.run()
        except SagalogError as exc:
            # Say where it stopped and what was done, rather than exit with no summary.
            done = ", ".join(f"{p.name} {p.done}/{p.of}" for p in driver.phases) or "none"
            summary = {
                "submitted": len(requests),
                "gave_up": str(exc),
                "phases": [phase.__dict__ for phase in driver.phases],
                "states": dict(Counter(driver.states.values())),
                "elapsed_s": round(time.monotonic() - started, 1),
            }
            args.summary.write_text(json.dumps(summary, indent=2) + "\n")
            say(f"the driver gave up ({exc}); phases done: {done}; summary in {args.summary}")
            return exc.exit_code
        ends = driver.end_states()
        summary = summarize(requests, ends, driver, gateway, time.monotonic() - started)
        print_summary(summary)
        example = next((r for r in requests if r.plan is Plan.FAIL), None)
        if example is not None:
            summary["erased"] = erase_requester(settings, catalog, example)
        summary["audit_verified"] = example is None or print_audit(
            settings, catalog, config, example
        )
        fleet.reap()
        summary["service_exits"] = dict(
            Counter(f"{name} exit {code}" for name, code in fleet.exits)
        )
        summary["logins"] = "shared" if config.login is None else "per service"
        summary["tracker_app_id"] = config.tracker_app_id
        summary["examples"] = {r.plan.value: r.workflow_id for r in reversed(requests)}
        args.summary.write_text(json.dumps(summary, indent=2) + "\n")
        say(f"summary written to {args.summary}")
        if fleet.restarted:
            restarts = ", ".join(f"{name} x{n}" for name, n in sorted(fleet.restarted.items()))
            say(f"services restarted after asking to be (exit 70): {restarts}")
        dead = fleet.dead()
        if dead:
            say("services that crashed: " + ", ".join(s.name for s in dead))
        if summary["service_exits"]:
            say(f"services that exited on their own: {summary['service_exits']}")
        as_planned = summary["stuck"] == 0 and summary["matches_mix"]
        return 0 if as_planned and summary["audit_verified"] else 1
    finally:
        say("stopping the services (Kafka and the registry keep running; `make down` stops them)")
        fleet.stop_all()


def summarize(
    requests: list[Request],
    ends: Counter[str],
    driver: Driver,
    gateway: GatewayClient,
    elapsed_s: float,
) -> dict[str, Any]:
    expected = mix_counts(requests)
    by_state = dict(sorted(ends.items()))
    dwell: dict[str, list[int]] = defaultdict(list)
    for request in requests:
        for move in history(gateway, request.workflow_id).get("history", []):
            dwell[move["from_state"]].append(move["time_in_previous_state_ms"])
    wrong = [r.workflow_id for r in requests if driver.states.get(r.workflow_id) != r.expected_end]
    return {
        "submitted": len(requests),
        "by_terminal_state": {s: n for s, n in by_state.items() if s in TERMINAL_STATES},
        "expected": expected,
        "stuck": sum(n for s, n in by_state.items() if s not in TERMINAL_STATES),
        "not_as_planned": wrong,
        "matches_mix": not wrong,
        "by_plan": dict(Counter(r.plan.value for r in requests)),
        "time_in_state_ms": {
            state: {
                "count": len(values),
                "p50": int(statistics.median(values)),
                "p95": int(sorted(values)[max(0, int(len(values) * 0.95) - 1)]),
            }
            for state, values in sorted(dwell.items())
            if values
        },
        "phases": [phase.__dict__ for phase in driver.phases],
        "elapsed_s": round(elapsed_s, 1),
    }


def print_summary(summary: dict[str, Any]) -> None:
    print()
    print(f"{'terminal state':<16}{'workflows':>10}{'planned':>10}")
    for state in sorted(set(summary["expected"]) | set(summary["by_terminal_state"])):
        got = summary["by_terminal_state"].get(state, 0)
        print(f"{state:<16}{got:>10}{summary['expected'].get(state, 0):>10}")
    print(f"{'stuck':<16}{summary['stuck']:>10}{0:>10}")
    print()
    print(f"{'time in state (virtual)':<26}{'transitions':>12}{'p50':>12}{'p95':>12}")
    for state, figures in summary["time_in_state_ms"].items():
        print(
            f"{state:<26}{figures['count']:>12}{_dur(figures['p50']):>12}{_dur(figures['p95']):>12}"
        )
    print()
    phases = ", ".join(f"{p['name']} {p['seconds']}s" for p in summary["phases"])
    print(f"{summary['submitted']} workflows in {summary['elapsed_s']}s ({phases})")


def print_audit(
    settings: ClientSettings, catalog: SchemaCatalog, config: FleetConfig, request: Request
) -> bool:
    """One workflow's history as ``sagalog audit --verify`` shows it: read at the
    positions its tracker sealed (never a topic scan), causes, gate decisions, model
    lineage and transitions, and the hash chain checked."""
    print(f"\naudit trail of {request.workflow_id} (plan: {request.plan}, vendor {FAILING_VENDOR})")
    stats = ReadStats()
    consumer = audit_consumer(settings)
    try:
        seal = find_workflow(
            consumer,
            request.workflow_id,
            changelog=records_changelog(config.tracker_app_id),
            timeout_s=settings.connect_timeout_s,
            stats=stats,
        )
        codec = EventCodec(
            catalog=catalog,
            registry=SchemaRegistry(settings),
            personal=personal_data(settings, reveal=True),
        )
        collected = collect(
            consumer,
            codec,
            seal,
            sources=Sources(transitions_topic=config.transitions_topic),
            timeout_s=settings.connect_timeout_s,
            stats=stats,
        )
    except AuditError as exc:
        print(f"  not available: {exc}")
        return False
    finally:
        consumer.close()
    verification = verify(collected.trail.workflow, collected.events, collected.transitions)
    print(to_text(collected.trail, verification=verification, stats=stats, headers=False))
    print(
        f"  (the same: sagalog audit {request.workflow_id} --verify "
        f"--tracker-app-id {config.tracker_app_id})"
    )
    return verification.ok


def erase_requester(
    settings: ClientSettings, catalog: SchemaCatalog, request: Request
) -> dict[str, Any] | None:
    """Exercise the right to erasure on the example workflow's requester, as
    ``sagalog erase`` does: their address reads as erased in every workflow they
    submitted, and the audit below still verifies (``docs/personal-data.md``)."""
    if not settings.personal_data_key_file:
        say("personal data is written in clear: no SAGALOG_PERSONAL_DATA_KEY_FILE is set")
        return None
    requester = str(request.payload["requester"])
    done = erase_subject(
        settings,
        catalog,
        requester,
        reason=f"demo: the requester of {request.workflow_id} asked to be forgotten",
        requested_by="demo",
    )
    say(
        f"erased {requester} (subject {done.subject_id}, {len(done.key_ids)} key(s)): the "
        f"audit below shows the address as {ERASED} and still verifies"
    )
    return {"subject_id": done.subject_id, "keys": len(done.key_ids)}


def _dur(ms: int) -> str:
    if ms >= 3_600_000:
        return f"{ms / 3_600_000:.1f} h"
    if ms >= 1000:
        return f"{ms / 1000:.1f} s"
    return f"{ms} ms"


def say(text: str) -> None:
    print(f"demo: {text}", file=sys.stderr, flush=True)


def service_logins(
    settings: ClientSettings, client: TopologyClient, topology: Topology
) -> Callable[[str], dict[str, str]] | None:
    """Each service's own login when the demo runs on the secure dev stack, else None.

    On ``sagalog dev up --secure`` every service connects as its own principal
    (``User:budget-agent``...), so the ACLs that ``topology apply`` derived are what
    lets it work: a right the topology forgot fails the demo. Only the demo itself
    (the driver, publishing requests and reading the audit) runs as the admin.
    """
    stack = LocalStack(DevStackSettings())
    if not stack.shape.secure or not stack.serves(settings.bootstrap_servers):
        return None
    created = ensure_dev_users(
        client.admin,
        sorted(topology.principals),
        stack.security.credentials,
        timeout=client.timeout,
        report=lambda _: None,
    )
    say(f"secure cluster: each service logs in as itself ({len(created)} SCRAM user(s) created)")
    names = {principal.removeprefix("User:") for principal in topology.principals}

    def login(name: str) -> dict[str, str]:
        if name not in names:
            raise SagalogError(
                f"service {name!r} is not declared in topology/services.yaml, so it has no "
                "login and no rights on the secure cluster; declare it there"
            )
        return stack.client_environment(principal=name)

    return login


if __name__ == "__main__":
    sys.exit(main())
