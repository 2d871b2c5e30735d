"""The several-hosts part of `sampan status`: hosts, what each runs, gaps and lag."""

from __future__ import annotations

import socket
from typing import Any, TextIO

from framework.coordinator.lease import pid_alive
from framework.metadata import CoordinatorState

__all__ = ["hosts_state", "hosts_status", "print_hosts"]


def hosts_state(state: CoordinatorState) -> tuple[str, str | None]:
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


def hosts_status(state: CoordinatorState, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"hosts": …, "task_hosts": …}`` for a job on several hosts, else ``{}``.

    ``tasks`` are `collect_status`'s task rows (their SSP lags are summed per task).
    """
    model = state.model
    if model is None or not model.hosts:
        return {}
    hosts = {}
    for name, report in sorted(state.hosts.items()):
        row = report.to_dict()
        row["in_model"] = name in model.hosts
        hosts[name] = row
    lag = {row["task"]: sum(s["lag"] for s in row["ssps"]) for row in tasks}
    task_hosts = {
        task: {"active": model.host_of(task), "standby": list(model.standbys.get(task, ())),
               "warmup": list(model.warmups.get(task, ())), "input_lag": lag.get(task, 0)}
        for task in sorted(model.tasks)}
    return {"hosts": hosts, "task_hosts": task_hosts}


def print_hosts(status: dict[str, Any], out: TextIO) -> None:
    """The human-readable lines of `hosts_status` (nothing for a one-host job)."""
    if "hosts" not in status:
        return
    for name, host in status["hosts"].items():
        if not host["in_model"] and host["state"] != "running":
            print(f"  host {name}: {host['state']} (pid {host['pid']} on {host['machine']})",
                  file=out)
            continue
        leader = ", leader" if host["leader"] else ""
        print(f"  host {name}: {host['state']} at epoch {host['epoch']}{leader} (pid "
              f"{host['pid']} on {host['machine']}, workers {host['workers']})", file=out)
        for task in host["active"]:
            mode = ",".join(sorted({m for k, m in host["restore_modes"].items()
                                    if k.startswith(f"{task}/")})) or "pending"
            lag = status["task_hosts"].get(task, {}).get("input_lag", "?")
            print(f"    active  {task}: input lag {lag}, restored "
                  f"{host['restored'].get(task, '-')} ({mode})", file=out)
        for kind in ("standby", "warmup"):
            for task in host[kind]:
                gap = host["replica_gaps"].get(task, "?")
                print(f"    {kind:<7} {task}: restore gap {gap}", file=out)
