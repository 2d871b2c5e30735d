"""Input expansion of a job on two hosts, on real Apache Kafka (CreatePartitions)."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path
from typing import Any

from hostjobs import Hosts, final_state, job_file, produce, state, wait_for

from framework.systems import open_system


def test_expansion_on_two_hosts_keeps_tasks_and_exact_sums(kafka_broker: Any,
                                                           tmp_path: Path) -> None:
    name = f"hx-{os.getpid()}"
    hosts = Hosts(job_file(tmp_path / "job", kafka_broker.bootstrap, name, partitions=2,
                           standbys=1), tmp_path)
    try:
        hosts.start("a")
        hosts.start("b")
        config = hosts.config
        first = wait_for(lambda: (s := state(config)).model and set(s.model.hosts) == {"a", "b"}
                         and s, 90, "two hosts", hosts).model
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
        wait_for(lambda: final_state(config) == dict(truth), 90, "exact sums", hosts)
    finally:
        hosts.stop_all()
