"""The names of the topics sagalog's runtimes own: the tracker app's (all prefixed
with its app id), each agent's retry and claims topics, and the model streams.

faust derives the tracker's from the app id; they are written here once so the
tracker's startup, the gateway, the audit, the replay and the ACLs (everything under
``<app id>-`` is the tracker's) agree with faust without building the strings by
hand. A leaf module at the bottom of the package: ``sagalog.topology`` names these
topics in its ACLs and sits below both runtimes (``sagalog.flows`` reads it), so the
names can live in neither the tracker nor the agent runtime.
"""

from __future__ import annotations

RECORDS_TABLE = "records"
"""The tracker's table of workflow records (``sagalog.tracker.tables.Table.RECORDS``):
its changelog is what the gateway follows, the audit reads and a replay rebuilds."""


def changelog_topic(app_id: str, table: str) -> str:
    """faust's changelog of one table: ``<app id>-<table>-changelog``."""
    return f"{app_id}-{table}-changelog"


def records_changelog(app_id: str) -> str:
    """The changelog of the tracker's workflow records: ``<app id>-records-changelog``."""
    return changelog_topic(app_id, RECORDS_TABLE)


def assignor_topic(app_id: str) -> str:
    """faust's leader-election topic (one partition): ``<app id>-__assignor-__leader``."""
    return f"{app_id}-__assignor-__leader"


def owned_prefix(app_id: str) -> str:
    """Every topic the tracker app creates starts with this (changelogs, clock, assignor)."""
    return f"{app_id}-"


def retry_topic_for(agent: str) -> str:
    """The agent's internal retry topic (created by the runtime, like faust's changelogs)."""
    return f"sagalog.agent.{agent}.retry"


def claims_topic_for(agent: str) -> str:
    """The agent's internal budget claims topic (created by the runtime of an agent
    that declares budgets): each model call's claim, written before the call, read by
    the next holder of its input partition (``sagalog.budgets.claims``)."""
    return f"sagalog.agent.{agent}.claims"


STREAM_TOPIC_PREFIX = "sagalog.stream."


def stream_topic_for(workflow_topic: str) -> str:
    """The live model output of the workflows on ``workflow_topic``
    (``sagalog.streams``): same partitions, keyed by workflow id, short retention,
    written by the agents that stream, read by the gateway. Never the audit log."""
    return f"{STREAM_TOPIC_PREFIX}{workflow_topic}"
