"""Drill options and the job file a drill runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from framework.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass(frozen=True)
class DrillOptions:
    """What a drill runs; defaults give a ~10 s drill with expansions 2 → 4 → 8."""

    example: str = "wordcount"
    records: int = 30_000
    keys: int = 1_000
    rate: int = 3_000
    """Records produced per second."""
    initial_partitions: int = 2
    steps: tuple[int, ...] = (4, 8)
    """Partition counts the input expands to, in order, spread evenly over the run."""
    workers: int = 2
    output: Path | None = None
    """Folder for the job, its data, logs, report and plot (default: a fresh temp folder)."""
    naive: bool = False
    """Use the plain GroupByPartition grouper (what other frameworks do) to show miscounts."""
    system: str = "local"
    bootstrap: str | None = None
    monitor_interval_ms: int = 1_000
    commit_interval_ms: int = 500
    seed: int = 7
    catch_up_timeout_s: float = 120.0
    plot: bool = True
    extra: dict[str, str] = field(default_factory=dict)

    def validate(self) -> None:
        if self.records < 1 or self.keys < 1 or self.rate < 1 or self.workers < 1:
            raise ConfigError("--records, --keys, --rate and --workers must be ≥ 1")
        counts = (self.initial_partitions, *self.steps)
        if any(b <= a for a, b in zip(counts, counts[1:], strict=False)):
            raise ConfigError(f"--steps must grow: {' → '.join(map(str, counts))}")
        if self.system == "kafka" and not self.bootstrap:
            raise ConfigError("--system kafka needs --bootstrap HOST:PORT of a broker that "
                              "supports CreatePartitions")
        if self.system not in ("local", "kafka"):
            raise ConfigError(f"--system {self.system!r}: expected local or kafka")
        if not (EXAMPLES / self.example).is_dir():
            raise ConfigError(f"--example {self.example!r}: no folder {EXAMPLES / self.example}"
                              f"; run sampan from its source checkout (pip install -e .)")


def write_wordcount_job(options: DrillOptions, folder: Path) -> Path:
    """Write the drill's word-count job file (and task module) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    task_source = (EXAMPLES / "wordcount" / "wordcount_task.py").read_text()
    (folder / "wordcount_task.py").write_text(task_source)
    if options.system == "kafka":
        system = f'type = "kafka"\nbootstrap = "{options.bootstrap}"'
    else:
        system = 'type = "local"\npath = "data"'
    expansion = "regroup" if options.naive else "fixed-tasks"
    s = options.system
    (folder / "job.toml").write_text(f"""\
[job]
name = "wordcount"
task = "wordcount_task:WordCountTask"
inputs = ["{s}.words"]
workers = {options.workers}
commit_interval_ms = {options.commit_interval_ms}
expansion = "{expansion}"

[coordinator]
monitor_interval_ms = {options.monitor_interval_ms}

[systems.{s}]
{system}

[streams."{s}.words"]
key_serde = "string"
value_serde = "json"
partitions = {options.initial_partitions}

[streams."{s}.word-counts"]
key_serde = "string"
value_serde = "json"
partitions = 2

[stores.counts]
key_serde = "string"
value_serde = "json"
""")
    return folder / "job.toml"
