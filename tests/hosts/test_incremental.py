"""Incremental rebalancing on real Apache Kafka: 3 hosts (2 workers each) over 8 tasks under
steady input; a fourth host joins (warmups, probing rebalances, then tasks move to it),
one host leaves with SIGTERM, then one is SIGKILLed with its workers (a failover). No
worker process of a host that stays is restarted (same pids throughout), tasks move only
once let go, and every output record is checked: one per input record with its running
sum, in order per key, at-least-once replays only. The same on tansu, and with eager
rebalances, at 1 worker per host."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hostjobs import (
    Hosts,
    SteadyInput,
    every_output,
    outputs_job,
    outputs_of,
    state,
    wait_for,
)
from jobs.harness import CLI
from jobs.outputs import Workload, replay_problems

from framework.drill.hosts import settled
from framework.metadata import CoordinatorState

TASKS = 8


def _pids(current: CoordinatorState, names: str) -> dict[int, int]:
    """Worker id → pid of the workers of hosts ``names``."""
    return {w: current.workers[w].pid for h in names for w in current.hosts[h].workers}


def _without(hosts: Hosts, names: str, before: CoordinatorState, pids: dict[int, int],
             incremental: bool) -> CoordinatorState:
    """Once a host left or failed: the state settled on hosts ``names`` after ``before``,
    every task active on one of them, and (incremental) their workers' pids unchanged."""
    after = wait_for(lambda: (s := settled(state(hosts.config), set(names),
                                          before.model.epoch if before.model else 0)) and s,
                     120, f"every task on hosts {', '.join(names)}", hosts)
    assert (_pids(after, names) == pids) == incremental or _dropped(hosts)
    assert sorted(t for h in names for t in after.hosts[h].active) == sorted(
        after.model.tasks if after.model else ())
    return after


def _dropped(hosts: Hosts) -> bool:
    """Whether the group dropped a host whose session expired (it rejoins as new: a
    failover, whose workers restart by design); its answers no longer hold heartbeats back
    (tests/hosts/test_membership_heartbeats.py), a starved or paused process still can."""
    return any("group member was dropped" in hosts.log(h) for h in hosts.processes)


@pytest.mark.parametrize(("broker", "rebalances", "workers"), [
    ("kafka_broker", "incremental", 2), ("tansu_broker", "incremental", 1),
    ("kafka_broker", "eager", 1)])
def test_a_host_joining_and_one_leaving_restart_no_worker_of_the_hosts_that_stay(
        broker: str, rebalances: str, workers: int, request: pytest.FixtureRequest,
        tmp_path: Path) -> None:
    """On Apache Kafka and on tansu (whose group coordinator differs: docs/hosts.md); eager
    rebalances restart every worker, with every output as exact. (Two workers per host on
    Apache Kafka; one elsewhere, with a session timeout of 6 s as in test_failover.py —
    tansu holds a JoinGroup up to half of it — which holds the suite's time down.)"""
    bootstrap = request.getfixturevalue(broker).bootstrap
    name = f"inc-{broker[0]}-{rebalances[0]}-{os.getpid()}"
    hosts = Hosts(outputs_job(tmp_path / "job", bootstrap, name, tasks=TASKS,
                              rebalances=rebalances, workers=workers,
                              session_timeout_ms=10000 if workers > 1 else 6000), tmp_path)
    incremental = rebalances == "incremental"
    config = hosts.config
    work = Workload(keys=40, stream=f"{name}-in")
    with hosts.logs_kept_on_failure("incremental"):
        for host in "abc":
            hosts.start(host)
        three = wait_for(lambda: settled(state(config), set("abc")), 120, "3 hosts", hosts)
        pids = _pids(three, "abc")
        assert len(pids) == 3 * workers
        with SteadyInput(config, work):
            wait_for(lambda: work.count > 500, 60, "input flowing", hosts)
            hosts.start("d")
            joined = wait_for(lambda: (s := settled(state(config), set("abcd"))) and
                              s.hosts["d"].active and s, 180, "d taking tasks", hosts)
            # let go in place — unless the group dropped a host (its session expired on a
            # starved machine): that is a failover, whose workers restart by design
            assert (_pids(joined, "abc") == pids) == incremental or _dropped(hosts)
            # d's last move: tasks move to d as its warmups catch up (two at a time).
            moved = joined.hosts["d"].gained
            assert moved and set(moved) <= set(joined.hosts["d"].active)
            assert set(moved.values()) <= set("abc")
            unavailable = set(joined.hosts["d"].unavailable_ms)  # eager: every task stopped
            assert unavailable == set(moved) if incremental else set(moved) <= unavailable
            # Each moved task was parked by a model of its own before d ran it.
            log = hosts.log("d")
            assert bool(re.search(r"took job model epoch \d+ in place \(was \d+\) in \d+ "
                                  r"ms \([^)]*\): (task Partition \d+ added(, )?)+",
                                  log)) == incremental
            staying = _pids(joined, "abd")
            assert hosts.terminate("c") == 0  # commits, then leaves the group
            left = _without(hosts, "abd", joined, staying, incremental)
            surviving = _pids(left, "ad")
            hosts.kill("b")  # host and workers at once: dropped after its session timeout
            _without(hosts, "ad", left, surviving, incremental)
        wait_for(lambda: every_output(config, work), 120, "an output for every record", hosts)
        problems = replay_problems(outputs_of(config), work)
        assert problems == [], problems[:10]
        text = subprocess.run([*CLI, "status", str(hosts.path)], check=True,
                              capture_output=True, text=True).stdout
        assert re.search(r"last rebalance \(epoch \d+\): gained", text) and (
            "tasks unavailable in the last rebalance: " in text), text
        for label in "abd":
            assert ("stopping workers" not in hosts.log(label)) == incremental or _dropped(
                hosts)
