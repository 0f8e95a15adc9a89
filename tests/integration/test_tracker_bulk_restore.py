"""The tracker's bulk restore (``services.tracker.bulk_restore``) on the real broker: a
changelog partition written in transactions, as the tracker writes it, read into a
fresh RocksDB as faust would have restored it; and where a restore stops
(``services.tracker.restore``) when a transaction is left open in the partition.
"""

from __future__ import annotations

import time
from pathlib import Path

import rocksdict
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from sagalog.cluster import connect_admin
from sagalog.services.tracker.bulk_restore import ChangelogLoader, Span
from sagalog.services.tracker.restore import TailReader, restore_target
from sagalog.settings import ClientSettings

from .project import Project

OFFSET_KEY = b"__faust\0offset__"


def changelog(project: Project, settings: ClientSettings) -> str:
    topic = project.topic("saga-tracker-records-changelog")
    admin, _ = connect_admin(settings)
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=2, replication_factor=settings.replication_factor)]
    ).values():
        future.result(timeout=30)
    return topic


def write(
    settings: ClientSettings,
    topic: str,
    records: list[tuple[bytes, bytes | None]],
    *,
    commit: bool = True,
    partition: int = 1,
) -> None:
    """``records`` to ``partition`` in one transaction, committed or aborted."""
    producer = Producer(
        settings.producer_config(**{"transactional.id": f"{topic}-{time.monotonic_ns()}"})
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=partition)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def load(settings: ClientSettings, topic: str, db: rocksdict.Rdict, first: int, last: int) -> dict:
    loader = ChangelogLoader(
        settings.kafka_config(**{"group.id": f"{topic}-restore"}), clock=time.monotonic
    )
    span = Span(topic=topic, partition=1, first=first, last=last, db=db, offset_key=OFFSET_KEY)
    return loader.load([span])


def contents(db: rocksdict.Rdict) -> dict[bytes, bytes]:
    return {key: value for key, value in db.items()}


def open_db(path: Path) -> rocksdict.Rdict:
    options = rocksdict.Options(raw_mode=True)
    return rocksdict.Rdict(str(path), options=options)


def test_committed_records_up_to_the_last_are_restored_with_their_offset(
    project: Project, settings: ClientSettings, tmp_path: Path
) -> None:
    topic = changelog(project, settings)
    write(settings, topic, [(b"wf-1", b"v1"), (b"wf-2", b"v1"), (b"wf-3", b"v1")])  # 0-2
    write(settings, topic, [(b"wf-1", b"v2"), (b"wf-2", None)])  # 4-5 (3: the marker)
    write(settings, topic, [(b"wf-4", b"aborted")], commit=False)
    write(settings, topic, [(b"wf-3", b"beyond the last")])  # past the restore's target
    db = open_db(tmp_path / "p1")

    applied = load(settings, topic, db, first=0, last=5)

    assert applied == {(topic, 1): 5}
    assert contents(db) == {b"wf-1": b"v2", b"wf-3": b"v1", OFFSET_KEY: b"5"}


def test_a_second_restore_goes_on_from_the_persisted_offset(
    project: Project, settings: ClientSettings, tmp_path: Path
) -> None:
    topic = changelog(project, settings)
    write(settings, topic, [(b"wf-1", b"v1"), (b"wf-2", b"v1")])  # 0-1
    db = open_db(tmp_path / "p1")
    load(settings, topic, db, first=0, last=1)
    write(settings, topic, [(b"wf-1", None), (b"wf-3", b"v1")])  # 3-4
    db.put(b"wf-2", b"changed locally after the first restore")  # not read again

    applied = load(settings, topic, db, first=2, last=4)

    assert applied == {(topic, 1): 4}
    assert contents(db) == {
        b"wf-2": b"changed locally after the first restore",
        b"wf-3": b"v1",
        OFFSET_KEY: b"4",
    }


def test_a_partition_with_nothing_to_restore_is_not_read(
    project: Project, settings: ClientSettings, tmp_path: Path
) -> None:
    topic = changelog(project, settings)
    db = open_db(tmp_path / "p1")

    assert load(settings, topic, db, first=0, last=-1) == {}
    assert contents(db) == {}


def test_a_store_past_an_open_transaction_is_kept_and_one_past_the_log_is_not(
    project: Project, settings: ClientSettings
) -> None:
    """What a broker that dropped a commit's markers leaves: records 4-5 in a transaction
    nobody will end, which a ``read_committed`` reader never passes. A tracker that
    stored them (it stores only what committed) keeps its store."""
    topic = changelog(project, settings)
    write(settings, topic, [(b"wf-1", b"v1"), (b"wf-2", b"v1"), (b"wf-3", b"v1")])  # 0-2
    hanging = Producer(settings.producer_config(**{"transactional.id": f"{topic}-hanging"}))
    hanging.init_transactions(30)
    hanging.begin_transaction()
    hanging.produce(topic, key=b"wf-1", value=b"v2", partition=1)
    hanging.produce(topic, key=b"wf-2", value=None, partition=1)
    hanging.flush(30)
    try:
        config = settings.kafka_config(**{"group.id": f"{topic}-tail"})
        committed = Consumer({**config, "isolation.level": "read_committed"})
        try:  # faust's highwater plus one: the last stable offset
            stable_end = committed.get_watermark_offsets(TopicPartition(topic, 1), 30)[1]
        finally:
            committed.close()
        tails = TailReader(config, clock=time.monotonic)

        last = tails.last_committed({(topic, 1): stable_end})[(topic, 1)]
        log_end = tails.log_ends([(topic, 1)])[(topic, 1)]

        assert (stable_end, last, log_end) == (4, 2, 6)
        assert restore_target(5, last, log_end) == 5  # kept: nothing to read
        assert restore_target(1, last, log_end) == 2  # behind: restored to the last
        assert restore_target(8, last, log_end) == 2  # past the log: faust refuses it
    finally:
        hanging.abort_transaction(30)
