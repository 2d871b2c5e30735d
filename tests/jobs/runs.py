"""The tests' jobs as `sampan run` processes (each a `jobs.harness.SampanRun`).

- `CountJob`: the count job on the local log (tests/coordinator/count_task.py), its
  `Truth`, and the exact check of its outputs and store;
- `SumRun`: the sum job (`jobfiles.write_job`) on Kafka with names of its own, for fault,
  exactly-once, security and query tests;
- `KafkaSumJob`: the sum job over ``<name>-in`` on Kafka, for the expansion tests;
- `LocalJob`: any job text with its modules (the windowing tests).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jobs.harness import SampanRun
from jobs.jobfiles import COUNT_TASK, count_job_text, kafka_sum_job_text, write_job
from jobs.outputs import Truth, changelog_state, outputs

from framework.drill.timeline import committed_and_end
from framework.drill.verify import read_stream, store_state
from framework.metadata import CoordinatorState
from framework.systems.base import ProducerRecord, System


class CountJob(SampanRun):
    """One count job: its folder, file, `Truth`, and `sampan run` process."""

    def __init__(self, folder: Path, name: str, inputs: Mapping[str, int], **options: Any):
        super().__init__(folder, system="local")
        shutil.copy(COUNT_TASK, folder / "count_task.py")
        self.truth = Truth()
        self.write(name, inputs, **options)

    def write(self, name: str, inputs: Mapping[str, int], **options: Any) -> None:
        """(Re)write the job file; a running coordinator sees it only after a restart."""
        self.path.write_text(count_job_text(name, inputs, **options))
        self.reload()

    async def create(self, stream: str, partitions: int) -> None:
        """The count job's shorthand of `create_streams` for one stream."""
        await self.create_streams({stream: partitions})

    async def expand(self, stream: str, partitions: int) -> None:
        """The count job's shorthand of `expand_stream`."""
        await self.expand_stream(stream, partitions)

    async def produce(self, stream: str, keys: Sequence[str], rounds: int
                      ) -> list[ProducerRecord]:
        """``rounds`` records per key (`Truth.records`), written."""
        records = self.truth.records(stream, keys, rounds)
        await self.send(records)
        return records

    async def outputs(self) -> dict[str, list[tuple[int, int]]]:
        """Every output per (stream/key) as (count, seq), in output order."""
        rows = await self.call(lambda s: read_stream(s, "counts"))
        found: dict[str, list[tuple[int, int]]] = {}
        for partition in rows.values():
            for key, value in partition:
                data = json.loads(value)
                found.setdefault(key.decode(), []).append((data["count"], data["seq"]))
        return dict(sorted(found.items()))

    async def output_total(self) -> int:
        ranges = await self.call(lambda s: s.offsets("counts"))
        return sum(r.end for r in ranges.values())

    async def store(self) -> dict[str, int]:
        """The counts store as its changelog tells it (latest value per key)."""
        return await self.call(lambda s: changelog_state(s, self.config, "counts"))

    async def pad_changelog(self, partition: int, records: int) -> dict[str, int]:
        """Write ``records`` keys the task never reads into a changelog partition (restore
        load)."""
        stream = self.config.changelog_stream("counts").partition(".")[2]
        written = {f"pad/{n:06d}": n for n in range(records)}
        rows = [ProducerRecord(stream, k.encode(), json.dumps(v).encode(), partition=partition)
                for k, v in written.items()]
        for start in range(0, len(rows), 10_000):
            await self.send(rows[start:start + 10_000])
        return written

    async def wait_outputs(self, total: int | None = None, timeout: float = 60) -> None:
        """Until the job emitted one output per produced record."""
        want = self.truth.total if total is None else total

        async def done() -> bool:
            return await self.output_total() >= want
        await self.wait(done, f"{want} outputs", timeout)

    async def assert_exact(self) -> None:
        """Outputs are exactly one per input, per key in order; the store holds the counts."""
        assert await self.outputs() == self.truth.expected_outputs()
        assert await self.store() == self.truth.expected_store()


def placement(state: CoordinatorState) -> dict[str, tuple[list[list[Any]], int, int]]:
    """Task → (sorted SSPs, changelog partition, worker) of the state's model."""
    assert state.model is not None
    return {t.name: ([list(s) for s in sorted(t.ssps)], t.changelog_partition, t.worker)
            for t in state.model.ordered_tasks()}


class SumRun(SampanRun):
    """The sum job (`write_job`) on Kafka with names of its own (tests share a broker),
    a client timeout of ``timeout_s``, restarts after 100 ms."""

    def __init__(self, folder: Path, bootstrap: str, *, guarantee: str = "exactly-once",
                 workers: int = 2, timeout_s: float = 10.0, coordinator: str = "",
                 client_options: str = "", job_extra: str = "") -> None:
        super().__init__(folder)
        unique = uuid.uuid4().hex[:8]
        options = f"timeout_s = {timeout_s}{', ' + client_options if client_options else ''}"
        write_job(folder, name=f"run-{unique}", system="kafka", bootstrap=bootstrap,
                  events=f"events-{unique}", client_options=options,
                  job_extra=f'guarantee = "{guarantee}"\nworkers = {workers}\n{job_extra}')
        text = self.path.read_text()
        self.path.write_text(text + "\n[coordinator]\nmonitor_interval_ms = 300\n"
                             "worker_restart_backoff_ms = 100\n" + coordinator)
        self.reload()


class KafkaSumJob(SampanRun):
    """The sum job over ``kafka.<name>-in`` → ``<name>-in-sums`` (`kafka_sum_job_text`)."""

    def __init__(self, folder: Path, bootstrap: str, name: str, **options: Any) -> None:
        super().__init__(folder, system="kafka")
        shutil.copy(COUNT_TASK.parents[1] / "jobs" / "sum_task.py", folder / "sum_task.py")
        self.name = name
        self.events, self.sums = f"{name}-in", f"{name}-in-sums"
        self.path.write_text(kafka_sum_job_text(bootstrap, name, **options))
        self.reload()

    def expand(self, partitions: int) -> None:
        """`sampan streams expand kafka.<name>-in --partitions N` (CreatePartitions)."""
        done = self.sampan("streams", "expand", f"kafka.{self.events}", "--partitions",
                           str(partitions), "--job", "{job}")
        assert done.returncode == 0, done.stdout + done.stderr

    async def outputs(self) -> dict[str, list[dict[str, int]]]:
        """Every output per key, in output order."""
        return await self.call(lambda s: outputs(s, self.config))

    async def store(self) -> dict[str, int]:
        """The totals store as its changelog tells it (latest value per key)."""
        return await self.call(lambda s: changelog_state(s, self.config))

    async def wait_caught_up(self, produced: int) -> None:
        """Until every one of the ``produced`` input records is committed."""
        async def caught_up() -> bool:
            committed, end = await self.call(lambda s: committed_and_end(s, self.config))
            return end == produced and committed == end
        await self.wait(caught_up, f"all {produced} input records committed", timeout=180)


class LocalJob(SampanRun):
    """A job in a folder of its own: ``files`` (name → text) written next to the job file
    ``job`` (its text); reads go to the job's system ``system`` (e.g. ``"kafka"``)."""

    def __init__(self, folder: Path, job: str, files: dict[str, str], *,
                 system: str = "local") -> None:
        folder.mkdir(parents=True)
        super().__init__(folder, system=system)
        for name, text in files.items():
            (folder / name).write_text(text)
        self.path.write_text(job)
        self.reload()

    def stores_dir(self) -> Path:
        """Where the job's RocksDB stores live (``<state_dir>/stores``)."""
        return Path(self.config.state_dir) / "stores"

    async def values(self, stream: str) -> list[dict[str, Any]]:
        """Every record of ``stream`` (all partitions, each in offset order), decoded."""
        rows = await self.call(lambda s: read_stream(s, stream))
        return [json.loads(value) for part in rows.values() for _, value in part]

    async def keyed_values(self, stream: str) -> list[tuple[str, dict[str, Any]]]:
        rows = await self.call(lambda s: read_stream(s, stream))
        return [(key.decode(), json.loads(value)) for part in rows.values()
                for key, value in part]

    async def store_keys(self, store: str) -> list[str]:
        """The keys the store holds at the end, per its changelog."""
        state = await self.call(lambda s: store_state(s, self.config, store))
        return [key for contents in state.values() for key in contents]

    async def caught_up_on(self, *streams: str) -> bool:
        """Every record of ``streams`` processed and committed."""
        async def check(system: System) -> bool:
            checkpoints = await system.read_checkpoints(self.config.name)
            for stream in streams:
                ends = {p: r.end for p, r in (await system.offsets(stream)).items()}
                done: dict[int, int] = {}
                for checkpoint in checkpoints.values():
                    for ssp, offset in checkpoint.inputs.items():
                        if ssp.stream == stream:
                            done[ssp.partition] = offset
                if not all(done.get(p, 0) >= end for p, end in ends.items()):
                    return False
            return True
        return await self.call(check)
