"""The full-disk rounds (issue 50): a broker's log directory, the tracker's and an
agent's RocksDB directory, each on a small tmpfs (``disks.SmallDisk``) filled
under load, held full, then freed.

The disks are mounted before their writers start (``DiskRun.mount_*``), so the
rounds need a stack and a fleet of their own: ``python -m chaos --disks`` and
``test_chaos_disks.py`` build both, on the single-broker chaos stack (one broker:
the point is what a full volume does to the writer on it, and the three-broker
stack lives in namespaces whose addresses another session owns).

What each round must show, besides the checker's zeros:
- broker: no acknowledged write lost, and the platform going on once space
  returns (the broker, which Kafka halts when its only log directory fails, is
  started again by the round, as an orchestrator would; that restart is in the
  row's figures, not in ``exits``, which counts the fleet's services);
- tracker, agent: the service's ``/health/ready`` names the full directory while
  the disk is full, and says ``ok`` again by itself once space returns, with no
  exit (``max_exits=0``): the service waits, it does not crash.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demo.scenario import Request

from .checker import RoundResult
from .disks import SmallDisk
from .harness import Fault

if TYPE_CHECKING:
    from .harness import ChaosRun
    from .stack import ChaosStack

Injections = list[tuple[float, float]]

DISK_MB = {"broker": 256, "tracker": 96, "agent": 64}
AGENT = "budget_agent"  # the agent with effects: its ledger writes are synced
FULL_S = 40.0
"""How long each disk stays full: past the tracker's stall watch (20 s)."""


@dataclass
class DiskRun:
    """The small disks of one run, mounted before the stack and the fleet start."""

    disks: dict[str, SmallDisk] = field(default_factory=dict)

    def mount_broker(self, stack: ChaosStack) -> SmallDisk:
        node = stack.stack.nodes[0]
        path = stack.stack.layout.data_dir(component=node.component)
        return self._mount("broker", path)

    def mount_fleet(self, run_dir: Path) -> None:
        """The tracker's and the agent's data directories, as the fleet names them."""
        data = run_dir / "fleet" / "data"
        self._mount("tracker", data / "tracker-a")
        self._mount("agent", data / f"{AGENT}-a")

    def _mount(self, role: str, path: Path) -> SmallDisk:
        disk = SmallDisk(f"{path.parent.parent.parent.name[-12:]}-{role}", path, DISK_MB[role])
        self.disks[role] = disk.mount()
        return disk

    def unmount(self) -> None:
        for disk in self.disks.values():
            disk.free()
            disk.unmount()


@dataclass
class HealthWatch:
    """Reads a service's ``/health/ready`` every second while a round runs."""

    url: str
    seen: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> HealthWatch:
        threading.Thread(target=self._run, name="disk-health", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.seen.append((time.monotonic(), *_get(f"{self.url}/health/ready")))


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, json.loads(reply.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, {}
    except (OSError, ValueError) as exc:
        return 0, {"unreachable": repr(exc)[:120]}


def _disks(run: ChaosRun) -> DiskRun:
    disks: DiskRun | None = getattr(run, "disks", None)
    if disks is None:
        raise RuntimeError("the full-disk rounds need a run whose disks are mounted (DiskRun)")
    return disks


def broker_disk_full(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    """Fill the broker's log directory, hold it full, free it; start the broker
    again if Kafka halted it (its only log directory failed)."""
    disk = _disks(run).disks["broker"]
    time.sleep(rng.uniform(3, 6))
    started = time.monotonic()
    disk.fill()
    time.sleep(FULL_S)
    disk.free()
    freed = time.monotonic()
    broker = run.stack.brokers()[0]
    halted = run.stack.stack._supervisor.our_record(run.stack.node(1).component) is None
    run.figures["broker halted"] = halted
    if halted:
        run.figures["broker restart s"] = round(broker.restart(), 1)
    run.figures["freed at s"] = round(freed - started, 1)
    return [(started, time.monotonic())]


def _service_disk_full(run: ChaosRun, rng: random.Random, role: str, service: str) -> Injections:
    disk = _disks(run).disks[role]
    watch = HealthWatch(run.fleet.health[service]).start()
    run.figures["_watch"] = watch
    run.figures["_disk"] = disk
    time.sleep(rng.uniform(4, 7))
    started = time.monotonic()
    disk.fill()
    time.sleep(FULL_S)
    disk.free()
    freed = time.monotonic()
    run.figures["_freed"] = freed
    run.figures["_filled"] = started
    return [(started, freed)]


def tracker_disk_full(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    return _service_disk_full(run, rng, "tracker", "tracker-a")


def agent_disk_full(run: ChaosRun, rng: random.Random, window_s: float) -> Injections:
    return _service_disk_full(run, rng, "agent", AGENT)


def service_health_verify(run: ChaosRun, requests: list[Request]) -> list[str]:
    """While full, ``/health/ready`` named the full directory; after, it said ok."""
    watch: HealthWatch = run.figures.pop("_watch")
    disk: SmallDisk = run.figures.pop("_disk")
    filled, freed = run.figures.pop("_filled"), run.figures.pop("_freed")
    run.wait(lambda: bool(watch.seen) and _healthy(watch.seen[-1]), 120)
    watch.stop()
    path = str(disk.path)
    named = [t for t, _, body in watch.seen if filled <= t and path in json.dumps(body)]
    healthy_after = [t for t, code, body in watch.seen if t > freed and _healthy((t, code, body))]
    unhealthy_full = [t for t, code, body in watch.seen if filled <= t <= freed and code != 200]
    run.figures["named path after s"] = round(named[0] - filled, 1) if named else None
    run.figures["unhealthy while full"] = len(unhealthy_full)
    run.figures["healthy after free s"] = (
        round(healthy_after[0] - freed, 1) if healthy_after else None
    )
    bodies = {json.dumps(body)[:300] for t, _, body in watch.seen if filled <= t <= freed}
    run.figures["bodies while full"] = sorted(bodies)[:3]
    failures = []
    if not named:
        failures.append(f"/health/ready never named {path} while it was full")
    if not unhealthy_full:
        failures.append("/health/ready answered 200 all the while the disk was full")
    if not healthy_after:
        failures.append(f"/health/ready not ok within 120 s of freeing {path}")
    return failures


def _healthy(seen: tuple[float, int, dict[str, Any]]) -> bool:
    _, code, body = seen
    return code == 200 and body.get("status") == "ok"


DISKS = (
    Fault("broker log dir full", broker_disk_full, window_s=50, workflows=30, max_exits=0),
    Fault(
        "tracker RocksDB dir full",
        tracker_disk_full,
        window_s=50,
        workflows=30,
        max_exits=0,
        verify=service_health_verify,
    ),
    Fault(
        "agent RocksDB dir full",
        agent_disk_full,
        window_s=50,
        workflows=30,
        max_exits=0,
        verify=service_health_verify,
    ),
)

COLUMNS = (
    ("fault", "fault", 26),
    ("workflows", "workflows", 9),
    ("lost", "lost", 5),
    ("dup effects", "duplicated_effects", 11),
    ("stuck", "stuck", 5),
    ("illegal", "illegal_transitions", 7),
    ("rebuild≠live", "rebuild_mismatches", 12),
    ("exits", "exits", 5),
    ("recovery s", "recovery_s", 10),
    ("named path s", "named path after s", 12),
    ("ok after free s", "healthy after free s", 15),
    ("broker halted", "broker halted", 13),
    ("ok", "ok", 4),
)


def open_disk_run(
    stack: ChaosStack, run_dir: Path, *, seed: int, report: Callable[[str], None] = print
) -> tuple[ChaosRun, Callable[[], None]]:
    """Mount the small disks, start ``stack`` and the fleet on them; the run and a
    ``stop`` that stops both and unmounts (called here too when the start fails)."""
    from .harness import ChaosRun

    disks = DiskRun()
    run: ChaosRun | None = None

    def stop() -> None:
        try:
            if run is not None:
                run.close()
        finally:
            try:
                stack.down()
            finally:
                disks.unmount()

    try:
        disks.mount_broker(stack)
        report(f"chaos: own stack on {stack.stack.bootstrap_servers} ready in {stack.up():.1f}s")
        run = ChaosRun(stack, run_dir, seed=seed, report=report)
        disks.mount_fleet(run.work_dir)
        run.disks = disks  # type: ignore[attr-defined]
        run.setup()
    except BaseException:
        stop()
        raise
    return run, stop


def run_disk_suite(
    work_dir: Path,
    *,
    seed: int | None = None,
    only: Sequence[str] = (),
    report: Callable[[str], None] = print,
) -> tuple[int, list[RoundResult]]:
    """The full-disk rounds on a stack and a fleet of their own (``open_disk_run``)."""
    from .stack import DEFAULT_PORTS, ChaosStack
    from .suite import run_rounds

    seed = seed if seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    report(f"chaos: seed {seed} (rerun with --disks --seed {seed}); work dir {work_dir}")
    ports = {
        name: int(os.environ.get(f"SAGALOG_CHAOS_{name.upper()}", default))
        for name, default in DEFAULT_PORTS.items()
        if name != "proxy_port"
    }
    # No Toxiproxy: the rounds cut no network.
    stack = ChaosStack(state_dir=work_dir / "stack", network_faults=False, **ports)
    run, stop = open_disk_run(stack, work_dir / f"run-{seed}", seed=seed, report=report)
    try:
        return seed, run_rounds(run, DISKS, only=only, report=report)
    finally:
        stop()
