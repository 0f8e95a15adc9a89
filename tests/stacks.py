"""The private stacks of a test run: one per shape, shared by every test of that shape.

A test that must not run on the shared dev stack (9092/9093/8081) asks for a shape by
fixture (``tests/conftest.py``): ``plain_stack`` (one plaintext broker, which its tests
may stop), ``secure_stack`` (one SASL_SSL broker),
``secure_cluster`` (three of them), ``cluster`` (three plaintext brokers, which its
tests may kill and restart), ``netns_cluster`` (three secured brokers, each in a
network namespace of its own, for the partition rounds; root only) or ``chaos_run``
(one broker, with the reference fleet on it, for the chaos
rounds and the broker outages). Each starts
on first use, is shared by every later test of its shape, and stops after the last:
``order_by_shape`` runs the modules of one shape together, and ``release_after``
stops a stack when the next test does not use it. Before this, each module started
its own, and a run started nine stacks and four fleets where four and one do.

``port_slot`` is the one port allocator: a block of 1,000 ports below Linux's
ephemeral range (32768-60999), where no client socket can take a listening port
first (a run once failed on "address already in use" there).
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import external_tools
from sagalog.devstack import DevStackSettings, LocalStack
from sagalog.devstack.processes import port_is_free
from sagalog.settings import ClientSettings

REPO = Path(__file__).resolve().parents[1]
SAGALOG = Path(sys.executable).parent / "sagalog"
SHARED_PORTS = frozenset({9092, 9093, 8081})

# A slot's ports, as offsets from its base: Kafka x092 (x192, x292 for nodes 2 and 3),
# controllers x093.., mTLS x102.., registry x081, the chaos proxy x094, JMX x404...
KAFKA, CONTROLLER, REGISTRY, PROXY = 92, 93, 81, 94
_SLOT_PORTS = (
    REGISTRY,
    *(KAFKA + 100 * n + extra for n in range(3) for extra in (0, 1, 2, 10)),
    *(KAFKA + 100 * n + 312 for n in range(3)),
)
_SLOTS = range(20_000, 32_000, 1_000)
_handed_out: set[int] = set()


def port_slot() -> int:
    """The base of a free block of ports no other stack of this run was given.

    Each xdist worker starts its search at a slot of its own, so that two workers
    do not both find one slot free and race for it.
    """
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    start = (3 * worker) % len(_SLOTS)
    for base in [*_SLOTS[start:], *_SLOTS[:start]]:
        if base in _handed_out:
            continue
        if all(port_is_free(host="127.0.0.1", port=base + offset) for offset in _SLOT_PORTS):
            _handed_out.add(base)
            return base
    raise RuntimeError(
        f"no free block of ports between {_SLOTS.start} and {_SLOTS.stop}: "
        "stop the stacks an earlier run left (sagalog dev status --all)"
    )


def private_settings(*, state_dir: Path, base: int | None = None) -> DevStackSettings:
    """A dev stack's settings on a slot of its own (``port_slot`` unless ``base``)."""
    base = port_slot() if base is None else base
    return DevStackSettings(
        kafka_port=base + KAFKA,
        controller_port=base + CONTROLLER,
        registry_port=base + REGISTRY,
        state_dir=state_dir,
    )


def cli_environment(stack: LocalStack, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a ``sagalog`` subprocess pointed at this stack's state dir."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SAGALOG_")}
    settings = stack.settings
    environment |= {
        "SAGALOG_DEV_KAFKA_PORT": str(settings.kafka_port),
        "SAGALOG_DEV_CONTROLLER_PORT": str(settings.controller_port),
        "SAGALOG_DEV_REGISTRY_PORT": str(settings.registry_port),
        "SAGALOG_DEV_STATE_DIR": str(settings.state_dir),
        "SAGALOG_CONNECT_TIMEOUT_S": "15",
    }
    environment.update(extra or {})
    return environment


def sagalog(
    *arguments: str, env: Mapping[str, str], timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``sagalog`` as a user would, from the repository."""
    return subprocess.run(
        [str(SAGALOG), *arguments],
        env=dict(env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def client_settings(environment: Mapping[str, str]) -> ClientSettings:
    """``ClientSettings`` from a ``client_environment``, ignoring the process's own."""
    fields = {
        name.removeprefix("SAGALOG_").lower(): value
        for name, value in environment.items()
        if name.startswith("SAGALOG_")
    }
    return ClientSettings(_env_file=None, connect_timeout_s=15, **fields)  # type: ignore[call-arg, arg-type]


# -- one stack per shape ------------------------------------------------------------


@dataclass
class SharedStacks:
    """The run's private stacks by shape (the fixture's name): started by ``get``,
    stopped by ``release`` or at the end of the session."""

    root: Path
    starters: dict[str, Callable[[Path], tuple[Any, Callable[[], None]]]]
    running: dict[str, tuple[Any, Callable[[], None]]] = field(default_factory=dict)

    def get(self, shape: str) -> Any:
        if shape not in self.running:
            directory = self.root / shape
            directory.mkdir(parents=True, exist_ok=True)
            self.running[shape] = self.starters[shape](directory)
        return self.running[shape][0]

    def release(self, shape: str) -> None:
        held = self.running.pop(shape, None)
        if held is not None:
            held[1]()

    def release_all(self) -> None:
        for shape in list(self.running):
            with suppress(Exception):  # one stack's failure to stop must not keep the others
                self.release(shape)


SHAPES = (
    "chaos_run",
    "secure_cluster",
    "cluster",
    "secure_stack",
    "plain_stack",
    "netns_cluster",
    "disk_run",
)
"""The fixtures of the shapes, in the order their modules run, after every test of
the shared dev stack."""


@functools.cache
def shape_of_module(path: Path) -> str | None:
    """The shape a test module's tests and fixtures ask for by parameter name, read
    from its source: xdist's controller schedules by node id, and collects nothing."""
    if not path.is_file():
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    asked = {
        argument.arg
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and (node.name.startswith("test") or "fixture" in ast.unparse(node.decorator_list))
        for argument in node.args.args
    }
    return next((shape for shape in SHAPES if shape in asked), None)


def shape_of(item: pytest.Item) -> str | None:
    found = [shape for shape in SHAPES if shape in getattr(item, "fixturenames", ())]
    return found[0] if found else None


def order_by_shape(items: list[pytest.Item]) -> None:
    """Move each module that uses a shape to the end, grouped by shape, keeping the
    order of its tests: a stack then serves one stretch of the run and stops. The
    chaos rounds go last in their shape, so the checks of a stack's own behaviour
    see it before anything was killed. Call it after the ``extended`` marks are set."""
    shape_of_module: dict[Path, int] = {}
    for item in items:
        shape = shape_of(item)
        if shape is not None:
            rank = SHAPES.index(shape) + 1
            path = Path(str(item.path))
            shape_of_module[path] = min(shape_of_module.get(path, rank), rank)

    long_modules = {Path(str(item.path)) for item in items if item.get_closest_marker("extended")}

    def key(item: pytest.Item) -> tuple[int, bool, bool]:
        path = Path(str(item.path))
        rank = shape_of_module.get(path, 0)
        # Before a shape: the modules with a test over a minute first, as workers take
        # modules in this order and the longest should not start last.
        return rank, rank == 0 and path not in long_modules, "chaos" in path.parts

    items.sort(key=key)


def release_after(stacks: SharedStacks, item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the stack of ``item``'s shape when the next test does not use it."""
    for shape in list(stacks.running):
        used_next = nextitem is not None and shape in getattr(nextitem, "fixturenames", ())
        if shape in getattr(item, "fixturenames", ()) and not used_next:
            stacks.release(shape)


def started(stack: LocalStack) -> tuple[LocalStack, Callable[[], None]]:
    stack.up()
    return stack, stack.down


def plain_stack(directory: Path) -> tuple[LocalStack, Callable[[], None]]:
    return started(LocalStack(private_settings(state_dir=directory / "state")))


def secure_stack(directory: Path) -> tuple[LocalStack, Callable[[], None]]:
    return started(LocalStack(private_settings(state_dir=directory / "state"), secure=True))


def secure_cluster(directory: Path) -> tuple[LocalStack, Callable[[], None]]:
    settings = private_settings(state_dir=directory / "state")
    return started(LocalStack(settings, brokers=3, secure=True))


def cluster(directory: Path) -> tuple[Any, Callable[[], None]]:
    """Three plaintext brokers as the chaos suite drives them (``chaos.stack``)."""
    from chaos.stack import ChaosStack

    base = port_slot()
    stack = ChaosStack(
        state_dir=directory / "stack",
        broker_count=3,
        kafka_port=base + KAFKA,
        controller_port=base + CONTROLLER,
        registry_port=base + REGISTRY,
        proxy_port=base + PROXY,
    )
    stack.up()
    return stack, stack.down


NETNS_PREFIX, NETNS_SUBNET = "sgt", "10.231.8.0/24"
"""The test run's namespaces: not ``make chaos``'s (``sgf``, 10.231.7.0/24), so one
may run beside the other."""


def netns_cluster(directory: Path) -> tuple[Any, Callable[[], None]]:
    """Three secured brokers (TLS, SCRAM, mTLS, ACLs), each in a network namespace."""
    from chaos.netns import Network
    from chaos.partitions import BROKERS
    from chaos.stack import ChaosStack

    external_tools.require_root("network namespaces, veth pairs and iptables")
    for tool in ("ip", "iptables"):
        external_tools.require(tool)
    network = Network(BROKERS, prefix=NETNS_PREFIX, subnet=NETNS_SUBNET).create()
    base = port_slot()
    stack = ChaosStack(
        state_dir=directory / "stack",
        broker_count=3,
        kafka_port=base + KAFKA,
        controller_port=base + CONTROLLER,
        registry_port=base + REGISTRY,
        proxy_port=base + PROXY,
        network=network,
        secure=True,
    )

    def stop() -> None:
        try:
            stack.down()
        finally:
            network.destroy()

    try:
        stack.up()
    except BaseException:
        stop()
        raise
    return stack, stop


def chaos_run(directory: Path) -> tuple[Any, Callable[[], None]]:
    """One broker and the reference fleet on it, supervised.

    No proxy: the rounds of the tests cut no network (``make chaos`` runs those, through
    Toxiproxy). The seed is ``SAGALOG_CHAOS_SEED``'s, or drawn and printed: a failing
    round names it.
    """
    from chaos.harness import ChaosRun

    stack, seed = _one_broker_chaos(directory)
    stack.up()
    run = ChaosRun(stack, directory / "run", seed=seed)

    def stop() -> None:
        try:
            run.close()
        finally:
            stack.down()

    try:
        run.setup()
    except BaseException:
        stop()
        raise
    return run, stop


def disk_run(directory: Path) -> tuple[Any, Callable[[], None]]:
    """``chaos_run``'s shape with the broker's, the tracker's and the budget agent's
    data directories on small disks (``chaos.full_disks``; root only, for ``mount``)."""
    from chaos.full_disks import open_disk_run

    external_tools.require_root("mounting a size-limited tmpfs over the data directories")
    stack, seed = _one_broker_chaos(directory)
    return open_disk_run(stack, directory / "run", seed=seed)


def _one_broker_chaos(directory: Path) -> tuple[Any, int]:
    """The one-broker chaos stack of a test shape (no proxy: the tests' rounds cut no
    network), not started, and the run's seed: ``SAGALOG_CHAOS_SEED``'s, or drawn and
    printed, so that a failing round names it."""
    import random

    from chaos.stack import ChaosStack

    base = port_slot()
    stack = ChaosStack(
        state_dir=directory / "stack",
        kafka_port=base + KAFKA,
        controller_port=base + CONTROLLER,
        registry_port=base + REGISTRY,
        network_faults=False,
    )
    seed = int(os.environ.get("SAGALOG_CHAOS_SEED") or random.SystemRandom().randrange(1, 10**6))
    print(f"chaos: seed {seed} (rerun with SAGALOG_CHAOS_SEED={seed})")
    return stack, seed


STARTERS = {
    "disk_run": disk_run,
    "plain_stack": plain_stack,
    "chaos_run": chaos_run,
    "cluster": cluster,
    "netns_cluster": netns_cluster,
    "secure_stack": secure_stack,
    "secure_cluster": secure_cluster,
}
