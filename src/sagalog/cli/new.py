"""``sagalog new NAME``: start a project of one's own."""

from __future__ import annotations

from pathlib import Path

import click

from sagalog import __version__
from sagalog.scaffold import ProjectNames, create_project


@click.command("new")
@click.argument("name")
@click.option(
    "--dir",
    "target",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write it [default: ./NAME]; must not exist or be empty.",
)
def new(name: str, target: Path | None) -> None:
    """Write a new sagalog project NAME: its events, a topology with one flow, an agent
    with a compensation, tests (in memory and on `sagalog dev up`) and a Dockerfile.

    NAME becomes the Python package and the Avro namespace (`acme-orders` gives
    `acme_orders`); a name that cannot be both is refused (exit 2), as is a folder
    that holds files already.
    """
    names = ProjectNames.of(name, sagalog_version=__version__)
    folder = target if target is not None else Path(name)
    written = create_project(names, folder)
    click.echo(f"wrote {len(written)} files to {folder}/; next:")
    click.echo(f"  cd {folder}")
    click.echo('  python -m venv .venv && .venv/bin/pip install -e ".[dev]"')
    click.echo("  .venv/bin/sagalog dev up && .venv/bin/sagalog topology apply")
    click.echo("  .venv/bin/pytest")
