"""Load what a job file names as code: its task class and its expansion algorithm.

`load_task_class` and `load_expansion_algorithm` import them from the job's folder
(`framework.importing`, whose names are re-exported here); the config objects stay plain
data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from framework.api import StreamTask
from framework.errors import TaskLoadError
from framework.importing import (
    SPEC_PATTERN,
    ImportSpecError,
    import_spec,
    make_expansion_algorithm,
)
from groupers.expansion import DefaultPartitionExpansionAlgorithm, PartitionExpansionAlgorithm

__all__ = [
    "SPEC_PATTERN",
    "ImportSpecError",
    "JobCode",
    "import_spec",
    "load_expansion_algorithm",
    "load_task_class",
    "make_expansion_algorithm",
]


class JobCode(Protocol):
    """What a job file names as code (a `framework.config.JobConfig` is one): the task,
    the expansion algorithm, and the file whose folder they are imported from."""

    @property
    def task(self) -> str: ...

    @property
    def expansion_algorithm_spec(self) -> str: ...

    @property
    def path(self) -> Path: ...

    @property
    def root(self) -> Path: ...


def load_task_class(config: JobCode) -> type[StreamTask]:
    """Import ``job.task`` with the job file's folder first on ``sys.path``; `TaskLoadError`
    names the module, class and file, and the fix."""
    where = f'job.task = "{config.task}" in {config.path}'
    try:
        target = import_spec(config.task, config.root)
    except ImportSpecError as error:
        raise TaskLoadError(f"{where}: {error}") from None
    if not (isinstance(target, type) and issubclass(target, StreamTask)):
        name = config.task.partition(":")[2]
        kind = "a class" if isinstance(target, type) else type(target).__name__
        raise TaskLoadError(
            f"{where}: {config.task} is {kind}, not a StreamTask subclass; define "
            f"`class {name}(StreamTask)` with `from framework.api import StreamTask`"
        )
    return target


def load_expansion_algorithm(config: JobCode) -> PartitionExpansionAlgorithm:
    """A new instance of ``job.expansion_algorithm`` (SEP-5's default unless named)."""
    if config.expansion_algorithm_spec == "default":
        return DefaultPartitionExpansionAlgorithm()
    return make_expansion_algorithm(config.expansion_algorithm_spec, config.root)
