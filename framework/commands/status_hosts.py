"""The several-hosts part of `sampan status`: hosts, what each runs, gaps and lag."""

from __future__ import annotations

import socket
from typing import TextIO

from framework.commands.status_document import HostRow, JobFigures, JobState, TaskHosts, TaskRow
from framework.coordinator.lease import pid_alive
from framework.metadata import CoordinatorState

__all__ = ["hosts_state", "hosts_status", "print_hosts"]


def hosts_state(state: CoordinatorState) -> tuple[JobState, str | None]:
    """A job on several hosts as one state: ``running`` while any host of its model runs
    (a host on this machine must also be alive), else ``failed`` when one failed, else
    ``stopped``; with why it is not running."""
    assert state.model is not None
    here = socket.gethostname()
    reports = [r for name, r in state.hosts.items() if name in state.model.hosts]
    if any(r.state == "running" and (r.machine != here or pid_alive(r.pid)) for r in reports):
        return "running", None
    failed = [r for r in reports if r.state == "failed"]
    if failed:
        return "failed", "; ".join(f"host {r.host}: {r.error or 'failed'}" for r in failed)
    return "stopped", "no host of the job runs"


def hosts_status(state: CoordinatorState, tasks: list[TaskRow]
                 ) -> tuple[dict[str, HostRow] | None, dict[str, TaskHosts] | None]:
    """(host → its row, task → its hosts) for a job on several hosts, else (None, None).

    ``tasks`` are `collect_status`'s task rows (their SSP lags are summed per task).
    """
    model = state.model
    if model is None or not model.hosts:
        return None, None
    hosts = {name: HostRow(report, name in model.hosts)
             for name, report in sorted(state.hosts.items())}
    lag = {row.task: sum(s.lag for s in row.ssps) for row in tasks}
    task_hosts = {
        task: TaskHosts(model.host_of(task), list(model.standbys.get(task, ())),
                        list(model.warmups.get(task, ())), lag.get(task, 0))
        for task in sorted(model.tasks)}
    return hosts, task_hosts


def print_hosts(figures: JobFigures, out: TextIO) -> None:
    """The human-readable lines of `hosts_status` (nothing for a one-host job)."""
    if figures.hosts is None or figures.task_hosts is None:
        return
    for name, row in figures.hosts.items():
        host = row.report
        if not row.in_model and host.state != "running":
            phase = f", phase {host.phase}" if host.phase else ""
            print(f"  host {name}: {host.state}{phase} (pid {host.pid} on {host.machine})",
                  file=out)
            continue
        leader = ", leader" if host.leader else ""
        phase = f", phase {host.phase}" if host.phase else ""
        print(f"  host {name}: {host.state} at epoch {host.epoch}{leader}{phase} (pid "
              f"{host.pid} on {host.machine}, workers {host.workers})", file=out)
        moved = [f"{t} (from {h})" if h else t for t, h in sorted(host.gained.items())]
        if moved or host.lost:
            epoch = f" (epoch {host.moved_epoch})" if host.moved_epoch is not None else ""
            print(f"    last rebalance{epoch}: gained {', '.join(moved) or 'none'}; lost "
                  f"{', '.join(host.lost) or 'none'}", file=out)
        if host.unavailable_ms:
            spans = host.unavailable_ms.values()
            print(f"    tasks unavailable in the last rebalance: {min(spans):,}–{max(spans):,} "
                  f"ms (" + ", ".join(f"{t} {ms:,}" for t, ms in host.unavailable_ms.items())
                  + ")", file=out)
        for task in host.active:
            mode = ",".join(sorted({m for k, m in host.restore_modes.items()
                                    if k.startswith(f"{task}/")})) or "pending"
            placed = figures.task_hosts.get(task)
            lag = placed.input_lag if placed is not None else "?"
            print(f"    active  {task}: input lag {lag}, restored "
                  f"{host.restored.get(task, '-')} ({mode})", file=out)
        for kind, tasks in (("standby", host.standby), ("warmup", host.warmup)):
            for task in tasks:
                gap = host.replica_gaps.get(task, "?")
                print(f"    {kind:<7} {task}: restore gap {gap}", file=out)
