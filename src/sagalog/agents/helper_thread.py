"""One daemon thread that runs blocking calls in turn, and may be abandoned with one in hand.

``KafkaClients.bounded`` runs librdkafka calls that can block past their own timeout
(``send_offsets_to_transaction`` when the coordinator goes away) and abandons such a
call to its thread. A ``ThreadPoolExecutor`` cannot be that thread: the interpreter
joins every executor thread at exit, so a process that had abandoned one call
would log its clean stop and then hang until it was killed
(docs/design/incident-history.md). A daemon thread is not joined:
the process exits, and the call dies with it, which is what abandoning it meant.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_Call = tuple[Callable[[], Any], "Future[Any]"]


class HelperThread:
    """Runs submitted calls one at a time on a daemon thread, each with its future.

    Args:
        name: the thread's name (it shows in py-spy and in thread dumps).
    """

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        """Queue ``call``; its future holds what it returns or raises."""
        future: Future[Any] = Future()
        self._calls.put((call, future))
        return future

    def shutdown(self) -> None:
        """Let the thread end after the calls queued before; never waits for it."""
        self._calls.put(None)

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            call, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = call()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
