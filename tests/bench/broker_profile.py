"""Where the broker's CPU goes during a run, by request type: a JFR recording, split.

The broker's counters (``broker_metrics``) say how many requests of each kind a saga
costs, not what each kind costs. Issue 23 asks to name the latter, and the answer
decides which saving to chase (fewer fetches, or fewer transactions). The JDK's own
flight recorder samples every Java thread's stack (``settings=profile``: every 10 ms)
at a cost of about 1% to the broker; ``jcmd`` starts and stops it in the running
node, so nothing is restarted or configured ahead.

A sample belongs to the request whose handler is on its stack
(``KafkaApis.handleFetchRequest``, including its callbacks: ``$anonfun$handleFetch...``).
The broker's own threads are named by their thread: the network threads (reading
requests, writing responses), the transaction coordinator's marker and verification
senders, the group coordinator (offset commits land there), the log cleaner
(compacting the changelogs and the internal topics). Work a request handler does off
its request's stack is put back where it belongs: a delayed fetch completed by
another request's append (``DelayedFetch``) is Fetch, a produce finished after its
transaction check (``postVerificationCallback``, ``DelayedProduce``) is Produce.
Only time in Java is sampled: a thread inside a system call (a socket write, an
fsync) is not, so the shares are of the broker's Java CPU.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Sample = tuple[str, list[str]]
"""A sampled thread's name and its frames, innermost first (``package.Class.method``)."""

_API = re.compile(r"KafkaApis\.\$?(?:anonfun\$)?handle([A-Z]\w*?)Request")
_PUT_BACK = (
    ("DelayedFetch.", "Fetch"),
    ("ReplicaManager.postVerificationCallback", "Produce"),
    ("DelayedProduce.", "Produce"),
    ("ReplicaManager.appendRecords", "Produce"),
)
_THREADS = (
    ("network-thread", "network threads (requests in, responses out)"),
    ("TxnMarkerSenderThread", "transaction markers (coordinator to leaders)"),
    ("AddPartitionsToTxnSenderThread", "transaction verification (KIP-890)"),
    ("group-coordinator", "group coordinator (offset commits, heartbeats)"),
    ("log-cleaner", "log cleaner (compaction)"),
    ("raft", "KRaft metadata"),
    ("quorum-controller", "KRaft metadata"),
    ("metadata-loader", "KRaft metadata"),
)


def kind_of(thread: str, frames: list[str]) -> str:
    """What a sample was doing: ``api Fetch``, ``api Produce``..., or its thread's kind."""
    api = None
    for frame in frames:  # innermost first: the outermost handler wins, as it dispatched
        found = _API.search(frame)
        if found:
            api = found.group(1)
    if api is not None:
        return f"api {api}"
    for marker, kind in _THREADS:  # the coordinators' own threads append too: theirs
        if marker in thread:
            return kind
    for frame in frames:
        for marker, put_back in _PUT_BACK:
            if marker in frame:
                return f"api {put_back}"
    return "request handlers, other" if "request-handler" in thread else "other"


def parse_samples(text: str) -> list[Sample]:
    """The execution samples of ``jfr print --events jdk.ExecutionSample``'s output."""
    samples = []
    for block in text.split("jdk.ExecutionSample {")[1:]:
        thread = re.search(r'sampledThread = "([^"]+)"', block)
        frames = re.findall(r"^\s+([\w.$<>]+)\(", block, re.MULTILINE)
        samples.append((thread.group(1) if thread else "?", frames))
    return samples


def shares(samples: Iterable[Sample]) -> dict[str, float]:
    """Each kind's share of the samples, largest first (fractions of 1)."""
    kinds = Counter(kind_of(thread, frames) for thread, frames in samples)
    total = sum(kinds.values())
    return {kind: count / total for kind, count in kinds.most_common()} if total else {}


@dataclass
class BrokerProfiler:
    """A JFR recording of the broker ``pid`` for ``seconds``, written to ``path``."""

    path: Path
    pid: int
    seconds: float
    errors: list[str] = field(default_factory=list)

    def _tool(self, name: str) -> str:
        """The JDK tool beside the broker's own ``java``: the recorder's format is the JDK's."""
        return str(Path(f"/proc/{self.pid}/exe").resolve().parent / name)

    def _jcmd(self, *args: str) -> bool:
        done = subprocess.run(
            [self._tool("jcmd"), str(self.pid), *args], capture_output=True, text=True, timeout=60
        )
        if done.returncode != 0 or "Could not" in done.stdout:
            self.errors.append(f"jcmd {' '.join(args)}: {(done.stdout + done.stderr)[-300:]}")
            return False
        return True

    def record(self) -> None:
        """Record for ``seconds`` (blocking; run it in a thread)."""
        name = f"bench-{self.path.stem}"
        try:
            if not self._jcmd("JFR.start", f"name={name}", "settings=profile"):
                return
            time.sleep(self.seconds)
            self._jcmd("JFR.stop", f"name={name}", f"filename={self.path}")
        except (OSError, subprocess.SubprocessError) as exc:
            self.errors.append(f"JFR on pid {self.pid}: {exc}")

    def summary(self) -> dict[str, Any]:
        """The recording's shares by request type (``shares``), or why there are none."""
        if not self.path.exists():
            return {"errors": self.errors or [f"no recording at {self.path}"]}
        events = ["--events", "jdk.ExecutionSample", "--stack-depth", "96"]
        printed = subprocess.run(
            [self._jfr(), "print", *events, str(self.path)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        samples = parse_samples(printed.stdout)
        return {
            "recording": str(self.path),
            "samples": len(samples),
            "shares": {kind: round(share, 3) for kind, share in shares(samples).items()},
            "errors": self.errors,
        }

    def _jfr(self) -> str:
        tool = Path(self._tool("jfr"))
        return str(tool) if tool.exists() else "jfr"
