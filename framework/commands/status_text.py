"""`sampan status` as text: the job line, its health and problems, then tasks, positions,
rates, restores, expansions and endpoints (`--watch` into a pipe prints the same)."""

from __future__ import annotations

import time
from typing import Any, TextIO

from framework.commands.status_health import crash_lines
from framework.hosts.status import print_hosts
from framework.wording import counted

__all__ = ["print_status"]


def _clock(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + (
        f".{ms % 1000:03d}")


def _health(status: dict[str, Any], out: TextIO) -> None:
    print(f"  health: {status['health']} (exit status {status['exit_status']})", file=out)
    for problem in status["problems"]:
        print(f"    {problem}", file=out)


def print_status(status: dict[str, Any], out: TextIO) -> None:
    """Write ``status`` (`collect_status`'s document, or a partial one) for people."""
    if "epoch" not in status:
        _print_partial(status, out)
        return
    state = status["state"]
    print(f"job {status['job']}: epoch {status['epoch']} ({status['reason']}), "
          f"{counted(status['workers'], 'worker')}, coordinator {state}, "
          f"total lag {status['total_lag']}", file=out)
    _health(status, out)
    for stream, count in sorted(status["partition_counts"].items()):
        print(f"  input {stream}: {counted(count, 'partition')}", file=out)
    if status["error"]:
        print(f"  FAILED: {status['error']}", file=out)
    if state == "died":
        print(f"  NOT RUNNING: {status['not_running']}; start it again with `sampan run`",
              file=out)
    for problem, line in crash_lines(status, int(time.time() * 1000)):
        if not problem:
            print(f"  {line}", file=out)
    if status["stuck"]:
        stuck = status["stuck"]
        print(f"  STUCK at {_clock(stuck['at_ms'])}: worker {stuck['worker']}: "
              f"{stuck['detail'] or 'a task call made no progress'}; the worker was restarted",
              file=out)
    if status["config_change"]:
        print(f"  JOB FILE EDITED while running ({status['config_change']['change']}): the "
              f"job runs the configuration it started with; restart `sampan run` to apply it",
              file=out)
    if status["idle_message"]:
        print(f"  IDLE WORKERS: {status['idle_message']}", file=out)
    if status["worker_logs"]:
        print(f"  worker logs: {status['worker_logs']}/worker-N.log", file=out)
    if status["refusal"]:
        print(f"  REFUSED {status['refusal']['change']}: {status['refusal']['error']}",
              file=out)
    for reset in status.get("retention_resets", ()):
        print(f"  RESET BY RETENTION at {_clock(reset['reset_ms'])}: {reset['message']}",
              file=out)
    _print_tasks(status, out)
    print_hosts(status, out)
    _print_progress(status, out)


def _print_tasks(status: dict[str, Any], out: TextIO) -> None:
    for task in status["tasks"]:
        stages = task["barrier_stages"]
        barrier = "" if not stages else (
            ", expansion barrier passed" if task["barrier_stages_passed"] == stages
            else f", {stages - task['barrier_stages_passed']} expansion barrier(s) pending")
        print(f"  {task['task']} on worker {task['worker']} "
              f"(changelog partition {task['changelog_partition']}{barrier})", file=out)
        for row in task["ssps"]:
            system, stream, partition = row["ssp"]
            held = " [held behind expansion barrier]" if row["held"] else ""
            if row["past_end"]:
                held += (" [CHECKPOINT PAST THE END: the stream was recreated or truncated; "
                         "see `sampan streams reset-offsets`]")
            position = "- (nothing committed yet)" if row["position"] is None else row[
                "position"]
            print(f"    {system}.{stream}[{partition}] position {position} "
                  f"end {row['end']} lag {row['lag']}{held}", file=out)


def _print_progress(status: dict[str, Any], out: TextIO) -> None:
    for task in status["tasks"]:
        rate = "-" if task["rate"] is None else f"{task['rate']:,.1f}"
        lags = ", ".join(f"{s} {n}" for s, n in sorted(task["lag_by_stream"].items()))
        print(f"  {task['task']}: {rate} records/s, lag {lags}", file=out)
    for row in status["restoring"]:
        eta = "unknown" if row["eta_s"] is None else f"{row['eta_s']:,.0f} s"
        print(f"  RESTORING store {row['store']!r} of task {row['task']!r} on worker "
              f"{row['worker']}: {row['restored']:,}/{row['to_restore']:,} records at "
              f"{row['rate']:,.0f}/s, ETA {eta}", file=out)
    for expansion in status["expansions"][-3:]:
        resume = (f", resumed {_clock(expansion['resumed_ms'])}"
                  if expansion["resumed_ms"] is not None else "")
        pause = (f", pause {expansion['pause_ms']} ms" if expansion["pause_ms"] is not None
                 else f", {expansion['pause_note']}")
        print(f"  expansion {expansion['change']} → epoch {expansion['epoch']}: detected "
              f"{_clock(expansion['detected_ms'])}, workers stopped "
              f"{_clock(expansion['workers_stopped_ms'])}, restarted "
              f"{_clock(expansion['workers_started_ms'])}{resume}{pause}", file=out)
    metrics = status["metrics"]
    if metrics["coordinator"] or metrics["workers"]:
        print(f"  metrics: coordinator {metrics['coordinator'] or '-'}" + "".join(
            f", worker {w} {url}" for w, url in metrics["workers"].items())
            + f" (Prometheus file_sd: {metrics['file_sd']})", file=out)


def _print_partial(status: dict[str, Any], out: TextIO) -> None:
    """A job never started, or one whose metadata system this command cannot reach."""
    if status["state"] == "not started":
        print(status["not_running"], file=out)
        return
    if status["state"] == "failed":
        print(f"job {status['job']}: coordinator failed on this machine (pid "
              f"{status['coordinator_pid']}, started {_clock(status['started_ms'])}); its "
              f"metadata system does not answer", file=out)
        _health(status, out)
        return
    print(f"job {status['job']}: coordinator running on this machine (pid "
          f"{status['coordinator_pid']}, since {_clock(status['started_ms'])}); its status "
          f"cannot be read: its metadata system does not answer", file=out)
    _health(status, out)
