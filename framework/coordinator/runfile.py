"""The coordinator's run file, ``<state folder>/run/coordinator.json``.

`sampan run` keeps in it who runs the job on this machine (pid, host, start) and which of
the job's systems it cannot reach. `sampan status` reads it to tell the truth when the
coordinator stream cannot: while the metadata system does not answer (a stopped broker),
and to check that the coordinator the stream names is still alive. It is written
atomically (a reader never sees half a file) and only when something in it changes.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from framework.config import JobConfig
from framework.metadata import RunState, Unreachable

__all__ = ["RunRecord", "metadata_location", "read_run_file", "run_file", "shared_folder",
           "write_run_file"]

_RUN_STATES: dict[str, RunState] = {"running": "running", "stopped": "stopped",
                                    "failed": "failed"}
"""A run file's state as read: an unknown one makes the file unreadable (KeyError)."""


@dataclass
class RunRecord:
    """What the run file holds."""

    pid: int
    host: str
    started_ms: int
    updated_ms: int
    state: RunState
    metadata_system: str
    unreachable: list[Unreachable] = field(default_factory=list)
    job_file: str = ""
    """The job file the run started from."""
    metadata_at: str = ""
    """Where its metadata system lives (`metadata_location`)."""
    error: str = ""
    """Why it failed (state ``failed``), also when its metadata system could not take it."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        return cls(pid=int(data["pid"]), host=str(data["host"]),
                   started_ms=int(data["started_ms"]), updated_ms=int(data["updated_ms"]),
                   state=_RUN_STATES[str(data["state"])],
                   metadata_system=str(data["metadata_system"]),
                   unreachable=[Unreachable.from_dict(u) for u in data.get("unreachable", [])],
                   job_file=str(data.get("job_file", "")),
                   metadata_at=str(data.get("metadata_at", "")),
                   error=str(data.get("error", "")))


def metadata_location(config: JobConfig) -> str:
    """Where ``config``'s metadata system lives: ``kafka 10.0.0.5:9092``, ``local /srv/data``."""
    system = config.system(config.metadata_system)
    where = system.bootstrap if system.bootstrap else str(
        (config.root / (system.path or "data")).resolve())
    return f"{system.type} {where}"


def shared_folder(previous: RunRecord | None, config: JobConfig) -> str | None:
    """Why this run's state folder holds another job's stores, or None: the last run from
    it kept its metadata (changelogs, checkpoints) elsewhere — another job file with the
    same ``job.name``, whose stores each rebuilds from its own changelogs at start."""
    here = metadata_location(config)
    if previous is None or not previous.metadata_at or previous.metadata_at == here:
        return None
    return (f"state folder {config.state_dir} was last used by {previous.job_file or 'a job'}"
            f", whose metadata is on {previous.metadata_at}; this run ({config.path}) keeps "
            f"it on {here}. Both jobs are named {config.name!r}, so they share this folder "
            f"and each wipes and rebuilds the other's stores at start; give each job its own "
            f"job.name (or job.data_dir)")


def run_file(state_dir: Path) -> Path:
    """The run file of the job whose state folder is ``state_dir``."""
    return state_dir / "run" / "coordinator.json"


def write_run_file(path: Path, record: RunRecord) -> None:
    """Replace the run file with ``record`` (atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(asdict(record), sort_keys=True))
    os.replace(temporary, path)


def read_run_file(path: Path) -> RunRecord | None:
    """The run file's record; None when there is none or it cannot be read."""
    try:
        return RunRecord.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
