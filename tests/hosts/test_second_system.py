"""A job on hosts whose input lives on a second Kafka system (not its metadata system): the
hosts watch it like every other input (the model service's detection covers every input
of every system), so its expansion is applied in place, without a rebalance, with every
output exact. On real Apache Kafka; the second system is the same broker under another
system name, which is all the hosts can tell apart. The host's phase is in its report,
`sampan status` and its own ``/metrics``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from hostjobs import Hosts, outputs_job, state, wait_for
from jobs.harness import CLI, produce
from jobs.outputs import Workload, outputs, replay_problems
from prometheus_client.parser import text_string_to_metric_families

from framework.config import JobConfig
from framework.drill.hosts import settled
from framework.hosts.phase import HostPhase
from framework.systems import open_system
from framework.systems.base import System


def _job_on_two_systems(folder: Path, bootstrap: str, name: str) -> Path:
    """tests/jobs' per-key running sum with its input and outputs on system ``events``; its
    coordinator stream, checkpoints and changelog on system ``kafka``."""
    path = outputs_job(folder, bootstrap, name, tasks=2, workers=1)
    text = path.read_text().replace(f"kafka.{name}-in", f"events.{name}-in").replace(
        "[job]\n", '[job]\nmetadata_system = "kafka"\n', 1)
    path.write_text(text + f'\n[systems.events]\ntype = "kafka"\nbootstrap = "{bootstrap}"\n')
    return path


def _on_events(config: JobConfig, step: Any) -> Any:
    async def run() -> Any:
        system: System = open_system(config.system("events"))
        await system.start()
        try:
            return await step(system)
        finally:
            await system.close()
    return asyncio.run(run())


def _phases(port: int) -> dict[str, float]:
    """``sampan_host_phase`` of the host serving on ``port``: phase → value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {s.labels["phase"]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "sampan_host_phase"}


def test_an_input_on_a_second_kafka_system_expands_in_place_on_hosts(
        kafka_broker: Any, tmp_path: Path) -> None:
    name = f"h2s-{os.getpid()}"
    hosts = Hosts(_job_on_two_systems(tmp_path / "job", kafka_broker.bootstrap, name),
                  tmp_path)
    config = hosts.config
    stream = f"events.{name}-in"
    work = Workload(keys=30, stream=f"{name}-in")
    with hosts.logs_kept_on_failure("second-system"):
        hosts.start("a")
        first = wait_for(lambda: settled(state(config), {"a"}), 120, "host a running",
                         hosts).model
        assert first.partition_counts[stream] == 2
        _on_events(config, lambda system: produce(system, work.records(600)))
        _on_events(config, lambda system: system.expand_stream(f"{name}-in", 4))
        _on_events(config, lambda system: produce(system, work.records(600)))
        grown = wait_for(lambda: (m := state(config).model) and m.partition_counts[stream]
                         == 4 and m, 120, f"the model reading {stream} at 4 partitions",
                         hosts)
        assert grown.in_place_since is not None and grown.in_place_since <= first.epoch
        assert sorted(grown.tasks) == sorted(first.tasks)  # fixed tasks: still 2

        def every_output() -> bool:
            found = _on_events(config, lambda system: outputs(system, config))
            return all(len({o["n"] for o in found.get(key, [])}) >= len(amounts)
                       for key, amounts in work.amounts.items())

        wait_for(every_output, 120, "an output for every record", hosts)
        problems = replay_problems(_on_events(config, lambda s: outputs(s, config)), work)
        assert problems == [], problems[:10]
        after = state(config)
        assert [e.change for e in after.status.expansions] == [f"{stream} 2→4"]
        report = after.hosts["a"]
        assert report.phase == "RUNNING" and report.metrics_port
        assert _phases(report.metrics_port) == {
            phase.name: float(phase is HostPhase.RUNNING) for phase in HostPhase}
        text = subprocess.run([*CLI, "status", str(hosts.path)], check=True,
                              capture_output=True, text=True).stdout
        assert f"host a: running at epoch {after.model.epoch}, leader, phase RUNNING " in text
        assert f", host a http://127.0.0.1:{report.metrics_port}/metrics" in text
        assert "taken in place by its" in hosts.log("a")
        assert hosts.terminate("a") == 0
        assert state(config).hosts["a"].phase == "STOPPED"
