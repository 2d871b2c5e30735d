"""Fixtures of the coordinator tests: jobs whose `sampan run` processes are always killed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("coordjobs", "kafkajobs")

from coordjobs import Job  # noqa: E402


@pytest.fixture
def make_job(tmp_path: Path) -> Iterator[Callable[..., Job]]:
    """``make_job(name, {stream: partitions}, **options)``; every started process is killed."""
    jobs: list[Job] = []

    def make(name: str, inputs: dict[str, int], **options: Any) -> Job:
        job = Job(tmp_path / name, name, inputs, **options)
        jobs.append(job)
        return job

    try:
        yield make
    finally:
        for job in jobs:
            job.kill()
