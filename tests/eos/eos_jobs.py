"""The sum job under ``guarantee = "exactly-once"`` on real Apache Kafka: files and checks."""

from __future__ import annotations

import uuid
from pathlib import Path

from jobs import jobfiles as jf
from jobs import outputs as out

from framework.config import JobConfig
from framework.systems.base import System


def eos_job(tmp_path: Path, bootstrap: str, guarantee: str = "exactly-once",
            timeout_s: float = 10.0, job_extra: str = "") -> Path:
    """A sum job with names of its own (tests share one broker); ``timeout_s`` bounds each
    broker call."""
    unique = uuid.uuid4().hex[:8]
    return jf.write_job(tmp_path / "job", name=f"eos-{unique}", system="kafka",
                        bootstrap=bootstrap, events=f"events-{unique}",
                        client_options=f"timeout_s = {timeout_s}",
                        job_extra=f'guarantee = "{guarantee}"\n{job_extra}')


async def output_records(system: System, config: JobConfig) -> int:
    """How many committed records the sums stream holds (offsets include control records)."""
    return sum(map(len, (await out.outputs(system, config)).values()))
