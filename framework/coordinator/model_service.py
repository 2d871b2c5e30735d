"""One model service: detection, decision and publication of a job's models.

The one-host coordinator (`framework.coordinator.process`) and the group leader of several
hosts (`framework.hosts.leader`) both call it, so a partition change is detected, decided
and published one way:

- **detection** — `partition_counts` reads every input of every system the job reads
  (broadcast inputs too), not only the metadata system's;
- **decision** — `decide` reads what the systems show of the inputs that changed or are
  held and asks `framework.coordinator.decision` (which asks the job's grouper whether each
  new count can be mapped: no model is built to find out);
- **publication** — `basis` reads the job's checkpoints (once per change: the decision's
  own read when it made one, unless the workers stopped since) and the inputs' end
  offsets, `build` builds the model once, `publish` creates what it needs (changelog
  partitions, start positions) and publishes it, which fences every older epoch.

`apply` chains the last three for a coordinator that places tasks on its own workers; the
leader calls them one by one, as its placement over hosts and its checks for overlapping
rounds sit between them.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

from framework.config import JobConfig
from framework.coordinator.builder import build_job_model
from framework.coordinator.decision import PartitionDecision, decide_partition_change
from framework.coordinator.holds import InputNow, input_now, read_positions, stops_at
from framework.coordinator.starts import write_start_positions
from framework.errors import StreamNotFoundError
from framework.metadata import publish_model, read_state
from framework.metadata.jobmodel import JobModel, StreamHold
from framework.systems import open_system
from framework.systems.base import Checkpoint, System
from framework.wording import counted
from groupers import SystemStreamPartition

__all__ = ["ModelBasis", "ModelChange", "ModelService", "Placement"]

log = logging.getLogger(__name__)

Placement = Callable[[Mapping[str, int]], Mapping[str, int]]
"""Task → changelog partition in, task → worker out (`build_job_model`'s ``placement``)."""

Watch = Callable[[str], AbstractContextManager[object]]
"""Around one call to the named system (`framework.coordinator.reachability`)."""


@dataclass(frozen=True)
class ModelChange:
    """A partition change decided against ``model`` (``decision.changed`` may be False:
    nothing to publish), when it was detected, and the job's checkpoints if the decision
    had to read them (where workers read inputs held on Kafka)."""

    model: JobModel
    decision: PartitionDecision
    detected_ms: int
    checkpoints: Mapping[str, Checkpoint] | None = None

    def workers_stopped(self) -> ModelChange:
        """The change once the workers stopped for it: its checkpoints are read again
        (where the workers stopped is what the next model starts from)."""
        return replace(self, checkpoints=None)


@dataclass(frozen=True)
class ModelBasis:
    """What the one build of a model reads from the systems: the job's checkpoints, the
    inputs' end offsets (the barriers of tasks that gain partitions) and the next model's
    holds, new ones raised to where the checkpoints say workers read (`holds.stops_at`)."""

    checkpoints: Mapping[str, Checkpoint]
    end_offsets: Mapping[SystemStreamPartition, int]
    holds: Mapping[str, StreamHold] | None


def _unwatched(_system: str) -> AbstractContextManager[object]:
    return contextlib.nullcontext()


class ModelService:
    """Detection, decision and publication of job ``config``'s models, over clients of
    the metadata system and of every input's system (`open` starts them, `close` ends)."""

    def __init__(self, config: JobConfig, *, watch: Watch = _unwatched) -> None:
        self.config = config
        self.systems: dict[str, System] = {}
        self._watch = watch

    @property
    def meta(self) -> System:
        return self.systems[self.config.metadata_system]

    async def open(self) -> None:
        """Start a client of the metadata system and of every input's system."""
        names = {self.config.metadata_system} | {
            self.config.stream(s).system for s in self.inputs()}
        for name in sorted(names):
            await self._open(name)

    async def _open(self, name: str) -> System:
        if name not in self.systems:
            system = open_system(self.config.system(name))
            await system.start()
            self.systems[name] = system
        return self.systems[name]

    async def close(self) -> None:
        """Close every client `open` (or a declared stream) started."""
        systems, self.systems = self.systems, {}
        for system in systems.values():
            await system.close()

    def inputs(self) -> list[str]:
        """Every input the job reads, broadcast ones too (``"system.stream"``)."""
        return [*self.config.inputs, *self.config.broadcast_inputs]

    # detection ---------------------------------------------------------------------------
    async def partition_counts(self) -> dict[str, int]:
        """Every input's partition count now, whatever its system; creates a declared
        input that does not exist yet."""
        counts: dict[str, int] = {}
        for qualified in self.inputs():
            stream = self.config.stream(qualified)
            system = self.systems[stream.system]
            try:
                with self._watch(stream.system):
                    found = await system.partition_counts([stream.stream])
                counts[qualified] = found[stream.stream]
            except StreamNotFoundError:
                if stream.partitions is None:
                    raise StreamNotFoundError(
                        f"input stream {qualified} does not exist; create it with `sampan "
                        f"streams create {qualified} --partitions N --job {self.config.path}` "
                        f"or set partitions = N in [streams.\"{qualified}\"]") from None
                await system.create_stream(stream.stream, stream.partitions, exist_ok=True)
                counts[qualified] = stream.partitions
        return counts

    async def create_declared_streams(self) -> None:
        """Create every declared stream with ``partitions`` that does not exist yet (outputs)."""
        for qualified in sorted(self.config.streams):
            stream = self.config.stream(qualified)
            if stream.partitions is None or stream.system not in self.config.systems:
                continue
            system = await self._open(stream.system)
            if stream.stream not in await system.list_streams():
                await system.create_stream(stream.stream, stream.partitions,
                                           compacted=stream.compacted, exist_ok=True)
                log.info("created stream %s with %s", qualified,
                         counted(stream.partitions, "partition"))

    async def inputs_now(self, model: JobModel, counts: Mapping[str, int]
                         ) -> dict[str, InputNow]:
        """What the systems show of the inputs whose count differs from ``model``'s or that
        it holds: count, ends and, on the local log, every growth (one snapshot)."""
        found: dict[str, InputNow] = {}
        for qualified in self.config.inputs:
            known = model.partition_counts.get(qualified)
            if known is None or (counts.get(qualified) == known
                                 and qualified not in model.holds):
                continue
            stream = self.config.stream(qualified)
            found[qualified] = await input_now(self.systems[stream.system], stream.stream)
        return found

    async def end_offsets(self) -> dict[SystemStreamPartition, int]:
        """Every input partition's end offset now (the barriers of the next model)."""
        ends: dict[SystemStreamPartition, int] = {}
        for qualified in self.config.inputs:
            stream = self.config.stream(qualified)
            ranges = await self.systems[stream.system].offsets(stream.stream)
            for partition, offset_range in ranges.items():
                ends[SystemStreamPartition(stream.system, stream.stream, partition)] = (
                    offset_range.end)
        return ends

    # decision ----------------------------------------------------------------------------
    async def decide(self, model: JobModel, counts: Mapping[str, int], *, now_ms: int
                     ) -> ModelChange:
        """The decision about the inputs' ``counts`` against ``model``
        (`framework.coordinator.decision`), with what the systems show of them; the job's
        checkpoints are read only when ``model`` holds an input on Kafka (where its
        workers stopped reading it tells which records lie past the hold)."""
        checkpoints = None
        read = None
        if any(not h.exact for h in model.holds.values()):
            checkpoints = await self.read_checkpoints()
            read = read_positions(checkpoints.values())
        decision = decide_partition_change(self.config, model, counts,
                                           await self.inputs_now(model, counts),
                                           now_ms=now_ms, read=read)
        return ModelChange(model, decision, now_ms, checkpoints)

    # publication -------------------------------------------------------------------------
    async def read_checkpoints(self) -> dict[str, Checkpoint]:
        """The job's checkpoints, task → `Checkpoint`."""
        with self._watch(self.config.metadata_system):
            return await self.meta.read_checkpoints(self.config.name)

    async def basis(self, previous: JobModel | None, change: ModelChange | None = None
                    ) -> ModelBasis:
        """What the next model is built from: the checkpoints (``change``'s when it read
        them, else read now), the end offsets, and ``change``'s holds with new ones seen
        at detection (Kafka) raised to where the checkpoints say the workers read
        (stopped workers: exactly where they stopped; running ones take the hold in place
        and stop where they are if past it)."""
        checkpoints = change.checkpoints if change is not None else None
        if checkpoints is None:
            checkpoints = await self.read_checkpoints()
        holds = dict(change.decision.holds) if change is not None else None
        if holds is not None and previous is not None:
            new = {s: h for s, h in holds.items() if not h.exact and s not in previous.holds}
            if new:
                read = read_positions(checkpoints.values())
                holds.update({s: replace(h, ends=stops_at(s, h, read))
                              for s, h in new.items()})
        ends = await self.end_offsets() if previous is not None else {}
        return ModelBasis(checkpoints, ends, holds)

    def build(self, counts: Mapping[str, int], previous: JobModel | None, basis: ModelBasis,
              *, reason: str, now_ms: int, placement: Placement | None = None,
              local_state: Mapping[int, Mapping[str, int]] | None = None) -> JobModel:
        """The next model, built once (`framework.coordinator.builder.build_job_model`)."""
        return build_job_model(
            self.config, counts, previous, now_ms=now_ms, reason=reason,
            end_offsets=basis.end_offsets, checkpoints=basis.checkpoints,
            local_state=local_state, placement=placement, holds=basis.holds)

    async def publish(self, model: JobModel, previous: JobModel | None, basis: ModelBasis,
                      *, in_place: bool = False, gone: Collection[int] = ()) -> JobModel:
        """Publish ``model`` after ``previous``: its changelog partitions exist, and the
        start positions of inputs it reads first are written before it (from it on, the
        job is a reader of every input partition). Returns the model as published."""
        await self.ensure_changelogs(model)
        await write_start_positions(self.config, self.systems, model, previous,
                                    basis.checkpoints)
        return await publish_model(self.meta, self.config, model, previous=previous,
                                   in_place=in_place, gone=sorted(gone))

    async def apply(self, counts: Mapping[str, int], previous: JobModel | None, *,
                    reason: str, now_ms: int, change: ModelChange | None = None,
                    in_place: bool = False) -> JobModel:
        """Build ``counts``' model after ``previous`` (``change``'s holds) with tasks placed
        on this coordinator's workers, and publish it: one checkpoint read, one build."""
        basis = await self.basis(previous, change)
        model = self.build(counts, previous, basis, reason=reason, now_ms=now_ms,
                           local_state=await self.local_state(previous))
        model = await self.publish(model, previous, basis, in_place=in_place)
        log.info("published job model epoch %d (%s): %s on %s", model.epoch, reason,
                 counted(len(model.tasks), "task"), counted(model.workers, "worker"))
        return model

    async def ensure_changelogs(self, model: JobModel) -> None:
        """Each logged store's changelog has at least one partition per task, compacted."""
        for store in sorted(self.config.logged_stores):
            system_name, stream = self.config.changelog_ref(store)
            system = await self._open(system_name)
            wanted = max(model.changelog_partitions, 1)
            existing = await system.list_streams()
            if stream not in existing:
                await system.create_stream(stream, wanted, compacted=True, exist_ok=True)
            elif existing[stream] < wanted:
                await system.expand_stream(stream, wanted)

    async def local_state(self, previous: JobModel | None
                          ) -> dict[int, dict[str, int]] | None:
        """Worker → task → restore gap, from the workers' last reports of their stores.

        Only the high-availability assignor uses it; None when no worker reported yet.
        """
        if self.config.coordinator.assignor != "high-availability" or previous is None:
            return None
        reports = (await read_state(self.meta, self.config)).workers
        if not any(r.store_positions for r in reports.values()):
            return None
        ends: dict[str, dict[int, int]] = {}
        for store in self.config.logged_stores:
            stream = self.config.changelog_ref(store).stream
            ends[store] = {p: r.end for p, r in (await self.meta.offsets(stream)).items()}
        state: dict[int, dict[str, int]] = {}
        for worker, report in reports.items():
            for task, stores in report.store_positions.items():
                if task not in previous.tasks:
                    continue
                partition = previous.tasks[task].changelog_partition
                state.setdefault(worker, {})[task] = sum(
                    max(0, ends.get(store, {}).get(partition, 0) - offset)
                    for store, offset in stores.items())
        return state
