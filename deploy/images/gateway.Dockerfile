# The sagalog gateway: `sagalog run gateway` on port 8080, from the installed wheel.
# Build from the repository root: docker build -f deploy/images/gateway.Dockerfile -t sagalog/gateway .
# The project it serves (schemas/ and topology/) is copied in at /app; mount your own there.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=8080 \
    GATEWAY_PROJECT_DIR=/app \
    GATEWAY_DATA_DIR=/var/lib/sagalog-gateway

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
COPY deploy/local ./deploy/local
RUN pip install .

# The contract and the flows the gateway checks requests against.
COPY schemas ./schemas
COPY topology ./topology

RUN useradd --system --uid 10001 gateway \
    && mkdir -p /var/lib/sagalog-gateway && chown gateway /var/lib/sagalog-gateway
USER gateway
VOLUME /var/lib/sagalog-gateway
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health/ready' % os.environ['GATEWAY_PORT'], timeout=2)" || exit 1
# Required at run time: GATEWAY_API_KEYS, GATEWAY_GATE_SECRET, GATEWAY_BOOTSTRAP_SERVERS,
# GATEWAY_SCHEMA_REGISTRY_URL (and GATEWAY_TRACKER_APP_ID if the tracker's is not the default).
# Exit codes: sagalog.exit_codes (docs/service-contract.md); 2, 5, 6 and 7 are not restarted.
CMD ["sagalog", "run", "gateway"]
