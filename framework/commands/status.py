"""`sampan status JOB.toml [--json | --watch]`: epoch, tasks → SSPs → workers, offsets, lag
per stream, processing rates, restores with their ETA, expansions with their pause."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from framework.commands.status_live import endpoints, expansions, restoring, scrape_rates
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
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print one JSON document")
    shown.add_argument("--watch", action="store_true",
                       help="refresh a live table in place until Ctrl-C")
    parser.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="--watch: seconds between refreshes (default %(default)s)")
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
            by_stream: dict[str, int] = {}
            for ssp in sorted(task.ssps | task.broadcast):
                end = ends.get(tuple(ssp), 0)  # type: ignore[arg-type]
                position = done.get(ssp)
                ahead = position is not None and position > end  # the input was recreated
                lag = 0 if ahead else end - (position or 0)
                total_lag += lag
                qualified = f"{ssp.system}.{ssp.stream}"
                by_stream[qualified] = by_stream.get(qualified, 0) + lag
                ssps.append({"ssp": [ssp.system, ssp.stream, ssp.partition],
                             "position": position, "end": end, "lag": lag,
                             "held": ssp in held, "past_end": ahead})
            tasks.append({"task": task.name, "worker": task.worker,
                          "barrier_stages": len(task.stages),
                          "barrier_stages_passed": len(task.stages) - pending_stages(task, done),
                          "changelog_partition": task.changelog_partition, "ssps": ssps,
                          "lag_by_stream": by_stream})
        metrics = endpoints(state, config.metrics.bind)
        rates = await scrape_rates(list(metrics["workers"].values()))
        for row in tasks:
            row["rate"] = rates.get(row["task"])
        return {
            "job": config.name, "epoch": state.model.epoch, "reason": state.model.reason,
            "partition_counts": dict(state.model.partition_counts),
            "workers": state.model.workers,
            **{name: coordinator[name] for name in (
                "state", "refusal", "error", "worker_logs", "config_change",
                "stuck", "restarts")},
            "expansions": expansions(state, state.model.workers),
            "restoring": restoring(state), "metrics": metrics,
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
    if args.watch:
        from framework.commands.status_view import watch

        return watch(lambda: asyncio.run(collect_status(config)), args.interval)
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
    for task in status["tasks"]:
        rate = "-" if task["rate"] is None else f"{task['rate']:,.1f}"
        lags = ", ".join(f"{s} {n}" for s, n in sorted(task["lag_by_stream"].items()))
        print(f"  {task['task']}: {rate} records/s, lag {lags}")
    for row in status["restoring"]:
        eta = "unknown" if row["eta_s"] is None else f"{row['eta_s']:,.0f} s"
        print(f"  RESTORING store {row['store']!r} of task {row['task']!r} on worker "
              f"{row['worker']}: {row['restored']:,}/{row['to_restore']:,} records at "
              f"{row['rate']:,.0f}/s, ETA {eta}")
    for expansion in status["expansions"][-3:]:
        resume = (f", resumed {_clock(expansion['resumed_ms'])}"
                  if expansion["resumed_ms"] is not None else "")
        pause = "" if expansion["pause_ms"] is None else f", pause {expansion['pause_ms']} ms"
        print(f"  expansion {expansion['change']} → epoch {expansion['epoch']}: detected "
              f"{_clock(expansion['detected_ms'])}, workers stopped "
              f"{_clock(expansion['workers_stopped_ms'])}, restarted "
              f"{_clock(expansion['workers_started_ms'])}{resume}{pause}")
    metrics = status["metrics"]
    if metrics["coordinator"] or metrics["workers"]:
        print(f"  metrics: coordinator {metrics['coordinator'] or '-'}" + "".join(
            f", worker {w} {url}" for w, url in metrics["workers"].items()))
    return 0
