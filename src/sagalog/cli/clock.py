"""``sagalog clock``: read and move a virtual-clock tracker's time.

A tracker started with ``SAGALOG_TRACKER_CLOCK=virtual`` fires timers only when its
clock topic says time has passed. ``sagalog clock advance 24h`` makes a day pass:
every escalation and deadline due in it fires, in due order, within seconds.
"""

from __future__ import annotations

import datetime as dt

import click

from sagalog.cli.context import Project, pass_project
from sagalog.durations import format_duration, positive_duration_ms
from sagalog.errors import ConfigurationError
from sagalog.tracker.ticks import clock_topic, last_tick_ms, tick_all

_APP_ID = click.option(
    "--app-id",
    default="saga-tracker",
    show_default=True,
    envvar="SAGALOG_TRACKER_APP_ID",
    help="The tracker application whose clock to read or move.",
)


@click.group()
def clock() -> None:
    """Read and move the time of a tracker running with a virtual clock."""


def _text(ms: int) -> str:
    if ms == 0:
        return "never ticked (time 0)"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="seconds")


@clock.command("show")
@_APP_ID
@pass_project
def show(project: Project, app_id: str) -> None:
    """Print the tracker's current time (the latest tick)."""
    click.echo(_text(last_tick_ms(project.settings, clock_topic(app_id))))


@clock.command("advance")
@click.argument("duration")
@_APP_ID
@pass_project
def advance(project: Project, duration: str, app_id: str) -> None:
    """Move the clock DURATION forward (e.g. 90s, 30m, 24h, 3d)."""
    try:
        step = positive_duration_ms(duration)
    except ValueError as exc:
        raise ConfigurationError(f"duration {duration!r}: {exc}") from None
    topic = clock_topic(app_id)
    now = last_tick_ms(project.settings, topic)
    if now == 0:
        raise ConfigurationError(
            f"{app_id}'s clock never ticked: start it at a time first with "
            "`sagalog clock set <ISO time>` (or `sagalog clock set now`)"
        )
    tick_all(project.settings, topic, now + step)
    click.echo(f"{_text(now)} + {format_duration(step)} = {_text(now + step)}")


@clock.command("set")
@click.argument("when")
@_APP_ID
@pass_project
def set_time(project: Project, when: str, app_id: str) -> None:
    """Set the clock to WHEN (ISO 8601, or `now`); it never goes back."""
    if when == "now":
        target = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    else:
        try:
            parsed = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigurationError(
                f"{when!r} is not an ISO 8601 time; e.g. 2027-01-15T08:00:00Z, or `now`"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        target = int(parsed.timestamp() * 1000)
    topic = clock_topic(app_id)
    now = last_tick_ms(project.settings, topic)
    if target < now:
        raise ConfigurationError(
            f"{_text(target)} is before the clock's time {_text(now)}: a clock never goes back"
        )
    tick_all(project.settings, topic, target)
    click.echo(_text(target))
