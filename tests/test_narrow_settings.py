"""Components take the narrow settings they read, not the whole `JobConfig` (issue 48 §4):
each runs here on a small object holding only what its settings protocol names, so a
change that reads one more key of the job fails here first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from framework.config import (
    CoordinatorConfig,
    ErrorsConfig,
    StoreConfig,
    StreamConfig,
    StreamRef,
    SystemConfig,
)
from framework.coordinator.retention import retention_policies
from framework.errors import SerdeError
from framework.metadata.jobmodel import TaskModel
from framework.systems.base import Record
from framework.systems.local.system import LocalSystem
from framework.worker.outage import job_systems
from framework.worker.policies import ErrorPolicies, UndecodableRecordError
from framework.worker.task_stores import open_task_stores
from groupers import SystemStreamPartition as SSP


@dataclass(frozen=True)
class Retention:
    streams: Mapping[str, StreamConfig]
    systems: Mapping[str, SystemConfig]
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)


def test_the_retention_pass_reads_streams_and_their_systems_only() -> None:
    local = SystemConfig(name="local", type="local", path=Path("data"), retention_ms=60_000)
    views = StreamConfig(system="local", stream="views", retention_bytes=1 << 20)
    counts = StreamConfig(system="local", stream="counts", compacted=True)
    policies = retention_policies(Retention(
        {"local.views": views, "local.counts": counts}, {"local": local}))
    assert (policies[views].retention_ms, policies[views].retention_bytes) == (60_000, 1 << 20)
    assert counts not in policies  # compacted: no retention


@dataclass(frozen=True)
class Systems:
    inputs: Sequence[str]
    broadcast_inputs: Sequence[str]
    metadata_system: str

    def system(self, name: str) -> SystemConfig:
        return SystemConfig(name=name, type="local", path=Path(name))


def test_a_worker_waits_for_its_metadata_and_input_systems_only() -> None:
    assert job_systems(Systems(["a.x", "b.y"], ["c.z"], "meta")) == ["a", "b", "c", "meta"]


@dataclass(frozen=True)
class Errors:
    errors: ErrorsConfig
    path: Path

    def stream(self, qualified: str) -> StreamConfig:
        raise AssertionError("no dead-letter stream under policy fail")


def test_the_error_policies_read_errors_and_the_job_file_only() -> None:
    policies = ErrorPolicies(Errors(ErrorsConfig(), Path("/jobs/views.toml")),
                             codec=None)  # type: ignore[arg-type]
    record = Record(partition=2, offset=41, key=b"k", value=b"{", timestamp=0)
    with pytest.raises(UndecodableRecordError, match=r"--job /jobs/views\.toml --partition 2 "
                                                     r"--to-offset 42"):
        policies.bad_record(SSP("local", "views", 2), record, SerdeError("bad json"), [])


@dataclass(frozen=True)
class Stores:
    stores: Mapping[str, StoreConfig]
    state_dir: Path
    root: Path
    store_memory_mb: int = 0
    write_buffer_max_keys: int = 100
    store_restore_batch: int = 10

    @property
    def logged_stores(self) -> tuple[str, ...]:
        return tuple(sorted(n for n, s in self.stores.items() if s.changelog))

    def store(self, name: str) -> StoreConfig:
        return self.stores[name]

    def changelog_ref(self, store: str) -> StreamRef:
        return StreamRef("local", f"j-{store}-changelog")


async def test_a_tasks_stores_open_and_restore_from_their_store_settings_only(
        tmp_path: Path) -> None:
    settings = Stores({"counts": StoreConfig(name="counts")}, tmp_path / "state", tmp_path)
    meta = LocalSystem("local", tmp_path / "data")
    await meta.create_stream("j-counts-changelog", 2, compacted=True)
    task = TaskModel("Partition 1", frozenset({SSP("local", "a", 1)}), 1, 0)
    opened = await open_task_stores(settings, task, None, meta)
    try:
        assert set(opened.stores) == {"counts"} and opened.positions == {"counts": 0}
        assert (tmp_path / "state").is_dir()
    finally:
        for store in opened.stores.values():
            store.close()
        await meta.close()
