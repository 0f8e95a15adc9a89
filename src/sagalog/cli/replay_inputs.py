"""What the replay commands load: the tracker's decision settings, its flows, a codec."""

from __future__ import annotations

from typing import Any

from sagalog.cli.context import Project
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.flows.loader import load_flows
from sagalog.flows.registry import FlowRegistry
from sagalog.replay.settings import ReplaySettings


def replay_settings(**overrides: Any) -> ReplaySettings:
    return ReplaySettings(**{k: v for k, v in overrides.items() if v is not None})


def tracker_flows(project: Project, settings: ReplaySettings) -> FlowRegistry:
    flows_dir = settings.flows_dir or project.root / "topology" / "flows"
    return load_flows(flows_dir, catalog=project.catalog, topology=project.topology)


def event_codec(project: Project) -> EventCodec:
    """The codec of a replay: it reads the log as the tracker does, personal fields
    sealed, so the rebuilt state compares equal to the live one and a replay needs no
    personal-data key (``sagalog.personal``)."""
    return EventCodec(catalog=project.catalog, registry=SchemaRegistry(project.settings))
