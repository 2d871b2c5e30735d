"""The sum job under ``guarantee = "exactly-once"`` on real Apache Kafka: files and checks."""

from __future__ import annotations

import uuid
from pathlib import Path

from jobs import harness as h

from framework.config import JobConfig
from framework.systems.base import System


def eos_job(tmp_path: Path, bootstrap: str, guarantee: str = "exactly-once",
            timeout_s: float = 10.0, job_extra: str = "") -> Path:
    """A sum job with names of its own (tests share one broker); ``timeout_s`` bounds each
    broker call."""
    unique = uuid.uuid4().hex[:8]
    path = h.write_job(tmp_path / "job", name=f"eos-{unique}", system="kafka",
                       bootstrap=bootstrap, events=f"events-{unique}",
                       job_extra=f'guarantee = "{guarantee}"\n{job_extra}')
    text = path.read_text()
    line = f'bootstrap = "{bootstrap}"\n'
    path.write_text(text.replace(line, f"{line}client_options = {{ timeout_s = {timeout_s} }}\n"))
    return path


async def output_records(system: System, config: JobConfig) -> int:
    """How many committed records the sums stream holds (offsets include control records)."""
    return sum(map(len, (await h.outputs(system, config)).values()))


async def checkpointed(system: System, config: JobConfig) -> int:
    """Input records covered by the tasks' committed checkpoints."""
    checkpoints = await system.read_checkpoints(config.name)
    return sum(sum(c.inputs.values()) for c in checkpoints.values())
