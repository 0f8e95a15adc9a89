"""The tracker's decision-path bench runs (it had silently broken when the sink's
signature changed: nothing ran it between benchmark sessions). Figures are not checked
here; the bench prints them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_processor_bench_decides_every_event_it_is_given() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.processor", "--workflows", "25", "--batch-size", "7"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    figures = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert figures["processor_events"] == 100  # 4 events x 25 workflows
    assert figures["processor_published"] >= 100  # a transition per event at least
