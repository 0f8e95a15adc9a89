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

The healing is the fault's end (the checker's recovery is measured from it); the
round then waits until every partition has its three in-sync replicas again.
"""

from __future__ import annotations

import random
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
from .harness import Fault
from .netns import Network

if TYPE_CHECKING:
    from .harness import ChaosRun

BROKERS = ("kafka-1", "kafka-2", "kafka-3")
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


def _short(hold_s: float):  # type: ignore[no-untyped-def]
    def leader(run: ChaosRun, rng: random.Random, window_s: float) -> faults.Injections:
        return leader_isolated(run, rng, window_s, hold_s=hold_s)

    return leader


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
    ("ok", "ok", 4),
)
