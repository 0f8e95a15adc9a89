# The saga tracker: one faust worker, `sagalog run tracker`, from the installed wheel.
# Build from the repository root: docker build -f deploy/images/tracker.Dockerfile -t sagalog/tracker .
# The project it tracks (schemas/ and topology/flows) is copied in at /app; mount your own there.
# Its RocksDB tables live in the /var/lib/sagalog-tracker volume: one per worker, never shared.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    SAGALOG_PROJECT_DIR=/app \
    SAGALOG_TRACKER_DATA_DIR=/var/lib/sagalog-tracker \
    SAGALOG_HEALTH_PORT=8090

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
COPY deploy/local ./deploy/local
RUN pip install .

COPY schemas ./schemas
COPY topology ./topology

RUN useradd --system --uid 10001 tracker \
    && mkdir -p /var/lib/sagalog-tracker && chown tracker /var/lib/sagalog-tracker
USER tracker
VOLUME /var/lib/sagalog-tracker
EXPOSE 8090
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health/ready' % os.environ['SAGALOG_HEALTH_PORT'], timeout=2)" || exit 1
# Required at run time: SAGALOG_TRACKER_GATE_SECRET (the gateway's GATEWAY_GATE_SECRET),
# SAGALOG_BOOTSTRAP_SERVERS, SAGALOG_SCHEMA_REGISTRY_URL; SAGALOG_TRACKER_INSTANCE_ID per worker.
# Exit codes: sagalog.exit_codes (docs/service-contract.md): 70 asks for a restart at once;
# 2, 5 and 6 are not restarted (fix the named input first).
CMD ["sagalog", "run", "tracker"]
