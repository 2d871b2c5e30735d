"""The job file (TOML): load it, validate everything, and hand out frozen config objects.

`load_config` reads the file and checks every table before anything starts: unknown
keys (with "did you mean"), types (a boolean is not an integer), enum values, required
keys and references between tables (inputs → streams → systems). All problems are
reported together, one per line, as ``file:line: key.path: what is wrong and the fix``::

    counter.toml:5: job.workers: expected an integer ≥ 1, got "two"

The reference of every key is ``docs/config.md``. The objects are in
`framework.config.model`, re-exported here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from framework.config.model import (
    CoordinatorConfig,
    ErrorsConfig,
    JobConfig,
    MetricsConfig,
    QueriesConfig,
    RocksDBConfig,
    StartPosition,
    StoreConfig,
    StreamConfig,
    StreamRef,
    SystemConfig,
)
from framework.config.parse import build_config
from framework.config.source import KeyLines, read_toml

__all__ = [
    "CoordinatorConfig",
    "ErrorsConfig",
    "JobConfig",
    "MetricsConfig",
    "QueriesConfig",
    "RocksDBConfig",
    "StartPosition",
    "StoreConfig",
    "StreamConfig",
    "StreamRef",
    "SystemConfig",
    "load_config",
    "parse_config",
]


def _absolute(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.normpath(Path(path).expanduser().absolute()))


def load_config(path: str | os.PathLike[str]) -> JobConfig:
    """Read and validate the job file at ``path``; `ConfigError` lists every problem.

    Relative paths inside it (``job.data_dir``, a local system's ``path``) and user
    modules (``job.task``, custom serdes) are found relative to the file's folder.
    """
    absolute = _absolute(path)
    document, text = read_toml(absolute, os.fspath(path))
    return build_config(document, absolute, shown=os.fspath(path),
                        lines=KeyLines.scan(text))


def parse_config(document: Mapping[str, Any], path: str | os.PathLike[str]) -> JobConfig:
    """Validate an already-parsed document as the job file ``path`` (which need not exist:
    it anchors relative paths and imports). Messages carry no line numbers."""
    return build_config(document, _absolute(path), shown=os.fspath(path), lines=None)
