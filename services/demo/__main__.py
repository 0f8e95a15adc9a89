"""``python -m demo``: the two reference workflows end to end, every service its own
process: the procurement approval and the regulatory filing.

Run by ``make demo`` after the local stack is up. It applies the topology, starts
the stand-ins (budget ledger, ERP, mail; records, registers, regulator and an
OpenAI-compatible model), the saga tracker (virtual clock), the gateway and the nine
agent services, then runs the procurement requests (``driver``) and the filings
(``filing_driver``) one after the other, each with its people and calendar, and
ends each with a summary table and the audit trail of one workflow; the whole run
goes to ``demo-summary.json``. ``--workflow procurement`` or ``filing`` runs one.
The services are stopped at the end; Kafka and the registry keep running (``make
down`` stops them). Exit 0 when every workflow ended as planned and both audits
verified, 1 otherwise.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from demo.driver import Calendar, Driver, PhaseBars, Planned, history
from demo.filing_driver import FilingDriver
from demo.filing_scenario import Filing, FilingPlan, build_filings
from demo.fleet import WORKFLOWS, Fleet, FleetConfig
from demo.scenario import FAILING_VENDOR, Plan, Request, build_mix
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
from sagalog.cli.tables import print_table
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
from sagalog.topology.plan import Change, ChangeKind
from sagalog.topology.services import TrackerService

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    parser.add_argument(
        "--workflow", choices=[*WORKFLOWS, "both"], default="both", help="which to run"
    )
    parser.add_argument("--count", type=int, default=200, help="procurement requests to submit")
    parser.add_argument("--filings", type=int, default=30, help="filings to open")
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


def left_alone(refused: Sequence[Change]) -> str:
    """What the demo did not change on a shared stack, said so that nobody worries: on
    the dev stack after `make test` it is the tests' topics, which are not the demo's."""
    kinds = Counter(change.kind for change in refused)
    parts = []
    if deleted := kinds.pop(ChangeKind.DELETE_TOPIC, 0):
        parts.append(f"{deleted} topic(s) the topology does not declare (tests', other tools')")
    parts += [f"{n} '{kind}' change(s)" for kind, n in sorted(kinds.items())]
    return (
        f"left alone on this cluster: {', '.join(parts)}; the demo needs none of it "
        "(`sagalog topology plan` lists them)"
    )


def run(settings: ClientSettings, args: argparse.Namespace, run_id: str) -> int:
    connect_admin(settings)
    catalog = SchemaCatalog.load(REPO / "schemas")
    say("applying the topology (topics, schemas, compatibility rules)")
    client = TopologyClient(settings, catalog)
    topology = load_topology(REPO / "topology", known_schemas=catalog)
    plan = client.plan(topology)
    try:
        list(client.apply(plan, force=False, report=lambda _: None))
    except DestructiveChangeRefused:
        # Every safe change was made; what is refused (deleting topics the topology
        # does not declare: the tests' and other tools') is none of the demo's business.
        say(left_alone(plan.refused_without_force))

    workflows = WORKFLOWS if args.workflow == "both" else (args.workflow,)
    api_key = secrets.token_urlsafe(24)
    tracker = next(s for s in topology.services if isinstance(s, TrackerService))
    run_dir = args.run_dir / run_id
    # Every service and the audit share one blob store: a filing's long documents
    # travel by reference, and the audit rehashes them.
    settings = settings.model_copy(update={"blob_dir": str(run_dir / "blobs")})
    config = FleetConfig(
        run_dir=run_dir,
        settings=settings,
        gate_secret=secrets.token_urlsafe(32),
        api_key=api_key,
        tracker_service=tracker.name,
        tracker_app_id=tracker.app_id,
        login=service_logins(settings, client, topology),
        workflows=workflows,
        blob_dir=run_dir / "blobs",
    )
    fleet = Fleet(config)
    started = time.monotonic()
    try:
        say(f"starting {fleet.service_count} services (logs in {config.run_dir / 'logs'})")
        fleet.start_all()
        fleet.supervise()
        if "procurement" in workflows:
            fleet.faults("erp", reject_when={"vendor": FAILING_VENDOR})
        fleet.wait_gateway_ready()
        gateway = GatewayClient(
            # A broker lost and back is an outage the gateway answers 503 + Retry-After
            # to; the driver waits it out, up to three minutes in all per request.
            GatewayClientSettings(
                url=fleet.urls["gateway"], api_key=api_key, timeout_s=30, retry_for_s=180
            )
        )
        parts: dict[str, dict[str, Any]] = {}
        for workflow in workflows:
            part = (
                run_procurement(settings, catalog, args, run_id, fleet, gateway)
                if workflow == "procurement"
                else run_filings(settings, catalog, args, run_id, fleet, gateway)
            )
            parts[workflow] = part
            if "gave_up" in part:
                summary = {"workflows": parts, "elapsed_s": round(time.monotonic() - started, 1)}
                args.summary.write_text(json.dumps(summary, indent=2, default=str) + "\n")
                say(f"the {workflow} driver gave up ({part['gave_up']}); summary in {args.summary}")
                return int(part["exit_code"])
        summary = combined(parts, time.monotonic() - started)
        fleet.reap()
        summary["service_exits"] = dict(
            Counter(f"{name} exit {code}" for name, code in fleet.exits)
        )
        summary["logins"] = "shared" if config.login is None else "per service"
        summary["tracker_app_id"] = config.tracker_app_id
        counts = ", ".join(f"{workflow} {part['submitted']}" for workflow, part in parts.items())
        print(f"\n{summary['submitted']} workflows ({counts}) in {summary['elapsed_s']}s in all")
        args.summary.write_text(json.dumps(summary, indent=2, default=str) + "\n")
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


def run_procurement(
    settings: ClientSettings,
    catalog: SchemaCatalog,
    args: argparse.Namespace,
    run_id: str,
    fleet: Fleet,
    gateway: GatewayClient,
) -> dict[str, Any]:
    """The procurement requests end to end; their part of the summary."""
    requests = build_mix(run_id, args.count, seed=args.seed)
    say(f"{len(requests)} requests: {dict(Counter(r.plan.value for r in requests))}")
    driver = Driver(
        settings=settings,
        catalog=catalog,
        gateway=gateway,
        topic=fleet.topic_of("procurement"),
        tracker_app_id=fleet.config.tracker_app_id,
        requests=requests,
        progress=PhaseBars(),
    )
    started = time.monotonic()
    try:
        driver.run()
    except SagalogError as exc:
        return gave_up(driver, exc, started)
    summary = summarize(requests, driver.end_states(), driver, gateway, time.monotonic() - started)
    print_summary("procurement", summary)
    example = next((r for r in requests if r.plan is Plan.FAIL), None)
    if example is not None:
        summary["erased"] = erase_requester(settings, catalog, example)
        vendor = f"vendor {FAILING_VENDOR}"
        print(f"\naudit trail of {example.workflow_id} (plan: {example.plan}, {vendor})")
    summary["audit_verified"] = example is None or print_audit(
        settings, catalog, fleet.config, example.workflow_id
    )
    summary["examples"] = {r.plan.value: r.workflow_id for r in reversed(requests)}
    return summary


def run_filings(
    settings: ClientSettings,
    catalog: SchemaCatalog,
    args: argparse.Namespace,
    run_id: str,
    fleet: Fleet,
    gateway: GatewayClient,
) -> dict[str, Any]:
    """The regulatory filings end to end; their part of the summary, with what the
    model and the tools were asked, by the stand-ins' own books."""
    filings = build_filings(run_id, args.filings, seed=args.seed)
    say(f"{len(filings)} filings: {dict(Counter(f.plan.value for f in filings))}")
    driver = FilingDriver(
        settings=settings,
        catalog=catalog,
        gateway=gateway,
        topic=fleet.topic_of("filing"),
        tracker_app_id=fleet.config.tracker_app_id,
        filings=filings,
        progress=PhaseBars(),
    )
    started = time.monotonic()
    try:
        driver.run()
    except SagalogError as exc:
        return gave_up(driver, exc, started)
    summary = summarize(filings, driver.end_states(), driver, gateway, time.monotonic() - started)
    summary["agents"] = filing_figures(fleet, filings)
    refused = next((f for f in filings if f.plan is FilingPlan.OVER_BUDGET), None)
    if refused is not None:
        # Why a trial tenant's filing was rejected, as the tracker recorded it.
        summary["agents"]["over_budget"] = {
            "workflow_id": refused.workflow_id,
            "reason": history(gateway, refused.workflow_id).get("terminal_reason"),
        }
    print_summary("filing", summary)
    example = next((f for f in filings if f.plan is FilingPlan.FILE), None)
    if example is not None:
        summary["stream"] = print_stream(fleet, example.workflow_id)
        print(f"\naudit trail of {example.workflow_id} (plan: {example.plan})")
    summary["audit_verified"] = example is None or print_audit(
        settings, catalog, fleet.config, example.workflow_id
    )
    summary["examples"] = {f.plan.value: f.workflow_id for f in reversed(filings)}
    return summary


def print_stream(fleet: Fleet, workflow_id: str) -> dict[str, Any]:
    """Replay the drafting step's model stream from the gateway, as a browser would
    read it live (``GET /v1/workflows/{id}/stream``, server-sent events), and say what
    it held: the draft was streamed as the model wrote it."""
    url = f"{fleet.urls['gateway']}/v1/workflows/{workflow_id}/stream"
    kinds: Counter[str] = Counter()
    attempts: set[tuple[str, int]] = set()
    text: list[str] = []
    try:
        with httpx.stream(
            "GET", url, headers={"X-API-Key": fleet.config.api_key}, timeout=10
        ) as response:
            response.raise_for_status()
            kind = ""
            for line in response.iter_lines():
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:"):
                    data = json.loads(line[5:])
                    kinds[kind] += 1
                    attempts.add((data["call"], data["attempt"]))
                    if kind == "delta":
                        text.append(data["text"])
                    elif kind == "end" and data["seq"] > 0:  # the answer's turn ended
                        break
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        print(f"\nmodel stream of {workflow_id}: not available ({exc})")
        return {"error": str(exc)}
    draft = "".join(text)
    print(
        f"\nmodel stream of {workflow_id} (curl -N -H 'X-API-Key: ...' {url}): "
        f"{kinds['delta']} deltas over {len(attempts)} model call attempt(s), "
        f"{kinds['interrupted']} interrupted; the draft as streamed: {draft[:100]!r}..."
    )
    return {"workflow_id": workflow_id, "events": dict(kinds), "chars": len(draft)}


def filing_figures(fleet: Fleet, filings: list[Filing]) -> dict[str, Any]:
    """Model calls, tokens and tool calls per drafted filing, from the model's and the
    registers' own logs, and the effects the records system and the regulator saw.
    (A real model, ``DRAFTING_AGENT_LLM_BASE_URL``, keeps its own log: the stand-in's
    then shows no call.)"""
    drafted = sum(1 for f in filings if f.drafted)
    per = max(drafted, 1)
    served = [c for c in fleet.calls("model") if c[3] == 200]
    tools = Counter(c[1] for c in fleet.calls("registers") if c[3] == 200)
    applied = {
        name: Counter(e["operation"] for e in fleet.effects(name)["effects"].values())
        for name in ("records", "regulator")
    }
    prompt, completion = sum(c[4] for c in served), sum(c[5] for c in served)
    tokens = prompt + completion
    return {
        "drafted": drafted,
        "model_calls": len(served),
        "model_tokens": tokens,
        "model_calls_per_filing": round(len(served) / per, 2),
        "tokens_per_filing": round(tokens / per),
        "prompt_tokens_per_filing": round(prompt / per),
        "completion_tokens_per_filing": round(completion / per),
        "tool_calls": dict(tools),
        "tool_calls_per_filing": round(sum(tools.values()) / per, 2),
        "records": dict(applied["records"]),
        "regulator": dict(applied["regulator"]),
    }


def gave_up(driver: Calendar, exc: SagalogError, started: float) -> dict[str, Any]:
    """Where a driver stopped and what was done, rather than exit with no summary."""
    done = ", ".join(f"{p.name} {p.done}/{p.of}" for p in driver.phases) or "none"
    say(f"phases done: {done}")
    return {
        "submitted": len(driver.planned),
        "gave_up": str(exc),
        "exit_code": exc.exit_code,
        "phases": [phase.__dict__ for phase in driver.phases],
        "states": dict(Counter(driver.states.values())),
        "elapsed_s": round(time.monotonic() - started, 1),
    }


def combined(parts: dict[str, dict[str, Any]], elapsed_s: float) -> dict[str, Any]:
    """The whole run: each workflow's part, and the totals the exit code is read from."""
    return {
        "submitted": sum(p["submitted"] for p in parts.values()),
        "stuck": sum(p["stuck"] for p in parts.values()),
        "matches_mix": all(p["matches_mix"] for p in parts.values()),
        "audit_verified": all(p["audit_verified"] for p in parts.values()),
        "erased": parts.get("procurement", {}).get("erased"),
        "examples": {
            f"{workflow}/{plan}": workflow_id
            for workflow, part in parts.items()
            for plan, workflow_id in part["examples"].items()
        },
        "workflows": parts,
        "elapsed_s": round(elapsed_s, 1),
    }


def summarize(
    planned: Sequence[Planned],
    ends: Counter[str],
    driver: Calendar,
    gateway: GatewayClient,
    elapsed_s: float,
) -> dict[str, Any]:
    expected = dict(sorted(Counter(p.expected_end for p in planned).items()))
    by_state = dict(sorted(ends.items()))
    dwell: dict[str, list[int]] = defaultdict(list)
    for workflow in planned:
        for move in history(gateway, workflow.workflow_id).get("history", []):
            dwell[move["from_state"]].append(move["time_in_previous_state_ms"])
    wrong = [p.workflow_id for p in planned if driver.states.get(p.workflow_id) != p.expected_end]
    return {
        "submitted": len(planned),
        "by_terminal_state": {s: n for s, n in by_state.items() if s in TERMINAL_STATES},
        "expected": expected,
        "stuck": sum(n for s, n in by_state.items() if s not in TERMINAL_STATES),
        "not_as_planned": wrong,
        "matches_mix": not wrong,
        "by_plan": dict(Counter(str(p.plan) for p in planned)),
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


def print_summary(workflow: str, summary: dict[str, Any]) -> None:
    print()
    states = sorted(set(summary["expected"]) | set(summary["by_terminal_state"]))
    print_table(
        (f"{workflow}: terminal state", "workflows", "planned"),
        [
            *(
                (
                    state,
                    str(summary["by_terminal_state"].get(state, 0)),
                    str(summary["expected"].get(state, 0)),
                )
                for state in states
            ),
            ("stuck", str(summary["stuck"]), "0"),
        ],
        right={1, 2},
    )
    print()
    print_table(
        ("time in state (virtual)", "transitions", "p50", "p95"),
        [
            (state, str(figures["count"]), _dur(figures["p50"]), _dur(figures["p95"]))
            for state, figures in summary["time_in_state_ms"].items()
        ],
        right={1, 2, 3},
    )
    agents = summary.get("agents")
    if agents:
        print()
        print(
            f"model: {agents['model_calls']} calls, {agents['model_tokens']} tokens for "
            f"{agents['drafted']} drafted filings ({agents['model_calls_per_filing']} calls, "
            f"{agents['tokens_per_filing']} tokens each); tools: {agents['tool_calls']} "
            f"({agents['tool_calls_per_filing']} each); records {agents['records']}, "
            f"regulator {agents['regulator']}"
        )
        if "over_budget" in agents:
            refused = agents["over_budget"]
            print(f"over budget, {refused['workflow_id']}: {refused['reason']}")
    print()
    phases = ", ".join(f"{p['name']} {p['seconds']}s" for p in summary["phases"])
    print(f"{summary['submitted']} {workflow} workflows in {summary['elapsed_s']}s ({phases})")


def print_audit(
    settings: ClientSettings, catalog: SchemaCatalog, config: FleetConfig, workflow_id: str
) -> bool:
    """One workflow's history as ``sagalog audit --verify`` shows it: read at the
    positions its tracker sealed (never a topic scan), causes, gate decisions, model
    lineage and transitions, and the hash chain checked."""
    stats = ReadStats()
    consumer = audit_consumer(settings)
    try:
        seal = find_workflow(
            consumer,
            workflow_id,
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
        f"  (the same: sagalog audit {workflow_id} --verify "
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
                f"service {name!r} is not a service of the topology (no flow step names it "
                "and topology/services.yaml does not declare it), so it has no login and no "
                "rights on the secure cluster; name it on a step or declare it there"
            )
        return stack.client_environment(principal=name)

    return login


if __name__ == "__main__":
    sys.exit(main())
