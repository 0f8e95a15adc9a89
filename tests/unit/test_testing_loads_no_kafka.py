"""The in-memory tier loads no Kafka runtime: not the client library, not the worker.

A user's flow test (``tests/test_flow.py`` of a ``sagalog new`` project, with the
``conftest.py`` pytest loads beside it) and ``make bench-memory`` run a whole flow with
no broker; what they import is what they pay for, in CPU seconds, before the first
event. A rule, not a timing: each import runs in a fresh interpreter, which then
names the modules it must not have loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sagalog.scaffold import ProjectNames, create_project

REPO = Path(__file__).resolve().parents[2]
KAFKA_RUNTIME = ("confluent_kafka", "sagalog.agents.worker")


def loaded_kafka_runtime(code: str, *, cwd: Path, path: list[Path]) -> list[str]:
    """The modules of ``KAFKA_RUNTIME`` that ``code`` loads in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint(*[m for m in {KAFKA_RUNTIME!r} if m in sys.modules])"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(p) for p in path),
        "PURCHASING_AGENT_GATE_SECRET": "unit-test-gate-secret-0123456789",
    }
    ran = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.split()


def test_a_new_projects_flow_test_loads_no_kafka_runtime(tmp_path: Path) -> None:
    project = tmp_path / "acme-shop"
    create_project(ProjectNames.of("acme-shop", sagalog_version="0"), project)
    loaded = loaded_kafka_runtime(
        "import conftest, test_flow", cwd=project, path=[project / "src", project / "tests"]
    )
    assert loaded == [], "the in-memory tier's imports load the Kafka runtime"


def test_the_memory_bench_loads_no_kafka_runtime() -> None:
    agents = ["intake", "retrieval", "risk", "budget", "purchasing", "notification"]
    code = "import tests.bench.whole_flow\n" + "".join(f"import {a}_agent.agent\n" for a in agents)
    loaded = loaded_kafka_runtime(code, cwd=REPO, path=[REPO, REPO / "services"])
    assert loaded == [], "make bench-memory's imports load the Kafka runtime"
