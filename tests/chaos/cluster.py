"""Broker failures on a three-broker cluster: ``python -m chaos --brokers 3``.

The chaos stack then runs three KRaft nodes (replication 3, min ISR 2, the
production profile) without the proxy: these rounds kill and wipe brokers, they do
not cut the network. Two rounds, each judged by the usual checker plus its own
figures (which broker, what it led, how long until the cluster was whole again):

- ``leader_coordinator_kill``: one broker is made the leader of every partition of
  the workflow topic *and* is the transaction coordinator of an agent (leadership is
  spread over three brokers, so this is arranged first: the agent's coordinator is
  found, then made the preferred leader of the workflow topic by a reassignment that
  only reorders each replica list, and a preferred election), then SIGKILLed under
  load and restarted.
- ``wipe_restart``: a broker is SIGKILLed, its data directory deleted (its replicas
  and its copy of the KRaft log), and restarted; ``LocalStack.up`` formats it with
  the others' cluster id, it rejoins the static quorum (``controller.quorum.voters``,
  kraft.version 0, where a voter has no directory id to mismatch) and fetches every
  replica back. The round waits until every partition has its three in-sync replicas.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from . import faults
from .checker import TERMINAL
from .harness import Fault

if TYPE_CHECKING:
    from demo.scenario import Request

    from .harness import ChaosRun
    from .stack import ChaosStack

TRANSACTION_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions, Kafka's default
ISR_TIMEOUT_S = 240.0
DOWN_S = (6.0, 12.0)
"""How long a killed broker stays down: past the broker session (9 s) sometimes."""


# -- what a broker leads ------------------------------------------------------------------


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit signed)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def transaction_state_partition(
    transactional_id: str, partitions: int = TRANSACTION_STATE_PARTITIONS
) -> int:
    """The ``__transaction_state`` partition whose leader coordinates this id.

    Kafka's ``Utils.abs(transactionalId.hashCode) % partitions`` (``Utils.abs`` maps
    ``Integer.MIN_VALUE`` to 0, where ``Math.abs`` would stay negative).
    """
    h = java_string_hashcode(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def agent_transactional_id(run: ChaosRun, module: str, instance: str = "a") -> str:
    """As ``AgentWorker`` names it: ``sagalog-agent-<name>-<instance>``."""
    return f"sagalog-agent-{run.fleet.agent_name(module)}-{instance}"


def kafka_tool(stack: ChaosStack, tool: str, *arguments: str, timeout: float = 120) -> str:
    """Run a Kafka CLI against the chaos stack (``sagalog dev kafka TOOL``); its stdout.

    Raises:
        RuntimeError: the tool failed; with the end of what it printed.
    """
    done = subprocess.run(
        stack.stack.kafka_tool_command(tool, list(arguments)),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{tool} {' '.join(arguments)} failed (exit {done.returncode}): "
            f"{(done.stdout + done.stderr)[-800:]}"
        )
    return done.stdout


def described_coordinator(stack: ChaosStack, transactional_id: str) -> int | None:
    """``kafka-transactions describe``'s CoordinatorId (None before the first transaction)."""
    try:
        out = kafka_tool(
            stack, "kafka-transactions", "describe", "--transactional-id", transactional_id
        )
    except RuntimeError:
        return None
    lines = [line.split() for line in out.splitlines() if line.strip()]
    if len(lines) < 2 or "CoordinatorId" not in lines[0]:
        return None
    return int(lines[1][lines[0].index("CoordinatorId")])


def replicas_of(stack: ChaosStack, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """``partition -> (leader, replicas, isr)`` of ``topic``, by the metadata."""
    metadata = stack._admin().list_topics(topic, timeout=30)
    return {
        p: (m.leader, list(m.replicas), list(m.isrs))
        for p, m in metadata.topics[topic].partitions.items()
    }


def make_preferred_leader(
    stack: ChaosStack, topic: str, node_id: int, timeout: float = 60
) -> dict[int, int]:
    """Make ``node_id`` the leader of every partition of ``topic``; the leaders then.

    A reassignment that only reorders each replica list (``node_id`` first: no data
    moves), then a preferred-leader election, checked with the metadata.

    Raises:
        RuntimeError: a tool failed, or the leaders had not moved after ``timeout``.
    """
    plan = {
        "version": 1,
        "partitions": [
            {
                "topic": topic,
                "partition": p,
                "replicas": [node_id, *[r for r in replicas if r != node_id]],
            }
            for p, (_, replicas, _) in sorted(replicas_of(stack, topic).items())
        ],
    }
    with tempfile.TemporaryDirectory(prefix="chaos-reassign-") as directory:
        reassign = Path(directory) / "reassign.json"
        reassign.write_text(json.dumps(plan))
        kafka_tool(
            stack,
            "kafka-reassign-partitions",
            "--reassignment-json-file",
            str(reassign),
            "--execute",
        )
        election = Path(directory) / "election.json"
        election.write_text(
            json.dumps(
                {
                    "partitions": [
                        {"topic": topic, "partition": e["partition"]} for e in plan["partitions"]
                    ]
                }
            )
        )
        deadline = time.monotonic() + timeout
        while True:
            # the reorder is metadata only, but the election is refused until it landed
            try:
                kafka_tool(
                    stack,
                    "kafka-leader-election",
                    "--election-type",
                    "PREFERRED",
                    "--path-to-json-file",
                    str(election),
                )
            except RuntimeError:  # already elected, or the reorder not landed yet
                if time.monotonic() > deadline:
                    raise
            leaders = {p: leader for p, (leader, _, _) in replicas_of(stack, topic).items()}
            if all(leader == node_id for leader in leaders.values()):
                return leaders
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{topic}: leaders {leaders} after {timeout:g}s, not all {node_id}"
                )
            time.sleep(1)


def short_isr(stack: ChaosStack) -> list[tuple[str, int, list[int]]]:
    """Every partition of the cluster (internal topics too) with fewer ISRs than replicas."""
    metadata = stack._admin().list_topics(timeout=30)
    return [
        (name, p, list(m.isrs))
        for name, topic in metadata.topics.items()
        for p, m in topic.partitions.items()
        if len(m.isrs) < len(m.replicas) or m.leader < 0
    ]


def wait_isr_full(
    stack: ChaosStack, since: float, timeout: float = ISR_TIMEOUT_S
) -> tuple[float | None, int]:
    """Seconds from ``since`` until every partition had all its replicas in sync.

    Returns ``(seconds or None on timeout, partitions checked)``.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            short = short_isr(stack)
        except Exception:  # a metadata request may fail right after a restart
            short = [("?", -1, [])]
        if not short:
            count = sum(
                len(t.partitions) for t in stack._admin().list_topics(timeout=30).topics.values()
            )
            return round(time.monotonic() - since, 1), count
        time.sleep(0.5)
    return None, 0


def first_progress_after(run: ChaosRun, moment: float, timeout: float = 120) -> float | None:
    """Seconds from ``moment`` until the recorder saw the next transition anywhere."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        later = [t for t in run.recorder.progress_at() if t >= moment]
        if later:
            return round(min(later) - moment, 2)
        time.sleep(0.2)
    return None


# -- the rounds ----------------------------------------------------------------------------


def leader_coordinator_kill(
    run: ChaosRun, rng: random.Random, window_s: float
) -> faults.Injections:
    """SIGKILL the broker that leads the workflow topic and coordinates an agent's
    transactions, under load; start it again 6-12 s later."""
    stack = run.stack
    deadline = time.monotonic() + window_s
    module = rng.choice(faults.AGENTS)
    transactional_id = agent_transactional_id(run, module)
    partition = transaction_state_partition(transactional_id)
    victim = stack.leader_of("__transaction_state", partition).node_id
    described = described_coordinator(stack, transactional_id)
    leaders = make_preferred_leader(stack, run.topic, victim)
    coordinated = _coordinated_agents(run, victim)
    run.figures.update(
        victim=f"kafka-{victim}",
        led=f"{run.topic.split('.')[0]}:{sorted(leaders)}",
        coordinator_of=transactional_id,
        described_coordinator=described,
        transaction_state_partition=partition,
        also_coordinates=coordinated,
    )
    run.report(
        f"chaos: victim kafka-{victim}: leads {run.topic} {sorted(leaders)}, coordinates "
        f"{transactional_id} (__transaction_state-{partition}; kafka-transactions says {described})"
    )
    faults._sleep_until(deadline, rng.uniform(3, 6))  # load on the arranged leaders
    return [_kill_restart(run, rng, victim)]


def _coordinated_agents(run: ChaosRun, node_id: int) -> list[str]:
    return [
        module
        for module in faults.AGENTS
        if run.stack.leader_of(
            "__transaction_state", transaction_state_partition(agent_transactional_id(run, module))
        ).node_id
        == node_id
    ]


def _kill_restart(
    run: ChaosRun, rng: random.Random, victim: int, *, wipe: bool = False
) -> tuple[float, float]:
    stack = run.stack
    run.figures["open_at_kill"] = _open_workflows(run)
    killed = time.monotonic()
    stack.kill_broker(victim)
    if wipe:
        data_dir = stack.stack.layout.data_dir(component=stack.node(victim).component)
        # on disk, not the apparent size (each partition preallocates sparse 10 MB indexes)
        run.figures["wiped_mb"] = round(
            sum(f.stat().st_blocks * 512 for f in data_dir.rglob("*") if f.is_file()) / 1e6, 1
        )
        stack.wipe_broker(victim)
    time.sleep(max(0.0, killed + rng.uniform(*DOWN_S) - time.monotonic()))
    run.figures["moved_while_down"] = any(t >= killed for t in run.recorder.progress_at())
    run.figures["down_s"] = round(time.monotonic() - killed, 1)
    restarting = time.monotonic()
    logged = len(stack.log)
    run.figures["restart_s"] = round(stack.restart_broker(victim), 1)
    if wipe:  # formatted again, with the cluster id the others have
        run.figures["formatted"] = any("formatting" in line for line in stack.log[logged:])
        run.figures["cluster_ids"] = sorted(
            {_cluster_id(stack, node.node_id) for node in stack.stack.nodes}
        )
    restarted = time.monotonic()
    isr_s, partitions = wait_isr_full(stack, restarting)
    run.figures["isr_full_s"] = isr_s
    run.figures["partitions"] = partitions
    if isr_s is None:
        run.figures["short_isr"] = short_isr(stack)[:10]
    # the next transition after the kill: while it was down (the other brokers took
    # over), or only once it was back; None when the round's work was all done
    run.figures["progress_after_kill_s"] = first_progress_after(run, killed, timeout=30)
    run.figures["progress_after_restart_s"] = first_progress_after(run, restarting, timeout=30)
    run.figures["longest_stall_s"] = longest_stall(run.recorder.progress_at(), killed)
    return killed, restarted


def longest_stall(progress_at: list[float], since: float) -> float | None:
    """The longest time without any transition, from ``since`` to the last one after it."""
    moments = [since, *sorted(t for t in progress_at if t >= since)]
    if len(moments) < 2:
        return None
    return round(max(b - a for a, b in itertools.pairwise(moments)), 2)


def _open_workflows(run: ChaosRun) -> int:
    """The round's workflows not ended yet (not yet submitted included): the load."""
    states = run.recorder.states([r.workflow_id for r in run.current])
    return sum(1 for r in run.current if states.get(r.workflow_id) not in TERMINAL)


def _cluster_id(stack: ChaosStack, node_id: int) -> str:
    meta = stack.stack.layout.data_dir(component=stack.node(node_id).component)
    for line in (meta / "meta.properties").read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.partition("=")[2]
    return "?"


def wipe_restart(run: ChaosRun, rng: random.Random, window_s: float) -> faults.Injections:
    """SIGKILL the leader of a workflow partition, delete its data directory, restart
    it; it must fetch every replica back (all ISRs full again)."""
    deadline = time.monotonic() + window_s
    faults._sleep_until(deadline, rng.uniform(4, 8))
    partition = rng.randrange(faults.WORKFLOW_PARTITIONS)
    victim = run.stack.leader_of(run.topic, partition).node_id
    led = sorted(
        p for p, (leader, _, _) in replicas_of(run.stack, run.topic).items() if leader == victim
    )
    run.figures.update(
        victim=f"kafka-{victim}",
        led=f"{run.topic.split('.')[0]}:{led}",
        coordinator_of=",".join(_coordinated_agents(run, victim)) or "-",
    )
    injection = _kill_restart(run, rng, victim, wipe=True)
    run.figures["quorum"] = _quorum_row(run.stack, victim)
    return [injection]


def _quorum_row(stack: ChaosStack, node_id: int) -> str:
    """The victim's row of ``kafka-metadata-quorum describe --replication``."""
    try:
        out = kafka_tool(stack, "kafka-metadata-quorum", "describe", "--replication")
    except RuntimeError as exc:
        return str(exc)[:120]
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == str(node_id):
            return " ".join(cells[:1] + cells[2:4] + cells[-1:])  # id, end offset, lag, status
    return "not in the quorum"


def cluster_verify(run: ChaosRun, requests: list[Request]) -> list[str]:
    """Every partition back to its three in-sync replicas within the bound."""
    if run.figures.get("isr_full_s") is None:
        return [
            f"not every partition had 3 in-sync replicas {ISR_TIMEOUT_S:g}s after the restart: "
            f"{run.figures.get('short_isr')}"
        ]
    return []


CLUSTER = (
    Fault(
        "cluster: leader+coordinator SIGKILL",
        leader_coordinator_kill,
        window_s=90,
        workflows=40,
        max_exits=0,
        verify=cluster_verify,
    ),
    Fault(
        "cluster: data dir wiped + restart",
        wipe_restart,
        window_s=60,
        workflows=40,
        max_exits=0,
        verify=cluster_verify,
    ),
)

CLUSTER_SHORT = (
    Fault(
        "cluster: leader+coordinator SIGKILL",
        leader_coordinator_kill,
        window_s=60,
        workflows=20,
        max_exits=0,
        verify=cluster_verify,
    ),
)

COLUMNS = (
    ("fault", "fault", 34),
    ("workflows", "workflows", 9),
    ("victim", "victim", 7),
    ("led", "led", 18),
    ("coordinator of", "coordinator_of", 36),
    ("lost", "lost", 4),
    ("dup", "duplicated_effects", 3),
    ("stuck", "stuck", 5),
    ("illegal", "illegal_transitions", 7),
    ("exits", "exits", 5),
    ("open at kill", "open_at_kill", 12),
    ("moved after kill s", "progress_after_kill_s", 18),
    ("longest stall s", "longest_stall_s", 15),
    ("restart s", "restart_s", 9),
    ("moved after restart s", "progress_after_restart_s", 21),
    ("ISR full s", "isr_full_s", 10),
    ("recovery s", "recovery_s", 10),
    ("ok", "ok", 4),
)
"""The cluster rounds' table: the checker's verdicts and each round's own figures."""
