"""A chaos run: the reference workflow's real services on a private stack, faults, a verdict.

``ChaosRun`` starts the chaos stack (``stack.py``), a throwaway project (topics with
a run suffix), the demo ``Fleet`` (three stand-ins, the tracker on a virtual clock,
the gateway, the six procurement agents, each an OS process), a ``Recorder`` of
the log, a driver that submits requests and decides gates the way people would,
and a ``GatewayProbe`` that reads through the gateway all along. A supervisor
restarts any service that exits, as Kubernetes would (exit 70 is the platform's
"restart me"), and counts every exit by service and code: a restart is the last
resort, so each round's row shows them, and a round may fail on them (``max_exits``).

Each ``round`` submits workflows while a fault runs, lets them settle, moves the
clock past the flow's deadline if some are still open, collects the history and
hands it to the checker.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demo.fleet import Fleet, FleetConfig
from demo.scenario import FAILING_VENDOR, Plan, Request, build_mix
from integration.project import Project
from integration.tracker_harness import PROCUREMENT, SECRET, latest_records, rebuild_from_log
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.exit_codes import ExitCode
from sagalog.flows.loader import load_flows
from sagalog.replay.diff import decided_fields
from sagalog.topology.apply import TopologyClient
from sagalog.topology.loader import load_topology
from sagalog.tracker.ticks import clock_topic, last_tick_ms, tick_all

from .checker import TERMINAL, Effect, FlowRules, Planned, RoundHistory, RoundResult, check
from .gateway_probe import GatewayProbe
from .recorder import Recorder, Sender, Topics
from .stack import ChaosStack

REPO = Path(__file__).resolve().parents[2]
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
WORKFLOW_PARTITIONS = 3  # of the workflow topic below

TOPOLOGY = """
ignore: ["*"]
topics:
  procurement.events.{s}:
    partitions: 3
    retention: forever
    schemas: [%s]
  transitions.{s}:
    partitions: 3
    schemas: [sagalog.v1.StateTransition]
  alerts.{s}:
    partitions: 1
    schemas: [sagalog.v1.TrackerAlert]
  deadletter.{s}:
    partitions: 1
    schemas: []
""".replace("%s", ", ".join([*PROCUREMENT, "sagalog.v1.WebhookReceived"]))

EFFECTS = {  # plan -> the stand-in operations it must cause, once each
    Plan.APPROVE: {"reserve": 1, "create_po": 1, "send": 1},
    Plan.ESCALATE: {"reserve": 1, "create_po": 1, "send": 1},
    Plan.REJECT: {"reserve": 1, "release": 1},
    Plan.EXPIRE: {"reserve": 1, "release": 1},
    Plan.FAIL: {"reserve": 1, "release": 1},
}


Injector = Callable[["ChaosRun", random.Random, float], list[tuple[float, float]]]
"""Runs a fault for ``window_s`` seconds; returns when each injection started and ended."""


@dataclass(frozen=True)
class Fault:
    name: str
    inject: Injector
    window_s: float = 40.0
    workflows: int = 30
    timers: bool = False
    """Plans with escalations and expiries: the fault itself moves the clock."""
    verify: Callable[[ChaosRun, list[Request]], list[str]] | None = None
    """Fault-specific checks; each string is a failure. Figures go in ``run.figures``."""
    mix: Callable[[list[Request]], list[Request]] | None = None
    """Reshapes the round's requests (their priorities, say) before they are sent."""
    settle_s: float | None = None
    """How long the round's workflows may take to end after the fault; the run's default."""
    max_exits: int | None = None
    """Service exits (the supervisor's restarts) the round tolerates; None: counted only."""
    expected_exits: dict[str, int] = field(default_factory=dict)
    """Exits the fault itself causes, per service, not held against ``max_exits``."""
    prepare: Callable[[ChaosRun], None] | None = None
    """Sets the fleet up for the fault before the round's load starts (and its injector
    puts it back): a service restarted under libfaketime, say, or the fencing round's
    second tracker worker, whose start takes minutes on a loaded machine."""
    unavailable: Callable[[], str | None] | None = None
    """Why the round cannot run on this machine (a tool missing, and how to install it);
    None when it can. The suite skips such a round, and fails it under CI."""


@dataclass
class Supervisor:
    """Restarts services that exit (a crash, exit 70, a fenced zombie), as an orchestrator.

    It restarts every exit, not only those ``sagalog.exit_codes`` says to: a fault
    can make a service exit in a way the contract says to look at (a fenced zombie,
    7), and the round goes on to show what that cost; the exit is reported.
    """

    fleet: Fleet
    lock: threading.RLock = field(default_factory=threading.RLock)
    held: set[str] = field(default_factory=set)
    exits: list[tuple[str, int | None]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Supervisor:
        threading.Thread(target=self._run, name="chaos-supervisor", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        last: dict[str, float] = {}
        while not self._stop.wait(0.5):
            with self.lock:
                # Every exit is counted once, when seen (the fleet's own book); a
                # crash loop is restarted every 2 s, not spun.
                self.exits.extend(self.fleet.reap(skip=frozenset(self.held)))
                for name, service in list(self.fleet.services.items()):
                    if name in self.held or service.process is None or service.alive:
                        continue
                    if time.monotonic() - last.get(name, 0) < 2:
                        continue
                    last[name] = time.monotonic()
                    service.start()


class ChaosRun:
    def __init__(
        self,
        stack: ChaosStack,
        work_dir: Path,
        *,
        seed: int,
        settle_s: float = 240,
        report: Callable[[str], None] = print,
    ) -> None:
        self.stack = stack
        self.report = report
        self.work_dir = work_dir
        self.seed = seed
        self.settle_s = settle_s
        self.suffix = uuid.uuid4().hex[:8]
        self.rounds = 0
        self.requests: dict[str, Request] = {}
        self.answered: set[tuple[str, int]] = set()
        self.driver_errors: list[str] = []
        self.poison_ids: list[str] = []
        self.current: list[Request] = []
        self.figures: dict[str, Any] = {}
        """The current round's own measurements, for its row (see ``Fault.verify``)."""
        self._stop = threading.Event()

    # -- setup -------------------------------------------------------------------

    def setup(self) -> ChaosRun:
        s = self.suffix
        root = self.work_dir / "project"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(REPO / "schemas", root / "schemas")
        (root / "topology" / "flows").mkdir(parents=True)
        (root / "topology" / "topics.yaml").write_text(TOPOLOGY.replace("{s}", s))
        flow = (REPO / "topology" / "flows" / "procurement.v1.yaml").read_text()
        flow = flow.replace("topic: procurement.events", f"topic: procurement.events.{s}")
        # the fleet's agents are named <name>-<suffix> (agent_suffix): the flow names them so
        flow = re.sub(r"^(\s+agent: \S+)$", rf"\1-{s}", flow, flags=re.MULTILINE)
        (root / "topology" / "flows" / "procurement.v1.yaml").write_text(flow)
        self.settings = self.stack.client_settings(root)
        # The harness's own reads and ticks (not the services') wait as long as a loaded
        # two-core machine needs after a broker restart: metadata took more than the
        # services' 15 s there once, and the round failed in the harness, not the fleet.
        self.patient = self.settings.model_copy(update={"connect_timeout_s": 120.0})
        self.project = Project(root=root, settings=self.settings, suffix=s)
        catalog = SchemaCatalog.load(root / "schemas")
        self.catalog = catalog
        topology = load_topology(root / "topology", known_schemas=catalog)
        client = TopologyClient(self.settings, catalog)
        list(client.apply(client.plan(topology), force=False, report=lambda _: None))
        registry = load_flows(root / "topology" / "flows", catalog=catalog, topology=topology)
        self.registry = registry
        self.rules = FlowRules.of(registry.latest("procurement"))
        self.topics = Topics(f"procurement.events.{s}", f"transitions.{s}", f"deadletter.{s}")
        self.topic = self.topics.workflow
        self.app_id = f"saga-tracker-{s}"
        self.codec = EventCodec(catalog=catalog, registry=SchemaRegistry(self.settings))
        self.fleet = Fleet(
            FleetConfig(
                run_dir=self.work_dir / "fleet",
                settings=self.settings,
                gate_secret=SECRET,
                api_key="chaos",
                topic=self.topic,
                transitions_topic=self.topics.transitions,
                alerts_topic=f"alerts.{s}",
                deadletter_topic=self.topics.deadletter,
                tracker_app_id=self.app_id,
                agent_suffix=f"-{s}",
                launch_prefixes=self.placed(),
            )
        )
        self.recorder = Recorder(self.settings, self.codec, self.topics).start()
        self.sender = Sender(self.settings, self.codec, catalog, self.topic)
        self.fleet.start_standins()
        self.fleet.faults("erp", reject_when={"vendor": FAILING_VENDOR})
        tracker = self.fleet.start_tracker()
        self.fleet.wait_for_log(tracker, "tables ready", timeout=180)
        tick_all(self.settings, clock_topic(self.app_id), int(time.time() * 1000))
        self.fleet.start_gateway()
        for module in ("intake_agent", "retrieval_agent", "risk_agent"):
            self.fleet.start_agent(module)
        # A short transaction timeout, so the zombie fault can outlast it in seconds.
        os.environ["BUDGET_AGENT_TRANSACTION_TIMEOUT_S"] = "15"
        try:
            for module in ("budget_agent", "purchasing_agent", "notification_agent"):
                self.fleet.start_agent(module)
        finally:
            os.environ.pop("BUDGET_AGENT_TRANSACTION_TIMEOUT_S", None)
        self.fleet.wait_gateway_ready(timeout=180)
        self.probe = GatewayProbe(self.fleet.urls["gateway"], self.fleet.config.api_key).start()
        self.supervisor = Supervisor(self.fleet).start()
        threading.Thread(target=self._decide_gates, name="chaos-people", daemon=True).start()
        return self

    def placed(self) -> dict[str, tuple[str, ...]]:
        """Services that run in a host of the stack's network, by the host's name: the
        fencing round puts ``tracker-a`` in a namespace of its own to cut it off."""
        network = self.stack.network
        if network is None:
            return {}
        return {name: host.prefix for name, host in network.hosts.items()}

    def close(self) -> None:
        self._stop.set()
        probe = getattr(self, "probe", None)
        if probe is not None:
            probe.stop()
        supervisor = getattr(self, "supervisor", None)
        if supervisor is not None:
            supervisor.stop()
        fleet = getattr(self, "fleet", None)
        if fleet is not None:
            for service in fleet.services.values():
                if service.alive and service.process is not None:
                    _resume(service.process.pid)
            for service in reversed(list(fleet.services.values())):
                service.stop(timeout=10)  # a hung one is killed, not waited for
        recorder = getattr(self, "recorder", None)
        if recorder is not None:
            recorder.stop()
        sender = getattr(self, "sender", None)
        if sender is not None:
            sender.close()

    # -- the people ----------------------------------------------------------------

    def _decide_gates(self) -> None:
        """Answer each open gate once per opening and escalation level, by the request's plan."""
        while not self._stop.wait(0.3):
            try:
                self._decide_once()
            except Exception as exc:  # the broker may be down; try again
                self.driver_errors.append(repr(exc)[:200])

    def _decide_once(self) -> None:
        for workflow_id, request in list(self.requests.items()):
            latest = self.recorder.latest(workflow_id)
            if latest is None or latest.to_state != "pending_approval":
                continue
            opened = self.recorder.events(workflow_id, "sagalog.v1.GateOpened")
            if not opened:
                continue
            gate = opened[-1]
            level = int(gate.get("escalation_level") or 0)
            if request.plan is Plan.EXPIRE or (request.plan is Plan.ESCALATE and level < 1):
                continue
            if (workflow_id, level) in self.answered:
                continue
            self.answered.add((workflow_id, level))
            decision = "REJECTED" if request.plan is Plan.REJECT else "APPROVED"
            token = str(gate["token"])
            self.sender.send(
                "sagalog.v1.GateDecided",
                workflow_id,
                {
                    "gate": gate["gate"],
                    "token": token,
                    "decision": decision,
                    "decided_by": str(gate["assignee"]),
                    "comment": "chaos",
                },
                event_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{token}/{decision}")),
                source="chaos/people",
            )

    # -- a round -------------------------------------------------------------------

    def plan(self, fault: Fault) -> list[Request]:
        self.rounds += 1
        run_id = f"c{self.suffix[:4]}r{self.rounds:02d}"
        mix = build_mix(run_id, fault.workflows, seed=self.seed + self.rounds)
        if not fault.timers:
            remap = {Plan.ESCALATE: Plan.APPROVE, Plan.EXPIRE: Plan.REJECT}
            mix = [
                Request(r.workflow_id, remap.get(r.plan, r.plan), r.payload, r.priority)
                for r in mix
            ]
        return fault.mix(mix) if fault.mix is not None else mix

    def submit(self, requests: list[Request], over_s: float) -> None:
        gap = over_s / max(len(requests), 1)
        for request in requests:
            self.requests[request.workflow_id] = request
            self.sender.send(
                "procurement.v1.RequestSubmitted",
                request.workflow_id,
                request.payload,
                priority=request.priority,
                source="chaos/requesters",
            )
            time.sleep(gap)

    def round(self, fault: Fault) -> RoundResult:
        rng = random.Random(self.seed * 1000 + self.rounds)
        requests = self.plan(fault)
        ids = [r.workflow_id for r in requests]
        injections: list[tuple[float, float]] = []
        errors: list[str] = []

        def inject() -> None:
            try:
                injections.extend(fault.inject(self, rng, fault.window_s))
            except Exception as exc:
                errors.append(f"the fault injector failed: {exc!r}")
                self.report(f"chaos: {fault.name}: the injector failed:\n{traceback.format_exc()}")

        self.current = requests
        self.figures = {}
        if fault.prepare is not None:
            try:
                fault.prepare(self)
            except Exception as exc:
                errors.append(f"the fault's preparation failed: {exc!r}")
                self.report(f"chaos: {fault.name}: preparing failed:\n{traceback.format_exc()}")
        exits_before = len(self.supervisor.exits)
        injector = threading.Thread(target=inject, name=f"fault-{fault.name}", daemon=True)
        started = time.monotonic()
        injector.start()
        self.submit(requests, over_s=fault.window_s * 0.5)
        injector.join(fault.window_s + 600)
        self.sender.flush()
        self.wait(
            lambda: all(s in TERMINAL for s in self.recorder.states(ids).values()),
            fault.settle_s or self.settle_s,
        )
        states = self.recorder.states(ids)
        if any(s not in TERMINAL for s in states.values()):
            self.advance(6 * DAY_MS)
            self.wait(lambda: all(s in TERMINAL for s in self.recorder.states(ids).values()), 120)
        after = self.recorder.states(ids)
        if fault.verify is not None:
            errors += fault.verify(self, requests)
        # Exits the supervisor restarted: 70 is the platform's "restart me"; any other
        # code is reported (a finding), not failed: the supervisor restarts it alike,
        # and what it cost shows in lost, stuck and the rest.
        exits = self.supervisor.exits[exits_before:]
        history = self.history(fault, requests, states, after, injections, errors)
        history.notes.update(
            seconds=round(time.monotonic() - started, 1),
            crashes=[
                f"{n}:{rc}" for n, rc in exits if rc not in (ExitCode.STOPPED, ExitCode.RESTART)
            ],
        )
        history.exits, history.max_exits = list(exits), fault.max_exits
        history.expected_exits = dict(fault.expected_exits)
        history.figures.update(self.probe.figures(started, time.monotonic(), injections))
        return check(history, self.rules)

    def history(
        self,
        fault: Fault,
        requests: list[Request],
        states: dict[str, str | None],
        after: dict[str, str | None],
        injections: list[tuple[float, float]],
        errors: list[str],
    ) -> RoundHistory:
        ids = [r.workflow_id for r in requests]
        mine = set(ids)
        lab = _Lab(self)
        ended = [w for w in ids if after.get(w) in TERMINAL]
        self.wait(lambda: _terminal_in(latest_records(lab), ended), 90)  # the changelog caught up
        live = {w: decided_fields(r) for w, r in latest_records(lab).items() if w in mine}
        rebuilt = {
            w: decided_fields(r)
            for w, r in rebuild_from_log(lab, work_dir=self.work_dir).items()
            if w in mine
        }
        return RoundHistory(
            fault=fault.name,
            seed=self.seed,
            planned=[
                Planned(
                    r.workflow_id, str(r.payload["request_id"]), r.expected_end, EFFECTS[r.plan]
                )
                for r in requests
            ],
            sends=[s for s in self.sender.recorded() if s.workflow_id in mine],
            logged_event_ids=self.recorder.event_ids(),
            transitions=self.recorder.transitions(ids),
            states=states,
            states_after_deadline=after,
            effects=self.effects({str(r.payload["request_id"]) for r in requests}),
            live=live,
            rebuilt=rebuilt,
            injections=injections,
            progress_at=self.recorder.progress_at(),
            extra_failures=errors,
            notes={"end_states": dict(Counter(str(s) for s in after.values()))},
            figures=dict(self.figures),
        )

    def effects(self, request_ids: set[str]) -> list[Effect]:
        """Every applied effect of these requests, by the stand-ins' books."""
        applied = []
        for standin in ("ledger", "erp", "mail"):
            applied += list(self.fleet.effects(standin)["effects"].items())
        owner: dict[str, str] = {}
        for _, effect in applied:
            request_id = effect["body"].get("request_id")
            if request_id:
                owner[str(effect["result"]["id"])] = str(request_id)
        found = []
        for key, effect in applied:
            body = effect["body"]
            request_id = body.get("request_id") or next(
                (owner[str(v)] for v in body.values() if str(v) in owner), None
            )
            if request_id in request_ids:
                # A correction notice is a mail too, but a follow-up, not a second send.
                operation = "correction" if "corrects" in body else effect["operation"]
                found.append(Effect(operation, str(request_id), key))
        return found

    # -- helpers for faults ------------------------------------------------------------

    def advance(self, ms: int) -> None:
        topic = clock_topic(self.app_id)
        tick_all(self.patient, topic, last_tick_ms(self.patient, topic) + ms)

    def wait(self, condition: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return True
            time.sleep(0.5)
        return False

    def kill(self, name: str, *, restart: bool = True) -> None:
        with self.supervisor.lock:
            self.fleet.services[name].kill()
            if restart:
                self.fleet.services[name].start()


def _resume(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


@dataclass
class _Lab:
    """What ``latest_records`` and ``rebuild_from_log`` read of a ``TrackerLab``."""

    run: ChaosRun

    @property
    def app_id(self) -> str:
        return self.run.app_id

    @property
    def project(self) -> Project:
        return self.run.project

    @property
    def topic(self) -> str:
        return self.run.topic

    @property
    def codec(self) -> EventCodec:
        return self.run.codec

    @property
    def transitions_topic(self) -> str:
        return self.run.topics.transitions


def _terminal_in(records: dict[str, dict[str, Any]], ids: list[str]) -> bool:
    return all(w in records and records[w]["state"] in TERMINAL for w in ids)
