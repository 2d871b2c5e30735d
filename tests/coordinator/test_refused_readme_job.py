"""Issue 31 §1 with README's counter job, driven through the CLI as an operator would: a
forced 2 → 3 is refused, records are written under 3 partitions, the stream grows on to 4.
The stream stays held (read only up to where it had 2 partitions) on every later count and
across restarts; `sampan streams discard-held` then lets the job go on, and every output
is the running total of the records it kept, in order."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jobs.harness import CLI, REPO
from test_readme_job import readme_block

from framework.config import JobConfig, load_config
from framework.metadata import CoordinatorState, read_state
from framework.systems import open_system

KEYS = [f"k{n:02d}" for n in range(19)]  # and "a", the key of the issue


class Counter:
    """README's counter job in a folder: its `sampan run` and what was produced to it."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "counter_task.py").write_text(readme_block("# counter_task.py"))
        # Only to keep the test short: the monitor looks every 300 ms (README: 2 s).
        (folder / "counter.toml").write_text(
            readme_block("# counter.toml") + "\n[coordinator]\nmonitor_interval_ms = 300\n")
        self.folder = folder
        self.run: subprocess.Popen[bytes] | None = None
        self.produced: list[tuple[str, int]] = []
        self.discarded: set[int] = set()  # indexes into ``produced``

    @property
    def config(self) -> JobConfig:
        return load_config(self.folder / "counter.toml")

    def sampan(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args], input=stdin, capture_output=True, text=True,
                              timeout=120, cwd=self.folder,
                              env={**os.environ, "PYTHONPATH": str(REPO)})

    def start(self) -> None:
        with (self.folder / "run.log").open("ab") as out:
            self.run = subprocess.Popen(
                [*CLI, "run", "counter.toml"], stdout=out, stderr=out, cwd=self.folder,
                start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO)})

    async def wait_running(self) -> None:
        """Until this `sampan run` reports itself running (its Ctrl-C handling is set)."""
        async def running() -> bool:
            status = (await self.state()).status
            return (self.run is not None and status.coordinator_pid == self.run.pid
                    and status.state == "running")
        await self.wait(running, "sampan run to report running")

    def stop(self) -> None:
        """Ctrl-C, as the README says; the run must exit cleanly."""
        assert self.run is not None
        self.run.send_signal(signal.SIGINT)
        assert self.run.wait(60) == 0, self.log()

    def kill(self) -> None:
        if self.run is not None and self.run.poll() is None:
            os.killpg(self.run.pid, signal.SIGKILL)
            self.run.wait(30)

    def log(self) -> str:
        path = self.folder / "run.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def produce(self, rows: list[tuple[str, int]]) -> range:
        """Write ``rows`` (key, amount) with `sampan streams produce`; their indexes."""
        lines = "".join(json.dumps({"key": k, "value": {"amount": a}}) + "\n" for k, a in rows)
        done = self.sampan("streams", "produce", "local.events", "--job", "counter.toml",
                           stdin=lines)
        assert done.returncode == 0, done.stderr
        first = len(self.produced)
        self.produced += rows
        return range(first, len(self.produced))

    def expand(self, partitions: int, *force: str) -> None:
        done = self.sampan("streams", "expand", "local.events", "--partitions",
                           str(partitions), "--job", "counter.toml", *force)
        assert done.returncode == 0, done.stderr

    def expected(self, upto: int | None = None) -> dict[str, list[int]]:
        """Per key, the running totals of the records kept (not discarded), in order."""
        totals: dict[str, list[int]] = {}
        for index, (key, amount) in enumerate(self.produced[:upto]):
            if index not in self.discarded:
                running = totals.setdefault(key, [])
                running.append((running[-1] if running else 0) + amount)
        return totals

    def outputs(self) -> dict[str, list[int]]:
        """Every record of local.totals, per key in offset order (`streams tail --json`)."""
        tail = self.sampan("streams", "tail", "local.totals", "--job", "counter.toml",
                           "--from-beginning", "--until-end", "--json")
        if tail.returncode == 2 and "does not exist" in tail.stderr:
            return {}
        assert tail.returncode == 0, tail.stderr
        found: dict[str, list[int]] = {}
        for row in sorted(map(json.loads, tail.stdout.splitlines()),
                          key=lambda r: (r["partition"], r["offset"])):
            found.setdefault(row["key"], []).append(row["value"])
        return found

    async def on_log(self, fn: Callable[[Any], Awaitable[Any]]) -> Any:
        system = open_system(self.config.system("local"))
        await system.start()
        try:
            return await fn(system)
        finally:
            await system.close()

    async def state(self) -> CoordinatorState:
        config = self.config
        return await self.on_log(lambda s: read_state(s, config))  # type: ignore[no-any-return]

    async def read(self) -> dict[int, int]:
        """Partition → the position the job checkpointed on local.events."""
        checkpoints = await self.on_log(lambda s: s.read_checkpoints("counter"))
        return {ssp.partition: position for cp in checkpoints.values()
                for ssp, position in cp.inputs.items()}

    async def ends(self) -> dict[int, int]:
        return {p: r.end for p, r in (await self.on_log(lambda s: s.offsets("events"))).items()}

    async def wait(self, condition: Callable[[], Awaitable[bool]], what: str,
                   timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not await condition():
            if self.run is not None and self.run.poll() is not None:
                raise AssertionError(f"sampan run exited while waiting for {what}:\n{self.log()}")
            assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{self.log()}"
            await asyncio.sleep(0.1)


async def wait_held_at(job: Counter, held: dict[int, int], count: int) -> CoordinatorState:
    """Until the coordinator handled ``count`` partitions and the job read local.events up
    to ``held``; fails at once when the job read past it (the miscount of issue 31)."""
    seen: list[CoordinatorState] = []

    async def handled() -> bool:
        state = await job.state()
        seen[:] = [state]
        refusal = state.status.refusal
        moved = state.model is not None and state.model.partition_counts != {
            "local.events": 2}
        return moved or (refusal is not None and refusal.counts == {"local.events": count})
    await job.wait(handled, f"the coordinator to handle {count} partitions")
    assert seen[0].model is not None
    assert seen[0].model.partition_counts == {"local.events": 2}, (
        f"the job adopted {seen[0].model.partition_counts} although records were written "
        f"under a count its 2 tasks cannot map")

    async def caught_up() -> bool:
        read = await job.read()
        assert all(read.get(p, 0) <= end for p, end in held.items()) and set(read) <= set(
            held), f"read past the hold {held}: {read}"
        return read == held
    await job.wait(caught_up, f"the job to read local.events up to {held}")
    return (await job.state())


async def test_readme_counter_stays_held_after_3_then_4_until_discard_held(
        tmp_path: Path) -> None:
    job = Counter(tmp_path / "counter")
    job.start()
    try:
        job.produce([("a", 5)])
        await job.wait(lambda: _is(job.outputs, {"a": [5]}), "a = 5")
        job.produce([(k, 1 + n) for n, k in enumerate(KEYS)])
        await job.wait(lambda: _is(job.outputs, job.expected()), "the first records counted")
        hold = await job.ends()

        job.expand(3, "--force")
        await job.wait(lambda: _refused(job, 3), "the refusal of 2→3")
        under_3 = job.produce([("a", 1), *((k, 2) for k in KEYS)])
        job.expand(4)
        job.produce([("a", 2), *((k, 3) for k in KEYS)])
        state = await wait_held_at(job, hold, 4)
        assert job.outputs() == job.expected(under_3.start)

        refusal = state.status.refusal
        assert refusal is not None
        assert refusal.change == "local.events 2→3→4"
        assert refusal.error.startswith(
            f"local.events is held at 2 partitions: {len(under_3)} records were written while "
            f"it had 3 partitions, which 2 tasks cannot map")
        status = job.sampan("status", "counter.toml")
        assert "HELD" in status.stdout or "held at 2 partitions" in status.stdout, status.stdout
        assert "sampan streams discard-held local.events" in status.stdout
        assert "sampan rekey" in status.stdout

        job.stop()  # the hold outlives the coordinator
        job.start()
        await job.wait_running()
        await wait_held_at(job, hold, 4)
        assert job.outputs() == job.expected(under_3.start)
        job.stop()

        discard = job.sampan("streams", "discard-held", "local.events", "--job", "counter.toml")
        assert discard.returncode == 0, discard.stderr
        job.discarded.update(under_3)
        assert f"discarded {len(under_3)} records of local.events" in discard.stdout
        job.start()
        job.produce([("a", 4), *((k, 5) for k in KEYS)])
        await job.wait(lambda: _is(job.outputs, job.expected()), "every kept record counted")
        assert job.outputs() == job.expected()
        assert job.expected()["a"] == [5, 7, 11]
        job.stop()
    finally:
        job.kill()


async def _is(read: Callable[[], dict[str, list[int]]], want: dict[str, list[int]]) -> bool:
    return read() == want


async def _refused(job: Counter, count: int) -> bool:
    refusal = (await job.state()).status.refusal
    return refusal is not None and refusal.counts == {"local.events": count}
