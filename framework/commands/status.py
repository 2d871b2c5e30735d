"""`sampan status JOB.toml [--json]`: epoch, tasks → SSPs → workers, offsets, lag, timeline."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from framework.config import JobConfig, load_config
from framework.coordinator.expansion import held_behind_barrier, pending_stages
from framework.errors import JobModelError
from framework.hosts.status import hosts_status, print_hosts
from framework.metadata import read_state
from framework.systems import open_system

__all__ = ["add_status_command", "collect_status"]


def add_status_command(commands: Any) -> None:
    parser = commands.add_parser(
        "status", help="show a job's epoch, tasks, workers, offsets, lag and expansions",
        description="Read the job's coordinator stream and checkpoints and report them.")
    parser.add_argument("job", help="the job file (TOML)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=_command)


async def collect_status(config: JobConfig) -> dict[str, Any]:
    """The job's status as plain data (what `--json` prints)."""
    meta = open_system(config.system(config.metadata_system))
    await meta.start()
    try:
        state = await read_state(meta, config)
        if state.model is None:
            raise JobModelError(f"job {config.name!r} has not been started: no job model in "
                                f"{config.coordinator_stream}; run `sampan run {config.path}`")
        checkpoints = await meta.read_checkpoints(config.name)
        ends: dict[tuple[str, str, int], int] = {}
        for qualified in (*config.inputs, *config.broadcast_inputs):
            stream = config.stream(qualified)
            system = meta if stream.system == meta.name else open_system(
                config.system(stream.system))
            if system is not meta:
                await system.start()
            try:
                for partition, offsets in (await system.offsets(stream.stream)).items():
                    ends[(stream.system, stream.stream, partition)] = offsets.end
            finally:
                if system is not meta:
                    await system.close()
        coordinator = state.status.to_dict()
        tasks = []
        total_lag = 0
        for task in state.model.ordered_tasks():
            checkpoint = checkpoints.get(task.name)
            done = checkpoint.inputs if checkpoint else {}
            held = held_behind_barrier(task, done)
            ssps = []
            for ssp in sorted(task.ssps | task.broadcast):
                end = ends.get(tuple(ssp), 0)  # type: ignore[arg-type]
                position = done.get(ssp)
                ahead = position is not None and position > end  # the input was recreated
                lag = 0 if ahead else end - (position or 0)
                total_lag += lag
                ssps.append({"ssp": [ssp.system, ssp.stream, ssp.partition],
                             "position": position, "end": end, "lag": lag,
                             "held": ssp in held, "past_end": ahead})
            tasks.append({"task": task.name, "worker": task.worker,
                          "barrier_stages": len(task.stages),
                          "barrier_stages_passed": len(task.stages) - pending_stages(task, done),
                          "changelog_partition": task.changelog_partition, "ssps": ssps})
        return {
            "job": config.name, "epoch": state.model.epoch, "reason": state.model.reason,
            "partition_counts": dict(state.model.partition_counts),
            "workers": state.model.workers,
            **{name: coordinator[name] for name in (
                "state", "refusal", "error", "expansions", "worker_logs", "config_change",
                "stuck", "restarts")},
            "worker_reports": {str(k): v.to_dict() for k, v in sorted(state.workers.items())},
            "total_lag": total_lag, "tasks": tasks, **hosts_status(state, tasks),
        }
    finally:
        await meta.close()


def _clock(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + (
        f".{ms % 1000:03d}")


def _command(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    status = asyncio.run(collect_status(config))
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
        return 0
    print(f"job {status['job']}: epoch {status['epoch']} ({status['reason']}), "
          f"{status['workers']} workers, coordinator {status['state'] or 'unknown'}, "
          f"total lag {status['total_lag']}")
    for stream, count in sorted(status["partition_counts"].items()):
        print(f"  input {stream}: {count} partitions")
    if status["error"]:
        print(f"  FAILED: {status['error']}")
    if status["stuck"]:
        stuck = status["stuck"]
        print(f"  STUCK at {_clock(stuck['at_ms'])}: worker {stuck['worker']}: "
              f"{stuck['detail'] or 'a task call made no progress'}; the worker was restarted")
    if status["config_change"]:
        print(f"  JOB FILE EDITED while running ({status['config_change']['change']}): the "
              f"job runs the configuration it started with; restart `sampan run` to apply it")
    if status["worker_logs"]:
        print(f"  worker logs: {status['worker_logs']}/worker-N.log")
    if status["refusal"]:
        print(f"  REFUSED {status['refusal']['change']}: {status['refusal']['error']}")
    for task in status["tasks"]:
        stages = task["barrier_stages"]
        barrier = "" if not stages else (
            ", expansion barrier passed" if task["barrier_stages_passed"] == stages
            else f", {stages - task['barrier_stages_passed']} expansion barrier(s) pending")
        print(f"  {task['task']} on worker {task['worker']} "
              f"(changelog partition {task['changelog_partition']}{barrier})")
        for row in task["ssps"]:
            system, stream, partition = row["ssp"]
            held = " [held behind expansion barrier]" if row["held"] else ""
            if row["past_end"]:
                held += (" [CHECKPOINT PAST THE END: the stream was recreated or truncated; "
                         "see `sampan streams reset-offsets`]")
            position = "- (nothing committed yet)" if row["position"] is None else row[
                "position"]
            print(f"    {system}.{stream}[{partition}] position {position} "
                  f"end {row['end']} lag {row['lag']}{held}")
    print_hosts(status)
    reports = status["worker_reports"].values()
    for expansion in status["expansions"][-3:]:
        resumed = [r["resumed_ms"] for r in reports
                   if r["epoch"] == expansion["epoch"] and r["resumed_ms"] is not None]
        resume = (f", resumed {_clock(max(resumed))} "
                  f"({max(resumed) - expansion['detected_ms']} ms after detection)"
                  if len(resumed) == status["workers"] else "")
        print(f"  expansion {expansion['change']} → epoch {expansion['epoch']}: detected "
              f"{_clock(expansion['detected_ms'])}, workers stopped "
              f"{_clock(expansion['workers_stopped_ms'])}, restarted "
              f"{_clock(expansion['workers_started_ms'])}{resume}")
    return 0
