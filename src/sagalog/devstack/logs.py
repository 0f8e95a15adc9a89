"""Reading the services' log files: the last lines, and new lines as they come.

The JVMs write their console output to ``<state_dir>/logs``; ``sagalog dev logs``
and the startup error messages read it from here, so a failure in CI shows its
cause without anyone having to find the file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

#: How often ``follow`` looks for new output; a log viewer, not a readiness wait.
FOLLOW_INTERVAL_S = 0.25
_BLOCK = 8192


def tail_lines(path: Path, *, count: int) -> list[str]:
    """The last ``count`` lines of a file, reading only its end (logs grow large)."""
    if count <= 0 or not path.is_file():
        return []
    with path.open("rb") as stream:
        stream.seek(0, os.SEEK_END)
        position = stream.tell()
        data = b""
        while position > 0 and data.count(b"\n") <= count:
            step = min(_BLOCK, position)
            position -= step
            stream.seek(position)
            data = stream.read(step) + data
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[-count:]


@dataclass
class _Followed:
    """One followed file: its open stream and the partial line not yet terminated."""

    path: Path
    stream: BinaryIO | None = None
    pending: bytes = b""
    inode: int | None = None


def _reopen_if_replaced(entry: _Followed, *, at_end: bool) -> None:
    """Open the file once it exists, and again after it was recreated or truncated.

    ``at_end`` is True only for the files that exist when following starts: a file
    that appears or is replaced later is read from its first line.
    """
    try:
        stat = entry.path.stat()
    except FileNotFoundError:
        return
    if entry.stream is not None and (
        stat.st_ino != entry.inode or stat.st_size < entry.stream.tell()
    ):
        entry.stream.close()
        entry.stream = None
    if entry.stream is None:
        entry.stream = entry.path.open("rb")
        entry.inode = stat.st_ino
        if at_end:
            entry.stream.seek(0, os.SEEK_END)


def follow(paths: Mapping[str, Path]) -> Iterator[tuple[str, str]]:
    """Yield ``(name, line)`` for every line appended to the files, forever.

    Starts at the current end of each file (print ``tail_lines`` first for
    context), survives a file that does not exist yet or is recreated, and ends
    only when the caller stops iterating (Ctrl-C in the CLI).
    """
    entries = {name: _Followed(path) for name, path in paths.items()}
    for entry in entries.values():
        _reopen_if_replaced(entry, at_end=True)
    try:
        while True:
            idle = True
            for name, entry in entries.items():
                _reopen_if_replaced(entry, at_end=False)
                if entry.stream is None:
                    continue
                chunk = entry.stream.read()
                if not chunk:
                    continue
                idle = False
                *complete, entry.pending = (entry.pending + chunk).split(b"\n")
                for line in complete:
                    yield name, line.decode("utf-8", errors="replace")
            if idle:
                time.sleep(FOLLOW_INTERVAL_S)
    finally:
        for entry in entries.values():
            if entry.stream is not None:
                entry.stream.close()
