"""``python -m sagalog.services.gateway``: serve the gateway until SIGTERM.

Exit codes: 0 stopped, 2 bad configuration or flows, 3 Kafka/registry unreachable.
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from types import FrameType

from sagalog.agents.telemetry import configure_logging
from sagalog.errors import ConfigurationError, SagalogError
from sagalog.exit_codes import ExitCode
from sagalog.services.gateway.settings import GatewaySettings
from sagalog.tracing import configure_tracing

log = logging.getLogger("sagalog.gateway")


def main(settings: GatewaySettings | None = None) -> int:
    """Serve the gateway with ``settings`` (default: read from the environment)."""
    import uvicorn

    from sagalog.contracts.catalog import SchemaCatalog
    from sagalog.contracts.codec import EventCodec
    from sagalog.contracts.registry import SchemaRegistry
    from sagalog.flows.loader import load_flows
    from sagalog.personal.cipher import personal_data
    from sagalog.publisher import EventPublisher
    from sagalog.services.gateway import exported_metrics
    from sagalog.services.gateway.api import create_app
    from sagalog.services.gateway.application import Gateway
    from sagalog.services.gateway.console.routes import ConsoleOptions
    from sagalog.services.gateway.console.stories import LogStories
    from sagalog.services.gateway.dead_letter_log import DeadLetterLog
    from sagalog.services.gateway.dead_letter_operations import DeadLetterOperations
    from sagalog.services.gateway.decisions import SOURCE
    from sagalog.services.gateway.follower import Follower
    from sagalog.services.gateway.read_model import ReadModel
    from sagalog.services.gateway.signatures import WebhookSource
    from sagalog.services.gateway.stream_hub import StreamHub
    from sagalog.topic_names import stream_topic_for
    from sagalog.topology.loader import load_topology
    from sagalog.topology.services import deadletter_topics
    from sagalog.tracker.gates import checked_secret

    settings = settings or GatewaySettings()
    configure_logging(json_lines=settings.json_logs, level=settings.log_level)
    configure_tracing("sagalog-gateway")
    try:
        secret = checked_secret(
            settings.gate_secret,
            setting="GATEWAY_GATE_SECRET",
            remedy="set it to the saga tracker's SAGALOG_TRACKER_GATE_SECRET, or no gate "
            "token will verify",
        )
        keys = [key.get_secret_value().encode() for key in settings.api_keys]
        if not keys:
            raise ConfigurationError(
                "GATEWAY_API_KEYS is empty: set one or more comma-separated keys "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`); "
                "the gateway does not serve /v1 unauthenticated"
            )
        root = Path(settings.project_dir)
        catalog = SchemaCatalog.load(root / "schemas")
        topology = load_topology(root / "topology", known_schemas=catalog)
        flows = load_flows(root / "topology" / "flows", catalog=catalog, topology=topology)
        codec = EventCodec(catalog=catalog, registry=SchemaRegistry(settings))
        personal = personal_data(settings)  # never reveals: the console marks, not opens
        publisher = EventPublisher(
            settings,
            catalog=catalog,
            source=SOURCE,
            codec=codec,
            ack_timeout_s=settings.publish_timeout_s,
        )
    except SagalogError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return exc.exit_code
    model = ReadModel(settings.data_dir / "read-model")
    exported_metrics.export_workflows(model)  # the process ends with the model
    exported_metrics.export_live_connections(model)
    follower = Follower(settings, model=model, codec=codec)
    streams = StreamHub(
        settings,
        topics=[stream_topic_for(flow.topic) for flow in flows],
        group_prefix=f"sagalog-gateway-{settings.instance_id}-",
    )
    gateway = Gateway(
        model=model,
        publisher=publisher,
        flows=flows,
        secret=secret,
        status=lambda: follower.status,
        follower_alive=lambda: follower.alive,
    )
    app = create_app(
        gateway,
        api_keys=keys,
        max_body_bytes=settings.max_body_bytes,
        webhook_source=settings.webhook_source,
        webhook_sources={
            name: WebhookSource(
                secret=source.secret.get_secret_value().encode(), kinds=frozenset(source.kinds)
            )
            for name, source in settings.webhook_sources.items()
        },
        webhook_tolerance_s=settings.webhook_tolerance_s,
        read_only_keys=[key.get_secret_value().encode() for key in settings.read_only_api_keys],
        console=ConsoleOptions(
            session_s=settings.console_session_s,
            secure_cookie=settings.console_secure_cookie,
            is_erased=(
                None
                if personal is None
                else lambda e: personal.keys.reading_key(e.subject, e.key_id) is None
            ),
            stories=LogStories(
                settings,
                codec=codec,
                transitions_topic=settings.transitions_topic,
                timeout_s=settings.connect_timeout_s,
            ),
        ),
        dead_letters=DeadLetterOperations(
            gateway,
            DeadLetterLog(
                settings,
                topics=settings.deadletter_topics or deadletter_topics(topology.services),
                codec=codec,
                timeout_s=settings.dead_letter_read_timeout_s,
            ),
        ),
        streams=streams,
    )
    if not settings.webhook_sources:
        log.warning(
            "GATEWAY_WEBHOOK_SOURCES is empty: webhooks are taken unsigned from anyone with "
            "an API key; list the sources and their secrets before exposing the gateway"
        )
    # uvicorn shuts down gracefully on SIGTERM, then restores the handler it found and
    # raises the signal again, so that the process dies of it (exit -15, 143 in a
    # shell): a supervisor would read that as a crash. The handler it finds is this
    # one, which ends the process with 0 after the cleanup below, as the exit-code
    # contract says; before uvicorn starts, it stops the start-up the same way.
    signal.signal(signal.SIGTERM, _stopped)
    follower.start()
    streams.start()
    try:
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_config=None,
            log_level=settings.log_level.lower(),
            timeout_graceful_shutdown=10,
        )
    finally:
        follower.stop()
        streams.stop()
        publisher.close()
        model.close()
    return 0


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(ExitCode.STOPPED)


if __name__ == "__main__":
    sys.exit(main())
