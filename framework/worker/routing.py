"""Which running task reads each input partition, and what each system's consumer is
assigned: expansion barriers hold new partitions back until the older ones reach them, and
a held input (`JobModel.holds`) is read only up to its limit; after a barrier, new
partitions wait in record time for the old ones (`framework.worker.merging`)."""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Mapping, Sequence

from framework.config import StreamRef
from framework.metadata.jobmodel import BarrierStage, JobModel, TaskModel
from framework.systems.base import Consumer, FetchedRecord, System
from framework.systems.fetched import FetchedColumns
from framework.wording import counted
from framework.worker.dispatch import Batch
from framework.worker.instance import TaskInstance
from framework.worker.merging import Merging
from groupers import SystemStreamPartition

__all__ = ["Routing"]

log = logging.getLogger(__name__)


class Routing:
    """The routes of one worker's tasks and its consumers per system (made on first use
    from ``systems``); `route` recomputes both whenever tasks, barriers or limits change."""

    def __init__(self, systems: Mapping[str, System], merge_ms: int = 0,
                 merge_cap: int = 10_000) -> None:
        self.systems = systems
        self.merging = Merging(merge_ms, merge_cap)
        """New partitions read in record-time order with the old ones after a barrier."""
        self.routes: dict[SystemStreamPartition, list[TaskInstance]] = {}
        self.stages: dict[str, list[BarrierStage]] = {}
        """Task → its barrier stages not passed yet, in order."""
        self.limits: dict[SystemStreamPartition, int] = {}
        """Held inputs' SSPs → the offset their reading stops at (`JobModel.holds`)."""
        self.at_limit: set[SystemStreamPartition] = set()
        """Limited SSPs a fetch reached the limit of (records past it were dropped)."""
        self.approaching: set[SystemStreamPartition] = set()
        """Limited SSPs still assigned: no prefetch while one is (a cut reassigns)."""
        self.consumers: dict[str, Consumer] = {}
        self.reading: dict[str, tuple[SystemStreamPartition, ...]] = {}
        """System → the SSPs routed to a task (what `note_caught_up` looks at)."""
        self.assigned: dict[str, tuple[SystemStreamPartition, ...]] = {}
        """System → the SSPs its consumer is assigned."""
        self.caught_up: dict[SystemStreamPartition, float] = {}
        """`TaskInstance.caught_up`, shared by every instance."""

    def set_limits(self, limits: dict[SystemStreamPartition, int]) -> None:
        """Read held inputs up to ``limits`` from now on; an SSP whose limit moved is read
        again up to the new one (the caller routes)."""
        before, self.limits = self.limits, limits
        self.at_limit = {s for s in self.at_limit if before.get(s) == limits.get(s)}

    def set_stages(self, task: str, stages: Sequence[BarrierStage]) -> None:
        """``task``'s barrier stages from now on (none: every partition is read)."""
        if stages:
            self.stages[task] = list(stages)
        else:
            self.stages.pop(task, None)

    def resume_merges(self, task: TaskModel) -> None:
        """``task`` starts here (a restart, a failover) within the merge window of stages
        its checkpoint had passed: merge their new partitions as the worker that passed
        them did (the caller routes)."""
        now = int(time.time() * 1000)
        for stage in task.merging:
            self.merging.start(task.name, stage, now, resumed=True)

    def route(self, instances: Sequence[TaskInstance], model: JobModel | None) -> None:
        """Which instances read each SSP; held SSPs wait behind their barrier. Assigns each
        system's consumer the routed SSPs from the slowest reader's position."""
        routes: dict[SystemStreamPartition, list[TaskInstance]] = defaultdict(list)
        for instance in instances:
            held = frozenset().union(*(s.held for s in self.stages.get(instance.name, ())))
            for ssp in sorted(instance.ssps):
                if ssp not in held:
                    routes[ssp].append(instance)
        self.routes = dict(routes)
        for instance in instances:
            instance.caught_up = self.caught_up
        for ssp in [ssp for ssp in self.caught_up if ssp not in self.routes]:
            del self.caught_up[ssp]  # behind a barrier again (or gone): not idle
        reading: dict[str, list[SystemStreamPartition]] = defaultdict(list)
        for ssp in self.routes:
            reading[ssp.system].append(ssp)
        self.reading = {name: tuple(ssps) for name, ssps in reading.items()}
        merging = self.merging
        merging.forget({ssp for ssp in merging.merges if ssp not in self.routes})
        merging.reroute = False
        by_system: dict[str, dict[SystemStreamPartition, int]] = defaultdict(dict)
        for ssp, readers in self.routes.items():
            position = min(r.positions[ssp] for r in readers)
            if ssp in merging.merges:
                if ssp in merging.paused:
                    continue  # records of it wait: fetched again once they drain
                position = merging.fetch_from(ssp, position)
            limit = self.limits.get(ssp)
            if limit is None or (position < limit and ssp not in self.at_limit):
                by_system[ssp.system][ssp] = position
        self.approaching = {ssp for positions in by_system.values() for ssp in positions
                            if ssp in self.limits}
        self.assigned = {name: tuple(positions) for name, positions in by_system.items()}
        counts: dict[str, dict[str, int]] = defaultdict(dict)
        holds = model.holds if model else {}
        for qualified, count in (model.partition_counts if model else {}).items():
            hold = holds.get(qualified)
            if hold is not None and not hold.exact:
                continue  # held where the coordinator saw it grow (Kafka): read up to there
            system, stream = StreamRef.parse(qualified)
            counts[system][stream] = count
        for name in sorted(set(by_system) | set(self.consumers)):
            positions = by_system.get(name, {})
            if name not in self.consumers:
                self.consumers[name] = self.systems[name].consumer()
            self.consumers[name].assign(positions)
            # A stream that grew after this model is read only up to where it grew (the
            # local log) or where the consumer noticed it grew (Kafka).
            self.consumers[name].expect_partition_counts(counts[name])

    def below_limit(self, ssp: SystemStreamPartition,
                    records: Sequence[FetchedRecord]) -> Sequence[FetchedRecord]:
        """The records of a held input's SSP before its limit; reaching past it marks the
        SSP so it is no longer read (the consumer moved on: it is reassigned)."""
        limit = self.limits[ssp]
        if not records or records[-1].offset < limit:
            return records
        self.at_limit.add(ssp)
        offsets = records.offsets if isinstance(records, FetchedColumns) else [
            r.offset for r in records]
        return records[:bisect_left(offsets, limit)]

    def limits_reached(self) -> bool:
        """Whether an assigned SSP of a held input was read up to its limit."""
        return any(ssp in self.at_limit or min(
            r.positions[ssp] for r in self.routes[ssp]) >= self.limits[ssp]
            for ssp in self.approaching)

    def release_barriers(self, instances: Sequence[TaskInstance],
                         model: JobModel | None) -> bool:
        """Release, in order, the barrier stages whose older partitions were read far
        enough (and route again): whether one was."""
        released = False
        for instance in instances:
            stages = self.stages.get(instance.name)
            while stages and stages[0].passed(instance.positions):
                stage = stages.pop(0)
                log.info("task %s passed its expansion barrier; consuming %s",
                         instance.name, counted(len(stage.held), "new partition"))
                self.merging.start(instance.name, stage, int(time.time() * 1000))
                released = True
            if stages is not None and not stages:
                del self.stages[instance.name]
        if released:
            self.route(instances, model)
        return released

    def note_caught_up(self, system: str, batch: Batch) -> None:
        """Remember since when each read SSP of ``system`` has come back empty from every
        fetch (a fetch serves every partition with records: it is read to its end)."""
        now = time.monotonic()
        caught_up = self.caught_up
        for ssp in self.reading.get(system, ()):
            if batch.get(ssp):
                caught_up.pop(ssp, None)
            elif ssp not in caught_up:
                caught_up[ssp] = now

    def forget(self, task: str) -> None:
        """``task`` no longer runs here: drop its barrier stages and merges (the caller
        routes)."""
        self.stages.pop(task, None)
        self.merging.forget({s for s, m in self.merging.merges.items() if m.task == task})
