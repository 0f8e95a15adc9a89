"""Testing a sagalog project, in tiers.

- ``TrackerHarness``: a flow's rules alone, the tracker's own processor in memory,
  with a clock the test moves (``tracker_harness``).
- ``FlowTestEnvironment``: the rules and the agents' handlers together, no broker,
  effects stubbed and recorded, gates decided by the test, days passing in
  milliseconds (``flow_environment``); ``handler_context`` for one handler alone.
- ``ServiceProcess`` and ``wait_for_event``: the project's services as processes on
  a real cluster (``on_stack``).

The names load on first use (PEP 562), as ``sagalog``'s do: the replay, which drives
the rules through ``TrackerHarness``, must not load the agent runtime with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagalog.lazy_exports import LazyNames

if TYPE_CHECKING:
    from sagalog.service_process import ServiceProcess as ServiceProcess
    from sagalog.testing.effects import EffectCall as EffectCall
    from sagalog.testing.effects import EffectStubs as EffectStubs
    from sagalog.testing.exceptions import FlowNotQuiet as FlowNotQuiet
    from sagalog.testing.flow_environment import FlowTestEnvironment as FlowTestEnvironment
    from sagalog.testing.handler_context import handler_context as handler_context
    from sagalog.testing.memory_log import DeadLetter as DeadLetter
    from sagalog.testing.memory_log import LoggedEvent as LoggedEvent
    from sagalog.testing.on_stack import wait_for_event as wait_for_event
    from sagalog.testing.tracker_harness import TrackerHarness as TrackerHarness


_names = LazyNames("sagalog.testing", globals())
__getattr__ = _names.getattr
__dir__ = _names.dir
