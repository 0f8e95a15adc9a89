"""The exit-code contract: one meaning and one restart policy per code, everywhere."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from sagalog import errors
from sagalog.agents.exceptions import ClientHung, ConsumerFailed, TransactionTimedOut, ZombieFenced
from sagalog.exit_codes import CONTRACT, ExitCode, Restart, markdown_table, restart_policy

REPO = Path(__file__).resolve().parents[2]


def test_every_code_has_exactly_one_row() -> None:
    assert [row.code for row in CONTRACT] == list(ExitCode)


def test_a_fenced_zombie_and_a_restart_request_no_longer_share_a_code() -> None:
    assert ZombieFenced.exit_code == ExitCode.FENCED
    assert not restart_policy(ZombieFenced.exit_code).restarts
    for asks_for_restart in (ConsumerFailed, ClientHung, TransactionTimedOut):
        assert asks_for_restart.exit_code == ExitCode.RESTART
        assert restart_policy(asks_for_restart.exit_code) is Restart.AT_ONCE


@pytest.mark.parametrize(
    ("error", "policy"),
    [
        (errors.ConfigurationError, Restart.NO),
        (errors.FlowDefinitionError, Restart.NO),
        (errors.AgentContractError, Restart.NO),
        (errors.IncompatibleDependencyError, Restart.NO),
        (errors.AuthenticationError, Restart.NO),
        (errors.AuthorizationError, Restart.NO),
        (errors.ServiceUnavailableError, Restart.BACKOFF),
        (errors.SagalogError, Restart.BACKOFF),
    ],
)
def test_each_error_family_exits_with_a_code_of_the_contract(
    error: type[errors.SagalogError], policy: Restart
) -> None:
    assert error.exit_code in set(ExitCode)
    assert restart_policy(error.exit_code) is policy


def test_every_error_class_in_the_package_exits_with_a_contract_code() -> None:
    """A new error family cannot invent a code the README's table does not explain."""
    for module in ("agents.exceptions", "audit.exceptions", "replay.exceptions", "cli.main"):
        importlib.import_module(f"sagalog.{module}")  # so that their errors are subclasses

    def subclasses(root: type) -> set[type]:
        found = set(root.__subclasses__())
        for sub in list(found):
            found |= subclasses(sub)
        return found

    for cls in subclasses(errors.SagalogError):
        assert cls.exit_code in set(ExitCode), f"{cls.__qualname__} exits {cls.exit_code}"


def test_a_signal_or_an_unknown_code_is_restarted_with_backoff() -> None:
    assert restart_policy(-9) is Restart.BACKOFF  # SIGKILL, an OOM kill
    assert restart_policy(137) is Restart.BACKOFF
    assert restart_policy(0) is Restart.NO


def test_the_docs_show_the_contract_as_the_module_defines_it() -> None:
    page = (REPO / "docs" / "service-contract.md").read_text()
    shown = "\n".join(line for line in page.splitlines() if line.startswith("|"))
    assert shown == markdown_table(), "render it again: python -c 'from sagalog.exit_codes ...'"


def test_no_service_or_supervisor_spells_an_exit_code_as_a_literal() -> None:
    """The codes are read from the contract, so a supervisor cannot drift from it."""
    literal = re.compile(r"(returncode|exit_code|code)\s*(==|!=|=)\s*(70|7)\b|SystemExit\(\d+\)")
    offenders = []
    for folder in ("src", "services"):
        for path in (REPO / folder).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if literal.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []
