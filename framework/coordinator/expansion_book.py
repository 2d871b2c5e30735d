"""The record of what partition changes did, in the coordinator's status: the expansions
applied (the timeline `sampan status` and the drill show) and the refusal of inputs held
after a change their tasks cannot map (`framework.coordinator.holds`)."""

from __future__ import annotations

import logging

from framework.coordinator.decision import PartitionDecision
from framework.metadata import CoordinatorStatus, ExpansionRecord

__all__ = ["ExpansionBook"]

log = logging.getLogger(__name__)


class ExpansionBook:
    """The coordinator's record of applied expansions and held inputs (in its status)."""

    def __init__(self, status: CoordinatorStatus) -> None:
        self.status = status

    def note(self, decision: PartitionDecision, epoch: int) -> bool:
        """Record the refusal of ``decision`` (logged once per distinct change), or clear
        the refusal when it holds no input; True when the status changed."""
        refusal = decision.refusal
        if refusal is None:
            return self.clear_refusal(epoch)
        known = self.status.refusal
        if known is not None and (known.change, known.error, known.counts) == (
                refusal.change, refusal.error, refusal.counts):
            return False
        log.error("REFUSED partition change %s: %s. The job keeps running on epoch %d",
                  refusal.change, refusal.error, epoch)
        self.status.refusal = refusal
        return True

    def clear_refusal(self, epoch: int) -> bool:
        """Forget a refusal once no input is held any more; True if there was one."""
        if self.status.refusal is None:
            return False
        log.info("no input is held any more (epoch %d); refusal cleared", epoch)
        self.status.refusal = None
        return True

    def applied(self, record: ExpansionRecord | None) -> bool:
        """Record an applied expansion in the status timeline (None: none applied); True
        when the status changed."""
        if record is None:
            return False
        self.status.expansions.append(record)
        return True
