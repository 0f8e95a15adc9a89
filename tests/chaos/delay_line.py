"""A delay line for packets, in a network namespace whose kernel has no netem.

``tc qdisc ... netem delay`` needs ``CONFIG_NET_SCH_NETEM``, which these machines'
kernel lacks; their netfilter has the NFQUEUE target and nfnetlink_queue. So an
iptables rule hands each packet of a link to this process (``-j NFQUEUE --queue-num N
--queue-bypass``), which holds it for ``delay_ms`` and gives it back (NF_ACCEPT):
netem's fixed delay, packets in order. It talks nfnetlink_queue over a plain netlink
socket (no library: ``libnetfilter_queue`` is not on the machine), asks for the
packets' metadata only, never their bytes, and sets the queue to fail open, so a
full queue lets packets through rather than dropping them. Started in the namespace:

    ip netns exec sgf-kafka-1 python -m chaos.delay_line --queue 7 --delay-ms 200

and stopped with SIGTERM, after which ``--queue-bypass`` lets packets pass again.
"""

from __future__ import annotations

import argparse
import collections
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Sequence

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
NETLINK_NO_ENOBUFS = 5
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NF_ACCEPT = 1
QUEUE_MAXLEN = 20_000


def _attribute(kind: int, payload: bytes) -> bytes:
    body = struct.pack("=HH", 4 + len(payload), kind) + payload
    return body + b"\0" * (-len(body) % 4)


def message(kind: int, queue: int, attributes: bytes, *, flags: int = NLM_F_REQUEST) -> bytes:
    """One nfnetlink_queue message: netlink header, nfgenmsg (AF_UNSPEC, v0, queue)."""
    body = struct.pack("=BB", socket.AF_UNSPEC, 0) + struct.pack(">H", queue) + attributes
    header = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, 0, 0)
    return header + body


def bind_messages(queue: int) -> list[bytes]:
    """Bind the queue, metadata only, a long queue that fails open."""
    return [
        message(
            NFQNL_MSG_CONFIG,
            queue,
            _attribute(NFQA_CFG_CMD, struct.pack("=BBH", NFQNL_CFG_CMD_BIND, 0, 0)),
            flags=NLM_F_REQUEST | NLM_F_ACK,
        ),
        message(
            NFQNL_MSG_CONFIG,
            queue,
            _attribute(NFQA_CFG_PARAMS, struct.pack(">IB", 0, NFQNL_COPY_META))
            + _attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack(">I", QUEUE_MAXLEN))
            + _attribute(NFQA_CFG_MASK, struct.pack(">I", NFQA_CFG_F_FAIL_OPEN))
            + _attribute(NFQA_CFG_FLAGS, struct.pack(">I", NFQA_CFG_F_FAIL_OPEN)),
            flags=NLM_F_REQUEST | NLM_F_ACK,
        ),
    ]


def verdict_up_to(queue: int, packet_id: int) -> bytes:
    """Accept every packet of the queue with an id up to ``packet_id`` (a batch verdict)."""
    return message(
        NFQNL_MSG_VERDICT_BATCH,
        queue,
        _attribute(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id)),
    )


def packet_ids(data: bytes) -> tuple[list[int], list[int]]:
    """The packet ids in a buffer of netlink messages, and any error codes in it."""
    ids: list[int] = []
    errors: list[int] = []
    offset = 0
    while offset + 16 <= len(data):
        length, kind, _, _, _ = struct.unpack_from("=IHHII", data, offset)
        if length < 16:
            break
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", data, offset + 16)
            if code:
                errors.append(code)
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            at = offset + 20  # after nlmsghdr and nfgenmsg
            end = offset + length
            while at + 4 <= end:
                size, attr = struct.unpack_from("=HH", data, at)
                if size < 4:
                    break
                if attr & 0x7FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from(">I", data, at + 4)[0])
                at += size + (-size % 4)
        offset += length + (-length % 4)
    return ids, errors


def serve(queue: int, delay_s: float) -> None:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
    sock.bind((0, 0))
    for request in bind_messages(queue):
        sock.send(request)
        _, errors = packet_ids(sock.recv(65536))
        if errors:
            raise SystemExit(f"delay line: binding queue {queue} failed: errno {-errors[0]}")
    print(f"delay line: queue {queue}, {delay_s * 1000:g} ms", flush=True)
    held: collections.deque[tuple[float, int]] = collections.deque()
    stop = False

    def finish(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    while not stop:
        wait = max(0.0, held[0][0] - time.monotonic()) if held else 0.5
        readable, _, _ = select.select([sock], [], [], wait)
        if readable:
            while True:
                try:
                    data = sock.recv(1 << 20, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                ids, _ = packet_ids(data)
                due = time.monotonic() + delay_s
                held.extend((due, packet_id) for packet_id in ids)
        now = time.monotonic()
        last = None
        while held and held[0][0] <= now:
            last = held.popleft()[1]
        if last is not None:
            sock.send(verdict_up_to(queue, last))
    if held:  # let what is held go at once
        sock.send(verdict_up_to(queue, held[-1][1]))
    sock.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.delay_line", description=__doc__)
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    args = parser.parse_args(argv)
    serve(args.queue, args.delay_ms / 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
