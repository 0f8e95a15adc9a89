"""Decoding in runs gives exactly what ``EventCodec.decode`` gives, record by record.

No broker: records are built in memory with the codec (a registry stand-in hands
out schema ids), so every path can be forced: a run of one schema id, mixed ids, a
corrupt record in the middle of a run, bytes that are not the wire format, an
unknown schema id, event types the replay skips.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.errors import SchemaError
from sagalog.replay import BatchDecoder

TRANSITION = "sagalog.v1.StateTransition"
ALERT = "sagalog.v1.TrackerAlert"


class Registry:
    """Schema ids for the catalog's schemas, in the order asked."""

    def __init__(self, catalog: SchemaCatalog) -> None:
        self.catalog = catalog
        self.ids: dict[str, int] = {}

    def schema_id(self, subject: str, schema: Any) -> int:
        return self.ids.setdefault(schema.name, len(self.ids) + 1)

    def writer_schema(self, schema_id: int) -> Any:
        for name, known in self.ids.items():
            if known == schema_id:
                return json.loads(self.catalog[name].text)
        raise SchemaError(f"unknown schema id {schema_id}")


@dataclass
class Record:
    """What the decoder reads of a consumed message."""

    body: bytes | None
    at: int
    key_: bytes = b"wf"
    partition_: int = 0

    def value(self) -> bytes | None:
        return self.body

    def key(self) -> bytes:
        return self.key_

    def partition(self) -> int:
        return self.partition_

    def offset(self) -> int:
        return self.at

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000 + self.at)


@pytest.fixture
def codec(catalog: SchemaCatalog) -> EventCodec:
    return EventCodec(catalog=catalog, registry=Registry(catalog))  # type: ignore[arg-type]


def transition(i: int, *, step: str | None = "score_risk") -> dict[str, Any]:
    return {
        "flow": "procurement",
        "flow_version": 1,
        "from_state": "running",
        "to_state": "running",
        "step": step,
        "cause_event_id": f"cause-{i}",
        "time_in_previous_state_ms": i * 1000,
        "at": dt.datetime(2026, 5, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=i * 1001),
        "from_step": None if i % 3 else "classify_request",
    }


def alert(i: int) -> dict[str, Any]:
    return {
        "alert": "compensation_stuck",
        "message": f"alert {i}",
        "workflow_id": f"wf-{i}",
        "flow": None,
        "flow_version": None,
        "value_ms": None,
        "at": dt.datetime(2026, 5, 1, tzinfo=dt.UTC),
    }


def records(codec: EventCodec, data: list[tuple[str, dict[str, Any]]]) -> list[Record]:
    return [
        Record(codec.encode("t", kind, datum), at=i, key_=f"wf-{i}".encode())
        for i, (kind, datum) in enumerate(data)
    ]


def test_a_run_decodes_like_the_codec_record_by_record(codec: EventCodec) -> None:
    batch_in = records(codec, [(TRANSITION, transition(i)) for i in range(50)])
    decoder = BatchDecoder(codec, timestamps=True)
    [batch] = list(decoder.decode(batch_in))
    assert batch.event_type == TRANSITION
    assert batch.payloads == [codec.decode(r.value()).payload for r in batch_in]
    assert batch.payloads[7]["at"] == transition(7)["at"]  # an aware datetime, exact to the ms
    assert batch.keys == [f"wf-{i}".encode() for i in range(50)]
    assert batch.timestamps[3] == 1_700_000_000_003
    assert (decoder.stats.decoded, decoder.stats.undecodable) == (50, 0)


def test_epoch_ms_when_asked(codec: EventCodec) -> None:
    decoder = BatchDecoder(codec, logical_types=False)
    [batch] = list(decoder.decode(records(codec, [(TRANSITION, transition(2))])))
    assert batch.payloads[0]["at"] == int(transition(2)["at"].timestamp() * 1000)


def test_mixed_types_come_out_in_runs_in_order(codec: EventCodec) -> None:
    data = [
        (TRANSITION, transition(0)),
        (TRANSITION, transition(1)),
        (ALERT, alert(2)),
        (TRANSITION, transition(3)),
    ]
    batches = list(BatchDecoder(codec).decode(records(codec, data)))
    assert [(b.event_type, len(b.payloads)) for b in batches] == [
        (TRANSITION, 2),
        (ALERT, 1),
        (TRANSITION, 1),
    ]
    assert batches[1].payloads[0]["at"] == alert(2)["at"]  # nullable fields around it too


def test_a_corrupt_record_is_counted_and_the_rest_of_its_run_kept(codec: EventCodec) -> None:
    batch_in = records(codec, [(TRANSITION, transition(i)) for i in range(10)])
    good = batch_in[4].body
    assert good is not None
    batch_in[4].body = good[:9]  # truncated in the middle of a field
    decoder = BatchDecoder(codec)
    [batch] = list(decoder.decode(batch_in))
    assert len(batch.payloads) == 9
    assert [p["cause_event_id"] for p in batch.payloads] == [
        f"cause-{i}" for i in range(10) if i != 4
    ]
    assert batch.keys == [f"wf-{i}".encode() for i in range(10) if i != 4]
    assert decoder.stats.undecodable == 1
    [example] = decoder.stats.examples
    assert example.offset == 4 and "does not decode with schema id" in example.reason


def test_bytes_that_are_not_the_wire_format_and_unknown_ids(codec: EventCodec) -> None:
    batch_in = records(codec, [(TRANSITION, transition(i)) for i in range(3)])
    batch_in.insert(1, Record(b'{"json": true}', at=100))
    batch_in.insert(2, Record(None, at=101))
    batch_in.insert(3, Record(b"\0\0\0\0\x63" + b"\x02", at=102))  # schema id 99
    decoder = BatchDecoder(codec)
    decoded = [p for b in decoder.decode(batch_in) for p in b.payloads]
    assert len(decoded) == 3
    assert decoder.stats.undecodable == 3
    reasons = [e.reason for e in decoder.stats.examples]
    assert "not the wire-format magic byte" in reasons[0]
    assert "empty" in reasons[1]
    assert "unknown schema id 99" in reasons[2]


def test_event_types_not_asked_for_are_skipped_undecoded(codec: EventCodec) -> None:
    data = [(ALERT, alert(0)), (TRANSITION, transition(1)), (ALERT, alert(2))]
    decoder = BatchDecoder(codec, event_types={TRANSITION})
    batches = list(decoder.decode(records(codec, data)))
    assert [b.event_type for b in batches] == [TRANSITION]
    assert (decoder.stats.decoded, decoder.stats.skipped) == (1, 2)


def test_an_older_writer_schema_is_resolved_against_ours(
    codec: EventCodec, catalog: SchemaCatalog, tmp_path: Path
) -> None:
    """A record written before ``from_step`` existed reads with its default, as in the codec."""
    old = json.loads(catalog[TRANSITION].text)
    old["fields"] = [f for f in old["fields"] if f["name"] != "from_step"]
    (tmp_path / "sagalog" / "v1").mkdir(parents=True)
    (tmp_path / "sagalog" / "v1" / "state_transition.avsc").write_text(json.dumps(old))
    old_catalog = SchemaCatalog.load(tmp_path)
    registry = codec.registry
    writer = EventCodec(catalog=old_catalog, registry=registry)
    registry.catalog = old_catalog  # type: ignore[attr-defined]
    datum = {k: v for k, v in transition(5).items() if k != "from_step"}
    body = writer.encode("t", TRANSITION, datum)
    [batch] = list(BatchDecoder(codec).decode([Record(body, at=0)] * 3))
    assert batch.payloads[0] == codec.decode(body).payload
    assert batch.payloads[0]["from_step"] is None
    assert batch.payloads[0]["at"] == transition(5)["at"]


def test_only_top_level_timestamps_are_turned_into_datetimes_by_hand() -> None:
    from sagalog.replay.decoding import _top_level_timestamps

    millis = {"type": "long", "logicalType": "timestamp-millis"}
    micros = {"type": "long", "logicalType": "timestamp-micros"}

    def record(*fields: Any) -> dict[str, Any]:
        return {
            "type": "record",
            "name": "R",
            "fields": [{"name": f"f{i}", "type": t} for i, t in enumerate(fields)],
        }

    assert _top_level_timestamps(record("string", millis, ["null", micros])) == (
        ("f1", "milliseconds"),
        ("f2", "microseconds"),
    )
    assert _top_level_timestamps(record("string", "long")) == ()
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}
    assert _top_level_timestamps(record(millis, decimal)) is None  # fastavro converts them all
    assert _top_level_timestamps(record(record(millis))) is None  # nested: fastavro too


def test_hand_made_datetimes_equal_fastavros_across_the_range(codec: EventCodec) -> None:
    """Fast below 2106, exact arithmetic beyond and before 1970: the same datetimes."""
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    moments = [0, 1, 999, 1_777_593_600_123, 2**32 * 1000 - 1, 2**32 * 1000, -1, -86_400_001]
    moments += [253_402_300_799_999]  # 9999-12-31T23:59:59.999
    data = []
    for i, ms in enumerate(moments):
        datum = transition(i)
        datum["at"] = epoch + dt.timedelta(milliseconds=ms)
        data.append((TRANSITION, datum))
    batch_in = records(codec, data)
    [batch] = list(BatchDecoder(codec).decode(batch_in))
    assert [p["at"] for p in batch.payloads] == [
        codec.decode(r.value()).payload["at"] for r in batch_in
    ]
    assert [p["at"] for p in batch.payloads] == [d["at"] for _, d in data]
