"""Which task owns a store key, from the job model alone (DESIGN.md §16).

A store declared ``keyed_by = "<input>"`` holds keys partitioned like that input's record
keys. A key's task is then found as a record's is: the key (through ``key_to_input``,
when set) is serialized with the input's key serde, placed by the job's partitioner
(Kafka's default, `framework.partitioner`) at the input's partition count in the model,
and that partition's task is the model's. With the fixed-task grouper and the expansion
mapping a key's partition at ``k·n`` partitions maps to the task of its partition at
``n``, so the answer never changes when the input grows; the worker (and host) is the
model's placement of that task. Pure: no I/O, testable as a table.

>>> from framework.config import parse_config
>>> from framework.metadata.jobmodel import JobModel, TaskModel
>>> from groupers import SystemStreamPartition as SSP
>>> config = parse_config({"job": {"name": "wc", "task": "m:T", "inputs": ["local.words"]},
...     "systems": {"local": {"type": "local"}}, "streams": {"local.words": {}},
...     "stores": {"counts": {"keyed_by": "local.words"}}}, "job.toml")
>>> model = JobModel("wc", 7, "", 2, {f"Partition {p}": TaskModel(
...     f"Partition {p}", frozenset({SSP("local", "words", p), SSP("local", "words", p + 2)}),
...     p, p) for p in (0, 1)}, partition_counts={"local.words": 4})
>>> KeyRouter(config).route(model, "counts", "user-1")
Route(store='counts', task='Partition 0', stream='local.words', partition=0, worker=0, epoch=7)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from framework.config import JobConfig, StoreConfig, StreamRef
from framework.config.serdes import get_serde
from framework.errors import SerdeError
from framework.importing import import_spec
from framework.metadata.jobmodel import PARKED, JobModel
from framework.partitioner import partition_for_key
from framework.queries.errors import NotQueryableError, QueryError, TaskUnavailableError
from groupers import SystemStreamPartition

__all__ = ["KeyRouter", "Route"]


@dataclass(frozen=True)
class Route:
    """Where one key of one store lives in one job model."""

    store: str
    task: str
    stream: str
    """The input (``system.stream``) the store is keyed by."""
    partition: int
    """The key's partition of that input at the model's partition count."""
    worker: int
    """The worker running the task (`framework.metadata.jobmodel.PARKED`: none, it is moving)."""
    epoch: int

    def host(self, model: JobModel) -> str | None:
        """The host running the task in ``model`` (None in a one-host job or parked)."""
        return model.host_of(self.task) if self.worker != PARKED else None


class KeyRouter:
    """Routes the keys of one job's queryable stores to tasks (the store's key →
    ``key_to_input`` → the input's key serde → the partitioner → the model)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self._to_input: dict[str, Callable[[Any], Any]] = {}

    def queryable(self, store: str) -> StoreConfig:
        """The config of ``store``; `NotQueryableError` naming the fix when the job has no
        such store or it does not say how its keys are partitioned."""
        found = self.config.stores.get(store)
        if found is None:
            raise NotQueryableError(
                f"job {self.config.name!r} has no store {store!r} (stores: "
                f"{', '.join(sorted(self.config.stores)) or 'none'})")
        if found.keyed_by is None:
            inputs = " or ".join(f'"{i}"' for i in self.config.inputs)
            raise NotQueryableError(
                f"store {store!r} of job {self.config.name!r} does not declare how its keys "
                f"are partitioned, so no task can be known to own a key; add keyed_by = "
                f"{inputs or '<input>'} to [stores.{store}] in {self.config.path} (and "
                f'key_to_input = "module:function" when its keys are not the input\'s '
                f"record keys)")
        return found

    def input_key(self, store: str, key: Any, *, record_key: bool = False) -> bytes:
        """``key`` of ``store`` as the serialized record key of the input it is keyed by
        (``record_key``: ``key`` is that record key already, as a window store's are)."""
        spec = self.queryable(store)
        assert spec.keyed_by is not None
        convert = None if record_key else self._converter(store, spec)
        try:
            record_key = convert(key) if convert is not None else key
        except Exception as error:
            raise QueryError(f"store {store!r}: key_to_input {spec.key_to_input} raised "
                             f"{type(error).__name__}: {error} for key {key!r}") from error
        stream = self.config.stream(spec.keyed_by)
        try:
            data = get_serde(stream.key_serde, search_path=self.config.root).to_bytes(
                record_key)
        except Exception as error:
            raise QueryError(
                f"store {store!r}: the key {record_key!r} cannot be serialized with the "
                f"{stream.key_serde} key serde of input {spec.keyed_by!r}: {error}; give a "
                "key of the input's key type") from error
        if not isinstance(data, bytes | bytearray | memoryview):
            raise SerdeError(f"the {stream.key_serde} serde of input {spec.keyed_by!r} turned "
                             f"{record_key!r} into {type(data).__name__}, not bytes")
        return bytes(data)

    def route(self, model: JobModel, store: str, key: Any, *, record_key: bool = False
              ) -> Route:
        """The task (and worker) owning ``key`` of ``store`` in ``model`` (``record_key``:
        see `input_key`)."""
        spec = self.queryable(store)
        assert spec.keyed_by is not None
        raw = self.input_key(store, key, record_key=record_key)
        count = model.partition_counts.get(spec.keyed_by)
        if not count:
            raise TaskUnavailableError(
                f"the job model of epoch {model.epoch} has no partition count of "
                f"{spec.keyed_by!r} yet; retry once the job runs", 1000)
        partition = partition_for_key(raw, count)
        system, stream = StreamRef.parse(spec.keyed_by)
        ssp = SystemStreamPartition(system, stream, partition)
        for task in model.ordered_tasks():
            if ssp in task.ssps:
                return Route(store, task.name, spec.keyed_by, partition, task.worker,
                             model.epoch)
        raise TaskUnavailableError(
            f"no task of epoch {model.epoch} reads {spec.keyed_by} partition {partition}; "
            "the job model is changing, retry", 1000)

    def _converter(self, store: str, spec: StoreConfig) -> Callable[[Any], Any] | None:
        if spec.key_to_input is None:
            return None
        found = self._to_input.get(store)
        if found is None:
            found = self._to_input[store] = import_spec(spec.key_to_input, self.config.root)
        return found
