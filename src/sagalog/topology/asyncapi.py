"""The AsyncAPI 3.0 document of a project, generated from what the project already says.

Channels are the declared topics; messages are the Avro schemas of ``schemas/`` with
the CloudEvents headers every sagalog event carries; operations say which service
sends and which receives each message, and follow from the flows (an agent receives
what starts its step and sends what completes it; it receives the tracker's
``CompensationRequested`` and sends what completes the undo) and from the platform's
own services (the tracker reads every workflow topic and writes gates, compensation
requests, transitions and alerts; the gateway writes decisions and webhooks). None
of it is written by hand, so it cannot drift from the code that runs: a test parses
it with the official AsyncAPI parser and its Avro schema parser.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from sagalog.contracts.catalog import EventSchema
from sagalog.contracts.headers import (
    H_CAUSATION_ID,
    H_CORRELATION_ID,
    H_FLOW_VERSION,
    H_ID,
    H_PRIORITY,
    H_SOURCE,
    H_SPECVERSION,
    H_TIME,
    H_TRACEPARENT,
    H_TYPE,
    H_WORKFLOW_ID,
)
from sagalog.errors import TopologyError
from sagalog.flows.model import (
    COMPENSATION_REQUESTED,
    EFFECT_RECORDED,
    GATE_DECIDED,
    GATE_OPENED,
    STEP_FAILED,
    WEBHOOK_RECEIVED,
    Flow,
)
from sagalog.topology.model import Topology
from sagalog.topology.services import GatewayService, TrackerService

AVRO_FORMAT = "application/vnd.apache.avro;version=1.9.0"
VERSION = "3.0.0"

TRACKER_SENDS_ON_WORKFLOW = (GATE_OPENED, COMPENSATION_REQUESTED, STEP_FAILED)
AGENT_SENDS_ON_FAILURE = (STEP_FAILED, EFFECT_RECORDED)
GATEWAY_SENDS = (GATE_DECIDED, WEBHOOK_RECEIVED)
TRANSITION = "sagalog.v1.StateTransition"
ALERT = "sagalog.v1.TrackerAlert"

HEADERS: dict[str, Any] = {
    "type": "object",
    "description": "The CloudEvents Kafka binding (binary mode) and sagalog's own metadata.",
    "required": [H_SPECVERSION, H_ID, H_SOURCE, H_TYPE, H_TIME],
    "properties": {
        H_SPECVERSION: {"type": "string", "const": "1.0"},
        H_ID: {"type": "string", "description": "The event id, also its idempotency key."},
        H_SOURCE: {"type": "string", "description": "The service that published it."},
        H_TYPE: {"type": "string", "description": "The Avro full name of the payload."},
        H_TIME: {"type": "string", "format": "date-time"},
        H_WORKFLOW_ID: {"type": "string", "description": "Also the record key."},
        H_CAUSATION_ID: {"type": "string", "description": "The id of the event it reacts to."},
        H_CORRELATION_ID: {"type": "string"},
        H_FLOW_VERSION: {"type": "string", "description": "The flow version it runs under."},
        H_PRIORITY: {"type": "string"},
        H_TRACEPARENT: {"type": "string", "description": "W3C trace context."},
    },
}


def _ident(text: str) -> str:
    """An AsyncAPI map key: letters, digits, '_' and '-' only."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


class _Operations:
    """Who sends and receives which message on which channel, each fact once."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, str, str], set[str]] = defaultdict(set)

    def add(self, service: str, action: str, topic: str, event_types: Iterable[str]) -> None:
        self.by_key[(service, action, topic)].update(event_types)


def asyncapi_document(
    topology: Topology,
    flows: Iterable[Flow],
    catalog: Mapping[str, EventSchema],
    *,
    title: str,
    version: str,
    bootstrap_servers: str,
) -> dict[str, Any]:
    """The project's AsyncAPI 3.0 document as plain data (dump it as YAML or JSON).

    Raises:
        TopologyError: a flow or a service names a topic the topology does not declare,
            or an event type without a schema; the message names both.
    """
    topics = {spec.name: spec for spec in topology.topics}
    tracker = next((s for s in topology.services if isinstance(s, TrackerService)), None)
    gateway = next((s for s in topology.services if isinstance(s, GatewayService)), None)
    tracker_name = tracker.name if tracker is not None else "saga-tracker"
    ops = _Operations()
    flows = list(flows)
    for flow in flows:
        _require_topic(topics, flow.topic, f"flow '{flow.name}' v{flow.version}")
        every_event = set(topics[flow.topic].schemas)
        ops.add(tracker_name, "receive", flow.topic, every_event)
        sends = [t for t in TRACKER_SENDS_ON_WORKFLOW if t in every_event]
        ops.add(tracker_name, "send", flow.topic, sends)
        for step in flow.steps:
            ops.add(step.agent, "receive", flow.topic, step.starts_on)
            ops.add(step.agent, "send", flow.topic, step.completes_on)
            ops.add(
                step.agent,
                "send",
                flow.topic,
                [t for t in AGENT_SENDS_ON_FAILURE if t in every_event],
            )
            undo = step.compensation or step.irreversible
            if undo is not None:
                ops.add(step.agent, "receive", flow.topic, [COMPENSATION_REQUESTED])
                ops.add(step.agent, "send", flow.topic, undo.completes_on)
        if gateway is not None:
            ops.add(
                gateway.name, "send", flow.topic, [t for t in GATEWAY_SENDS if t in every_event]
            )
    if tracker is not None:
        ops.add(tracker.name, "send", tracker.transitions_topic, [TRANSITION])
        ops.add(tracker.name, "send", tracker.alerts_topic, [ALERT])
    if gateway is not None:
        ops.add(gateway.name, "receive", gateway.transitions_topic, [TRANSITION])

    channels: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for spec in topology.topics:
        channel_messages = {}
        for event_type in spec.schemas:
            schema = catalog.get(event_type)
            if schema is None:
                raise TopologyError(
                    f"topic '{spec.name}' declares {event_type}, which has no schema in "
                    "schemas/; add its .avsc or remove it from the topic"
                )
            messages[event_type] = _message(schema)
            channel_messages[_ident(event_type)] = {"$ref": f"#/components/messages/{event_type}"}
        channels[_ident(spec.name)] = {
            "address": spec.name,
            "description": spec.description or f"The topic {spec.name}.",
            "messages": channel_messages,
            "bindings": {"kafka": {"partitions": spec.partitions, "bindingVersion": "0.5.0"}},
        }

    operations: dict[str, Any] = {}
    for (service, action, topic), event_types in sorted(ops.by_key.items()):
        _require_topic(topics, topic, f"service '{service}'")
        declared = set(topics[topic].schemas)
        chosen = sorted(t for t in event_types if t in declared)
        if not chosen:
            continue
        channel = _ident(topic)
        operations[_ident(f"{service}.{action}.{topic}")] = {
            "action": action,
            "title": f"{service} {action}s on {topic}",
            "channel": {"$ref": f"#/channels/{channel}"},
            "messages": [{"$ref": f"#/channels/{channel}/messages/{_ident(t)}"} for t in chosen],
            "tags": [{"name": service}],
        }

    return {
        "asyncapi": VERSION,
        "info": {
            "title": title,
            "version": version,
            "description": (
                "Generated by `sagalog topology asyncapi` from topology/, schemas/ and the "
                f"flows ({', '.join(sorted(f'{f.name} v{f.version}' for f in flows))}). "
                "Every record is keyed by its workflow id; payloads are Avro in the "
                "Confluent wire format, registered under TopicRecordNameStrategy."
            ),
        },
        "defaultContentType": "application/avro",
        "servers": {
            "kafka": {
                "host": bootstrap_servers.split(",")[0],
                "protocol": "kafka",
                "description": "The cluster of the SAGALOG_BOOTSTRAP_SERVERS setting.",
            }
        },
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages},
    }


def _message(schema: EventSchema) -> dict[str, Any]:
    name = schema.name.rsplit(".", 1)[-1]
    return {
        "name": name,
        "title": schema.name,
        "summary": str(schema.definition.get("doc", "")) or schema.name,
        "contentType": "application/avro",
        "headers": HEADERS,
        "payload": {"schemaFormat": AVRO_FORMAT, "schema": dict(schema.definition)},
        "bindings": {
            "kafka": {
                "key": {"type": "string", "description": "The workflow id."},
                "schemaIdLocation": "payload",
                "schemaLookupStrategy": "TopicRecordNameStrategy",
                "bindingVersion": "0.5.0",
            }
        },
    }


def _require_topic(topics: Mapping[str, object], topic: str, who: str) -> None:
    if topic not in topics:
        raise TopologyError(
            f"{who} uses topic '{topic}', which topology/topics.yaml does not declare; "
            "declare it (with its schemas) or correct the name"
        )
