"""The one agent image (deploy/images/agent.Dockerfile), read by the player that the wheel
test starts every image with (tests/integration/dockerfile.py): the build arg AGENT
picks the package the CMD runs, in place of the shell, and the settings the image sets
reach every agent below the agent's own prefix. No Docker engine runs here, so the
build's own check and the CMD run under sh as Docker would run them; the player
refuses a build that would not be the image asked for."""

from __future__ import annotations

import importlib
import os
import subprocess
from pathlib import Path

import pytest

from demo.fleet import AGENTS
from integration.dockerfile import Image

REPO = Path(__file__).resolve().parents[2]
AGENT_DOCKERFILE = REPO / "deploy" / "images" / "agent.Dockerfile"


def test_the_cmd_runs_the_package_the_build_arg_names_in_place_of_the_shell(
    tmp_path: Path,
) -> None:
    python = tmp_path / "bin" / "python"  # stands in for python: says how, and as which process
    python.parent.mkdir()
    python.write_text('#!/bin/sh\necho "$$ $*"\n')
    python.chmod(0o755)
    for package in AGENTS:  # all of them: a name written into the CMD would pass for one
        image = Image.parse(AGENT_DOCKERFILE, {"AGENT": package})
        env = {**image.environment(tmp_path), "PATH": f"{python.parent}{os.pathsep}/usr/bin:/bin"}
        process = subprocess.Popen(image.cmd, env=env, stdout=subprocess.PIPE, text=True)
        out, _ = process.communicate(timeout=30)
        # the same process as the shell Docker starts: SIGTERM reaches the agent
        assert out.split() == [str(process.pid), "-m", package], image.cmd


def test_the_build_fails_unless_the_arg_names_a_package_of_services(tmp_path: Path) -> None:
    image = Image.parse(AGENT_DOCKERFILE, {"AGENT": "risk_agent"})
    [check] = [run for run in image.runs if "$AGENT" in run]

    def build_check(agent: str) -> subprocess.CompletedProcess[str]:
        # at the WORKDIR, /app, which holds services/ as the repository root does
        return subprocess.run(
            ["/bin/sh", "-c", check], cwd=REPO, env={"AGENT": agent, "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip

    assert build_check("risk_agent").returncode == 0
    for wrong in ("risk-agent", "procurement", ""):  # a name, a package with no __main__, none
        done = build_check(wrong)
        assert done.returncode != 0 and f"AGENT='{wrong}'" in done.stderr, wrong


def test_the_images_settings_reach_every_agent_below_its_own_prefix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    image = Image.parse(AGENT_DOCKERFILE, {"AGENT": "risk_agent"})
    own = tuple(f"{process.prefix}_" for process in AGENTS.values())
    for name in list(os.environ):
        if name.startswith(("SAGALOG_", *own)):
            monkeypatch.delenv(name)
    for name, value in image.env.items():
        monkeypatch.setenv(name, value)
    # the purchasing agent's settings refuse to exist (and its module to import) without it
    monkeypatch.setenv("PURCHASING_AGENT_GATE_SECRET", "unit-test-gate-secret-0123456789")
    monkeypatch.chdir(tmp_path)  # no stray .env
    for package in AGENTS:
        settings_type = type(importlib.import_module(f"{package}.agent").settings)
        settings = settings_type()
        assert (settings.project_dir, settings.data_dir, settings.health_port) == (
            "/app",
            Path("/var/lib/sagalog"),
            8090,
        ), package
        if package == "risk_agent":  # the agent's own prefix still wins
            monkeypatch.setenv("RISK_AGENT_DATA_DIR", "/elsewhere")
            assert settings_type().data_dir == Path("/elsewhere")


def test_build_args_and_envs_expand_where_docker_expands_them(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "ARG ROOT=/srv\n"
        "ARG NAME\n"
        "ENV HOME=${ROOT}/$NAME\n"
        "ENV HOME=/else LOG=$HOME/log\n"  # a pair sees the values from before its ENV
        "WORKDIR $HOME\n"
        "COPY services/$NAME ./$NAME\n"
        'CMD ["run", "$NAME"]\n'
    )
    image = Image.parse(dockerfile, {"NAME": "risk_agent"})
    assert image.env == {"HOME": "/else", "LOG": "/srv/risk_agent/log"}
    assert image.workdir == "/else"
    assert image.copies == [(["services/risk_agent"], "./risk_agent", "/else")]
    assert image.cmd == ["run", "$NAME"]  # Docker expands no CMD: a shell must, from the ENV


def test_a_build_arg_no_arg_declares_or_an_arg_without_a_value_is_refused() -> None:
    with pytest.raises(ValueError, match="AGNET"):
        Image.parse(AGENT_DOCKERFILE, {"AGENT": "risk_agent", "AGNET": "risk_agent"})
    with pytest.raises(ValueError, match="ARG AGENT has no default"):
        Image.parse(AGENT_DOCKERFILE)
