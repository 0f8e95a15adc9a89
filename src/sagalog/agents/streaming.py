"""Writing model streams (``sagalog.streams``): deltas out as the model writes them.

A plain idempotent producer, not the batch's transactional one: a delta must reach a
reader while the step still runs, long before its transaction commits, and an aborted
batch cannot unsay what a person already read. Idempotence keeps each partition's
records in order and free of a retried send's duplicates; ``linger.ms`` 0 sends each
delta as it comes (a model writes a few dozen a second per call, so there is little to
batch and latency is the point). A write is never awaited: a handler does not slow
down for its audience, and a delta lost with a crashed process is what the retry's
``interrupted`` mark tells the reader about.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from confluent_kafka import KafkaError, Message, Producer

from sagalog.settings import ClientSettings
from sagalog.streams.record import StreamRecord
from sagalog.topic_names import stream_topic_for

log = logging.getLogger(__name__)


class StreamWriter:
    """Publishes a process's model-stream records; a daemon thread serves the
    producer's delivery reports."""

    def __init__(self, settings: ClientSettings) -> None:
        self._producer = Producer(
            settings.producer_config(
                **{
                    "linger.ms": 0,
                    "message.timeout.ms": int(max(settings.connect_timeout_s, 10) * 1000),
                }
            )
        )
        self.failed = 0
        """Records the brokers did not take (each is logged)."""
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="sagalog-streams", daemon=True)
        self._thread.start()

    def write(self, workflow_topic: str, partition: int, record: StreamRecord) -> None:
        """Send ``record`` to the stream of ``workflow_topic``, in the workflow's own
        partition (the one its event was read from), without waiting."""
        topic = stream_topic_for(workflow_topic)
        while True:
            try:
                self._producer.produce(
                    topic,
                    key=record.workflow_id.encode(),
                    value=record.encode(),
                    partition=partition,
                    on_delivery=self._delivered,
                )
                return
            except BufferError:  # the local queue is full: let the reports drain it
                self._producer.poll(0.05)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failed += 1
            log.warning("a model stream record was not written to %s: %s", message.topic(), error)

    def flush(self, timeout_s: float = 10.0) -> None:
        """Wait until every record written so far is acknowledged (or failed)."""
        self._producer.flush(timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        self._stopped.set()
        with contextlib.suppress(Exception):
            self._producer.flush(timeout_s)

    def _serve(self) -> None:
        while not self._stopped.is_set():
            self._producer.poll(0.1)
