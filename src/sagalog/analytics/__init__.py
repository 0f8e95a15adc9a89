"""Time-in-state analytics over the transitions topic: ``sagalog analytics``.

- ``records.Transition``: one ``StateTransition`` as plain values;
- ``statistics``: the figures as pure functions over a list of transitions
  (dwell time per state and step, slowest transitions, terminal states, exits from
  the forward path, throughput by hour, workflows in flight), per flow version;
- ``source.read_transitions``: a time range of the topic, read with ``sagalog.replay``;
- ``report``, ``tables``, ``export``, ``charts``, ``html_report``: the outputs
  (terminal, CSV, Parquet, a self-contained HTML report with SVG charts).
"""

from sagalog.analytics.records import Transition, transitions_from
from sagalog.analytics.report import AnalyticsReport, build_report
from sagalog.analytics.source import TransitionLog, read_transitions
from sagalog.analytics.statistics import Analytics, analyse
from sagalog.analytics.timerange import TimeRange, parse_time_range

__all__ = [
    "Analytics",
    "AnalyticsReport",
    "TimeRange",
    "Transition",
    "TransitionLog",
    "analyse",
    "build_report",
    "parse_time_range",
    "read_transitions",
    "transitions_from",
]
