"""A service's wall clock moved while it runs: libfaketime, steered through a file.

A real clock jump (an NTP step, a VM resumed, an operator's ``date -s``) moves
``CLOCK_REALTIME`` only; ``CLOCK_MONOTONIC`` never jumps. So a shifted process is
started with Debian's libfaketime preloaded, ``DONT_FAKE_MONOTONIC=1`` (``time.time()``
jumps, ``time.monotonic()`` does not) and ``FAKETIME_TIMESTAMP_FILE`` with
``FAKETIME_NO_CACHE=1``: the process reads its offset from the file at every call, so
the harness moves the clock of a running process, mid-round, by rewriting the file.

libfaketime 0.9.10 gets two kinds of wait wrong (``faketime_waits.c``): every
``time.sleep`` of Python 3.11 raises when monotonic is left alone, and librdkafka's
waits on its queues last the shift on top (an hour, with the clock an hour ahead). A
small library, built here with the system's C compiler and preloaded first, hands
both to the kernel with the kernel's times.

``WallClockShift.check`` proves the mechanism on this machine before a round relies
on it: a probe process under the same settings must see its wall clock follow the
file both ways while its monotonic clock and its sleeps go on as before.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBRARY_GLOBS = (
    (Path("/usr/lib"), "*/faketime/libfaketimeMT.so.1"),
    (Path("/usr/lib"), "faketime/libfaketimeMT.so.1"),
    (Path("/usr/local/lib"), "faketime/libfaketimeMT.so.1"),
)
"""Where Debian (per architecture) and a source build put it."""
COMPILE = ("cc", "-shared", "-fPIC", "-O2")
INSTALL = "apt-get install -y faketime (Debian's libfaketime), and a C compiler (cc)"


class WallClockUnavailable(RuntimeError):
    """libfaketime or a C compiler is missing, or the probe saw the clock misbehave."""


def libfaketime() -> Path | None:
    """The multi-threaded libfaketime (the tracker runs threads), or None."""
    for root, pattern in LIBRARY_GLOBS:
        for found in sorted(root.glob(pattern)):
            return found
    return None


def unavailable() -> str | None:
    """Why a clock round cannot run here (what to install), or None when it can."""
    if libfaketime() is None:
        return f"libfaketime is not installed: {INSTALL}"
    if shutil.which("cc") is None:
        return f"no C compiler to build tests/chaos/faketime_waits.c: {INSTALL}"
    return None


class WallClockShift:
    """The offset file one or more processes read their wall clock's shift from."""

    def __init__(self, work_dir: Path) -> None:
        reason = unavailable()
        if reason is not None:
            raise WallClockUnavailable(reason)
        work_dir.mkdir(parents=True, exist_ok=True)
        self.offset_file = work_dir / "faketime-offset"
        self.wait_library = work_dir / "faketime_waits.so"
        self.offset_s = 0
        subprocess.run(
            [*COMPILE, "-o", str(self.wait_library), str(HERE / "faketime_waits.c"), "-ldl"],
            check=True,
            capture_output=True,
        )
        self.shift(0)

    def environment(self) -> dict[str, str]:
        """What a process needs in its environment to follow the offset file."""
        return {
            "LD_PRELOAD": f"{self.wait_library} {libfaketime()}",
            "FAKETIME_TIMESTAMP_FILE": str(self.offset_file),
            "FAKETIME_NO_CACHE": "1",
            "DONT_FAKE_MONOTONIC": "1",
        }

    def shift(self, offset_s: int) -> None:
        """Set the wall clock of every process following the file to real time + ``offset_s``.

        Written whole and renamed, so a process never reads half an offset.
        """
        partial = self.offset_file.with_suffix(".partial")
        partial.write_text(f"{offset_s:+d}\n")
        partial.replace(self.offset_file)
        self.offset_s = offset_s

    def check(self, python: str = sys.executable) -> None:
        """Shift a probe process's clock +1 h and back; raise unless only its wall clock moved
        and its sleeps and librdkafka's waits still last what they ask.

        Raises:
            WallClockUnavailable: the probe failed, or a clock did not behave.
        """
        probe = textwrap.dedent(
            """
            import sys, time
            def look():
                return time.time(), time.monotonic()
            wall0, mono0 = look()
            print("ready", flush=True)
            sys.stdin.readline()
            wall1, mono1 = look()
            time.sleep(0.05)
            # librdkafka waits on a realtime deadline: a broker that never answers
            # leaves it nothing to wake up for, so poll waits the whole second
            import socket
            from confluent_kafka import Producer
            mute = socket.create_server(("127.0.0.1", 0))
            port = mute.getsockname()[1]
            asked = time.monotonic()
            Producer({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0}).poll(1.0)
            waited = time.monotonic() - asked
            print(round(wall1 - wall0 - (mono1 - mono0)), round(mono1 - mono0, 1), round(waited, 1))
            """
        )
        before = self.offset_s
        process = subprocess.Popen(
            [python, "-c", probe],
            env={**os.environ, **self.environment()},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None and process.stdin is not None
            if process.stdout.readline().strip() != "ready":
                raise WallClockUnavailable(f"the probe failed: {process.communicate()[1][-500:]}")
            self.shift(before + 3600)
            out, err = process.communicate("\n", timeout=60)
        finally:
            self.shift(before)
            if process.poll() is None:
                process.kill()
        try:
            jumped, monotonic_s, poll_s = (float(v) for v in out.split())
        except ValueError:
            raise WallClockUnavailable(f"the probe failed: {out!r} {err[-500:]!r}") from None
        if jumped != 3600 or monotonic_s > 30 or not 0.9 <= poll_s < 5:
            raise WallClockUnavailable(
                f"under libfaketime a +3600 s shift moved the probe's wall clock {jumped:+.0f} s "
                f"and its monotonic clock {monotonic_s:.1f} s, and a 1 s librdkafka poll took "
                f"{poll_s:.1f} s: the clock rounds need the wall clock only to jump, and waits "
                f"to last what they ask ({libfaketime()})"
            )
