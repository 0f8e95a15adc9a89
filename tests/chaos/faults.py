"""The faults, each a function run beside a round's workload for ``window_s`` seconds.

Each returns ``(started, ended)`` monotonic times of its injections, from which the
checker measures recovery. Every random choice comes from the round's seeded ``rng``,
so a run is repeated with the same seed.
"""

from __future__ import annotations

import os
import random
import signal
import struct
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from demo.scenario import Plan, Request
from sagalog.contracts.headers import H_WORKFLOW_ID
from sagalog.dead_letters import H_DLQ_AGENT

if TYPE_CHECKING:
    from .harness import ChaosRun
    from .stack import Broker
    from .toxiproxy import Toxiproxy

WORKFLOW_PARTITIONS = 3  # the chaos topology's workflow topic (harness.TOPOLOGY)

AGENTS = (
    "intake_agent",
    "retrieval_agent",
    "risk_agent",
    "budget_agent",
    "purchasing_agent",
    "notification_agent",
)
Injections = list[tuple[float, float]]


def _sleep_until(deadline: float, seconds: float) -> bool:
    """Sleep ``seconds`` unless that passes ``deadline``; False when the window is over."""
    left = deadline - time.monotonic()
    time.sleep(max(0.0, min(seconds, left)))
    return time.monotonic() < deadline


def _every(
    run: ChaosRun,
    rng: random.Random,
    window_s: float,
    gap: tuple[float, float],
    act: Callable[[], None],
    *,
    first: tuple[float, float] = (3.0, 6.0),
    limit: int | None = None,
) -> Injections:
    injections: Injections = []
    deadline = time.monotonic() + window_s
    if not _sleep_until(deadline, rng.uniform(*first)):
        return injections
    while limit is None or len(injections) < limit:
        started = time.monotonic()
        act()
        injections.append((started, time.monotonic()))
        if not _sleep_until(deadline, rng.uniform(*gap)):
            break
    return injections


# -- processes -------------------------------------------------------------------------


def tracker_kill(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """SIGKILL the tracker worker mid-work, and start it again, every 8-15 s."""
    return _every(run, rng, window_s, (8, 15), lambda: run.kill("tracker-a"))


def agent_kill(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """SIGKILL a random agent mid-work, and start it again, every 4-8 s."""
    return _every(run, rng, window_s, (4, 8), lambda: run.kill(rng.choice(AGENTS)))


def rolling_restart(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """A rolling deployment: SIGTERM every agent and then the tracker, one at a time,
    start it again and wait until it answers ``/health/ready`` before the next.

    What each one took goes to the round's figures (``rolling_restart``): seconds to
    exit after SIGTERM, its exit code (0 is the contract's), and seconds from its
    start until ready; ``rolling_restart_verify`` fails the round on another code.
    """
    deadline = time.monotonic() + window_s
    _sleep_until(deadline, rng.uniform(3, 6))
    injections: Injections = []
    taken: dict[str, dict[str, float | int | None]] = {}
    run.figures["rolling_restart"] = taken
    for name in (*AGENTS, "tracker-a"):
        service = run.fleet.services[name]
        with run.supervisor.lock:
            run.supervisor.held.add(name)
        started = time.monotonic()
        service.stop(timeout=90)
        stopped = time.monotonic()
        code = service.process.returncode if service.process is not None else None
        service.start()
        with run.supervisor.lock:
            run.supervisor.held.discard(name)
        ready_s = run.fleet.wait_ready(name, timeout=300)
        injections.append((started, time.monotonic()))
        taken[name] = {
            "exit": code,
            "stop_s": round(stopped - started, 2),
            "ready_s": round(ready_s, 2),
        }
        run.report(f"chaos: rolling restart: {name} {taken[name]}")
    return injections


def rolling_restart_verify(run: ChaosRun, requests: list[Request]) -> list[str]:
    """Every SIGTERM ended in exit 0 (``STOPPED``): the batch finished and committed."""
    taken = run.figures.get("rolling_restart", {})
    missing = [name for name in (*AGENTS, "tracker-a") if name not in taken]
    errors = [f"{name} was not restarted" for name in missing]
    errors += [
        f"{name} exited {figures['exit']} after SIGTERM, not 0"
        for name, figures in taken.items()
        if figures["exit"] != 0
    ]
    return errors


Target = Callable[["ChaosRun", random.Random], "Broker"]
"""Which broker a broker fault hits, asked of the cluster when it strikes."""


def workflow_leader(run: ChaosRun, rng: random.Random) -> Broker:
    """The leader of a random partition of the workflow topic (what the user killed)."""
    return run.stack.leader_of(run.topic, rng.randrange(WORKFLOW_PARTITIONS))


def agent_coordinator(run: ChaosRun, rng: random.Random) -> Broker:
    """The group coordinator of a random agent (what moves under a static member)."""
    module = rng.choice(AGENTS)
    return run.stack.group_coordinator(f"sagalog-agent-{run.fleet.agent_name(module)}")


def broker_kill(
    run: ChaosRun,
    rng: random.Random,
    window_s: float,
    *,
    limit: int | None = None,
    target: Target = workflow_leader,
) -> Injections:
    """SIGKILL a broker (``target``) and start it again (log recovery), every 10-20 s."""

    def act() -> None:
        broker = target(run, rng)
        broker.kill()
        broker.restart()

    return _every(run, rng, window_s, (10, 20), act, limit=limit)


def broker_kill_once(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    return broker_kill(run, rng, window_s, limit=1)


def broker_pause(
    run: ChaosRun, rng: random.Random, window_s: float, *, target: Target = workflow_leader
) -> Injections:
    """SIGSTOP a broker for 5-30 s, then SIGCONT; a broker that hangs rather than dies."""

    def act() -> None:
        broker = target(run, rng)
        broker.pause()
        try:
            time.sleep(rng.uniform(5, 30))
        finally:
            broker.resume()

    return _every(run, rng, window_s, (5, 10), act)


def rebalance_storm(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """Every 5 s start or stop (SIGTERM) a second tracker worker or an agent replica."""
    extra = {
        "tracker-b": lambda: run.fleet.start_tracker("b"),
        "intake_agent-b": lambda: run.fleet.start_agent("intake_agent", "b"),
        "budget_agent-b": lambda: run.fleet.start_agent("budget_agent", "b"),
        "purchasing_agent-b": lambda: run.fleet.start_agent("purchasing_agent", "b"),
    }

    def toggle() -> None:
        name = rng.choice(sorted(extra))
        with run.supervisor.lock:
            service = run.fleet.services.get(name)
            if service is None:
                extra[name]()
                return
            if service.alive:
                run.supervisor.held.add(name)
            else:
                run.supervisor.held.discard(name)
                service.start()
                return
        service.stop()

    injections = _every(run, rng, window_s, (5, 5), toggle, first=(2, 3))
    for name in extra:  # back to one of each
        service = run.fleet.services.get(name)
        if service is not None:
            run.supervisor.held.add(name)
            service.stop()
    return injections


def tracker_pause(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """SIGSTOP tracker worker a past its session (10 s) while worker b runs, so b takes
    a's partitions (and their transactional ids); then SIGCONT a. A batch a froze with
    must be fenced and nothing of it seen: a exits 70 and is restarted by the
    supervisor, or rejoins if it froze between batches."""
    deadline = time.monotonic() + window_s
    with run.supervisor.lock:
        second = run.fleet.services.get("tracker-b")
        if second is None:
            run.fleet.start_tracker("b")
        else:
            run.supervisor.held.discard("tracker-b")
            second.start()
    injections: Injections = []
    _sleep_until(deadline, rng.uniform(8, 12))  # b has joined and shares the partitions
    while time.monotonic() < deadline - 25:
        frozen = run.fleet.services["tracker-a"].process
        if frozen is None or frozen.poll() is not None:
            _sleep_until(deadline, 2)
            continue
        started = time.monotonic()
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            time.sleep(rng.uniform(15, 22))
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        injections.append((started, time.monotonic()))
        _sleep_until(deadline, rng.uniform(4, 8))
    with run.supervisor.lock:
        run.supervisor.held.add("tracker-b")
    run.fleet.services["tracker-b"].stop()
    return injections


def zombie_agent(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """SIGSTOP the budget agent past its transaction timeout and its session; a
    replacement takes its partitions; then SIGCONT the zombie, which must be fenced."""
    deadline = time.monotonic() + window_s
    _sleep_until(deadline, rng.uniform(4, 8))
    zombie = run.fleet.services["budget_agent"]
    assert zombie.process is not None
    started = time.monotonic()
    os.kill(zombie.process.pid, signal.SIGSTOP)
    with run.supervisor.lock:
        replacement = run.fleet.services.get("budget_agent-z")
        if replacement is None:
            run.fleet.start_agent("budget_agent", "z")
        else:
            run.supervisor.held.discard("budget_agent-z")
            replacement.start()
    time.sleep(rng.uniform(25, 35))  # > its transaction timeout (15 s) and session (10 s)
    os.kill(zombie.process.pid, signal.SIGCONT)
    ended = time.monotonic()
    _sleep_until(deadline, window_s)
    run.supervisor.held.add("budget_agent-z")
    run.fleet.services["budget_agent-z"].stop()
    return [(started, ended)]


# -- data ------------------------------------------------------------------------------


def poison(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """Undecodable, headerless, unknown-schema and schema-incompatible records.

    Each is keyed by a workflow of its own, marked with a ``chaos_poison`` header
    (dead-letter records keep the original headers), and must reach the dead-letter
    topic without stalling anything; ``poison_verify`` checks that.
    """
    deadline = time.monotonic() + window_s
    injections: Injections = []
    kinds = ("garbage", "headerless", "unknown_schema", "wrong_schema")
    rounds = 0
    while _sleep_until(deadline, rng.uniform(3, 8)):
        started = time.monotonic()
        for kind in kinds:
            poison_id = f"poison-{kind}-{rounds}-{uuid.uuid4().hex[:6]}"
            run.poison_ids.append(poison_id)
            _send_poison(run, kind, poison_id)
        injections.append((started, time.monotonic()))
        rounds += 1
    run.sender.flush()
    return injections


def _send_poison(run: ChaosRun, kind: str, poison_id: str) -> None:
    workflow_id = f"wf-{poison_id}"
    base = [
        ("ce_specversion", b"1.0"),
        ("ce_id", str(uuid.uuid4()).encode()),
        ("ce_source", b"chaos/poison"),
        ("ce_workflowid", workflow_id.encode()),
        ("ce_time", b"2027-01-15T08:00:00Z"),
        ("chaos_poison", poison_id.encode()),
    ]
    if kind == "garbage":  # no wire-format prefix at all
        headers = [*base, ("ce_type", b"procurement.v1.RequestSubmitted")]
        value = b"\xde\xad\xbe\xef not avro"
    elif kind == "headerless":  # no CloudEvents headers: nobody can route it
        headers = [("chaos_poison", poison_id.encode())]
        value = b"\x00\x00\x00\x00\x01garbage"
    elif kind == "unknown_schema":  # the wire format, a schema id the registry never issued
        headers = [*base, ("ce_type", b"sagalog.v1.StepFailed")]
        value = b"\x00" + struct.pack(">I", 987_654) + b"\x02\x04ab"
    else:  # a registered schema, but not the one its type says: RequestSubmitted as GateDecided
        request = {
            "request_id": "PR-poison",
            "requester": "eve@example.com",
            "department": "it",
            "title": "poison",
            "description": "a RequestSubmitted dressed as a GateDecided",
            "amount": "1.00",
            "currency": "EUR",
            "vendor": "Acme",
            "submitted_at": "2027-01-15T08:00:00Z",
        }
        from sagalog.contracts.validation import to_avro_datum

        event_type = "procurement.v1.RequestSubmitted"
        datum = to_avro_datum(run.catalog[event_type].definition, request, event_type=event_type)
        headers = [*base, ("ce_type", b"sagalog.v1.GateDecided")]
        value = run.codec.encode(run.topic, event_type, datum)
    run.sender.raw(key=workflow_id.encode(), value=value, headers=headers)


def poison_verify(run: ChaosRun, requests: list[Request]) -> list[str]:
    """Every poison record reached the dead-letter topic (kept headers name it)."""
    run.wait(lambda: not _undead(run), 60)
    missing = _undead(run)
    return [f"{len(missing)} poison records never dead-lettered: {missing[:4]}"] if missing else []


def _undead(run: ChaosRun) -> list[str]:
    lettered = {h.get("chaos_poison") for h in run.recorder.deadletters()}
    return [p for p in run.poison_ids if p not in lettered]


# -- dependencies and time ----------------------------------------------------------------


def compensation_flaky(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """The ledger's release (the compensation) fails half the time for a minute."""
    time.sleep(1)
    started = time.monotonic()
    run.fleet.faults(
        "ledger", fail_ratio=0.5, fail_operations=["release"], seed=rng.randrange(1 << 30)
    )
    time.sleep(max(window_s - 1, 60))
    run.fleet.faults("ledger", fail_ratio=0.0, fail_operations=[])
    return [(started, time.monotonic())]


def ledger_outage(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """The ledger is down (every call 503) for a minute while workflows wait on it, at
    the agents' default retry and breaker settings (issue 21): they wait, never fail."""
    time.sleep(max(1.0, rng.uniform(1.0, 3.0)))
    started = time.monotonic()
    run.fleet.faults("ledger", outage=True)
    time.sleep(max(window_s, 60))
    run.fleet.faults("ledger", outage=False)
    return [(started, time.monotonic())]


def ledger_outage_verify(run: ChaosRun, requests: list[Request]) -> list[str]:
    """The budget agent (the ledger's caller) dead-lettered nothing of this round's
    workflows, and no reservation failed. Other dead letters are the mix's own (the
    FAIL plan's vendor refuses orders) or an earlier round's: the recorder keeps every
    dead letter of the run, and the poison round's have no workflow at all."""
    ours = {r.workflow_id for r in requests}
    lettered = [
        h
        for h in run.recorder.deadletters()
        if h.get(H_DLQ_AGENT, "").startswith("budget-agent") and h.get(H_WORKFLOW_ID) in ours
    ]
    failed = [
        r.workflow_id
        for r in requests
        for e in run.recorder.events(r.workflow_id, "sagalog.v1.StepFailed")
        if e.get("step") == "reserve_budget"
    ]
    problems = []
    if lettered:
        problems.append(f"the budget agent dead-lettered {len(lettered)} record(s) in the outage")
    if failed:
        problems.append(f"reserve_budget failed for {failed[:4]}: an outage must only wait")
    return problems


def clock_jump(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """Timers across tracker restarts: kill the tracker, jump the clock a day (the
    gates escalate), start it; kill it again, jump past the gates' deadline (the
    unanswered ones take their default), start it."""
    requests = run.current
    waiting = [r.workflow_id for r in requests if r.plan in (Plan.ESCALATE, Plan.EXPIRE)]
    others = [r.workflow_id for r in requests if r.workflow_id not in waiting]
    escalate = [r.workflow_id for r in requests if r.plan is Plan.ESCALATE]

    def settled(ids: list[str], state: str | None) -> bool:
        states = run.recorder.states(ids)
        if state is None:
            return all(
                s in ("completed", "compensated", "failed", "timed_out") for s in states.values()
            )
        return all(s == state for s in states.values())

    injections: Injections = []
    time.sleep(window_s * 0.5)
    run.wait(lambda: settled(waiting, "pending_approval") and settled(others, None), 300)
    for hours, then in (
        (25, lambda: escalated(run, waiting)),
        (48, lambda: settled(escalate, None)),
    ):
        started = time.monotonic()
        with run.supervisor.lock:
            run.supervisor.held.add("tracker-a")
            run.fleet.services["tracker-a"].kill()
        run.advance(hours * 3_600_000)
        with run.supervisor.lock:
            run.supervisor.held.discard("tracker-a")
            run.fleet.services["tracker-a"].start()
        injections.append((started, time.monotonic()))
        run.wait(then, 240)
    return injections


def escalated(run: ChaosRun, ids: list[str]) -> bool:
    """Every one of ``ids`` has had its gate escalated at least once."""
    return all(
        any(
            int(e.get("escalation_level") or 0) >= 1
            for e in run.recorder.events(w, "sagalog.v1.GateOpened")
        )
        for w in ids
    )


def clock_jump_verify(run: ChaosRun, requests: list[Request]) -> list[str]:
    """One escalation per waiting gate, one default decision per expired gate."""
    failures = []
    for request in requests:
        if request.plan not in (Plan.ESCALATE, Plan.EXPIRE):
            continue
        opened = run.recorder.events(request.workflow_id, "sagalog.v1.GateOpened")
        escalations = {e["id"] for e in opened if int(e.get("escalation_level") or 0) == 1}
        if len(escalations) != 1:
            failures.append(f"{request.workflow_id}: {len(escalations)} escalations, not 1")
        if request.plan is Plan.EXPIRE:
            decided = run.recorder.events(request.workflow_id, "sagalog.v1.GateDecided")
            defaults = {e["id"] for e in decided if "deadline" in str(e.get("decided_by"))}
            if len(defaults) != 1:
                failures.append(f"{request.workflow_id}: {len(defaults)} default decisions, not 1")
    return failures


# -- the network (through the chaos stack's Toxiproxy) ------------------------------------


def _proxy(run: ChaosRun) -> Toxiproxy:
    proxy = run.stack.proxy
    if proxy is None:
        raise RuntimeError(
            "the network rounds need the one-broker stack behind Toxiproxy "
            "(ChaosStack(network_faults=True), as python -m chaos starts it)"
        )
    return proxy


def network_delay_loss(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """Every client-broker byte delayed 50-400 ms for 8-15 s at a time, and about one
    connection in 20-50 reset every second meanwhile."""
    proxy = _proxy(run)

    def act() -> None:
        proxy.delay(rng.uniform(50, 250), rng.uniform(0, 150))
        try:
            until = time.monotonic() + rng.uniform(8, 15)
            while time.monotonic() < until:
                proxy.reset_some(rng.uniform(0.02, 0.05))
                time.sleep(0.8)
        finally:
            proxy.heal()

    return _every(run, rng, window_s, (3, 6), act, first=(2, 4))


def network_blackhole(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """Nothing passes between the clients and the broker for 10-25 s, then everything does."""
    proxy = _proxy(run)

    def act() -> None:
        proxy.blackhole()
        try:
            time.sleep(rng.uniform(10, 25))
        finally:
            proxy.heal()

    return _every(run, rng, window_s, (8, 12), act)


def redeliver(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """Deliver again, shuffled, records already in the log: the same bytes and event ids
    (what a producer retry or a replayed batch looks like), late and out of order."""

    def act() -> None:
        seen = run.recorder.raw([r.workflow_id for r in run.current])
        for key, value, headers in rng.sample(seen, min(len(seen), 15)):
            run.sender.raw(key=key, value=value, headers=list(headers or []))
        run.sender.flush(30)

    return _every(run, rng, window_s, (2, 4), act)
