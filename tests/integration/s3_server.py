"""A real S3 API on localhost for the blob store's tests: gofakes3, built from the Go
module proxy by ``.ci/ensure-tools`` into ``~/.cache/sagalog/tools/bin``.

gofakes3 speaks the S3 REST protocol (signed requests, buckets, objects, metadata) over
HTTP, so boto3 talks to it as to any S3-compatible store; its ``fs`` backend keeps the
objects in a directory of the test.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import external_tools
from sagalog.service_process import free_port

BUCKET = "sagalog-blobs"


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    bucket: str


@pytest.fixture
def s3_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """A fresh S3 server with one bucket; boto3 is given throwaway credentials."""
    binary = external_tools.require("gofakes3")
    port = free_port()
    log = (tmp_path / "gofakes3.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            "-backend",
            "fs",
            "-fs.path",
            str(tmp_path / "s3"),
            "-fs.create",
            "-initialbucket",
            BUCKET,
            "-host",
            f"127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "sagalog-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "sagalog-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    try:
        deadline = time.monotonic() + 30  # a liveness bound, not a timing assertion
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise AssertionError(
                        "gofakes3 did not start: "
                        + (tmp_path / "gofakes3.log").read_text(errors="replace")[-2000:]
                    ) from None
                time.sleep(0.1)
        yield S3Server(f"http://127.0.0.1:{port}", BUCKET)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
