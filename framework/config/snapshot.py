"""The configuration a running job was started with, kept apart from its job file.

`sampan run` writes it when it starts and its workers read it instead of the job file, so
an edit of the job file while the job runs never stops the job: workers keep running the
started configuration, and the coordinator reports the edit until it is restarted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from framework.config import JobConfig, load_config, parse_config
from framework.errors import ConfigError, SampanError
from framework.secrets import references_only

__all__ = ["job_file_change", "load_snapshot", "snapshot_config"]


def snapshot_config(config: JobConfig) -> Path:
    """Write ``config`` to ``<state_dir>/run/config-<digest>.json`` (atomically); its path.

    A secret written into the job file is not stored: the snapshot refers to an
    environment variable of this process instead (``SAMPAN_SECRET_<SYSTEM>_<KEY>``), which
    the workers it starts inherit."""
    folder = config.state_dir / "run"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"config-{config.digest[:16]}.json"
    document = config.to_dict()
    for name, table in document.get("systems", {}).items():
        kept, environment = references_only(table.get("client_options", {}),
                                            f"SAMPAN_SECRET_{name}")
        table["client_options"] = kept
        os.environ.update(environment)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(document, sort_keys=True, indent=1, default=str))
    os.replace(temporary, path)
    return path


def load_snapshot(path: Path, job_file: str | os.PathLike[str]) -> JobConfig:
    """The configuration `snapshot_config` wrote; relative paths resolve against
    ``job_file``'s folder, as in the job file itself."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SampanError(f"cannot read the configuration snapshot {path} ({error}); restart "
                          f"the job with `sampan run {job_file}`") from None
    return parse_config(document, job_file)


def job_file_change(config: JobConfig) -> str | None:
    """What changed in the job file since ``config`` was loaded: None when it still gives
    the same configuration, else a one-line description (invalid edits included)."""
    try:
        current = load_config(config.path)
    except ConfigError as error:
        return f"it no longer loads ({str(error).splitlines()[0]})"
    except OSError as error:
        return f"it cannot be read ({error})"
    if current.digest == config.digest:
        return None
    before, after = config.to_dict(), current.to_dict()
    changed = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, {}), after.get(table, {})
        changed += [f"{table}.{key}" for key in sorted(set(old) | set(new))
                    if old.get(key) != new.get(key)]
    return "changed " + ", ".join(changed[:8]) + (" …" if len(changed) > 8 else "")
