"""``sagalog schemas``: the event contracts in ``schemas/``, generated from the event
classes the project's ``pyproject.toml`` names (``cli.event_modules``)."""

from __future__ import annotations

import json

import click

from sagalog.cli.context import Project, pass_project
from sagalog.cli.event_modules import find_event_classes
from sagalog.cli.tables import print_table
from sagalog.contracts.compatibility import RULE
from sagalog.contracts.generated_files import write_files
from sagalog.contracts.schema_check import check_schemas
from sagalog.exit_codes import ExitCode


@click.group()
def schemas() -> None:
    """Event contracts: generate them from the event classes, list them, check them."""


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


@schemas.command("generate")
@pass_project
def generate(project: Project) -> None:
    """Write each event class's .avsc under schemas/ where it is missing or differs.

    The classes are those of the modules [tool.sagalog] event-modules names in the
    project's pyproject.toml (import-paths puts their folders on the import path), and
    the platform's own (sagalog.events). A file equal to its class's schema is left as
    committed; commit what this writes, so the change is reviewed as a contract change.
    """
    root = project.root / "schemas"
    classes = find_event_classes(project.root)
    written, unchanged = write_files(classes, root)
    for path in written:
        click.echo(f"wrote {path.relative_to(project.root)}")
    click.secho(f"ok: {len(written)} written, {unchanged} unchanged", fg="green")


@schemas.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_project
def check(project: Project, as_json: bool) -> None:
    """Check every schema against its class and every committed earlier version.

    Each .avsc must be what its event class generates (run `sagalog schemas generate`),
    and each must have a class. The rule is FULL_TRANSITIVE: new code reads every old
    event (backward) and services still on an older schema read new events (forward). A
    field once marked as personal data (sagalog.personal) must stay marked. Exits 4 when
    a schema breaks either or is not its class's, naming the file, the class and what to
    do; a wrong mark fails at load.
    """
    project.catalog  # noqa: B018 - a file breaking a layout rule is named first
    classes = find_event_classes(project.root)
    report = check_schemas(project.root / "schemas", classes=classes)
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
                    "generated": [str(p) for p in report.generated],
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
        for stale in report.generated:
            click.secho(f"not generated: {stale}", fg="red", err=True)
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
