"""Full disks, as the kernel makes them: a size-limited tmpfs over a data directory.

A ``SmallDisk`` is mounted over a directory before the process that writes there
starts (a mount over a directory a process already writes in would hide nothing
from it: its open files stay on the old filesystem). Filling it is a filler file
written until the kernel says ENOSPC; freeing it is deleting that file. So the
service sees exactly what a full volume shows it: every append, every new file
refused, until space returns, while its own data stays as it was.

Every mount's source is named ``sgdisk-<name>``, so ``cleanup`` finds what a killed
run left behind (``PYTHONPATH=tests python -m chaos.disks cleanup``; ``list`` shows
them); a run unmounts its own at the end, on failure too (``atexit`` and the
context manager). Root only, like ``netns``.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "sgdisk-"
FILLER = ".chaos-filler"
_MOUNTED: dict[Path, SmallDisk] = {}


@dataclass
class SmallDisk:
    """A tmpfs of ``size_mb`` over ``path``; ``fill`` and ``free`` its space."""

    name: str
    path: Path
    size_mb: int = 256
    filled: bool = field(default=False, init=False)

    @property
    def source(self) -> str:
        return PREFIX + self.name

    def mount(self) -> SmallDisk:
        """Mount over ``path``, which must be absent or empty (its writer not started)."""
        if os.geteuid() != 0:
            raise PermissionError("mounting a small disk needs root (mount -t tmpfs)")
        self.path.mkdir(parents=True, exist_ok=True)
        if any(self.path.iterdir()):
            raise FileExistsError(
                f"{self.path} is not empty: mount the small disk before its writer starts"
            )
        _run("mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", self.source, str(self.path))
        _MOUNTED[self.path] = self
        return self

    def fill(self) -> int:
        """Write the filler until the filesystem refuses a byte more; the bytes written."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with (self.path / FILLER).open("ab", buffering=0) as filler:
            for size in (1 << 20, 1 << 12, 1):  # down to the last page tmpfs has
                chunk = chunk[:size]
                while True:
                    try:
                        written += filler.write(chunk) or 0
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
        self.filled = True
        return written

    def free(self) -> None:
        """Delete the filler: the space returns at once."""
        with contextlib.suppress(FileNotFoundError):
            (self.path / FILLER).unlink()
        self.filled = False

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.path).free

    def unmount(self) -> None:
        """Unmount (lazily: a writer still running keeps its files until it exits)."""
        _MOUNTED.pop(self.path, None)
        subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)

    def __enter__(self) -> SmallDisk:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")


def mounted() -> list[tuple[str, str]]:
    """Every small disk mounted on this machine, by any run: ``(source, path)``."""
    found = []
    for line in Path("/proc/mounts").read_text().splitlines():
        source, path, *_ = line.split()
        if source.startswith(PREFIX):
            found.append((source, path.replace("\\040", " ")))
    return found


def cleanup() -> list[str]:
    """Unmount every small disk (``sgdisk-*``); the paths unmounted."""
    gone = []
    for _, path in reversed(mounted()):
        subprocess.run(["umount", "-l", path], check=False, capture_output=True)
        gone.append(path)
    _MOUNTED.clear()
    return gone


@atexit.register
def _unmount_ours() -> None:
    for disk in list(_MOUNTED.values()):
        disk.unmount()


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "list"
    if command == "list":
        for source, path in mounted():
            print(f"{source} {path}")
        return 0
    if command == "cleanup":
        for path in cleanup():
            print(f"unmounted {path}")
        return 0
    print("usage: python -m chaos.disks [list|cleanup]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
