"""No unit test reads or waits on the wall clock, except where this file says why.

A unit test that sleeps, or asserts that something took less than a time, passes on
an idle laptop and fails on a loaded CI machine. Time in unit tests is a parameter
(``FakeClock``, the virtual-time loop of ``timing``); what runs in another thread
is waited for with ``timing.wait_until``. This test keeps it so: a new use of the
``time`` module, or of ``loop.time()`` outside a virtual-time loop, fails here with
the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

UNIT = Path(__file__).parent

# file -> why it may use the time module
ALLOWED = {
    "timing.py": "the one bounded wait (wait_until) lives here",
    "test_agents_circuit_breaker.py": "checks that the default clock is time.monotonic; "
    "it compares readings, never a duration",
}
CLOCKS = {"sleep", "monotonic", "perf_counter", "time", "monotonic_ns", "time_ns"}


def wall_clock_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            found += [f"{path.name}:{node.lineno}: from time import ..."]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "time"
            and node.attr in CLOCKS
        ):
            found.append(f"{path.name}:{node.lineno}: time.{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "time"
            and isinstance(node.func.value, ast.Call)
            and getattr(node.func.value.func, "attr", None) == "get_running_loop"
        ):
            found.append(f"{path.name}:{node.lineno}: get_running_loop().time()")
    return found


def test_no_unit_test_reads_the_wall_clock() -> None:
    found = [
        use
        for path in sorted(UNIT.rglob("*.py"))
        if path.name not in ALLOWED
        for use in wall_clock_uses(path)
    ]
    assert found == [], (
        "unit tests must not depend on the wall clock; use FakeClock, "
        "timing.run_virtual or timing.wait_until:\n" + "\n".join(found)
    )


def test_the_check_sees_a_sleep(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import asyncio, time\n"
        "def test_x():\n"
        "    time.sleep(1)\n"
        "    assert asyncio.get_running_loop().time() < 1\n"
    )
    assert wall_clock_uses(sample) == [
        "test_sample.py:3: time.sleep",
        "test_sample.py:4: get_running_loop().time()",
    ]
