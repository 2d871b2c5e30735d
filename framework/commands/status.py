"""`sampan status JOB.toml [--json | --watch]`: epoch, tasks → SSPs → workers, offsets, lag
per stream, processing rates, restores with their ETA, expansions with their pause — and
whether the job is healthy, in words and in the exit status (`status_health`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import time
from typing import Any

from framework.commands.jobarg import add_job_argument
from framework.commands.status_document import (
    Endpoints,
    JobFigures,
    JobStatus,
    LocalRun,
    ResetRow,
    SspRow,
    TaskRow,
)
from framework.commands.status_health import assess
from framework.commands.status_hosts import hosts_state, hosts_status
from framework.commands.status_live import endpoints, expansions, restoring, scrape_rates
from framework.commands.status_text import print_status
from framework.config import JobConfig, load_config
from framework.coordinator.lease import pid_alive
from framework.coordinator.liveness import check_coordinator
from framework.coordinator.runfile import RunRecord, read_run_file, run_file
from framework.errors import DamagedLogError, JobModelError, SystemUnavailableError
from framework.metadata import CoordinatorState, Unreachable, read_state
from framework.metrics.targets import targets_dir
from framework.systems import open_system
from framework.systems.base import System
from framework.systems.local.schema import database_file
from framework.systems.local.system import LocalSystem

__all__ = ["JobNotStartedError", "add_status_command", "collect_status"]


class JobNotStartedError(JobModelError):
    """The job has no job model yet: it was never started."""


def add_status_command(commands: Any) -> None:
    parser = commands.add_parser(
        "status", help="show a job's health, epoch, tasks, workers, offsets, lag and expansions",
        description="Read the job's coordinator stream and checkpoints and report them. Exit "
        "status: 0 running and healthy, 1 degraded (a worker down or crash-looping, a refused "
        "partition change, a system unreachable), 2 the status could not be read, 3 not "
        "running (never started, stopped, or its coordinator is gone), 4 failed; the same "
        "with --json.")
    add_job_argument(parser)
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print one JSON document")
    shown.add_argument("--watch", action="store_true",
                       help="refresh the status until Ctrl-C: a live table in a terminal, "
                       "one text frame per refresh into a pipe or file")
    parser.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="--watch: seconds between refreshes (default %(default)s)")
    parser.set_defaults(handler=_command)


async def collect_status(config: JobConfig) -> JobStatus:
    """The job's status (`JobStatus.to_json` is what `--json` prints), health included.
    It only reads: a local log that does not exist is not created (the job never ran)."""
    if _never_created(config, config.metadata_system):
        raise JobNotStartedError(_not_started(config))
    meta = open_system(config.system(config.metadata_system))
    await meta.start()
    try:
        state = await read_state(meta, config)
        if state.model is None:
            raise JobNotStartedError(_not_started(config))
        status = await _coordinator_state(meta, config, state)
        status.figures = await _job_figures(meta, config, state,
                                            running=status.state == "running")
    finally:
        await meta.close()
    status.report = state.status
    status.unreachable = _outages(config, state, state.status.unreachable)
    return _with_health(status)


def _not_started(config: JobConfig) -> str:
    return (f"job {config.name!r} has not been started: no job model in "
            f"{config.coordinator_stream}; run `sampan run {config.path}`")


def _never_created(config: JobConfig, system_name: str) -> bool:
    """Whether ``system_name`` is a local log whose file does not exist: opening it
    would create it (and its folder), which a status must not."""
    settings = config.system(system_name)
    return settings.type == "local" and settings.path is not None and not database_file(
        settings.path).exists()


async def _coordinator_state(meta: System, config: JobConfig, state: CoordinatorState
                             ) -> JobStatus:
    """``state`` as it truly is: a ``running`` report whose coordinator is gone (its
    process or lease dead) is ``died``; a job on several hosts is judged by its hosts."""
    assert state.model is not None
    recorded = state.status.state
    truth = JobStatus(config.name, recorded or "unknown", recorded, None,
                      error=state.status.error)
    if state.model.hosts and recorded is None:
        truth.state, truth.not_running = hosts_state(state)
    elif recorded == "running":
        liveness = await check_coordinator(meta, config.name, state.status)
        truth.state = "running" if liveness.alive else "died"
        truth.not_running = liveness.detail
        ended = read_run_file(run_file(config.state_dir))
        if not liveness.alive and ended is not None and ended.state == "failed" and (
                ended.pid, ended.host) == (state.status.coordinator_pid,
                                           state.status.coordinator_host):
            # it failed while the metadata system could not take its last report
            truth.state, truth.error, truth.not_running = "failed", ended.error, None
    elif recorded == "stopped":
        truth.not_running = f"the job was stopped at {_clock(state.status.updated_ms)}"
    return truth


async def _job_figures(meta: System, config: JobConfig, state: CoordinatorState, *,
                       running: bool) -> JobFigures:
    """Epoch, positions, lag, rates, restores, expansions: what the job is doing
    (``running``: its coordinator is alive, so its metrics endpoint answers)."""
    assert state.model is not None
    checkpoints = await meta.read_checkpoints(config.name)
    ends: dict[tuple[str, str, int], int] = {}
    oldest: dict[tuple[str, str, int], int] = {}
    counts: dict[str, int] = {}
    resets: list[ResetRow] = []
    for qualified in (*config.inputs, *config.broadcast_inputs):
        stream = config.stream(qualified)
        if stream.system != meta.name and _never_created(config, stream.system):
            continue
        system = meta if stream.system == meta.name else open_system(
            config.system(stream.system))
        if system is not meta:
            await system.start()
        try:
            if stream.stream not in await system.list_streams():
                continue  # deleted: its partitions end at 0 (`CHECKPOINT PAST THE END`)
            spans = await system.offsets(stream.stream)
            counts[qualified] = len(spans)
            for partition, offsets in spans.items():
                ends[(stream.system, stream.stream, partition)] = offsets.end
                oldest[(stream.system, stream.stream, partition)] = offsets.oldest
            if isinstance(system, LocalSystem):
                resets += [ResetRow(qualified, r.partition, r.task, r.from_offset,
                                    r.to_offset, r.reset_ms, r.describe())
                           for r in await system.retention_resets(config.name)
                           if r.stream == stream.stream]
        finally:
            if system is not meta:
                await system.close()
    tasks = []
    total_lag = 0
    for task in state.model.ordered_tasks():
        checkpoint = checkpoints.get(task.name)
        done = checkpoint.inputs if checkpoint else {}
        held = task.held_behind_barrier(done)
        ssps = []
        by_stream: dict[str, int] = {}
        for ssp in sorted(task.ssps | task.broadcast):
            end = ends.get(tuple(ssp), 0)  # type: ignore[arg-type]
            position = done.get(ssp)
            ahead = position is not None and position > end  # the input was recreated
            first = oldest.get(tuple(ssp), 0)  # type: ignore[arg-type]
            lag = 0 if ahead else end - max(position or 0, first)
            total_lag += lag
            qualified = f"{ssp.system}.{ssp.stream}"
            by_stream[qualified] = by_stream.get(qualified, 0) + lag
            ssps.append(SspRow((ssp.system, ssp.stream, ssp.partition), position, end, lag,
                               ssp in held, ahead))
        tasks.append(TaskRow(task.name, task.worker, len(task.stages),
                             len(task.stages) - task.pending_stages(done),
                             task.changelog_partition, ssps, by_stream))
    metrics = _live(endpoints(state, config.metrics.bind), state, running)
    metrics.file_sd = str(targets_dir(config.state_dir) / "*.json")
    rates = await scrape_rates(list(metrics.workers.values()))
    for row in tasks:
        row.rate = rates.get(row.task)
    hosts, task_hosts = hosts_status(state, tasks)
    return JobFigures(
        epoch=state.model.epoch, reason=state.model.reason,
        partition_counts=dict(state.model.partition_counts), stream_partition_counts=counts,
        held_inputs=sorted(state.model.holds), workers=state.model.workers,
        expansions=expansions(state), restoring=restoring(state), metrics=metrics,
        worker_reports={str(k): v for k, v in sorted(state.workers.items())},
        total_lag=total_lag, tasks=tasks, hosts=hosts, task_hosts=task_hosts,
        retention_resets=sorted(resets, key=lambda r: (r.reset_ms, r.stream, r.partition)),
        idle_workers=state.model.idle_workers(),
        idle_message=state.model.idle_workers_message())


def _live(found: Endpoints, state: CoordinatorState, running: bool) -> Endpoints:
    """``found`` without the endpoints of processes that stopped: the coordinator's while
    it is not running, a worker's once its process is gone (checked by pid on this
    machine; elsewhere by its stop report and its host's state)."""
    here = socket.gethostname()
    machines = {w: host.machine for host in state.hosts.values() for w in host.workers}
    gone_hosts = {w for host in state.hosts.values() if host.state != "running"
                  for w in host.workers}
    workers = {}
    for worker, url in found.workers.items():
        number = int(worker)
        progress = state.progress.get(number)
        report = state.workers.get(number)
        machine = machines.get(number, state.status.coordinator_host or here)
        if progress is None or number in gone_hosts:
            continue
        if machine == here and not pid_alive(progress.pid):
            continue
        if report is not None and report.pid == progress.pid and report.stopped_ms:
            continue
        if machine != here and not running:
            continue
        workers[worker] = url
    hosts = {name: url for name, url in found.hosts.items()
             if (host := state.hosts[name]).state == "running"
             and (host.machine != here or pid_alive(host.pid))}
    return Endpoints(found.coordinator if running else None, workers, found.file_sd, hosts)


def _this_machines_run(config: JobConfig, pid: int | None = None) -> RunRecord | None:
    """The run file of a coordinator of this job running on this machine (with ``pid``
    when given), else None."""
    run = read_run_file(run_file(config.state_dir))
    if run is None or run.state != "running" or run.host != socket.gethostname():
        return None
    if (pid is not None and run.pid != pid) or not pid_alive(run.pid):
        return None
    return run


def _outages(config: JobConfig, state: CoordinatorState, recorded: list[Unreachable]
             ) -> list[Unreachable]:
    """Systems the coordinator cannot reach: its run file is newer than the stream when
    it runs here (it is written even while the metadata system does not answer)."""
    if state.status.state != "running":
        return []
    run = _this_machines_run(config, state.status.coordinator_pid)
    return list(recorded) if run is None else list(run.unreachable)


def _with_health(status: JobStatus) -> JobStatus:
    status.health = assess(status)
    return status


def unreachable_status(config: JobConfig, error: SystemUnavailableError) -> JobStatus:
    """The status while the metadata system does not answer this command: from the run
    file of the job's coordinator on this machine; the error again when none runs here."""
    run = _this_machines_run(config)
    ended = read_run_file(run_file(config.state_dir))
    if run is None and ended is not None and ended.state == "failed" and (
            ended.host == socket.gethostname()):
        return _with_health(JobStatus(  # e.g. stopped by coordinator.max_unreachable_ms
            config.name, "failed", "failed", None, error=ended.error,
            local_run=LocalRun(ended.pid, ended.host, ended.started_ms)))
    if run is None:
        raise SystemUnavailableError(
            f"{error}; no coordinator of job {config.name!r} runs on this machine, so its "
            f"state is unknown") from None
    outages = list(run.unreachable)
    if not any(o.system == config.metadata_system for o in outages):
        now = int(time.time() * 1000)
        outages.append(Unreachable(config.metadata_system, now, str(error), now))
    return _with_health(JobStatus(
        config.name, "running", None, None, unreachable=outages,
        local_run=LocalRun(run.pid, run.host, run.started_ms)))


def not_started_status(config: JobConfig, error: JobNotStartedError) -> JobStatus:
    """The status of a job never started: not running, and what to run."""
    return _with_health(JobStatus(config.name, "not started", None, str(error)))


def _clock(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def read_status(config: JobConfig) -> JobStatus:
    """`collect_status`, or the partial status of a job never started or whose metadata
    system does not answer."""
    try:
        return asyncio.run(collect_status(config))
    except JobNotStartedError as error:
        return not_started_status(config, error)
    except DamagedLogError:
        raise  # no run file makes a damaged log readable: the error says what to do
    except SystemUnavailableError as error:
        return unreachable_status(config, error)


def _command(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    if args.watch:
        from framework.commands.status_view import watch

        return watch(lambda: read_status(config), args.interval)
    status = read_status(config)
    if args.json:
        print(json.dumps(status.to_json(), indent=2, sort_keys=True))
    else:
        print_status(status, sys.stdout)
    return status.exit_status
