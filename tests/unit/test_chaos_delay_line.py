"""The delay line's nfnetlink_queue messages, built and parsed without a kernel.

The partition rounds' delay is only as true as these bytes: a verdict for the wrong
id or queue would hold packets forever (or release them early), and a parser that
misses a packet id leaves it queued until the queue fails open.
"""

from __future__ import annotations

import struct

from chaos.delay_line import (
    NFQA_PACKET_HDR,
    NFQNL_MSG_PACKET,
    NFQNL_MSG_VERDICT_BATCH,
    NLMSG_ERROR,
    bind_messages,
    message,
    packet_ids,
    verdict_up_to,
)


def _packet(packet_id: int, queue: int = 7) -> bytes:
    header = struct.pack(">IHB", packet_id, 0x0800, 3)  # id, IPv4, NF_INET_LOCAL_OUT
    mark = struct.pack("=HH", 8, 3) + struct.pack(">I", 0)  # another attribute first
    packet_header = struct.pack("=HH", 4 + len(header), NFQA_PACKET_HDR) + header + b"\0"
    return message(NFQNL_MSG_PACKET, queue, mark + packet_header)


def test_every_packet_id_of_a_batch_of_messages_is_found() -> None:
    data = b"".join(_packet(i) for i in (41, 42, 4_000_000_000))
    assert packet_ids(data) == ([41, 42, 4_000_000_000], [])


def test_an_error_answer_is_reported_and_an_ack_is_not() -> None:
    def error(code: int) -> bytes:
        body = struct.pack("=i", code) + b"\0" * 16
        return struct.pack("=IHHII", 16 + len(body), NLMSG_ERROR, 0, 0, 0) + body

    assert packet_ids(error(0) + error(-1)) == ([], [-1])


def test_a_batch_verdict_accepts_up_to_an_id_on_its_queue() -> None:
    verdict = verdict_up_to(7, 42)
    length, kind, flags, _, _ = struct.unpack_from("=IHHII", verdict)
    assert (length, kind, flags) == (len(verdict), (3 << 8) | NFQNL_MSG_VERDICT_BATCH, 1)
    assert struct.unpack_from(">H", verdict, 18) == (7,)  # nfgenmsg res_id: the queue
    assert struct.unpack_from(">II", verdict, 24) == (1, 42)  # NF_ACCEPT, up to id 42


def test_the_queue_is_bound_for_metadata_only_and_fails_open() -> None:
    bind, params = bind_messages(7)
    assert struct.unpack_from("=HHBBH", bind, 20) == (8, 1, 1, 0, 0)  # CFG_CMD: BIND
    copy = params.index(struct.pack("=HH", 9, 2))  # CFG_PARAMS: range 0, COPY_META
    assert params[copy + 4 : copy + 9] == struct.pack(">IB", 0, 1)
    assert params.endswith(struct.pack("=HH", 8, 5) + struct.pack(">I", 1))  # FAIL_OPEN
