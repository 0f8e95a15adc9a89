"""The helper thread of ``KafkaClients.bounded``: calls in turn, and an exit that a call
abandoned in it cannot hold."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from sagalog.agents.helper_thread import HelperThread


def test_calls_run_in_turn_and_their_futures_hold_results_and_errors() -> None:
    helper = HelperThread("test-helper")
    order: list[int] = []
    first = helper.submit(lambda: order.append(1) or "one")
    failing = helper.submit(lambda: 1 / 0)
    last = helper.submit(lambda: order.append(3) or "three")
    assert (first.result(10), last.result(10)) == ("one", "three")
    with pytest.raises(ZeroDivisionError):
        failing.result(10)
    assert order == [1, 3]
    helper.shutdown()


def test_a_call_queued_behind_one_that_never_returns_waits_and_can_be_cancelled() -> None:
    helper = HelperThread("test-helper")
    release = threading.Event()
    helper.submit(release.wait)
    behind = helper.submit(lambda: "ran")
    assert behind.cancel()  # still queued: the blocked call holds the thread
    release.set()
    helper.shutdown()


def test_a_process_that_abandoned_a_blocked_call_still_exits() -> None:
    """What the rolling restart met: with an executor's thread, the interpreter joined
    the blocked call at exit and the agent hung until it was killed."""
    program = textwrap.dedent(
        """
        import threading
        from sagalog.agents.helper_thread import HelperThread

        helper = HelperThread("abandoned")
        helper.submit(threading.Event().wait)  # blocks forever, like the hung C call
        helper.shutdown()
        print("stopped", flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, "stopped"), done.stderr
