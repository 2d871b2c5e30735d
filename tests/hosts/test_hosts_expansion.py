"""Input expansion of a job on two hosts, on real Apache Kafka (CreatePartitions)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hostjobs import Hosts, final_state, job_file, produce, state, wait_for
from jobs.harness import CLI

from framework.systems import open_system


def test_expansion_on_two_hosts_keeps_tasks_and_exact_sums(kafka_broker: Any,
                                                           tmp_path: Path) -> None:
    """2 → 4 on two hosts (standbys on): the leader applies it without a rebalance and the
    running workers of both hosts take it in place — same processes — with exact sums."""
    name = f"hx-{os.getpid()}"
    hosts = Hosts(job_file(tmp_path / "job", kafka_broker.bootstrap, name, partitions=2,
                           standbys=1), tmp_path)
    try:
        hosts.start("a")
        hosts.start("b")
        config = hosts.config
        # Settled: one task on each host (a's warmup, or its standby, caught up and its
        # task moved), so no probing rebalance is left to coincide with the expansion and
        # take a model of its own — "no warmup" alone is not that: a task whose only copy
        # elsewhere is a standby still behind stays put with a probing rebalance scheduled.
        settled = wait_for(lambda: (s := state(config)).model and set(s.model.hosts) == {
            "a", "b"} and {s.model.host_of(t) for t in s.model.tasks} == {"a", "b"} and
            not s.model.warmups and not s.model.parked and all(
                r.epoch == s.model.epoch and r.resumed_ms for w, r in s.workers.items()
                if w < s.model.workers) and s, 90, "two hosts, balanced", hosts)
        first = settled.model
        pids = {w: r.pid for w, r in settled.workers.items() if w < first.workers}
        taken = {w: settled.workers[w].in_place_changes for w in pids}  # rebalances in place
        truth: Counter[str] = Counter()
        produce(config, truth, 2000, 50)

        async def expand() -> None:
            system = open_system(config.system("kafka"))
            await system.start()
            try:
                await system.expand_stream(f"{name}-in", 4)
            finally:
                await system.close()

        asyncio.run(expand())
        produce(config, truth, 2000, 50, start=2000)
        grown = wait_for(lambda: (m := state(config).model) and
                         m.partition_counts[f"kafka.{name}-in"] == 4 and m, 90,
                         "the expanded model", hosts)
        assert sorted(grown.tasks) == sorted(first.tasks)  # fixed tasks: still 2
        assert grown.in_place_since is not None and grown.in_place_since <= first.epoch
        assert grown.hosts == first.hosts
        wait_for(lambda: final_state(config) == dict(truth), 90, "exact sums", hosts)
        after = wait_for(lambda: (s := state(config)) and all(
            s.workers[w].epoch == grown.epoch for w in pids) and s, 90,
            "every worker on the expanded model", hosts)
        assert {w: after.workers[w].pid for w in pids} == pids  # none restarted
        assert {w: after.workers[w].in_place_changes - taken[w] for w in pids} == dict.fromkeys(
            pids, 1)
        assert [(e.epoch, e.in_place) for e in after.status.expansions] == [
            (grown.epoch, True)]
        wait_for(lambda: all("taken in place by its" in hosts.log(h) for h in "ab"), 60,
                 "both hosts following the model", hosts)
    finally:
        hosts.stop_all()


def test_status_on_two_hosts_names_the_expansion_and_the_refusal(kafka_broker: Any,
                                                                tmp_path: Path) -> None:
    """The group leader decides a partition change as one host does and records it the same
    way: `sampan status` shows the applied expansion (from → to, its epoch, its pause: until
    every host resumed) and, for a change the tasks cannot map, the refusal with why and
    the fix."""
    name = f"hr-{os.getpid()}"
    topic, stream = f"{name}-in", f"kafka.{name}-in"
    hosts = Hosts(job_file(tmp_path / "job", kafka_broker.bootstrap, name, partitions=2),
                  tmp_path)
    with hosts.logs_kept_on_failure("status-expansion-refusal"):
        hosts.start("a")
        hosts.start("b")
        config = hosts.config
        wait_for(lambda: (m := state(config).model) and set(m.hosts) == {"a", "b"}, 120,
                 "two hosts", hosts)
        truth: Counter[str] = Counter()
        produce(config, truth, 1000, 40)
        before = state(config).model
        assert before is not None
        expand_topic(hosts, topic, 4)
        grown = wait_for(lambda: (m := state(config).model) and
                         m.partition_counts[stream] == 4 and m, 120, "the model at 4", hosts)
        produce(config, truth, 1000, 40, start=1000)
        wait_for(lambda: final_state(config) == dict(truth), 120, "exact sums", hosts)
        wait_for(lambda: (e := state(config).status.expansions) and e[0].resumed_ms, 120,
                 "the leader to close the expansion's pause", hosts)
        expand_topic(hosts, topic, 5)
        held = wait_for(lambda: (m := state(config).model) and stream in m.holds and m, 120,
                        "the leader's hold of 4→5", hosts)
        assert held.partition_counts[stream] == 4
        recorded = state(config).status
        assert recorded.refusal is not None and recorded.refusal.change == f"{stream} 4→5"
        assert [e.change for e in recorded.expansions] == [f"{stream} 2→4"]
        expansion = recorded.expansions[0]
        assert before.epoch < expansion.epoch <= grown.epoch  # the first model at 4
        assert expansion.model_published_ms is not None
        assert expansion.detected_ms <= expansion.model_published_ms
        assert expansion.resumed_ms is not None and expansion.pause_ms is not None
        assert expansion.model_published_ms <= expansion.resumed_ms
        status = subprocess.run([*CLI, "status", str(hosts.path)], capture_output=True,
                                text=True, timeout=120)
        assert status.returncode == 1, status.stderr  # degraded while a change is refused
        lines = status.stdout.splitlines()
        job = hosts.path
        assert [line for line in lines if line.startswith("  REFUSED")] == [
            f"  REFUSED {stream} 4→5: stream {stream}: partition count went from 4 to 5, "
            f"refused (2 tasks consume it): partition count 5 is not a multiple of 2: keys "
            f"would change tasks; expand to a multiple of 2 (e.g. 6), or re-key the job's "
            f"state offline to a task count that divides 5. {stream} is held: the job reads "
            f"{stream} only up to where it had 4 partitions, on every later count (its other "
            f"inputs go on). Growing it on to a count 2 tasks map releases it while nothing "
            f"is written to it at 5 partitions; once records are, stop the job and run "
            f"`sampan rekey {job} --tasks M` (keeps them; M one of 1, 5) or `sampan streams "
            f"discard-held {stream} --job {job}`"]
        assert [line for line in lines if line.startswith("  expansion ")] == [
            f"  expansion {stream} 2→4 → epoch {expansion.epoch}: detected "
            f"{clock(expansion.detected_ms)}, published {clock(expansion.model_published_ms)}, "
            f"taken in place by the workers (none restarted), resumed "
            f"{clock(expansion.resumed_ms)}, pause {expansion.pause_ms} ms"]
        assert final_state(config) == dict(truth)


def expand_topic(hosts: Hosts, topic: str, partitions: int) -> None:
    async def grow() -> None:
        system = open_system(hosts.config.system("kafka"))
        await system.start()
        try:
            await system.expand_stream(topic, partitions)
        finally:
            await system.close()
    asyncio.run(grow())


def clock(ms: int) -> str:
    """A time as `sampan status` prints it (local time, milliseconds)."""
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"
