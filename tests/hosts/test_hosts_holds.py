"""A refused partition change on two hosts (real Apache Kafka): the group's leader holds
the input as one host does — the job model keeps 2 partitions and a hold at the offsets
seen at detection, taken in place by the running workers of both hosts (no restart) —
and keeps holding it when the topic grows on to 4 after records were
written past the hold; `sampan streams discard-held` releases it and the sums of the kept
records are exact."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from hostjobs import Hosts, checkpointed, final_state, job_file, produce, state, wait_for
from jobs.harness import CLI

from framework.config import JobConfig
from framework.systems import open_system


def expand(hosts: Hosts, topic: str, partitions: int) -> None:
    async def grow() -> None:
        system = open_system(hosts.config.system("kafka"))
        await system.start()
        try:
            await system.expand_stream(topic, partitions)
        finally:
            await system.close()
    asyncio.run(grow())


def read(hosts: Hosts) -> dict[int, int]:
    return {ssp.partition: position for inputs in checkpointed(hosts.config).values()
            for ssp, position in inputs.items()}


def running(config: JobConfig) -> dict[int, int] | None:
    """Worker id → pid once every worker of the current model reports running it."""
    now = state(config)
    if now.model is None or now.model.parked:
        return None
    found = {w: now.workers[w] for w in now.model.worker_ids() if w in now.workers}
    if len(found) < len(now.model.worker_ids()) or any(
            r.epoch != now.model.epoch for r in found.values()):
        return None
    return {w: r.pid for w, r in found.items()}


def counted_on_two_hosts(hosts: Hosts, kept: Counter[str]) -> dict[int, int]:
    """Hosts a and b run the job and summed 1,000 records exactly; their workers' pids."""
    hosts.start("a")
    hosts.start("b")
    config = hosts.config
    wait_for(lambda: (m := state(config).model) and set(m.hosts) == {"a", "b"}, 120,
             "two hosts", hosts)
    produce(config, kept, 1000, 40)
    wait_for(lambda: final_state(config) == dict(kept), 120, "exact sums", hosts)
    pids: dict[int, int] = wait_for(lambda: running(config), 120, "every worker on the model",
                                    hosts)
    return pids


def test_the_leader_holds_a_refused_input_until_discard_held(kafka_broker: Any,
                                                              tmp_path: Path) -> None:
    name = f"hold-{uuid.uuid4().hex[:8]}"
    topic, stream = f"{name}-in", f"kafka.{name}-in"
    hosts = Hosts(job_file(tmp_path / "job", kafka_broker.bootstrap, name, partitions=2),
                  tmp_path)
    with hosts.logs_kept_on_failure("holds"):
        config = hosts.config
        kept: Counter[str] = Counter()
        skipped: Counter[str] = Counter()
        pids = counted_on_two_hosts(hosts, kept)

        expand(hosts, topic, 3)
        held = wait_for(lambda: (m := state(config).model) and stream in m.holds and m, 120,
                        "the leader's hold of 2→3", hosts)
        assert held.partition_counts[stream] == 2
        hold = dict(held.holds[stream].ends)
        assert read(hosts) == hold
        produce(config, skipped, 500, 40, start=1000)  # placed for 3 partitions: held
        expand(hosts, topic, 4)
        produce(config, skipped, 500, 40, start=1500)  # past the hold: Kafka cannot tell
        # the leader decides 4 in place: the input stays held, so no model is published
        again = wait_for(lambda: (s := state(config)).model and s.status.refusal is not None
                         and s.status.refusal.change == f"{stream} 2→3→4" and s.model, 120,
                         "the leader's refusal at 4 partitions", hosts)
        assert (again.partition_counts[stream], dict(again.holds[stream].ends)) == (2, hold)
        assert read(hosts) == hold
        refusal = state(config).status.refusal
        assert refusal is not None and refusal.change == f"{stream} 2→3→4"
        status = subprocess.run([*CLI, "status", str(hosts.path)], capture_output=True,
                                text=True, timeout=120)
        assert f"REFUSED {stream} 2→3→4: {stream} is held at 2 partitions" in status.stdout
        assert final_state(config) == dict(kept)
        # the hold placed and kept by models the running workers took in place
        assert wait_for(lambda: running(config), 120, "every worker on the model",
                        hosts) == pids
        hosts.stop_all()

        discard = subprocess.run([*CLI, "streams", "discard-held", stream, "--job",
                                  str(hosts.path)], capture_output=True, text=True,
                                 timeout=120)
        assert discard.returncode == 0, discard.stderr
        assert discard.stdout.startswith(f"discarded 1,000 records of {stream} ({stream} 2→3→4)")
        hosts.start("a")
        hosts.start("b")
        produce(config, kept, 1000, 40, start=2000)
        wait_for(lambda: final_state(config) == dict(kept), 120, "exact sums of what was kept",
                 hosts)
        after = state(config)
        assert after.model is not None and after.status.refusal is None
        assert (after.model.partition_counts[stream], after.model.holds) == (4, {})


def test_a_hold_released_by_growing_on_to_4_is_taken_in_place_on_both_hosts(
        kafka_broker: Any, tmp_path: Path) -> None:
    """Nothing is written while the topic has 3 partitions: growing it on to 4 releases the
    hold in place — the same worker processes on both hosts read the 4 partitions (the
    tasks gain one each, behind the expansion barrier) and the sums stay exact."""
    name = f"hold-release-{uuid.uuid4().hex[:8]}"
    topic, stream = f"{name}-in", f"kafka.{name}-in"
    hosts = Hosts(job_file(tmp_path / "job", kafka_broker.bootstrap, name, partitions=2),
                  tmp_path)
    with hosts.logs_kept_on_failure("hold-release"):
        config = hosts.config
        kept: Counter[str] = Counter()
        pids = counted_on_two_hosts(hosts, kept)
        expand(hosts, topic, 3)
        wait_for(lambda: (m := state(config).model) and stream in m.holds, 120,
                 "the leader's hold of 2→3", hosts)
        expand(hosts, topic, 4)
        released = wait_for(lambda: (m := state(config).model) and not m.holds
                            and m.partition_counts[stream] == 4 and m, 120,
                            "the hold released at 4 partitions", hosts)
        assert state(config).status.refusal is None
        produce(config, kept, 1000, 40, start=1000)  # placed for 4 partitions
        wait_for(lambda: final_state(config) == dict(kept), 120, "exact sums at 4", hosts)
        after = wait_for(lambda: (s := state(config)).model and s.model.epoch >= released.epoch
                         and running(config), 120, "every worker on the release", hosts)
        assert after == pids
        assert set(read(hosts)) == {0, 1, 2, 3}
