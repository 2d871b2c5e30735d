"""Drill options and the job file a drill runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.drill.scenario import example_dir
from framework.errors import ConfigError

PIPELINE_JOB_FILE = "job_pipeline.toml"
"""The job file of an example's pipeline form (`sampan drill --form pipeline`)."""


@dataclass(frozen=True)
class DrillOptions:
    """What a drill runs; defaults give a ~10 s drill with expansions 2 → 4 → 8."""

    example: str = "wordcount"
    """An installed example (entry point group ``sampan.examples``)."""
    example_dir: Path | None = None
    """A folder of your own (``drill.py`` + job file) to drill instead of `example`."""
    job_file: str = "job.toml"
    """Which job file of the example folder to run (e.g. enrichment's job_broadcast.toml)."""
    form: str = "task"
    """``task``: the example's hand-written task (``job.toml``); ``pipeline``: its
    pipeline form (``job_pipeline.toml``, unless `job_file` names another)."""
    records: int = 30_000
    keys: int = 1_000
    rate: int = 3_000
    """Records produced per second."""
    initial_partitions: int | None = None
    """Partitions of the expanded input at the start (default: the example's, e.g. 2)."""
    steps: tuple[int, ...] | None = None
    """Partition counts the input expands to, in order, spread evenly over the run
    (default: the example's, e.g. 4 then 8)."""
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
    guarantee: str | None = None
    """``job.guarantee`` of the drilled job (None: the example's, or the system's default:
    exactly-once on the local log, at-least-once on Kafka)."""
    verify: str = "exact"
    """``exact``: the example's own checker; ``spark``: also recompute the result in Spark
    from the streams (`framework.spark.verify`) — an independent oracle."""
    spark: Any = None
    """A SparkSession to verify with (default: a local one is started)."""
    extra: dict[str, str] = field(default_factory=dict)
    input_retention_bytes: int | None = None
    """Retention of the expanded input on the local log (bytes per partition, applied by
    the coordinator every 500 ms): the drill then runs with its oldest offsets moving."""
    keep: bool = False
    """Kafka: keep the drill's topics on the broker (default: deleted when it ends)."""
    client_options: dict[str, Any] = field(default_factory=dict)
    """Kafka: the cluster's connection settings (TLS, SASL: `--client-options FILE`)."""

    def __post_init__(self) -> None:
        if self.example_dir is not None:  # reports name the example by its folder
            object.__setattr__(self, "example", Path(self.example_dir).name)
        if self.form == "pipeline" and self.job_file == "job.toml":
            object.__setattr__(self, "job_file", PIPELINE_JOB_FILE)

    def validate(self) -> None:
        if self.records < 1 or self.keys < 1 or self.rate < 1 or self.workers < 1:
            raise ConfigError("--records, --keys, --rate and --workers must be ≥ 1")
        if self.system == "kafka" and not self.bootstrap:
            raise ConfigError("--system kafka needs --bootstrap HOST:PORT of a broker that "
                              "supports CreatePartitions")
        if self.client_options and self.system != "kafka":
            raise ConfigError("--client-options is for --system kafka (the local log has no "
                              "connection settings)")
        if self.verify not in ("exact", "spark"):
            raise ConfigError(f"--verify {self.verify!r}: expected exact or spark")
        if self.input_retention_bytes is not None and (
                self.system != "local" or self.verify != "exact"
                or self.input_retention_bytes < 1):
            raise ConfigError("--input-retention-bytes N needs N ≥ 1, --system local and "
                              "--verify exact (Spark verification recomputes from the "
                              "inputs, which retention deletes)")
        if self.form not in ("task", "pipeline"):
            raise ConfigError(f"--form {self.form!r}: expected task, pipeline or both")
        if self.system not in ("local", "kafka"):
            raise ConfigError(f"--system {self.system!r}: expected local or kafka")
        example_dir(self.example, self.job_file, self.example_dir)
