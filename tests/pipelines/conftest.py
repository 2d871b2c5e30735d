"""Fixtures of the pipelines' tests: end-to-end jobs whose processes are always killed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.register_assert_rewrite("pipejobs")

from pipejobs import PipelineJob  # noqa: E402


@pytest.fixture
def jobs() -> Iterator[list[PipelineJob]]:
    """The test's jobs (append them); every `sampan run` they started is killed at the end."""
    made: list[PipelineJob] = []
    try:
        yield made
    finally:
        for job in made:
            job.kill()
