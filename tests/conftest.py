"""Shared test fixtures, the suite's two tiers, and the versions of the real services
named in the test log.

Two tiers, one suite. ``make test`` (``-m "not extended"``) is a newcomer's command:
lint, the unit tests and the integration tests on the shared dev stack, in minutes.
``make test-all`` (what CI runs) adds every test marked ``extended``: those that start a
private stack or a chaos round, those that need an external tool (``tool`` mark,
``external_tools.py``), and those that take over a minute, each saying why in its
docstring. Under CI a skip is a failure: it would hide the coverage it skipped.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import external_tools
import stacks
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.devstack import LocalStack
from sagalog.settings import ClientSettings

if TYPE_CHECKING:
    from chaos.harness import ChaosRun
    from chaos.stack import ChaosStack

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def catalog() -> SchemaCatalog:
    return SchemaCatalog.load(REPO / "schemas")


def _registry_version(url: str) -> str:
    base = url.split("/apis/")[0]
    try:
        with urllib.request.urlopen(f"{base}/apis/registry/v3/system/info", timeout=5) as reply:
            info = json.load(reply)
        return f"{info.get('name')} {info.get('version')}"
    except OSError as exc:
        return f"unreachable ({exc})"


def _kafka_version() -> str:
    try:
        from sagalog.devstack import DevStackSettings, LocalStack

        kafka = LocalStack(DevStackSettings()).status().kafka
        if kafka.state.value != "running":
            return "version unknown: not the local stack"
        return f"{kafka.version}, local stack pid {kafka.pid}"
    except Exception as exc:  # the stack module reports; the header must never break a run
        return f"unknown ({exc.__class__.__name__})"


# A test's level is the folder it lives in, so the marker is given here, once, rather
# than by a `pytestmark` line each module must remember (14 of 16 integration modules
# had forgotten): `-m "not integration"` and `-m "not chaos"` then deselect all of them.
LEVEL_MARKERS = {"integration": "integration", "chaos": "chaos"}


# What puts a test in ``make test-all``'s tier only: it breaks or builds a stack of its
# own, or runs a program a newcomer may not have.
EXTENDED_BY = ("chaos", "private_stack", "tool")
LONG_S = 60.0
"""A test over this belongs to ``make test-all``, and its docstring says why."""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = REPO / "tests"
    for item in items:
        path = Path(str(item.path))
        if not path.is_relative_to(tests):
            continue
        marker = LEVEL_MARKERS.get(path.relative_to(tests).parts[0])
        if marker is not None:
            item.add_marker(marker)
        shape = stacks.shape_of(item)
        if shape is not None:
            item.add_marker("private_stack")
        if any(item.get_closest_marker(name) for name in EXTENDED_BY):
            item.add_marker("extended")
    stacks.order_by_shape(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under xdist, a module's tests stay on one worker, in order, and so do all the
    modules of one private stack's shape, which each worker would otherwise start for
    itself. (xdist's own ``loadgroup`` marks no longer reach its scheduler on pytest 9,
    whose node ids it cannot suffix.) Scopes go out in collection order, which puts
    the modules with a test over a minute first and the quick unit modules last,
    rather than xdist's default of the most tests first, which left the longest
    tests for last."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class ByModuleAndShape(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return stacks.shape_of_module(REPO / module) or module

    return ByModuleAndShape(config, log)


_STACKS = pytest.StashKey[stacks.SharedStacks]()


@pytest.fixture(scope="session")
def private_stacks(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stacks.SharedStacks]:
    """The run's private stacks, one per shape (``stacks.py``)."""
    shared = stacks.SharedStacks(root=tmp_path_factory.mktemp("stacks"), starters=stacks.STARTERS)
    request.config.stash[_STACKS] = shared
    try:
        yield shared
    finally:
        shared.release_all()


@pytest.fixture(scope="session")
def plain_stack(private_stacks: stacks.SharedStacks) -> LocalStack:
    """One plaintext broker and its registry, which a test may stop and start again."""
    return private_stacks.get("plain_stack")  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def secure_stack(private_stacks: stacks.SharedStacks) -> LocalStack:
    """One SASL_SSL broker (and mTLS), ACLs denying by default, and its registry."""
    return private_stacks.get("secure_stack")  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def secure_cluster(private_stacks: stacks.SharedStacks) -> LocalStack:
    """Three SASL_SSL brokers: RF 3, min ISR 2, production's profile."""
    return private_stacks.get("secure_cluster")  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def cluster(private_stacks: stacks.SharedStacks) -> ChaosStack:
    """Three plaintext brokers a test may kill and restart (it leaves them running)."""
    return private_stacks.get("cluster")  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def netns_cluster(private_stacks: stacks.SharedStacks) -> ChaosStack:
    """Three secured brokers, each in a network namespace (the partition rounds)."""
    return private_stacks.get("netns_cluster")  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def chaos_run(private_stacks: stacks.SharedStacks) -> ChaosRun:
    """The reference fleet, supervised, on one broker behind the fault proxy."""
    return private_stacks.get("chaos_run")  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def disk_run(private_stacks: stacks.SharedStacks) -> ChaosRun:
    """The reference fleet on one broker, its data directories on small disks."""
    return private_stacks.get("disk_run")  # type: ignore[no-any-return]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    """After the test's own fixtures are gone, stop a stack the next test does not use."""
    yield
    shared = item.config.stash.get(_STACKS, None)
    if shared is not None:
        stacks.release_after(shared, item, nextitem)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``tool("helm")`` runs only where the tool is (``external_tools``)."""
    for mark in item.iter_markers("tool"):
        for name in mark.args:
            external_tools.require(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under CI a skip fails the test, naming what it skipped and why."""
    outcome = yield
    report = outcome.get_result()
    if external_tools.under_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, where a skip hides what it skipped: {reason}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the tests of ``make test``'s tier that took over a minute: each belongs to
    ``make test-all`` (mark it ``extended``), with a docstring saying why it is long."""
    long = sorted(
        (
            (report.duration, report.nodeid)
            for reports in terminalreporter.stats.values()
            for report in reports
            if isinstance(report, pytest.TestReport)
            and report.when == "call"
            and report.duration > LONG_S
            and "extended" not in report.keywords
        ),
        reverse=True,
    )
    if long:
        terminalreporter.section(f"over {LONG_S:g} s outside make test-all", yellow=True)
        for seconds, nodeid in long:
            terminalreporter.line(f"{seconds:7.1f}s {nodeid}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = ClientSettings()
    return [
        f"kafka: {settings.bootstrap_servers} (Apache Kafka {_kafka_version()})",
        f"schema registry: {settings.schema_registry_url} "
        f"({_registry_version(settings.schema_registry_url)})",
    ]
