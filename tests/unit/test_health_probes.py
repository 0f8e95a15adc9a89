"""The health contract: what /health/live and /health/ready answer, and the server."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sagalog.agents import probes as agent_probes
from sagalog.disk_space import problem_key, problem_text
from sagalog.errors import ConfigurationError
from sagalog.exit_codes import ExitCode
from sagalog.health import HealthBook, Verdict, liveness, readiness
from sagalog.health_server import HealthServer, serve_health
from sagalog.service_process import LISTEN_PORTS, free_port
from sagalog.services.tracker.caught_up import unread
from sagalog.settings import ServiceSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_loop_that_went_round_within_the_bound_is_live() -> None:
    assert liveness(last_progress=990, now=1000, bound_s=60).ok
    stuck = liveness(last_progress=900, now=1000, bound_s=60)
    assert not stuck.ok and stuck.body["status"] == "stuck"
    assert stuck.body["loop_seen_s_ago"] == 100


def test_riding_out_a_named_outage_is_live_however_long_it_takes() -> None:
    """A restart would not bring the broker back: the probe must not ask for one."""
    verdict = liveness(last_progress=0, now=1000, bound_s=60, riding_out=["kafka"])
    assert verdict.ok and verdict.body["riding_out"] == ["kafka"]


def test_ready_only_once_started_and_waiting_for_nothing() -> None:
    book = HealthBook(clock=Clock())
    assert readiness(book, waiting_for=[]).body["waiting_for"] == ["starting"]
    book.ready()
    assert readiness(book, waiting_for=[]).ok
    waiting = readiness(book, waiting_for=["hydration: 2 partition(s)"])
    assert not waiting.ok and waiting.body["waiting_for"] == ["hydration: 2 partition(s)"]


def test_a_degraded_service_is_still_ready() -> None:
    book = HealthBook(clock=Clock())
    book.ready()
    book.degrade("kafka", "all brokers down")
    verdict = readiness(book, waiting_for=[])
    assert verdict.ok and verdict.body["status"] == "degraded"


def test_an_agent_is_ready_once_assigned_and_hydrated_and_not_while_stopping() -> None:
    health = HealthBook(clock=Clock())
    health.ready()
    waiting = agent_probes.ready(health=health, joined=False, hydrating=0, stopping=False)
    assert waiting.body["waiting_for"] == [
        "assignment: the group has not assigned this instance yet"
    ]
    hydrating = agent_probes.ready(health=health, joined=True, hydrating=2, stopping=False)
    assert "hydration: 2 partition(s)" in hydrating.body["waiting_for"][0]
    assert agent_probes.ready(health=health, joined=True, hydrating=0, stopping=False).ok
    assert not agent_probes.ready(health=health, joined=True, hydrating=0, stopping=True).ok


def test_an_agent_reconnecting_through_an_outage_stays_live() -> None:
    health = HealthBook(clock=Clock())
    assert not agent_probes.live(health=health, last_progress=0, now=600, bound_s=120).ok
    health.degrade("kafka", "all brokers down")
    assert agent_probes.live(health=health, last_progress=0, now=600, bound_s=120).ok


def test_an_agent_waiting_on_a_full_disk_is_live_and_not_ready_and_says_where() -> None:
    health = HealthBook(clock=Clock())
    health.ready()
    directory = Path("/data/budget-agent/a")
    health.degrade(problem_key(directory), problem_text(directory, f"{directory}/000004.log"))
    verdict = agent_probes.ready(health=health, joined=True, hydrating=0, stopping=False)
    assert not verdict.ok
    [waiting] = verdict.body["waiting_for"]
    assert waiting.startswith(f"no space left on device for {directory} (writing ")
    assert agent_probes.live(health=health, last_progress=0, now=600, bound_s=120).ok
    health.recover(problem_key(directory))
    assert agent_probes.ready(health=health, joined=True, hydrating=0, stopping=False).ok


def get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, json.load(reply)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


@pytest.fixture
def served() -> Any:
    answers = {"live": Verdict(True, {"status": "live"}), "ready": Verdict(False, {"w": 1})}

    def ready() -> Verdict:
        if "raise" in answers:
            raise RuntimeError("probe broke")
        return answers["ready"]

    server = HealthServer(live=lambda: answers["live"], ready=ready, host="127.0.0.1").start()
    yield server, answers
    server.stop()


def test_the_server_answers_200_or_503_with_the_verdicts_body(served: Any) -> None:
    server, answers = served
    assert get(server.port, "/health/live") == (200, {"status": "live"})
    assert get(server.port, "/health/ready") == (503, {"w": 1})
    answers["ready"] = Verdict(True, {"w": 0})
    assert get(server.port, "/health/ready?verbose=1") == (200, {"w": 0})


def test_an_unknown_path_is_404_naming_the_known_ones(served: Any) -> None:
    server, _ = served
    code, body = get(server.port, "/healthz")
    assert code == 404 and "/health/live" in body["error"]


def test_a_probe_that_raises_is_503_with_the_error_not_a_hang(
    served: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server, answers = served
    answers["raise"] = True
    with caplog.at_level("WARNING", logger="sagalog.health"):
        code, body = get(server.port, "/health/ready")
    assert code == 503 and "probe broke" in body["error"]
    assert any(  # fails closed, and the service's log says why
        "/health/ready" in r.getMessage() and "RuntimeError: probe broke" in r.getMessage()
        for r in caplog.records
    )


def test_timers_wait_unless_the_partition_was_read_to_its_end() -> None:
    assert unread(high=120, position=120) is None
    assert unread(high=120, position=100) == "20 record(s) not read yet"
    assert unread(high=None, position=100) == "not fetched yet"  # fails closed
    assert unread(high=120, position=None) == "not fetched yet"


def test_a_record_committed_after_the_last_fetch_holds_the_timers() -> None:
    """The cached high watermark says "read"; the broker's end, asked at the tick, says
    one record came since (the event that lost to its timeout in CI)."""
    assert unread(high=120, position=120, stable=121) == "1 record(s) written since the last fetch"
    assert unread(high=120, position=120, stable=120) is None
    # A position past the stable end: an open transaction's records were not delivered
    # (read_committed); nothing committed waits.
    assert unread(high=125, position=125, stable=120) is None
    assert unread(high=125, position=120, stable=120) == "5 record(s) not read yet"


def test_records_fetched_but_queued_behind_the_batch_hold_the_timers() -> None:
    """The consumer's position counts a record read once it is handed to the batches;
    the timers wait until a batch decided it."""
    assert unread(120, 120, 120, handed=120, decided=118) == "read to offset 120, decided to 118"
    assert unread(120, 120, 120, handed=120, decided=None) == "read to offset 120, decided to none"
    assert unread(120, 120, 120, handed=120, decided=120) is None
    # Nothing handed under this assignment (an empty partition, read to its end).
    assert unread(120, 120, 120, handed=None, decided=None) is None


def test_no_port_no_server() -> None:
    settings = ServiceSettings(_env_file=None)  # type: ignore[call-arg]
    assert settings.health_port is None
    assert (
        serve_health(settings, live=lambda: Verdict(True, {}), ready=lambda: Verdict(True, {}))
        is None
    )


def test_a_taken_health_port_is_a_configuration_error_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = ServiceSettings(_env_file=None, health_port=port, health_host="127.0.0.1")  # type: ignore[call-arg]
        with pytest.raises(ConfigurationError, match=f"SAGALOG_HEALTH_PORT={port}") as error:
            serve_health(settings, live=lambda: Verdict(True, {}), ready=lambda: Verdict(True, {}))
    assert error.value.exit_code == ExitCode.CONFIGURATION  # not restarted in a loop


def test_ports_for_listeners_come_from_below_the_ephemeral_range_never_twice() -> None:
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(port in LISTEN_PORTS and port < 32768 for port in ports)
