"""Scrape targets that survive restarts: one Prometheus ``file_sd`` file per process.

Every process of a job that serves ``/metrics`` writes ``<state folder>/metrics/<process>.json``
(``coordinator.json``, ``worker-0.json``, …) in Prometheus' file-based service discovery
format, and keeps it current: a scrape config with ``file_sd_configs: [{files:
["<state folder>/metrics/*.json"]}]`` follows every restart and expansion by itself. With
``[metrics] port = 0`` a restarted process also asks for the port its file names first, so
the address usually does not even change; the file says where it is when it must.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

__all__ = ["previous_port", "remove_targets_above", "target_file", "targets_dir",
           "write_target"]

_WORKER_FILE = re.compile(r"worker-(\d+)\.json")


def targets_dir(state_dir: Path) -> Path:
    """The folder of a job's ``file_sd`` files."""
    return state_dir / "metrics"


def target_file(state_dir: Path, process: str) -> Path:
    """The ``file_sd`` file of ``process`` (``coordinator``, ``worker-N``)."""
    return targets_dir(state_dir) / f"{process}.json"


def previous_port(path: Path) -> int | None:
    """The port ``path`` names (the process's last one), or None."""
    try:
        entry = json.loads(path.read_text())[0]
        return int(str(entry["targets"][0]).rsplit(":", 1)[1])
    except (OSError, ValueError, LookupError, TypeError):
        return None


def write_target(path: Path, host: str, port: int, labels: dict[str, str]) -> None:
    """Replace ``path`` (atomically, as Prometheus asks) with one target ``host:port``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps([{"targets": [address], "labels": labels}], indent=1))
    os.replace(temporary, path)


def remove_targets_above(state_dir: Path, workers: int) -> None:
    """Delete the files of workers ``workers`` and up: the job runs fewer workers now."""
    folder = targets_dir(state_dir)
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        found = _WORKER_FILE.fullmatch(path.name)
        if found and int(found[1]) >= workers:
            path.unlink(missing_ok=True)
