"""``make chaos``: every fault against the reference workflow, a table and chaos-results.json.

    PYTHONPATH=services:tests .venv/bin/python -m chaos [--seed N] [--short] [--only broker]
    PYTHONPATH=services:tests .venv/bin/python -m chaos --brokers 3 [--short] [--only wiped]

Starts its own Kafka + registry (ports 29092/29093/28081, override with
``SAGALOG_CHAOS_KAFKA_PORT`` etc.), never the shared stack; exits 1 when any round
fails its checks. ``--brokers 3`` runs the broker-failure rounds of ``cluster.py`` on a
three-broker cluster (node i on the ports + 100 * (i - 1)) instead of the suite.

    PYTHONPATH=services:tests .venv/bin/python -m chaos --netns [--short] [--plaintext]

runs the partition rounds of ``partitions.py`` on the secured three-broker cluster,
each broker, and tracker worker a (the fencing round cuts it off), in a network
namespace of its own (root only; ``netns.py``; ``partitions.HOSTS``): ports
34092/34093/34081 by default, the namespaces and their links removed at the end
(after a killed run: ``python -m chaos.netns cleanup``).

    PYTHONPATH=services:tests .venv/bin/python -m chaos --disks [--only tracker]

runs the full-disk rounds of ``full_disks.py`` (root only): the broker's log
directory, the tracker's and the budget agent's RocksDB directories, each on a small
tmpfs filled and freed (after a killed run: ``python -m chaos.disks cleanup``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

from . import cluster, full_disks, partitions
from .netns import Network
from .stack import ChaosStack
from .suite import COLUMNS, FULL, SHORT, run_suite, table, write_results


def main() -> int:
    # SIGTERM (timeout, CI) unwinds like Ctrl-C, so the stack, the fleet and the
    # namespaces are stopped and removed by the same finally blocks and atexit hooks
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(prog="chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--short", action="store_true", help="the CI subset")
    parser.add_argument("--only", action="append", default=[], help="faults whose name has this")
    parser.add_argument(
        "--brokers", type=int, choices=(1, 3), default=1, help="3: the cluster rounds"
    )
    parser.add_argument("--netns", action="store_true", help="the partition rounds")
    parser.add_argument("--disks", action="store_true", help="the full-disk rounds (root)")
    parser.add_argument(
        "--plaintext", action="store_true", help="--netns without TLS, SCRAM and ACLs"
    )
    parser.add_argument("--output", type=Path, default=Path("chaos-results.json"))
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="sagalog-chaos-"))
    if args.disks:
        columns = full_disks.COLUMNS
        seed, results = full_disks.run_disk_suite(work_dir, seed=args.seed, only=args.only)
    elif args.netns:
        suite = partitions.PARTITIONS_SHORT if args.short else partitions.PARTITIONS
        columns = partitions.COLUMNS
        with Network(partitions.HOSTS) as network:
            stack = netns_stack(work_dir, network, secure=not args.plaintext)
            try:
                seed, results = run_suite(
                    suite, work_dir=work_dir, seed=args.seed, only=args.only, stack=stack
                )
            finally:
                stack.down()
    else:
        if args.brokers == 3:
            suite = cluster.CLUSTER_SHORT if args.short else cluster.CLUSTER
            columns = cluster.COLUMNS
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


NETNS_PORTS = {"kafka_port": 34092, "controller_port": 34093, "registry_port": 34081}


def netns_stack(work_dir: Path, network: Network, *, secure: bool) -> ChaosStack:
    """Three brokers in ``network``'s hosts; ports ``SAGALOG_CHAOS_NETNS_*`` or 340xx."""
    import os

    ports = {
        name: int(os.environ.get(f"SAGALOG_CHAOS_NETNS_{name.upper()}", default))
        for name, default in NETNS_PORTS.items()
    }
    return ChaosStack(
        state_dir=work_dir / "stack",
        broker_count=3,
        network=network,
        secure=secure,
        proxy_port=ports["kafka_port"] + 2,
        **ports,
    )


if __name__ == "__main__":
    sys.exit(main())
