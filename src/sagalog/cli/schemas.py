"""``sagalog schemas``: the event contracts in ``schemas/``."""

from __future__ import annotations

import json

import click

from sagalog.cli.context import Project, pass_project
from sagalog.cli.tables import print_table
from sagalog.contracts.compatibility import RULE
from sagalog.contracts.schema_check import check_schemas
from sagalog.exit_codes import ExitCode


@click.group()
def schemas() -> None:
    """Event contracts: list them and check their evolution."""


@schemas.command("list")
@pass_project
def list_schemas(project: Project) -> None:
    """List every event type with its file and fields."""
    print_table(
        ["EVENT TYPE", "FILE", "FIELDS"],
        [
            [name, str(schema.path), ", ".join(schema.field_names)]
            for name, schema in sorted(project.catalog.items())
        ],
    )


@schemas.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_project
def check(project: Project, as_json: bool) -> None:
    """Check every schema against every committed earlier version.

    The rule is FULL_TRANSITIVE: new code reads every old event (backward) and
    services still on an older schema read new events (forward). A field once marked
    as personal data (sagalog.personal) must stay marked. Exits 4 when a schema breaks
    either, naming the schema, the field and the rule; a wrong mark fails at load.
    """
    report = check_schemas(project.root / "schemas")
    if as_json:
        click.echo(
            json.dumps(
                {
                    "rule": RULE,
                    "ok": report.ok,
                    "checked": report.checked,
                    "incompatibilities": [str(i) for i in report.incompatibilities],
                    "deleted": report.deleted,
                    "warnings": report.warnings,
                    "personal_data": report.personal_data,
                },
                indent=2,
            )
        )
    else:
        for warning in report.warnings:
            click.secho(f"warning: {warning}", fg="yellow", err=True)
        for name, versions in sorted(report.checked.items()):
            click.echo(f"checked {name} against {versions} committed version(s)")
        for problem in report.incompatibilities:
            click.secho(f"incompatible: {problem}", fg="red", err=True)
        for unmarked in report.personal_data:
            click.secho(f"personal data: {unmarked}", fg="red", err=True)
        for path, commit in sorted(report.deleted.items()):
            click.secho(
                f"deleted: {path} was removed in commit {commit}; old events of that type can "
                "no longer be decoded by new code: restore it (deprecate, never delete)",
                fg="red",
                err=True,
            )
        if report.ok:
            click.secho(f"ok: {len(report.checked)} schema(s) satisfy {RULE}", fg="green")
    if not report.ok:
        raise SystemExit(ExitCode.REFUSED)
