"""The group leader's step of a rebalance: build and publish the next job model.

Detection, decision and publication are the model service's
(`framework.coordinator.model_service`, the one-host coordinator's too): the same builder
(fixed-task grouper, expansion mapping and barriers), a partition change decided and
recorded as on one host (expansions applied, inputs held, the refusal and the expansion
in the job's status for `sampan status`), one build per model; only the placement is over
hosts (`placement.place_on_hosts`). It runs after the round, not inside it: aiokafka asks
an assignor for its assignment synchronously inside its event loop (the member's
heartbeats wait meanwhile), so the assignor only answers every member with the round's
id, and the leader then builds and publishes the model carrying that id
(`JobModel.round_id`) while its heartbeats go on (`framework.hosts.host`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from framework.config import JobConfig
from framework.coordinator.expansion_book import ExpansionBook
from framework.coordinator.model_service import ModelChange, ModelService
from framework.hosts.handover import first_model
from framework.hosts.member import Member
from framework.hosts.placement import HostPlacement, RestoreRange, place_on_hosts
from framework.metadata import CoordinatorState, publish_status, read_state
from framework.metadata.jobmodel import JobModel
from framework.systems.base import Checkpoint, OffsetRange

__all__ = ["Led", "change_in_place", "incremental_rebalances", "lead"]

log = logging.getLogger(__name__)

ChangelogSpans = dict[str, dict[int, OffsetRange]]
"""Logged store → changelog partition → its offsets now."""


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _changelog_spans(service: ModelService) -> ChangelogSpans:
    """Every logged store's changelog offsets now (a changelog not created yet: none)."""
    spans: ChangelogSpans = {}
    for store in service.config.logged_stores:
        stream = service.config.changelog_ref(store).stream
        try:
            spans[store] = dict(await service.meta.offsets(stream))
        except Exception:  # not created yet: every copy is empty
            spans[store] = {}
    return spans


def _restore_ranges(spans: ChangelogSpans, changelogs: Mapping[str, int],
                    checkpoints: Mapping[str, Checkpoint]) -> dict[str, dict[str, RestoreRange]]:
    """Task → logged store → (oldest, restore end) of its changelog partition; the end is
    the checkpointed changelog offset where there is one (records past it are replayed)."""
    ranges: dict[str, dict[str, RestoreRange]] = {t: {} for t in changelogs}
    for store, partitions in spans.items():
        for task, partition in changelogs.items():
            span = partitions.get(partition)
            oldest, end = (span.oldest, span.end) if span else (0, 0)
            checkpoint = checkpoints.get(task)
            done = checkpoint.changelogs if checkpoint else {}
            if store in done:
                end = min(end, done[store])
                oldest = min(oldest, end)
            ranges[task][store] = (oldest, end)
    return ranges


@dataclass(frozen=True)
class Led:
    """What a leader's step published, and what it leaves to do."""

    model: JobModel
    probing: bool
    """Warmups are restoring: a probing rebalance follows."""
    follow_up: JobModel | None = None
    """The target placement, to publish once the tasks ``model`` parks are let go
    (`framework.hosts.handover`); None when ``model`` is the target."""


def incremental_rebalances(config: JobConfig) -> bool:
    """Whether rebalances of ``config``'s hosts are incremental (workers go on)."""
    coordinator = config.coordinator
    return coordinator.rebalances == "incremental" and coordinator.model_changes == "in-place"


STALE_BUILDS = 3
"""How many times a leader builds its model: another leader may publish one while it builds
(rounds overlapping), and a model built on an older one would restart every worker; the
last build is published for a restart all the same (the fence decides)."""
FENCE_WAIT_S = 2.0
"""How long a leader waits for the model of an epoch already fenced (another leader
publishing it) before it builds on the last readable one (that leader died between)."""


async def lead(service: ModelService, members: Mapping[str, Member], reason: str,
               round_id: str = "") -> Led:
    """Read the job's state, build the model placing tasks on ``members``, publish it (which
    fences every older epoch's workers; incrementally, its first step parks the tasks that
    change host). Built again on the newer model when another one became current while it
    was built (`STALE_BUILDS`)."""
    for build in range(1, STALE_BUILDS + 1):
        led = await _build_and_publish(service, members, reason, round_id,
                                       last=build == STALE_BUILDS)
        if led is not None:
            return led
    raise AssertionError("the last build always publishes")


async def _current_state(service: ModelService) -> tuple[CoordinatorState, int | None]:
    """The job's state once its model is the fenced epoch's (waiting up to `FENCE_WAIT_S`
    for a model being published by another leader), and the fenced epoch."""
    config = service.config
    deadline = time.monotonic() + FENCE_WAIT_S
    while True:
        fenced = await service.meta.fenced_epoch(config.name)
        state = await read_state(service.meta, config)
        readable = state.model.epoch if state.model is not None else None
        if fenced is None or readable == fenced or time.monotonic() >= deadline:
            return state, fenced
        await asyncio.sleep(0.1)


async def _decide(service: ModelService, state: CoordinatorState, counts: dict[str, int]
                  ) -> tuple[ModelChange | None, ExpansionBook]:
    """The one-host decision about ``counts`` against the job's model (None without one),
    its refusal recorded in the job's status before any model, as on one host."""
    book = ExpansionBook(state.status)  # `sampan status` shows what happened to inputs
    previous = state.model
    if previous is None:
        return None, book
    change = await service.decide(previous, counts, now_ms=_now_ms())
    if book.note(change.decision, previous.epoch):
        await publish_status(service.meta, service.config, book.status)
    return change, book


async def _build_and_publish(service: ModelService, members: Mapping[str, Member],
                             reason: str, round_id: str, *, last: bool) -> Led | None:
    """One build of `lead`; None (nothing published) when another model became current
    while it was built, unless ``last``."""
    config = service.config
    state, fenced = await _current_state(service)
    previous = state.model
    counts = await service.partition_counts()
    await service.create_declared_streams()
    change, book = await _decide(service, state, counts)
    if change is not None:  # expand, hold or release inputs
        counts = change.decision.counts
        if change.decision.expansion:
            reason = f"{reason}, expansion {change.decision.expansion}"
    basis = await service.basis(previous, change)
    spans = await _changelog_spans(service)
    decided: list[HostPlacement] = []

    def placement(changelogs: Mapping[str, int]) -> Mapping[str, int]:
        placed = place_on_hosts(
            members, changelogs, previous, _restore_ranges(spans, changelogs,
                                                           basis.checkpoints),
            stateful=config.stateful, standbys=config.standby_replicas,
            acceptable_recovery_lag=config.coordinator.acceptable_recovery_lag,
            max_warmups=config.coordinator.max_warmup_replicas)
        decided.append(placed)
        return placed.workers

    model = service.build(counts, previous, basis, reason=reason, now_ms=_now_ms(),
                          placement=placement)
    placed = decided[-1]
    model = replace(model, workers=placed.total_workers, hosts=placed.hosts,
                    standbys=placed.standbys, warmups=placed.warmups, round_id=round_id)
    if not last and (now := await service.meta.fenced_epoch(config.name)) != fenced:
        log.info("leader: epoch %s became current while this model was built on epoch %s "
                 "(another leader's round overlapped); building it again on that one", now,
                 fenced)
        return None
    incremental = previous is not None and incremental_rebalances(config)
    first = first_model(previous, model, members) if incremental else None
    gone = sorted(set(previous.worker_ids()) - set(model.worker_ids())) if (
        previous is not None and previous.hosts) else []
    published = await service.publish(first or model, previous, basis, in_place=incremental,
                                      gone=gone)
    log.info("leader published job model epoch %d (%s): %d tasks on hosts %s%s",
             published.epoch, reason, len(model.tasks), ", ".join(sorted(placed.hosts)),
             f"; {len(published.parked)} task(s) parked until their hosts let them go"
             if published.parked else "")
    if change is not None and book.applied(change.decision.expansion_record(
            published.epoch, change.detected_ms, published_ms=_now_ms(),
            in_place=published.in_place_since is not None)):
        await publish_status(service.meta, config, book.status)
    return Led(published, placed.probing, model if first is not None else None)


async def change_in_place(service: ModelService, running: JobModel) -> JobModel | None:
    """The leader of the last rebalance applies a partition change of the inputs without a
    rebalance — an expansion, a hold placed or released: the same placement (hosts,
    workers, standbys, warmups), new partitions with their barriers, holds, published for
    the running workers of every host to take in place (`framework.worker.in_place`).
    ``running`` itself when the change leaves the model as it is (a held input growing on
    while it stays held); None — nothing published, a rebalance decides — when
    ``model_changes`` is not in-place, or another model became current meanwhile."""
    config = service.config
    if config.coordinator.model_changes != "in-place":
        return None
    state = await read_state(service.meta, config)
    previous = state.model
    if previous is None or previous.epoch != running.epoch or previous.parked:
        return None  # parked tasks: the follow-up (or a rebalance) comes first
    change, book = await _decide(service, state, await service.partition_counts())
    assert change is not None
    decision = change.decision
    if not decision.changed:
        return running
    basis = await service.basis(previous, change)
    model = service.build(
        decision.counts, previous, basis, now_ms=change.detected_ms,
        reason=f"{decision.what} (in place, hosts {', '.join(sorted(previous.hosts))})",
        placement=lambda changelogs: {t: previous.tasks[t].worker for t in changelogs})
    model = replace(model, workers=previous.workers, hosts=previous.hosts,
                    standbys=previous.standbys, warmups=previous.warmups)
    if await service.meta.fenced_epoch(config.name) != previous.epoch:
        log.info("leader: another model became current while the change of epoch %d was "
                 "built; a rebalance applies it", previous.epoch)
        return None  # a model over it would restart every worker (see `lead`)
    model = await service.publish(model, previous, basis, in_place=True)
    if model.in_place_since is None:  # the fence moved on: a rebalance published first
        log.warning("leader: epoch %d was published for a restart (another model came "
                    "first)", model.epoch)
    log.info("leader published job model epoch %d (%s) for the running workers of every "
             "host to take in place", model.epoch, decision.what)
    book.applied(decision.expansion_record(model.epoch, change.detected_ms,
                                           published_ms=_now_ms(),
                                           in_place=model.in_place_since is not None))
    await publish_status(service.meta, config, book.status)
    return model
