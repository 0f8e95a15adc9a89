"""A new user's first hour, as they would live it: ``pip install sagalog`` from the wheel
into a fresh virtual environment outside this repository, ``sagalog new``, and the new
project's own tests, which start its tracker and agent against the dev stack.

Nothing of the repository is importable in that environment: if the wheel lacked a
module, the platform schemas or the services, this is where it shows.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n" + (
        done.stdout[-6000:] + done.stderr[-6000:]
    )
    return done.stdout


@pytest.mark.timeout(1200)
def test_the_wheel_installed_elsewhere_scaffolds_a_project_whose_tests_pass_on_the_stack(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    dist = tmp_path / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(REPO)],
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    [wheel] = dist.glob("sagalog-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in (
        "sagalog/py.typed",
        "sagalog/services/tracker/__main__.py",
        "sagalog/services/gateway/__main__.py",
        "sagalog/scaffold/platform_schemas/v1/step_failed.avsc",
        "sagalog/scaffold/template/src/{{package}}/orders.py.tmpl",
        "sagalog/devstack/bundled/devstack-lock.json",
    ):
        assert shipped in names, f"the wheel lacks {shipped}"

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=env, timeout=120)
    python, sagalog = venv / "bin" / "python", venv / "bin" / "sagalog"
    run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel), "pytest"],
        cwd=tmp_path,
        env=env,
        timeout=900,
    )
    for service in ("tracker", "gateway"):  # the platform's services came with the wheel
        assert "--data-dir" in run(
            [str(sagalog), "run", service, "--help"], cwd=tmp_path, env=env, timeout=60
        )
    run([str(sagalog), "new", "shop"], cwd=tmp_path, env=env, timeout=60)
    project = tmp_path / "shop"
    out = run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        timeout=900,
    )
    assert "6 passed" in out, out
