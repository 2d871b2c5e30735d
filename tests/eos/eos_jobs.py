"""The sum job under ``guarantee = "exactly-once"`` on the mock cluster: files and checks."""

from __future__ import annotations

import uuid
from pathlib import Path

from jobs import harness as h
from kafka_mock import MockCluster

from framework.config import JobConfig
from framework.systems.base import System


def eos_job(tmp_path: Path, cluster: MockCluster, guarantee: str = "exactly-once",
            timeout_s: float = 10.0) -> Path:
    """A sum job with its own names, every topic it uses created on the mock cluster
    (which has no CreateTopics); ``timeout_s`` bounds each broker call."""
    unique = uuid.uuid4().hex[:8]
    name, events = f"eos-{unique}", f"events-{unique}"
    path = h.write_job(tmp_path / "job", name=name, system="kafka",
                       bootstrap=cluster.bootstrap, events=events,
                       job_extra=f'guarantee = "{guarantee}"\n')
    text = path.read_text()
    line = f'bootstrap = "{cluster.bootstrap}"\n'
    path.write_text(text.replace(line, f"{line}client_options = {{ timeout_s = {timeout_s} }}\n"))
    for topic, partitions in ((events, h.PARTITIONS), (f"{events}-sums", h.PARTITIONS),
                              ("dead-letters", 1), (f"{name}-totals-changelog", h.PARTITIONS),
                              (f"__sampan-{name}-coordinator", 1),
                              (f"__sampan-{name}-checkpoints", 1),
                              (f"__sampan-{name}-fences", 1)):
        cluster.create_topic(topic, partitions)
    return path


async def output_records(system: System, config: JobConfig) -> int:
    """How many committed records the sums stream holds (offsets include control records)."""
    return sum(map(len, (await h.outputs(system, config)).values()))


async def checkpointed(system: System, config: JobConfig) -> int:
    """Input records covered by the tasks' committed checkpoints."""
    checkpoints = await system.read_checkpoints(config.name)
    return sum(sum(c.inputs.values()) for c in checkpoints.values())
