"""Offline task re-key (`sampan rekey JOB.toml --tasks M`): N tasks' state → M tasks.

With the job stopped: read each logged store's compacted changelog in Spark, send each
key to its task under M tasks (the Kafka default partitioner on the input key, modulo
M), write the keys to fresh changelog partitions (never reusing a task → changelog
mapping), carry every SSP's checkpointed offset to its new task, and publish a job model
for M tasks. `sampan run` then continues with M tasks and exact state.

Steps are ordered so that the job model, published last, is what makes the re-key take
effect; see docs/spark.md for what an interruption leaves behind.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.config import JobConfig, load_config
from framework.config.serdes import get_serde
from framework.coordinator.holds import input_now, plan_holds, read_positions
from framework.metadata import publish_model, read_state
from framework.spark.aio import with_system
from framework.spark.errors import RekeyError
from framework.spark.rekey_plan import (
    RekeyPlan,
    carry_checkpoints,
    check_stopped,
    plan_rekey,
    task_of_key,
)
from framework.systems.base import CommitRequest, System

__all__ = ["RekeyResult", "load_key_fn", "rekey_job"]


@dataclass
class RekeyResult:
    """What a re-key did: epochs, task counts and keys moved per store."""

    job: str
    epoch: int
    tasks_before: int
    tasks_after: int
    changelog_partitions: dict[str, int] = field(default_factory=dict)  # task → partition
    keys: dict[str, int] = field(default_factory=dict)  # store → keys written
    seconds: float = 0.0

    def text(self) -> str:
        stores = ", ".join(f"{s}: {n:,} keys" for s, n in sorted(self.keys.items())) or "none"
        return (f"job {self.job}: re-keyed {self.tasks_before} → {self.tasks_after} tasks at "
                f"epoch {self.epoch} in {self.seconds:.1f} s; stores {stores}; task → changelog "
                f"partition {self.changelog_partitions}")


def load_key_fn(spec: str, config: JobConfig) -> Callable[[Any], Any]:
    """``module:function`` (found next to the job file first): store key → input key."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise RekeyError(f"--key-fn {spec!r}: use module:function, e.g. keys:user_of")
    root = str(config.root)
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise RekeyError(f"--key-fn {spec!r} cannot be loaded from {config.root} or the "
                         f"Python path: {error}") from None
    if not callable(function):
        raise RekeyError(f"--key-fn {spec!r} is not a function")
    return function  # type: ignore[no-any-return]


def _router(config: JobConfig, store: str, key_fn: str | None, count: int,
            plan: RekeyPlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function adding each changelog key's fresh changelog partition."""
    job, tasks, first = str(config.path), plan.tasks, plan.first_changelog_partition
    input_stream = config.stream(config.inputs[0])

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        routing: Callable[[bytes], bytes] = bytes
        if key_fn is not None:
            job_config = load_config(job)
            spec = job_config.store(store)
            store_keys = get_serde(spec.key_serde, search_path=job_config.root)
            input_keys = get_serde(input_stream.key_serde, search_path=job_config.root)
            function = load_key_fn(key_fn, job_config)

            def routing(key: bytes) -> bytes:
                return input_keys.to_bytes(function(store_keys.from_bytes(key)))

        for batch in batches:
            keys = batch.column("key").to_pylist()
            partitions = [first + task_of_key(routing(k), count, tasks) for k in keys]
            yield pa.RecordBatch.from_arrays(
                [batch.column("key"), batch.column("value"), pa.array(partitions, pa.int32())],
                names=["key", "value", "partition"])

    return route


def _compacted(spark: SparkSession, config: JobConfig, store: str,
               partitions: tuple[int, ...]) -> DataFrame:
    """The store's latest non-tombstone value per key over the old tasks' partitions."""
    records = (spark.read.format("sampan").option("job", str(config.path))
               .option("stream", config.changelog_stream(store)).option("raw", "true")
               .option("partitions", ",".join(map(str, partitions))).load())
    latest = records.groupBy("partition", "key").agg(F.max_by("value", "offset").alias("value"))
    return latest.where(F.col("value").isNotNull()).select("key", "value")


def rekey_job(job_path: str | os.PathLike[str], tasks: int, *, key_fn: str | None = None,
              spark: SparkSession | None = None) -> RekeyResult:
    """Re-key the stopped job at ``job_path`` to ``tasks`` tasks (see the module doc)."""
    started = time.monotonic()
    config = load_config(job_path)
    meta_name = config.metadata_system
    changelogs = {s: config.changelog_ref(s).stream for s in config.logged_stores}

    async def inspect(meta: System) -> tuple[Any, ...]:
        state = await read_state(meta, config)
        check_stopped(config, state.status)
        if state.model is None:
            raise RekeyError(f"job {config.name!r} has no job model in "
                             f"{config.coordinator_stream}; run it once before re-keying")
        counts = {}
        for qualified in config.inputs:
            stream = config.stream(qualified)
            system = meta if stream.system == meta.name else None
            if system is None:
                raise RekeyError(f"input {qualified} is on system {stream.system!r}, not the "
                                 f"metadata system {meta.name!r}; re-key supports one system")
            counts[qualified] = (await meta.partition_counts([stream.stream]))[stream.stream]
        existing = await meta.list_streams()
        changelog_now = max((existing.get(s, 0) for s in changelogs.values()), default=0)
        checkpoints = await meta.read_checkpoints(config.name)
        held = {}  # the inputs the model holds, and why (`framework.coordinator.holds`)
        if state.model.holds:
            now = {q: await input_now(meta, config.stream(q).stream)
                   for q in state.model.holds if q in counts}
            held = plan_holds(config, state.model, {**state.model.partition_counts, **counts},
                              now, read=read_positions(checkpoints.values())).held
        return state.model, counts, checkpoints, changelog_now, held

    model, counts, checkpoints, changelog_now, held = with_system(config, meta_name, inspect)
    plan = plan_rekey(config, model, counts, checkpoints, tasks, changelog_now,
                      now_ms=int(time.time() * 1000), held=held)

    async def expand(meta: System) -> None:
        await meta.fence(config.name, plan.model.epoch)  # no old worker commits from here on
        for stream in changelogs.values():
            await meta.create_stream(stream, plan.model.changelog_partitions, compacted=True,
                                     exist_ok=True)
            if (await meta.partition_counts([stream]))[stream] < plan.model.changelog_partitions:
                await meta.expand_stream(stream, plan.model.changelog_partitions)

    with_system(config, meta_name, expand)
    result = RekeyResult(config.name, plan.model.epoch, len(model.tasks), tasks,
                         {t.name: t.changelog_partition for t in plan.model.ordered_tasks()})
    if changelogs:
        if spark is None:
            from framework.spark import local_session

            spark = local_session()
        else:
            from framework.spark import register

            register(spark)
        count = plan.model.partition_counts[config.inputs[0]]
        schema = "key binary, value binary, partition int"
        for store in changelogs:
            routed = _compacted(spark, config, store, plan.old_changelog_partitions).mapInArrow(
                _router(config, store, key_fn, count, plan), schema)
            writer = (routed.write.format("sampan").option("job", str(config.path))
                      .option("stream", config.changelog_stream(store)).mode("append"))
            writer.save()
            result.keys[store] = _written(config, store, plan)

    async def commit(meta: System) -> None:
        ends = {store: {p: r.end for p, r in (await meta.offsets(stream)).items()}
                for store, stream in changelogs.items()}
        carried = carry_checkpoints(plan, model, checkpoints, ends)
        await meta.commit(CommitRequest(config.name, plan.model.epoch, checkpoints=carried))
        await publish_model(meta, config, plan.model, fenced=True)

    with_system(config, meta_name, commit)
    result.seconds = time.monotonic() - started
    return result


def _written(config: JobConfig, store: str, plan: RekeyPlan) -> int:
    """Records now in the fresh changelog partitions of ``store``."""
    fresh = range(plan.first_changelog_partition, plan.model.changelog_partitions)

    async def count(meta: System) -> int:
        stream = config.changelog_ref(store).stream
        ranges = await meta.offsets(stream)
        return sum(ranges[p].end - ranges[p].oldest for p in fresh if p in ranges)

    return with_system(config, config.metadata_system, count)
