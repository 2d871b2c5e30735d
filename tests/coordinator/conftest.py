"""Fixtures of the coordinator tests: jobs whose `sampan run` processes are always killed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobs.runs import CountJob


@pytest.fixture
def make_job(tmp_path: Path) -> Iterator[Callable[..., CountJob]]:
    """``make_job(name, {stream: partitions}, **options)``; every started process is killed."""
    jobs: list[CountJob] = []

    def make(name: str, inputs: dict[str, int], **options: Any) -> CountJob:
        job = CountJob(tmp_path / name, name, inputs, **options)
        jobs.append(job)
        return job

    try:
        yield make
    finally:
        for job in jobs:
            job.kill()
