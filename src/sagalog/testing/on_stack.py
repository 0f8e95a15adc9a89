"""Watching a workflow on a real cluster, for tests that run a project's services.

The in-memory tiers (``TrackerHarness``, ``FlowTestEnvironment``) need no broker;
this is the tier above them: the project's services as processes
(``ServiceProcess``) on the cluster the settings name, and the test reads the log.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import ServiceUnavailableError
from sagalog.settings import ClientSettings
from sagalog.tail import tail


def wait_for_event(
    settings: ClientSettings,
    topic: str,
    *,
    workflow_id: str,
    event_type: str,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """The payload of the first ``event_type`` of ``workflow_id`` on ``topic`` (committed
    records only), read from the beginning on a real cluster; for tests that run a
    project's services and watch a workflow go through.

    Raises:
        ServiceUnavailableError: none came within ``timeout_s``; the message lists the
            event types the workflow did have, which usually says where it stopped.
    """
    codec = EventCodec(
        catalog=SchemaCatalog.load(Path(settings.project_dir) / "schemas"),
        registry=SchemaRegistry(settings),
    )
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    for record in tail(settings, codec, topic, workflow_id=workflow_id, idle_timeout_s=timeout_s):
        if record.event_type == event_type and record.payload is not None:
            return record.payload
        seen.append(str(record.event_type))
        if time.monotonic() > deadline:
            break
    raise ServiceUnavailableError(
        f"no {event_type} of workflow {workflow_id!r} on {topic} within {timeout_s:g}s; "
        f"it has {seen or 'no events'}"
    )
