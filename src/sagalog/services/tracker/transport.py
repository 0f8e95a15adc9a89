"""faust's aiokafka consumer, with the two settings the tracker cannot do without.

faust-streaming 0.15 builds its worker consumer with both hard-coded:

- **``isolation_level``**: ``read_committed`` only under faust's own exactly-once
  processing guarantee, which the tracker does not use (it is idempotent instead,
  see ``processor``). Agents publish in transactions; read uncommitted, the tracker
  would act on an aborted transaction's events — a fenced zombie's step completion,
  an output an agent crashed before committing — and drive the workflow on work that
  never happened. The tracker reads committed data only.
- **``fetch_max_wait_ms=1500``**: aiokafka leaves partitions with buffered records
  out of its next fetch, so under load a fetch often names only the idle ones (the
  clock partitions) and the broker holds it for the full wait while nothing else
  is fetched from that broker: the tracker stalled for up to 1.5 s per hand-off.
  ``app.FAUST_FETCH_MAX_WAIT_MS`` bounds the stall (it reads only the clock's ticks
  and standbys' changelogs now).

Its producer (the tables' changelogs) is made idempotent with ``acks=all``, like
every other sagalog producer.

Two of faust's rules lose records around a rebalance, and are changed here: it keeps
no read offsets (``_NoReadOffsets``), and its fetches hand over only records of
partitions active at that moment (``_Flowing``).

The workflow topics stay in its subscription (so its assignor keeps partition *p* of
them with the tables' partition *p*) but are paused in aiokafka as they are assigned:
they are read by librdkafka (``log_input``), and a pause is the one thing that keeps
aiokafka's fetcher off a partition it was given.

Both consumer settings are set on the consumer object faust created, before it starts (aiokafka
builds its fetcher from them in ``start``), rather than by copying faust's
constructor: everything else stays faust's. The hooks overridden here and the
attributes set are faust's and aiokafka's private ones; ``faust_internals`` names
them and checks at start that they still exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Set
from typing import Any, cast

import aiokafka
import faust
from faust.transport.drivers import aiokafka as driver

from sagalog.services.tracker import faust_internals

ISOLATION_LEVEL = "read_committed"


class _Flowing(Set[Any]):
    """The partitions faust lets flow, read live, and never "every partition".

    faust asks aiokafka's fetcher for records of its set of active partitions, the very
    set it keeps changing while the fetch waits (up to a second). aiokafka takes an
    *empty* set for "all partitions" (``if partitions and tp not in partitions``), and
    faust's set is empty for a moment in every recovery: the changelogs are paused when
    read, the stream partitions are still paused. A fetch waiting then handed over the
    records of the paused stream partitions, which moved aiokafka's position past them,
    and faust dropped them as not active. So the seek to the committed offsets did not
    hold: a worker taking over a frozen one resumed a partition at 97 with 85
    committed, and the workflows whose events 85-96 were waited forever (the
    paused-tracker chaos round). Seen through this view, an empty set holds nothing.
    """

    def __init__(self, live: Set[Any]) -> None:
        self.live = live

    def __contains__(self, tp: object) -> bool:
        return tp in self.live

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self.live))

    def __len__(self) -> int:
        return len(self.live)

    def __bool__(self) -> bool:
        return True


class _ConsumerThread(driver.AIOKafkaConsumerThread):
    async def on_partitions_assigned(self, assigned: set[Any], generation_id: int = 0) -> None:
        """Pause the workflow partitions in aiokafka before faust goes on with them:
        nothing of them is fetched by faust's consumer (``log_input`` reads them)."""
        app = cast(TrackerApp, self.app)
        inputs = [
            aiokafka.TopicPartition(tp.topic, tp.partition)
            for tp in assigned
            if tp.topic in app.input_topics
        ]
        if inputs:
            self._ensure_consumer().pause(*inputs)
        await super().on_partitions_assigned(assigned, generation_id)

    def verify_event_path(self, now: float, tp: Any) -> None:
        """faust's check that records of ``tp`` flow, except for the workflow partitions:
        aiokafka never fetches those (the tracker's input does), and faust logged an
        error for each of them every few minutes."""
        if tp.topic not in cast(TrackerApp, self.app).input_topics:
            super().verify_event_path(now, tp)

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        app = cast(TrackerApp, self.app)  # only TrackerApp's transport makes this thread
        faust_internals.configure_fetch(
            consumer, isolation_level=ISOLATION_LEVEL, fetch_max_wait_ms=app.fetch_max_wait_ms
        )
        return consumer

    async def _fetch_records(
        self,
        consumer: Any,
        active_partitions: Set[Any] | None,
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> Any:
        """faust's, asking only for the partitions active when records are handed over."""
        flowing = None if active_partitions is None else _Flowing(active_partitions)
        return await super()._fetch_records(
            consumer, cast(Any, flowing), timeout=timeout, max_records=max_records
        )


class _NoReadOffsets(dict[Any, Any]):
    """faust's "last offset read" per partition, kept as nothing at all.

    faust drops a fetched record whose offset is below the last one it read from the
    partition, to skip what a seek makes it fetch twice. Around a rebalance that
    turned a reordering into a loss: records fetched before the seek moved the mark
    past themselves, and the copies the seek fetched again were dropped for good,
    while the tracker's offsets went on from the later records. The tracker needs no
    such filter: a record decided twice is a duplicate that changes nothing (its
    position is sealed in its workflow's record), and its offsets are its own
    (``offsets``).
    """

    def __getitem__(self, tp: Any) -> None:
        return None

    def __setitem__(self, tp: Any, offset: Any) -> None:
        return None

    def update(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Consumer(driver.Consumer):
    def _new_consumer_thread(self) -> _ConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def _reset_state(self) -> None:
        super()._reset_state()
        self._read_offset = _NoReadOffsets()

    async def seek_to_committed(self) -> Mapping[Any, int]:
        """Seek every partition to its committed offset, and one with none (or 0) to 0.

        After a rebalance faust drops the records it read under the old generation and
        relies on this seek to read them again. aiokafka's skips a partition whose
        committed offset is None or 0 (``if offset and offset > 0``), leaving it where
        its fetch was: a partition that had nothing committed yet lost its first
        records that way (the first workflow of a test never started). 0 is before any
        record; where the log starts later, the reset policy (earliest) applies.
        """
        committed = await super().seek_to_committed()
        for tp, offset in committed.items():
            if not offset and not self._is_changelog_tp(tp):  # faust places changelogs
                await self.seek(tp, 0)
        return committed


class _Producer(driver.Producer):
    """faust's changelog producer, idempotent like every sagalog producer.

    faust asks aiokafka for idempotence only under its exactly-once guarantee, which
    the tracker does not use; without it a retried changelog write after a leader
    change can land twice or out of order within a table partition.
    """

    def _settings_extra(self) -> Mapping[str, Any]:
        return {**super()._settings_extra(), "acks": "all", "enable_idempotence": True}


class _Transport(driver.Transport):
    Consumer = _Consumer
    Producer = _Producer


class TrackerApp(faust.App):
    """A faust app whose consumer reads committed data and waits at most ``fetch_max_wait_ms``,
    leaves ``input_topics`` to the tracker's own consumer, calls ``on_ready`` when a
    rebalance's recovery is complete and the streams resume, and runs ``before_stop``
    before faust stops anything (``handover``)."""

    def __init__(
        self,
        *args: Any,
        fetch_max_wait_ms: int,
        input_topics: Set[str] = frozenset(),
        on_ready: Callable[[], None] | None = None,
        before_stop: Callable[[], Awaitable[None]] | None = None,
        **kwargs: Any,
    ) -> None:
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.input_topics = input_topics
        self.on_ready = on_ready
        self.before_stop = before_stop
        super().__init__(*args, **kwargs)

    def on_rebalance_end(self) -> None:
        """faust's, then ``on_ready``: faust calls this last in a recovery it completed
        for the current generation, after the tables are ready and the streams resumed."""
        super().on_rebalance_end()
        if self.on_ready is not None:
            self.on_ready()

    async def on_stop(self) -> None:
        """faust's stop revokes and closes the tables first and stops the agents last;
        the batch in hand must end before the first of that."""
        if self.before_stop is not None:
            await self.before_stop()
        await super().on_stop()

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)
