"""One host's view of the job configuration: the job file with this host's state folder."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from framework.config import JobConfig

__all__ = ["host_config"]


def host_config(config: JobConfig, data_dir: Path | None) -> JobConfig:
    """``config`` with ``job.data_dir`` replaced by ``data_dir`` (``--data-dir``).

    The digest stays the job file's: it identifies the job, which is the same on every host
    whatever folder each keeps its state in (job models carry it; workers compare it).
    """
    if data_dir is None:
        return config
    local = replace(config, data_dir=data_dir.resolve())
    local.__dict__["digest"] = config.digest  # cached_property: pin, do not recompute
    return local
