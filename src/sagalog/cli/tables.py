"""The CLI's tables on stdout, drawn by rich: one look for every command that lists things.

Every command prints its tables through here, so none configures rich on its own and
they all read alike: no box, two spaces between columns, the header in bold on a
terminal. Where rows go decides their width. On a terminal a table fits the window
and a long cell wraps within its column (folded, never cut: tokens and ids are
copied from these tables). Anywhere else (a pipe, a file, a CI log, a test) a row is
one line however long, with no colour and no trailing spaces, so ``grep``, ``awk``
and ``cut`` keep working on it. Cells are text, never rich markup: a reason that
holds ``[brackets]`` prints as it is.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

import click
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

UNBOUNDED = 100_000
"""The width of a table that is not on a terminal: wide enough that no row wraps."""


def print_table(
    header: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    right: Collection[int] = (),
    indent: int = 0,
) -> None:
    """``rows`` under ``header``; the columns at the indexes in ``right`` (numbers)
    aligned right; every line ``indent`` spaces in."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for index, title in enumerate(header):
        table.add_column(
            Text(title), justify="right" if index in right else "left", overflow="fold"
        )
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    _print(table, indent=indent)


def print_fields(fields: Iterable[tuple[str, str]]) -> None:
    """One ``label  value`` line per field, the values lined up after the longest label."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in fields:
        grid.add_row(Text(label), Text(value))
    _print(grid)


def _print(renderable: RenderableType, *, indent: int = 0) -> None:
    console = Console(highlight=False)
    if not (console.is_terminal and console.file.isatty()):
        console.width = UNBOUNDED  # FORCE_COLOR may colour a pipe, never wrap its rows
    if indent:
        renderable = Padding(renderable, (0, 0, 0, indent), expand=False)
    with console.capture() as captured:
        console.print(renderable)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))
