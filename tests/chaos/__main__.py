"""``make chaos``: every fault against the reference workflow, a table and chaos-results.json.

    PYTHONPATH=services:tests .venv/bin/python -m chaos [--seed N] [--short] [--only broker]
    PYTHONPATH=services:tests .venv/bin/python -m chaos --brokers 3 [--short] [--only wiped]

Starts its own Kafka + registry (ports 29092/29093/28081, override with
``SAGALOG_CHAOS_KAFKA_PORT`` etc.), never the shared stack; exits 1 when any round
fails its checks. ``--brokers 3`` runs the broker-failure rounds of ``cluster.py`` on a
three-broker cluster (node i on the ports + 100 * (i - 1)) instead of the suite.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from . import cluster
from .suite import COLUMNS, FULL, SHORT, run_suite, table, write_results


def main() -> int:
    parser = argparse.ArgumentParser(prog="chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--short", action="store_true", help="the CI subset")
    parser.add_argument("--only", action="append", default=[], help="faults whose name has this")
    parser.add_argument(
        "--brokers", type=int, choices=(1, 3), default=1, help="3: the cluster rounds"
    )
    parser.add_argument("--output", type=Path, default=Path("chaos-results.json"))
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="sagalog-chaos-"))
    if args.brokers == 3:
        suite, columns = (cluster.CLUSTER_SHORT if args.short else cluster.CLUSTER), cluster.COLUMNS
    else:
        suite, columns = (SHORT if args.short else FULL), COLUMNS
    seed, results = run_suite(
        suite, work_dir=work_dir, seed=args.seed, only=args.only, brokers=args.brokers
    )
    rows = [r.row() for r in results]
    print(f"\nseed {seed}\n" + table(rows, columns))
    for result in results:
        for failure in result.failures:
            print(f"  {result.fault}: {failure}")
    write_results(args.output, seed, results)
    print(f"\nwrote {args.output}; service logs under {work_dir}")
    return 0 if results and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
