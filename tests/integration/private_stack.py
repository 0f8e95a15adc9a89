"""A dev stack of its own for a test module: private ports, a tmp state dir, stopped at the end.

The tests of the three-broker and secure stacks must not touch the shared stack
(9092/9093/8081), which the other integration tests use, so each module starts one
``LocalStack`` on ports of its own (overridable with ``SAGALOG_TEST_<NAME>_KAFKA_PORT``
and friends, below the kernel's ephemeral range so no client socket can sit on them)
and stops it whatever happened.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from sagalog.devstack import DevStackSettings, LocalStack
from sagalog.settings import ClientSettings

SHARED_PORTS = frozenset({9092, 9093, 8081})
SAGALOG = Path(sys.executable).parent / "sagalog"
REPO = Path(__file__).resolve().parents[2]


def private_settings(*, name: str, base: int, state_dir: Path) -> DevStackSettings:
    """Ports ``base`` (Kafka), ``base + 1`` (controller), ``base - 11`` (registry)."""
    prefix = f"SAGALOG_TEST_{name.upper()}_"
    kafka = int(os.environ.get(f"{prefix}KAFKA_PORT", base))
    settings = DevStackSettings(
        kafka_port=kafka,
        controller_port=int(os.environ.get(f"{prefix}CONTROLLER_PORT", kafka + 1)),
        registry_port=int(os.environ.get(f"{prefix}REGISTRY_PORT", kafka - 11)),
        state_dir=state_dir,
    )
    used = {settings.kafka_port, settings.controller_port, settings.registry_port}
    if used & SHARED_PORTS:
        raise ValueError(f"a private stack must not use the shared ports {sorted(SHARED_PORTS)}")
    return settings


@contextmanager
def running(stack: LocalStack) -> Iterator[LocalStack]:
    """``up`` now, ``down`` at the end, even when a test failed."""
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


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
