"""What a candidate's unobserved entries do: a stated policy, so an outcome is computed.

The recording says how long each step took and how each gate was decided, but only
for the entries the recorded version had. A candidate that adds a step, a gate or a
compensation asks an agent or a person something the recording never asked, so
what-if replay has to be told what the answer is. ``--assume`` says it, per entry:

==========================  ==============================================================
``STEP=DURATION``           the step completes DURATION after it starts (``10m``, ``2h``)
``STEP=fail[@DURATION]``    it fails (a ``StepFailed``), at once or after DURATION
``STEP=never``              no answer: its timeout, a segment or the deadline decides
``GATE=approve[@DURATION]`` a person approves, at once or after DURATION
``GATE=reject[@DURATION]``  a person rejects
``GATE=never``              nobody decides: escalations, then the gate's default
``STEP.undo=DURATION``      the step's compensation (or follow-up) completes after DURATION
``STEP.undo=never``         it never completes: retried, then given up
==========================  ==============================================================

Without ``--assume``, an unobserved step completes and an unobserved gate approves
the moment it starts, and an unobserved compensation completes at once: the
candidate's new entries cost no time, so only the structure of the candidate, not a
guess about its timing, changes outcomes. An entry the recorded version reached but
that got no answer is *observed* silence, never assumed: it stays unanswered.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from sagalog.durations import format_duration, positive_duration_ms
from sagalog.errors import ConfigurationError
from sagalog.flows.model import Flow, Gate, Step

UNDO_SUFFIX = ".undo"


class Answer(enum.StrEnum):
    COMPLETE = "complete"
    FAIL = "fail"
    APPROVE = "approve"
    REJECT = "reject"
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class Assumption:
    """The answer an unobserved entry gets, ``after_ms`` after it starts."""

    answer: Answer
    after_ms: int = 0

    def __str__(self) -> str:
        if self.answer is Answer.NEVER:
            return "never"
        if self.answer is Answer.COMPLETE:
            return format_duration(self.after_ms) if self.after_ms else "at once"
        return f"{self.answer}@{format_duration(self.after_ms)}" if self.after_ms else self.answer


STEP_DEFAULT = Assumption(Answer.COMPLETE)
GATE_DEFAULT = Assumption(Answer.APPROVE)
UNDO_DEFAULT = Assumption(Answer.COMPLETE)


def parse_assumptions(texts: Iterable[str], flow: Flow) -> dict[str, Assumption]:
    """``--assume`` values (``NAME=SPEC``) for ``flow``, by entry name (``STEP.undo`` too).

    Raises:
        ConfigurationError: naming the value, what is wrong and what is accepted.
    """
    found: dict[str, Assumption] = {}
    for text in texts:
        name, sep, spec = text.partition("=")
        name, spec = name.strip(), spec.strip().lower()
        if not sep or not name or not spec:
            raise ConfigurationError(
                f"--assume {text!r}: write NAME=SPEC, e.g. check_vendor=10m, "
                "check_vendor=fail, manager_approval=reject@2h"
            )
        found[name] = _parse(name, spec, flow, text)
    return found


def _parse(name: str, spec: str, flow: Flow, text: str) -> Assumption:
    undo = name.endswith(UNDO_SUFFIX)
    entry = flow.entry(name.removesuffix(UNDO_SUFFIX))
    if entry is None or (undo and (not isinstance(entry, Step) or entry.undo is None)):
        names = [e.name for e in flow.entries]
        names += [f"{s.name}{UNDO_SUFFIX}" for s in flow.steps if s.undo is not None]
        raise ConfigurationError(
            f"--assume {text!r}: {flow.label} has no {'undoable step' if undo else 'step or gate'}"
            f" {name.removesuffix(UNDO_SUFFIX)!r}; it has {', '.join(names)}"
        )
    word, _, delay = spec.partition("@")
    if word == Answer.NEVER:
        if delay:
            raise ConfigurationError(f"--assume {text!r}: never takes no duration")
        return Assumption(Answer.NEVER)
    allowed: tuple[Answer, ...]
    if isinstance(entry, Gate) and not undo:
        allowed = (Answer.APPROVE, Answer.REJECT)
        hint = "approve[@DURATION], reject[@DURATION] or never"
    elif undo:
        allowed, hint = (Answer.COMPLETE,), "DURATION or never"
    else:
        allowed, hint = (Answer.COMPLETE, Answer.FAIL), "DURATION, fail[@DURATION] or never"
    if word not in {a.value for a in Answer}:  # a bare duration: completes (approves) then
        word, delay = (Answer.APPROVE if isinstance(entry, Gate) and not undo else "complete"), spec
    answer = Answer(word)
    if answer not in allowed:
        raise ConfigurationError(
            f"--assume {text!r}: {name} is a {'compensation' if undo else entry.kind}; say {hint}"
        )
    try:
        after = positive_duration_ms(delay) if delay else 0
    except ValueError as exc:
        raise ConfigurationError(f"--assume {text!r}: {exc}") from None
    return Assumption(answer, after)


def assumption_for(kind: str, name: str, assumed: dict[str, Assumption]) -> Assumption:
    """The answer for an unobserved entry: ``kind`` is ``step``, ``gate`` or ``undo``."""
    if kind == "undo":
        return assumed.get(f"{name}{UNDO_SUFFIX}", UNDO_DEFAULT)
    return assumed.get(name, GATE_DEFAULT if kind == "gate" else STEP_DEFAULT)
