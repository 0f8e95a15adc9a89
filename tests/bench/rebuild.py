"""``sagalog replay rebuild`` speed: a live tracker's log rebuilt into a fresh store, and diffed.

A throwaway project (``tests.bench.tracker.Lab``) is preloaded with ``N`` workflows of
the test flow x 4 input events; a tracker worker (virtual clock) takes every one to
its gate (``tests.bench.tracker.run_live``). Then ``sagalog replay rebuild`` runs as
its own process, as a user runs it, into a fresh store, and must report no mismatch.
The figures come from its ``--json`` report:

- ``rebuild_events_per_s``: workflow-topic records (inputs and the tracker's echoes)
  per second of the replay phase: read, decoded as the tracker reads them, decided by
  the tracker's processor, written to RocksDB with their offsets;
- ``rebuild_wall_s``: the whole command: start-up, planning, the journal (the
  transitions topic), the replay, the changelog read and the diff.

``python -m tests.bench.rebuild [--workflows N]`` prints the dict.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sagalog.settings import ClientSettings

from .tracker import REPO, SECRET, Lab, run_live


def measure_rebuild(workflows: int = 12_500, *, partitions: int = 3) -> dict[str, Any]:
    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="sagalog-rebuild-bench-") as tmp:
        scratch = Path(tmp)
        lab = Lab(ClientSettings(), scratch, partitions=partitions, progress=progress).setup()
        try:
            live = run_live(lab, workflows, progress=progress)
            if live.error:
                return {"rebuild_error": live.error}
            if not lab.wait_committed(lab.app_id, timeout=120):
                return {"rebuild_error": "the tracker did not commit its whole input"}
            records = lab.changelog_counts(lab.app_id).get("records", 0)
            progress(f"{lab.suffix}: tracker done ({records:,} changelog records); rebuilding")
            command = [
                sys.executable,
                "-m",
                "sagalog",
                "--project-dir",
                str(lab.root),
                "replay",
                "rebuild",
                "--store",
                str(scratch / "rebuilt"),
                "--app-id",
                lab.app_id,
                "--transitions-topic",
                lab.transitions_topic,
                "--json",
            ]
            env = {
                **os.environ,
                "SAGALOG_TRACKER_GATE_SECRET": SECRET,
                "PYTHONPATH": str(REPO / "services"),
            }
            started = time.monotonic()
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            wall = time.monotonic() - started
            if done.returncode not in (0, 1):
                return {"rebuild_error": done.stderr[-2000:]}
            report = json.loads(done.stdout)
            return {
                "rebuild_workflows": report["workflows"]["rebuilt"],
                "rebuild_records": report["records"],
                "rebuild_input_events": live.inputs,
                "rebuild_journal_records": report["journal"]["records"],
                "rebuild_replay_s": report["seconds"],
                "rebuild_events_per_s": report["events_per_s"],
                "rebuild_wall_s": round(wall, 2),
                "rebuild_mismatches": len(report["mismatches"]),
                "rebuild_live_tracker_events_per_s": round(live.events_per_s or 0, 1),
            }
        finally:
            for problem in lab.close():
                progress(f"cleanup: {problem}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=12_500)
    args = parser.parse_args()
    print(json.dumps(measure_rebuild(args.workflows), indent=2))


if __name__ == "__main__":
    main()
