"""Hosts on one bridge, each in a network namespace of its own, and the faults between them.

The chaos suite's network faults must fall between two brokers while a client still
reaches both, which a proxy in front of the brokers cannot do. So each broker (and
each service a round cuts off) runs in a Linux network namespace with an address of
its own on one bridge, and faults are the kernel's: ``iptables`` DROP rules inside
the namespaces cut and heal links (Jepsen's way), ``iptables -m statistic`` drops a
share of the packets. Everything else of the run (the registry, the fleet, the
harness) stays in the machine's own namespace and reaches the hosts through a veth
pair whose end has the subnet's first address.

The layout, for prefix ``sgf`` and subnet 10.231.7.0/24::

    root namespace: sgf-host 10.231.7.1/24 ──┐
    namespace sgf-sw: bridge br0 ────────────┤ (the switch; no address)
    namespace sgf-k1: eth0 10.231.7.11/24 ───┤
    namespace sgf-k2: eth0 10.231.7.12/24 ───┘ ...

The bridge lives in a namespace of its own, so the machine's own firewall (and
``bridge-nf-call-iptables``) never sees the frames between hosts. Only names that
start with the prefix are made, and ``cleanup`` removes exactly those: the
``Network`` context manager and an ``atexit`` hook do it at the end of a run, and
``python -m chaos.netns cleanup`` after one that was killed.

These machines' kernel has no netem qdisc (``CONFIG_NET_SCH_NETEM`` is not set:
"Specified qdisc kind is unknown"), so ``tc netem`` can neither delay nor drop a
packet here: ``lose`` drops them with iptables' statistic match, and ``delay`` uses
netem where the kernel has it (``netem_available``) and a delay line elsewhere
(``delay_line.py``: iptables' NFQUEUE hands each packet to a process that holds it).

Root only (``CAP_NET_ADMIN``); ``iproute2`` and ``iptables`` from Debian's packages.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ipaddress
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "sgf"
"""Every namespace and link the harness makes starts with this (``sgf-...``)."""
SUBNET = "10.231.7.0/24"
"""A private /24 unlikely to be in use; ``Network.create`` refuses one that is."""
FIRST_HOST = 11
"""Hosts get .11, .12, ... in the order given; .1 is the machine's own end."""
BRIDGE = "br0"
DELAY_QUEUE = 7
"""The NFQUEUE number of the delay lines (queues are per namespace)."""
ETC_NETNS = Path("/etc/netns")
"""``ip netns exec`` bind-mounts ``/etc/netns/<name>/<file>`` over ``/etc/<file>``."""


class NetworkError(RuntimeError):
    """A namespace, link, address or rule could not be made; the command and its answer."""


def run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)
    if check and done.returncode != 0:
        raise NetworkError(
            f"`{' '.join(command)}` failed (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[:400]}"
        )
    return done


@dataclass(frozen=True)
class Host:
    """One machine of the test network: a namespace, its address, how to run in it."""

    name: str
    namespace: str
    address: str

    @property
    def prefix(self) -> tuple[str, ...]:
        """Put before a command line to run it in this host (``ip netns exec`` execs
        the command itself, so the pid a launcher records is the program's)."""
        return ("ip", "netns", "exec", self.namespace)

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(*self.prefix, *command, check=check)


def netem_available() -> bool:
    """Whether this kernel has tc's netem qdisc (it is a module or built in, or not)."""
    probe = f"{PREFIX}-probe"
    run("ip", "netns", "add", probe, check=False)
    try:
        done = run(
            "ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
            "delay", "1ms", check=False,
        )  # fmt: skip
        return done.returncode == 0
    finally:
        run("ip", "netns", "del", probe, check=False)


@dataclass
class Network:
    """A bridge and one namespace per host name; faults between them; cleaned up always.

    Example:
        >>> with Network(["kafka-1", "kafka-2", "kafka-3"]) as net:  # doctest: +SKIP
        ...     net.cut("kafka-1", "kafka-2")
        ...     net.heal()
    """

    names: Sequence[str]
    prefix: str = PREFIX
    subnet: str = SUBNET
    hosts: dict[str, Host] = field(default_factory=dict)
    _created: bool = False
    _lines: list[subprocess.Popen[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        network = ipaddress.ip_network(self.subnet)
        addresses = list(network.hosts())
        self.gateway = str(addresses[0])
        self.prefix_length = network.prefixlen
        for index, name in enumerate(self.names):
            self.hosts[name] = Host(
                name=name,
                namespace=f"{self.prefix}-{name}",
                address=str(addresses[FIRST_HOST - 1 + index]),
            )

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    @property
    def switch(self) -> str:
        return f"{self.prefix}-sw"

    @property
    def host_link(self) -> str:
        return f"{self.prefix}-host"

    # -- making and unmaking ----------------------------------------------------------

    def create(self) -> Network:
        """Make the switch, the machine's end and every host; undo all of it on failure.

        Raises:
            NetworkError: the subnet is in use on this machine, leftovers of an earlier
                run are in the way (``python -m chaos.netns cleanup``), or a command failed.
        """
        self._check_free()
        atexit.register(self.destroy)
        self._created = True
        try:
            run("ip", "netns", "add", self.switch)
            self._in(self.switch, "ip", "link", "add", BRIDGE, "type", "bridge")
            self._in(self.switch, "ip", "link", "set", BRIDGE, "up")
            self._in(self.switch, "ip", "link", "set", "lo", "up")
            peer = "to-host"
            run("ip", "link", "add", self.host_link, "type", "veth", "peer", "name", peer)
            run("ip", "link", "set", peer, "netns", self.switch)
            self._plug(peer)
            run("ip", "addr", "add", f"{self.gateway}/{self.prefix_length}", "dev", self.host_link)
            run("ip", "link", "set", self.host_link, "up")
            for index, host in enumerate(self.hosts.values()):
                self._add_host(host, port=f"p{index}")
            self._wait_reachable()
        except BaseException:
            self.destroy()
            raise
        return self

    def _check_free(self) -> None:
        taken = run("ip", "-o", "addr").stdout + run("ip", "route").stdout
        network = ipaddress.ip_network(self.subnet)
        for word in taken.split():
            with contextlib.suppress(ValueError):
                if ipaddress.ip_interface(word).network.overlaps(network):
                    raise NetworkError(
                        f"{self.subnet} is in use on this machine ({word}); pick another "
                        f"subnet, or remove leftovers with `python -m chaos.netns cleanup`"
                    )
        left = leftovers(self.prefix)
        if left:
            raise NetworkError(
                f"leftovers of an earlier run are in the way: {left}; remove them with "
                f"`PYTHONPATH=tests python -m chaos.netns cleanup --prefix {self.prefix}`"
            )

    def _add_host(self, host: Host, *, port: str) -> None:
        self._write_names(host)
        run("ip", "netns", "add", host.namespace)
        run("ip", "link", "add", port, "netns", self.switch, "type", "veth", "peer", "name",
            "eth0", "netns", host.namespace)  # fmt: skip
        self._plug(port)
        host.run("ip", "link", "set", "lo", "up")
        host.run("ip", "addr", "add", f"{host.address}/{self.prefix_length}", "dev", "eth0")
        host.run("ip", "link", "set", "eth0", "up")
        host.run("ip", "route", "add", "default", "via", self.gateway)

    def _write_names(self, host: Host) -> None:
        """Its own ``/etc/hosts`` and ``resolv.conf``: a broker looks up the name of
        each client address (SASL), and the machine's name server is out of reach
        from the namespace, so each lookup would hang until the resolver gives up
        (ApiVersions went unanswered for minutes). Every address of the subnet is
        named here, and the resolver asks loopback, which refuses at once."""
        folder = ETC_NETNS / host.namespace
        folder.mkdir(parents=True, exist_ok=True)
        names = [f"{self.gateway} {self.host_link}"] + [
            f"{h.address} {h.name} {h.namespace}" for h in self.hosts.values()
        ]
        (folder / "hosts").write_text(
            "127.0.0.1 localhost\n::1 localhost\n" + "\n".join(names) + "\n"
        )
        (folder / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")

    def _plug(self, port: str) -> None:
        self._in(self.switch, "ip", "link", "set", port, "master", BRIDGE)
        self._in(self.switch, "ip", "link", "set", port, "up")

    def _wait_reachable(self, timeout: float = 10) -> None:
        """Until each host has its address (duplicate address detection, link up)."""
        deadline = time.monotonic() + timeout
        for host in self.hosts.values():
            while "UP" not in host.run("ip", "-br", "link", "show", "eth0").stdout:
                if time.monotonic() > deadline:
                    raise NetworkError(f"{host.namespace}: eth0 not up after {timeout:g}s")
                time.sleep(0.1)

    def destroy(self) -> None:
        """Kill what still runs in the namespaces, delete them and the machine's end."""
        if self._created:
            self._created = False
            cleanup(self.prefix)
            with contextlib.suppress(Exception):
                atexit.unregister(self.destroy)

    def __enter__(self) -> Network:
        return self.create()

    def __exit__(self, *_: object) -> None:
        self.destroy()

    # -- faults -------------------------------------------------------------------------

    def cut(self, a: str, b: str) -> None:
        """Drop every packet between hosts ``a`` and ``b``, both ways, in both namespaces."""
        for here, there in ((a, b), (b, a)):
            self._drop_between(self.hosts[here], self._address(there))

    def isolate(self, name: str, from_: Sequence[str]) -> None:
        """Cut ``name`` off from each of ``from_`` (hosts); the rest still reach it."""
        for other in from_:
            self.cut(name, other)

    def isolate_from_all(self, name: str) -> None:
        """Cut ``name`` off from every other host and from the machine's own end."""
        host = self.hosts[name]
        for other in self.hosts:
            if other != name:
                self.cut(name, other)
        self._drop_between(host, self.gateway)

    def lose(self, probability: float, names: Sequence[str] | None = None) -> None:
        """Drop ``probability`` of the packets on every link of these hosts, each way.

        Each host drops that share of what it sends, and of what it receives from the
        machine's end (which has no rules of its own), so every direction of every
        link loses about ``probability`` once.
        """
        for name in names or list(self.hosts):
            host = self.hosts[name]
            sample = ["-m", "statistic", "--mode", "random", "--probability", f"{probability:.4f}"]
            host.run("iptables", "-A", "OUTPUT", "-o", "eth0", *sample, "-j", "DROP")
            host.run("iptables", "-A", "INPUT", "-i", "eth0", "-s", self.gateway, *sample,
                     "-j", "DROP")  # fmt: skip

    def delay(self, ms: float, names: Sequence[str] | None = None) -> str:
        """Delay every packet on every link of these hosts by ``ms``, each way; how.

        ``tc netem`` where the kernel has it; elsewhere a delay line per host
        (``delay_line.py``, NFQUEUE) holds what the host sends, and what it receives
        from the machine's end, so every direction of every link is delayed once.
        Returns ``"netem"`` or ``"nfqueue"``.
        """
        chosen = names or list(self.hosts)
        if netem_available():
            for name in chosen:
                self.hosts[name].run(
                    "tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", f"{ms:g}ms"
                )
            return "netem"
        tests = str(Path(__file__).resolve().parents[1])
        for name in chosen:
            host = self.hosts[name]
            line = subprocess.Popen(
                [*host.prefix, sys.executable, "-m", "chaos.delay_line",
                 "--queue", str(DELAY_QUEUE), "--delay-ms", f"{ms:g}"],
                stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": tests},
            )  # fmt: skip
            if not (line.stdout and line.stdout.readline().startswith("delay line:")):
                line.kill()
                raise NetworkError(f"{host.namespace}: the delay line did not start")
            self._lines.append(line)
            queue = ["-j", "NFQUEUE", "--queue-num", str(DELAY_QUEUE), "--queue-bypass"]
            host.run("iptables", "-A", "OUTPUT", "-o", "eth0", *queue)
            host.run("iptables", "-A", "INPUT", "-i", "eth0", "-s", self.gateway, *queue)
        return "nfqueue"

    def heal(self) -> None:
        """Remove every rule, qdisc and delay line the faults added, in every host."""
        for host in self.hosts.values():
            host.run("iptables", "-F", "INPUT")
            host.run("iptables", "-F", "OUTPUT")
            host.run("tc", "qdisc", "del", "dev", "eth0", "root", check=False)
        for line in self._lines:
            line.terminate()
            try:
                line.wait(10)
            except subprocess.TimeoutExpired:
                line.kill()
        self._lines.clear()

    def rules(self) -> dict[str, list[str]]:
        """Each host's rules now (``iptables -S``), for a round's record."""
        return {
            name: [
                line
                for line in host.run("iptables", "-S").stdout.splitlines()
                if not line.startswith("-P")
            ]
            for name, host in self.hosts.items()
        }

    def _drop_between(self, host: Host, address: str) -> None:
        host.run("iptables", "-A", "INPUT", "-s", address, "-j", "DROP")
        host.run("iptables", "-A", "OUTPUT", "-d", address, "-j", "DROP")

    def _address(self, name: str) -> str:
        return self.gateway if name == "host" else self.hosts[name].address

    def _in(self, namespace: str, *command: str) -> None:
        run("ip", "netns", "exec", namespace, *command)


# -- leftovers --------------------------------------------------------------------------


def leftovers(prefix: str = PREFIX) -> list[str]:
    """Namespaces and links of the machine's own namespace whose names start with ``prefix-``."""
    mine = f"{prefix}-"
    namespaces = [
        line.split()[0] for line in run("ip", "netns", "list").stdout.splitlines() if line.strip()
    ]
    links = [
        line.split()[0].split("@")[0]
        for line in run("ip", "-o", "-br", "link").stdout.splitlines()
        if line.strip()
    ]
    return [n for n in namespaces + links if n.startswith(mine)]


def cleanup(prefix: str = PREFIX) -> list[str]:
    """Kill the processes in ``prefix-*`` namespaces, delete them and ``prefix-*`` links.

    Only names with the prefix are touched: the namespaces are the harness's own, so
    whatever runs in them (a broker a killed round left) was started by it.
    Returns what was removed.
    """
    removed = []
    mine = f"{prefix}-"
    for name in leftovers(prefix):
        if name in {line.split()[0] for line in _namespace_lines()}:
            _kill_inside(name)
            run("ip", "netns", "del", name, check=False)
        else:
            run("ip", "link", "del", name, check=False)
        removed.append(name)
    # a veth pair goes with either end; the machine's end may be gone already
    for name in leftovers(prefix):
        if name.startswith(mine):
            run("ip", "link", "del", name, check=False)
    if ETC_NETNS.is_dir():
        for folder in ETC_NETNS.glob(f"{mine}*"):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
        with contextlib.suppress(OSError):
            ETC_NETNS.rmdir()  # only when empty: another tool's folders stay
    return removed


def _namespace_lines() -> list[str]:
    return [line for line in run("ip", "netns", "list").stdout.splitlines() if line.strip()]


def _kill_inside(namespace: str) -> None:
    pids = [int(p) for p in run("ip", "netns", "pids", namespace, check=False).stdout.split()]
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signum)
        deadline = time.monotonic() + 10
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    return False


@contextlib.contextmanager
def network(names: Sequence[str], **options: str) -> Iterator[Network]:
    with Network(names, **options) as net:  # type: ignore[arg-type]
        yield net


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.netns", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    clean = sub.add_parser("cleanup", help="remove the namespaces and links a run left")
    clean.add_argument("--prefix", default=PREFIX)
    sub.add_parser("list", help="what a run left")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(leftovers()) or "nothing")
        return 0
    removed = cleanup(args.prefix)
    print(f"removed {len(removed)}: {' '.join(removed)}" if removed else "nothing to remove")
    return 0


if __name__ == "__main__":
    sys.exit(main())
