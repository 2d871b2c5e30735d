"""The ad join on Apache Kafka stays exact when its workers hold a backlog through the
expansion of ``clicks`` 4 → 8: both workers are frozen (SIGSTOP) while half the workload
is produced, the topic grows, the coordinator publishes the model of 8 partitions and the
other half is produced — into the new partitions too. Thawed, each worker has unread
clicks in the old partitions; it takes the model in place (at its fence check, or after
its consumer noticed the growth) and holds the new partitions behind their barrier until
that backlog is read. Every attributed and late
click (none lost, none twice, each with exactly its value), every campaign count and the
emptied join stores are checked against `examples/ad_join/checker.py`."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from jobs.runs import LocalJob

from framework.drill.examples import find_example
from framework.drill.scenario import load_scenario

RECORDS = 3000

JOB = """\
[job]
name = "ad-join-{name}"
task = "ad_join_task:AdJoinTask"
inputs = ["kafka.impressions", "kafka.clicks"]
workers = 2
commit_interval_ms = 500
window_interval_ms = 1000
expansion = "fixed-tasks"

[coordinator]
monitor_interval_ms = 500

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"

[systems.kafka.client_options]
namespace = "frozen-ad-join-{name}."

[streams."kafka.impressions"]
partitions = 4
[streams."kafka.clicks"]
partitions = 4
[streams."kafka.attributed-clicks"]
partitions = 4
[streams."kafka.late"]
partitions = 4
[streams."kafka.ctr"]
partitions = 4

[stores.joined]
[stores.seen-clicks]
[stores.ctr]
"""


async def test_ad_join_exact_with_a_backlog_held_through_the_expansion(
        kafka_broker: Any, tmp_path: Path) -> None:
    folder = find_example("ad_join")
    scenario: Any = load_scenario("ad_join", SimpleNamespace(
        records=RECORDS, seed=11, initial_partitions=4, steps=(8,), job_file="job.toml",
        example_dir=None))
    job = LocalJob(tmp_path / "job", JOB.format(name=uuid.uuid4().hex[:8],
                                                bootstrap=kafka_broker.bootstrap),
                   {"ad_join_task.py": (folder / "ad_join_task.py").read_text()},
                   system="kafka")
    await job.create_streams(dict(scenario.streams(4)))
    job.start()
    try:
        first = await job.wait_epoch(1, 2)
        pids = [first.workers[w].pid for w in (0, 1)]
        await job.send(list(scenario.records(RECORDS // 10)))  # read before the freeze
        await job.wait(lambda: job.caught_up_on("impressions", "clicks"), "the first records")
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            await job.send(list(scenario.records(RECORDS // 2 - RECORDS // 10)))
            await job.expand_stream("clicks", 8)

            async def published() -> bool:
                model = (await job.state()).model
                return model is not None and model.partition_counts["kafka.clicks"] == 8
            await job.wait(published, "the model of 8 clicks partitions")
            await job.send(list(scenario.records(RECORDS - RECORDS // 2)))
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        await job.wait(lambda: job.caught_up_on("impressions", "clicks"),
                       "every record processed", timeout=300)
        assert await job.stop() == 0
    finally:
        job.kill()
    verdict = await job.call(lambda system: scenario.verify(job.config, system))
    assert verdict.exact, "\n".join(verdict.describe(limit=40))
    assert verdict.keys > 1000
    state = await job.state()
    assert [(e.change, e.in_place) for e in state.status.expansions] == [
        ("kafka.clicks 4→8", True)]
    assert {w: r.pid for w, r in state.workers.items()} == dict(enumerate(pids))
    logs = "\n".join((job.folder / "logs" / f"worker-{w}.log").read_text() for w in (0, 1))
    assert logs.count("passed its expansion barrier") == 4
