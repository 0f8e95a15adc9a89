"""Network partitions on the three-broker cluster in namespaces: ``python -m chaos --netns``.

Each broker runs in a network namespace of its own (``netns.py``, ``stack.py``); the
fleet, the registry and the harness stay in the machine's namespace and reach every
broker all along. The rounds cut links with iptables inside the namespaces (Jepsen's
``partition`` nemesis), each under the reference workflow's load, each judged by the
usual checker plus its own figures:

- ``leader_isolated``: the broker that leads a partition of the workflow topic is
  cut off from the other two brokers,
  and so from the controller quorum (every node is broker and controller), while
  clients still reach it; healed after ``hold_s``. Its leadership must move to the
  majority side (it is fenced when its heartbeats stop), and nothing it acknowledged
  may be lost when it rejoins and truncates.
- ``bridge``: two brokers each see the third but not each other (Jepsen's
  ``bridge``), healed after ``hold_s``; the third may lead the quorum for both.
- ``lossy``: 200 ms delay and 5 % loss on every link, both ways, for the window
  (2 minutes): iptables' statistic match drops, netem or a delay line delays
  (``netns.Network.delay``: this machine's kernel has no netem).
- ``tracker_cut_off`` (fencing): tracker worker a, in a namespace of its own
  (``TRACKER``), is cut off from every broker for 60 s while worker b runs; b takes
  a's partitions over when a's session ends (initializing their transactional ids,
  which fences a). After the healing, nothing a still held may be written: the
  partitions' logs, read from a replica's segments, and the transitions topic are
  checked for it (``fencing_check``). a may exit once (70, fenced or stalled), which
  the round expects; nothing else may exit.

The healing is the fault's end (the checker's recovery is measured from it); the
round then waits until every partition has its three in-sync replicas again.
"""

from __future__ import annotations

import random
import re
import subprocess
import time
from typing import TYPE_CHECKING

from . import faults
from .cluster import (
    _open_workflows,
    cluster_verify,
    first_progress_after,
    longest_stall,
    replicas_of,
    wait_isr_full,
)
from .fencing_check import parse_dump, takeovers, transition_breaks, written_after_fencing
from .harness import Fault
from .netns import Network

if TYPE_CHECKING:
    from demo.scenario import Request

    from .fencing_check import LogBatch
    from .harness import ChaosRun

BROKERS = ("kafka-1", "kafka-2", "kafka-3")
TRACKER = "tracker-a"
"""The tracker worker the fencing round cuts off: it runs in the network's host of
that name (``ChaosRun.placed``), so iptables in its namespace can cut it."""
HOSTS = (*BROKERS, TRACKER)
"""The hosts of ``python -m chaos --netns``: the brokers and the fencing round's tracker."""
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
LOSS = 0.05
DELAY_MS = 200.0


def _network(run: ChaosRun) -> Network:
    network = run.stack.network
    if network is None:
        raise RuntimeError(
            "the partition rounds need the brokers in namespaces: "
            "python -m chaos --netns (ChaosStack(network=...))"
        )
    return network


def _leaders(run: ChaosRun) -> dict[int, int]:
    try:
        return {p: leader for p, (leader, _, _) in replicas_of(run.stack, run.topic).items()}
    except Exception as exc:  # the metadata may not answer mid-partition
        return {-1: -1, -2: len(repr(exc))}


def _hold(
    run: ChaosRun,
    rng: random.Random,
    window_s: float,
    *,
    cut: list[tuple[str, str]],
    hold_s: float,
) -> faults.Injections:
    """Cut these links 3-6 s into the window, watch the leaders, heal after ``hold_s``."""
    network = _network(run)
    deadline = time.monotonic() + window_s
    faults._sleep_until(deadline, rng.uniform(3, 6))
    run.figures["open_at_cut"] = _open_workflows(run)
    run.figures["controller_before"] = run.stack.controller()
    cut_at = time.monotonic()
    for a, b in cut:
        network.cut(a, b)
    seen: list[dict[int, int]] = []
    while time.monotonic() < cut_at + hold_s:
        leaders = _leaders(run)
        if not seen or seen[-1] != leaders:
            seen.append(leaders)
        time.sleep(1)
    run.figures["controller_during"] = run.stack.controller()
    run.figures["leaders_seen"] = seen[:6]
    run.figures["moved_while_cut"] = any(cut_at <= t for t in run.recorder.progress_at())
    network.heal()
    healed = time.monotonic()
    isr_s, partitions = wait_isr_full(run.stack, healed)
    run.figures["isr_full_s"] = isr_s
    run.figures["partitions"] = partitions
    run.figures["progress_after_heal_s"] = first_progress_after(run, healed, timeout=30)
    run.figures["longest_stall_s"] = longest_stall(run.recorder.progress_at(), cut_at)
    run.figures["cut_s"] = round(healed - cut_at, 1)
    faults._sleep_until(deadline, window_s)
    return [(cut_at, healed)]


def leader_isolated(
    run: ChaosRun, rng: random.Random, window_s: float, *, hold_s: float = 30
) -> faults.Injections:
    """The leader of a workflow partition cut off from both other brokers (and the
    quorum) while every client still reaches it; healed after ``hold_s``.

    The leader now, by the metadata: arranging one that leads every partition
    (``cluster.make_preferred_leader``) runs Kafka's CLIs, which took over a minute on
    a loaded machine, and the round's load was over before the cut.
    """
    partition = rng.randrange(faults.WORKFLOW_PARTITIONS)
    victim = run.stack.leader_of(run.topic, partition).node_id
    led = sorted(p for p, leader in _leaders(run).items() if leader == victim)
    others = [b for b in BROKERS if b != f"kafka-{victim}"]
    run.figures.update(victim=f"kafka-{victim}", led=f"{run.topic.split('.')[0]}:{led}")
    run.report(f"chaos: isolating kafka-{victim} (leads {run.topic} {led}) from {others}")
    return _hold(run, rng, window_s, cut=[(f"kafka-{victim}", o) for o in others], hold_s=hold_s)


def bridge(
    run: ChaosRun, rng: random.Random, window_s: float, *, hold_s: float = 30
) -> faults.Injections:
    """Two brokers cut off from each other; each still sees the third (the bridge)."""
    middle = rng.choice(BROKERS)
    a, b = (x for x in BROKERS if x != middle)
    run.figures.update(victim=f"{a}|{b}", led=f"bridge {middle}")
    run.report(f"chaos: bridge: {a} and {b} cut apart, both see {middle}")
    return _hold(run, rng, window_s, cut=[(a, b)], hold_s=hold_s)


def lossy(run: ChaosRun, rng: random.Random, window_s: float) -> faults.Injections:
    """200 ms delay and 5 % loss on every link, both ways, for the whole window."""
    network = _network(run)
    deadline = time.monotonic() + window_s
    faults._sleep_until(deadline, rng.uniform(1, 3))
    started = time.monotonic()
    network.lose(LOSS)
    how = network.delay(DELAY_MS)
    run.figures.update(victim="all", led=f"{LOSS:.0%} loss, {DELAY_MS:g} ms ({how})")
    faults._sleep_until(deadline, window_s)
    network.heal()
    healed = time.monotonic()
    isr_s, partitions = wait_isr_full(run.stack, healed)
    run.figures.update(isr_full_s=isr_s, partitions=partitions, cut_s=round(healed - started, 1))
    run.figures["longest_stall_s"] = longest_stall(run.recorder.progress_at(), started)
    return [(started, healed)]


ASSIGNED = re.compile(r"partitions assigned: \[([\d, ]*)\]")


def assigned(run: ChaosRun, worker: str) -> list[int] | None:
    """The workflow partitions ``worker`` (``tracker-a``) last said it was assigned
    (its log's ``partitions assigned: [...]``); None before its first assignment.

    The worker's own account: the group's description, asked of the brokers, lags
    each rebalance and answered an empty assignment mid-rebalance.
    """
    service = run.fleet.services.get(worker)
    if service is None or not service.log.exists():
        return None
    found = ASSIGNED.findall(service.log.read_text(errors="replace"))
    return [int(p) for p in found[-1].split(",") if p.strip()] if found else None


def _shared(run: ChaosRun) -> bool:
    """Both workers hold workflow partitions, between them all of them."""
    a, b = assigned(run, TRACKER), assigned(run, "tracker-b")
    return bool(a) and bool(b) and sorted((a or []) + (b or [])) == [0, 1, 2]


def second_tracker(run: ChaosRun) -> None:
    """Start tracker worker b and wait until a and b share the workflow partitions."""
    with run.supervisor.lock:
        second = run.fleet.services.get("tracker-b")
        if second is None:
            run.fleet.start_tracker("b")
        else:
            run.supervisor.held.discard("tracker-b")
            second.start()
    started = time.monotonic()
    run.figures["shared"] = run.wait(lambda: _shared(run), 400)
    run.figures["b_ready_s"] = round(time.monotonic() - started, 1)


def tracker_cut_off(
    run: ChaosRun, rng: random.Random, window_s: float, *, hold_s: float = 60
) -> faults.Injections:
    """Tracker worker a cut off from every broker for ``hold_s`` while worker b runs.

    b was started before the load (``second_tracker``), and a and b share the
    workflow partitions; the cut comes 5-10 s into the load. a's
    restart, should it exit during the cut, waits for the healing (the supervisor
    holds it): a worker started into the same cut could not even start, and an
    orchestrator would back off likewise. b is stopped at the end of the window.
    """
    network = _network(run)
    if TRACKER not in network.hosts:
        raise RuntimeError(
            f"the fencing round needs {TRACKER} in a namespace: Network(partitions.HOSTS)"
        )
    address = network[TRACKER].address
    deadline = time.monotonic() + window_s
    faults._sleep_until(deadline, rng.uniform(5, 10))  # into the load
    held = assigned(run, TRACKER) or []
    run.figures.update(victim=TRACKER, led=f"{run.topic.split('.')[0]}:{held}")
    run.figures["open_at_cut"] = _open_workflows(run)
    run.report(f"chaos: cutting {TRACKER} ({address}, holds {held}) off from {list(BROKERS)}")
    with run.supervisor.lock:
        run.supervisor.held.add(TRACKER)
    cut_at, run.figures["cut_ms"] = time.monotonic(), int(time.time() * 1000)
    network.isolate(TRACKER, BROKERS)
    taken: float | None = None
    try:
        while time.monotonic() < cut_at + hold_s:
            if taken is None and assigned(run, "tracker-b") == [0, 1, 2]:
                taken = round(time.monotonic() - cut_at, 1)
                run.report(f"chaos: tracker-b holds every workflow partition after {taken}s")
            time.sleep(1)
    finally:
        network.heal()
        healed, run.figures["healed_ms"] = time.monotonic(), int(time.time() * 1000)
        seen_by_a = _log_size(run, TRACKER)
        with run.supervisor.lock:
            run.supervisor.held.discard(TRACKER)
    run.figures.update(takeover_s=taken, cut_s=round(healed - cut_at, 1))
    run.figures["moved_while_cut"] = any(cut_at <= t < healed for t in run.recorder.progress_at())
    run.figures["progress_after_heal_s"] = first_progress_after(run, healed, timeout=30)
    back = run.wait(lambda: "partitions assigned" in _log_since(run, TRACKER, seen_by_a), 120)
    run.figures["a_back_s"] = round(time.monotonic() - healed, 1) if back else None
    run.figures["longest_stall_s"] = longest_stall(run.recorder.progress_at(), cut_at)
    faults._sleep_until(deadline, window_s)
    with run.supervisor.lock:
        run.supervisor.held.add("tracker-b")
    run.fleet.services["tracker-b"].stop()
    return [(cut_at, healed)]


def _log_size(run: ChaosRun, worker: str) -> int:
    log = run.fleet.services[worker].log
    return log.stat().st_size if log.exists() else 0


def _log_since(run: ChaosRun, worker: str, offset: int) -> str:
    with run.fleet.services[worker].log.open("rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")


def log_batches(run: ChaosRun, broker: str = "kafka-1") -> list[LogBatch]:
    """Every batch of the round's topics (the run's suffix) in one replica's segments."""
    stack = run.stack.stack
    data = stack.layout.data_dir(component=broker)
    files = sorted(str(f) for d in data.iterdir() if run.suffix in d.name for f in d.glob("*.log"))
    command = stack.kafka_tool_command(DUMP_LOG, ["--deep-iteration", "--files", ",".join(files)])
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"DumpLogSegments failed ({done.returncode}): {done.stderr[-400:]}")
    return parse_dump(done.stdout)


def fencing_verify(run: ChaosRun, requests: list[Request]) -> list[str]:
    """Nothing written after the fence, no duplicate or stale transition, a took part."""
    errors = []
    cut_ms, healed_ms = run.figures.get("cut_ms"), run.figures.get("healed_ms")
    if cut_ms is None or healed_ms is None:
        return ["the cut never happened"]
    if run.figures.get("takeover_s") is None:
        errors.append("tracker-b never held every workflow partition during the cut")
    if run.figures.get("led") is None or run.figures.get("led", "").endswith("[]"):
        errors.append(f"{TRACKER} held no workflow partition at the cut: nothing to fence")
    batches = log_batches(run)
    late = written_after_fencing(batches)
    moves = run.recorder.transitions([r.workflow_id for r in requests])
    breaks, repeats = transition_breaks(moves)
    run.figures.update(
        batches=len(batches),
        new_epochs=len(takeovers(batches, since_ms=cut_ms)),
        after_fence=len(late),
        transition_breaks=len(breaks),
        transition_repeats=repeats,
    )
    errors += [f"written after fencing: {f}" for f in late[:10]]
    errors += [f"transitions: {b}" for b in breaks[:10]]
    return errors


def _short(hold_s: float):  # type: ignore[no-untyped-def]
    def leader(run: ChaosRun, rng: random.Random, window_s: float) -> faults.Injections:
        return leader_isolated(run, rng, window_s, hold_s=hold_s)

    return leader


FENCING = Fault(
    "netns: tracker cut off 60 s (fencing)",
    tracker_cut_off,
    window_s=120,
    workflows=40,
    max_exits=0,
    # a, cut off for 60 s, may exit once: its watchdog's exit 70 for partitions
    # that stopped (they were taken over), or its fenced batch's; restarted after
    # the healing, it rejoins. A second exit, or any other service's, fails.
    expected_exits={TRACKER: 1},
    prepare=second_tracker,
    verify=fencing_verify,
)

PARTITIONS = (
    Fault(
        "netns: leader isolated from peers",
        leader_isolated,
        window_s=60,
        workflows=40,
        max_exits=0,
        verify=cluster_verify,
    ),
    Fault(
        "netns: bridge partition",
        bridge,
        window_s=60,
        workflows=40,
        max_exits=0,
        verify=cluster_verify,
    ),
    Fault(
        "netns: 200ms + 5% loss, 2 min",
        lossy,
        window_s=120,
        workflows=60,
        max_exits=0,
        verify=cluster_verify,
    ),
    FENCING,
)

PARTITIONS_SHORT = (
    Fault(
        "netns: leader isolated 30 s",
        _short(30),
        window_s=40,
        workflows=20,
        max_exits=0,
        verify=cluster_verify,
    ),
)

COLUMNS = (
    ("fault", "fault", 34),
    ("seed", "seed", 7),
    ("workflows", "workflows", 9),
    ("victim", "victim", 15),
    ("lost", "lost", 4),
    ("dup", "duplicated_effects", 3),
    ("stuck", "stuck", 5),
    ("illegal", "illegal_transitions", 7),
    ("rebuild≠", "rebuild_mismatches", 8),
    ("exits", "exits", 5),
    ("cut s", "cut_s", 6),
    ("moved while cut", "moved_while_cut", 15),
    ("stall s", "longest_stall_s", 7),
    ("ISR full s", "isr_full_s", 10),
    ("recovery s", "recovery_s", 10),
    ("takeover s", "takeover_s", 10),
    ("after fence", "after_fence", 11),
    ("ok", "ok", 4),
)
