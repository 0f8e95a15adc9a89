"""`sagalog flows check` and `sagalog flows graph` on a copy of the project's files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sagalog.cli.main import cli


@pytest.fixture
def project(tmp_path: Path, repo_root: Path) -> Path:
    shutil.copytree(repo_root / "schemas", tmp_path / "schemas")
    shutil.copytree(repo_root / "topology", tmp_path / "topology")
    return tmp_path


def sagalog(project: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--project-dir", str(project), *args])


def flow_file(project: Path, version: int = 1) -> Path:
    return project / "topology" / "flows" / f"procurement.v{version}.yaml"


def test_check_prints_one_line_per_flow_version(project: Path) -> None:
    v2 = flow_file(project).read_text().replace("version: 1", "version: 2")
    flow_file(project, 2).write_text(v2)
    result = sagalog(project, "flows", "check")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(
        "ok  procurement v1: 6 step(s), 1 gate(s), 2 segment(s), 2 SLA rule(s), deadline 5d ("
    )
    assert lines[1].startswith("ok  procurement v2:") and lines[1].endswith("procurement.v2.yaml)")


def test_check_reports_every_problem_and_exits_2(project: Path) -> None:
    text = flow_file(project).read_text()
    broken = text.replace("timeout: 10m        # a model call", "timeout: soon").replace(
        "deadline: 72h", "deadline: later"
    )
    assert broken.count("soon") == 1 and "later" in broken
    flow_file(project).write_text(broken)
    result = sagalog(project, "flows", "check")
    assert result.exit_code == 2
    assert "ok  " not in result.stdout
    errors = result.stderr.splitlines()
    assert errors[0].startswith("error: ") and "step 'score_risk', field 'timeout'" in errors[0]
    assert "gate 'manager_approval', field 'deadline'" in errors[1]
    assert errors[-1].startswith("2 problem(s) in 1 of 1 flow file(s)")


def test_check_goes_on_to_schemas_once_fields_are_right(project: Path) -> None:
    text = flow_file(project).read_text()
    flow_file(project).write_text(
        text.replace(
            "completes_on: procurement.v1.BudgetReleased",
            "completes_on: procurement.v1.BudgetRelesed",
        )
    )
    result = sagalog(project, "flows", "check")
    assert result.exit_code == 2
    assert (
        "flow 'procurement' v1, step 'reserve_budget': compensation 'release_budget' completes "
        "on 'procurement.v1.BudgetRelesed', which has no schema in "
    ) in result.stderr


def test_graph_writes_mermaid_to_stdout_by_default(project: Path) -> None:
    result = sagalog(project, "flows", "graph", "procurement")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[3] == "flowchart LR"


def test_graph_takes_the_format_from_the_file_suffix(project: Path, tmp_path: Path) -> None:
    target = tmp_path / "procurement.dot"
    result = sagalog(project, "flows", "graph", "procurement", "--version", "1", "-o", str(target))
    assert result.exit_code == 0, result.output
    assert target.read_text().startswith('digraph "procurement v1" {')
    assert f"wrote procurement v1 as dot to {target}" in result.stderr
    forced = tmp_path / "graph.txt"
    result = sagalog(project, "flows", "graph", "procurement", "--format", "dot", "-o", str(forced))
    assert result.exit_code == 0 and forced.read_text().startswith("digraph")


def test_graph_of_an_unknown_flow_or_version_exits_2(project: Path) -> None:
    result = sagalog(project, "flows", "graph", "sales")
    assert result.exit_code == 2
    assert "no flow 'sales' is loaded (flows: procurement)" in result.stderr
    result = sagalog(project, "flows", "graph", "procurement", "--version", "4")
    assert result.exit_code == 2
    assert "flow 'procurement' v4 is not loaded (loaded: v1)" in result.stderr


def test_graph_refuses_a_broken_flow_but_not_for_another_ones_problems(project: Path) -> None:
    text = flow_file(project).read_text()
    flow_file(project, 2).write_text(
        text.replace("version: 1", "version: 2").replace("deadline: 5d", "deadline: soon")
    )
    result = sagalog(project, "flows", "graph", "procurement", "--version", "1")
    assert result.exit_code == 0, result.output
    result = sagalog(project, "flows", "graph", "procurement")
    assert result.exit_code == 2
    assert "procurement.v2.yaml: flow 'procurement' v2, field 'deadline'" in result.stderr
    assert "fix procurement before drawing it" in result.stderr
