"""The content hash every publisher signs with, and the per-workflow chain the tracker seals."""

from __future__ import annotations

import hashlib

from sagalog.contracts.hash_chain import (
    chain_next,
    chain_start,
    chain_values,
    content_hash,
    signed,
    stated_hash,
)
from sagalog.contracts.headers import EventHeaders

HEADERS = [
    ("ce_specversion", "1.0"),
    ("ce_id", "e-1"),
    ("ce_type", "procurement.v1.BudgetReserved"),
    ("ce_source", "sagalog/budget-agent"),
    ("ce_time", "2027-01-15T08:00:00Z"),
    ("ce_workflowid", "wf-1"),
]


def _spelled_out(key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> str:
    """The documented layout, written out by hand: the hash is a contract with every
    log already written, which ``sagalog audit --verify`` checks years later."""

    def framed(part: bytes | None) -> bytes:
        return b"\xff\xff\xff\xff" if part is None else len(part).to_bytes(4, "big") + part

    joined = framed(b"sagalog-event-v1") + framed(key) + framed(value)
    for name, v in sorted(headers):
        joined += framed(name.encode()) + framed(v)
    return hashlib.sha256(joined).hexdigest()


def test_the_hash_is_the_documented_layout_and_never_changes() -> None:
    covered = [(n, v.encode()) for n, v in HEADERS] + [("sagalog_chain", b"cd" * 32)]
    records = [*HEADERS, ("sagalog_chain", "cd" * 32), ("traceparent", "00-1-2-01")]
    assert content_hash(b"wf-1", b"\x00avro", records) == _spelled_out(
        b"wf-1", b"\x00avro", covered
    )
    assert content_hash(None, b"v", records) == _spelled_out(None, b"v", covered)
    # what every log written so far was signed with
    assert content_hash(b"wf-1", b"\x00avro", HEADERS) == (
        "1e481d1fbb12c95b07447e0c26924f78ac4e565799957916736316e82ff2f72a"
    )


def test_the_hash_covers_key_value_and_every_ce_header() -> None:
    base = content_hash(b"wf-1", b"\x00avro", HEADERS)
    assert len(base) == 64 and int(base, 16) >= 0
    assert content_hash(b"wf-2", b"\x00avro", HEADERS) != base
    assert content_hash(b"wf-1", b"\x00avrp", HEADERS) != base
    changed = [(n, "e-2" if n == "ce_id" else v) for n, v in HEADERS]
    assert content_hash(b"wf-1", b"\x00avro", changed) != base
    assert content_hash(b"wf-1", b"\x00avro", [*HEADERS, ("ce_causationid", "e-0")]) != base


def test_the_links_are_covered_but_not_the_hash_itself_nor_transport_headers() -> None:
    base = content_hash(b"k", b"v", HEADERS)
    assert content_hash(b"k", b"v", [*HEADERS, ("sagalog_prev_hash", "ab" * 32)]) != base
    assert content_hash(b"k", b"v", [*HEADERS, ("sagalog_chain", "cd" * 32)]) != base
    # A retried copy carries retry marks and a new trace; it is still the same event.
    extra = [("sagalog_hash", "x"), ("sagalog_attempt", b"2"), ("traceparent", "00-1-2-01")]
    assert content_hash(b"k", b"v", [*HEADERS, *extra]) == base


def test_the_hash_does_not_depend_on_header_order_or_value_type() -> None:
    as_bytes = [(n, v.encode()) for n, v in reversed(HEADERS)]
    assert content_hash(b"k", b"v", as_bytes) == content_hash(b"k", b"v", HEADERS)
    assert content_hash(b"k", b"v", dict(HEADERS)) == content_hash(b"k", b"v", HEADERS)


def test_parts_are_framed_so_shifting_bytes_between_them_changes_the_hash() -> None:
    assert content_hash(b"ab", b"c", HEADERS) != content_hash(b"a", b"bc", HEADERS)
    assert content_hash(None, b"v", HEADERS) != content_hash(b"", b"v", HEADERS)


def test_signed_adds_the_hash_once_and_it_reads_back() -> None:
    once = signed(b"k", b"v", HEADERS)
    twice = signed(b"k", b"v", once)
    assert [n for n, _ in twice].count("sagalog_hash") == 1
    assert stated_hash(twice) == content_hash(b"k", b"v", HEADERS)
    assert stated_hash(HEADERS) is None


def test_event_headers_carry_the_links_both_ways() -> None:
    headers = EventHeaders(
        id="e-2", type="t", source="s", workflow_id="wf", prev_hash="a" * 64, chain="b" * 64
    )
    back = EventHeaders.from_kafka(headers.to_kafka())
    assert (back.prev_hash, back.chain) == ("a" * 64, "b" * 64)
    caused = back.caused("t2", source="s2", traceparent=None, prev_hash="c" * 64)
    assert caused.prev_hash == "c" * 64 and caused.chain is None


def test_the_chain_folds_hashes_in_order_from_a_start_bound_to_the_workflow() -> None:
    start = chain_start("wf-1")
    assert start != chain_start("wf-2")
    h1, h2 = hashlib.sha256(b"1").hexdigest(), hashlib.sha256(b"2").hexdigest()
    values = chain_values(start, [h1, h2])
    assert values == [chain_next(start, h1), chain_next(chain_next(start, h1), h2)]
    assert values[-1] == hashlib.sha256(bytes.fromhex(values[0]) + bytes.fromhex(h2)).hexdigest()
    assert chain_values(start, [h2, h1])[-1] != values[-1]
