"""``sagalog new``: the project it writes loads, checks, lints and passes its own pure tests.

The same project's tests on a real cluster, from an installed wheel in a fresh
virtual environment, are ``tests/integration/test_scaffold.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from sagalog.cli.main import cli
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import ConfigurationError
from sagalog.flows.loader import load_flows
from sagalog.scaffold import ProjectNames, create_project
from sagalog.topology.loader import load_topology

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("new") / "acme-shop"
    result = CliRunner().invoke(cli, ["new", "acme-shop", "--dir", str(root)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output
    return root


def test_it_writes_a_whole_project_with_the_platform_schemas(project: Path) -> None:
    for path in (
        "pyproject.toml",
        "README.md",
        "Dockerfile",
        ".gitignore",
        "schemas/acme_shop/v1/order_placed.avsc",
        "schemas/sagalog/v1/compensation_requested.avsc",
        "topology/topics.yaml",
        "topology/flows/orders.v1.yaml",
        "src/acme_shop/orders.py",
        "tests/test_flow.py",
        "tests/test_orders.py",
    ):
        assert (project / path).is_file(), path
    platform = {p.name: p.read_text() for p in (REPO / "schemas" / "sagalog" / "v1").glob("*.avsc")}
    written = {p.name: p.read_text() for p in (project / "schemas/sagalog/v1").glob("*.avsc")}
    assert written == platform, "generated from sagalog.events, as the repository's are"
    leftovers = [p for p in project.rglob("*") if p.is_file() and "{{" in p.read_text()]
    assert leftovers == []


def test_its_flow_loads_and_its_agent_fits_it(project: Path) -> None:
    catalog = SchemaCatalog.load(project / "schemas")
    topology = load_topology(project / "topology", known_schemas=catalog)
    [flow] = load_flows(project / "topology" / "flows", catalog=catalog, topology=topology)
    assert (flow.name, flow.version) == ("orders", 1)
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagalog",
            "flows",
            "check",
            "--path",
            "src",
            "--agent",
            "acme_shop.orders",
        ],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "fits steps check_stock, take_payment" in checked.stdout


def test_its_own_pure_tests_pass(project: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_flow.py"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "4 passed" in ran.stdout


def test_its_python_is_clean_for_ruff(project: Path) -> None:
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--select",
            "E,F,W,I,B,UP",
            "src",
            "tests",
        ],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr


@pytest.mark.parametrize("name", ["Acme", "1shop", "shop!", "a--b", "sagalog", "shop-"])
def test_a_name_that_cannot_be_a_package_and_a_namespace_is_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="project name"):
        ProjectNames.of(name, sagalog_version="0")


def test_a_folder_with_files_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ConfigurationError, match="not empty"):
        create_project(ProjectNames.of("shop", sagalog_version="0"), tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"
    result = CliRunner().invoke(cli, ["new", "shop", "--dir", str(tmp_path)])
    assert result.exit_code == 2 and "not empty" in result.output


def test_its_schemas_are_generated_from_its_classes_and_pass_the_check(project: Path) -> None:
    assert not list((REPO / "src/sagalog/scaffold/template").rglob("*.avsc*")), (
        "the template ships classes, not schemas"
    )
    checked = subprocess.run(
        [sys.executable, "-m", "sagalog", "schemas", "check"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    placed = json.loads((project / "schemas/acme_shop/v1/order_placed.avsc").read_text())
    assert placed["namespace"] == "acme_shop.v1"
    assert [f["name"] for f in placed["fields"]] == ["order_id", "item", "quantity", "amount_cents"]


def test_its_workflow_topic_carries_what_its_flow_names_without_a_list(project: Path) -> None:
    document = yaml.safe_load((project / "topology/topics.yaml").read_text())
    assert "schemas" not in document["topics"]["acme_shop.orders"]
    topology = load_topology(
        project / "topology", known_schemas=SchemaCatalog.load(project / "schemas")
    )
    orders = topology.topic("acme_shop.orders")
    assert orders is not None
    assert {
        "acme_shop.v1.OrderPlaced",
        "acme_shop.v1.PaymentTaken",
        "acme_shop.v1.PaymentRefunded",
        "acme_shop.v1.StockConfirmed",
        "sagalog.v1.CompensationRequested",
        "sagalog.v1.WorkflowCancelled",
    } <= set(orders.schemas)
