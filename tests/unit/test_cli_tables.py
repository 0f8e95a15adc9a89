"""The CLI's tables off a terminal: one line per row however long, no colour, no
trailing spaces, numbers aligned right, cells printed as written (never as markup)."""

from __future__ import annotations

import pytest

from sagalog.cli.tables import print_fields, print_table


def test_a_piped_table_is_one_plain_line_per_row(capsys: pytest.CaptureFixture[str]) -> None:
    long_reason = "the ledger call is built wrong " * 10
    print_table(
        ["POSITION", "LEVEL", "REASON"],
        [["dlq/0/42", "0", long_reason.strip()], ["dlq/0/7", "12", "[env X] not set"]],
        right={1},
    )
    out = capsys.readouterr().out
    assert "\x1b" not in out
    header, first, second = out.splitlines()
    assert header.split() == ["POSITION", "LEVEL", "REASON"]
    assert first.split()[:2] == ["dlq/0/42", "0"] and first.endswith(long_reason.strip())
    assert second.endswith("12  [env X] not set")
    # LEVEL is right-aligned: its cells end where its header ends.
    end = header.index("LEVEL") + len("LEVEL")
    assert first[end - 1] == "0" and second[end - 2 : end] == "12"
    assert all(line == line.rstrip() for line in out.splitlines())


def test_forced_colour_never_wraps_a_piped_row(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    print_table(["ID", "REASON"], [["wf-1", "x" * 300]])
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_indent_and_fields(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(["workflow", "changed"], [["wf-1", "state"]], indent=2)
    print_fields([("state", "completed"), ("workflow", "wf-1"), ("replays", "")])
    assert capsys.readouterr().out.splitlines() == [
        "  workflow  changed",
        "  wf-1      state",
        "state     completed",
        "workflow  wf-1",
        "replays",
    ]
