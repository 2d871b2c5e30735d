"""Every metric sampan exports: name, type, labels and meaning (one table, one place).

Names follow Prometheus conventions (``_total`` counters, ``_seconds`` durations).
Every family carries ``job`` (the job's name); worker families also ``worker``.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["COMMIT_RECORD_BUCKETS", "FAMILIES", "LATENCY_BUCKETS", "PAUSE_BUCKETS", "Family"]


class Family(NamedTuple):
    """One metric family: its name (without ``_total``), type, labels and help text."""

    name: str
    kind: str  # counter | gauge | histogram
    labels: tuple[str, ...]
    help: str


LATENCY_BUCKETS = (1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 0.01,
                   0.05, 0.1, 0.5, 1.0, 5.0)
"""Seconds per record of `process`: a record takes microseconds to milliseconds."""

COMMIT_RECORD_BUCKETS = (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
"""Records written by one commit (outputs + changelog + dead letters)."""

PAUSE_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600)
"""Seconds an expansion stopped processing."""

_W = ("job", "worker")

FAMILIES: tuple[Family, ...] = (
    # worker: processing
    Family("sampan_records_processed", "counter", (*_W, "task"),
           "Records the task's process() handled."),
    Family("sampan_process_latency_seconds", "histogram", (*_W, "task"),
           "Seconds per record in process(), measured per fetched batch."),
    Family("sampan_task_records_per_second", "gauge", (*_W, "task"),
           "Records per second the task processed over the worker's last 10 seconds: a "
           "precomputed gauge (for sampan status); graph rate(sampan_records_processed_total) "
           "instead."),
    Family("sampan_input_lag_records", "gauge", (*_W, "task", "stream", "partition"),
           "Records of the input partition the task has not processed yet (end - position)."),
    Family("sampan_records_skipped", "counter", (*_W, "task"),
           "Records moved past under errors.policy / process_policy skip or dead-letter."),
    Family("sampan_records_dead_lettered", "counter", (*_W, "task"),
           "Records written to the dead-letter stream."),
    Family("sampan_outputs_produced", "counter", (*_W, "task"),
           "Output records the task sent, counted when committed."),
    Family("sampan_changelog_records_written", "counter", (*_W, "task", "store"),
           "Changelog records the store's commits wrote."),
    Family("sampan_barrier_held_ssps", "gauge", (*_W, "task"),
           "Input partitions held behind an expansion barrier."),
    Family("sampan_expansion_merge_waiting_records", "gauge", (*_W, "task"),
           "Records of new partitions waiting for the old ones after an expansion "
           "(job.expansion_merge_ms)."),
    # worker: commits
    Family("sampan_commits", "counter", _W, "Commits of the worker's tasks."),
    Family("sampan_commit_duration_seconds", "histogram", _W, "Seconds one commit took."),
    Family("sampan_commit_records", "histogram", _W,
           "Records one commit wrote (outputs, changelog records, dead letters)."),
    # worker: restore
    Family("sampan_store_restore_records_restored", "gauge", (*_W, "task", "store"),
           "Changelog records applied by the store's current or last restore."),
    Family("sampan_store_restore_records_to_restore", "gauge", (*_W, "task", "store"),
           "Changelog records the store's current or last restore has to apply."),
    Family("sampan_store_restore_mode", "gauge", (*_W, "task", "store", "mode"),
           "1 for the mode of the store's last restore: none, delta or full."),
    Family("sampan_changelog_records_restored", "counter", _W,
           "Changelog records restored by this worker process, over all stores."),
    # both
    Family("sampan_worker_state", "gauge", (*_W, "state"),
           "1 for the worker's lifecycle state now, 0 for every other state (STARTING, "
           "RESTORING, RUNNING, CHANGING, STOPPING, STOPPED, FENCED, FAILED)."),
    Family("sampan_job_model_epoch", "gauge", ("job", "process"),
           "Epoch of the job model the process runs."),
    # coordinator
    Family("sampan_worker_restarts", "counter", ("job",), "Worker processes restarted."),
    Family("sampan_worker_fencings", "counter", ("job",),
           "Workers that exited because a newer job model fenced them."),
    Family("sampan_workers_running", "gauge", ("job",), "Worker processes running."),
    Family("sampan_expansions", "counter", ("job",),
           "Input expansions this coordinator detected and applied."),
    Family("sampan_expansion_pause_seconds", "histogram", ("job",),
           "Seconds from detecting an expansion until every worker resumed processing on "
           "the new epoch (the pause sampan status shows); observed once they all resumed."),
    Family("sampan_expansion_refused", "gauge", ("job",),
           "1 while a partition change is refused (the job runs on its model)."),
    Family("sampan_coordinator_phase", "gauge", ("job", "phase"),
           "1 for the coordinator's lifecycle phase now, 0 for every other phase (CREATED, "
           "STARTING, RUNNING, CHANGING_MODEL, STOPPING, STOPPED, FAILED)."),
    # host (several hosts)
    Family("sampan_host_phase", "gauge", ("job", "host", "phase"),
           "1 for the host's lifecycle phase now, 0 for every other phase (CREATED, "
           "STARTING, REBALANCING, BUILDING_MODEL, AWAITING_MODEL, RUNNING, CHANGING_MODEL, "
           "STOPPING, STOPPED, FAILED)."),
)
