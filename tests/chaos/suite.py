"""The chaos suites (full and short), the results table and ``chaos-results.json``."""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from external_tools import under_ci

from . import clock_rounds, faults, wall_clock
from .checker import RoundResult
from .harness import ChaosRun, Fault
from .herd import ThunderingHerd
from .stack import ChaosStack

# 2,000 workflows stalled on the ledger, three budget agents sharing 40 calls/s.
HERD = ThunderingHerd(rate=40.0, instances=("a", "b", "c"))

# A rolling deployment of every agent and the tracker while 1,000 workflows run.
ROLLING = Fault(
    "rolling restart",
    faults.rolling_restart,
    window_s=120,
    workflows=1000,
    max_exits=0,
    verify=faults.rolling_restart_verify,
    settle_s=600,
)

# A tracker worker frozen through a rebalance and thawed: its batch must be fenced.
PAUSED_TRACKER = Fault("tracker SIGSTOP (fenced)", faults.tracker_pause, window_s=55, workflows=30)

# The tracker's wall clock +1 h, then back 10 min, under load (libfaketime).
WALL_CLOCK = clock_rounds.WallClockJumps()
CLOCK_JUMPS = Fault(
    "tracker wall clock +1 h, -10 min",
    WALL_CLOCK.inject,
    window_s=40,
    workflows=50,
    timers=True,
    verify=WALL_CLOCK.verify,
    prepare=WALL_CLOCK.prepare,
    unavailable=wall_clock.unavailable,
)

FULL = (
    Fault("tracker SIGKILL", faults.tracker_kill, window_s=45, workflows=40),
    Fault("agent SIGKILL", faults.agent_kill, window_s=45, workflows=40),
    Fault("broker SIGKILL + restart", faults.broker_kill, window_s=60, workflows=40, max_exits=0),
    Fault("broker SIGSTOP 5-30 s", faults.broker_pause, window_s=60, workflows=40, max_exits=0),
    Fault("rebalance storm", faults.rebalance_storm, window_s=45, workflows=40),
    Fault("zombie agent", faults.zombie_agent, window_s=50, workflows=30),
    PAUSED_TRACKER,
    ROLLING,
    Fault("poison events", faults.poison, window_s=30, workflows=30, verify=faults.poison_verify),
    Fault("duplicated + reordered delivery", faults.redeliver, window_s=40, workflows=30),
    Fault("network delay + loss (proxy)", faults.network_delay_loss, window_s=45, workflows=30),
    Fault("network blackhole (proxy)", faults.network_blackhole, window_s=45, workflows=30),
    Fault("compensation fails 50%", faults.compensation_flaky, window_s=60, workflows=40),
    Fault(
        "ledger down 60 s",
        faults.ledger_outage,
        window_s=60,
        workflows=50,
        verify=faults.ledger_outage_verify,
    ),
    Fault(
        "timers + restart + clock jump",
        faults.clock_jump,
        window_s=20,
        workflows=30,
        timers=True,
        verify=faults.clock_jump_verify,
    ),
    CLOCK_JUMPS,
    Fault(
        "thundering herd",
        HERD.inject,
        window_s=50,
        workflows=2000,
        verify=HERD.verify,
        mix=HERD.mix,
        settle_s=600,  # 2,000 reservations at 40/s, then gates, orders and releases
    ),
)

SHORT = (
    Fault("tracker SIGKILL", faults.tracker_kill, window_s=25, workflows=20),
    Fault("agent SIGKILL", faults.agent_kill, window_s=20, workflows=20),
    Fault(
        "broker SIGKILL + restart",
        faults.broker_kill_once,
        window_s=20,
        workflows=20,
        max_exits=0,
    ),
    Fault("poison events", faults.poison, window_s=12, workflows=12, verify=faults.poison_verify),
)

COLUMNS = (
    ("fault", "fault", 30),
    ("workflows", "workflows", 9),
    ("lost", "lost", 5),
    ("dup effects", "duplicated_effects", 11),
    ("stuck", "stuck", 5),
    ("illegal", "illegal_transitions", 7),
    ("rebuild≠live", "rebuild_mismatches", 12),
    ("recovery s", "recovery_s", 10),
    ("exits", "exits", 5),
    ("gw reads ok", "gateway_reads_ok", 12),
    ("dep 1s peak", "dependency_peak", 11),
    ("p50 hi/norm s", "p50_high_normal", 13),
    ("ok", "ok", 4),
)
"""A column's key is a row's field or one of its ``figures`` (a fault's own measurements)."""


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, int]] = COLUMNS) -> str:
    lines = [" ".join(title.ljust(width) for title, _, width in columns)]
    lines.append(" ".join("-" * width for _, _, width in columns))
    for row in rows:
        cells = []
        for _, key, width in columns:
            value = row[key] if key in row else (row.get("figures") or {}).get(key)
            text = (
                "-"
                if value is None
                else ("yes" if value is True else "NO" if value is False else str(value))
            )
            cells.append(text[:width].ljust(width))
        lines.append(" ".join(cells))
    return "\n".join(lines)


def run_suite(
    suite: Sequence[Fault],
    *,
    work_dir: Path,
    seed: int | None = None,
    only: Sequence[str] = (),
    report: Callable[[str], None] = print,
    keep_stack: bool = False,
    brokers: int = 1,
    stack: ChaosStack | None = None,
) -> tuple[int, list[RoundResult]]:
    """Start the chaos stack and fleet, run each fault's round, stop everything.

    ``brokers=3`` runs them on a three-broker cluster (``cluster.py``'s rounds).
    A ``stack`` given (the tests' shared one) is used and left running.
    Returns the seed and one result per fault.
    """
    seed = seed if seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    report(f"chaos: seed {seed} (rerun with --seed {seed}); work dir {work_dir}")
    keep_stack = keep_stack or stack is not None
    stack = stack or ChaosStack.from_env(work_dir / "stack", brokers=brokers)
    if not keep_stack:
        stack_running = stack.stack.status().kafka.state.value == "running"
        if not stack_running:
            shutil.rmtree(work_dir / "stack", ignore_errors=True)
            stack = ChaosStack.from_env(work_dir / "stack", brokers=brokers)
    report(f"chaos: own stack on {stack.stack.bootstrap_servers} ready in {stack.up():.1f}s")
    run = ChaosRun(stack, work_dir / f"run-{seed}", seed=seed)
    try:
        started = time.monotonic()
        run.setup()
        report(f"chaos: fleet up in {time.monotonic() - started:.0f}s")
        results = run_rounds(run, suite, only=only, report=report)
    finally:
        try:
            run.close()
        finally:
            if not keep_stack:
                stack.down()
    return seed, results


def run_rounds(
    run: ChaosRun,
    suite: Sequence[Fault],
    *,
    only: Sequence[str] = (),
    report: Callable[[str], None] = print,
) -> list[RoundResult]:
    """Each fault's round on a fleet already up; one result per round run."""
    results = []
    for fault in suite:
        if only and not any(o.lower() in fault.name.lower() for o in only):
            continue
        missing = fault.unavailable() if fault.unavailable is not None else None
        if missing is not None:
            if under_ci():
                report(f"chaos: {fault.name}: FAILED, cannot run under CI: {missing}")
                results.append(_not_run(fault, run.seed, missing))
            else:
                report(f"chaos: {fault.name}: skipped: {missing}")
            continue
        report(f"chaos: {fault.name}: {fault.workflows} workflows, {fault.window_s:g}s of faults…")
        result = run.round(fault)
        results.append(result)
        verdict = "ok" if result.ok else "FAILED: " + "; ".join(result.failures)
        report(
            f"chaos: {fault.name}: {result.ended_as_planned}/{result.workflows} as planned, "
            f"{result.details.get('seconds')}s, {verdict}"
        )
    return results


def _not_run(fault: Fault, seed: int, why: str) -> RoundResult:
    return RoundResult(
        fault=fault.name,
        seed=seed,
        workflows=0,
        ended_as_planned=0,
        lost=0,
        duplicated_effects=0,
        stuck=0,
        illegal_transitions=0,
        rebuild_mismatches=0,
        recovery_s=None,
        failures=[f"not run: {why}"],
    )


def write_results(path: Path, seed: int, results: Sequence[RoundResult]) -> None:
    path.write_text(
        json.dumps(
            {"seed": seed, "ok": all(r.ok for r in results), "rows": [r.row() for r in results]},
            indent=2,
            default=str,
        )
        + "\n"
    )
