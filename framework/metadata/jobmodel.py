"""The job model: the immutable plan a coordinator publishes and workers run.

Epoch, config digest, tasks → SSPs, task → changelog partition, task → worker and
expansion barriers. It serializes to canonical JSON so that equal plans are equal
bytes, and so that a restarted coordinator can tell when nothing changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from framework.errors import JobModelError
from groupers import SystemStreamPartition, task_sort_key

__all__ = ["PARKED", "BarrierStage", "JobModel", "StreamHold", "TaskModel", "ssp_from_json",
           "ssp_to_json"]

PARKED = -1
"""The worker of a task that runs nowhere in its model (`JobModel.parked`)."""


def ssp_to_json(ssp: SystemStreamPartition) -> list[Any]:
    """An SSP as ``[system, stream, partition]`` (stream names may contain dots)."""
    return [ssp.system, ssp.stream, ssp.partition]


def ssp_from_json(value: Iterable[Any]) -> SystemStreamPartition:
    """Inverse of `ssp_to_json`."""
    system, stream, partition = value
    return SystemStreamPartition(str(system), str(stream), int(partition))


@dataclass(frozen=True)
class BarrierStage:
    """After an expansion: ``held`` SSPs wait until every SSP in ``barrier`` reached its offset.

    ``barrier`` maps the task's older SSPs to their end offsets read when the new model was
    built (after the workers of the old one stopped), so everything produced before is
    processed before the partitions the keys moved to — per-key order holds across the
    expansion.
    """

    barrier: Mapping[SystemStreamPartition, int]
    held: frozenset[SystemStreamPartition]
    at_ms: int = 0
    """When the model that added the stage was built (wall ms; 0 in models older than the
    field): the expansion merge window (`framework.worker.merging`) counts from then for a
    worker that finds the stage already passed."""

    def passed(self, positions: Mapping[SystemStreamPartition, int]) -> bool:
        """Whether ``positions`` (next offsets to read) reached every barrier offset: the one
        rule for when the held SSPs may be read.

            >>> from groupers import SystemStreamPartition as SSP
            >>> stage = BarrierStage({SSP("local", "w", 0): 10}, frozenset({SSP("local", "w", 2)}))
            >>> stage.passed({SSP("local", "w", 0): 9}), stage.passed({SSP("local", "w", 0): 10})
            (False, True)
        """
        return all(positions.get(ssp, 0) >= offset for ssp, offset in self.barrier.items())

    def to_json(self) -> dict[str, Any]:
        return {
            "barrier": [[*ssp_to_json(s), o] for s, o in sorted(self.barrier.items())],
            "held": [ssp_to_json(s) for s in sorted(self.held)],
            **({"at_ms": self.at_ms} if self.at_ms else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BarrierStage:
        return cls(
            barrier={ssp_from_json(b[:3]): int(b[3]) for b in data["barrier"]},
            held=frozenset(ssp_from_json(s) for s in data["held"]),
            at_ms=int(data.get("at_ms", 0)),
        )


@dataclass(frozen=True)
class TaskModel:
    """One task: its inputs, its changelog partition and the worker running it.

    ``stages`` are expansion barriers, released in order (a second expansion before the
    first barrier was passed adds a second stage). ``merging`` are the stages the task's
    checkpoint had passed when the model was built, less than ``job.expansion_merge_ms``
    after they were added: a worker that starts the task (a restart, a failover) reads
    their gained partitions in record-time order with the older ones, as the worker that
    passed them did (`framework.worker.merging`).
    """

    name: str
    ssps: frozenset[SystemStreamPartition]
    changelog_partition: int
    worker: int
    broadcast: frozenset[SystemStreamPartition] = frozenset()
    stages: tuple[BarrierStage, ...] = ()
    merging: tuple[BarrierStage, ...] = ()

    @property
    def held(self) -> frozenset[SystemStreamPartition]:
        """Every SSP still behind a barrier."""
        return frozenset().union(*(stage.held for stage in self.stages))

    def pending_stages(self, done: Mapping[SystemStreamPartition, int]) -> int:
        """How many barrier stages ``done`` (checkpointed or read positions) has not passed
        yet; stages pass in order, so the pending ones are the last ones."""
        for passed, stage in enumerate(self.stages):
            if not stage.passed(done):
                return len(self.stages) - passed
        return 0

    def held_behind_barrier(self, done: Mapping[SystemStreamPartition, int]
                            ) -> frozenset[SystemStreamPartition]:
        """SSPs still held at positions ``done``: those of the stages not passed yet."""
        pending = self.stages[len(self.stages) - self.pending_stages(done):]
        return frozenset().union(*(stage.held for stage in pending))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ssps": [ssp_to_json(s) for s in sorted(self.ssps)],
            "changelog_partition": self.changelog_partition,
            "worker": self.worker,
            "broadcast": [ssp_to_json(s) for s in sorted(self.broadcast)],
            "stages": [stage.to_json() for stage in self.stages],
            **({"merging": [stage.to_json() for stage in self.merging]}
               if self.merging else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskModel:
        return cls(
            name=str(data["name"]),
            ssps=frozenset(ssp_from_json(s) for s in data["ssps"]),
            changelog_partition=int(data["changelog_partition"]),
            worker=int(data["worker"]),
            broadcast=frozenset(ssp_from_json(s) for s in data.get("broadcast", ())),
            stages=tuple(BarrierStage.from_json(st) for st in data.get("stages", ())),
            merging=tuple(BarrierStage.from_json(st) for st in data.get("merging", ())),
        )


@dataclass(frozen=True)
class StreamHold:
    """An input held after a partition change its tasks cannot map: read only up to
    ``ends``, on every later count, until the hold is released (`framework.coordinator.holds`).

    ``count`` is the stream's count in the model (the one its tasks map). ``ends`` maps
    each of those partitions to the offset reads stop at: where it ended when the stream
    grew past ``count`` (``exact``: the local log records it), else where it was seen when
    the change was detected (Kafka).
    """

    count: int
    ends: Mapping[int, int]
    exact: bool
    refused: int
    """The first count after ``count`` the tasks could not map."""
    since_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "ends": [[p, o] for p, o in sorted(self.ends.items())],
                "exact": self.exact, "refused": self.refused, "since_ms": self.since_ms}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StreamHold:
        return cls(count=int(data["count"]),
                   ends={int(p): int(o) for p, o in data["ends"]},
                   exact=bool(data["exact"]), refused=int(data["refused"]),
                   since_ms=int(data.get("since_ms", 0)))


@dataclass(frozen=True)
class JobModel:
    """The whole plan of one epoch of a job."""

    job: str
    epoch: int
    config_digest: str
    workers: int
    tasks: Mapping[str, TaskModel]
    partition_counts: Mapping[str, int] = field(default_factory=dict)
    changelog_partitions: int = 0
    created_ms: int = 0
    reason: str = ""
    hosts: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Several hosts (`framework.hosts`): host name → the worker ids it runs; empty for a
    one-host job (whose model is then byte-identical to before hosts existed)."""
    standbys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Several hosts: task → hosts keeping a standby copy of its stores."""
    warmups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Several hosts: task → hosts restoring a warmup copy before the task may move there."""
    holds: Mapping[str, StreamHold] = field(default_factory=dict)
    """Input (``system.stream``) → its hold; empty while no input is held (the model is then
    byte-identical to before holds existed)."""
    in_place_since: int | None = None
    """Published for the running workers to take in place (`framework.worker.in_place`):
    the epoch since which every model was so published by the same coordinator, the
    oldest a worker may take this one from; None for a model workers restart on. A
    worker of an older epoch (another coordinator's, a zombie's) never takes it."""
    parked: Mapping[str, str] = field(default_factory=dict)
    """Several hosts, incremental rebalance: task → the host releasing it. A parked task
    runs nowhere in this model (its worker is `PARKED`): the first model of a rebalance
    parks the tasks that change host, and once their old hosts released them the leader
    publishes the follow-up model that places them (`framework.hosts.handover`)."""
    round_id: str = ""
    """Several hosts: the rebalance round whose leader published this model (its hosts,
    told the id in their assignment, wait for the model carrying it)."""

    def read_limits(self) -> dict[SystemStreamPartition, int]:
        """Each SSP of a held input → the offset its readers stop at (0: read nothing)."""
        limits: dict[SystemStreamPartition, int] = {}
        for task in self.tasks.values():
            for ssp in task.ssps:
                hold = self.holds.get(f"{ssp.system}.{ssp.stream}")
                if hold is not None:
                    limits[ssp] = hold.ends.get(ssp.partition, 0)
        return limits

    def host_of(self, task: str) -> str | None:
        """The host running ``task`` as active (None in a one-host model)."""
        worker = self.tasks[task].worker
        return next((h for h, ids in self.hosts.items() if worker in ids), None)

    def tasks_of(self, worker: int) -> list[TaskModel]:
        """The tasks placed on ``worker``, in task order."""
        return [t for t in self.ordered_tasks() if t.worker == worker]

    def ordered_tasks(self) -> list[TaskModel]:
        return [self.tasks[name] for name in sorted(self.tasks, key=task_sort_key)]

    def worker_ids(self) -> list[int]:
        """Every worker of this model: those of its hosts, else 0..workers-1."""
        if self.hosts:
            return sorted(w for ids in self.hosts.values() for w in ids)
        return list(range(self.workers))

    def idle_workers(self) -> list[int]:
        """Workers the model gives no task (more workers than tasks): they run, idle."""
        busy = {task.worker for task in self.tasks.values()}
        return [w for w in self.worker_ids() if w not in busy]

    def idle_workers_message(self) -> str | None:
        """Why some workers have nothing to do, for the log and `sampan status`; None when
        every worker has a task."""
        idle = self.idle_workers()
        if not idle:
            return None
        count = len(self.tasks)
        which = (f"worker {idle[0]} has none" if len(idle) == 1
                 else f"workers {', '.join(map(str, idle))} have none")
        return (f"{count} task{'s' if count != 1 else ''} on {self.workers} workers: {which}; "
                f"the task count is fixed by the input partitions at the job's first start, "
                f"so set job.workers to at most {count}")

    def ssp_task_mapping(self) -> dict[SystemStreamPartition, str]:
        """SSP → task for the next grouping (broadcast SSPs excluded)."""
        return {ssp: task.name for task in self.tasks.values() for ssp in task.ssps}

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "epoch": self.epoch,
            "config_digest": self.config_digest,
            "workers": self.workers,
            "partition_counts": dict(sorted(self.partition_counts.items())),
            "changelog_partitions": self.changelog_partitions,
            "created_ms": self.created_ms,
            "reason": self.reason,
            "tasks": [task.to_json() for task in self.ordered_tasks()],
            **({"hosts": {h: list(ids) for h, ids in sorted(self.hosts.items())},
                "standbys": {t: list(h) for t, h in sorted(self.standbys.items())},
                "warmups": {t: list(h) for t, h in sorted(self.warmups.items())}}
               if self.hosts else {}),
            **({"holds": {s: h.to_json() for s, h in sorted(self.holds.items())}}
               if self.holds else {}),
            **({"in_place_since": self.in_place_since}
               if self.in_place_since is not None else {}),
            **({"parked": dict(sorted(self.parked.items()))} if self.parked else {}),
            **({"round_id": self.round_id} if self.round_id else {}),
        }

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobModel:
        try:
            tasks = [TaskModel.from_json(t) for t in data["tasks"]]
            return cls(
                job=str(data["job"]),
                epoch=int(data["epoch"]),
                config_digest=str(data["config_digest"]),
                workers=int(data["workers"]),
                tasks={t.name: t for t in tasks},
                partition_counts={str(k): int(v) for k, v in data["partition_counts"].items()},
                changelog_partitions=int(data.get("changelog_partitions", 0)),
                created_ms=int(data.get("created_ms", 0)),
                reason=str(data.get("reason", "")),
                hosts={str(h): tuple(int(i) for i in ids)
                       for h, ids in data.get("hosts", {}).items()},
                standbys={str(t): tuple(map(str, h)) for t, h in data.get("standbys", {}).items()},
                warmups={str(t): tuple(map(str, h)) for t, h in data.get("warmups", {}).items()},
                holds={str(s): StreamHold.from_json(h) for s, h in data.get("holds", {}).items()},
                in_place_since=(None if data.get("in_place_since") is None
                                else int(data["in_place_since"])),
                parked={str(t): str(h) for t, h in data.get("parked", {}).items()},
                round_id=str(data.get("round_id", "")),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise JobModelError(f"malformed job model: {error!r}") from error

    @classmethod
    def from_bytes(cls, data: bytes) -> JobModel:
        try:
            return cls.from_json(json.loads(data))
        except json.JSONDecodeError as error:
            raise JobModelError(f"job model is not JSON: {error}") from error
