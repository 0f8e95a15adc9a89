"""The tracker's records as they stand now, read from its records changelog.

The changelog is compacted and keyed by workflow id: its last value per key is the
record the tracker holds (a tombstone: the record was dropped). Reading it to its end
gives every workflow's current state without asking the tracker, so a command that
plans changes to running workflows (``sagalog flows migrate``) needs nothing but
read access to that topic. Reads committed records only; commits nothing.
"""

from __future__ import annotations

from confluent_kafka import Consumer

from sagalog.replay.chunks import ChunkReader, plan_ranges
from sagalog.replay.exceptions import ReplayError
from sagalog.replay.reader import replay_consumer_config
from sagalog.settings import ClientSettings
from sagalog.tracker.record import WorkflowRecord


def read_live_records(settings: ClientSettings, changelog: str) -> dict[str, WorkflowRecord]:
    """Every workflow's current record, by id.

    Raises:
        ReplayError: the changelog does not exist (a wrong tracker app id).
        StoredRecordError: a record this release cannot read (written by a newer one).
    """
    consumer = Consumer(replay_consumer_config(settings))
    try:
        try:
            ranges = plan_ranges(consumer, [changelog], timeout_s=settings.connect_timeout_s)
        except ReplayError:
            raise ReplayError(
                f"the tracker's records changelog {changelog} does not exist: give the "
                "tracker's app id (SAGALOG_TRACKER_APP_ID, --app-id)"
            ) from None
        latest: dict[str, bytes | None] = {}
        for chunk in ChunkReader(consumer, ranges).chunks():
            for message in chunk:
                key = message.key()
                if key is not None:
                    latest[key.decode("utf-8", "replace")] = message.value()
    finally:
        consumer.close()
    return {
        workflow_id: WorkflowRecord.from_json(value)
        for workflow_id, value in latest.items()
        if value is not None
    }
