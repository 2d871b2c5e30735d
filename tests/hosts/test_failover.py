"""A job on 3 hosts, on Apache Kafka and on tansu: a host SIGKILLed mid-run fails over with
exact results; with standbys the takeover restores only the standby's gap, without them all
of it; a new empty host warms up before it gets active tasks; a duplicate host name is
refused. (Standbys are tested on Apache Kafka only; on tansu, the failover without them and
the warmups of tests/hosts/test_incremental.py cover its group protocol.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from hostjobs import (
    Hosts,
    checkpointed,
    every_output,
    first_settled,
    outputs_job,
    outputs_of,
    state,
    wait_for,
    write_records,
)
from jobs.harness import CLI
from jobs.outputs import Workload, replay_problems

from framework.drill.hosts import settled
from framework.metadata import CoordinatorState, HostReport

KEYS = 60


def _settled(hosts: Hosts, names: set[str], after_epoch: int = 0) -> CoordinatorState | None:
    """The job state once the latest model (newer than ``after_epoch``) places tasks on
    exactly ``names`` and each of them reports it resumed that epoch."""
    return settled(state(hosts.config), names, after_epoch)


def _hosts(tmp_path: Path, bootstrap: str, standbys: int) -> tuple[Hosts, Workload]:
    """tests/jobs' sum job (an output per record) on 6 partitions, 1 worker per host,
    session timeout 6 s, warmups for any lag; and the workload of its input."""
    name = f"fo{standbys}-{os.getpid()}"
    path = outputs_job(tmp_path / "job", bootstrap, name, tasks=6, workers=1,
                       standbys=standbys, session_timeout_ms=6000, recovery_lag=0)
    return Hosts(path, tmp_path), Workload(keys=KEYS, stream=f"{name}-in")


def _exact(hosts: Hosts, work: Workload, what: str) -> None:
    """Wait for an output of every record written; check every output (one per record
    with its running sum, in order per key, at-least-once replays only)."""
    config = hosts.config
    wait_for(lambda: every_output(config, work), 60, what, hosts)
    found = outputs_of(config)
    assert len(found) == KEYS  # no key missing
    problems = replay_problems(found, work)
    assert problems == [], problems[:10]


def _run_and_kill(hosts: Hosts, work: Workload
                  ) -> tuple[list[str], dict[str, HostReport], int]:
    """3 hosts; 3,000 records processed; 3,000 more, and host b killed while they run.
    Returns the tasks the failover moved (b's among them), the survivors' reports after
    it and its epoch."""
    standbys = hosts.config.standby_replicas
    for host in "abc":
        hosts.start(host)
    config = hosts.config
    # each host runs tasks (they move to b and c once their warmups caught up)
    before = wait_for(lambda: (s := _settled(hosts, {"a", "b", "c"})) and all(
        s.hosts[h].active for h in "abc") and s, 90, "3 hosts running tasks", hosts)
    assert before.model is not None
    assert sorted(t for r in before.hosts.values() for t in r.active) == sorted(
        before.model.tasks)  # every task active on exactly one host
    write_records(config, work, 3000)
    _exact(hosts, work, "the first 3,000 records")
    # ... and checkpointed: a task whose host dies before its first commit has nothing to
    # restore (its inputs are read again from the start), which would say nothing here
    wait_for(lambda: sum(p for inputs in checkpointed(config).values()
                         for p in inputs.values()) == 3000, 60,
             "the first 3,000 records checkpointed", hosts)
    if standbys:  # the standbys caught up with every checkpoint
        wait_for(lambda: all(not any(r.replica_gaps.values()) for r in
                             state(config).hosts.values()), 30, "standbys current", hosts)
    running = state(config)
    assert running.model is not None
    killed = list(running.hosts["b"].active)
    pids = {w: running.workers[w].pid for h in "ac" for w in running.hosts[h].workers}
    write_records(config, work, 3000)
    hosts.kill("b")
    # the reports as the failover left them: a probing rebalance may have moved on since
    after = wait_for(lambda: first_settled(config, {"a", "c"}, running.model.epoch), 90,
                     "failover to a and c", hosts)
    assert after.model is not None
    _exact(hosts, work, "all 6,000 records")
    survivors = {n: after.hosts[n] for n in "ac"}
    # Incremental: the survivors' workers took b's tasks in place (same processes), and
    # only the tasks they gained stood still.
    assert {w: after.workers[w].pid for w in pids} == pids
    # What the failover moved, and how long each task stood still: b's tasks (read before
    # the kill), and any task a rebalance was handing over when b died (from the host
    # releasing it). A survivor the failover moved nothing to or from still shows its
    # last move, of an earlier rebalance (`moved_epoch`): left out here.
    failover = {n: r for n, r in survivors.items()
                if r.moved_epoch is not None and r.moved_epoch > running.model.epoch}
    moved = {t: h for r in failover.values() for t, h in r.gained.items()}
    assert set(killed) <= {t for t, h in moved.items() if h == "b"}, survivors
    assert set(moved.values()) <= {"a", "b", "c"}
    for name, report in survivors.items():
        if name in failover:  # it lost only what the other gained from it (a warmup's
            assert set(report.lost) <= {  # move in flight)
                t for t, h in moved.items() if h == name}, survivors
        else:
            assert not set(report.active) & set(killed), survivors
        assert set(report.unavailable_ms) == set(report.gained)
        # a task that stayed (added in place in an earlier epoch, maybe by a delta
        # restore) restored nothing at this one
        stayed = set(report.active) - set(report.gained)
        assert {t: report.restored[t] for t in stayed} == dict.fromkeys(stayed, 0)
    return sorted(moved), survivors, after.model.epoch


def _moved(reports: dict[str, HostReport], tasks: list[str]) -> dict[str, HostReport]:
    owner = {t: r for r in reports.values() for t in r.active}
    assert set(tasks) <= set(owner), f"tasks {tasks} not all active on a survivor"
    return {t: owner[t] for t in tasks}


BROKERS = pytest.mark.parametrize("broker", ["kafka_broker", "tansu_broker"])


@pytest.mark.parametrize("broker", ["kafka_broker"])
def test_failover_with_standbys_restores_only_the_gap_then_a_new_host_warms_up(
        broker: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    hosts, work = _hosts(tmp_path, request.getfixturevalue(broker).bootstrap, 1)
    with hosts.logs_kept_on_failure("failover-standbys"):
        killed, reports, epoch = _run_and_kill(hosts, work)
        config = hosts.config
        for task, report in _moved(reports, killed).items():
            assert report.restore_modes[f"{task}/totals"] in ("none", "delta")
            assert report.restored[task] < report.restore_ends[task]  # less than a full one
        # A new empty host joins: warmups (and standbys) first, actives only once caught up.
        hosts.start("d")
        wait_for(lambda: _settled(hosts, {"a", "c", "d"}, epoch), 90, "d joining", hosts)
        # d's first model, from its own log (a probing rebalance may already have followed
        # it by the time the coordinator stream is read): no active task, only copies.
        first = re.search(r"host 'd': epoch (\d+): (\d+) active task\(s\) on workers \[.*?\], "
                          r"(\d+) standby, (\d+) warmup", hosts.log("d"))
        assert first is not None
        first_epoch, active, standby, warmup = map(int, first.groups())
        assert active == 0 and standby + warmup > 0
        # One snapshot for both checks: d's report in it has resumed, so its restores are in.
        done = wait_for(lambda: first_settled(config, {"a", "c", "d"}, first_epoch,
                                              lambda s: s.hosts["d"].active),
                        90, "d taking tasks", hosts)
        for task in done.hosts["d"].active:  # caught up before it moved: nothing to restore
            assert done.hosts["d"].restored[task] == 0
            assert done.hosts["d"].restore_modes[f"{task}/totals"] == "none"
        write_records(config, work, 600)
        _exact(hosts, work, "600 more records")
        _check_status(hosts)
        _no_rebalance_wait_bound_hit(hosts)


def _no_rebalance_wait_bound_hit(hosts: Hosts) -> None:
    """Every rebalance of the run ended within coordinator.max_rebalance_wait_ms."""
    for label in hosts.processes:
        assert "giving up its group member" not in hosts.log(label), label


def _check_status(hosts: Hosts) -> None:
    """`sampan status --json` lists the hosts and where each task runs, as the model says."""
    model = state(hosts.config).model
    assert model is not None
    shown = json.loads(subprocess.run([*CLI, "status", str(hosts.path), "--json"], check=True,
                                      capture_output=True, text=True).stdout)
    assert set(shown["hosts"]) == {"a", "b", "c", "d"}
    assert shown["hosts"]["b"]["in_model"] is False
    assert {t: r["active"] for t, r in shown["task_hosts"].items()} == {
        t: model.host_of(t) for t in model.tasks}
    assert {t: r["standby"] for t, r in shown["task_hosts"].items() if r["standby"]} == {
        t: list(h) for t, h in model.standbys.items()}
    assert all(r["input_lag"] == 0 for r in shown["task_hosts"].values())
    text = subprocess.run([*CLI, "status", str(hosts.path)], check=True, capture_output=True,
                          text=True).stdout
    assert "host d: running" in text and "standby" in text
    assert re.search(r"host d: running.*\n    last rebalance \(epoch \d+\): gained Partition \d+ "
                     r"\(from [ac]\)",
                     text), text
    assert "tasks unavailable in the last rebalance: " in text


@BROKERS
def test_failover_without_standbys_restores_fully_then_sigterm_leaves_at_once(
        broker: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    hosts, work = _hosts(tmp_path, request.getfixturevalue(broker).bootstrap, 0)
    with hosts.logs_kept_on_failure("failover-no-standbys"):
        killed, reports, epoch = _run_and_kill(hosts, work)
        config = hosts.config
        for task, report in _moved(reports, killed).items():
            # no standby: a full restore, or one from a copy the survivor kept of the task
            # when it ran it before (a host that started first runs every task): the
            # records written since (delta), or none when it is still current
            mode = report.restore_modes[f"{task}/totals"]
            restored, end = report.restored[task], report.restore_ends[task]
            assert restored <= end
            assert (mode, restored == end, restored == 0) in (
                ("full", True, False), ("delta", False, False), ("delta", True, False),
                ("none", False, True))  # a delta from an empty copy restores it all

        # Two more hosts named "a", started at once (each process's start is seconds).
        # From a settled model without warmups: no follow-up or probing rebalance pending,
        # so the next two models are those of the second one's join and of its LeaveGroup.
        before = wait_for(lambda: (s := _settled(hosts, {"a", "c"})) and s.model and not (
            s.model.warmups) and s, 60, "a and c settled, no warmup", hosts).model.epoch
        running = hosts.processes["a"].pid
        same_folder = hosts.start("a", label="a-same-folder", data="a")
        other_folder = hosts.start("a", label="a-elsewhere")
        # One on this machine and a's state folder: refused by a's lock file before it
        # opens a store or joins the group.
        assert same_folder.wait(60) == 2
        local = hosts.log("a-same-folder")
        assert f"host 'a' of job {config.name!r} already runs on this machine (pid " \
            f"{running})" in local and "give this host another --host name" in local
        assert "joined group" not in local and "cannot read local copy" not in local
        # One elsewhere (its own state folder): refused by the group's leader.
        assert other_folder.wait(60) == 2
        elsewhere = hosts.log("a-elsewhere")
        assert f"already has a host named 'a' (pid {running} on machine" in elsewhere
        assert "give this host another --host name" in elsewhere
        # Its join started a round (which refused it) and its LeaveGroup another. SIGTERM c
        # only once that second round ended: a host stopped inside a round it leads sends
        # no LeaveGroup (tansu would strand the others) and is dropped after the session
        # timeout instead, whereas this checks the LeaveGroup of a host stopped between
        # rounds (docs/hosts.md, "Failover and leaving"; tests/hosts/test_leader_departure.py).
        # The join's model may be published after the LeaveGroup (the leader builds it
        # after its round): wait for both models.
        wait_for(lambda: _settled(hosts, {"a", "c"}, before + 1),
                 60, "the round after the refused duplicate left", hosts)

        moved = list(state(config).hosts["c"].active)
        assert hosts.terminate("c") == 0  # workers committed, then it left the group
        after = wait_for(lambda: _settled(hosts, {"a"}, epoch), 60, "c's tasks on a", hosts)
        assert after.model is not None
        assert set(moved) <= set(after.hosts["a"].active)
        stopped = after.hosts["c"]
        assert stopped.state == "stopped" and stopped.updated_ms is not None
        assert "left the group of job" in hosts.log("c")  # LeaveGroup: no session timeout
        taken = after.hosts["a"]
        assert {t: taken.gained[t] for t in moved} == dict.fromkeys(moved, "c")
        assert stopped.revoked_ms is not None  # c's stop: where the moved tasks' pause starts
        for task in moved:
            resumed = after.workers[after.model.tasks[task].worker].resumed_ms
            assert resumed is not None
            assert taken.unavailable_ms[task] == resumed - stopped.revoked_ms
        print(f"SIGTERM → next model: {after.model.created_ms - stopped.updated_ms} ms "
              f"(session timeout {config.coordinator.session_timeout_ms} ms)")
        write_records(config, work, 600)
        _exact(hosts, work, "600 more records")
        _no_rebalance_wait_bound_hit(hosts)
