# Any agent of services/ as a container: `python -m <AGENT>`. Build from the repository
# root, which holds the library, the schemas and the services, naming the agent's package:
#   docker build -f deploy/images/agent.Dockerfile --build-arg AGENT=risk_agent -t sagalog/risk-agent .
# One file serves every agent because each agent's settings read SAGALOG_AGENT_* and
# SAGALOG_* below their own prefix (sagalog.settings): the image sets those, and the
# agent's own prefix (RISK_AGENT_BOOTSTRAP_SERVERS, RISK_AGENT_INSTANCE_ID, ...) still
# overrides any of them. Its local state lives in the /var/lib/sagalog volume.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONPATH=/app/services \
    SAGALOG_PROJECT_DIR=/app \
    SAGALOG_AGENT_DATA_DIR=/var/lib/sagalog \
    SAGALOG_HEALTH_PORT=8090
WORKDIR /app

# The library first: its layer changes less often than the services'.
COPY pyproject.toml README.md ./
COPY src ./src
COPY deploy/local ./deploy/local
RUN pip install .

COPY schemas ./schemas
COPY topology ./topology
COPY services ./services

RUN useradd --system --uid 10001 agent \
    && mkdir -p /var/lib/sagalog \
    && chown agent /var/lib/sagalog
USER agent
VOLUME ["/var/lib/sagalog"]
EXPOSE 8090
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health/ready' % os.environ['SAGALOG_HEALTH_PORT'], timeout=2)" || exit 1

# The agent is named last, so every agent's image shares all the layers above (a build
# argument can miss the cache only after its ARG). A name that is no package fails the
# build here rather than the container at its start.
ARG AGENT
RUN test -f "services/$AGENT/__main__.py" \
    || { echo "AGENT='$AGENT' names no package with a __main__ in services/: build with --build-arg AGENT=<package>, e.g. risk_agent" >&2; exit 1; }
ENV AGENT=$AGENT
# exec: the agent replaces the shell as PID 1, so SIGTERM reaches it and it exits 0
# after its batch (docs/service-contract.md).
CMD ["/bin/sh", "-c", "exec python -m \"$AGENT\""]
