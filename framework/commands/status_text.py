"""`sampan status` as text: the job line, its health and problems, then tasks, positions,
rates, restores, expansions and endpoints (`--watch` into a pipe prints the same)."""

from __future__ import annotations

import time
from typing import TextIO

from framework.commands.status_document import JobFigures, JobStatus
from framework.commands.status_health import crash_lines
from framework.commands.status_hosts import print_hosts
from framework.wording import counted

__all__ = ["print_status"]


def _clock(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + (
        f".{ms % 1000:03d}")


def _health(status: JobStatus, out: TextIO) -> None:
    print(f"  health: {status.health.health} (exit status {status.exit_status})", file=out)
    for problem in status.health.problems:
        print(f"    {problem}", file=out)


def print_status(status: JobStatus, out: TextIO) -> None:
    """Write ``status`` (`collect_status`'s, or a partial one) for people."""
    figures, report = status.figures, status.report
    if figures is None or report is None:
        _print_partial(status, out)
        return
    state = status.state
    print(f"job {status.job}: epoch {figures.epoch} ({figures.reason}), "
          f"{counted(figures.workers, 'worker')}, coordinator {state}, "
          f"total lag {figures.total_lag}", file=out)
    _health(status, out)
    if report.phase and state == "running":  # once ended, its state says it all
        print(f"  coordinator phase: {report.phase}", file=out)
    for stream, count in sorted(figures.partition_counts.items()):
        print(f"  input {stream}: {_input_counts(figures, stream, count)}", file=out)
    if status.error:
        print(f"  FAILED: {status.error}", file=out)
    if state == "died":
        print(f"  NOT RUNNING: {status.not_running}; start it again with `sampan run`",
              file=out)
    for problem, line in crash_lines(report, int(time.time() * 1000)):
        if not problem:
            print(f"  {line}", file=out)
    if stuck := report.stuck:
        print(f"  STUCK at {_clock(stuck.at_ms)}: worker {stuck.worker}: "
              f"{stuck.detail or 'a task call made no progress'}; the worker was restarted",
              file=out)
    if report.config_change:
        print(f"  JOB FILE EDITED while running ({report.config_change.change}): the "
              f"job runs the configuration it started with; restart `sampan run` to apply it",
              file=out)
    if figures.idle_message:
        print(f"  IDLE WORKERS: {figures.idle_message}", file=out)
    if report.worker_logs:
        print(f"  worker logs: {report.worker_logs}/worker-N.log", file=out)
    if report.refusal:
        print(f"  REFUSED {report.refusal.change}: {report.refusal.error}", file=out)
    for reset in figures.retention_resets:
        print(f"  RESET BY RETENTION at {_clock(reset.reset_ms)}: {reset.message}", file=out)
    if states := _worker_states(figures):
        print(f"  worker states: {states}", file=out)
    _print_tasks(figures, out)
    print_hosts(figures, out)
    _print_progress(figures, out)


def _worker_states(figures: JobFigures) -> str:
    """Each worker's lifecycle state as its last report says (`WorkerState` names; a
    report is written at resume, after an in-place change and at stop)."""
    return ", ".join(f"worker {worker} {report.state}"
                     for worker, report in sorted(figures.worker_reports.items(),
                                                  key=lambda item: int(item[0]))
                     if report.state)


def _input_counts(figures: JobFigures, stream: str, count: int) -> str:
    """The partitions the job reads of ``stream``, and the stream's own count when they
    differ: a held input, or a growth not applied yet."""
    now = figures.stream_partition_counts.get(stream)
    reads = counted(count, "partition")
    if now is None:
        return f"{reads} (the stream does not exist now)"
    if stream in figures.held_inputs:
        held = f"(held: read only up to where it had {count})"
        if now > count:
            return f"reads {count} of its {counted(now, 'partition')} {held}"
        return f"{reads}, the stream has {now} now {held}"
    if now != count:
        return f"{reads} (the stream has {now} now: the job follows once its coordinator sees it)"
    return reads


def _print_tasks(figures: JobFigures, out: TextIO) -> None:
    for task in figures.tasks:
        stages = task.barrier_stages
        barrier = "" if not stages else (
            ", expansion barrier passed" if task.barrier_stages_passed == stages
            else f", {counted(stages - task.barrier_stages_passed, 'expansion barrier')} "
            "pending")
        print(f"  {task.task} on worker {task.worker} "
              f"(changelog partition {task.changelog_partition}{barrier})", file=out)
        for row in task.ssps:
            system, stream, partition = row.ssp
            held = " [held behind expansion barrier]" if row.held else ""
            if row.past_end:
                held += (" [CHECKPOINT PAST THE END: the stream was recreated or truncated; "
                         "see `sampan streams reset-offsets`]")
            position = "- (nothing committed yet)" if row.position is None else row.position
            print(f"    {system}.{stream}[{partition}] position {position} "
                  f"end {row.end} lag {row.lag}{held}", file=out)


def _print_progress(figures: JobFigures, out: TextIO) -> None:
    for task in figures.tasks:
        rate = "-" if task.rate is None else f"{task.rate:,.1f}"
        lags = ", ".join(f"{s} {n}" for s, n in sorted(task.lag_by_stream.items()))
        print(f"  {task.task}: {rate} records/s, lag {lags}", file=out)
    for row in figures.restoring:
        restore = row.progress
        eta = "unknown" if restore.eta_s is None else f"{restore.eta_s:,.0f} s"
        print(f"  RESTORING store {restore.store!r} of task {restore.task!r} on worker "
              f"{row.worker}: {restore.restored:,}/{restore.to_restore:,} records at "
              f"{restore.rate:,.0f}/s, ETA {eta}", file=out)
    for expansion in figures.expansions[-3:]:
        record = expansion.record
        resume = (f", resumed {_clock(record.resumed_ms)}"
                  if record.resumed_ms is not None else "")
        pause = (f", pause {record.pause_ms} ms" if record.pause_ms is not None
                 else f", {expansion.pause_note}")
        steps = (f"published {_clock(record.model_published_ms)}, taken in place by the "
                 "workers (none restarted)" if record.in_place else
                 f"workers stopped {_clock(record.workers_stopped_ms)}, restarted "
                 f"{_clock(record.workers_started_ms)}")
        print(f"  expansion {record.change} → epoch {record.epoch}: detected "
              f"{_clock(record.detected_ms)}, {steps}{resume}{pause}", file=out)
    metrics = figures.metrics
    if metrics.coordinator or metrics.workers or metrics.hosts:
        print(f"  metrics: coordinator {metrics.coordinator or '-'}" + "".join(
            f", worker {w} {url}" for w, url in metrics.workers.items()) + "".join(
            f", host {h} {url}" for h, url in metrics.hosts.items())
            + f" (Prometheus file_sd: {metrics.file_sd})", file=out)
    if figures.queries:
        print("  queries: " + ", ".join(f"worker {w} {url}"
                                        for w, url in figures.queries.items()), file=out)


def _print_partial(status: JobStatus, out: TextIO) -> None:
    """A job never started, or one whose metadata system this command cannot reach."""
    run = status.local_run
    if status.state == "not started" or run is None:
        print(status.not_running, file=out)
        return
    if status.state == "failed":
        print(f"job {status.job}: coordinator failed on this machine (pid "
              f"{run.coordinator_pid}, started {_clock(run.started_ms)}); its "
              f"metadata system does not answer", file=out)
        _health(status, out)
        return
    print(f"job {status.job}: coordinator running on this machine (pid "
          f"{run.coordinator_pid}, since {_clock(run.started_ms)}); its status "
          f"cannot be read: its metadata system does not answer", file=out)
    _health(status, out)
