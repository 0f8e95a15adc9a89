"""What the tracker checks and prepares before faust starts, each failure a clear message.

The flows must load (an invalid flow is refused, naming it), the gate secret must be
set, every workflow topic must exist with one common partition count (faust gives a
worker partition *p* of all of them together), and the clock topic is created with
that count when missing, with faust's assignor topic, both on the cluster profile.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError, KafkaException

from sagalog.backoff import RetryPolicy, retry_within
from sagalog.cluster import connect_admin, internal_topic
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import ConfigurationError, ServiceUnavailableError, TopologyError
from sagalog.flows.loader import load_flows
from sagalog.flows.registry import FlowRegistry
from sagalog.services.tracker.clock import TrackerClock
from sagalog.services.tracker.settings import TrackerSettings
from sagalog.topic_names import assignor_topic
from sagalog.topology.loader import load_topology
from sagalog.tracker.gates import NEW_SECRET, checked_secret
from sagalog.tracker.ticks import clock_topic, last_tick_ms


def load_registry(settings: TrackerSettings) -> tuple[FlowRegistry, SchemaCatalog]:
    root = Path(settings.project_dir)
    catalog = SchemaCatalog.load(root / "schemas")
    topology = load_topology(root / "topology", known_schemas=catalog)
    flows_dir = settings.flows_dir or root / "topology" / "flows"
    registry = load_flows(flows_dir, catalog=catalog, topology=topology)
    if not len(registry):
        raise ConfigurationError(
            f"no flows in {flows_dir}: add a flow file (topology/flows/<flow>.v1.yaml) or "
            "point SAGALOG_TRACKER_FLOWS_DIR at them"
        )
    return registry, catalog


def check_secret(settings: TrackerSettings) -> bytes:
    return checked_secret(
        settings.gate_secret,
        setting="SAGALOG_TRACKER_GATE_SECRET",
        remedy="set it to a long random value shared by every tracker worker and the "
        f"gateway ({NEW_SECRET})",
    )


STARTUP_BACKOFF = RetryPolicy(base_delay_s=0.5, max_delay_s=5.0)


def prepare_topics(settings: TrackerSettings, registry: FlowRegistry) -> int:
    """The common partition count of the workflow topics; creates the clock topic if missing.

    A broker away at start (restarting, its leader moving) is waited for, with backoff,
    up to six times ``connect_timeout_s``; past that, ``ServiceUnavailableError`` (exit 3).
    """
    admin, metadata = retry_within(
        lambda: connect_admin(settings),
        policy=STARTUP_BACKOFF,
        within_s=settings.connect_timeout_s * 6,
        retry_on=(ServiceUnavailableError,),
    )
    counts: dict[str, int] = {}
    for topic in sorted({flow.topic for flow in registry}):
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            raise TopologyError(
                f"workflow topic {topic} does not exist; run `sagalog topology apply` first"
            )
        counts[topic] = len(found.partitions)
    if len(set(counts.values())) != 1:
        listing = ", ".join(f"{t}: {n}" for t, n in counts.items())
        raise TopologyError(
            f"the tracker's workflow topics differ in partition count ({listing}); give them "
            "one count in topology/topics.yaml, or run one tracker app per count"
        )
    partitions = next(iter(counts.values()))
    ticks = clock_topic(settings.app_id)
    existing = metadata.topics.get(ticks)
    if existing is not None and existing.error is None and len(existing.partitions) != partitions:
        raise TopologyError(
            f"clock topic {ticks} has {len(existing.partitions)} partitions, the "
            f"workflow topics {partitions}; delete it (it only holds ticks) and restart"
        )
    wanted = [
        internal_topic(settings, ticks, partitions=partitions, config={"retention.ms": "86400000"}),
        # faust's group leader topic, created here so it gets the profile's min ISR too
        # (faust would create it with a replica count and the broker's defaults).
        internal_topic(settings, assignor_topic(settings.app_id), partitions=1, config={}),
    ]
    missing = [t for t in wanted if t.topic not in metadata.topics]
    if missing:
        for future in admin.create_topics(missing).values():
            try:
                future.result(timeout=settings.connect_timeout_s)
            except TimeoutError as exc:  # future.result's own timeout, not a KafkaException
                raise ServiceUnavailableError(
                    f"Kafka at {settings.bootstrap_servers} did not create the tracker's "
                    f"topics ({', '.join(t.topic for t in missing)}) within "
                    f"{settings.connect_timeout_s:g}s; start the tracker again"
                ) from exc
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another worker
                    raise
    return partitions


def make_clock(settings: TrackerSettings, partitions: int) -> TrackerClock:
    start = 0
    if settings.clock == "virtual":
        start = last_tick_ms(settings, clock_topic(settings.app_id))
    return TrackerClock(settings.clock, start_ms=start)


def make_codec(settings: TrackerSettings, catalog: SchemaCatalog) -> EventCodec:
    return EventCodec(catalog=catalog, registry=SchemaRegistry(settings))
