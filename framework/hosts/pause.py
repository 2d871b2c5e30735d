"""The pause of an expansion on several hosts: the leader closes it once every host of the
expansion's epoch reported that all its workers resumed (`ExpansionRecord.pause_ms`, the one
definition `sampan status` and the pause metric use on one host too)."""

from __future__ import annotations

import logging

from framework.config import JobConfig
from framework.metadata import (
    CoordinatorReader,
    CoordinatorState,
    ExpansionRecord,
    publish_status,
)

__all__ = ["close_pause", "hosts_resumed_ms"]

log = logging.getLogger(__name__)


def hosts_resumed_ms(state: CoordinatorState, epoch: int) -> int | None:
    """When the last host of the current model resumed at ``epoch`` or a later epoch it
    took in place (a probing rebalance right after an expansion); None while one has not,
    or when the current model is neither ``epoch``'s nor taken in place from it."""
    model = state.model
    if model is None or not model.hosts or model.epoch < epoch or (
            model.epoch > epoch and not (model.in_place_since is not None
                                         and model.in_place_since <= epoch)):
        return None
    resumed = [report.resumed_ms for name in model.hosts
               if (report := state.hosts.get(name)) is not None and report.epoch is not None
               and epoch <= report.epoch <= model.epoch]
    if len(resumed) < len(model.hosts) or None in resumed:
        return None
    return max(r for r in resumed if r is not None)


async def close_pause(coordinator: CoordinatorReader, config: JobConfig, epoch: int) -> bool:
    """Record when every host resumed on ``epoch`` (or a later epoch taken in place) in its
    expansion's record; True once there is nothing left to wait for (recorded, no
    expansion at ``epoch``, or a later model workers restarted on came first: its pause
    then stays unknown)."""
    state = await coordinator.read()
    record: ExpansionRecord | None = next(
        (e for e in state.status.expansions if e.epoch == epoch), None)
    if record is None or record.resumed_ms is not None:
        return True
    if state.model is None or state.model.epoch < epoch or (
            state.model.epoch > epoch and not (state.model.in_place_since is not None
                                               and state.model.in_place_since <= epoch)):
        return True
    resumed = hosts_resumed_ms(state, epoch)
    if resumed is None:
        return False
    record.resumed_ms = resumed
    await publish_status(coordinator.system, config, state.status)
    log.info("expansion %s: every host resumed on epoch %d; pause %d ms", record.change,
             epoch, resumed - record.detected_ms)
    return True
