"""Running an agent as a service process: the exit codes a supervisor acts on.

Separate from the declaration so that declaring an agent imports nothing of the
runtime (no Kafka client, no RocksDB): the declaration is data that flows, tests and
``sagalog flows check`` read, and the runtime depends on it, never the reverse.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from sagalog.agents.declaration import Agent
from sagalog.agents.exceptions import ConsumerFailed, ZombieFenced
from sagalog.agents.settings import AgentSettings
from sagalog.agents.worker import AgentWorker, Member
from sagalog.errors import AuthorizationError, ConfigurationError, ServiceUnavailableError


def run_agent(agent: Agent, settings: AgentSettings | None = None) -> None:
    """Run ``agent`` until SIGTERM or SIGINT (blocking).

    Exits the process with the codes of ``sagalog.exit_codes``: 7 (``FENCED``) when
    fenced by a newer instance with the same instance id: this one is a zombie, and a
    supervisor must not restart it, or it would fence its replacement in turn; 70
    (``RESTART``, restart at once) when the consumer was fenced more often
    than ``max_rejoins`` allows (each fencing before that is cured in-process by new
    clients, see ``recovery``); with 3 when Kafka did not answer for
    ``outage_limit_s``; with 6 when the cluster denies it a right (the message names
    principal, operation and resource; a restart would not help until the ACLs are
    applied); with 2 when the agent does not fit its project (its handlers against the
    flows that name it, its event types against the schemas): nothing starts, and the
    message names the agent, the flow and the step.
    """
    settings = settings or AgentSettings()
    run_together([(agent, settings)], settings)


def run_together(members: Sequence[Member], settings: AgentSettings) -> None:
    """Run several agents in one process until SIGTERM or SIGINT (blocking).

    Each agent keeps its handlers and its own settings (``members``); they share one
    consumer, one producer and one transaction per batch, under ``settings`` (the
    cluster, the instance id, the data folder, batching). Exits as ``run`` does; every
    agent is checked against the project before any starts.
    """
    try:
        worker = AgentWorker(members, settings)  # binds each agent to the project's flows
        worker.run()
    except (
        ConfigurationError,
        ZombieFenced,
        ConsumerFailed,
        ServiceUnavailableError,
        AuthorizationError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
