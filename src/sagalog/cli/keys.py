"""``sagalog keys``: the key-encryption keys (KEKs) of personal data.

An operator rotates in this order (``docs/personal-data.md``): ``add-kek`` a new KEK
(not current) and give the KEK set file to every service; ``set-current`` it and
give the file out again; ``rotate``; ``status`` until no key is under the old KEK;
then the old KEK may leave the file.
"""

from __future__ import annotations

from pathlib import Path

import click

from sagalog.cli.context import Project, pass_project
from sagalog.cli.progress_bars import ProgressBars
from sagalog.errors import PersonalDataError
from sagalog.personal.cipher import personal_data
from sagalog.personal.keys import KekSet, new_kek
from sagalog.personal.ring import KEY_TOPIC
from sagalog.personal.rotation import kek_counts, rotate_keys


@click.group()
def keys() -> None:
    """Key-encryption keys of personal data: add, make current, rotate."""


def _kek_file(project: Project) -> Path:
    if not project.settings.personal_data_kek_file:
        raise PersonalDataError(
            "SAGALOG_PERSONAL_DATA_KEK_FILE is not set: set it to the path of the KEK set "
            "file every service of these workflows will share (it is created there)"
        )
    return Path(project.settings.personal_data_kek_file)


@keys.command("add-kek")
@click.argument("kek_id")
@click.option("--current", is_flag=True, help="Make it the KEK that wraps new data keys.")
@pass_project
def add_kek(project: Project, kek_id: str, current: bool) -> None:
    """Add a new random KEK named KEK_ID to the KEK set file (created if missing).

    Example:

      sagalog keys add-kek 2026-12
    """
    path = _kek_file(project)
    held = KekSet.load(path) if path.exists() else None
    if held is not None and kek_id in held.keys:
        raise PersonalDataError(f"the KEK set file {path} already holds KEK '{kek_id}'")
    keys_ = dict(held.keys) if held is not None else {}
    keys_[kek_id] = new_kek()
    chosen = kek_id if current or held is None else held.current
    KekSet(current=chosen, keys=keys_, origin=str(path)).save(path)
    click.echo(f"added KEK '{kek_id}' to {path}; current: '{chosen}'")


@keys.command("set-current")
@click.argument("kek_id")
@pass_project
def set_current(project: Project, kek_id: str) -> None:
    """Make KEK_ID the KEK that wraps new data keys (and that ``rotate`` re-wraps under)."""
    path = _kek_file(project)
    held = KekSet.load(path)
    KekSet(current=kek_id, keys=held.keys, origin=str(path)).save(path)
    click.echo(f"current KEK in {path}: '{kek_id}'")


@keys.command()
@pass_project
def status(project: Project) -> None:
    """How many data keys each KEK wraps in the key topic (after a rotation: only the
    current one's, and then the others may leave the KEK set file)."""
    personal = personal_data(project.settings)
    if personal is None:
        raise PersonalDataError(
            "no personal-data key is configured: set SAGALOG_PERSONAL_DATA_KEY_FILE"
        )
    try:
        personal.keys.catch_up()
        records = personal.keys.index.records()
        counts = kek_counts(personal.keys.service, (wrapped for _, _, wrapped in records))
        current = personal.keys.service.current_kek
    finally:
        personal.close()
    for kek, count in sorted(counts.items()):
        click.echo(f"{kek}\t{count}" + ("\tcurrent" if kek == current else ""))
    if not counts:
        click.echo(f"no data keys in {KEY_TOPIC}; current KEK: '{current}'")


@keys.command()
@pass_project
def rotate(project: Project) -> None:
    """Re-wrap every subject's data keys under the current KEK; no event is rewritten.

    Safe to run again: an interrupted rotation resumes, a finished one writes nothing.
    """
    bars = ProgressBars()
    try:
        done = rotate_keys(project.settings, progress=lambda n, t: bars.show("re-wrap", n, t))
    finally:
        bars.close()
    before = ", ".join(f"{k}: {n:,}" for k, n in sorted(done.by_kek_before.items())) or "none"
    click.echo(
        f"re-wrapped {done.rewrapped:,} key(s) under KEK '{done.kek}' in {KEY_TOPIC} "
        f"({done.rate:,.0f}/s, {done.seconds:.1f} s); {done.already:,} were already under "
        f"it; before: {before}"
        + (f"; {done.repaired} erased during the rotation, erased again" if done.repaired else "")
    )
