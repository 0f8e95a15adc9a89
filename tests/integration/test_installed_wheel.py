"""The platform as a user gets it: the wheel built from this tree and installed into a
fresh virtual environment outside the repository, nothing of the repository importable.

- ``sagalog new`` scaffolds a project whose own tests pass on the dev stack (they start
  its tracker and agent as processes);
- every image's entry point starts the way its Dockerfile says, built as
  ``docker-compose.yml`` builds it (the one agent Dockerfile with each agent's
  ``AGENT`` build arg): the files its COPY lines copy, its ``pip install .`` (the same
  wheel), its ENV and its CMD, each service ready on ``/health/ready``, its
  HEALTHCHECK passing, and exit 0 on SIGTERM.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from demo.fleet import AGENTS as FLEET_AGENTS
from sagalog.exit_codes import ExitCode
from sagalog.service_process import free_port

from .dockerfile import Image

# Builds the wheel and installs it, with every dependency, into a fresh environment
# (minutes of pip on two cores before a test starts): a packaging check for test-all.
pytestmark = pytest.mark.extended

REPO = Path(__file__).resolve().parents[2]

# The procurement agents: the containers run them on its topic.
AGENTS = {m: p for m, p in FLEET_AGENTS.items() if p.workflow == "procurement"}


def compose_image(service: str) -> Image:
    """The image docker-compose.yml builds for ``service``: its Dockerfile, its build args."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    build = compose["services"][service]["build"]
    return Image.parse(REPO / build["context"] / build["dockerfile"], build.get("args"))


def run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n" + (
        done.stdout[-6000:] + done.stderr[-6000:]
    )
    return done.stdout


@dataclass(frozen=True)
class Installed:
    venv: Path
    env: dict[str, str]
    """This process's environment (the dev stack's SAGALOG_* included), the venv first
    on PATH, and no PYTHONPATH: only what the wheel installed is importable."""

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def sagalog(self) -> Path:
        return self.venv / "bin" / "sagalog"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    dist = work / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(REPO)],
        cwd=work, env=env, timeout=600,
    )  # fmt: skip
    [wheel] = dist.glob("sagalog-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in (
        "sagalog/py.typed",
        "sagalog/services/tracker/__main__.py",
        "sagalog/services/gateway/__main__.py",
        "sagalog/scaffold/template/src/{{package}}/orders.py.tmpl",
        "sagalog/devstack/bundled/devstack-lock.json",
    ):
        assert shipped in names, f"the wheel lacks {shipped}"
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=work, env=env, timeout=120)
    run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel), "pytest"],
        cwd=work, env=env, timeout=900,
    )  # fmt: skip
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return Installed(venv, env)


@pytest.mark.timeout(1200)
def test_the_wheel_installed_elsewhere_scaffolds_a_project_whose_tests_pass_on_the_stack(
    installed: Installed, tmp_path: Path
) -> None:
    for service in ("tracker", "gateway"):  # the platform's services came with the wheel
        assert "--data-dir" in run(
            [str(installed.sagalog), "run", service, "--help"],
            cwd=tmp_path, env=installed.env, timeout=60,
        )  # fmt: skip
    run([str(installed.sagalog), "new", "shop"], cwd=tmp_path, env=installed.env, timeout=60)
    out = run(
        [str(installed.python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path / "shop", env=installed.env, timeout=900,
    )  # fmt: skip
    written = sum(  # every test the scaffold wrote ran and passed: in memory and on the stack
        len(re.findall(r"^(?:async )?def test_", path.read_text(), re.MULTILINE))
        for path in (tmp_path / "shop" / "tests").glob("test_*.py")
    )
    assert written >= 2 and f"{written} passed" in out, out


# -- the images -------------------------------------------------------------------------


@dataclass
class Container:
    """One image played as a process: its root folder, its process, its health port."""

    name: str
    image: Image
    root: Path
    health: int
    process: subprocess.Popen[bytes] | None = None

    def start(self, installed: Installed, overrides: dict[str, str]) -> Container:
        log = (self.root / "log.txt").open("wb")
        self.started = time.monotonic()
        self.env = {**installed.env, **self.image.environment(self.root), **overrides}
        self.process = subprocess.Popen(
            self.image.cmd, cwd=self.image.working_dir(self.root), env=self.env,
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        return self

    def wait_ready(self, timeout_s: float = 180) -> float:
        """Wait for ``/health/ready``; the seconds from this container's start."""
        started = self.started
        while time.monotonic() - started < timeout_s:
            assert self.process is not None
            if self.process.poll() is not None:
                pytest.fail(f"{self.name} exited {self.process.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.health}/health/ready", timeout=2
                ):
                    return time.monotonic() - started
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.25)
        pytest.fail(f"{self.name} not ready within {timeout_s:g}s:\n{self.tail()}")

    def stop(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return None

    def tail(self) -> str:
        return (self.root / "log.txt").read_text(errors="replace")[-4000:]


def retopic(project: Path, suffix: str) -> str:
    """Give the image's project a workflow topic of its own on the shared dev stack, and
    let it manage only what it declares (as a project sharing a cluster does)."""
    topics = project / "topology" / "topics.yaml"
    document = yaml.safe_load(topics.read_text())
    document["ignore"] = ["*"]
    document["topics"] = {
        (f"{name}.{suffix}" if name == "procurement.events" else name): spec
        for name, spec in document["topics"].items()
    }
    topics.write_text(yaml.safe_dump(document, sort_keys=False))
    for flow in (project / "topology" / "flows").glob("*.yaml"):
        text = flow.read_text().replace(
            "topic: procurement.events", f"topic: procurement.events.{suffix}"
        )
        # the agents run as <name>-<suffix>: the flows name them so
        flow.write_text(re.sub(r"^(\s+agent: \S+)$", rf"\1-{suffix}", text, flags=re.MULTILINE))
    return f"procurement.events.{suffix}"


@pytest.fixture
def containers() -> Iterator[list[Container]]:
    started: list[Container] = []
    yield started
    for container in reversed(started):
        container.stop()


@pytest.mark.timeout(900)
def test_every_image_starts_as_its_dockerfile_says_and_stops_cleanly(
    installed: Installed, tmp_path: Path, containers: list[Container]
) -> None:
    suffix = uuid.uuid4().hex[:8]
    secret = secrets.token_urlsafe(32)
    app_id = f"saga-tracker-{suffix}"
    services = {  # each image as compose builds it, for the compose service
        "tracker": "saga-tracker",
        "gateway": "gateway",
        **{module: module.replace("_", "-") for module in AGENTS},
    }
    images: dict[str, Container] = {}
    for name, service in services.items():
        image = compose_image(service)
        assert image.installs_the_project, f"{image.path}: no `pip install .`"
        root = tmp_path / name
        image.lay_out(REPO, root)
        retopic(image.working_dir(root), suffix)
        images[name] = Container(name, image, root, free_port())
    project = images["tracker"].image.working_dir(images["tracker"].root)
    run(
        [str(installed.sagalog), "--project-dir", str(project), "topology", "apply"],
        cwd=project, env=installed.env, timeout=180,
    )  # fmt: skip

    tracker = images["tracker"].start(
        installed,
        {
            "SAGALOG_TRACKER_APP_ID": app_id,
            "SAGALOG_TRACKER_GATE_SECRET": secret,
            "SAGALOG_TRACKER_INSTANCE_ID": "a",
            "SAGALOG_HEALTH_HOST": "127.0.0.1",
            "SAGALOG_HEALTH_PORT": str(images["tracker"].health),
        },
    )
    containers.append(tracker)
    ready = {"tracker": tracker.wait_ready()}
    gateway = images["gateway"]
    gateway.start(
        installed,
        {
            "GATEWAY_HOST": "127.0.0.1",
            "GATEWAY_PORT": str(gateway.health),
            "GATEWAY_API_KEYS": "image-test-key",
            "GATEWAY_GATE_SECRET": secret,
            "GATEWAY_TRACKER_APP_ID": app_id,
        },
    )
    containers.append(gateway)
    for module, process in AGENTS.items():
        prefix = process.prefix
        agent = images[module]
        containers.append(
            agent.start(
                installed,
                {
                    f"{prefix}_NAME": f"{module.replace('_', '-')}-{suffix}",
                    f"{prefix}_INSTANCE_ID": "a",
                    f"{prefix}_GATE_SECRET": secret,
                    "SAGALOG_HEALTH_HOST": "127.0.0.1",
                    "SAGALOG_HEALTH_PORT": str(agent.health),
                },
            )
        )
    for container in containers[1:]:
        ready[container.name] = container.wait_ready()
    for container in containers:
        if container.image.healthcheck:  # the image's own HEALTHCHECK, as Docker runs it
            checked = subprocess.run(
                container.image.healthcheck, env=container.env, capture_output=True,
                text=True, timeout=30, check=False,
            )  # fmt: skip
            assert checked.returncode == 0, f"{container.name}: {checked.stderr}"
    exits = {container.name: container.stop() for container in reversed(containers)}
    print("ready after start (s):", {k: round(v, 2) for k, v in ready.items()})
    assert exits == dict.fromkeys(exits, ExitCode.STOPPED), {
        name: (code, images[name].tail()[-1500:]) for name, code in exits.items() if code != 0
    }
