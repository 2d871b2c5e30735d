"""What an example brings to a drill: its workload with ground truth, and its exact checker.

An example is a folder (`framework.drill.examples` finds it: an installed one by name,
``sampan drill --example NAME``, or your own, ``--example-dir DIR``) holding a
``drill.py`` that defines ``scenario(options) -> Scenario``. The drill copies the
example's job file and Python modules into its output folder, rewrites the job for the
drill's system and options (see `render_job`), creates the scenario's streams, starts the
job, produces ``scenario.records(n)`` at the drill's rate while expanding
``scenario.expand``, and after the job caught up calls ``scenario.verify``.

Conventions for examples: streams in ``job.toml`` are named ``local.<stream>`` (the drill
renames them for ``--system kafka``), and tasks send to ``f"{envelope.ssp.system}.<out>"``
so the same task runs on either system.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from framework.config import JobConfig
from framework.drill.examples import find_example
from framework.systems.base import ProducerRecord, System

__all__ = ["Scenario", "Verdict", "example_dir", "load_scenario", "load_sibling",
           "render_job", "toml_text"]


@dataclass
class Verdict:
    """An exact comparison: how many keys were checked and what is wrong with which key."""

    keys: int
    wrong: dict[str, str] = field(default_factory=dict)
    """key → what differs (expected vs got), for every key that is not exactly right."""

    @property
    def wrong_keys(self) -> set[str]:
        return set(self.wrong)

    @property
    def exact(self) -> bool:
        return not self.wrong

    def describe(self, limit: int = 8) -> list[str]:
        return [f"  {key}: {why}" for key, why in sorted(self.wrong.items())[:limit]]


class Scenario(Protocol):
    """An example's drill workload. Stream names are unqualified (inside the drill's system)."""

    expand: str
    """The input stream the drill expands while the job runs."""
    initial_partitions: int
    """Default partition count of `expand` when the drill starts."""
    steps: tuple[int, ...]
    """Default partition counts `expand` grows to, in order."""

    def streams(self, initial_partitions: int) -> Mapping[str, int]:
        """Every stream to create before the job starts (inputs and outputs) → partitions."""
        ...

    def records(self, count: int) -> Sequence[ProducerRecord]:
        """The next ``count`` records of the workload; the scenario keeps their ground truth."""
        ...

    async def verify(self, config: JobConfig, system: System) -> Verdict:
        """Compare the job's outputs and store contents with the ground truth, exactly."""
        ...


def example_dir(name: str, job_file: str = "job.toml", folder: Path | None = None) -> Path:
    """The folder of example ``name`` (or ``folder``, a user's own); see `find_example`."""
    return find_example(name, job_file, folder)


def _options_folder(options: Any) -> Path | None:
    folder = getattr(options, "example_dir", None)
    return Path(folder) if folder is not None else None


def load_scenario(name: str, options: Any) -> Scenario:
    """Import the example's ``drill.py`` and build its scenario for ``options``."""
    folder = example_dir(name, getattr(options, "job_file", "job.toml"),
                         _options_folder(options))
    module_name = f"_sampan_drill_{folder.name}"
    spec = importlib.util.spec_from_file_location(module_name, folder / "drill.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))  # the drill module may import the example's modules
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    scenario: Scenario = module.scenario(options)
    return scenario


def load_sibling(drill_file: str, name: str) -> ModuleType:
    """Import ``<name>.py`` next to an example's drill module under a name of its own.

    Every example has a ``checker.py``; drills of several examples may run in one process,
    so a plain ``import checker`` would hand the second example the first one's module.
    """
    path = Path(drill_file).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_{path.parent.name}_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _rename(value: Any, system: str) -> Any:
    """Rename ``local.`` stream references to ``<system>.`` throughout a job document."""
    if isinstance(value, str):
        return system + value[5:] if value.startswith("local.") else value
    if isinstance(value, list):
        return [_rename(v, system) for v in value]
    if isinstance(value, dict):
        return {_rename(k, system) if k != "local" else system: _rename(v, system)
                for k, v in value.items()}
    return value


def render_job(name: str, options: Any, folder: Path, *, initial_partitions: int,
               expand: str, namespace: str = "") -> Path:
    """Copy example ``name`` into ``folder`` with its job file rewritten for the drill.

    On Kafka every topic, group and transactional id of the drill is put in ``namespace``
    (`KafkaOptions.namespace`): a broker holds the streams of every drill run on it, and
    the examples' stream and job names are fixed.
    """
    job_file = getattr(options, "job_file", "job.toml")
    source = example_dir(name, job_file, _options_folder(options))
    folder.mkdir(parents=True, exist_ok=True)
    for module in source.glob("*.py"):
        if module.name != "__init__.py":  # the copy is a job folder, not a package
            shutil.copy(module, folder / module.name)
    with (source / job_file).open("rb") as handle:
        document: dict[str, Any] = tomllib.load(handle)
    job = document.setdefault("job", {})
    job["workers"] = options.workers
    job["commit_interval_ms"] = options.commit_interval_ms
    job["expansion"] = "regroup" if options.naive else "fixed-tasks"
    if getattr(options, "guarantee", None):
        job["guarantee"] = options.guarantee
    document.setdefault("coordinator", {})["monitor_interval_ms"] = options.monitor_interval_ms
    if options.system == "kafka":
        kafka: dict[str, Any] = {"type": "kafka", "bootstrap": options.bootstrap}
        given = getattr(options, "client_options", {})
        # the workloads stamp their events from 1970 (reproducible windows): a broker's
        # time retention would delete them under the running drill, so its topics keep all
        client = {**given, "topic_configs": {"retention.ms": "-1",
                                             **given.get("topic_configs", {})},
                  **({"namespace": namespace} if namespace else {})}
        if client:
            kafka["client_options"] = client
        document["systems"] = {"local": kafka}
    else:
        document["systems"] = {"local": {"type": "local", "path": "data"}}
    streams = document.setdefault("streams", {})
    streams.setdefault(f"local.{expand}", {})["partitions"] = initial_partitions
    retention = getattr(options, "input_retention_bytes", None)
    if retention is not None:
        streams[f"local.{expand}"]["retention_bytes"] = retention
        document["coordinator"]["retention_interval_ms"] = 500
    document = _rename(document, options.system)
    path = folder / "job.toml"
    path.write_text(f"# {name} example, rewritten by `sampan drill`\n" + toml_text(document))
    return path


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as a TOML value")


def _toml_key(key: str) -> str:
    bare = key.replace("-", "").replace("_", "").isalnum()
    return key if bare else _toml_value(key)


def toml_text(document: Mapping[str, Any], prefix: str = "") -> str:
    """A TOML rendering of a job document (tables, strings, numbers, booleans, lists).

    >>> print(toml_text({"job": {"name": "x", "workers": 2}, "streams": {"a.b": {"n": 1}}}),
    ...       end="")
    [job]
    name = "x"
    workers = 2
    <BLANKLINE>
    [streams."a.b"]
    n = 1
    <BLANKLINE>
    """
    lines: list[str] = []
    plain = {k: v for k, v in document.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in document.items() if isinstance(v, dict)}
    if prefix and (plain or not tables):
        lines.append(f"[{prefix}]")
    lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in plain.items())
    if lines:
        lines.append("")
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, table in tables.items():
        text += toml_text(table, f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key))
    return text
