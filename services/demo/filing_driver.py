"""The people and the calendar of the filings: open them, review drafts, sign, let
days pass.

Time is compressed with the tracker's virtual clock, and only while nothing is in
flight, as for the procurement requests (``driver``):

1. **open** every filing: the records agent holds its documents, the drafting agent
   has the model draft it with tools; each stops at the legal review, except the
   trial tenant's, whose budget refuses the draft: those compensate.
2. **legal reviews**: legal approves (``file``, ``unsigned``) or rejects (``reject``)
   through the gateway, and the officers of the ``file`` filings sign (the signing
   service publishes ``SignatureCaptured``); signed filings are submitted.
3. **the signature deadline passes** (+73 h): the waits nobody signed for take their
   default, fail, and those filings compensate.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from demo.driver import HOUR_MS, Calendar, Planned
from demo.filing_scenario import Filing, FilingPlan
from sagalog.flows.states import TERMINAL_STATES

REVIEWED = (FilingPlan.FILE, FilingPlan.REJECT, FilingPlan.UNSIGNED)


@dataclass(kw_only=True)
class FilingDriver(Calendar):
    filings: list[Filing]

    @property
    def planned(self) -> Sequence[Planned]:
        return self.filings

    def run(self, *, phase_timeout_s: float = 240) -> None:
        self._start_clock()
        self._phase("open filings", self._open, self._drafted, phase_timeout_s)
        self._phase(
            "legal reviews, signs",
            self._review_and_sign,
            self._reviewed,
            phase_timeout_s,
        )
        self._phase(
            "signatures time out",
            lambda: self._advance(73 * HOUR_MS),
            lambda: self._count(TERMINAL_STATES),
            phase_timeout_s,
        )

    # -- steps -----------------------------------------------------------------

    def _open(self) -> None:
        self._publish_each(
            "filings.v1.FilingOpened",
            ((f.workflow_id, f.payload, None) for f in self.filings),
            source="demo/filers",
            purpose="demo-filing",
        )

    def _review_and_sign(self) -> None:
        self._decide_gates(
            {
                f.workflow_id: "reject" if f.plan is FilingPlan.REJECT else "approve"
                for f in self.filings
                if f.plan in REVIEWED
            },
            level=0,
            comment="demo legal review",
        )
        now = dt.datetime.now(dt.UTC)
        self._publish_each(
            "filings.v1.SignatureCaptured",
            (
                (
                    f.workflow_id,
                    {
                        "filing_number": f.payload["filing_number"],
                        "signed_by": f.signer,
                        "signed_at": now,
                    },
                    None,
                )
                for f in self.filings
                if f.plan is FilingPlan.FILE
            ),
            source="demo/signing-service",
            purpose="demo-signature",
        )

    # -- watching ------------------------------------------------------------------

    def _drafted(self) -> tuple[int, int]:
        """Filings at the legal review, and over-budget ones ended."""
        return self._reached(
            {
                f.workflow_id: TERMINAL_STATES
                if f.plan is FilingPlan.OVER_BUDGET
                else {"pending_approval"}
                for f in self.filings
            }
        )

    def _reviewed(self) -> tuple[int, int]:
        """Filings ended, except the unsigned ones, which wait for a signature."""
        return self._reached(
            {
                f.workflow_id: {"awaiting_input"}
                if f.plan is FilingPlan.UNSIGNED
                else TERMINAL_STATES
                for f in self.filings
            }
        )

    def _reached(self, wanted: dict[str, frozenset[str] | set[str]]) -> tuple[int, int]:
        states = self.refresh()
        return sum(1 for w, ok in wanted.items() if states.get(w) in ok), len(wanted)
