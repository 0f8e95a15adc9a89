"""``sagalog erase``: make one data subject's personal data unreadable, for good.

The subject's data keys are tombstoned in the key topic and a ``SubjectErased`` event
records who erased whom and why (``sagalog.personal.erasure``). Nothing is rewritten:
the envelopes stay in the log, so the hash chain and every audit still verify, and
every reader shows the fields as erased (``docs/personal-data.md``).
"""

from __future__ import annotations

import getpass

import click

from sagalog.cli.context import Project, pass_project
from sagalog.personal.erasure import ERASURES_TOPIC, erase_subject
from sagalog.personal.ring import KEY_TOPIC


@click.command()
@click.argument("subject")
@click.option("--reason", required=True, help="Why, for the audit (e.g. the request's id).")
@click.option("--by", "requested_by", help="Who asks [default: the login name].")
@click.option(
    "--topic", default=ERASURES_TOPIC, show_default=True, help="The topic erasures are recorded in."
)
@pass_project
def erase(
    project: Project, subject: str, reason: str, requested_by: str | None, topic: str
) -> None:
    """Erase SUBJECT's personal data: the value that identifies them, as the schemas'
    subject field holds it (the requester's e-mail address).

    Example:

      sagalog erase user7@example.com --reason "GDPR request 2026-118"
    """
    done = erase_subject(
        project.settings,
        project.catalog,
        subject,
        reason=reason,
        requested_by=requested_by or getpass.getuser(),
        topic=topic,
    )
    held = f"{len(done.key_ids)} key(s) deleted" if done.key_ids else "it had no key left"
    click.echo(
        f"erased subject {done.subject_id}: {held} in {KEY_TOPIC}; recorded at "
        f"{done.topic}/{done.partition}@{done.offset}"
    )
