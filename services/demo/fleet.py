"""Every service of the reference workflow as its own OS process, started and stopped as one.

The demo and the end-to-end test run the same fleet: three effect stand-ins (budget
ledger, ERP, mail), the saga tracker on a virtual clock, the gateway, and the six
agent services, each with its own settings (env prefix), data directory, consumer
group and log file under ``run_dir/logs``. Nothing is shared between the processes
but Kafka, the registry and the stand-ins' HTTP APIs, as in a real deployment.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagalog import client_config
from sagalog.errors import ServiceUnavailableError
from sagalog.exit_codes import Restart, restart_policy
from sagalog.service_process import free_port
from sagalog.settings import ClientSettings

SERVICES_DIR = Path(__file__).resolve().parents[1]

WORKFLOWS = ("procurement", "filing")


@dataclass(frozen=True)
class AgentProcess:
    """How the fleet runs an agent service: its settings' env prefix, the stand-in
    each URL setting points at, and the workflow whose topic it serves."""

    prefix: str
    standins: dict[str, str]
    workflow: str


AGENTS: dict[str, AgentProcess] = {
    "intake_agent": AgentProcess("INTAKE_AGENT", {}, "procurement"),
    "retrieval_agent": AgentProcess("RETRIEVAL_AGENT", {}, "procurement"),
    "risk_agent": AgentProcess("RISK_AGENT", {}, "procurement"),
    "budget_agent": AgentProcess("BUDGET_AGENT", {"ledger_url": "ledger"}, "procurement"),
    "purchasing_agent": AgentProcess("PURCHASING_AGENT", {"erp_url": "erp"}, "procurement"),
    "notification_agent": AgentProcess("NOTIFICATION_AGENT", {"mail_url": "mail"}, "procurement"),
    "records_agent": AgentProcess("RECORDS_AGENT", {"records_url": "records"}, "filing"),
    "drafting_agent": AgentProcess(
        "DRAFTING_AGENT", {"registers_url": "registers", "llm_base_url": "model"}, "filing"
    ),
    "submission_agent": AgentProcess("SUBMISSION_AGENT", {"regulator_url": "regulator"}, "filing"),
}
STANDINS = {
    "procurement": ("ledger", "erp", "mail"),
    # the model is an OpenAI-compatible stand-in (standins.model), the rest effect stand-ins
    "filing": ("records", "registers", "regulator", "model"),
}


@dataclass
class Service:
    """One process of the fleet: how to start it, and the running process."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    reaped: int = 0
    """The start whose exit was last counted (``Fleet.reap``)."""

    def start(self) -> Service:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as handle:
            self.process = subprocess.Popen(
                self.argv, env=self.env, stdout=handle, stderr=subprocess.STDOUT
            )
        self.starts += 1
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no goodbye, no flush; what a crash or an OOM kill does."""
        if self.alive:
            assert self.process is not None
            self.process.kill()
            self.process.wait(10)
        self.reaped = self.starts  # killed on purpose: not an exit of its own

    def stop(self, timeout: float = 30) -> None:
        if not self.alive:
            return
        assert self.process is not None
        self.reaped = self.starts  # stopped on purpose: not an exit of its own
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def tail(self, lines: int = 20) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class FleetConfig:
    """Names and places of one fleet; the defaults are the demo's."""

    run_dir: Path
    settings: ClientSettings
    gate_secret: str
    api_key: str
    topic: str = "procurement.events"
    filing_topic: str = "filings.events"
    workflows: tuple[str, ...] = ("procurement",)
    """The reference workflows whose agents and stand-ins run (``WORKFLOWS``)."""
    blob_dir: Path | None = None
    """The blob store every service shares (``SAGALOG_BLOB_DIR``); None: payloads inline."""
    transitions_topic: str = "sagalog.transitions"
    alerts_topic: str = "sagalog.alerts"
    deadletter_topic: str = "sagalog.deadletter"
    # The names of topology/services.yaml, so the ACLs derived for them fit the demo.
    tracker_app_id: str = "saga-tracker"
    agent_suffix: str = ""
    gateway_port: int = 0
    retry_base_delay_s: float = 0.2
    retry_max_delay_s: float = 2.0
    max_attempts: int = 3
    #: Each service's own login (``SAGALOG_SASL_*`` or its client certificate) by
    #: principal name, on a cluster with ACLs; None: every service connects as
    #: ``settings`` does.
    login: Callable[[str], dict[str, str]] | None = None
    tracker_service: str = "saga-tracker"  # the names of topology/services.yaml
    gateway_service: str = "gateway"
    launch_prefixes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """What a service's command line runs under, by service name (``ip netns exec
    <namespace>``: the chaos suite's fencing round cuts a tracker worker off in a
    network namespace); a service not named runs as is."""


@dataclass
class Fleet:
    config: FleetConfig
    services: dict[str, Service] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)
    health: dict[str, str] = field(default_factory=dict)
    """Where each tracker, agent and gateway answers ``/health/live`` and ``/health/ready``."""
    restarted: Counter[str] = field(default_factory=Counter)
    exits: list[tuple[str, int]] = field(default_factory=list)
    """Every exit a service made on its own, ``(name, exit code)``, in order (``reap``)."""
    _supervisor_stop: threading.Event | None = None

    # -- starting ----------------------------------------------------------------

    def start_all(self) -> None:
        self.start_standins()
        tracker = self.start_tracker()
        self.wait_for_log(tracker, "tables ready", timeout=120)  # its changelogs exist now
        self.start_gateway()
        for module, process in AGENTS.items():
            if process.workflow in self.config.workflows:
                self.start_agent(module)

    def start_standins(self) -> dict[str, str]:
        names = [name for w in self.config.workflows for name in STANDINS[w]]
        for name in names:
            port = free_port()
            server = ["standins.model"] if name == "model" else ["standins.server", name]
            self._launch(name, ["-m", *server, "--port", str(port)], {})
            self.urls[name] = f"http://127.0.0.1:{port}"
        for name in names:
            self._wait_http(name, f"{self.urls[name]}/health")
        return dict(self.urls)

    @property
    def service_count(self) -> int:
        """The processes ``start_all`` starts: stand-ins, tracker, gateway, agents."""
        workflows = self.config.workflows
        agents = sum(1 for p in AGENTS.values() if p.workflow in workflows)
        return sum(len(STANDINS[w]) for w in workflows) + 2 + agents

    def topic_of(self, workflow: str) -> str:
        return self.config.filing_topic if workflow == "filing" else self.config.topic

    def start_tracker(self, instance: str = "a") -> Service:
        c = self.config
        name = f"tracker-{instance}"
        env = self._client_env(c.tracker_service) | _prefixed(
            "SAGALOG_TRACKER_",
            **self._health_port(name),
            app_id=c.tracker_app_id,
            instance_id=instance,
            data_dir=c.run_dir / "data" / f"tracker-{instance}",
            gate_secret=c.gate_secret,
            clock="virtual",
            transitions_topic=c.transitions_topic,
            alerts_topic=c.alerts_topic,
            deadletter_topic=c.deadletter_topic,
            commit_interval_s=0.5,
            sla_interval_s=3600,
        )
        return self._launch(name, ["-m", "sagalog.services.tracker"], env)

    def start_gateway(self) -> Service:
        c = self.config
        port = c.gateway_port or free_port()
        self.urls["gateway"] = self.health["gateway"] = f"http://127.0.0.1:{port}"
        env = self._client_env(c.gateway_service) | _prefixed(
            "GATEWAY_",
            port=port,
            api_keys=c.api_key,
            gate_secret=c.gate_secret,
            tracker_app_id=c.tracker_app_id,
            transitions_topic=c.transitions_topic,
            deadletter_topics=c.deadletter_topic,  # the agents' (the console lists them)
            data_dir=c.run_dir / "data" / "gateway",
        )
        return self._launch("gateway", ["-m", "sagalog.services.gateway"], env)

    def start_agent(self, module: str, instance: str = "a") -> Service:
        c = self.config
        process = AGENTS[module]
        name = module if instance == "a" else f"{module}-{instance}"
        # A URL the environment already sets is kept: DRAFTING_AGENT_LLM_BASE_URL names
        # a real model instead of the stand-in.
        standins = {
            setting: standin
            for setting, standin in process.standins.items()
            if f"{process.prefix}_{setting.upper()}" not in os.environ
        }
        values: dict[str, Any] = {
            **self._health_port(name),
            "name": self.agent_name(module),
            "topic": self.topic_of(process.workflow),
            "instance_id": instance,
            "data_dir": c.run_dir / "data" / f"{module}-{instance}",
            "deadletter_topic": c.deadletter_topic,
            "retry_base_delay_s": c.retry_base_delay_s,
            "retry_max_delay_s": c.retry_max_delay_s,
            "max_attempts": c.max_attempts,
            **{setting: self.urls[standin] for setting, standin in standins.items()},
        }
        if module == "purchasing_agent":
            values["gate_secret"] = c.gate_secret
        env = self._client_env(values["name"]) | _prefixed(f"{process.prefix}_", **values)
        return self._launch(name, ["-m", module], env)

    def agent_name(self, module: str) -> str:
        """The agent's name (and so its group, ``sagalog-agent-<name>``) in this fleet."""
        return module.replace("_", "-") + self.config.agent_suffix

    def restart(self, name: str) -> Service:
        service = self.services[name]
        service.kill()
        return service.start()

    def supervise(self, *, every_s: float = 1.0) -> None:
        """Restart, as an orchestrator would, every service that exits ``RESTART`` (70).

        70 is the services' "restart me" (``sagalog.exit_codes``): a tracker worker
        whose watchdog saw a partition stall, an agent whose clients could not be
        rebuilt. They exit rather than limp on, so without a supervisor the demo
        would stop with them. Other exits are left for ``dead`` to report: in a
        demo a bug (1) or a bad setting (2) must show, not be restarted away.
        """
        stop = threading.Event()
        self._supervisor_stop = stop

        def loop() -> None:
            while not stop.wait(every_s):
                for name, code in self.reap():
                    if restart_policy(code) is Restart.AT_ONCE:
                        self.services[name].start()
                        self.restarted[name] += 1

        threading.Thread(target=loop, name="demo-supervisor", daemon=True).start()

    def reap(self, *, skip: frozenset[str] = frozenset()) -> list[tuple[str, int]]:
        """The exits not counted yet (each start's exit once), appended to ``exits``.

        A service stopped on purpose (``stop``, ``kill``) is not an exit of its own:
        those go through ``Service.stop``/``kill`` and are marked reaped there.
        """
        found = []
        for name, service in list(self.services.items()):
            process = service.process
            if name in skip or process is None or service.reaped == service.starts:
                continue
            code = process.poll()
            if code is not None:
                service.reaped = service.starts
                found.append((name, code))
        self.exits.extend(found)
        return found

    # -- the stand-ins -------------------------------------------------------------

    def faults(self, standin: str, **faults: Any) -> dict[str, Any]:
        return _post(f"{self.urls[standin]}/faults", faults)

    def calls(self, standin: str) -> list[list[Any]]:
        """A stand-in's log of every call (``GET /calls``), in arrival order."""
        with urllib.request.urlopen(f"{self.urls[standin]}/calls", timeout=10) as reply:
            return list(json.load(reply)["calls"])

    def effects(self, standin: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.urls[standin]}/effects", timeout=10) as reply:
            return dict(json.load(reply))

    # -- stopping and checking -----------------------------------------------------

    def stop_all(self) -> None:
        if self._supervisor_stop is not None:
            self._supervisor_stop.set()
        for service in reversed(list(self.services.values())):
            service.stop()

    def dead(self) -> list[Service]:
        """Services that exited on their own (a crash, a bad setting)."""
        return [
            s
            for s in self.services.values()
            if s.process is not None
            and not s.alive
            and s.process.returncode not in (0, -signal.SIGKILL, -signal.SIGTERM)
        ]

    def wait_for_log(self, service: Service, text: str, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if service.log.exists() and text in service.log.read_text(errors="replace"):
                return
            if not service.alive:
                raise ServiceUnavailableError(
                    f"{service.name} exited while starting; its log ends:\n{service.tail()}"
                )
            time.sleep(0.2)
        raise ServiceUnavailableError(f"{service.name} did not log {text!r} within {timeout:g}s")

    def wait_gateway_ready(self, timeout: float = 120) -> None:
        self.wait_ready("gateway", timeout=timeout)

    def wait_ready(self, name: str, *, timeout: float = 120) -> float:
        """Wait until service ``name`` answers 200 on ``/health/ready``; the seconds it took."""
        started = time.monotonic()
        self._wait_http(name, f"{self.health[name]}/health/ready", timeout=timeout)
        return time.monotonic() - started

    # -- internals -----------------------------------------------------------------

    def _launch(self, name: str, argv: list[str], env: dict[str, str]) -> Service:
        service = Service(
            name=name,
            argv=[*self.config.launch_prefixes.get(name, ()), sys.executable, *argv],
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    [str(SERVICES_DIR), os.environ.get("PYTHONPATH", "")]
                ),
                "PYTHONUNBUFFERED": "1",
                "PYTHONFAULTHANDLER": "1",  # a native crash (exit -11) logs its stacks
                **env,
            },
            log=self.config.run_dir / "logs" / f"{name}.log",
        )
        self.services[name] = service
        return service.start()

    def _health_port(self, name: str) -> dict[str, Any]:
        """The health endpoints' settings of service ``name``: a free port on loopback."""
        port = free_port()
        self.health[name] = f"http://127.0.0.1:{port}"
        return {"health_host": "127.0.0.1", "health_port": port}

    def _client_env(self, principal: str) -> dict[str, str]:
        """The connection, once, as ``SAGALOG_*`` (every service's settings read it), then
        the service's own login where the cluster has one per principal."""
        s = self.config.settings
        env = client_config.environment(
            s.model_copy(update={"project_dir": str(Path(s.project_dir).resolve())})
        )
        if self.config.blob_dir is not None:
            env["SAGALOG_BLOB_DIR"] = str(self.config.blob_dir)
        if self.config.login is not None:
            env |= self.config.login(principal)
        return env

    def _wait_http(self, name: str, url: str, *, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            service = self.services.get(name)
            if service is not None and not service.alive:
                raise ServiceUnavailableError(
                    f"{name} exited while starting; its log ends:\n{service.tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        raise ServiceUnavailableError(f"{name} did not answer {url} within {timeout:g}s")


def _prefixed(prefix: str, **values: Any) -> dict[str, str]:
    return {f"{prefix}{key.upper()}": str(value) for key, value in values.items()}


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return dict(json.load(reply))
