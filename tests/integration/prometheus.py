"""A real Prometheus server (Debian's ``prometheus``) scraping services of a test.

Started with its own configuration, storage and port in the test's directory, a
one-second scrape interval, and stopped with the test. Queried through its HTTP API
(``/api/v1/query``), the way Grafana and an operator's PromQL would read it.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import external_tools
from sagalog.service_process import free_port


class Prometheus:
    """One Prometheus scraping ``targets`` (job name to ``host:port``) every second."""

    def __init__(self, workdir: Path, targets: Mapping[str, str]) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        jobs = [
            {"job_name": name, "static_configs": [{"targets": [target]}]}
            for name, target in sorted(targets.items())
        ]
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": jobs,
        }
        (workdir / "prometheus.yml").write_text(json.dumps(config))  # YAML is a JSON superset
        self._log = (workdir / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                external_tools.require("prometheus"),
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout_s: float = 60) -> None:
        self.wait(lambda: self._ready(), what="Prometheus ready", timeout_s=timeout_s)

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector of ``promql`` now: ``[{"metric": {...}, "value": [t, "v"]}]``."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def scalar(self, promql: str) -> float | None:
        """The single value of ``promql`` (None when the vector is empty)."""
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def wait(self, check: Callable[[], bool], *, what: str, timeout_s: float = 60) -> None:
        """Poll ``check`` until true; a liveness bound, not a timing assertion."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except OSError:
                pass
            if self._process.poll() is not None:
                raise AssertionError(f"Prometheus exited: {self.tail()}")
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}; Prometheus log: {self.tail()}")

    def tail(self) -> str:
        return (self.workdir / "prometheus.log").read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(15)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._log.close()

    def _ready(self) -> bool:
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
            return bool(answer.status == 200)
